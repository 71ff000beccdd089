// The tables a Tokenizer shares between its copies, built once from a Vocab: text -> id,
// merge ranks, byte fallback ids, the special-token list and decoded pieces; plus the
// per-algorithm encoders that read them.
#pragma once

#include "iwb/engine/tokenizer/tokenizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/pretokenizer_table.h"
#include "tokenizer/special_tokens.h"

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace iwb::tokenizer {

// Lets unordered_map<std::string, ...> be searched with a string_view without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

class TokenizerImpl {
 public:
  static Result<std::shared_ptr<const TokenizerImpl>> build(Vocab vocab);

  TokenId find(std::string_view text) const {
    auto it = m_token_to_id.find(text);
    return it == m_token_to_id.end() ? kNoToken : it->second;
  }
  // Rank of merging `left` + `right` (lower merges first); -1 when the pair is no merge.
  // `scratch` is reused between calls to avoid allocating the key each time.
  int merge_rank(std::string_view left, std::string_view right, std::string* scratch) const;
  // SPM: the <0xNN> token for a byte (or the byte itself as a token); SPM-style BPE: the
  // <0xNN> token; byte-level BPE: the byte's alphabet character. kNoToken if none.
  TokenId byte_token(uint8_t byte) const { return m_byte_tokens[byte]; }
  float score(TokenId id) const { return vocab.scores.empty() ? 0.0f : vocab.scores[static_cast<size_t>(id)]; }
  TokenType type(TokenId id) const { return vocab.types[static_cast<size_t>(id)]; }

  Vocab vocab;  // scores/types are filled to one per token by build()
  std::vector<SpecialToken> specials;
  std::optional<PreTokenizer> pre_tokenizer;       // BPE only
  const PreTokenizerFamily* bpe_family = nullptr;  // BPE only: the table entry of vocab.pre
  std::vector<std::string> pieces;                 // token_to_piece with special rendering
  std::vector<bool> is_hidden_special;             // control/unknown/unused: empty unless rendered
  std::unordered_set<TokenId> end_of_generation;
  size_t max_token_bytes = 0;

 private:
  StringMap<TokenId> m_token_to_id;
  StringMap<int> m_merge_ranks;  // key: "left right", exactly as stored in tokenizer.ggml.merges
  std::array<TokenId, 256> m_byte_tokens{};
};

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

void replace_all(std::string* text, std::string_view from, std::string_view to);

// Per-algorithm encoders of one text fragment (no special tokens inside), appending to `out`.
void spm_encode(const TokenizerImpl& tok, std::string_view text, std::vector<TokenId>* out);
void bpe_encode(const TokenizerImpl& tok, std::string_view text, std::vector<TokenId>* out);
void wordpiece_encode(const TokenizerImpl& tok, std::string_view text, std::vector<TokenId>* out);

}  // namespace iwb::tokenizer
