// Byte-level BPE (tokenizer.ggml.model = "gpt2"): the pre-tokenizer splits the text into words,
// each word's bytes are written in GPT-2's byte alphabet, and adjacent symbols are merged in
// the order of tokenizer.ggml.merges (lowest rank first) until no listed pair remains.
#include "tokenizer/byte_unicode.h"
#include "tokenizer/symbol_merger.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace iwb::tokenizer {
namespace {

// Merges one pre-tokenized word (in the byte alphabet) and emits its tokens.
void encode_word(const TokenizerImpl& tok, std::string_view word, std::string* scratch, std::vector<TokenId>* out) {
  // Lower merge ranks apply first, hence the negated rank as the priority.
  const auto symbols = merge_symbols(word, [&](std::string_view left, std::string_view right) -> std::optional<double> {
    const int rank = tok.merge_rank(left, right, scratch);
    if (rank < 0) return std::nullopt;
    return -static_cast<double>(rank);
  });
  for (const MergeSymbol& sym : symbols) {
    if (sym.length == 0) continue;
    const std::string_view text = word.substr(sym.offset, sym.length);
    const TokenId id = tok.find(text);
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
      const TokenId char_id = tok.find(text.substr(start, at - start));
      if (char_id != kNoToken) out->push_back(char_id);
    }
  }
}

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
    encode_word(tok, encoded, &scratch, out);
  }
}

}  // namespace iwb::tokenizer
