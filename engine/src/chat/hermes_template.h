// Hermes 2 Pro's and Hermes 3's tool-use chat template (their tokenizer.chat_template.tool_use),
// reproduced: chat_template.cpp's Hermes family renders through here.
#pragma once

#include "iwb/engine/chat/chat_template.h"

#include <string>
#include <vector>

namespace iwb::detail {

std::string render_hermes(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options);

// A parameter's type as the template's json_to_python_type writes it ("str", "list[Union[]]",
// "dict[str, int]"), from the JSON Schema's text.
std::string hermes_python_type(const std::string& schema_json);

}  // namespace iwb::detail
