// SentencePiece-style BPE (tokenizer.ggml.model = "llama"), llama.cpp's algorithm: start from
// one symbol per UTF-8 character, repeatedly merge the adjacent pair whose concatenation is the
// highest-scoring vocabulary entry, then emit each symbol as its token or as <0xNN> byte tokens.
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

#include <queue>

namespace iwb::tokenizer {
namespace {

struct Symbol {
  int prev = -1;
  int next = -1;
  size_t offset = 0;  // into the fragment text
  size_t length = 0;  // 0 once merged into the symbol on its left
};

struct Bigram {
  int left = 0;
  int right = 0;
  float score = 0.0f;
  size_t length = 0;  // bytes of the merged text, to spot bigrams made stale by other merges
};

// Highest score first; on equal scores the leftmost pair first (llama.cpp's order).
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const TokenizerImpl& tok, std::string_view text) : m_tok(tok), m_text(text) {}

  void run(std::vector<TokenId>* out) {
    size_t offset = 0;
    while (offset < m_text.size()) {
      Symbol sym;
      sym.offset = offset;
      sym.length = std::min(utf8::sequence_length(static_cast<unsigned char>(m_text[offset])),
                            m_text.size() - offset);
      offset += sym.length;
      sym.prev = static_cast<int>(m_symbols.size()) - 1;
      sym.next = offset == m_text.size() ? -1 : static_cast<int>(m_symbols.size()) + 1;
      m_symbols.push_back(sym);
    }
    for (int i = 1; i < static_cast<int>(m_symbols.size()); ++i) try_add_bigram(i - 1, i);

    while (!m_queue.empty()) {
      const Bigram bigram = m_queue.top();
      m_queue.pop();
      Symbol& left = m_symbols[static_cast<size_t>(bigram.left)];
      Symbol& right = m_symbols[static_cast<size_t>(bigram.right)];
      if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) continue;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) m_symbols[static_cast<size_t>(right.next)].prev = bigram.left;
      try_add_bigram(left.prev, bigram.left);
      try_add_bigram(bigram.left, left.next);
    }

    if (m_symbols.empty()) return;
    for (int i = 0; i != -1; i = m_symbols[static_cast<size_t>(i)].next) emit(m_symbols[static_cast<size_t>(i)], out);
  }

 private:
  void try_add_bigram(int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = m_symbols[static_cast<size_t>(left)];
    const Symbol& r = m_symbols[static_cast<size_t>(right)];
    const std::string_view merged = m_text.substr(l.offset, l.length + r.length);
    const TokenId id = m_tok.find(merged);
    if (id == kNoToken) return;
    m_queue.push({left, right, m_tok.score(id), merged.size()});
  }

  // A symbol that is not a token (a character missing from the vocabulary) falls back to
  // its bytes as <0xNN> tokens, or to the unknown token when the vocabulary has no bytes.
  void emit(const Symbol& sym, std::vector<TokenId>* out) const {
    const std::string_view text = m_text.substr(sym.offset, sym.length);
    const TokenId id = m_tok.find(text);
    if (id != kNoToken) {
      out->push_back(id);
      return;
    }
    bool is_unknown_pending = false;
    for (char c : text) {
      const TokenId byte_id = m_tok.byte_token(static_cast<uint8_t>(c));
      if (byte_id != kNoToken) {
        out->push_back(byte_id);
      } else {
        is_unknown_pending = true;
      }
    }
    // One unknown token per missing character, not per byte.
    if (is_unknown_pending && m_tok.vocab.special.unk != kNoToken) out->push_back(m_tok.vocab.special.unk);
  }

  const TokenizerImpl& m_tok;
  std::string_view m_text;
  std::vector<Symbol> m_symbols;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> m_queue;
};

}  // namespace

void spm_encode(const TokenizerImpl& tok, std::string_view text, std::vector<TokenId>* out) {
  SpmSession session(tok, text);
  session.run(out);
}

}  // namespace iwb::tokenizer
