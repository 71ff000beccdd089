// Text <-> token ids with a model's own vocabulary: SentencePiece BPE (llama), byte-level BPE
// with the pre-tokenizer regexes of each model family (gpt2), and WordPiece (bert), following
// llama.cpp's algorithms so ids match what llama.cpp produces for the same GGUF.
#pragma once

#include "iwb/engine/status.h"
#include "iwb/engine/tokenizer/vocab.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::gguf {
class GgufFile;
}

namespace iwb::tokenizer {

struct EncodeOptions {
  // Add the tokens the vocabulary asks for around the text: BOS when vocab.add_bos (always the
  // CLS/BOS for WordPiece), EOS when vocab.add_eos, SEP when vocab.add_sep.
  bool add_bos = true;
  // Control tokens written in the text ("<|im_start|>") become single tokens. User-defined
  // tokens are always split out whole, whatever this says (llama.cpp and HF do the same).
  bool parse_special = false;
};

struct DecodeOptions {
  bool render_special = false;       // write control/unknown tokens' text ("</s>") instead of nothing
  bool strip_leading_space = true;   // drop the space an SPM add_space_prefix put before the text
  bool clean_spaces = false;         // apply llama.cpp's " ," -> "," cleanup when the vocab asks for it
};

class TokenizerImpl;

// Immutable after creation; copies share the same tables and may be used from any thread.
class Tokenizer {
 public:
  static Result<Tokenizer> create(Vocab vocab);
  static Result<Tokenizer> from_gguf(const gguf::GgufFile& file);

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options = {}) const;
  // The bytes the ids stand for. Ids that cut a character in half give bytes that are not
  // valid UTF-8 (use StreamingDetokenizer for text shown while generating).
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& options = {}) const;

  // The bytes a token stands for: <0xNN> byte tokens give the byte, SPM's ▁ gives a space,
  // byte-level BPE characters give their bytes. Control and unknown tokens give their text
  // only when render_special is true. Ids out of range give an empty string.
  std::string token_to_piece(TokenId id, bool render_special = false) const;

  bool is_end_of_generation(TokenId id) const;
  bool is_valid(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < num_tokens(); }
  std::optional<TokenId> find_token(std::string_view text) const;  // exact vocabulary entry

  const Vocab& vocab() const;
  size_t num_tokens() const;
  TokenId bos() const { return vocab().special.bos; }
  TokenId eos() const { return vocab().special.eos; }

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : m_impl(std::move(impl)) {}
  std::shared_ptr<const TokenizerImpl> m_impl;
};

}  // namespace iwb::tokenizer
