// Tool calling (OpenAI's `tools`, `tool_choice`, `tool_calls`) in each family's format
// (ToolCallFormat): Qwen2.5's / Hermes's, where the model writes each call as
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// and Llama 3's, Mistral's, Granite's, gpt-oss's and Qwen3-Coder's. This file has the pieces the
// chat template, the engine and the server share: tool definitions as the template shows them,
// the grammar that holds a call to the tools' schemas, and the reply split into text and calls.
#pragma once

#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/status.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";
inline constexpr std::string_view kLlamaCallStart = "{\"name\"";  // how Llama 3's calls begin

// How a model family writes its calls.
enum class ToolCallFormat {
  Hermes,  // Qwen2.5 / Qwen3 (and Hermes): <tool_call> blocks holding {"name", "arguments"}, several
  Llama3,  // Llama 3.1-3.3: the whole reply is {"name": ..., "parameters": {...}}, one call
  // Mistral Nemo: [TOOL_CALLS] then one JSON list of {"name", "arguments", "id"} (the id, 9
  // letters and digits, optional).
  MistralList,
  // Mistral Small 3.2, Devstral: each call [TOOL_CALLS]name[ARGS]{...}, with [CALL_ID] and an
  // id of 9 letters and digits before [ARGS] where the model writes one. [TOOL_CALLS], [ARGS]
  // and [CALL_ID] are control tokens: the reply is generated with them shown.
  MistralNamed,
  // IBM Granite 3.x: <|tool_call|> (a control token) then one JSON list of {"name", "arguments"}.
  GraniteList,
  // gpt-oss (harmony): a commentary message to=functions.NAME whose text is the arguments,
  // `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}` (or the recipient
  // before the channel, as its template writes past calls), then <|call|>; one call a turn.
  Harmony,
  // Qwen3-Coder: <tool_call> blocks of tags, each argument's value as text (a string's raw, any
  // other JSON):
  //   <tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>
  QwenXml,
  // GLM-4.5, GLM-4.6: <tool_call> blocks of the name and each argument as <arg_key>/<arg_value>
  // tags (a string's value raw, any other JSON), each on a line of its own:
  //   <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>
  GlmXml,
  // GLM-4.7: GlmXml without the newlines.
  //   <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>
  Glm47Xml,
  // DeepSeek V3.1: one section of special tokens holding each call's name and JSON arguments:
  //   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city":
  //   "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
  DeepSeekV31,
  // Kimi K2: the same shape with its own markers, each call named functions.NAME:INDEX (the
  // call's id; INDEX counts the conversation's calls from 0):
  //   <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city":
  //   "Paris"}<|tool_call_end|><|tool_calls_section_end|>
  KimiK2,
  // Gemma 4: each call <|tool_call>call:NAME{...}<tool_call|>, its arguments as the template
  // writes them (keys bare, strings between <|"|>, numbers, true, false, null, {...}, [...]):
  //   <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>
  Gemma4,
};
inline constexpr std::string_view kHarmonyCallRecipient = " to=functions.";
inline constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
inline constexpr std::string_view kGraniteCalls = "<|tool_call|>";
inline constexpr std::string_view kXmlFunctionOpen = "<function=";
inline constexpr std::string_view kXmlParameterOpen = "<parameter=";
inline constexpr std::string_view kXmlParameterClose = "</parameter>";
inline constexpr std::string_view kXmlFunctionClose = "</function>";
inline constexpr std::string_view kGlmKeyOpen = "<arg_key>";
inline constexpr std::string_view kGlmKeyClose = "</arg_key>";
inline constexpr std::string_view kGlmValueOpen = "<arg_value>";
inline constexpr std::string_view kGlmValueClose = "</arg_value>";
inline constexpr std::string_view kGemma4CallOpen = "<|tool_call>";
inline constexpr std::string_view kGemma4CallClose = "<tool_call|>";
// A calls section's markers (DeepSeekV31, KimiK2): the section's opening (the grammar's
// trigger), each call's opening, the marker between its name and arguments, each call's end,
// the section's end.
struct CallSectionMarkers {
  std::string_view section_begin, call_begin, arguments_begin, call_end, section_end;
};
inline constexpr CallSectionMarkers kDeepSeekMarkers = {
    "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"};
