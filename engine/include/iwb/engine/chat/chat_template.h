// Chat templates: recognise the family of a model's `tokenizer.chat_template` (a Jinja text) and
// render conversations in that family's exact format, without a Jinja interpreter.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb {

enum class ChatTemplateFamily {
  ChatMl,   // <|im_start|>role\n...<|im_end|>  (Qwen, SmolLM, many fine-tunes)
  Llama2,   // <s>[INST] <<SYS>>...<</SYS>> ... [/INST]
  Llama3,   // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  Mistral,  // [INST] ... [/INST] without a system block (system text joins the first user turn)
  Gemma,    // <start_of_turn>user\n...<end_of_turn>  (system text joins the first user turn)
  Phi3,     // <|user|>\n...<|end|>\n<|assistant|>\n
  Zephyr,   // <|user|>\n...</s>\n<|assistant|>\n
  // gpt-oss's harmony: <|start|>role<|message|>...<|end|>; a system block the template writes
  // itself, the system prompt as the developer's instructions, past assistant turns in the
  // final channel (<|channel|>final<|message|>), generation from <|start|>assistant.
  Harmony,
  Plain,  // fallback: "System: ...\nUser: ...\nAssistant:"
};

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
};

std::string_view chat_template_family_name(ChatTemplateFamily family);
std::optional<ChatTemplateFamily> chat_template_family_from_name(std::string_view name);

// Picks the family whose markers appear in the template text; Plain when none does.
ChatTemplateFamily detect_chat_template(std::string_view jinja_template);

struct ChatRenderOptions {
  std::string bos_text;               // the BOS token's text, for families that write it
  std::string eos_text = "</s>";      // written after assistant turns by Llama 2 / Mistral / Zephyr
  bool add_generation_prompt = true;  // end with the opening of an assistant turn
};

std::string render_chat(ChatTemplateFamily family, const std::vector<ChatMessage>& messages,
                        const ChatRenderOptions& options);

// Text sequences that end an assistant turn in this family (besides the EOS/EOT tokens).
std::vector<std::string> chat_stop_strings(ChatTemplateFamily family);

}  // namespace iwb
