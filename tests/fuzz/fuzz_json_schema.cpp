// Fuzz target: structured output. The input is a JSON Schema, a 0 byte, then reply bytes. The
// schema compiler must refuse or compile any text; the matcher, fed the reply byte by byte, must
// agree with itself (a byte is in next_bytes() exactly when can_feed takes it), and a reply it
// takes whole and calls complete must be JSON that nlohmann parses. The same text is also tried
// as a regex (vLLM's guided_regex): the matcher must agree with itself the same way, and never
// stand where the reply is not complete and no byte may follow; and the schema as tagged
// parameters (Qwen3-Coder's calls) the same way; every few bytes the token mask of a small
// vocabulary agrees with feeding each of its tokens. A disagreement aborts.
#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/sampling/token_constraint.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace {

// The token mask's fast paths (plain string text, a pattern's DFA walk, a tagged parameter's raw
// text, control tokens) against feeding each token of a small vocabulary, every few bytes.
void check_mask(const iwb::JsonMatcher& m, size_t at) {
  if (at % 7 != 0) return;
  static const iwb::TokenBytes kTokens(
      {"a",    "ab",      "\"",  "\\",  "{",        "}",    "[",    "]",    ",",        ":",
       "1",    "-",       ".",   "e",   " ",        "\n",   "true", "null", "\xc3\xa9", "\xc3",
       "\xa9", "x@y.com", "<p=", ">\n", "\n</p>\n", "</f>", "<f>",  "\x01", "<p="},
      {}, {false, false, false, false, false, false, false, false, false, false, false, false, false, false, false,
           false, false, false, false, false, false, false, false, false, false, false, false, false, true});
  std::vector<float> logits(kTokens.size(), 0.0f);
  iwb::mask_disallowed_tokens(m, kTokens, logits);
  for (size_t i = 0; i < kTokens.size(); ++i) {
    if (std::isfinite(logits[i]) != iwb::is_token_allowed(m, kTokens, static_cast<int32_t>(i))) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view schema = input.substr(0, split);
  const std::string_view reply = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  if (auto regex = iwb::JsonGrammar::from_regex(schema)) {
    iwb::JsonMatcher m(*regex);
    for (size_t i = 0; i < reply.size() && i < 4096; ++i) {
      const std::bitset<256> next = m.next_bytes();
      if (next.none() && !m.is_complete()) std::abort();  // a dead end
      const auto b = static_cast<uint8_t>(reply[i]);
      if (next.test(b) != m.can_feed(reply.substr(i, 1))) std::abort();
      check_mask(m, i);
      if (!m.feed(reply.substr(i, 1))) break;
    }
  }
  auto grammar = iwb::JsonGrammar::from_schema(schema);
  if (!grammar) return 0;
  iwb::JsonMatcher m(*grammar);
  size_t taken = 0;
  for (; taken < reply.size() && taken < 4096; ++taken) {
    const std::bitset<256> next = m.next_bytes();
    const auto b = static_cast<uint8_t>(reply[taken]);
    if (next.test(b) != m.can_feed(reply.substr(taken, 1))) std::abort();
    check_mask(m, taken);
    if (!m.feed(reply.substr(taken, 1))) break;
  }
  if (taken == reply.size() && !reply.empty() && m.is_complete()) {
    if (!nlohmann::json::accept(reply)) std::abort();
  }
  // The same schema as Qwen3-Coder's tagged parameters, between two markers: the matcher agrees
  // with itself there too.
  auto tagged = iwb::JsonGrammar::tagged_parameters(**grammar, {"<p=", ">\n", "\n</p>\n"}, "");
  if (!tagged) return 0;
  iwb::JsonMatcher call(iwb::JsonGrammar::sequences({{{"<f>", nullptr}, {"", *tagged}, {"</f>", nullptr}}}, "a call"));
  for (size_t i = 0; i < reply.size() && i < 4096; ++i) {
    const auto b = static_cast<uint8_t>(reply[i]);
    if (call.next_bytes().test(b) != call.can_feed(reply.substr(i, 1))) std::abort();
    check_mask(call, i);
    if (!call.feed(reply.substr(i, 1))) break;
  }
  return 0;
}
