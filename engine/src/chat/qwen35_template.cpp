// Qwen3.5's chat template (qwen35_template.h), reproduced as jinja2 renders it: the system turn
// with the tools, the last user query, then each message and the generation prompt.
#include "chat/qwen35_template.h"

#include "chat/python_text.h"
#include "chat/qwen_xml_template.h"
#include "iwb/engine/chat/tool_calls.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace iwb::detail {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

// The template's call instructions, after the tools.
constexpr std::string_view kToolInstructions =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in "
    "natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer "
    "the question like normal with your current knowledge and do not tell the user about function calls\n"
    "</IMPORTANT>";

bool is_wrapped_response(std::string_view text) {
  return text.starts_with("<tool_response>") && text.ends_with("</tool_response>");
}

// The template's ns.last_query_index: the last user message whose trimmed text is not a
// <tool_response> block (a client's own wrapping of a result); none: nullopt (it refuses).
std::optional<size_t> last_query(const std::vector<ChatMessage>& messages) {
  for (size_t k = messages.size(); k-- > 0;) {
    if (messages[k].role == "user" && !is_wrapped_response(python_strip(messages[k].content))) return k;
  }
  return std::nullopt;
}

std::string_view lstrip_newlines(std::string_view s) {
  s.remove_prefix(std::min(s.find_first_not_of('\n'), s.size()));
  return s;
}

// An assistant turn: its reasoning from reasoning_content, else out of its text (the text before
// the first </think>, after the last <think> there; the text itself after the last </think>).
std::string render_assistant(const ChatMessage& m, bool shows_reasoning) {
  std::string content = python_strip(m.content);
  std::string reasoning;
  if (m.reasoning_content) {
    reasoning = *m.reasoning_content;
  } else if (const size_t close = content.find(kThinkClose); close != std::string::npos) {
    std::string_view before = std::string_view(content).substr(0, close);
    if (const size_t open = before.rfind(kThinkOpen); open != std::string_view::npos) {
      before.remove_prefix(open + kThinkOpen.size());
    }
    reasoning = std::string(before);  // the template's rstrip and lstrip of newlines: within the trim below
    const size_t last_close = content.rfind(kThinkClose) + kThinkClose.size();
    content = std::string(lstrip_newlines(std::string_view(content).substr(last_close)));
  }
  std::string s = "<|im_start|>assistant\n";
  if (shows_reasoning) s += "<think>\n" + python_strip(reasoning) + "\n</think>\n\n";
  s += content;
  const bool has_text = !python_strip(content).empty();
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    const ChatToolCall& call = m.tool_calls[k];
    s += k > 0 ? "\n" : has_text ? "\n\n" : "";
    s += "<tool_call>\n<function=" + call.name + ">\n" + qwen_xml_parameters(call.arguments) +
         "</function>\n</tool_call>";
  }
  return s + "<|im_end|>\n";
}

}  // namespace

std::string render_qwen35(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const std::string system = has_system ? python_strip(messages[0].content) : std::string();
  if (!o.tools.empty()) {
    s += "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
    for (const std::string& tool : o.tools) s += "\n" + template_tojson(tool);
    s += kToolInstructions;
    if (!system.empty()) s += "\n\n" + system;
    s += "<|im_end|>\n";
  } else if (has_system) {
    s += "<|im_start|>system\n" + system + "<|im_end|>\n";
  }
  // Without a user query the template refuses (qwen35_refusal); rendered anyway, its default
  // (the last message) stands.
  const size_t query = last_query(messages).value_or(messages.empty() ? 0 : messages.size() - 1);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      s += "<|im_start|>user\n" + python_strip(m.content) + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      s += render_assistant(m, i > query);
    } else if (m.role == "tool") {
      // loop.previtem: a result first in the conversation opens no user turn.
      if (i > 0 && messages[i - 1].role != "tool") s += "<|im_start|>user";
      s += "\n<tool_response>\n" + python_strip(m.content) + "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") s += "<|im_end|>\n";
    }
    // system: written above (the first), refused elsewhere.
  }
  if (o.add_generation_prompt) {
    const bool is_thinking = o.enable_thinking.value_or(!o.is_thinking_opt_in);
    s += is_thinking ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  }
  return s;
}

std::optional<std::string> qwen35_refusal(const std::vector<ChatMessage>& messages) {
  if (!last_query(messages)) return "Qwen3.5's template: No user query found in messages.";
  for (size_t i = 1; i < messages.size(); ++i) {
    if (messages[i].role == "system") return "Qwen3.5's template: System message must be at the beginning.";
  }
  for (const ChatMessage& m : messages) {
    for (const ChatToolCall& call : m.tool_calls) {
      if (nlohmann::ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false).is_object()) continue;
      return "Qwen3.5's template takes a tool call's arguments only as a JSON object (call '" + call.name + "')";
    }
  }
  return std::nullopt;
}

}  // namespace iwb::detail
