// Chat template families: detection by the markers each family's Jinja template contains, and
// rendering that reproduces those templates' output for system/user/assistant conversations.
#include "iwb/engine/chat/chat_template.h"

#include "chat/deepseek_template.h"
#include "chat/gemma4_template.h"
#include "chat/glm_template.h"
#include "chat/harmony_template.h"
#include "chat/hermes_template.h"
#include "chat/mistral_template.h"
#include "chat/python_text.h"
#include "chat/qwen35_template.h"
#include "chat/qwen_xml_template.h"
#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/clock_text.h"

#include <array>
#include <string_view>

namespace iwb {
namespace {

struct FamilyName {
  ChatTemplateFamily family;
  std::string_view name;
};

constexpr std::array kNames = {
    FamilyName{ChatTemplateFamily::ChatMl, "chatml"},   FamilyName{ChatTemplateFamily::Llama2, "llama2"},
    FamilyName{ChatTemplateFamily::Llama3, "llama3"},   FamilyName{ChatTemplateFamily::Mistral, "mistral"},
    FamilyName{ChatTemplateFamily::Gemma, "gemma"},     FamilyName{ChatTemplateFamily::Phi3, "phi3"},
    FamilyName{ChatTemplateFamily::Zephyr, "zephyr"},   FamilyName{ChatTemplateFamily::Plain, "plain"},
    FamilyName{ChatTemplateFamily::Harmony, "harmony"}, FamilyName{ChatTemplateFamily::Tulu, "tulu"},
    FamilyName{ChatTemplateFamily::SmolLM3, "smollm3"}, FamilyName{ChatTemplateFamily::Granite, "granite"},
    FamilyName{ChatTemplateFamily::Hermes, "hermes"},   FamilyName{ChatTemplateFamily::Qwen3Coder, "qwen3-coder"},
    FamilyName{ChatTemplateFamily::Glm45, "glm-4.5"},   FamilyName{ChatTemplateFamily::Glm47, "glm-4.7"},
    FamilyName{ChatTemplateFamily::KimiK2, "kimi-k2"},  FamilyName{ChatTemplateFamily::DeepSeekV31, "deepseek-v3.1"},
    FamilyName{ChatTemplateFamily::Gemma4, "gemma4"},   FamilyName{ChatTemplateFamily::Qwen35, "qwen3.5"},
};

bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

// Families without a system role fold the system prompt into the first user message.
std::vector<ChatMessage> fold_system_into_first_user(const std::vector<ChatMessage>& messages) {
  std::vector<ChatMessage> out;
  std::string pending_system;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      pending_system += (pending_system.empty() ? "" : "\n\n") + m.content;
      continue;
    }
    ChatMessage copy = m;
    if (m.role == "user" && !pending_system.empty()) {
      copy.content = pending_system + "\n\n" + m.content;
      pending_system.clear();
    }
    out.push_back(std::move(copy));
  }
  return out;
}

// A past call as Qwen2.5's and Qwen3's templates write it.
std::string qwen_call_block(const ChatToolCall& call) {
  return "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": " + template_tojson(call.arguments) +
         "}\n</tool_call>";
}

// Where Qwen3's template finds the last user query: the last user message that is not a tool
// response it wrapped itself (the last message when there is none).
size_t qwen3_last_query(const std::vector<ChatMessage>& messages) {
  for (size_t k = messages.size(); k-- > 0;) {
    const std::string& c = messages[k].content;
    if (messages[k].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) {
      return k;
    }
  }
  return messages.empty() ? 0 : messages.size() - 1;
}

