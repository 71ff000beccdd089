// Chat templates: recognise the family of a model's `tokenizer.chat_template` (a Jinja text) and
// render conversations in that family's exact format, without a Jinja interpreter.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb {

enum class ChatTemplateFamily {
  ChatMl,  // <|im_start|>role\n...<|im_end|>  (Qwen, SmolLM, many fine-tunes)
  Llama2,  // <s>[INST] <<SYS>>...<</SYS>> ... [/INST]
  Llama3,  // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  // Mistral: [INST]...[/INST]; each release's template differs (MistralFormat). Without one of
  // the known formats, the first release's: "[INST] ... [/INST]", system text in the first turn.
  Mistral,
  Gemma,   // <start_of_turn>user\n...<end_of_turn>  (system text joins the first user turn)
  Phi3,    // <|user|>\n...<|end|>\n<|assistant|>\n
  Zephyr,  // <|user|>\n...</s>\n<|assistant|>\n
  // Tülu 3 (OLMo 2's instruct models): <|user|>\n...\n<|assistant|>\n...EOS, the EOS after assistant
  // turns only.
  Tulu,
  // SmolLM3: ChatML behind a system block the template always writes ("## Metadata", the
  // reasoning mode /think or /no_think, "## Custom Instructions"); /no_think replies open with an
  // empty <think> block.
  SmolLM3,
  // IBM Granite 3.x: <|start_of_role|>role<|end_of_role|>...<|end_of_text|>, behind a system turn
  // always written (without one: the template's own, with today's date).
  Granite,
  // gpt-oss's harmony: <|start|>role<|message|>...<|end|>; a system block the template writes
  // itself, the system prompt as the developer's instructions (and the tools as a TypeScript
  // namespace), past assistant turns in the final channel (<|channel|>final<|message|>), calls
  // to=functions.NAME, generation from <|start|>assistant.
  Harmony,
  // Hermes 2 Pro's and Hermes 3's tool-use template (their tokenizer.chat_template.tool_use):
  // ChatML behind a system turn that lists the tools with Python-style signatures.
  Hermes,
  // Qwen3-Coder: ChatML whose system turn lists the tools as <function> tags and whose calls are
  // tags (<function=NAME>, <parameter=KEY>), not JSON.
  Qwen3Coder,
  // GLM-4.5 and GLM-4.6: [gMASK]<sop>, then <|system|>, <|user|>, <|assistant|> and <|observation|>
  // turns (no end markers: the next turn's opens it), calls as <tool_call>NAME and
  // <arg_key>/<arg_value> tags on lines of their own, a think block opening each assistant turn.
  Glm45,
  // GLM-4.7: GLM-4.5's turns and tags without newlines between them; the generation prompt opens
  // <think>, and past turns without reasoning show only </think> (`clear_thinking` false keeps
  // every turn's reasoning).
  Glm47,
  // DeepSeek V3.1: BOS and the system text, then <｜User｜> and <｜Assistant｜> turns, the reply
  // opening with <think> (chat_template_kwargs `thinking`) or an empty <think></think>; calls in a
  // section of special tokens with JSON arguments, each result as <｜tool▁output▁begin｜>...; the
  // template lists no tools (DeepSeek's README has the client describe them in the system text).
  DeepSeekV31,
  // Kimi K2: <|im_system|>, <|im_user|>, <|im_assistant|> turns (role<|im_middle|>text<|im_end|>),
  // the tools as one JSON list in a tool_declare turn, calls as functions.NAME:INDEX with JSON
  // arguments between special tokens; the Instruct, first and Thinking releases differ
  // (KimiFormat).
  KimiK2,
  // Gemma 4: <|turn>role\n...<turn|>\n (the assistant's role "model"), the system text, <|think|>
  // and the tools (<|tool>declaration:NAME{...}<tool|>) in a system turn; reasoning in
  // <|channel>thought\n...<channel|>, closed empty in the generation prompt when thinking is off;
  // calls <|tool_call>call:NAME{key:<|"|>text<|"|>,...}<tool_call|> and their results
  // (<|tool_response>) inside the model's turn.
  Gemma4,
  // Qwen3.5 (and its MoE releases): ChatML whose system turn lists the tools as JSON before
  // Qwen3-Coder's call instructions (calls as <function=NAME> and <parameter=KEY> tags), contents
  // trimmed, a think block opening every assistant turn after the last user query, and a
  // generation prompt that opens <think> (or writes an empty one when thinking is off).
  Qwen35,
  Plain,  // fallback: "System: ...\nUser: ...\nAssistant:"
};

// A call an assistant turn made (OpenAI's tool_calls[i]: its id, function name and arguments).
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI's "arguments" string carries it
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool" (a tool's result)
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant: the calls the turn made
  std::string tool_call_id = {};              // tool: the call this is the result of
  // assistant: its reasoning as sent back (vLLM's and llama-server's `reasoning_content`); Qwen3's
  // template writes it instead of reading the content's think block.
  std::optional<std::string> reasoning_content = {};
};

