// Fuzz target: the server's request handling below HTTP: the JSON body parser with its depth
// limit, and the chat and text completion request readers (every field's type and range check,
// tools and their schemas compiled into a call grammar).
#include "serve/openai_request.h"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto parsed = iwb::serve::parse_body(body);
  if (auto* json = std::get_if<nlohmann::json>(&parsed)) {
    const iwb::SamplingParams defaults;
    const iwb::serve::RequestLimits limits;
    auto chat = iwb::serve::read_chat_request(*json, defaults, limits, body);  // tools read again in order
    if (auto* request = std::get_if<iwb::serve::ChatCompletionRequest>(&chat)) {
      for (const iwb::ToolCallFormat format :
           {iwb::ToolCallFormat::Hermes, iwb::ToolCallFormat::Llama3, iwb::ToolCallFormat::MistralList,
            iwb::ToolCallFormat::MistralNamed, iwb::ToolCallFormat::GraniteList, iwb::ToolCallFormat::Harmony,
            iwb::ToolCallFormat::QwenXml, iwb::ToolCallFormat::GlmXml, iwb::ToolCallFormat::Glm47Xml,
            iwb::ToolCallFormat::DeepSeekV31, iwb::ToolCallFormat::KimiK2, iwb::ToolCallFormat::Gemma4}) {
        iwb::serve::ChatCompletionRequest copy = *request;
        (void)iwb::serve::hold_tool_calls(&copy, format);  // the tools' schemas compiled into a call grammar
      }
    }
    (void)iwb::serve::read_completion_request(*json, defaults, limits);
    (void)iwb::serve::dump_json(*json);
  }
  return 0;
}
