// gpt-oss's chat template (harmony) as its Jinja text writes it, tools included (checked with
// jinja2: docs/tool-calling.md): the fixed system block (its "Current date" line when the
// template has one), the developer message with the system prompt as instructions and the
// tools as a TypeScript namespace (render_typescript_type and render_tool_namespace, their
// white space quirks included), past calls as commentary messages to=functions.NAME, results
// from functions.NAME as JSON strings, final answers in the final channel.
#include "chat/harmony_template.h"

#include "iwb/engine/chat/tool_calls.h"

#include <nlohmann/json.hpp>

namespace iwb::detail {
namespace {

using ordered_json = nlohmann::ordered_json;

// Python's str() of a JSON value, as Jinja's join and "+" write one that is not a string.
std::string python_str(const ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return template_tojson(v.dump());
}

bool is_true(const ordered_json& v, const char* key) {  // Jinja's truth of spec.key
  const auto it = v.find(key);
  if (it == v.end() || it->is_null()) return false;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_string() || it->is_array() || it->is_object()) return !it->empty();
  if (it->is_number_integer()) return it->get<int64_t>() != 0;
  if (it->is_number()) return it->get<double>() != 0;
  return false;
}

std::string type_name(const ordered_json& spec) {
  const auto it = spec.find("type");
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool is_required(const ordered_json& spec, const std::string& name) {
  const auto required = spec.find("required");
  if (required == spec.end() || !required->is_array()) return false;
  for (const ordered_json& r : *required) {
    if (r.is_string() && r.get<std::string>() == name) return true;
  }
  return false;
}

std::string typescript_type(const ordered_json& spec, int depth);

std::string nullable(const ordered_json& spec) { return is_true(spec, "nullable") ? " | null" : ""; }

std::string array_type(const ordered_json& spec, int depth) {
  if (!is_true(spec, "items")) return "any[]" + nullable(spec);
  const ordered_json& items = spec["items"];
  const std::string item = items.is_object() ? type_name(items) : std::string();
  std::string s;
  if (item == "string") {
    s = "string[]";
  } else if (item == "number" || item == "integer") {
    s = "number[]";
  } else if (item == "boolean") {
    s = "boolean[]";
  } else {
    const std::string inner = typescript_type(items, depth + 1);
    s = inner == "object | object" || inner.size() > 50 ? "any[]" : inner + "[]";
  }
  return s + nullable(spec);
}

std::string one_of_type(const ordered_json& spec, int depth) {
  // The template's "any" for unions of objects never fires under Jinja's scoping (a variable set
  // inside a loop does not leave it): every variant is written.
  std::string s;
  const ordered_json& variants = spec["oneOf"];
  for (size_t i = 0; i < variants.size(); ++i) {
    const ordered_json& variant = variants[i];
    s += typescript_type(variant, depth + 1);
    if (variant.is_object() && is_true(variant, "description")) s += "// " + python_str(variant["description"]);
    if (variant.is_object() && variant.contains("default")) {
      s += "                    // default: " + template_tojson(variant["default"].dump());
    }
    if (i + 1 < variants.size()) s += " | \n";
  }
  return s;
}

std::string object_type(const ordered_json& spec, int depth) {
  if (!is_true(spec, "properties") || !spec["properties"].is_object()) return "object";
  std::string s = "{\n";
  const ordered_json& properties = spec["properties"];
  size_t i = 0;
  for (const auto& [name, property] : properties.items()) {
    s += name + (is_required(spec, name) ? "" : "?") + ": ";
    // `{{ render_typescript_type(...) }}` on a line of its own: its indentation is written too.
    s += "\n                " + typescript_type(property, depth + 1);
    if (++i < properties.size()) s += ", ";
  }
  return s + "}";
}

std::string typescript_type(const ordered_json& spec, int depth) {
  if (!spec.is_object() || depth > 64) return "any";
  const auto type = spec.find("type");
  const std::string name = type_name(spec);
  if (name == "array") return array_type(spec, depth);
  if (type != spec.end() && type->is_array() && !type->empty()) {
    std::string s;
    for (size_t i = 0; i < type->size(); ++i) s += (i > 0 ? " | " : "") + python_str((*type)[i]);
    return s;
  }
  if (is_true(spec, "oneOf") && spec["oneOf"].is_array()) return one_of_type(spec, depth);
  if (name == "string") {
    if (is_true(spec, "enum") && spec["enum"].is_array()) {
      std::string s = "\"";
      for (size_t i = 0; i < spec["enum"].size(); ++i) s += (i > 0 ? "\" | \"" : "") + python_str(spec["enum"][i]);
      return s + "\"";
    }
    return "string" + nullable(spec);
  }
  if (name == "number" || name == "integer") return "number";
  if (name == "boolean") return "boolean";
  if (name == "object") return object_type(spec, depth);
  return "any";
}

// render_tool_namespace("functions", tools).
std::string tool_namespace(const std::vector<std::string>& tools) {
  std::string s = "## functions\n\nnamespace functions {\n\n";
  for (const std::string& tool_json : tools) {
    const ordered_json tool = ordered_json::parse(tool_json, nullptr, /*allow_exceptions=*/false);
    const ordered_json function =
        tool.is_object() && tool.contains("function") ? tool["function"] : ordered_json::object();
    const auto text = [&](const char* key) {
      return function.is_object() && function.contains(key) ? python_str(function[key]) : std::string();
    };
    s += "// " + text("description") + "\n";
    s += "type " + text("name") + " = ";
    const ordered_json parameters =
        function.is_object() && function.contains("parameters") ? function["parameters"] : ordered_json();
    if (!parameters.is_object() || !is_true(parameters, "properties") || !parameters["properties"].is_object()) {
      s += "() => any;\n\n";
      continue;
    }
    s += "(_: {\n";
    for (const auto& [name, spec] : parameters["properties"].items()) {
      if (spec.is_object() && is_true(spec, "description")) s += "// " + python_str(spec["description"]) + "\n";
      s += name + (is_required(parameters, name) ? "" : "?") + ": " + typescript_type(spec, 0);
      if (spec.is_object() && spec.contains("default")) {
        const ordered_json& value = spec["default"];
        if (is_true(spec, "enum")) {
          s += ", // default: " + python_str(value);
        } else if (is_true(spec, "oneOf")) {
          s += "// default: " + python_str(value);
        } else {
          s += ", // default: " + template_tojson(value.dump());
        }
      }
      s += ",\n";
    }
    s += "}) => any;\n\n";
  }
  return s + "} // namespace functions";
}

}  // namespace

std::string harmony_typescript_type(const std::string& schema_json) {
  return typescript_type(ordered_json::parse(schema_json, nullptr, /*allow_exceptions=*/false), 0);
}

std::string render_harmony(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\n";
  if (!o.harmony_date.empty()) s += "Current date: " + o.harmony_date + "\n";
  s += "\nReasoning: " + (o.reasoning_effort.empty() ? std::string("medium") : o.reasoning_effort) +
       "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (!o.tools.empty()) s += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  s += "<|end|>";
  // The first message, when it is the system's, is the developer's instructions.
  const bool has_system = !messages.empty() && messages[0].role == "system" && !messages[0].content.empty();
  if (has_system || !o.tools.empty()) {
    s += "<|start|>developer<|message|>";
    if (has_system) s += "# Instructions\n\n" + messages[0].content + "\n\n";
    if (!o.tools.empty()) s += "# Tools\n\n" + tool_namespace(o.tools);
    s += "<|end|>";
  }
  std::string last_call;  // the tool a result answers: the latest call's
  const size_t first = !messages.empty() && messages[0].role == "system" ? 1 : 0;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      s += "<|start|>user<|message|>" + m.content + "<|end|>";
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      // The turn's text is its reasoning, kept until a later turn answers.
      bool has_later_answer = false;
      for (size_t k = i + 1; k < messages.size(); ++k) {
        has_later_answer = has_later_answer || (messages[k].role == "assistant" && messages[k].tool_calls.empty());
      }
      if (!m.content.empty() && !has_later_answer) {
        s += "<|start|>assistant<|channel|>analysis<|message|>" + m.content + "<|end|>";
      }
      const ChatToolCall& call = m.tool_calls[0];
      s += "<|start|>assistant to=functions." + call.name + "<|channel|>commentary json<|message|>" +
           template_tojson(call.arguments) + "<|call|>";
      last_call = call.name;
    } else if (m.role == "assistant") {
      const bool is_training_end = i + 1 == messages.size() && !o.add_generation_prompt;
      s += "<|start|>assistant<|channel|>final<|message|>" + m.content + (is_training_end ? "<|return|>" : "<|end|>");
      last_call.clear();
    } else if (m.role == "tool") {
      s += "<|start|>functions." + last_call + " to=assistant<|channel|>commentary<|message|>" +
           template_tojson_string(m.content) + "<|end|>";
    }
  }
  if (o.add_generation_prompt) s += "<|start|>assistant";
  return s;
}

std::optional<std::string> harmony_refusal(const std::vector<ChatMessage>& messages) {
  bool has_call = false;
  for (const ChatMessage& m : messages) {
    if (m.role == "assistant" && (m.content.find("<|channel|>analysis<|message|>") != std::string::npos ||
                                  m.content.find("<|channel|>final<|message|>") != std::string::npos)) {
      return "gpt-oss's template takes an assistant message's text without <|channel|> tags (the final answer as "
             "content)";
    }
    if (m.tool_calls.size() > 1) return "gpt-oss's template takes one tool call per assistant message";
    if (m.role == "assistant") has_call = !m.tool_calls.empty();
    if (m.role == "tool" && !has_call) {
      return "gpt-oss's template: a tool message needs an earlier assistant message with a tool call";
    }
  }
  return std::nullopt;
}

}  // namespace iwb::detail