// Qwen3's assistant turn opening: the text after a </think> (its reasoning, the text before or
// the message's reasoning_content, dropped or written as an empty-or-not think block for turns
// after the last user query that are the last message or had reasoning).
std::string qwen3_assistant_opening(const std::vector<ChatMessage>& messages, size_t i, size_t last_query,
                                    std::string* content) {
  constexpr std::string_view kOpen = "<think>", kClose = "</think>";
  const ChatMessage& m = messages[i];
  std::string reasoning;
  if (m.reasoning_content) {
    reasoning = *m.reasoning_content;
  } else if (const size_t end = content->find(kClose); end != std::string::npos) {
    std::string before = content->substr(0, end);
    before.erase(before.find_last_not_of('\n') + 1);
    const size_t open = before.rfind(kOpen);
    reasoning = open == std::string::npos ? before : before.substr(open + kOpen.size());
    reasoning.erase(0, reasoning.find_first_not_of('\n'));
    std::string after = content->substr(content->rfind(kClose) + kClose.size());
    after.erase(0, std::min(after.size(), after.find_first_not_of('\n')));
    *content = std::move(after);
  }
  if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
    reasoning.erase(0, std::min(reasoning.size(), reasoning.find_first_not_of('\n')));
    reasoning.erase(reasoning.find_last_not_of('\n') + 1);
    content->erase(0, std::min(content->size(), content->find_first_not_of('\n')));
    return "<|im_start|>assistant\n<think>\n" + reasoning + "\n</think>\n\n";
  }
  return "<|im_start|>assistant\n";
}

// ChatML, with Qwen2.5's tool format (its template, reproduced): the tools listed in the
// system turn, an assistant's calls as <tool_call> blocks, tool results as <tool_response>
// blocks in one user turn per run of results.
std::string render_chatml(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s;
  size_t first = 0;
  if (!o.tools.empty()) {
    // Qwen2.5 writes its default system text when there is no system message; Qwen3 writes none.
    const bool has_system = !messages.empty() && messages[0].role == "system";
    const std::string& system = has_system ? messages[0].content : o.default_system;
    s += "<|im_start|>system\n";
    if (has_system || !system.empty()) s += system + "\n\n";
    s += "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
         "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const std::string& tool : o.tools) s += "\n" + template_tojson(tool);
    const std::string example = "\"name\": <function-name>, \"arguments\": <args-json-object>";
    s += "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
         "<tool_call></tool_call> XML tags:\n<tool_call>\n" +
         (o.doubles_tool_example_braces ? "{{" + example + "}}" : "{" + example + "}") + "\n</tool_call><|im_end|>\n";
    first = has_system ? 1 : 0;
  } else if (!o.default_system.empty() && (messages.empty() || messages[0].role != "system")) {
    s += "<|im_start|>system\n" + o.default_system + "<|im_end|>\n";
  }
  const size_t last_query = o.reads_past_thinking ? qwen3_last_query(messages) : 0;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") s += "<|im_start|>user";
      s += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") s += "<|im_end|>\n";
    } else if (m.role == "assistant" && o.reads_past_thinking) {
      std::string content = m.content;
      s += qwen3_assistant_opening(messages, i, last_query, &content) + content;
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        const ChatToolCall& call = m.tool_calls[k];
        s += (k > 0 || !content.empty() ? "\n" : "") + qwen_call_block(call);
      }
      s += "<|im_end|>\n";
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      s += "<|im_start|>assistant";
      if (!m.content.empty()) s += "\n" + m.content;
      for (const ChatToolCall& call : m.tool_calls) s += "\n" + qwen_call_block(call);
      s += "<|im_end|>\n";
    } else {
      s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
  }
  if (o.add_generation_prompt) s += "<|im_start|>assistant\n";
  if (o.add_generation_prompt && o.closes_think_when_off && o.enable_thinking == false) s += "<think>\n\n</think>\n\n";
  return s;
}

using detail::kPythonSpace;
using detail::python_strip;

std::string render_llama3(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s = o.bos_text;
  for (const ChatMessage& m : messages) {
    s += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
  }
  if (o.add_generation_prompt) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return s;
}

