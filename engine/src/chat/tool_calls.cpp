// Tool calls: definitions as Hugging Face's `tojson` writes them, the grammar of one call, and a
// reply split into text and calls (Qwen's <tool_call> blocks, Llama 3's whole-reply call,
// Mistral's and Granite's calls after their marker, gpt-oss's commentary messages).
#include "iwb/engine/chat/tool_calls.h"

#include "chat/tool_call_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <random>

namespace iwb {
namespace detail {

size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

size_t append_text_before(std::string_view reply, size_t pos, std::string_view marker, bool is_streaming,
                          std::string* text) {
  const size_t at = reply.find(marker, pos);
  std::string_view part = reply.substr(pos, at == std::string_view::npos ? at : at - pos);
  if (at == std::string_view::npos && is_streaming) part.remove_suffix(partial_marker(part, marker));
  *text += part;
  return at;
}

void trim_trailing_space(ToolReply* out, bool is_streaming) {
  if (!is_streaming && out->calls.empty()) return;
  const size_t last = out->content.find_last_not_of(kWhitespace);
  out->content.erase(last == std::string::npos ? 0 : last + 1);
}

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kWhitespace) - begin + 1);
}

}  // namespace detail

namespace {

using detail::append_text_before;
using detail::kWhitespace;
using detail::partial_marker;
using detail::trim;
using detail::trim_trailing_space;
using ordered_json = nlohmann::ordered_json;
using json = nlohmann::json;

// json.dumps: with no indent ", " between items; with one, "," and a new line indented one
// more level per depth (an empty object or list stays "{}" / "[]").
void write_python_json(const ordered_json& v, int indent, int depth, std::string* out) {
  const auto separate = [&](bool first) {
    if (indent <= 0) {
      if (!first) *out += ", ";
      return;
    }
    if (!first) *out += ',';
    *out += '\n' + std::string(static_cast<size_t>(indent * (depth + 1)), ' ');
  };
  const auto close = [&](char c) {
    if (indent > 0) *out += '\n' + std::string(static_cast<size_t>(indent * depth), ' ');
    *out += c;
  };
  if (v.is_object() && !v.empty()) {
    *out += '{';
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      separate(first);
      first = false;
      *out += ordered_json(key).dump(-1, ' ', false, ordered_json::error_handler_t::replace) + ": ";
      write_python_json(value, indent, depth + 1, out);
    }
    close('}');
  } else if (v.is_array() && !v.empty()) {
    *out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      separate(i == 0);
      write_python_json(v[i], indent, depth + 1, out);
    }
    close(']');
  } else if (v.is_object() || v.is_array()) {
    *out += v.is_object() ? "{}" : "[]";
  } else {
    // Strings escape as json.dumps(ensure_ascii=False) does: quote, backslash, control bytes.
    *out += v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
}

// A tool's schema placed at #/$defs/<name> of a larger document: its own "#..." references
// re-pointed there. Values that are data, not schemas (enum, const, default, examples), are
// left alone.
void repoint_refs(json& schema, const std::string& base) {
  if (schema.is_array()) {
    for (json& item : schema) repoint_refs(item, base);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (key == "enum" || key == "const" || key == "default" || key == "examples") continue;
    if (key == "$ref" && value.is_string()) {
      const std::string ref = value.get<std::string>();
      if (!ref.empty() && ref[0] == '#') value = base + ref.substr(1);
      continue;
    }
    repoint_refs(value, base);
  }
}

// Calls read by parse_call (the other key orders, arguments not an object) nesting deeper are
// text: its writer recurses. Held calls are read by read_held_call, which does not.
constexpr int kMaxCallDepth = 128;

