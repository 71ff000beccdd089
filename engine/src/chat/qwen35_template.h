// Qwen3.5's chat template, reproduced with its tools (qwen35_template.cpp): ChatML whose system turn
// lists the tools as JSON, calls as Qwen3-Coder's <function=NAME> and <parameter=KEY> tags
// (ToolCallFormat::QwenXml), think blocks only after the last user query. chat_template.cpp's
// Qwen35 family renders through here.
#pragma once

#include "iwb/engine/chat/chat_template.h"

#include <optional>
#include <string>
#include <vector>

namespace iwb::detail {

// The template as Qwen3.5's releases ship it (llama.cpp's models/templates/Qwen3.5-4B.jinja), as
// jinja2 renders it: every content trimmed; the system text after the tool instructions; each
// assistant turn's reasoning (its reasoning_content, else the text before its last </think>) in
// a think block for turns after the last user query and dropped before it; calls after a blank
// line when the turn has text; a run of tool results in one user turn; the generation prompt
// opening <think>, or closing an empty one when thinking is off (ChatRenderOptions::enable_thinking
// and is_thinking_opt_in).
std::string render_qwen35(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options);

// What the template refuses (its raise_exception), in its words: a conversation without a user
// query (a user message that is not a <tool_response> block), a system message after the first
// message; and arguments that are no JSON object, which its `items` filter refuses.
std::optional<std::string> qwen35_refusal(const std::vector<ChatMessage>& messages);

}  // namespace iwb::detail