// Llama 3.1, 3.2 and 3.3's template (reproduced, without the built-in tools): a system block
// with the knowledge cutoff and the date always, the tools in the first message after it with
// their instructions (tools_in_user_message, the default), contents trimmed, one call per
// assistant turn as {"name": ..., "parameters": ...}, tool results as ipython turns (a string
// result written as a JSON string: the template's `is iterable` holds for strings).
std::string render_llama31(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s = o.bos_text;
  size_t next = 0;
  std::string system;
  if (!messages.empty() && messages[0].role == "system") {
    system = python_strip(messages[0].content);
    next = 1;
  }
  s += "<|start_header_id|>system<|end_header_id|>\n\n";
  if (!o.tools.empty()) s += "Environment: ipython\n";
  s += "Cutting Knowledge Date: December 2023\nToday Date: " + o.llama3_date + "\n\n" + system + "<|eot_id|>";
  if (!o.tools.empty() && next < messages.size()) {  // build_chat_prompt refuses tools with no message here
    s += "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON "
         "for a function call with its proper arguments that best answers the given prompt.\n\nRespond in the "
         "format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use "
         "variables.\n\n";
    for (const std::string& tool : o.tools) s += template_tojson(tool, 4) + "\n\n";
    s += python_strip(messages[next].content) + "<|eot_id|>";
    ++next;
  }
  for (size_t i = next; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      s += "<|start_header_id|>ipython<|end_header_id|>\n\n" + template_tojson_string(m.content) + "<|eot_id|>";
    } else if (!m.tool_calls.empty()) {  // one call (build_chat_prompt refuses more)
      const ChatToolCall& call = m.tool_calls.front();
      s += "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"" + call.name +
           "\", \"parameters\": " + template_tojson(call.arguments) + "}<|eot_id|>";
    } else {
      s += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + python_strip(m.content) + "<|eot_id|>";
    }
  }
  if (o.add_generation_prompt) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return s;
}

// Llama 2: each user turn opens with BOS [INST]; the system block sits inside the first one.
std::string render_llama2(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o, bool has_system_block) {
  std::string s;
  std::string system;
  bool first_user = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      system = m.content;
    } else if (m.role == "user") {
      std::string content = m.content;
      if (first_user && !system.empty()) {
        content = has_system_block ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content : system + "\n\n" + content;
      }
      first_user = false;
      s += o.bos_text + "[INST] " + content + " [/INST]";
    } else {
      s += " " + m.content + " " + o.eos_text;
    }
  }
  return s;
}

std::string render_gemma(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s = o.bos_text;
  for (const ChatMessage& m : fold_system_into_first_user(messages)) {
    const std::string role = m.role == "assistant" ? "model" : m.role;
    s += "<start_of_turn>" + role + "\n" + m.content + "<end_of_turn>\n";
  }
  if (o.add_generation_prompt) s += "<start_of_turn>model\n";
  return s;
}

// Phi-3.5's template leaves out a system message with no text.
std::string render_phi3(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s;
  for (const ChatMessage& m : messages) {
    if (m.role == "system" && m.content.empty()) continue;
    s += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  if (o.add_generation_prompt) s += "<|assistant|>\n";
  return s;
}

std::string render_zephyr(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s;
  for (const ChatMessage& m : messages) s += "<|" + m.role + "|>\n" + m.content + o.eos_text + "\n";
  if (o.add_generation_prompt) s += "<|assistant|>\n";
  return s;
}

// Tülu 3's template (OLMo 2's instruct models): system and user turns end with a newline, an
// assistant turn with the EOS (and a newline unless it is the last message); the generation
// prompt follows only a last message, as the template writes it inside its loop.
std::string render_tulu(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s = o.bos_text;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool is_last = i + 1 == messages.size();
    if (m.role == "system" || m.role == "user") {
      s += "<|" + m.role + "|>\n" + m.content + "\n";
    } else if (m.role == "assistant") {
      s += "<|assistant|>\n" + m.content + o.eos_text + (is_last ? "" : "\n");
    }
    if (is_last && o.add_generation_prompt) s += "<|assistant|>\n";
  }
  return s;
}

