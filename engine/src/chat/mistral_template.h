// Mistral's chat templates (Nemo, Small 3.2, Devstral), reproduced: chat_template.cpp's
// Mistral family renders through here when the template is one of these formats.
#pragma once

#include "iwb/engine/chat/chat_template.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::detail {

// The conversation as the release's template writes it (options.mistral set).
std::string render_mistral(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options);

// What the release's template refuses (its raise_exception), in words.
std::optional<std::string> mistral_refusal(const std::vector<ChatMessage>& messages, const MistralFormat& format);

// The value of `{%- set default_system_message = '...' + today + "..." %}` (Mistral Small 3.x,
// Devstral): its string literals joined, a variable set from strftime_now("...") written as
// today's date in that format; empty when the template sets no such text.
std::string jinja_default_system_message(std::string_view jinja_template);

}  // namespace iwb::detail