std::string_view chat_template_family_name(ChatTemplateFamily family);
std::optional<ChatTemplateFamily> chat_template_family_from_name(std::string_view name);

// Picks the family whose markers appear in the template text; Plain when none does.
ChatTemplateFamily detect_chat_template(std::string_view jinja_template);

// What a Mistral template writes, read from its text (chat_template_mistral_format).
struct MistralFormat {
  // [SYSTEM_PROMPT]...[/SYSTEM_PROMPT] opens the prompt, with the template's default text when
  // the conversation has no system message (Small 3.x, Devstral: Mistral's "v7"); without it the
  // system text joins the last user turn when that is the last message (Nemo: "v3-tekken").
  bool has_system_prompt = false;
  // How calls are written after [TOOL_CALLS]: a JSON list of {"name", "arguments", "id"} (Nemo),
  // name[CALL_ID]id[ARGS]arguments (Small 3.2), name[ARGS]arguments (Devstral).
  enum class Calls : uint8_t { JsonList, NamedWithId, Named } calls = Calls::JsonList;
  // [AVAILABLE_TOOLS] right after the system prompt (Devstral, as Unsloth ships its template)
  // instead of before the last user message.
  bool are_tools_after_system = false;
};

// What a Kimi K2 template writes, read from its text (chat_template_kimi_format).
struct KimiFormat {
  // Instruct (Kimi-K2-Instruct's, the default): call ids counted over the whole conversation,
  // each result headed "## Return of" its call's id. First (moonshotai-Kimi-K2's first
  // release): ids counted within each message, results headed with the client's tool_call_id
  // and a literal backslash-n. Thinking (Kimi-K2-Thinking's): Instruct's ids, every assistant
  // turn opening with a think block, empty up to the first answer without calls, its
  // reasoning_content after it.
  enum class Layout : uint8_t { Instruct, First, Thinking } layout = Layout::Instruct;
  // The system turn written when the conversation opens without one.
  std::string default_system = "You are Kimi, an AI assistant created by Moonshot AI.";
};

struct ChatRenderOptions {
  std::string bos_text;               // the BOS token's text, for families that write it
  std::string eos_text = "</s>";      // written after assistant turns by Llama 2 / Mistral / Zephyr
  bool add_generation_prompt = true;  // end with the opening of an assistant turn
  // Tool definitions, each the JSON text of {"type": "function", "function": {...}} with the
  // client's key order: written as the family's template writes them (tojson, tool_calls.h) with
  // its tool instructions (ChatML: Qwen's <tools> in the system turn; Llama 3.1+: the first
  // user message).
  std::vector<std::string> tools;
  // Llama 3.1+ templates: the "Today Date:" of the system block they always write; empty:
  // Llama 3.0's format, without tools (chat_template_llama3_date).
  std::string llama3_date;
  // SmolLM3's own template (Hugging Face's; llama.cpp ships a copy without the line) writes
  // "Today Date: " and strftime_now("%d %B %Y") in its metadata block; empty: no such line
  // (chat_template_smollm3_date).
  std::string smollm3_date;
  // The system text the template writes when the conversation has none
  // (chat_template_default_system; ChatML only).
  std::string default_system;
  // Qwen2.5-Coder's template writes the call example as {{"name": ...}}, Qwen2.5's and Qwen3's
  // as {"name": ...} (chat_template_doubles_tool_example).
  bool doubles_tool_example_braces = false;
  // Mistral: the release's format; unset, the first release's (no tools).
  std::optional<MistralFormat> mistral;
  KimiFormat kimi;  // Kimi K2: the release's layout (chat_template_kimi_format)
  // gpt-oss's template writes "Current date: " and strftime_now("%Y-%m-%d") in its system block;
  // empty: no such line (chat_template_harmony_date).
  std::string harmony_date;
  // Thinking controls, as the templates read them from chat_template_kwargs: enable_thinking
  // (SmolLM3: its reasoning mode's default; Qwen3: false opens the reply with an empty think
  // block, where `closes_think_when_off`), reasoning_effort (gpt-oss: "Reasoning: ...", medium
  // when empty).
  std::optional<bool> enable_thinking;
  std::string reasoning_effort;
  // GLM-4.7's clear_thinking: false writes the reasoning of every past assistant turn, not only
  // of those after the last user message.
  std::optional<bool> clear_thinking;
  bool closes_think_when_off = false;  // chat_template_closes_think_when_off
  // Qwen3's template (chat_template_reads_past_thinking): an assistant turn's <think> block is
  // taken out of its text, and turns after the last user query that are the last message (or
  // had reasoning) are written with their think block.
  bool reads_past_thinking = false;
  // Qwen3.5's releases whose generation prompt opens <think> only when enable_thinking is true
  // (chat_template_is_thinking_opt_in); the others think unless it is false.
  bool is_thinking_opt_in = false;
};

