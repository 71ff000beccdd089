// build_chat_prompt: render, then tokenize without doubling the BOS a template may write.
#include "iwb/engine/chat/chat_prompt.h"

namespace iwb {
namespace {

ToolCallFormat tool_call_format(ChatTemplateFamily family, const ChatRenderOptions& render) {
  if (family == ChatTemplateFamily::Llama3) return ToolCallFormat::Llama3;
  if (family == ChatTemplateFamily::Granite) return ToolCallFormat::GraniteList;
  if (family == ChatTemplateFamily::Harmony) return ToolCallFormat::Harmony;
  if (family == ChatTemplateFamily::Qwen3Coder || family == ChatTemplateFamily::Qwen35) return ToolCallFormat::QwenXml;
  if (family == ChatTemplateFamily::Glm45) return ToolCallFormat::GlmXml;
  if (family == ChatTemplateFamily::Glm47) return ToolCallFormat::Glm47Xml;
  if (family == ChatTemplateFamily::DeepSeekV31) return ToolCallFormat::DeepSeekV31;
  if (family == ChatTemplateFamily::KimiK2) return ToolCallFormat::KimiK2;
  if (family == ChatTemplateFamily::Gemma4) return ToolCallFormat::Gemma4;
  if (family == ChatTemplateFamily::Mistral) {
    return render.mistral->calls == MistralFormat::Calls::JsonList ? ToolCallFormat::MistralList
                                                                   : ToolCallFormat::MistralNamed;
  }
  return ToolCallFormat::Hermes;
}

}  // namespace

std::string chat_template_summary(std::string_view chat_template, std::optional<ChatTemplateFamily> family) {
  const ChatTemplateFamily f = family ? *family : detect_chat_template(chat_template);
  ChatRenderOptions render;
  render.llama3_date = chat_template_llama3_date(chat_template);
  render.mistral = chat_template_mistral_format(chat_template);
  std::string s(chat_template_family_name(f));
  if (chat_template.empty() && !family) s += " (the model has no chat template)";
  if (const std::string unwritten = chat_template_unwritten_tool_format(chat_template); !family && !unwritten.empty()) {
    return s + "; no tool format (" + unwritten + ")";
  }
  if (!chat_template_has_tools(f, render)) return s + "; no tool format";
  return s + "; tools: " + std::string(tool_call_format_description(tool_call_format(f, render)));
}

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

  const tokenizer::Vocab& vocab = tokenizer.vocab();
  ChatRenderOptions render;
  render.add_generation_prompt = options.add_generation_prompt;
  render.tools = options.tools;
  // Qwen2.5's template writes its own system turn when the conversation has none.
  render.default_system = chat_template_default_system(chat_template);
  render.doubles_tool_example_braces = chat_template_doubles_tool_example(chat_template);
  render.llama3_date = chat_template_llama3_date(chat_template);
  render.smollm3_date = chat_template_smollm3_date(chat_template);
  render.harmony_date = chat_template_harmony_date(chat_template);
  render.enable_thinking = options.enable_thinking;
  render.reasoning_effort = options.reasoning_effort;
  render.clear_thinking = options.clear_thinking;
  render.closes_think_when_off = chat_template_closes_think_when_off(chat_template);
  render.reads_past_thinking = chat_template_reads_past_thinking(chat_template);
  render.is_thinking_opt_in = chat_template_is_thinking_opt_in(chat_template);

  render.mistral = chat_template_mistral_format(chat_template);
  render.kimi = chat_template_kimi_format(chat_template);

  // A ChatML template whose calls are another format's is not given Qwen2.5's.
  const std::string unwritten = options.family ? std::string() : chat_template_unwritten_tool_format(chat_template);
  const bool has_tool_format = chat_template_has_tools(prompt.family, render) && unwritten.empty();
  if ((has_tool_turns || !options.tools.empty()) && !unwritten.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      "tools, tool calls and tool results cannot be rendered with this model's chat template: it "
                      "writes " +
                          unwritten);
  }
  if ((has_tool_turns || !options.tools.empty()) && !has_tool_format) {
    const std::string family(chat_template_family_name(prompt.family));
    return make_error(ErrorCode::InvalidArgument,
                      "tools, tool calls and tool results need a chat template with a tool format; this model's is " +
                          (prompt.family == ChatTemplateFamily::Llama3    ? "Llama 3.0's (no tools)"
                           : prompt.family == ChatTemplateFamily::Mistral ? "Mistral's first format (no tools)"
                                                                          : family) +
                          " (supported: chatml as Qwen2.5 and Qwen3 write it, Llama 3.1-3.3's, Mistral's as Nemo, "
                          "Small 3.2 and Devstral write it, Granite 3.x's, gpt-oss's, Hermes's, Qwen3-Coder's, "
                          "GLM-4.5's to 4.7's, DeepSeek V3.1's, Kimi K2's, Gemma 4's and Qwen3.5's)");
  }
  if (has_tool_format) prompt.tool_format = tool_call_format(prompt.family, render);
  if (std::optional<std::string> refusal = chat_template_refusal(prompt.family, messages, render)) {
    return make_error(ErrorCode::InvalidArgument, *refusal);
  }
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
  // GLM-4.7's prompt ends with <think>, Qwen3.5's with "<think>\n" (the newline is the prompt's).
  prompt.opens_reasoning =
      options.add_generation_prompt && (prompt.text.ends_with("<think>") || prompt.text.ends_with("<think>\n"));
  if (prompt.opens_reasoning) {
    prompt.reasoning_close = prompt.family == ChatTemplateFamily::Qwen35 ? "\n</think>\n\n" : "</think>";
  }
  // Harmony's channels are control tokens the reply must show; so are Mistral's [TOOL_CALLS] and
  // Granite's <|tool_call|> when the model is shown tools (a chat without them is left as it was).
  const bool has_marker_calls = prompt.tool_format == ToolCallFormat::MistralList ||
                                prompt.tool_format == ToolCallFormat::MistralNamed ||
                                prompt.tool_format == ToolCallFormat::GraniteList;
  // DeepSeek's and Kimi's call markers (and Kimi's <think>) are special tokens in their
  // vocabularies: shown always, so that the reply's calls and reasoning can be read.
  const bool has_special_markers =
      prompt.family == ChatTemplateFamily::DeepSeekV31 || prompt.family == ChatTemplateFamily::KimiK2;
  prompt.renders_special_tokens = prompt.family == ChatTemplateFamily::Harmony || has_special_markers ||
                                  (has_marker_calls && !options.tools.empty());
  return prompt;
}

}  // namespace iwb