inline constexpr CallSectionMarkers kKimiMarkers = {"<|tool_calls_section_begin|>", "<|tool_call_begin|>",
                                                    "<|tool_call_argument_begin|>", "<|tool_call_end|>",
                                                    "<|tool_calls_section_end|>"};

// What the engine needs to hold a reply's calls (GenerationRequest::grammar_trigger and its
// companions): the text that starts a call, whether it is the call's own first byte, whether
// it counts only at the reply's start, and whether a reply may make several calls.
struct ToolCallSyntax {
  std::string trigger;
  bool is_trigger_in_grammar = false;
  bool is_trigger_at_start = false;
  bool allows_several = true;
  std::string separator = "\n";  // what comes between two calls (Qwen: a newline; Mistral: nothing)
};
ToolCallSyntax tool_call_syntax(ToolCallFormat format);
// How the format's calls look, in words: "<tool_call> blocks (Qwen2.5, Qwen3, Hermes)".
std::string_view tool_call_format_description(ToolCallFormat format);

// A function the model may call (OpenAI's tools[i].function).
struct ToolDefinition {
  std::string name;
  std::string parameters_json;  // the JSON Schema of its arguments; empty: any object
  bool is_strict = false;       // OpenAI's "strict": the schema must be held to exactly
  std::string json;             // the whole tool ({"type": "function", ...}) as JSON text, the
                                // client's key order kept (the template writes it so)
};

// JSON text as Jinja's `tojson` in Hugging Face's chat templates writes it (Python's json.dumps:
// ", " and ": " between items, non-ASCII as it is, keys in their order). Text that is not JSON
// is written as a JSON string, as `tojson` writes a Python string. The writer recurses: callers
// bound the nesting (the server's body limit; tool-call arguments checked when read).
// `indent` > 0: tojson(indent=N), one item a line (Python's "," and ": " then).
std::string template_tojson(std::string_view json_text, int indent = 0);
// A text as tojson writes a string (quoted, escaped).
std::string template_tojson_string(std::string_view text);

// How deep brackets nest in a JSON text (outside strings), without parsing it.
int json_nesting_depth(std::string_view text);

// The grammar one call is held to: {"name": one of the tools (or `only`), "arguments": that
// tool's parameters} (Llama 3: "parameters"), framed as the format writes it (Hermes: "\n"
// before, after the trigger kToolCallOpen, and "\n</tool_call>" after); Nemo and Granite: a
// JSON list of such calls (Nemo's with an optional 9-character "id"); Mistral's named calls and
// gpt-oss's: a sequence of the name, its markers (the header's rest for gpt-oss) and the
// parameters (JsonGrammar::sequences). A tool's schema that
// uses what the grammar does not support is an error when the tool is strict; otherwise its
// arguments are held to any JSON object (OpenAI holds non-strict tools to their schema only
// loosely too), and `loosened` names it.
struct ToolGrammar {
  std::shared_ptr<const JsonGrammar> grammar;
  std::vector<std::string> loosened;  // "get_weather: at /properties/x: 'pattern' is not supported"
};
// `allows_several` false: Nemo's list holds one call (parallel_tool_calls false).
Result<ToolGrammar> tool_call_grammar(const std::vector<ToolDefinition>& tools, std::optional<std::string> only = {},
                                      ToolCallFormat format = ToolCallFormat::Hermes, bool allows_several = true);

// A call found in a reply. `arguments` is compact JSON text, as OpenAI sends it: the object the
// model wrote with the white space outside strings dropped (its bytes otherwise as written).
struct ParsedToolCall {
  std::string name;
  std::string arguments;
  std::string id;  // the call's id when the model wrote one (Mistral's 9 characters), else empty
};

