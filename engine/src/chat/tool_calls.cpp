// Tool calls: definitions as Hugging Face's `tojson` writes them, the grammar of one call, and a
// reply split into text and calls (Qwen2.5 / Hermes <tool_call> blocks).
#include "iwb/engine/chat/tool_calls.h"

#include <nlohmann/json.hpp>

namespace iwb {
namespace {

using ordered_json = nlohmann::ordered_json;
using json = nlohmann::json;

constexpr std::string_view kWhitespace = " \t\r\n";

void write_python_json(const ordered_json& v, std::string* out) {
  if (v.is_object()) {
    *out += '{';
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      if (!first) *out += ", ";
      first = false;
      *out += ordered_json(key).dump(-1, ' ', false, ordered_json::error_handler_t::replace) + ": ";
      write_python_json(value, out);
    }
    *out += '}';
  } else if (v.is_array()) {
    *out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) *out += ", ";
      write_python_json(v[i], out);
    }
    *out += ']';
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

// One <tool_call> block's text as a call, when it is one.
std::optional<ParsedToolCall> parse_call(std::string_view body) {
  const ordered_json call = ordered_json::parse(trim(body), nullptr, /*allow_exceptions=*/false);
  if (!call.is_object()) return std::nullopt;
  const auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  ParsedToolCall out;
  out.name = name->get<std::string>();
  const auto arguments = call.find("arguments");
  if (arguments == call.end() || arguments->is_null()) {
    out.arguments = "{}";
  } else if (arguments->is_string()) {
    out.arguments = arguments->get<std::string>();  // already JSON text, as some models write it
  } else {
    out.arguments = arguments->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
  return out;
}

// How many bytes at the end of `text` begin `marker` (a marker cut by the stream).
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

std::string template_tojson(std::string_view json_text) {
  const ordered_json value = ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return ordered_json(std::string(json_text)).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
  std::string out;
  write_python_json(value, &out);
  return out;
}

Result<ToolGrammar> tool_call_grammar(const std::vector<ToolDefinition>& tools, std::optional<std::string> only) {
  ToolGrammar out;
  json document = {{"$defs", json::object()}, {"anyOf", json::array()}};
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolDefinition& tool = tools[i];
    if (only && tool.name != *only) continue;
    const std::string params_text = tool.parameters_json.empty() ? std::string(R"({"type": "object"})") : tool.parameters_json;
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
         {"properties", {{"name", {{"const", tool.name}}}, {"arguments", {{"$ref", "#/$defs/" + def}}}}},
         {"required", {"name", "arguments"}}});
  }
  if (document["anyOf"].empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      only ? "no tool is named '" + *only + "'" : std::string("there are no tools to call"));
  }
  Result<std::shared_ptr<const JsonGrammar>> grammar = JsonGrammar::from_schema(document.dump());
  if (!grammar) return make_error(ErrorCode::InvalidArgument, "the tools: " + grammar.error_message());
  out.grammar = JsonGrammar::framed(**grammar, "\n", "\n" + std::string(kToolCallClose), "a call of the tools");
  return out;
}

ToolReply split_tool_calls(std::string_view reply, bool is_streaming) {
  ToolReply out;
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
