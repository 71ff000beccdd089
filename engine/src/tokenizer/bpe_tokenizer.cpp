// Byte-level BPE (tokenizer.ggml.model = "gpt2"): the pre-tokenizer splits the text into words,
// each word's bytes are written in GPT-2's byte alphabet, and adjacent symbols are merged in
// the order of tokenizer.ggml.merges (lowest rank first) until no listed pair remains.
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

#include <queue>

namespace iwb::tokenizer {
namespace {

struct Symbol {
  int prev = -1;
  int next = -1;
  size_t offset = 0;
  size_t length = 0;  // 0 once merged into its left neighbour
};

struct Bigram {
  int left = 0;
  int right = 0;
  int rank = 0;
  size_t length = 0;  // merged length when queued; a mismatch later means the bigram is stale
};

// Lowest rank first; on equal ranks the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class BpeWord {
 public:
  BpeWord(const TokenizerImpl& tok, std::string_view word, std::string* scratch)
      : m_tok(tok), m_word(word), m_scratch(scratch) {}

  void run(std::vector<TokenId>* out) {
    size_t offset = 0;
    while (offset < m_word.size()) {
      Symbol sym;
      sym.offset = offset;
      sym.length = std::min(utf8::sequence_length(static_cast<unsigned char>(m_word[offset])),
                            m_word.size() - offset);
      offset += sym.length;
      sym.prev = static_cast<int>(m_symbols.size()) - 1;
      sym.next = offset == m_word.size() ? -1 : static_cast<int>(m_symbols.size()) + 1;
      m_symbols.push_back(sym);
    }
    for (int i = 1; i < static_cast<int>(m_symbols.size()); ++i) add_bigram(i - 1, i);

    while (!m_queue.empty()) {
      const Bigram bigram = m_queue.top();
      m_queue.pop();
      Symbol& left = m_symbols[static_cast<size_t>(bigram.left)];
      Symbol& right = m_symbols[static_cast<size_t>(bigram.right)];
      // Symbols only grow, so equal lengths mean neither side changed since queueing.
      if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) continue;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) m_symbols[static_cast<size_t>(right.next)].prev = bigram.left;
      add_bigram(left.prev, bigram.left);
      add_bigram(bigram.left, left.next);
    }

    for (const Symbol& sym : m_symbols) {
      if (sym.length == 0) continue;
      const std::string_view text = m_word.substr(sym.offset, sym.length);
      const TokenId id = m_tok.find(text);
      if (id != kNoToken) {
        out->push_back(id);
        continue;
      }
      // A merge result missing from the vocabulary: fall back to its characters (each one
      // byte of the alphabet); characters the vocabulary lacks are dropped, as in llama.cpp.
      size_t at = 0;
      while (at < text.size()) {
        const size_t start = at;
        utf8::decode(text, &at);
        const TokenId char_id = m_tok.find(text.substr(start, at - start));
        if (char_id != kNoToken) out->push_back(char_id);
      }
    }
  }

 private:
  void add_bigram(int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = m_symbols[static_cast<size_t>(left)];
    const Symbol& r = m_symbols[static_cast<size_t>(right)];
    const int rank = m_tok.merge_rank(m_word.substr(l.offset, l.length), m_word.substr(r.offset, r.length), m_scratch);
    if (rank < 0) return;
    m_queue.push({left, right, rank, l.length + r.length});
  }

  const TokenizerImpl& m_tok;
  std::string_view m_word;
  std::string* m_scratch;
  std::vector<Symbol> m_symbols;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> m_queue;
};

}  // namespace

void bpe_encode(const TokenizerImpl& tok, std::string_view text, std::vector<TokenId>* out) {
  if (!tok.pre_tokenizer) return;
  // PCRE2 needs valid UTF-8; llama.cpp likewise reads invalid bytes as U+FFFD before splitting.
  const std::string clean = utf8::sanitize(text);
  std::string scratch;
  std::string encoded;
  for (std::string_view word : tok.pre_tokenizer->split(clean)) {
    encoded = bytes_to_unicode_text(word);
    if (tok.vocab.ignore_merges) {
      const TokenId id = tok.find(encoded);
      if (id != kNoToken) {
        out->push_back(id);
        continue;
      }
    }
    BpeWord(tok, encoded, &scratch).run(out);
  }
}

}  // namespace iwb::tokenizer
