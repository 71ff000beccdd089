// Structured output at the token level: which tokens may come next in a reply held to a
// JsonGrammar (json_grammar.h). A token may come next when its bytes continue the reply, or
// when it ends the reply (end of generation) where the value is whole.
#pragma once

#include "iwb/engine/sampling/json_grammar.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace iwb {
namespace tokenizer {
class Tokenizer;
}

// Every token's bytes as a reply's text holds them, and which tokens end a reply. Built once per
// tokenizer (Qwen2.5's 151,665 tokens in a few ms) and shared by the requests that need it.
class TokenBytes {
 public:
  explicit TokenBytes(const tokenizer::Tokenizer& tok);

  // Empty for control tokens ("<|im_start|>"): they are never part of a JSON reply.
  const std::string& bytes(int32_t id) const { return m_bytes[static_cast<size_t>(id)]; }
  bool ends_generation(int32_t id) const { return m_ends[static_cast<size_t>(id)]; }
  size_t size() const { return m_bytes.size(); }

 private:
  std::vector<std::string> m_bytes;
  std::vector<bool> m_ends;
};

// Whether `token` may come next.
bool is_token_allowed(const JsonMatcher& matcher, const TokenBytes& tokens, int32_t token);

// Sets the logit of every token that may not come next to -infinity; returns how many may.
// Tokens whose first byte cannot come next are ruled out without walking the rest.
size_t mask_disallowed_tokens(const JsonMatcher& matcher, const TokenBytes& tokens, std::span<float> logits);

}  // namespace iwb
