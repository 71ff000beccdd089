// Qwen3-Coder's chat template (qwen_xml_template.h), reproduced as jinja2 renders it.
#include "chat/qwen_xml_template.h"

#include "chat/python_text.h"
#include "iwb/engine/chat/tool_calls.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace iwb::detail {
namespace {

using ordered_json = nlohmann::ordered_json;

// Python's repr() of a float: the shortest digits that read back as the same double, written
// fixed from 1e-4 up to 1e16 (with ".0" when whole) and with an exponent of two digits or more
// beyond.
std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s(buf);
  const bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  const size_t e = s.find('e');
  const int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // the point
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    const auto whole = static_cast<size_t>(exponent + 1);
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (digits.size() <= whole) {
      out = digits + std::string(whole - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, whole) + "." + digits.substr(whole);
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char mark[16];
    std::snprintf(mark, sizeof mark, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += mark;
  }
  return (negative ? "-" : "") + out;
}

std::string python_str(const ordered_json& v, bool is_top) {
  if (v.is_string()) return is_top ? v.get<std::string>() : python_repr(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_number_float()) return python_float(v.get<double>());
  if (v.is_number()) return v.dump();
  std::string out(1, v.is_array() ? '[' : '{');
  bool first = true;
  for (const auto& [key, value] : v.items()) {
    if (!first) out += ", ";
    first = false;
    if (v.is_object()) out += python_repr(key) + ": ";
    out += python_str(value, false);
  }
  return out + (v.is_array() ? ']' : '}');
}

// A value as the template writes it: `tojson` for mappings and lists, else `string`.
std::string template_value(const ordered_json& v) {
  if (v.is_object() || v.is_array())
    return template_tojson(v.dump(-1, ' ', false, ordered_json::error_handler_t::replace));
  return python_str(v, true);
}

// The template's render_extra_keys: each key not handled as a tag of its own.
std::string extra_keys(const ordered_json& dict, std::initializer_list<std::string_view> handled) {
  std::string out;
  if (!dict.is_object()) return out;
  for (const auto& [key, value] : dict.items()) {
    if (std::find(handled.begin(), handled.end(), key) != handled.end()) continue;
    out += "\n<" + key + ">" + template_value(value) + "</" + key + ">";
  }
  return out;
}

std::string text_of(const ordered_json& v) { return python_str(v, true); }

std::string render_tool(const std::string& tool_json) {
  ordered_json tool = ordered_json::parse(tool_json, nullptr, /*allow_exceptions=*/false);
  if (tool.is_object() && tool.contains("function")) tool = tool["function"];
  if (!tool.is_object()) tool = ordered_json::object();
  std::string s = "\n<function>\n<name>" + (tool.contains("name") ? text_of(tool["name"]) : "") + "</name>";
  if (tool.contains("description"))
    s += "\n<description>" + python_strip(text_of(tool["description"])) + "</description>";
  s += "\n<parameters>";
  const ordered_json parameters = tool.contains("parameters") ? tool["parameters"] : ordered_json();
  if (parameters.is_object() && parameters.contains("properties") && parameters["properties"].is_object()) {
    for (const auto& [name, fields] : parameters["properties"].items()) {
      s += "\n<parameter>\n<name>" + name + "</name>";
      if (fields.is_object() && fields.contains("type")) s += "\n<type>" + text_of(fields["type"]) + "</type>";
      if (fields.is_object() && fields.contains("description")) {
        s += "\n<description>" + python_strip(text_of(fields["description"])) + "</description>";
      }
      s += extra_keys(fields, {"name", "type", "description"});
      s += "\n</parameter>";
    }
  }
  s += extra_keys(parameters, {"type", "properties"});
  s += "\n</parameters>";
  s += extra_keys(tool, {"type", "name", "description", "parameters"});
  return s + "\n</function>";
}

constexpr std::string_view kDefaultSystem =
    "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks.";
constexpr std::string_view kToolInstructions =
    "\n</tools>\n\nIf you choose to call a tool ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: the tool calling block MUST begin with an opening "
    "<tool_call> tag and end with a closing </tool_call> tag.\n- Required parameters MUST be specified\n- You may "
    "provide optional reasoning for your function call in natural language BEFORE the function call, but NOT "
    "after\n- If there is no function call available, answer the question like normal with your current knowledge "
    "and do not tell the user about function calls\n</IMPORTANT>";

std::string render_calls(const ChatMessage& m) {
  std::string s = "<|im_start|>assistant";
  if (const std::string content = python_strip(m.content); !content.empty()) s += "\n" + content + "\n";
  for (const ChatToolCall& call : m.tool_calls) {
    s += "\n<tool_call>\n<function=" + call.name + ">\n" + qwen_xml_parameters(call.arguments) +
         "</function>\n</tool_call>";
  }
  return s + "<|im_end|>\n";
}

}  // namespace

std::string qwen_xml_parameters(std::string_view arguments_json) {
  const ordered_json arguments = ordered_json::parse(arguments_json, nullptr, /*allow_exceptions=*/false);
  std::string s;
  if (!arguments.is_object()) return s;
  for (const auto& [key, value] : arguments.items()) {
    s += "<parameter=" + key + ">\n" + template_value(value) + "\n</parameter>\n";
  }
  return s;
}

std::string python_str(std::string_view json_text) {
  const ordered_json v = ordered_json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  return v.is_discarded() ? std::string(json_text) : python_str(v, true);
}

std::string render_qwen3_coder(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (has_system) {
    s += "<|im_start|>system\n" + messages[0].content;
  } else if (!o.tools.empty()) {
    s += "<|im_start|>system\n" + std::string(kDefaultSystem);
  }
  if (!o.tools.empty()) {
    s += "\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>";
    for (const std::string& tool : o.tools) s += render_tool(tool);
    s += kToolInstructions;
  }
  if (has_system || !o.tools.empty()) s += "<|im_end|>\n";
  // The loop runs over the messages after a first system message: a result first among them
  // opens no user turn (the template's loop.previtem is undefined there).
  const size_t first = has_system ? 1 : 0;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      s += render_calls(m);
    } else if (m.role == "tool") {
      if (i > first && messages[i - 1].role != "tool") s += "<|im_start|>user\n";
      s += "<tool_response>\n" + m.content + "\n</tool_response>\n";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") s += "<|im_end|>\n";
    } else {
      s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
  }
  if (o.add_generation_prompt) s += "<|im_start|>assistant\n";
  return s;
}

}  // namespace iwb::detail
