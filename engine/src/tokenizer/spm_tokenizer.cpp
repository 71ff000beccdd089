// SentencePiece-style BPE (tokenizer.ggml.model = "llama"), llama.cpp's algorithm: start from
// one symbol per UTF-8 character, repeatedly merge the adjacent pair whose concatenation is the
// highest-scoring vocabulary entry, then emit each symbol as its token or as <0xNN> byte tokens.
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/symbol_merger.h"

namespace iwb::tokenizer {
namespace {

// A symbol that is not a token (a character missing from the vocabulary) falls back to its
// bytes as <0xNN> tokens, or to the unknown token when the vocabulary has no bytes.
void emit(const TokenizerImpl& tok, std::string_view text, std::vector<TokenId>* out) {
  const TokenId id = tok.find(text);
  if (id != kNoToken) {
    out->push_back(id);
    return;
  }
  bool is_unknown_pending = false;
  for (char c : text) {
    const TokenId byte_id = tok.byte_token(static_cast<uint8_t>(c));
    if (byte_id != kNoToken) {
      out->push_back(byte_id);
    } else {
      is_unknown_pending = true;
    }
  }
  // One unknown token per missing character, not per byte.
  if (is_unknown_pending && tok.vocab.special.unk != kNoToken) out->push_back(tok.vocab.special.unk);
}

}  // namespace

void spm_encode(const TokenizerImpl& tok, std::string_view text, std::vector<TokenId>* out) {
  // A pair merges when the concatenated piece is in the vocabulary; the best score goes first.
  const auto symbols = merge_symbols(text, [&](std::string_view left, std::string_view right) -> std::optional<double> {
    const TokenId id = tok.find(std::string_view(left.data(), left.size() + right.size()));
    if (id == kNoToken) return std::nullopt;
    return tok.score(id);
  });
  for (const MergeSymbol& sym : symbols) {
    if (sym.length > 0) emit(tok, text.substr(sym.offset, sym.length), out);
  }
}

}  // namespace iwb::tokenizer
