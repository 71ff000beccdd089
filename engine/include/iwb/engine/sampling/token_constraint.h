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
  // `render_special`: control tokens' bytes are their text ("[TOOL_CALLS]"), as a reply
  // generated with GenerationRequest::render_special_tokens shows them; such a token may only
  // write a grammar's raw pieces (its markers), never a JSON value's or a text's bytes.
  explicit TokenBytes(const tokenizer::Tokenizer& tok, bool render_special = false);
  // Any table (tests): each token's bytes, which end a reply, and which are control tokens.
  TokenBytes(std::vector<std::string> bytes, std::vector<bool> ends, std::vector<bool> controls = {});

  // Empty for control tokens ("<|im_start|>") unless rendered: they are never part of a JSON
  // reply.
  const std::string& bytes(int32_t id) const { return m_bytes[static_cast<size_t>(id)]; }
  bool ends_generation(int32_t id) const { return m_ends[static_cast<size_t>(id)]; }
  // A control token with its text as bytes (render_special): a marker only.
  bool is_control(int32_t id) const { return m_controls[static_cast<size_t>(id)]; }
  // The characters of a token that a JSON string takes as they are (whole UTF-8 characters, no
  // quote, backslash or control byte); -1 for any other token.
  int32_t plain_string_chars(int32_t id) const { return m_plain_chars[static_cast<size_t>(id)]; }
  // Whether a token is whole UTF-8 characters with no NUL (raw text, as a tagged parameter's
  // value holds it), and no control token.
  bool is_whole_text(int32_t id) const { return m_whole_text[static_cast<size_t>(id)]; }
  size_t size() const { return m_bytes.size(); }

 private:
  void classify();

  std::vector<std::string> m_bytes;
  std::vector<bool> m_ends;
  std::vector<bool> m_controls;
  std::vector<int32_t> m_plain_chars;
  std::vector<bool> m_whole_text;
};

// Whether `token` may come next.
bool is_token_allowed(const JsonMatcher& matcher, const TokenBytes& tokens, int32_t token);

// Sets the logit of every token that may not come next to -infinity; returns how many may.
// Tokens whose first two bytes cannot come next are ruled out without walking the rest, and
// inside a string a token of plain characters is taken on its length alone
// (JsonMatcher::string_room): Qwen2.5's whole vocabulary in about 1 ms there instead of 27.
size_t mask_disallowed_tokens(const JsonMatcher& matcher, const TokenBytes& tokens, std::span<float> logits);

}  // namespace iwb
