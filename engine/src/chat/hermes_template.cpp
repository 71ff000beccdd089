// Hermes 2 Pro's and Hermes 3's tool-use template as jinja2 renders it (checked:
// docs/tool-calling.md): a ChatML system turn that always lists the tools — each with a
// Python-style signature and an "Args:" list built by its json_to_python_type macro, then its
// parameters as JSON — and asks for <tool_call> blocks; calls and <tool_response> blocks as the
// template writes them, its white space included.
#include "chat/hermes_template.h"

#include "chat/python_text.h"

#include "iwb/engine/chat/tool_calls.h"

#include <nlohmann/json.hpp>

namespace iwb::detail {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string python_type(const ordered_json& spec, int depth) {
  if (!spec.is_object() || depth > 64) return "Union[]";  // no "type": Jinja's Undefined iterates as empty
  const auto type = spec.find("type");
  if (type == spec.end()) return "Union[]";
  if (type->is_string()) {
    const std::string t = type->get<std::string>();
    if (t == "string") return "str";
    if (t == "number") return "float";
    if (t == "integer") return "int";
    if (t == "boolean") return "bool";
    // `json_spec|items` hands the macro a list of pairs, whose type is undefined.
    if (t == "array") return "list[Union[]]";
    if (t == "object") {
      const auto additional = spec.find("additionalProperties");
      return additional == spec.end() ? "dict" : "dict[str, " + python_type(*additional, depth + 1) + "]";
    }
    return "Any";  // another name ("null"): the template recurses over its letters without end
  }
  if (type->is_array()) {
    std::string s = "Union[";
    for (size_t i = 0; i < type->size(); ++i) {
      s += (i > 0 ? "," : "") + python_type(ordered_json{{"type", (*type)[i]}}, depth + 1);
    }
    return s + "]";
  }
  return "Any";
}

std::string text_of(const ordered_json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return {};
  return it->is_string() ? it->get<std::string>() : template_tojson(it->dump());
}

std::string tool_entry(const std::string& tool_json) {
  const ordered_json whole = ordered_json::parse(tool_json, nullptr, /*allow_exceptions=*/false);
  const ordered_json tool = whole.is_object() && whole.contains("function") ? whole["function"] : whole;
  if (!tool.is_object()) return {};
  const ordered_json parameters = tool.contains("parameters") ? tool["parameters"] : ordered_json::object();
  const ordered_json properties =
      parameters.is_object() && parameters.contains("properties") && parameters["properties"].is_object()
          ? parameters["properties"]
          : ordered_json::object();
  const std::string name = text_of(tool, "name");
  std::string s =
      "{\"type\": \"function\", \"function\": {\"name\": \"" + name + "\", \"description\": \"" + name + "(";
  size_t i = 0;
  for (const auto& [param, spec] : properties.items()) s += (i++ > 0 ? ", " : "") + param + ": " + python_type(spec, 0);
  s += ")";
  const bool has_return = tool.contains("return");
  if (has_return) s += " -> " + python_type(tool["return"], 0);
  s += " - " + text_of(tool, "description") + "\n\n";
  i = 0;
  for (const auto& [param, spec] : properties.items()) {
    if (i++ == 0) s += "    Args:\n";
    s += "        " + param + "(" + python_type(spec, 0) +
         "): " + (spec.is_object() ? python_strip(text_of(spec, "description")) : "");
  }
  if (has_return && tool["return"].is_object() && tool["return"].contains("description")) {
    s += "\n    Returns:\n        " + text_of(tool["return"], "description");
  }
  s += "\", \"parameters\": ";
  s += properties.empty() ? "{}" : template_tojson(parameters.dump());
  return s + "}";
}

}  // namespace

std::string hermes_python_type(const std::string& schema_json) {
  return python_type(ordered_json::parse(schema_json, nullptr, /*allow_exceptions=*/false), 0);
}

std::string render_hermes(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s = o.bos_text +
                  "<|im_start|>system\nYou are a function calling AI model. You are provided with function signatures "
                  "within <tools></tools> XML tags. You may call one or more functions to assist with the user query. "
                  "Don't make assumptions about what values to plug into functions. Here are the available tools: "
                  "<tools> ";
  for (size_t i = 0; i < o.tools.size(); ++i) s += (i > 0 ? "\n" : "") + tool_entry(o.tools[i]);
  s += " </tools>Use the following pydantic model json schema for each tool call you will make: {\"properties\": "
       "{\"name\": {\"title\": \"Name\", \"type\": \"string\"}, \"arguments\": {\"title\": \"Arguments\", \"type\": "
       "\"object\"}}, \"required\": [\"name\", \"arguments\"], \"title\": \"FunctionCall\", \"type\": \"object\"}}\n"
       "For each function call return a json object with function name and arguments within <tool_call></tool_call> "
       "XML tags as follows:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-dict>}\n"
       "</tool_call><|im_end|>\n";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      s += "<|im_start|>assistant";
      for (const ChatToolCall& call : m.tool_calls) {
        s += "\n<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": " + template_tojson(call.arguments) +
             "}\n</tool_call>";
      }
      s += "<|im_end|>\n";
    } else if (m.role == "tool") {
      // A run of results shares one tool turn; its end has no newline after it.
      if (i > 0 && messages[i - 1].role != "tool") s += "<|im_start|>tool\n";
      const bool is_last = i + 1 == messages.size();
      s += "<tool_response>\n" + m.content + (is_last ? "\n</tool_response>" : "\n</tool_response>\n");
      if (is_last || messages[i + 1].role != "tool") s += "<|im_end|>";
    } else {
      s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
  }
  if (o.add_generation_prompt) s += "<|im_start|>assistant\n";
  return s;
}

}  // namespace iwb::detail
