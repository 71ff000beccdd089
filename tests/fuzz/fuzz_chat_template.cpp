// Fuzz target: chat templates. The family detector reads an arbitrary Jinja template text (a
// GGUF's tokenizer.chat_template comes from whoever made the file); the renderer writes every
// family for arbitrary messages; the stop strings of each family are asked for. A model's reply
// is arbitrary text too: split_reply reads each message's content as one, whole and streaming,
// and the streaming parts must never be longer than the whole reply's.
#include "fuzz_input.h"

#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/reply_parts.h"

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
    messages.push_back(std::move(m));
  }
  iwb::ChatRenderOptions options;
  options.add_generation_prompt = flags & 1;
  options.bos_text = (flags & 2) ? "<s>" : "";
  for (int f = 0; f <= static_cast<int>(iwb::ChatTemplateFamily::Plain); ++f) {
    const auto family = static_cast<iwb::ChatTemplateFamily>(f);
    (void)iwb::render_chat(family, messages, options);
    (void)iwb::chat_stop_strings(family);
  }
  (void)iwb::render_chat(detected, messages, options);
  return 0;
}
