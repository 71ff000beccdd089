// Tool calls: definitions as Hugging Face's `tojson` writes them, the grammar of one call, and a
// reply split into text and calls (Qwen's <tool_call> blocks, Llama 3's whole-reply call).
#include "iwb/engine/chat/tool_calls.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace iwb {
namespace {

using ordered_json = nlohmann::ordered_json;
using json = nlohmann::json;

constexpr std::string_view kWhitespace = " \t\r\n";

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

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kWhitespace) - begin + 1);
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
  ParsedToolCall& call = held.call;
  call.name = name.get<std::string>();
  size_t depth = 0;
  JsonStringTracker strings;
  for (; i < body.size(); ++i) {
    const char c = body[i];
    if (strings.take(c)) {
      call.arguments += c;
      continue;
    }
    if (kWhitespace.find(c) != std::string_view::npos) continue;
    call.arguments += c;
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && --depth == 0) {
      held.end = i + 1;
      break;
    }
  }
  return held;
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

// How many bytes at the end of `text` begin `marker` (a marker cut by the stream).
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
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
  // Llama 3: {"name" at the reply's start, so that an answer that is other JSON stays free.
  if (format == ToolCallFormat::Llama3) return {std::string(kLlamaCallStart), true, true, false};
  return {std::string(kToolCallOpen), false, false, true};
}

Result<ToolGrammar> tool_call_grammar(const std::vector<ToolDefinition>& tools, std::optional<std::string> only,
                                      ToolCallFormat format) {
  const char* arguments_key = format == ToolCallFormat::Llama3 ? "parameters" : "arguments";
  ToolGrammar out;
  json document = {{"$defs", json::object()}, {"anyOf", json::array()}};
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
    const std::string def = "t" + std::to_string(i);
    repoint_refs(params, "#/$defs/" + def);
    document["$defs"][def] = std::move(params);
    document["anyOf"].push_back(
        {{"type", "object"},
         {"properties", {{"name", {{"const", tool.name}}}, {arguments_key, {{"$ref", "#/$defs/" + def}}}}},
         {"required", {"name", arguments_key}}});
  }
  if (document["anyOf"].empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      only ? "no tool is named '" + *only + "'" : std::string("there are no tools to call"));
  }
  Result<std::shared_ptr<const JsonGrammar>> grammar = JsonGrammar::from_schema(document.dump());
  if (!grammar) return make_error(ErrorCode::InvalidArgument, "the tools: " + grammar.error_message());
  out.grammar = format == ToolCallFormat::Llama3
                    ? JsonGrammar::framed(**grammar, "", "", "a call of the tools")
                    : JsonGrammar::framed(**grammar, "\n", "\n" + std::string(kToolCallClose), "a call of the tools");
  return out;
}

ToolReply split_tool_calls(std::string_view reply, bool is_streaming, ToolCallFormat format) {
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
    const size_t open = reply.find(kToolCallOpen, pos);
    if (open == std::string_view::npos) {
      std::string_view rest = reply.substr(pos);
      if (is_streaming) rest.remove_suffix(partial_marker(rest, kToolCallOpen));
      out.content += rest;
      break;
    }
    out.content += reply.substr(pos, open - pos);
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