// SmolLM3's template as llama.cpp ships it (models/templates/HuggingFaceTB-SmolLM3-3B.jinja), and
// with its "Today Date" line as Hugging Face's original writes it (smollm3_date):
// thinking as enable_thinking says (on by default), unless the system message says /no_think or
// /think; the system message's text, without
// its /think and /no_think, as the custom instructions, else the template's own; tool results
// as user turns; other system messages left out.
std::string render_smollm3(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  bool is_thinking = o.enable_thinking.value_or(true);  // the template's default: enable_thinking
  std::string custom;
  if (!messages.empty() && messages[0].role == "system") {
    custom = messages[0].content;
    if (contains(custom, "/no_think")) {
      is_thinking = false;
    } else if (contains(custom, "/think")) {
      is_thinking = true;
    }
    for (const std::string_view flag : {std::string_view("/no_think"), std::string_view("/think")}) {
      for (size_t at = custom.find(flag); at != std::string::npos; at = custom.find(flag, at))
        custom.erase(at, flag.size());
    }
    custom.erase(custom.find_last_not_of(kPythonSpace) + 1);  // Python's rstrip(); npos + 1 empties it
  }
  std::string s = "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\n";
  if (!o.smollm3_date.empty()) s += "Today Date: " + o.smollm3_date + "\n";
  s += "Reasoning Mode: ";
  s += is_thinking ? "/think" : "/no_think";
  s += "\n\n## Custom Instructions\n\n";
  if (!custom.empty()) {
    s += custom + "\n\n";
  } else if (is_thinking) {
    s += "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
         "thoroughly exploring questions through a systematic thinking process before providing the final precise "
         "and accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, "
         "exploration, reassessment, reflection, backtracking, and iteration to develop well-considered thinking "
         "process. Please structure your response into two main sections: Thought and Solution using the specified "
         "format: <think> Thought section </think> Solution section. In the Thought section, detail your reasoning "
         "process in steps. Each step should include detailed considerations such as analysing questions, "
         "summarizing relevant findings, brainstorming new ideas, verifying the accuracy of the current steps, "
         "refining any errors, and revisiting previous steps. In the Solution section, based on various attempts, "
         "explorations, and reflections from the Thought section, systematically present the final solution that "
         "you deem correct. The Solution section should be logical, accurate, and concise and detail necessary "
         "steps needed to reach the conclusion.\n\n";
  } else {
    s += "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n";
  }
  s += "<|im_end|>\n";
  const std::string empty_think = is_thinking ? "" : "<think>\n\n</think>\n";
  for (const ChatMessage& m : messages) {
    if (m.role == "user" || m.role == "tool") {
      s += "<|im_start|>user\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      const size_t text = m.content.find_first_not_of('\n');
      s += "<|im_start|>assistant\n" + empty_think + (text == std::string::npos ? "" : m.content.substr(text)) +
           "<|im_end|>\n";
    }
  }
  if (o.add_generation_prompt) s += "<|im_start|>assistant\n" + empty_think;
  return s;
}

// Granite 3.x's template without tools, documents or thinking: the system turn is the
// conversation's first message, else the template's own text with today's date (its
// strftime_now('%B %d, %Y'), local time); the generation prompt follows only a last message.
// Granite 3.3's template: its own system text (with today's date, and with tools the
// instructions for <|tool_call|>) when the conversation has none, the tools as one JSON list
// (tojson(indent=4)) in an available_tools turn, then every message as role and content (an
// assistant's calls are not written back: the template shows only its text).
std::string render_granite(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const std::string system =
      has_system
          ? messages[0].content
          : "Knowledge Cutoff Date: April 2024. Today's Date: " + now_as_text("%B %d, %Y", ClockZone::Local) +
                ". You are Granite, developed by IBM." +
                (o.tools.empty() ? " You are a helpful AI assistant."
                                 : " You are a helpful assistant with access to the following tools. When a tool is "
                                   "required to answer the user's query, respond only with <|tool_call|> followed by a "
                                   "JSON list of tools used. If a tool does not exist in the provided list of tools, "
                                   "notify the user that you do not have the ability to fulfill the request.");
  std::string s = "<|start_of_role|>system<|end_of_role|>" + system + "<|end_of_text|>\n";
  if (!o.tools.empty()) {
    std::string list = "[";
    for (const std::string& tool : o.tools) list += (list.size() > 1 ? "," : "") + tool;
    s += "<|start_of_role|>available_tools<|end_of_role|>" + template_tojson(list + "]", 4) + "<|end_of_text|>\n";
  }
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    s += "<|start_of_role|>" + m.role + "<|end_of_role|>" + m.content + "<|end_of_text|>\n";
    if (i + 1 == messages.size() && o.add_generation_prompt) s += "<|start_of_role|>assistant<|end_of_role|>";
  }
  return s;
}

