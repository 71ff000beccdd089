// What structured output costs per token, with a real vocabulary: building the vocabulary's
// byte table, checking one sampled token, and the full mask (every token checked) at the kinds
// of place a reply reaches (a JSON Schema's reply, a string held to a pattern, a guided_regex
// reply, a tool call's, and a Mistral-style call — a sequence grammar — with the vocabulary's
// control tokens shown and 1,000 more added, as Mistral's tekken vocabulary has; and a Qwen3-Coder
// call, whose string values are raw text). A plain
// program, not a test: it prints figures.
//   bench_token_constraint MODEL.gguf [REPEATS]
#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/sampling/token_constraint.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace iwb;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

const char* kSchema = R"({"type": "object", "properties": {
  "people": {"type": "array", "items": {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "city": {"type": "string"}}, "required": ["name", "age", "city"]}}},
  "required": ["people"]})";

// A string with a pattern (every token's characters go through the pattern's NFA) and one
// without (the mask's plain-character shortcut), side by side.
const char* kPatternSchema = R"({"type": "object", "properties": {
  "email": {"type": "string", "pattern": "^[a-z0-9._]+@[a-z0-9]+\\.(com|org|net)$"},
  "note": {"type": "string"}}, "required": ["email", "note"]})";

const char* kWeatherParameters = R"({"type": "object", "properties": {"city": {"type": "string"},
  "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]})";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_token_constraint MODEL.gguf [REPEATS]\n");
    return 2;
  }
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
  auto file = gguf::GgufFile::open(argv[1]);
  if (!file) {
    std::fprintf(stderr, "%s\n", file.error_message().c_str());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::from_gguf(**file);
  if (!tok) {
    std::fprintf(stderr, "%s\n", tok.error_message().c_str());
    return 1;
  }
  auto t0 = Clock::now();
  const TokenBytes bytes(*tok);
  std::printf("vocabulary: %zu tokens, byte table built in %.1f ms\n", bytes.size(), ms_since(t0));
  auto grammar = JsonGrammar::from_schema(kSchema);
  if (!grammar) {
    std::fprintf(stderr, "%s\n", grammar.error_message().c_str());
    return 1;
  }
  // Tool calls: two tools' call grammar, from the trigger on (tool_choice "required").
  ToolDefinition weather{"get_weather", kWeatherParameters, false, ""};
  ToolDefinition time{"get_time", R"({"type": "object", "properties": {}})", false, ""};
  auto tools = tool_call_grammar({weather, time});
  if (!tools) {
    std::fprintf(stderr, "%s\n", tools.error_message().c_str());
    return 1;
  }
  const std::string lead(kToolCallOpen);
  // Mistral Small 3.2's calls: name[ARGS]{...} after [TOOL_CALLS], held by a sequence grammar,
  // with a table whose control tokens are text that only markers may take: the model's own
  // (render_special) and 1,000 "[control_N]" more.
  auto named = tool_call_grammar({weather, time}, {}, ToolCallFormat::MistralNamed);
  if (!named) {
    std::fprintf(stderr, "%s\n", named.error_message().c_str());
    return 1;
  }
  const TokenBytes shown(*tok, /*render_special=*/true);
  std::vector<std::string> with_controls;
  std::vector<bool> ends, controls;
  for (size_t i = 0; i < shown.size(); ++i) {
    with_controls.push_back(shown.bytes(static_cast<int32_t>(i)));
    ends.push_back(shown.ends_generation(static_cast<int32_t>(i)));
    controls.push_back(shown.is_control(static_cast<int32_t>(i)));
  }
  for (int i = 0; i < 1000; ++i) {
    with_controls.push_back("[control_" + std::to_string(i) + "]");
    ends.push_back(false);
    controls.push_back(true);
  }
  const TokenBytes tekken_like(with_controls, ends, controls);
  // Qwen3-Coder's calls: tagged parameters, a string's value raw text up to its end tag (the
  // mask's raw-text shortcut), an integer JSON.
  ToolDefinition forecast{"get_weather",
                          R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                              "required": ["city"]})",
                          false, ""};
  auto xml = tool_call_grammar({forecast, time}, {}, ToolCallFormat::QwenXml);
  if (!xml) {
    std::fprintf(stderr, "%s\n", xml.error_message().c_str());
    return 1;
  }
  // GLM-4.5's calls: the tool's name after <tool_call>, then <arg_key>/<arg_value> tags.
  auto glm = tool_call_grammar({forecast, time}, {}, ToolCallFormat::GlmXml);
  if (!glm) {
    std::fprintf(stderr, "%s\n", glm.error_message().c_str());
    return 1;
  }
  auto patterned = JsonGrammar::from_schema(kPatternSchema);
  auto regex = JsonGrammar::from_regex("(yes|no), because [a-z ,]{1,80}\\.");
  if (!patterned || !regex) {
    std::fprintf(stderr, "%s%s\n", patterned.error_message().c_str(), regex.error_message().c_str());
    return 1;
  }
  struct Place {
    std::shared_ptr<const JsonGrammar> grammar;
    std::string lead;
    const char* reply;
    const TokenBytes* table = nullptr;  // the vocabulary's plain table when null
    const char* kind = nullptr;         // the place's label
  };
  const std::vector<Place> places = {
      {*grammar, "", ""},
      {*grammar, "", "{\"people\": ["},
      {*grammar, "", "{\"people\": [{\"name\": \"Al"},
      {*grammar, "", "{\"people\": [{\"name\": \"Al\", \"age\": 3"},
      {*grammar, "", "{\"people\": [{\"name\": \"Al\", \"age\": 30, \"city\": \"Paris\"}"},
      {*patterned, "", "{\"email\": \"ann"},
      {*patterned, "", "{\"email\": \"ann@example"},
      {*patterned, "", "{\"email\": \"ann@example.org\", \"note\": \"Fi"},
      {*regex, "", ""},
      {*regex, "", "yes, because the"},
      {tools->grammar, lead, ""},
      {tools->grammar, lead, "<tool_call>\n{\"name\": \"get_"},
      {tools->grammar, lead, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par"},
      {tools->grammar, lead, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool"},
      {named->grammar, "", "", &tekken_like},
      {named->grammar, "", "get_weather", &tekken_like},
      {named->grammar, "", "get_weather[ARGS]{\"city\": \"Par", &tekken_like},
      {xml->grammar, lead, "", nullptr, "xml call"},
      {xml->grammar, lead, "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", nullptr, "xml call"},
      {xml->grammar, lead, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n", nullptr, "xml call"},
      {xml->grammar, lead, "<tool_call>\n<function=get_weather>\n<parameter=days>\n1", nullptr, "xml call"},
      {glm->grammar, lead, "<tool_call>get_", nullptr, "glm call"},
      {glm->grammar, lead, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par", nullptr, "glm call"},
      {glm->grammar, lead, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</", nullptr, "glm call"},
      {glm->grammar, lead, "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>1", nullptr, "glm call"},
  };
  const tokenizer::TokenId probe = tok->encode("\"name", {.add_bos = false}).front();
  std::printf("%-60s %9s %10s %12s\n", "reply so far", "allowed", "mask ms", "one token us");
  for (const Place& place : places) {
    const char* prefix = place.reply;
    JsonMatcher m(place.grammar, place.lead);
    if (!m.feed(prefix)) {
      std::fprintf(stderr, "the grammar refuses '%s'\n", prefix);
      return 1;
    }
    const TokenBytes& table = place.table != nullptr ? *place.table : bytes;
    std::vector<float> logits(table.size());
    size_t allowed = 0;
    t0 = Clock::now();
    for (int i = 0; i < repeats; ++i) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      allowed = mask_disallowed_tokens(m, table, logits);
    }
    const double mask_ms = ms_since(t0) / repeats;
    t0 = Clock::now();
    bool any = false;
    for (int i = 0; i < repeats * 100; ++i) any ^= is_token_allowed(m, table, probe);
    const double one_us = ms_since(t0) * 1000.0 / (repeats * 100);
    std::string label = place.kind != nullptr    ? std::string(place.kind) + " '"
                        : place.table != nullptr ? "mistral call '"
                        : place.lead.empty()     ? "'"
                                                 : "tool call '";
    label += std::string(prefix) + "'";
    for (size_t at = label.find('\n'); at != std::string::npos; at = label.find('\n')) label.replace(at, 1, "\\n");
    std::printf("%-60s %9zu %10.2f %12.2f%s\n", label.substr(0, 60).c_str(), allowed, mask_ms, one_us, any ? "" : "");
  }
  return 0;
}
