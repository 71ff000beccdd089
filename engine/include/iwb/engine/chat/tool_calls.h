// Tool calling (OpenAI's `tools`, `tool_choice`, `tool_calls`) in the Qwen2.5 / Hermes format:
// the model writes each call as
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// This file has the pieces the chat template, the engine and the server share: tool definitions
// as the template shows them, the grammar that holds a call to the tools' schemas, and the
// reply split into text and calls.
#pragma once

#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/status.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

// A function the model may call (OpenAI's tools[i].function).
struct ToolDefinition {
  std::string name;
  std::string parameters_json;  // the JSON Schema of its arguments; empty: any object
  bool is_strict = false;       // OpenAI's "strict": the schema must be held to exactly
  std::string rendered;         // the whole tool ({"type": "function", ...}) as the template shows it
};

// JSON text as Jinja's `tojson` in Hugging Face's chat templates writes it (Python's json.dumps:
// ", " and ": " between items, non-ASCII as it is, keys in their order). Text that is not JSON
// is written as a JSON string, as `tojson` writes a Python string.
std::string template_tojson(std::string_view json_text);

// The grammar one call is held to: {"name": one of the tools (or `only`), "arguments": that
// tool's parameters}, framed by the lines around it: "\n" before (after the trigger
// kToolCallOpen) and "\n</tool_call>" after. A tool's schema that uses what the grammar does not
// support is an error when the tool is strict; otherwise its arguments are held to any JSON
// object (OpenAI holds non-strict tools to their schema only loosely too), and `loosened` names
// it.
struct ToolGrammar {
  std::shared_ptr<const JsonGrammar> grammar;
  std::vector<std::string> loosened;  // "get_weather: at /properties/x: 'pattern' is not supported"
};
Result<ToolGrammar> tool_call_grammar(const std::vector<ToolDefinition>& tools, std::optional<std::string> only = {});

// A call found in a reply. `arguments` is compact JSON text, as OpenAI sends it.
struct ParsedToolCall {
  std::string name;
  std::string arguments;
};

// A reply split into its text and its calls. A block that is not a call (no "name", not JSON)
// stays in the text as written. While streaming (`is_streaming`), an unclosed block and a
// trailing start of the opening marker ("<tool_") are held back, as is trailing white space, so
// the text only grows; a finished reply keeps an unclosed block as text, and drops the white
// space around calls.
struct ToolReply {
  std::string content;
  std::vector<ParsedToolCall> calls;
};
ToolReply split_tool_calls(std::string_view reply, bool is_streaming = false);

}  // namespace iwb