std::string render_plain(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  std::string s = o.bos_text;
  for (const ChatMessage& m : messages) {
    const std::string role = m.role == "system" ? "System" : m.role == "user" ? "User" : "Assistant";
    s += role + ": " + m.content + "\n";
  }
  if (o.add_generation_prompt) s += "Assistant:";
  return s;
}

}  // namespace

std::string_view chat_template_family_name(ChatTemplateFamily family) {
  for (const FamilyName& f : kNames) {
    if (f.family == family) return f.name;
  }
  return "plain";
}

std::optional<ChatTemplateFamily> chat_template_family_from_name(std::string_view name) {
  for (const FamilyName& f : kNames) {
    if (f.name == name) return f.family;
  }
  return std::nullopt;
}

ChatTemplateFamily detect_chat_template(std::string_view t) {
  // Before phi3: harmony's template also writes <|end|>.
  if (contains(t, "<|start|>") && contains(t, "<|message|>")) return ChatTemplateFamily::Harmony;
  // DeepSeek V3.1 writes a call's arguments right after <｜tool▁sep｜>; R1, its distills and V3
  // write a ```json block there (a format not written here), V3.2 its DSML tags.
  if (contains(t, kDeepSeekMarkers.arguments_begin) && contains(t, "<｜tool▁output▁begin｜>") &&
      !contains(t, "```json")) {
    return ChatTemplateFamily::DeepSeekV31;
  }
  if (contains(t, kKimiMarkers.section_begin) && contains(t, "<|im_middle|>")) return ChatTemplateFamily::KimiK2;
  // Gemma 4's turns (<|turn>) are not Gemma 2's and 3's (<start_of_turn>).
  if (contains(t, "<|turn>") && contains(t, "<turn|>")) return ChatTemplateFamily::Gemma4;
  // Before ChatML: Hermes's tool-use template and SmolLM3's write ChatML turns behind their own
  // system blocks.
  if (contains(t, "<|im_start|>") && contains(t, "You are a function calling AI model"))
    return ChatTemplateFamily::Hermes;
  if (contains(t, "<|im_start|>") && contains(t, "Reasoning Mode: ")) return ChatTemplateFamily::SmolLM3;
  if (contains(t, "<|im_start|>") && contains(t, "<parameter=") &&
      contains(t, "You have access to the following tools:"))
    return ChatTemplateFamily::Qwen3Coder;
  // Qwen3.5 lists its tools as JSON right after "following functions:" (one literal); Nemotron 3
  // Nano's template, with the same call instructions, lists them as tags after its own literal,
  // and StepFun's says "functions in JSONSchema format".
  if (contains(t, "<|im_start|>") && contains(t, "<parameter=") &&
      contains(t, "You have access to the following functions:\\n\\n<tools>"))
    return ChatTemplateFamily::Qwen35;
  if (contains(t, "<|im_start|>")) return ChatTemplateFamily::ChatMl;
  // Before Zephyr (<|user|>, <|assistant|>): GLM-4.5 to 4.7; GLM-4's older templates, without
  // <arg_key> calls, are not theirs. 4.7 writes the tags without newlines between them.
  if (contains(t, "[gMASK]<sop>") && contains(t, "<|observation|>") && contains(t, "<arg_key>")) {
    return contains(t, "</arg_key><arg_value>") ? ChatTemplateFamily::Glm47 : ChatTemplateFamily::Glm45;
  }
  if (contains(t, "<|start_header_id|>")) return ChatTemplateFamily::Llama3;
  if (contains(t, "<|start_of_role|>")) return ChatTemplateFamily::Granite;
  if (contains(t, "<start_of_turn>")) return ChatTemplateFamily::Gemma;
  if (contains(t, "<|end|>") && contains(t, "<|assistant|>")) return ChatTemplateFamily::Phi3;
  // Tülu ends a user turn with a newline where Zephyr writes the EOS.
  if (contains(t, "'<|user|>\\n' + message['content'] + '\\n'")) return ChatTemplateFamily::Tulu;
  if (contains(t, "<|user|>") && contains(t, "<|assistant|>")) return ChatTemplateFamily::Zephyr;
  if (contains(t, "[INST]")) {
    return contains(t, "<<SYS>>") ? ChatTemplateFamily::Llama2 : ChatTemplateFamily::Mistral;
  }
  return ChatTemplateFamily::Plain;
}

