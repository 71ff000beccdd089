// Gemma 4's chat template, reproduced with its tools (gemma4_template.cpp): <|turn>role\n...<turn|>\n
// turns, <|think|> in the system turn when thinking is on, tools declared as <|tool>declaration:...<tool|>,
// calls as <|tool_call>call:NAME{key:value,...}<tool_call|> and results as <|tool_response>...<tool_response|>
// inside the model's turn, strings quoted <|"|>...<|"|> (ToolCallFormat::Gemma4). chat_template.cpp's
// Gemma4 family renders through here; gemma4_tool_calls.cpp reads the calls back.
#pragma once

#include "iwb/engine/chat/chat_template.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace iwb::detail {

inline constexpr std::string_view kGemma4Quote = "<|\"|>";

// The template as Gemma 4's GGUFs carry it (tokenizer.chat_template of llama.cpp's
// ggml-vocab-gemma-4.gguf), after the rewrite llama.cpp applies to it (and so does this): an
// assistant turn with calls takes the tool results that follow it as its `tool_responses`
// (each named after its call, its text read as JSON where it is JSON) and the answer after them
// as its content (the turn's own text and reasoning are not written); and a prompt that ends
// after a turn's end gets the model's turn opened.
std::string render_gemma4(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options);

// A JSON value as the template's format_argument writes it: strings between <|"|>, keys sorted
// as Jinja's dictsort sorts them (without case), numbers and None as Python prints them.
std::string gemma4_argument(const nlohmann::ordered_json& value, bool escape_keys);

}  // namespace iwb::detail
