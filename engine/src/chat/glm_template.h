// GLM-4.5's, GLM-4.6's and GLM-4.7's chat templates, reproduced with their tools:
// [gMASK]<sop>, <|system|> / <|user|> / <|assistant|> / <|observation|> turns, the tools as JSON in
// a system turn of their own, calls as <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>
// tags (ToolCallFormat::GlmXml / Glm47Xml). chat_template.cpp's Glm45 and Glm47 families render
// through here.
#pragma once

#include "iwb/engine/chat/chat_template.h"

#include <optional>
#include <string>
#include <vector>

namespace iwb::detail {

// `is_compact`: GLM-4.7's layout (no newlines between the tags, the generation prompt opening
// <think>, `clear_thinking`); else GLM-4.5's and 4.6's.
std::string render_glm(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options, bool is_compact);

// What GLM's templates refuse: a call whose arguments are not a mapping (4.5/4.6 take a falsy
// value as no arguments; 4.7 takes none).
std::optional<std::string> glm_refusal(const std::vector<ChatMessage>& messages, bool is_compact);

}  // namespace iwb::detail
