// A conversation turned into prompt tokens for a model: rendered with the template family
// detected from the model's tokenizer.chat_template (or one the user names), tokenized with
// special tokens parsed, and exactly one BOS where the model wants one.
#pragma once

#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/status.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb {

struct ChatPromptOptions {
  std::optional<ChatTemplateFamily> family;  // overrides the detected family
  bool add_generation_prompt = true;
  // Tool definitions, each a tool's JSON text (ToolDefinition::json): only families with a tool
  // format take them (chat_template_has_tools), as they do tool turns.
  std::vector<std::string> tools;
  // Thinking controls (ChatRenderOptions::enable_thinking, reasoning_effort).
  std::optional<bool> enable_thinking;
  std::string reasoning_effort;
  std::optional<bool> clear_thinking;  // GLM-4.7's (ChatRenderOptions::clear_thinking)
};

struct ChatPrompt {
  ChatTemplateFamily family = ChatTemplateFamily::Plain;
  std::string text;  // the rendered conversation
  std::vector<int32_t> tokens;
  std::vector<std::string> stop_strings;  // the family's end-of-turn markers
  // The reply must be generated with GenerationRequest::render_special_tokens for split_reply
  // (reply_parts.h) to find its parts: harmony's channels are control tokens.
  bool renders_special_tokens = false;
  // How this model writes tool calls, when its template has a tool format.
  std::optional<ToolCallFormat> tool_format;
  // The prompt ends inside an open <think> block (GLM-4.7's and Qwen3.5's generation prompts with
  // thinking on):
  // the reply opens with its reasoning, without the tag, and is read as if it had written it.
  bool opens_reasoning = false;
  // What closes that block as the template writes a past turn's reasoning: "\n</think>\n\n"
  // (Qwen3.5: "<think>\n" + reasoning + "\n</think>\n\n"), else "</think>" (GLM-4.7, DeepSeek
  // V3.1); empty when the prompt opens none. A server that must start the answer itself (a
  // required tool call) writes this first, so the model sees its own layout.
  std::string reasoning_close;
};

// What a template is read as, for a server's log: its family and how tools are written with it
// ("mistral; tools: [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} (Mistral Small 3.2)", "gemma; no tool
// format"). `family`: one the user named instead.
std::string chat_template_summary(std::string_view chat_template, std::optional<ChatTemplateFamily> family = {});

Result<ChatPrompt> build_chat_prompt(const tokenizer::Tokenizer& tokenizer, std::string_view chat_template,
                                     const std::vector<ChatMessage>& messages, const ChatPromptOptions& options = {});

}  // namespace iwb
