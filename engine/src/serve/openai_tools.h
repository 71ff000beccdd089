// The tool-calling fields of a chat request: `tools`, `tool_choice`, `parallel_tool_calls`, and
// in messages an assistant's `tool_calls` and a tool's result (role "tool").
#pragma once

#include "iwb/engine/serve/serve_core.h"
#include "openai_request.h"

#include <optional>
#include <string>
#include <string_view>

namespace iwb::serve {

// Reads tools, tool_choice and parallel_tool_calls into `request`, checking the named tool (tools
// to call are refused together with another structured format; the schemas are compiled by
// hold_tool_calls).
std::optional<ApiError> read_tools(const nlohmann::json& body, std::string_view raw_body, const RequestLimits& limits,
                                   ChatCompletionRequest* request);

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name",
// "arguments"}}]; `param` names the message in errors.
std::optional<ApiError> read_message_tool_calls(const nlohmann::json& calls, const std::string& param,
                                                std::vector<ChatToolCall>* out);

// The template a chat is rendered with: the model's tool-use template
// (ServedModel::chat_template_tool_use) when it has one and the request shows tools or has tool
// turns, else its chat template.
const std::string& chat_template_for(const ServedModel& model, const ChatCompletionRequest& chat);

}  // namespace iwb::serve
