// DeepSeek V3.1's and Kimi K2's chat templates, reproduced with their tools: DeepSeek's
// <｜User｜>/<｜Assistant｜> turns after BOS and the system text (deepseek_template.cpp), Kimi's
// <|im_user|>/<|im_assistant|>/<|im_system|> turns with a tool_declare turn (kimi_template.cpp);
// both write calls as a name and JSON arguments between special tokens (ToolCallFormat::DeepSeekV31,
// KimiK2). chat_template.cpp's DeepSeekV31 and KimiK2 families render through here.
#pragma once

#include "iwb/engine/chat/chat_template.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::detail {

// llama.cpp's models/templates/deepseek-ai-DeepSeek-V3.1.jinja: thinking as
// ChatRenderOptions::enable_thinking says (the template's `thinking`; off by default).
std::string render_deepseek_v31(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options);

// Kimi-K2-Instruct.jinja, moonshotai-Kimi-K2.jinja and Kimi-K2-Thinking.jinja, as
// ChatRenderOptions::kimi says.
std::string render_kimi_k2(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options);

// What both refuse, in words: a past call whose arguments are no JSON (the templates write
// them with tojson as the objects vLLM and llama.cpp pass, which such text cannot become).
std::optional<std::string> json_arguments_refusal(const std::vector<ChatMessage>& messages,
                                                  std::string_view template_name);

}  // namespace iwb::detail
