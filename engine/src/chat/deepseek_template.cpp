// DeepSeek V3.1's chat template (deepseek_template.h), reproduced as jinja2 renders llama.cpp's
// models/templates/deepseek-ai-DeepSeek-V3.1.jinja.
#include "chat/deepseek_template.h"

#include "iwb/engine/chat/tool_calls.h"

#include <nlohmann/json.hpp>

namespace iwb::detail {
namespace {

constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kEndOfSentence = "<｜end▁of▁sentence｜>";
constexpr std::string_view kOutputBegin = "<｜tool▁output▁begin｜>";
constexpr std::string_view kOutputEnd = "<｜tool▁output▁end｜>";

// One past call: its marker, name, separator, the arguments as tojson writes the object, end.
std::string render_call(const ChatToolCall& call) {
  const CallSectionMarkers& m = kDeepSeekMarkers;
  return std::string(m.call_begin) + call.name + std::string(m.arguments_begin) + template_tojson(call.arguments) +
         std::string(m.call_end);
}

}  // namespace

std::string render_deepseek_v31(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  // The template reads `thinking`, else `enable_thinking`, else false.
  const bool is_thinking = o.enable_thinking.value_or(false);
  std::string s = o.bos_text;
  bool is_first_system = true;
  for (const ChatMessage& m : messages) {
    if (m.role != "system") continue;
    s += (is_first_system ? "" : "\n\n") + m.content;
    is_first_system = false;
  }
  // The template's namespace: after a user turn (is_last_user), after a tool's result (is_tool).
  bool is_last_user = false, is_tool = false;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      is_tool = false;
      is_last_user = true;
      s += std::string(kUser) + m.content;
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      if (is_last_user) s += std::string(kAssistant) + "<think></think>";
      is_last_user = false;
      is_tool = false;
      // The turn's text as it is (no </think> split here), before the section's first call.
      s += m.content + std::string(kDeepSeekMarkers.section_begin);
      for (const ChatToolCall& call : m.tool_calls) s += render_call(call);
      s += std::string(kDeepSeekMarkers.section_end) + std::string(kEndOfSentence);
    } else if (m.role == "assistant") {
      // `message['prefix']` (a continued turn) is not an OpenAI field: never set here.
      if (is_last_user) s += std::string(kAssistant) + "<think></think>";
      is_last_user = false;
      if (is_tool) {
        s += m.content;
        is_tool = false;
      } else {
        // The text after the first </think>, when it has one.
        const size_t close = m.content.find("</think>");
        s += close == std::string::npos ? m.content : m.content.substr(close + 8);
      }
      s += kEndOfSentence;
    } else if (m.role == "tool") {
      is_last_user = false;
      is_tool = true;
      s += std::string(kOutputBegin) + m.content + std::string(kOutputEnd);
    }
  }
  // After a tool's result the template writes no generation prompt: the reply goes on from it.
  if (o.add_generation_prompt && is_last_user && !is_tool) {
    s += std::string(kAssistant) + (is_thinking ? "<think>" : "<think></think>");
  }
  return s;
}

std::optional<std::string> json_arguments_refusal(const std::vector<ChatMessage>& messages,
                                                  std::string_view template_name) {
  for (const ChatMessage& m : messages) {
    for (const ChatToolCall& call : m.tool_calls) {
      if (nlohmann::json::accept(call.arguments)) continue;
      return std::string(template_name) + "'s template takes a tool call's arguments as JSON (call '" + call.name +
             "': " + template_tojson_string(call.arguments.substr(0, 40)) + ")";
    }
  }
  return std::nullopt;
}

}  // namespace iwb::detail
