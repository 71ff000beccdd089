// gpt-oss's chat template (harmony), reproduced with its tools: chat_template.cpp's Harmony
// family renders through here.
#pragma once

#include "iwb/engine/chat/chat_template.h"

#include <optional>
#include <string>
#include <vector>

namespace iwb::detail {

std::string render_harmony(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options);

// What gpt-oss's template refuses (its raise_exception), and what it would drop (a second call
// in one message), in words.
std::optional<std::string> harmony_refusal(const std::vector<ChatMessage>& messages);

// A tool's parameters as the template's render_typescript_type writes a type ("string",
// "\"c\" | \"f\"", "{\n a: number}"), from the JSON Schema's text.
std::string harmony_typescript_type(const std::string& schema_json);

}  // namespace iwb::detail