// A new call id as the format's template takes it: "call_" and 32 hex digits, or for Mistral's
// formats 9 letters and digits (their templates refuse other lengths).
std::string new_tool_call_id(ToolCallFormat format);

// A reply split into its text and its calls. Hermes: a block is a call once it reads
// {"name": "...", "arguments": {  (as a grammar holds it; what follows the arguments object in
// the block is not read), or when the whole block parses as a call with another key order or
// string arguments; a block that is neither stays in the text as written. A call cut off
// (the reply ended inside it, e.g. at max_tokens) is a call whose arguments end where the reply
// did, as OpenAI returns one. While streaming (`is_streaming`), the last call may still be
// growing: its name is whole and its arguments only ever grow, to what the finished reply gives
// (OpenAI's argument deltas); a block not yet read as a call and a trailing start of the opening
// marker ("<tool_") are held back, as is trailing white space, so the text only grows; a
// finished reply keeps a block that is no call as text, and drops the white space around calls.
// Llama 3: a reply that is one JSON object with "name" and "parameters" (or "arguments") is a
// call, read the same way; while streaming, a reply that opens with {"name" (white space allowed
// after the brace), or may yet, is held back until its arguments begin. Nemo and Granite: the
// list after the marker, each whole object a call in any key order, the one being written a call
// once its name and arguments begin; Mistral's named calls: the text before the first
// [TOOL_CALLS], then each name, id and arguments; gpt-oss: each " to=functions.NAME" header and
// its arguments taken out of the text (whose channels split_reply then reads).
struct ToolReply {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

// Formats that write each argument as text (QwenXml, GlmXml, Glm47Xml): how a parameter's text becomes JSON, from
// its schema, as vLLM's and llama.cpp's parsers read them. String: the text is the string (a
// parameter the schema does not list too); Json: the text is JSON (true/false/none written
// Python's way are taken; text that is no JSON becomes a string); JsonOrString: JSON other than
// a string when the text is that, else the string.
enum class ArgumentText : uint8_t { String, Json, JsonOrString };
struct ToolArgumentTypes {
  // tool, parameter (looked up by views: a streamed reply is read again on every token)
  std::map<std::string, std::map<std::string, ArgumentText, std::less<>>, std::less<>> by_tool;
  ArgumentText of(std::string_view tool, std::string_view parameter) const;
};
ToolArgumentTypes tool_argument_types(const std::vector<ToolDefinition>& tools);

// Qwen3-Coder's calls (QwenXml): each <tool_call> block's function and its parameters, read as
// they grow (a string's text streamed as it comes, other values once whole); the arguments are
// compact JSON built from them in the order written (`types`: how each value is read; without
// them every value is a string). A value ends at the first "\n</parameter>\n", where the grammar
// ends it (any other tag is text of its); a block that is no call stays in the text. GLM's calls
// (GlmXml, Glm47Xml) the same way: each <tool_call> block's name (up to a newline or a tag) and
// its <arg_key>/<arg_value> pairs, a value ending at the first </arg_value> (GlmXml: with the
// newline after it), a block whose name holds white space no call. DeepSeek V3.1's and Kimi K2's
// (DeepSeekV31, KimiK2): the text before the first section (or call) marker, then each call's
// name (Kimi's functions.NAME:INDEX: NAME, the whole as the call's id) and its arguments object
// as it grows; a section's end or a call's end may be missing (llama.cpp takes both so), and
// a call that cannot be read (no arguments object, a name with spaces) stays in the text from
// its marker on, as does text after the section. Gemma 4's (Gemma4): each call's name and its
// arguments read into JSON as they grow (a string's text as it comes, other values once whole);
// a block that is no call (no call:NAME{, arguments not in the syntax, nested deeper than 64)
// stays in the text up to its <tool_call|>.
ToolReply split_tool_calls(std::string_view reply, bool is_streaming = false,
                           ToolCallFormat format = ToolCallFormat::Hermes, const ToolArgumentTypes* types = nullptr);

}  // namespace iwb
