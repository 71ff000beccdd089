// build_chat_prompt: render, then tokenize without doubling the BOS a template may write.
#include "iwb/engine/chat/chat_prompt.h"

namespace iwb {

Result<ChatPrompt> build_chat_prompt(const tokenizer::Tokenizer& tokenizer, std::string_view chat_template,
                                     const std::vector<ChatMessage>& messages, const ChatPromptOptions& options) {
  if (messages.empty()) return make_error(ErrorCode::InvalidArgument, "the conversation has no messages");
  bool has_tool_turns = false;
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") {
      return make_error(ErrorCode::InvalidArgument,
                        "unknown chat role '" + m.role + "' (system, user, assistant or tool)");
    }
    has_tool_turns = has_tool_turns || m.role == "tool" || !m.tool_calls.empty();
  }
  ChatPrompt prompt;
  prompt.family = options.family ? *options.family : detect_chat_template(chat_template);
  if ((has_tool_turns || !options.tools.empty()) && !chat_template_has_tools(prompt.family)) {
    return make_error(ErrorCode::InvalidArgument,
                      "tools, tool calls and tool results need a chat template with a tool format; this model's is " +
                          std::string(chat_template_family_name(prompt.family)) +
                          " (supported: chatml, as Qwen2.5 and Hermes write tool calls)");
  }

  const tokenizer::Vocab& vocab = tokenizer.vocab();
  ChatRenderOptions render;
  render.add_generation_prompt = options.add_generation_prompt;
  render.tools = options.tools;
  // Qwen2.5's template writes its own system turn when the conversation has none.
  render.default_system = chat_template_default_system(chat_template);
  render.doubles_tool_example_braces = chat_template_doubles_tool_example(chat_template);
  if (tokenizer.is_valid(vocab.special.bos)) render.bos_text = vocab.tokens[static_cast<size_t>(vocab.special.bos)];
  if (tokenizer.is_valid(vocab.special.eos)) render.eos_text = vocab.tokens[static_cast<size_t>(vocab.special.eos)];
  prompt.text = render_chat(prompt.family, messages, render);

  // Templates that write the BOS text themselves get it parsed as the BOS token; adding the
  // vocabulary's own BOS as well would give the model two.
  const bool is_bos_written = !render.bos_text.empty() && prompt.text.rfind(render.bos_text, 0) == 0;
  tokenizer::EncodeOptions encode;
  encode.add_bos = !is_bos_written;
  encode.parse_special = true;
  prompt.tokens = tokenizer.encode(prompt.text, encode);
  if (prompt.tokens.size() >= 2 && prompt.tokens[0] == vocab.special.bos && prompt.tokens[1] == vocab.special.bos) {
    prompt.tokens.erase(prompt.tokens.begin());
  }
  if (prompt.tokens.empty()) return make_error(ErrorCode::InvalidArgument, "the conversation tokenized to nothing");
  prompt.stop_strings = chat_stop_strings(prompt.family);
  prompt.renders_special_tokens = prompt.family == ChatTemplateFamily::Harmony;
  return prompt;
}

}  // namespace iwb