std::string render_chat(ChatTemplateFamily family, const std::vector<ChatMessage>& messages,
                        const ChatRenderOptions& options) {
  switch (family) {
    case ChatTemplateFamily::ChatMl: return render_chatml(messages, options);
    case ChatTemplateFamily::Llama3:
      return options.llama3_date.empty() ? render_llama3(messages, options) : render_llama31(messages, options);
    case ChatTemplateFamily::Llama2: return render_llama2(messages, options, true);
    case ChatTemplateFamily::Mistral:
      return options.mistral ? detail::render_mistral(messages, options) : render_llama2(messages, options, false);
    case ChatTemplateFamily::Gemma: return render_gemma(messages, options);
    case ChatTemplateFamily::Phi3: return render_phi3(messages, options);
    case ChatTemplateFamily::Zephyr: return render_zephyr(messages, options);
    case ChatTemplateFamily::Tulu: return render_tulu(messages, options);
    case ChatTemplateFamily::SmolLM3: return render_smollm3(messages, options);
    case ChatTemplateFamily::Granite: return render_granite(messages, options);
    case ChatTemplateFamily::Harmony: return detail::render_harmony(messages, options);
    case ChatTemplateFamily::Hermes: return detail::render_hermes(messages, options);
    case ChatTemplateFamily::Qwen3Coder: return detail::render_qwen3_coder(messages, options);
    case ChatTemplateFamily::Glm45: return detail::render_glm(messages, options, /*is_compact=*/false);
    case ChatTemplateFamily::Glm47: return detail::render_glm(messages, options, /*is_compact=*/true);
    case ChatTemplateFamily::DeepSeekV31: return detail::render_deepseek_v31(messages, options);
    case ChatTemplateFamily::KimiK2: return detail::render_kimi_k2(messages, options);
    case ChatTemplateFamily::Gemma4: return detail::render_gemma4(messages, options);
    case ChatTemplateFamily::Qwen35: return detail::render_qwen35(messages, options);
    case ChatTemplateFamily::Plain: return render_plain(messages, options);
  }
  return render_plain(messages, options);
}

bool chat_template_has_tools(ChatTemplateFamily family, const ChatRenderOptions& options) {
  return family == ChatTemplateFamily::ChatMl ||
         (family == ChatTemplateFamily::Llama3 && !options.llama3_date.empty()) ||
         (family == ChatTemplateFamily::Mistral && options.mistral) || family == ChatTemplateFamily::Granite ||
         family == ChatTemplateFamily::Harmony || family == ChatTemplateFamily::Hermes ||
         family == ChatTemplateFamily::Qwen3Coder || family == ChatTemplateFamily::Glm45 ||
         family == ChatTemplateFamily::Glm47 || family == ChatTemplateFamily::DeepSeekV31 ||
         family == ChatTemplateFamily::KimiK2 || family == ChatTemplateFamily::Gemma4 ||
         family == ChatTemplateFamily::Qwen35;
}

bool chat_template_closes_think_when_off(std::string_view t) {
  return contains(t, "<|im_start|>") && contains(t, "enable_thinking is defined and enable_thinking is false") &&
         contains(t, "<think>\\n\\n</think>\\n\\n");
}

bool chat_template_is_thinking_opt_in(std::string_view t) {
  return contains(t, "enable_thinking is defined and enable_thinking is true");
}

std::string chat_template_unwritten_tool_format(std::string_view t) {
  if (detect_chat_template(t) != ChatTemplateFamily::ChatMl || !contains(t, "<parameter=")) return {};
  return "calls as <function=NAME> and <parameter=KEY> tags behind a prompt not written here (as Nemotron 3 "
         "Nano's template does; Qwen3-Coder's and Qwen3.5's are written: --chat-template qwen3-coder or qwen3.5)";
}

bool chat_template_reads_past_thinking(std::string_view t) {
  return contains(t, "<|im_start|>") && contains(t, "last_query_index") && contains(t, "</think>");
}