// Whether the family has a tool-call format here (tools, assistant tool_calls and tool results
// can be rendered): ChatML (Qwen2.5's and Qwen3's <tools>/<tool_call>/<tool_response>), Llama 3
// in its 3.1+ format (`llama3_date` set: {"name", "parameters"} calls, ipython results),
// Mistral's as Nemo, Small 3.2 and Devstral write them (`mistral` set), Granite 3.x's
// (<|tool_call|> and a JSON list), gpt-oss's (harmony's commentary to=functions.NAME), Hermes's
// tool-use template's, Qwen3-Coder's (<function=NAME> and <parameter=KEY> tags), GLM-4.5's to
// 4.7's (<tool_call>NAME and <arg_key>/<arg_value> tags), DeepSeek V3.1's and Kimi K2's (special
// tokens around a name and JSON arguments), Gemma 4's (<|tool_call>call:NAME{...} with <|"|> strings),
// Qwen3.5's (Qwen3-Coder's tags).
bool chat_template_has_tools(ChatTemplateFamily family, const ChatRenderOptions& options);

// Llama 3.1+ templates' date (ChatRenderOptions::llama3_date): empty for a template without
// "Cutting Knowledge Date", else today's ("05 Dec 2026"), as llama-server gives every one of
// them (Hugging Face's rendering keeps 3.1's and 3.3's own "26 Jul 2024").
std::string chat_template_llama3_date(std::string_view jinja_template);

// Whether the template opens the reply with an empty <think> block when enable_thinking is false
// (Qwen3's: `enable_thinking is defined and enable_thinking is false`).
bool chat_template_closes_think_when_off(std::string_view jinja_template);

// Whether the template thinks only when asked (`enable_thinking is defined and enable_thinking is
// true`, as some Qwen3.5 releases write their generation prompt): without enable_thinking the
// reply opens with an empty think block.
bool chat_template_is_thinking_opt_in(std::string_view jinja_template);

// A ChatML template whose tool format is not written here, in words (Nemotron 3 Nano's: calls as
// <function=NAME> and <parameter=KEY> tags behind a prompt of its own); empty for any other. Its
// tools are refused rather than written as Qwen2.5's.
std::string chat_template_unwritten_tool_format(std::string_view jinja_template);

// Whether a ChatML template handles past assistant turns' reasoning as Qwen3's does (it finds
// the last user query: `last_query_index`, and splits contents at </think>).
bool chat_template_reads_past_thinking(std::string_view jinja_template);

// gpt-oss's date (ChatRenderOptions::harmony_date): today's ("2026-12-06", local time) for a
// harmony template with a "Current date" line, else empty.
std::string chat_template_harmony_date(std::string_view jinja_template);

// SmolLM3's date (ChatRenderOptions::smollm3_date): today's ("06 December 2026", local time) for
// a SmolLM3 template with a "Today Date" line, else empty.
std::string chat_template_smollm3_date(std::string_view jinja_template);

// The system text a template writes when a conversation has none, read from its Jinja text:
// ChatML's (Qwen2.5: "You are Qwen, created by Alibaba Cloud. ..."), or the value of a
// `default_system_message` set from literals and a strftime_now date (Mistral Small 3.2: "...
// The current date is 2026-12-06. ..."); empty when it has none.
std::string chat_template_default_system(std::string_view jinja_template);

// A Kimi K2 template's layout and default system text (KimiFormat; Instruct's for any other text).
KimiFormat chat_template_kimi_format(std::string_view jinja_template);

// A Mistral template's format (MistralFormat), when it is one written here: one with
// [SYSTEM_PROMPT] or [AVAILABLE_TOOLS], and "[INST]" written without spaces around it.
std::optional<MistralFormat> chat_template_mistral_format(std::string_view jinja_template);

// What the model's template refuses to render (its raise_exception), in words; nullopt when it
// renders the conversation. Families with tool formats check the tool turns' shape (Llama 3:
// one call per turn; Mistral: alternating roles, call ids of 9 characters; Qwen3.5: a user query,
// no system message after the first, arguments as JSON objects).
std::optional<std::string> chat_template_refusal(ChatTemplateFamily family, const std::vector<ChatMessage>& messages,
                                                 const ChatRenderOptions& options);

// Whether the template writes its tool-call example with doubled braces ({{"name": ...}}, a
// quirk of some Qwen2.5 releases' templates, reproduced as written).
bool chat_template_doubles_tool_example(std::string_view jinja_template);

std::string render_chat(ChatTemplateFamily family, const std::vector<ChatMessage>& messages,
                        const ChatRenderOptions& options);

// Text sequences that end an assistant turn in this family (besides the EOS/EOT tokens).
std::vector<std::string> chat_stop_strings(ChatTemplateFamily family);

}  // namespace iwb
