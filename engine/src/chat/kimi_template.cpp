// Kimi K2's chat templates (deepseek_template.h), reproduced as jinja2 renders llama.cpp's
// models/templates/Kimi-K2-Instruct.jinja, moonshotai-Kimi-K2.jinja and Kimi-K2-Thinking.jinja
// (the Instruct and Thinking ones with a sandbox that lets them change lists: they append and
// pop call ids, which Hugging Face's immutable sandbox refuses).
#include "chat/deepseek_template.h"
#include "iwb/engine/chat/tool_calls.h"

#include <deque>

namespace iwb::detail {
namespace {

using Layout = KimiFormat::Layout;

// A message's header. The first release names roles itself; the later ones write
// `message.name or message.role` (ChatMessage carries no name: the role).
std::string header(const ChatMessage& m) {
  if (m.role == "user") return "<|im_user|>user<|im_middle|>";
  if (m.role == "assistant") return "<|im_assistant|>assistant<|im_middle|>";
  return "<|im_system|>" + m.role + "<|im_middle|>";
}

// The calls' section: each call as functions.NAME:INDEX and its arguments (tojson of the object),
// its id queued for the results that follow. `index`: the call counter (the first release
// counts within the message: the caller passes a fresh one).
std::string render_calls(const ChatMessage& m, int* index, std::deque<std::string>* ids) {
  const CallSectionMarkers& k = kKimiMarkers;
  std::string s(k.section_begin);
  for (const ChatToolCall& call : m.tool_calls) {
    const std::string id = "functions." + call.name + ":" + std::to_string((*index)++);
    ids->push_back(id);
    s += std::string(k.call_begin) + id + std::string(k.arguments_begin) + template_tojson(call.arguments) +
         std::string(k.call_end);
  }
  return s + std::string(k.section_end);
}

// The first assistant message without calls (Kimi-K2-Thinking's loop looks for the last one
// walking backwards, and so keeps the first): turns up to it are history, written with an
// empty think block; turns after it with their reasoning_content.
ptrdiff_t thinking_history_end(const std::vector<ChatMessage>& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role == "assistant" && messages[i].tool_calls.empty()) return static_cast<ptrdiff_t>(i);
  }
  return -1;
}

}  // namespace

std::string render_kimi_k2(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  const Layout layout = o.kimi.layout;
  std::string s;
  if (!o.tools.empty()) {
    std::string list = "[";
    for (const std::string& tool : o.tools) list += (list.size() > 1 ? "," : "") + tool;
    s += "<|im_system|>tool_declare<|im_middle|>" + template_tojson(list + "]") + "<|im_end|>";
  }
  // Instruct's and the first release's write it in their loop (not for no messages); Thinking's
  // before it.
  if ((messages.empty() && layout == Layout::Thinking) || (!messages.empty() && messages[0].role != "system")) {
    // Kimi-K2-Instruct's template leaves the newline after this line in its text.
    s += "<|im_system|>system<|im_middle|>" + o.kimi.default_system + "<|im_end|>" +
         (layout == Layout::Instruct ? "\n" : "");
  }
  const ptrdiff_t history_end = layout == Layout::Thinking ? thinking_history_end(messages) : -1;
  int index = 0;
  std::deque<std::string> ids;  // the calls' ids, taken by the results in order
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    s += header(m);
    if (m.role == "assistant" && layout == Layout::Thinking) {
      const bool is_history = static_cast<ptrdiff_t>(i) <= history_end;
      s += "<think>" + (is_history ? std::string() : m.reasoning_content.value_or("")) + "</think>" + m.content;
      if (!m.tool_calls.empty()) s += render_calls(m, &index, &ids);
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      int own_index = 0;
      s += m.content + render_calls(m, layout == Layout::First ? &own_index : &index, &ids);
    } else if (m.role == "tool" && layout == Layout::First) {
      // A literal backslash and n: the first release's template writes "\n" inside its text.
      s += "## Return of " + m.tool_call_id + "\\n" + m.content;
    } else if (m.role == "tool") {
      std::string id = "functions.unknown:" + std::to_string(index);  // a result with no call left
      if (!ids.empty()) {
        id = ids.front();
        ids.pop_front();
      }
      s += "## Return of " + id + "\n" + m.content;
    } else {
      s += m.content;
    }
    s += "<|im_end|>";
  }
  if (o.add_generation_prompt) s += "<|im_assistant|>assistant<|im_middle|>";
  return s;
}

}  // namespace iwb::detail