std::string chat_template_harmony_date(std::string_view t) {
  if (!contains(t, "<|start|>") || !contains(t, "Current date: ")) return {};
  return now_as_text("%Y-%m-%d", ClockZone::Local);  // the template's strftime_now("%Y-%m-%d")
}

std::optional<MistralFormat> chat_template_mistral_format(std::string_view t) {
  // Spaces around [INST] (Mistral 7B's releases: "[INST] " + content) are the first format's.
  if (!contains(t, "[INST]") || contains(t, "'[INST] '") || contains(t, "\"[INST] \"")) return std::nullopt;
  MistralFormat f;
  f.has_system_prompt = contains(t, "[SYSTEM_PROMPT]");
  if (!f.has_system_prompt && !contains(t, "[AVAILABLE_TOOLS]")) return std::nullopt;
  if (contains(t, "[CALL_ID]")) {
    f.calls = MistralFormat::Calls::NamedWithId;
  } else if (contains(t, "[ARGS]")) {
    f.calls = MistralFormat::Calls::Named;
  }
  // Small 3.2 and Nemo write the tools before the turn that equals user_messages[-1].
  f.are_tools_after_system = f.has_system_prompt && !contains(t, "user_messages[-1]");
  return f;
}

std::optional<std::string> chat_template_refusal(ChatTemplateFamily family, const std::vector<ChatMessage>& messages,
                                                 const ChatRenderOptions& options) {
  if (family == ChatTemplateFamily::Mistral && options.mistral)
    return detail::mistral_refusal(messages, *options.mistral);
  if (family == ChatTemplateFamily::Harmony) return detail::harmony_refusal(messages);
  if (family == ChatTemplateFamily::Glm45 || family == ChatTemplateFamily::Glm47) {
    return detail::glm_refusal(messages, family == ChatTemplateFamily::Glm47);
  }
  if (family == ChatTemplateFamily::DeepSeekV31) return detail::json_arguments_refusal(messages, "DeepSeek V3.1");
  if (family == ChatTemplateFamily::KimiK2) return detail::json_arguments_refusal(messages, "Kimi K2");
  if (family == ChatTemplateFamily::Qwen35) return detail::qwen35_refusal(messages);
  if (family != ChatTemplateFamily::Llama3 || options.llama3_date.empty()) return std::nullopt;
  const size_t after_system = !messages.empty() && messages[0].role == "system" ? 1 : 0;
  if (!options.tools.empty() && messages.size() <= after_system) {
    return "Llama 3's template puts the tools in the first message after the system message: there is none";
  }
  for (const ChatMessage& m : messages) {
    if (m.tool_calls.size() > 1) return "Llama 3's template takes one tool call per assistant message";
  }
  return std::nullopt;
}

std::string chat_template_smollm3_date(std::string_view t) {
  if (!contains(t, "Reasoning Mode: ") || !contains(t, "Today Date: ")) return {};
  return now_as_text("%d %B %Y", ClockZone::Local);  // the template's strftime_now("%d %B %Y")
}

std::string chat_template_llama3_date(std::string_view t) {
  if (t.find("Cutting Knowledge Date") == std::string_view::npos) return {};
  // Today, "%d %b %Y" in the C locale, for 3.1's and 3.3's templates too (whose own default is
  // "26 Jul 2024"): llama.cpp passes date_string so, and Meta's reference code writes the day.
  return now_as_text("%d %b %Y", ClockZone::Local);
}

std::string chat_template_default_system(std::string_view t) {
  if (std::string text = detail::jinja_default_system_message(t); !text.empty()) return text;
  // Qwen2.5: {{- '<|im_start|>system\nYou are Qwen, ...<|im_end|>\n' }} in the branch for a
  // conversation without a system message: a literal that runs from the marker to <|im_end|>
  // with no quote between (the other system turn writes messages[0]['content'] there).
  constexpr std::string_view kOpen = "<|im_start|>system\\n";
  for (size_t at = t.find(kOpen); at != std::string_view::npos; at = t.find(kOpen, at + 1)) {
    const size_t begin = at + kOpen.size();
    const size_t end = t.find("<|im_end|>", begin);
    if (end == std::string_view::npos) break;
    const std::string_view text = t.substr(begin, end - begin);
    if (!text.empty() && text.find_first_of("'\"{}\\") == std::string_view::npos) return std::string(text);
  }
  return {};
}

