// Qwen3-Coder's chat template, reproduced with its tools: ChatML whose system turn lists the tools
// as <function> tags and whose calls are <tool_call> blocks of <function=NAME> and <parameter=KEY>
// tags (ToolCallFormat::QwenXml). chat_template.cpp's Qwen3Coder family renders through here.
#pragma once

#include "iwb/engine/chat/chat_template.h"

#include <string>
#include <string_view>
#include <vector>

namespace iwb::detail {

std::string render_qwen3_coder(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options);

// A past call's arguments as Qwen3-Coder's and Qwen3.5's templates write them: for each key of
// the JSON object, in order, "<parameter=KEY>\n" VALUE "\n</parameter>\n" (a mapping or list as
// tojson, anything else as Jinja's `string`); nothing for text that is no JSON object.
std::string qwen_xml_parameters(std::string_view arguments_json);

// A JSON value as Jinja's `string` filter writes it: Python's str() of what json.loads gives
// (True, None, 1e+16, ['a', 'b'], {'k': 1}); a string as it is.
std::string python_str(std::string_view json_text);

}  // namespace iwb::detail
