// GLM-4.5/4.6/4.7's chat templates (glm_template.h), reproduced as jinja2 renders them
// (llama.cpp's models/templates/GLM-4.6.jinja and GLM-4.7-Flash.jinja).
#include "chat/glm_template.h"

#include "chat/python_text.h"
#include "iwb/engine/chat/tool_calls.h"

#include <nlohmann/json.hpp>

namespace iwb::detail {
namespace {

using ordered_json = nlohmann::ordered_json;

// The tools' system turn: its text up to the list, and after it the call format, which 4.7
// writes without newlines between the tags.
constexpr std::string_view kToolsHead =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
    "with function signatures within <tools></tools> XML tags:\n<tools>\n";
constexpr std::string_view kToolsTail =
    "</tools>\n\nFor each function call, output the function name and arguments within the following XML "
    "format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n"
    "<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>";
constexpr std::string_view kToolsTailCompact =
    "</tools>\n\nFor each function call, output the function name and arguments within the following XML "
    "format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value>"
    "<arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>";

// The user index the templates find: the last message whose role is user (-1 with none; a
// tool's result is its own role here, unlike Qwen's user-turn responses).
ptrdiff_t last_user_index(const std::vector<ChatMessage>& messages) {
  for (size_t k = messages.size(); k-- > 0;) {
    if (messages[k].role == "user") return static_cast<ptrdiff_t>(k);
  }
  return -1;
}

// An assistant turn's reasoning and answer as the templates split them: its reasoning_content
// when it has one, else the text before the first </think> (after the last <think> there) and
// the text after the last </think>.
struct Turn {
  std::string reasoning;
  std::string content;
};
Turn split_turn(const ChatMessage& m) {
  constexpr std::string_view kOpen = "<think>", kClose = "</think>";
  Turn t{m.reasoning_content.value_or(""), m.content};
  if (m.reasoning_content || m.content.find(kClose) == std::string::npos) return t;
  std::string before = m.content.substr(0, m.content.find(kClose));
  before.erase(before.find_last_not_of('\n') + 1);  // rstrip('\n'); npos + 1 empties it
  const size_t open = before.rfind(kOpen);
  t.reasoning = open == std::string::npos ? before : before.substr(open + kOpen.size());
  t.reasoning.erase(0, std::min(t.reasoning.size(), t.reasoning.find_first_not_of('\n')));
  t.content = m.content.substr(m.content.rfind(kClose) + kClose.size());
  t.content.erase(0, std::min(t.content.size(), t.content.find_first_not_of('\n')));
  return t;
}

// One past call: <tool_call>NAME, then each argument as <arg_key>/<arg_value> tags (a string's
// value as it is, any other as tojson), then </tool_call>.
std::string render_call(const ChatToolCall& call, bool is_compact) {
  const std::string_view line = is_compact ? "" : "\n";
  std::string s = std::string(line) + "<tool_call>" + call.name + std::string(line);
  const ordered_json arguments = ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (arguments.is_object()) {  // glm_refusal refuses any other value that would be written
    for (const auto& [key, value] : arguments.items()) {
      const std::string text =
          value.is_string() ? value.get<std::string>()
                            : template_tojson(value.dump(-1, ' ', false, ordered_json::error_handler_t::replace));
      s += "<arg_key>" + key + "</arg_key>" + std::string(line) + "<arg_value>" + text + "</arg_value>" +
           std::string(line);
    }
  }
  return s + "</tool_call>";
}

std::string render_assistant(const ChatMessage& m, bool shows_reasoning, bool is_compact) {
  const Turn turn = split_turn(m);
  std::string s = "<|assistant|>";
  // The templates test the reasoning's truth before stripping it: white space alone still opens
  // a (then empty) think block.
  if (shows_reasoning && !turn.reasoning.empty()) {
    s += std::string(is_compact ? "" : "\n") + "<think>" + python_strip(turn.reasoning) + "</think>";
  } else {
    s += is_compact ? "</think>" : "\n<think></think>";
  }
  if (const std::string content = python_strip(turn.content); !content.empty()) {
    s += (is_compact ? "" : "\n") + content;
  }
  for (const ChatToolCall& call : m.tool_calls) s += render_call(call, is_compact);
  return s;
}

}  // namespace

std::string render_glm(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o, bool is_compact) {
  const std::string line = is_compact ? "" : "\n";
  std::string s = "[gMASK]<sop>";
  if (!o.tools.empty()) {
    s += kToolsHead;
    for (const std::string& tool : o.tools) s += template_tojson(tool) + "\n";
    s += is_compact ? kToolsTailCompact : kToolsTail;
  }
  const ptrdiff_t last_user = last_user_index(messages);
  const bool keeps_all_reasoning = is_compact && o.clear_thinking == false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      s += "<|user|>" + line + m.content;
      // 4.5/4.6 turn thinking off per user turn, as their models were trained.
      if (!is_compact && o.enable_thinking == false && !m.content.ends_with("/nothink")) s += "/nothink";
    } else if (m.role == "assistant") {
      const bool shows_reasoning = keeps_all_reasoning || static_cast<ptrdiff_t>(i) > last_user;
      s += render_assistant(m, shows_reasoning, is_compact);
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") s += "<|observation|>";
      s += line + "<tool_response>" + line + m.content + line + "</tool_response>";
    } else if (m.role == "system") {
      s += "<|system|>" + line + m.content;
    }
  }
  if (o.add_generation_prompt) {
    s += "<|assistant|>";
    if (is_compact) {
      s += o.enable_thinking == false ? "</think>" : "<think>";
    } else if (o.enable_thinking == false) {
      s += "\n<think></think>";
    }
  }
  return s;
}

std::optional<std::string> glm_refusal(const std::vector<ChatMessage>& messages, bool is_compact) {
  for (const ChatMessage& m : messages) {
    for (const ChatToolCall& call : m.tool_calls) {
      const ordered_json arguments = ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
      if (arguments.is_object()) continue;
      // 4.5/4.6 write `tc.arguments or {}`: a falsy value is no arguments.
      const bool is_falsy = arguments.is_null() || (arguments.is_array() && arguments.empty()) ||
                            (arguments.is_string() && arguments.get<std::string>().empty()) ||
                            (arguments.is_boolean() && !arguments.get<bool>()) ||
                            (arguments.is_number() && arguments.get<double>() == 0);
      if (!is_compact && is_falsy) continue;
      return "GLM's template takes a tool call's arguments only as a JSON object (call '" + call.name + "')";
    }
  }
  return std::nullopt;
}

}  // namespace iwb::detail
