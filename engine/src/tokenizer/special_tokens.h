// Splitting text on special-token texts before the tokenizer proper sees it: "<|im_start|>user"
// becomes the token <|im_start|> and the text "user". Longest tokens are tried first.
#pragma once

#include "iwb/engine/tokenizer/vocab.h"

#include <string_view>
#include <vector>

namespace iwb::tokenizer {

// A stretch of the input: either raw text [offset, offset + length) or one token.
struct Fragment {
  TokenId token = kNoToken;
  size_t offset = 0;
  size_t length = 0;
  bool is_text() const { return token == kNoToken; }
};

struct SpecialToken {
  TokenId id = kNoToken;
  std::string_view text;      // points into the vocabulary
  bool is_parse_only = false; // control/unknown: split out only when parse_special is on
  bool is_lstrip = false;     // swallows whitespace before it
  bool is_rstrip = false;     // swallows whitespace after it
};

// The vocabulary's control, user-defined and unknown tokens, longest text first (ties by id),
// the order llama.cpp partitions in.
std::vector<SpecialToken> collect_special_tokens(const Vocab& vocab);

// Partitions `text`. User-defined tokens are always split out; control and unknown tokens
// only when `parse_special` is true.
std::vector<Fragment> partition_special(std::string_view text, const std::vector<SpecialToken>& specials,
                                        bool parse_special);

}  // namespace iwb::tokenizer
