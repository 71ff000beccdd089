// Fuzz target: chat templates. The family detector reads an arbitrary Jinja template text (a
// GGUF's tokenizer.chat_template comes from whoever made the file); the renderer writes every
// family for arbitrary messages; the stop strings of each family are asked for. A model's reply
// is arbitrary text too: split_reply reads each message's content as one, whole and streaming,
// and the streaming parts must never be longer than the whole reply's; split_tool_calls the same
// way, the stream's text and calls a beginning of the whole reply's. Assistant turns carry tool
// calls now and then, and the tools and default system text come from the template text.
#include "fuzz_input.h"

#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/reply_parts.h"
#include "iwb/engine/chat/tool_calls.h"

#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  iwb::fuzz::FuzzInput in(data, size);
  const uint8_t flags = in.byte();
  const std::string jinja = in.string(8192);
  const iwb::ChatTemplateFamily detected = iwb::detect_chat_template(jinja);
  (void)iwb::chat_template_family_from_name(jinja);

  std::vector<iwb::ChatMessage> messages;
  static const char* const kRoles[] = {"system", "user", "assistant", "tool"};
  while (!in.empty() && messages.size() < 16) {
    const uint8_t role = in.byte();
    iwb::ChatMessage m;
    m.role = role < 250 ? kRoles[role % 4] : in.string(16);  // now and then a role nobody knows
    m.content = in.string(2048);
    const iwb::ReplyParts whole = iwb::split_reply(m.content);
    const iwb::ReplyParts streaming = iwb::split_reply(m.content, /*is_streaming=*/true);
    if (streaming.content.size() > whole.content.size() || streaming.reasoning.size() > whole.reasoning.size()) {
      __builtin_trap();
    }
    // Tool calls: what the stream has sent (text, calls) must begin what the whole reply gives.
    for (const iwb::ToolCallFormat format :
         {iwb::ToolCallFormat::Hermes, iwb::ToolCallFormat::Llama3, iwb::ToolCallFormat::MistralList,
          iwb::ToolCallFormat::MistralNamed, iwb::ToolCallFormat::GraniteList, iwb::ToolCallFormat::Harmony,
          iwb::ToolCallFormat::QwenXml, iwb::ToolCallFormat::GlmXml, iwb::ToolCallFormat::Glm47Xml,
          iwb::ToolCallFormat::DeepSeekV31, iwb::ToolCallFormat::KimiK2, iwb::ToolCallFormat::Gemma4}) {
      // Qwen3-Coder's values read as the schema says: tool "f", parameters of each kind.
      static const iwb::ToolArgumentTypes kTypes = {{{"f",
                                                      {{"a", iwb::ArgumentText::Json},
                                                       {"b", iwb::ArgumentText::JsonOrString},
                                                       {"c", iwb::ArgumentText::String}}}}};
      const iwb::ToolReply calls = iwb::split_tool_calls(m.content, false, format, &kTypes);
      const iwb::ToolReply streamed = iwb::split_tool_calls(m.content, /*is_streaming=*/true, format, &kTypes);
      if (calls.content.compare(0, streamed.content.size(), streamed.content) != 0 ||
          streamed.calls.size() > calls.calls.size()) {
        __builtin_trap();
      }
      for (size_t i = 0; i < streamed.calls.size(); ++i) {
        // A streamed call's arguments may still be growing: a beginning of the whole reply's.
        if (streamed.calls[i].name != calls.calls[i].name ||
            calls.calls[i].arguments.compare(0, streamed.calls[i].arguments.size(), streamed.calls[i].arguments) != 0) {
          __builtin_trap();
        }
      }
    }
    if (m.role == "assistant" && (role & 4)) m.tool_calls.push_back({"id", in.string(64), in.string(512)});
    messages.push_back(std::move(m));
  }
  iwb::ChatRenderOptions options;
  options.add_generation_prompt = flags & 1;
  options.bos_text = (flags & 2) ? "<s>" : "";
  options.default_system = iwb::chat_template_default_system(jinja);
  if (flags & 4) options.tools = {jinja.substr(0, 512)};  // any text: JSON or not, tojson writes it
  options.llama3_date = (flags & 8) ? iwb::chat_template_llama3_date(jinja) + "x" : "";  // Llama 3.1+ form
  options.harmony_date = iwb::chat_template_harmony_date(jinja);
  // Mistral's formats: the template's, or one the flags pick.
  options.mistral = iwb::chat_template_mistral_format(jinja);
  if (!options.mistral && (flags & 16)) {
    options.mistral = iwb::MistralFormat{(flags & 32) != 0, static_cast<iwb::MistralFormat::Calls>((flags >> 6) % 3),
                                         (flags & 128) != 0};
  }
  for (int f = 0; f <= static_cast<int>(iwb::ChatTemplateFamily::Plain); ++f) {
    const auto family = static_cast<iwb::ChatTemplateFamily>(f);
    (void)iwb::render_chat(family, messages, options);
    (void)iwb::chat_template_refusal(family, messages, options);
    (void)iwb::chat_stop_strings(family);
  }
  (void)iwb::render_chat(detected, messages, options);
  return 0;
}
