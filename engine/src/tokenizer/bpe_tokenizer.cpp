// BPE (tokenizer.ggml.model = "gpt2" or "gemma4"): the pre-tokenizer splits the text into words
// and adjacent symbols of each word are merged in the order of tokenizer.ggml.merges (lowest
// rank first) until no listed pair remains. Byte-level families write each word's bytes in
// GPT-2's byte alphabet first; SPM-style ones (Gemma 4) merge raw UTF-8 with spaces as ▁ and
// fall back to <0xNN> byte tokens.
#include "tokenizer/byte_unicode.h"
#include "tokenizer/symbol_merger.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace iwb::tokenizer {
namespace {

// A merge result missing from the vocabulary (usually a character it lacks) falls back to
// smaller tokens; what has none is dropped, as in llama.cpp.
void emit_fallback(const TokenizerImpl& tok, std::string_view text, bool is_byte_level, std::vector<TokenId>* out) {
  if (!is_byte_level) {
    // SPM-style: each byte as its <0xNN> token.
    for (char c : text) {
      const TokenId byte_id = tok.byte_token(static_cast<uint8_t>(c));
      if (byte_id != kNoToken) out->push_back(byte_id);
    }
    return;
  }
  // Byte-level: each character (one byte of the alphabet).
  size_t at = 0;
  while (at < text.size()) {
    const size_t start = at;
    utf8::decode(text, &at);
    const TokenId char_id = tok.find(text.substr(start, at - start));
    if (char_id != kNoToken) out->push_back(char_id);
  }
}

// Merges one pre-tokenized word and emits its tokens.
void encode_word(const TokenizerImpl& tok, std::string_view word, bool is_byte_level, std::string* scratch,
                 std::vector<TokenId>* out) {
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
    } else {
      emit_fallback(tok, text, is_byte_level, out);
    }
  }
}

bool is_newlines_only(std::string_view word) { return word.find_first_not_of('\n') == std::string_view::npos; }

}  // namespace

void bpe_encode(const TokenizerImpl& tok, std::string_view text, std::vector<TokenId>* out) {
  if (!tok.pre_tokenizer || tok.bpe_family == nullptr) return;
  const PreTokenizerFamily& family = *tok.bpe_family;
  // PCRE2 needs valid UTF-8; llama.cpp likewise reads invalid bytes as U+FFFD before splitting.
  std::string clean = utf8::sanitize(text);
  if (!family.is_byte_level) replace_all(&clean, " ", kSpmSpace);
  std::string scratch;
  std::string encoded;
  for (std::string_view word : tok.pre_tokenizer->split(clean)) {
    std::string_view symbols = word;
    if (family.is_byte_level) {
      encoded = bytes_to_unicode_text(word);
      symbols = encoded;
    }
    // llama3-like families take a word that is a whole token as it is; Gemma 4 does the same
    // for runs of newlines only (the merges would split "\n\n\n" otherwise; llama.cpp #21343).
    if (tok.vocab.ignore_merges || (family.keeps_newline_runs && is_newlines_only(symbols))) {
      const TokenId id = tok.find(symbols);
      if (id != kNoToken) {
        out->push_back(id);
        continue;
      }
    }
    encode_word(tok, symbols, family.is_byte_level, &scratch, out);
  }
}

}  // namespace iwb::tokenizer
