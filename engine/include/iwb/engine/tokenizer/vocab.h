// A tokenizer vocabulary as a plain value: the tokens, scores, types and merges of a GGUF's
// tokenizer.ggml.* metadata, plus the settings llama.cpp derives from the tokenizer model and
// pre-tokenizer names. vocab_from_gguf reads and checks it; a Tokenizer is built from it.
#pragma once

#include "iwb/engine/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::gguf {
class GgufFile;
}

namespace iwb::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// tokenizer.ggml.model: "llama" (SentencePiece BPE), "gpt2" (byte-level BPE), "gemma4" (BPE
// over raw UTF-8 with ▁ for spaces: Bpe, told apart by its pre-tokenizer), "bert" (WordPiece).
enum class VocabKind { Spm, Bpe, WordPiece };
std::string_view vocab_kind_name(VocabKind kind);

// The ggml token types stored in tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// Ids of the special tokens; kNoToken where the vocabulary has none.
struct SpecialTokenIds {
  TokenId bos = kNoToken;
  TokenId eos = kNoToken;
  TokenId eot = kNoToken;  // end of turn (<|eot_id|>, <|im_end|>, ...)
  TokenId eom = kNoToken;  // end of message (<|eom_id|>)
  TokenId unk = kNoToken;
  TokenId pad = kNoToken;
  TokenId sep = kNoToken;
  TokenId mask = kNoToken;
  TokenId fim_prefix = kNoToken;
  TokenId fim_suffix = kNoToken;
  TokenId fim_middle = kNoToken;
};

struct Vocab {
  VocabKind kind = VocabKind::Spm;
  std::string model;  // tokenizer.ggml.model as stored
  std::string pre;    // tokenizer.ggml.pre; empty means "default"

  std::vector<std::string> tokens;  // [num_tokens]; id = index
  std::vector<float> scores;        // [num_tokens]; SPM merge priority (0 when absent)
  std::vector<TokenType> types;     // [num_tokens]
  std::vector<std::string> merges;  // BPE only: "left right"; rank = index (lower merges first)

  SpecialTokenIds special;
  // Ids that end generation: eos/eot/eom plus tokens recognised by their text, as llama.cpp does.
  std::vector<TokenId> end_of_generation;
  // Special tokens that swallow whitespace to their left / right when they are split out of text.
  std::vector<TokenId> lstrip_tokens;
  std::vector<TokenId> rstrip_tokens;

  bool add_bos = false;           // tokenizer.ggml.add_bos_token, or the model's default
  bool add_eos = false;           // tokenizer.ggml.add_eos_token
  bool add_sep = false;           // WordPiece: [SEP] after the text
  bool add_space_prefix = false;  // SPM: a space before the text ("Hello" -> "▁Hello")
  bool ignore_merges = false;     // BPE: a pre-token that is a whole token skips merging (llama3)
  bool clean_spaces = false;      // decode cleanup " ," -> "," etc. (applied only on request)
  bool lowercase = false;         // WordPiece normaliser
  bool strip_accents = false;     // WordPiece normaliser

  size_t num_tokens() const { return tokens.size(); }
};

// Reads tokenizer.ggml.* from a GGUF. Errors name the key and the problem: a missing token
// list, arrays whose lengths disagree, special ids out of range, duplicate tokens, and
// ErrorCode::Unsupported for an unknown tokenizer model or pre-tokenizer.
Result<Vocab> vocab_from_gguf(const gguf::GgufFile& file);

// Checks a Vocab built in code or read from a file: array lengths, id ranges, duplicates,
// merges only for BPE, a known pre-tokenizer. Tokenizer::create calls it.
Status validate_vocab(const Vocab& vocab);

}  // namespace iwb::tokenizer