KimiFormat chat_template_kimi_format(std::string_view t) {
  KimiFormat f;
  if (detect_chat_template(t) != ChatTemplateFamily::KimiK2) return f;
  if (contains(t, "suffix_msgs")) {
    f.layout = KimiFormat::Layout::Thinking;
  } else if (!contains(t, "tool_response_queue")) {
    f.layout = KimiFormat::Layout::First;
  }
  // The default system text: the system turn whose text is a literal up to <|im_end|>.
  constexpr std::string_view kOpen = "<|im_system|>system<|im_middle|>";
  for (size_t at = t.find(kOpen); at != std::string_view::npos; at = t.find(kOpen, at + 1)) {
    const size_t begin = at + kOpen.size();
    const size_t end = t.find("<|im_end|>", begin);
    if (end == std::string_view::npos) break;
    const std::string_view text = t.substr(begin, end - begin);
    if (!text.empty() && text.find_first_of("'\"{}\\\n") == std::string_view::npos) {
      f.default_system = std::string(text);
      break;
    }
  }
  return f;
}

bool chat_template_doubles_tool_example(std::string_view t) {
  return t.find("{{\\\"name\\\": <function-name>") != std::string_view::npos;
}

std::vector<std::string> chat_stop_strings(ChatTemplateFamily family) {
  switch (family) {
    case ChatTemplateFamily::ChatMl: return {"<|im_end|>", "<|im_start|>"};
    case ChatTemplateFamily::Llama3: return {"<|eot_id|>", "<|start_header_id|>"};
    case ChatTemplateFamily::Gemma: return {"<end_of_turn>", "<start_of_turn>"};
    case ChatTemplateFamily::Phi3: return {"<|end|>", "<|user|>"};
    case ChatTemplateFamily::Zephyr: return {"<|user|>", "</s>"};
    case ChatTemplateFamily::Tulu: return {"<|user|>", "<|system|>"};
    case ChatTemplateFamily::SmolLM3:
    case ChatTemplateFamily::Qwen3Coder:
    case ChatTemplateFamily::Qwen35:
    case ChatTemplateFamily::Hermes: return {"<|im_end|>", "<|im_start|>"};
    case ChatTemplateFamily::Granite: return {"<|end_of_text|>", "<|start_of_role|>"};
    // GLM's turns have no end marker: the model ends its turn by opening the next one, the
    // user's or (after a call) the tool results'. Its GGUFs name both tokens EOT and EOM
    // (vocab_rules.cpp); the texts catch a reply generated with them shown.
    case ChatTemplateFamily::Glm45:
    case ChatTemplateFamily::Glm47: return {"<|user|>", "<|observation|>"};
    // DeepSeek's turns end with <｜end▁of▁sentence｜> (its EOS); Kimi's with <|im_end|> (an
    // end-of-generation token). The texts catch a reply generated with special tokens shown,
    // the next turn's opening one that runs on.
    case ChatTemplateFamily::DeepSeekV31: return {"<｜end▁of▁sentence｜>", "<｜User｜>"};
    case ChatTemplateFamily::KimiK2: return {"<|im_end|>", "<|im_user|>"};
    // Gemma 4's <turn|> ends the model's turn (an end-of-generation control token); the texts
    // catch a reply generated with special tokens shown, or one that runs on into a next turn.
    case ChatTemplateFamily::Gemma4: return {"<turn|>", "<|turn>"};
    case ChatTemplateFamily::Llama2:
    case ChatTemplateFamily::Mistral: return {"[INST]"};
    case ChatTemplateFamily::Plain: return {"\nUser:", "\nSystem:"};
    // Not <|end|>: it also closes the analysis channel, after which the final answer follows.
    case ChatTemplateFamily::Harmony: return {"<|return|>", "<|call|>", "<|start|>user"};
  }
  return {};
}

}  // namespace iwb
