// Token-level structured output (token_constraint.h).
#include "iwb/engine/sampling/token_constraint.h"

#include "iwb/engine/tokenizer/tokenizer.h"

#include <cmath>

namespace iwb {

TokenBytes::TokenBytes(const tokenizer::Tokenizer& tok) {
  const size_t n = tok.num_tokens();
  m_bytes.reserve(n);
  m_ends.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<tokenizer::TokenId>(i);
    m_bytes.push_back(tok.token_to_piece(id, /*render_special=*/false));
    m_ends[i] = tok.is_end_of_generation(id);
  }
}

bool is_token_allowed(const JsonMatcher& matcher, const TokenBytes& tokens, int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= tokens.size()) return false;
  if (tokens.ends_generation(token)) return matcher.is_complete();
  const std::string& bytes = tokens.bytes(token);
  return !bytes.empty() && matcher.can_feed(bytes);
}

size_t mask_disallowed_tokens(const JsonMatcher& matcher, const TokenBytes& tokens, std::span<float> logits) {
  const std::bitset<256> first = matcher.next_bytes();
  const bool is_complete = matcher.is_complete();
  size_t num_allowed = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    bool allowed = false;
    if (i < tokens.size()) {
      const auto id = static_cast<int32_t>(i);
      const std::string& bytes = tokens.bytes(id);
      if (tokens.ends_generation(id)) {
        allowed = is_complete;
      } else if (!bytes.empty() && first.test(static_cast<uint8_t>(bytes[0]))) {
        allowed = bytes.size() == 1 || matcher.can_feed(bytes);
      }
    }
    if (allowed) {
      ++num_allowed;
    } else {
      logits[i] = -INFINITY;
    }
  }
  return num_allowed;
}

}  // namespace iwb