// One call's JSON text as a call, when it is one. `arguments_key`: "arguments" (Hermes) or
// "parameters" (Llama 3; "arguments" is taken there too).
std::optional<ParsedToolCall> parse_call(std::string_view body, const char* arguments_key = "arguments",
                                         bool needs_arguments = false) {
  if (json_nesting_depth(body) > kMaxCallDepth) return std::nullopt;
  const ordered_json call = ordered_json::parse(trim(body), nullptr, /*allow_exceptions=*/false);
  if (!call.is_object()) return std::nullopt;
  const auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  ParsedToolCall out;
  out.name = name->get<std::string>();
  auto arguments = call.find(arguments_key);
  if (arguments == call.end()) arguments = call.find("arguments");
  // A Llama 3 reply is a call only with its arguments: {"name": "Ann"} alone is an answer.
  if (needs_arguments && arguments == call.end()) return std::nullopt;
  if (arguments == call.end() || arguments->is_null()) {
    out.arguments = "{}";
  } else if (arguments->is_string()) {
    out.arguments = arguments->get<std::string>();  // already JSON text, as some models write it
  } else {
    out.arguments = arguments->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
  return out;
}

// Whether a JSON text's bytes are inside a string, taken one at a time (quotes and backslash
// escapes followed), for the readers below that scan JSON without parsing it.
class JsonStringTracker {
 public:
  // Takes the next byte; true when it belongs to a string, its quotes included.
  bool take(char c) {
    if (!m_in_string) {
      m_in_string = c == '"';
      return m_in_string;
    }
    if (m_escaped) {
      m_escaped = false;
    } else if (c == '\\') {
      m_escaped = true;
    } else if (c == '"') {
      m_in_string = false;
    }
    return true;
  }

 private:
  bool m_in_string = false;
  bool m_escaped = false;
};

// Where a JSON string that opens at `at` (a quote) ends: the index after its closing quote, or
// npos when the text ends first.
size_t json_string_end(std::string_view text, size_t at) {
  for (size_t i = at + 1; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// The JSON object or list that opens at body[at], as far as it is written, with the white space
// outside strings dropped: each byte is final once read, so a streamed value only grows.
// Returns where it ends in `body` (npos while it does not). Iterative: any nesting is safe.
size_t read_compact_value(std::string_view body, size_t at, std::string* out) {
  size_t depth = 0;
  JsonStringTracker strings;
  for (size_t i = at; i < body.size(); ++i) {
    const char c = body[i];
    if (strings.take(c)) {
      *out += c;
      continue;
    }
    if (kWhitespace.find(c) != std::string_view::npos) continue;
    *out += c;
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

// A call as a grammar writes it, read as far as it is written: {"name": "<name>", "arguments":
// {...  (white space anywhere between; Llama 3's key is "parameters"). The arguments are the
// object's text with the white space outside strings dropped, up to the object's end or the
// text's: each byte is final once read, so a streamed call's arguments only grow, and the whole
// reply gives the same bytes. Iterative, so any nesting is safe. nullopt until the arguments
// object has begun, or when the text is not such a call. `end`: where the arguments object
// ends in `body` (npos while it does not), so a caller finds the block's end after it, not in a
// string of the arguments.
struct HeldCall {
  ParsedToolCall call;
  size_t end = std::string_view::npos;
};
std::optional<HeldCall> read_held_call(std::string_view body, std::string_view arguments_key) {
  size_t i = 0;
  const auto skip = [&] {
    while (i < body.size() && kWhitespace.find(body[i]) != std::string_view::npos) ++i;
  };
  const auto take = [&](std::string_view token) {
    skip();
    if (body.substr(i, token.size()) != token) return false;
    i += token.size();
    return true;
  };
  if (!take("{") || !take("\"name\"") || !take(":")) return std::nullopt;
  skip();
  if (i >= body.size() || body[i] != '"') return std::nullopt;
  const size_t name_end = json_string_end(body, i);
  if (name_end == std::string_view::npos) return std::nullopt;
  const json name = json::parse(body.substr(i, name_end - i), nullptr, /*allow_exceptions=*/false);
  if (!name.is_string() || name.get<std::string>().empty()) return std::nullopt;
  i = name_end;
  if (!take(",")) return std::nullopt;
  const std::string key = "\"" + std::string(arguments_key) + "\"";
  if (!take(key) && !take("\"arguments\"")) return std::nullopt;
  if (!take(":")) return std::nullopt;
  skip();
  if (i >= body.size() || body[i] != '{') return std::nullopt;
  HeldCall held;
  held.call.name = name.get<std::string>();
  held.end = read_compact_value(body, i, &held.call.arguments);
  return held;
}

}  // namespace

size_t detail::read_compact_json(std::string_view text, size_t at, std::string* out) {
  return read_compact_value(text, at, out);
}

namespace {

// Qwen3-Coder's parameters: <parameter=KEY>\nVALUE\n</parameter>\n.
const JsonGrammar::Tags kXmlTags = {std::string(kXmlParameterOpen), ">\n",
                                    "\n" + std::string(kXmlParameterClose) + "\n"};
// GLM-4.5's and 4.6's: <arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n; 4.7's without the
// newlines.
const JsonGrammar::Tags kGlmTags = {std::string(kGlmKeyOpen),
                                    std::string(kGlmKeyClose) + "\n" + std::string(kGlmValueOpen),
                                    std::string(kGlmValueClose) + "\n"};
const JsonGrammar::Tags kGlm47Tags = {std::string(kGlmKeyOpen), std::string(kGlmKeyClose) + std::string(kGlmValueOpen),
                                      std::string(kGlmValueClose)};

bool is_tagged(ToolCallFormat format) {
  return format == ToolCallFormat::QwenXml || format == ToolCallFormat::GlmXml || format == ToolCallFormat::Glm47Xml;
}
bool is_section(ToolCallFormat format) {
  return format == ToolCallFormat::DeepSeekV31 || format == ToolCallFormat::KimiK2;
}

// Mistral's call ids: 9 letters and digits.
constexpr const char* kCallIdPattern = "^[a-zA-Z0-9]{9}$";

std::shared_ptr<const JsonGrammar> call_id_grammar() {
  static const std::shared_ptr<const JsonGrammar> id = *JsonGrammar::from_regex("[a-zA-Z0-9]{9}");
  return id;
}

// Whether a Llama 3 reply (trimmed) is, or may yet become, a call: "{", white space, then
// "name" as the first key (a forced call may put a space after the brace).
bool may_be_llama_call(std::string_view text) {
  if (text.empty()) return true;
  if (text.front() != '{') return false;
  const size_t key = text.find_first_not_of(kWhitespace, 1);
  if (key == std::string_view::npos) return true;
  constexpr std::string_view kName = "\"name\"";
  const std::string_view rest = text.substr(key);
  return rest.size() < kName.size() ? kName.starts_with(rest) : rest.starts_with(kName);
}

// Nemo: [TOOL_CALLS][{"name": ..., "arguments": {...}, "id": "..."}, ...]; Granite the same
// after <|tool_call|>, without ids. Calls as the grammar writes them are read as they grow; a
// finished list in another key order is parsed whole.
ToolReply split_json_list(std::string_view reply, bool is_streaming, std::string_view calls_marker) {
  ToolReply out;
  const size_t marker = append_text_before(reply, 0, calls_marker, is_streaming, &out.content);
  if (marker == std::string_view::npos) {
    trim_trailing_space(&out, is_streaming);
    return out;
  }
  const std::string_view body = reply.substr(marker + calls_marker.size());
  // The list as written so far: "[", then objects between commas. A whole object is a call when
  // it has a name and arguments (any key order; "id" read where there is one); its arguments are
  // the bytes as written when the name comes first (as the grammar writes it, and as they grew
  // while streaming), else the parsed object's. The object still being written is a call once
  // its name and the start of its arguments are there, in that order.
  bool is_list_of_calls = true;
  size_t i = body.find_first_not_of(kWhitespace);
  if (i == std::string_view::npos || body[i] != '[') {
    is_list_of_calls = i == std::string_view::npos && is_streaming;
  } else {
    ++i;
    while (true) {
      const size_t object = body.find_first_not_of(kWhitespace, i);
      if (object == std::string_view::npos) break;
      if (body[object] != '{') {
        is_list_of_calls = body[object] == ']' && !out.calls.empty();
        break;
      }
      std::string whole;
      const size_t end = read_compact_value(body, object, &whole);
      std::optional<HeldCall> held = read_held_call(body.substr(object), "arguments");
      if (end == std::string_view::npos) {  // still being written
        if (held) out.calls.push_back(std::move(held->call));
        break;
      }
      std::optional<ParsedToolCall> call = parse_call(whole);
      if (!call) {
        is_list_of_calls = false;
        break;
      }
      if (held && held->end != std::string_view::npos) call->arguments = std::move(held->call.arguments);
      const ordered_json item = ordered_json::parse(whole, nullptr, /*allow_exceptions=*/false);
      if (item.contains("id") && item["id"].is_string()) call->id = item["id"].get<std::string>();
      out.calls.push_back(std::move(*call));
      const size_t next = body.find_first_not_of(kWhitespace, end);
      if (next == std::string_view::npos || body[next] != ',') break;
      i = next + 1;
    }
  }
  if (!is_list_of_calls) out.calls.clear();
  // Not a list of calls: a finished reply keeps it as text; a streamed one holds it back.
  if (out.calls.empty() && !is_streaming) out.content += reply.substr(marker);
  trim_trailing_space(&out, is_streaming);
  return out;
}

// Small 3.2, Devstral: text, then [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} per call ([CALL_ID]
// and the id where the model writes them).
ToolReply split_mistral_named(std::string_view reply, bool is_streaming) {
  constexpr std::string_view kArgs = "[ARGS]", kCallId = "[CALL_ID]";
  ToolReply out;
  size_t marker = append_text_before(reply, 0, kMistralCalls, is_streaming, &out.content);
  while (marker != std::string_view::npos) {
    const size_t begin = marker + kMistralCalls.size();
    const size_t next = reply.find(kMistralCalls, begin);
    const std::string_view call = reply.substr(begin, next == std::string_view::npos ? next : next - begin);
    marker = next;
    const size_t args = call.find(kArgs);
    const size_t object =
        args == std::string_view::npos ? args : call.find_first_not_of(kWhitespace, args + kArgs.size());
    if (object == std::string_view::npos || call[object] != '{') {
      // No arguments yet: a streamed call still being written, or (finished) text as written.
      if (!is_streaming || next != std::string_view::npos)
        out.content += std::string(kMistralCalls) + std::string(call);
      continue;
    }
    std::string_view head = call.substr(0, args);
    ParsedToolCall parsed;
    if (const size_t id = head.find(kCallId); id != std::string_view::npos) {
      parsed.id = std::string(trim(head.substr(id + kCallId.size())));
      head = head.substr(0, id);
    }
    parsed.name = std::string(trim(head));
    const size_t end = read_compact_value(call, object, &parsed.arguments);
    out.calls.push_back(std::move(parsed));
    if (end != std::string_view::npos) {  // text after a call
      std::string_view rest = call.substr(end);
      if (is_streaming && next == std::string_view::npos) rest.remove_suffix(partial_marker(rest, kMistralCalls));
      out.content += trim(rest);
    }
  }
  trim_trailing_space(&out, is_streaming);
  return out;
}

// gpt-oss: each " to=functions.NAME" header up to its <|message|>, then the arguments object; the
// text is the reply without them (split_reply then reads its channels). While streaming, a
// header not yet at its arguments, and a trailing start of " to=functions.", are held back.
ToolReply split_harmony_calls(std::string_view reply, bool is_streaming) {
  constexpr std::string_view kMessage = "<|message|>";
  ToolReply out;
  size_t pos = 0;
  while (true) {
    const size_t at = append_text_before(reply, pos, kHarmonyCallRecipient, is_streaming, &out.content);
    if (at == std::string_view::npos) break;
    const size_t name_begin = at + kHarmonyCallRecipient.size();
    const size_t name_end = reply.find_first_of(" <", name_begin);
    const size_t message = name_end == std::string_view::npos ? name_end : reply.find(kMessage, name_end);
    const size_t object =
        message == std::string_view::npos ? message : reply.find_first_not_of(kWhitespace, message + kMessage.size());
    if (object == std::string_view::npos || reply[object] != '{' || name_end == name_begin) {
      // Not (yet) a call's header and arguments: held back while streaming, else text as written.
      if (!is_streaming || (object != std::string_view::npos && reply[object] != '{')) {
        out.content += reply.substr(at, name_begin - at);
        pos = name_begin;
        continue;
      }
      break;
    }
    ParsedToolCall call;
    call.name = std::string(reply.substr(name_begin, name_end - name_begin));
    const size_t end = read_compact_value(reply, object, &call.arguments);
    out.calls.push_back(std::move(call));
    if (end == std::string_view::npos) break;
    pos = end;
  }
  return out;
}

}  // namespace

std::string template_tojson(std::string_view json_text, int indent) {
  const ordered_json value = ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return template_tojson_string(json_text);
  std::string out;
  write_python_json(value, indent, 0, &out);
  return out;
}

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  JsonStringTracker strings;
  for (const char c : text) {
    if (strings.take(c)) continue;
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

std::string template_tojson_string(std::string_view text) {
  return ordered_json(std::string(text)).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

ToolCallSyntax tool_call_syntax(ToolCallFormat format) {
  switch (format) {
    // Llama 3: {"name" at the reply's start, so that an answer that is other JSON stays free.
    case ToolCallFormat::Llama3: return {std::string(kLlamaCallStart), true, true, false};
    // Nemo: one list holds every call.
    case ToolCallFormat::MistralList: return {std::string(kMistralCalls), false, false, false, ""};
    case ToolCallFormat::MistralNamed: return {std::string(kMistralCalls), false, false, true, ""};
    case ToolCallFormat::GraniteList: return {std::string(kGraniteCalls), false, false, false, ""};
    case ToolCallFormat::Harmony: return {std::string(kHarmonyCallRecipient), false, false, false, ""};
    // GLM-4.7 writes its calls one after another, without a newline between.
    case ToolCallFormat::Glm47Xml: return {std::string(kToolCallOpen), false, false, true, ""};
    // One held section holds every call (section_calls_grammar): the reply ends after it.
    case ToolCallFormat::DeepSeekV31: return {std::string(kDeepSeekMarkers.section_begin), false, false, false, ""};
    case ToolCallFormat::KimiK2: return {std::string(kKimiMarkers.section_begin), false, false, false, ""};
    case ToolCallFormat::Gemma4: return {std::string(kGemma4CallOpen), false, false, true, ""};
    case ToolCallFormat::Hermes:
    case ToolCallFormat::QwenXml:
    case ToolCallFormat::GlmXml: break;
  }
  return {std::string(kToolCallOpen), false, false, true};
}

std::string_view tool_call_format_description(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::Hermes: return "<tool_call> blocks of {\"name\", \"arguments\"} (Qwen2.5, Qwen3, Hermes)";
    case ToolCallFormat::Llama3: return "the whole reply {\"name\", \"parameters\"} (Llama 3.1-3.3)";
    case ToolCallFormat::MistralList: return "[TOOL_CALLS] and a JSON list with ids (Mistral Nemo)";
    case ToolCallFormat::MistralNamed: return "[TOOL_CALLS]name[ARGS]{...} (Mistral Small 3.2, Devstral)";
    case ToolCallFormat::GraniteList: return "<|tool_call|> and a JSON list (Granite 3.x)";
    case ToolCallFormat::Harmony: return "commentary messages to=functions.NAME (gpt-oss)";
    case ToolCallFormat::QwenXml:
      return "<tool_call> blocks of <function=NAME> and <parameter=KEY> tags (Qwen3-Coder, Qwen3.5)";
    case ToolCallFormat::GlmXml: return "<tool_call>NAME and <arg_key>/<arg_value> tags, a line each (GLM-4.5, 4.6)";
    case ToolCallFormat::Glm47Xml: return "<tool_call>NAME<arg_key>...</arg_key><arg_value>...</arg_value> (GLM-4.7)";
    case ToolCallFormat::DeepSeekV31:
      return "<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...} in a section (DeepSeek V3.1)";
    case ToolCallFormat::KimiK2:
      return "<|tool_call_begin|>functions.NAME:N<|tool_call_argument_begin|>{...} (Kimi K2)";
    case ToolCallFormat::Gemma4: return "<|tool_call>call:NAME{key:<|\"|>text<|\"|>,...}<tool_call|> (Gemma 4)";
  }
  return {};
}

std::string new_tool_call_id(ToolCallFormat format) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  if (format == ToolCallFormat::MistralList || format == ToolCallFormat::MistralNamed) {
    constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string id(9, ' ');
    for (char& c : id) c = kAlphabet[rng() % kAlphabet.size()];
    return id;
  }
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string("call_") + hex;
}

Result<ToolGrammar> tool_call_grammar(const std::vector<ToolDefinition>& tools, std::optional<std::string> only,
                                      ToolCallFormat format, bool allows_several) {
  const char* arguments_key = format == ToolCallFormat::Llama3 ? "parameters" : "arguments";
  ToolGrammar out;
  json document = {{"$defs", json::object()}, {"anyOf", json::array()}};
  std::vector<std::vector<JsonGrammar::Piece>> named_calls;  // MistralNamed: name[ARGS]{...}
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolDefinition& tool = tools[i];
    if (only && tool.name != *only) continue;
    const std::string params_text =
        tool.parameters_json.empty() ? std::string(R"({"type": "object"})") : tool.parameters_json;
    json params = json::parse(params_text, nullptr, /*allow_exceptions=*/false);
    if (params.is_discarded()) {
      return make_error(ErrorCode::InvalidArgument, "the parameters of tool '" + tool.name + "' are not JSON");
    }
    // Each tool's schema compiled alone first, so that a failure names the tool.
    Result<std::shared_ptr<const JsonGrammar>> alone = JsonGrammar::from_schema(params_text);
    if (!alone) {
      if (tool.is_strict) {
        return make_error(ErrorCode::InvalidArgument,
                          "the parameters of strict tool '" + tool.name + "': " + alone.error_message());
      }
      out.loosened.push_back(tool.name + ": " + alone.error_message());
      params = {{"type", "object"}};
    }
    if (format == ToolCallFormat::Harmony) {
      // The name, the rest of the header (the ways gpt-oss writes it), the arguments.
      const std::shared_ptr<const JsonGrammar> arguments = alone ? *alone : JsonGrammar::any_object();
      for (const char* header :
           {" <|constrain|>json<|message|>", "<|channel|>commentary json<|message|>",
            "<|channel|>commentary <|constrain|>json<|message|>", " json<|message|>", "<|message|>"}) {
        named_calls.push_back({{tool.name + header, nullptr}, {"", arguments}});
      }
      continue;
    }
    if (is_tagged(format)) {
      // The parameters as tags; a schema that is no object with properties: any names.
      const JsonGrammar::Tags& tags = format == ToolCallFormat::QwenXml  ? kXmlTags
                                      : format == ToolCallFormat::GlmXml ? kGlmTags
                                                                         : kGlm47Tags;
      Result<std::shared_ptr<const JsonGrammar>> tagged =
          JsonGrammar::tagged_parameters(alone ? **alone : *JsonGrammar::any_object(), tags, "");
      if (!tagged) {
        if (tool.is_strict) {
          return make_error(ErrorCode::InvalidArgument,
                            "the parameters of strict tool '" + tool.name + "': " + tagged.error_message());
        }
        out.loosened.push_back(tool.name + ": " + tagged.error_message());
        tagged = JsonGrammar::tagged_parameters(*JsonGrammar::any_object(), tags, "");
      }
      if (format == ToolCallFormat::QwenXml) {
        named_calls.push_back({{"\n" + std::string(kXmlFunctionOpen) + tool.name + ">\n", nullptr},
                               {"", *tagged},
                               {std::string(kXmlFunctionClose) + "\n" + std::string(kToolCallClose), nullptr}});
      } else {  // GLM: <tool_call>NAME (4.5/4.6: and a newline), the tags, </tool_call>
        named_calls.push_back({{tool.name + (format == ToolCallFormat::GlmXml ? "\n" : ""), nullptr},
                               {"", *tagged},
                               {std::string(kToolCallClose), nullptr}});
      }
      continue;
    }
    if (is_section(format)) {
      named_calls.push_back(detail::section_call_pieces(format, tool.name, alone ? *alone : JsonGrammar::any_object()));
      continue;
    }
    if (format == ToolCallFormat::Gemma4) {
      Result<std::shared_ptr<const JsonGrammar>> arguments = detail::gemma4_arguments_grammar();
      if (!arguments) return make_error(ErrorCode::Unsupported, "Gemma 4's call grammar could not be compiled");
      named_calls.push_back(detail::gemma4_call_pieces(tool.name, *arguments));
      continue;
    }
    if (format == ToolCallFormat::MistralNamed) {
      const std::shared_ptr<const JsonGrammar> arguments = alone ? *alone : JsonGrammar::any_object();
      named_calls.push_back({{tool.name + "[ARGS]", nullptr}, {"", arguments}});
      named_calls.push_back(
          {{tool.name + "[CALL_ID]", nullptr}, {"", call_id_grammar()}, {"[ARGS]", nullptr}, {"", arguments}});
      continue;
    }
    const std::string def = "t" + std::to_string(i);
    repoint_refs(params, "#/$defs/" + def);
    document["$defs"][def] = std::move(params);
    json properties = {{"name", {{"const", tool.name}}}, {arguments_key, {{"$ref", "#/$defs/" + def}}}};
    // Nemo's calls carry their id (its template writes them so); where a model leaves it out,
    // the server makes one.
    if (format == ToolCallFormat::MistralList) properties["id"] = {{"type", "string"}, {"pattern", kCallIdPattern}};
    document["anyOf"].push_back(
        {{"type", "object"}, {"properties", std::move(properties)}, {"required", {"name", arguments_key}}});
  }
  if (document["anyOf"].empty() && named_calls.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      only ? "no tool is named '" + *only + "'" : std::string("there are no tools to call"));
  }
  if (is_section(format)) {
    out.grammar = detail::section_calls_grammar(format, named_calls, allows_several);
    return out;
  }
  if (format == ToolCallFormat::MistralNamed || format == ToolCallFormat::Harmony || is_tagged(format) ||
      format == ToolCallFormat::Gemma4) {
    out.grammar = JsonGrammar::sequences(named_calls, "a call of the tools");
    return out;
  }
  if (format == ToolCallFormat::MistralList || format == ToolCallFormat::GraniteList) {
    json call = std::move(document["anyOf"]);
    document.erase("anyOf");
    document["type"] = "array";
    document["items"] = {{"anyOf", std::move(call)}};
    document["minItems"] = 1;
    if (!allows_several) document["maxItems"] = 1;
  }
  Result<std::shared_ptr<const JsonGrammar>> grammar = JsonGrammar::from_schema(document.dump());
  if (!grammar) return make_error(ErrorCode::InvalidArgument, "the tools: " + grammar.error_message());
  out.grammar = format == ToolCallFormat::Hermes
                    ? JsonGrammar::framed(**grammar, "\n", "\n" + std::string(kToolCallClose), "a call of the tools")
                    : JsonGrammar::framed(**grammar, "", "", "a call of the tools");
  return out;
}

ToolReply split_tool_calls(std::string_view reply, bool is_streaming, ToolCallFormat format,
                           const ToolArgumentTypes* types) {
  if (format == ToolCallFormat::QwenXml) return detail::split_xml_calls(reply, is_streaming, types);
  if (format == ToolCallFormat::GlmXml || format == ToolCallFormat::Glm47Xml) {
    return detail::split_glm_calls(reply, is_streaming, types, format == ToolCallFormat::Glm47Xml);
  }
  if (is_section(format)) return detail::split_section_calls(reply, is_streaming, format);
  if (format == ToolCallFormat::Gemma4) return detail::split_gemma4_calls(reply, is_streaming);
  if (format == ToolCallFormat::MistralList) return split_json_list(reply, is_streaming, kMistralCalls);
  if (format == ToolCallFormat::GraniteList) return split_json_list(reply, is_streaming, kGraniteCalls);
  if (format == ToolCallFormat::Harmony) return split_harmony_calls(reply, is_streaming);
  if (format == ToolCallFormat::MistralNamed) return split_mistral_named(reply, is_streaming);
  ToolReply out;
  if (format == ToolCallFormat::Llama3) {
    const std::string_view text = trim(reply);
    if (std::optional<HeldCall> held = read_held_call(text, "parameters")) {
      out.calls.push_back(std::move(held->call));
      return out;
    }
    if (may_be_llama_call(text)) {
      if (is_streaming) return out;  // told apart when the reply ends
      if (std::optional<ParsedToolCall> call = parse_call(text, "parameters", /*needs_arguments=*/true)) {
        out.calls.push_back(std::move(*call));
        return out;
      }
    }
    out.content = std::string(reply);
    return out;
  }
  size_t pos = 0;
  while (pos <= reply.size()) {
    const size_t open = append_text_before(reply, pos, kToolCallOpen, is_streaming, &out.content);
    if (open == std::string_view::npos) break;
    const size_t body = open + kToolCallOpen.size();
    if (std::optional<HeldCall> held = read_held_call(reply.substr(body), "arguments")) {
      // While streaming, the last call's arguments perhaps still growing. The block ends after
      // them ("}\n</tool_call>"); a reply that ends first (or cut off) ends with the call.
      out.calls.push_back(std::move(held->call));
      const size_t close =
          held->end == std::string_view::npos ? held->end : reply.find(kToolCallClose, body + held->end);
      if (close == std::string_view::npos) break;
      pos = close + kToolCallClose.size();
      continue;
    }
    const size_t close = reply.find(kToolCallClose, body);
    if (close == std::string_view::npos) {
      if (!is_streaming) out.content += reply.substr(open);  // cut off: the text as written
      break;
    }
    if (std::optional<ParsedToolCall> call = parse_call(reply.substr(body, close - body))) {
      out.calls.push_back(std::move(*call));
    } else {
      out.content += reply.substr(open, close + kToolCallClose.size() - open);
    }
    pos = close + kToolCallClose.size();
  }
  // White space around the calls (the newline between two) is not an answer; while streaming
  // it waits until text follows it.
  if (is_streaming || !out.calls.empty()) {
    const size_t last = out.content.find_last_not_of(kWhitespace);
    out.content.erase(last == std::string::npos ? 0 : last + 1);
  }
  return out;
}

}  // namespace iwb
