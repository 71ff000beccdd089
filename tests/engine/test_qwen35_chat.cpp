// Qwen3.5's chat template and replies without a model: the family told apart from Qwen3-Coder's,
// Nemotron 3 Nano's and plain ChatML, conversations rendered as jinja2 renders its template (the
// expected texts below are jinja2's on tests/serve/templates/Qwen3.5-4B.jinja, llama.cpp's copy of
// Qwen3.5's template; test_templates_vs_jinja compares many more through `iwb serve`), what the
// template refuses, the prompt it builds (tool format, a reply opening inside its think block),
// and replies split into reasoning, text and calls (whole and streamed) and sent back unchanged.
#include "chat/python_text.h"
#include "chat/qwen35_template.h"
#include "grammar_checks.h"
#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/reply_parts.h"
#include "iwb/engine/chat/tool_calls.h"
#include "streamed_calls_check.h"

#include <QFile>
#include <QtTest>
#include "test_paths.h"

using namespace iwb;
using namespace iwb::test;

class TestQwen35Chat : public QObject {
  Q_OBJECT

 private slots:
  void detectsTheFamily();
  void rendersToolsCallsAndResults();
  void rendersReasoningAfterTheLastQuery();
  void generationPromptFollowsThinking();
  void refusesWhatItsTemplateRefuses();
  void buildsThePrompt();
  void splitsReasoningAndCalls();
  void streamedPartsOnlyGrow();
  void repliesGoBackAsTheModelWroteThem();
};

namespace {

// The template's text: tests/serve/templates/Qwen3.5-4B.jinja (llama.cpp's
// models/templates/Qwen3.5-4B.jinja, Qwen3.5's chat_template.jinja).
std::string qwen35_template() {
  QFile file(QString::fromStdString(iwb::test::from_build_dir(IWB_TEMPLATES_FROM_BUILD "/Qwen3.5-4B.jinja")));
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(file.fileName()));
  return file.readAll().toStdString();
}

// Snippets of other templates (the parts detection reads): Nemotron 3 Nano's tools (tags after
// their own literal, the same call instructions) and StepFun 3.5's (JSON "in JSONSchema format"),
// as llama.cpp's models/templates/ have them.
const char* const kNemotronMarks =
    "{{- \"<|im_start|>system\\n\" }}{{- \"# Tools\\n\\nYou have access to the following functions:\\n\\n\" }}"
    "{{- \"<tools>\" }}{{- \"\\n<function>\\n<name>\" ~ tool.name ~ \"</name>\" }}<parameter=example_parameter_1>";
const char* const kStepFunMarks =
    "{{- '<|im_start|>system\\n' }}{{- \"# Tools\\n\\nYou have access to the following functions in JSONSchema "
    "format:\\n\\n<tools>\" }}<parameter=example_parameter_1>";

const std::string kWeather =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city, °C", )"
    R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, )"
    R"("required": ["city"]}}})";
const std::string kNow = R"({"type": "function", "function": {"name": "now", "description": "The time", "parameters": )"
                         R"({"type": "object", "properties": {}}}})";

// The system turn jinja2 writes for these tools, then the system text (empty: none).
std::string tools_turn(const std::vector<std::string>& tools, const std::string& system) {
  std::string s = "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
  for (const std::string& tool : tools) s += "\n" + tool;
  s += "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
       "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
       "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
       "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the "
       "specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> "
       "XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function "
       "call in natural language BEFORE the function call, but NOT after\n- If there is no function call "
       "available, answer the question like normal with your current knowledge and do not tell the user about "
       "function calls\n</IMPORTANT>";
  return s + (system.empty() ? "" : "\n\n" + system) + "<|im_end|>\n";
}

ChatMessage assistant(std::string content, std::vector<ChatToolCall> calls = {},
                      std::optional<std::string> reasoning = std::nullopt) {
  ChatMessage m{"assistant", std::move(content), std::move(calls)};
  m.reasoning_content = std::move(reasoning);
  return m;
}

ChatMessage result(std::string content) { return {"tool", std::move(content), {}, "call00001"}; }

std::string render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o = {}) {
  return render_chat(ChatTemplateFamily::Qwen35, messages, o);
}

std::vector<ToolDefinition> tools() {
  ToolDefinition weather;
  weather.name = "get_weather";
  weather.parameters_json = R"({"type": "object", "properties": {"city": {"type": "string"}, "days": )"
                            R"({"type": "integer"}}})";
  weather.json = kWeather;
  ToolDefinition now;
  now.name = "now";
  now.json = kNow;
  return {weather, now};
}

// A SentencePiece vocabulary of ChatML's markers and single characters: enough for
// build_chat_prompt to tokenize a prompt.
tokenizer::Tokenizer small_tokenizer() {
  tokenizer::Vocab v;
  v.kind = tokenizer::VocabKind::Spm;
  v.model = "llama";
  std::vector<std::string> pieces = {"<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (char c = ' '; c <= '~'; ++c) pieces.emplace_back(1, c);
  for (size_t i = 0; i < pieces.size(); ++i) {
    v.tokens.push_back(pieces[i]);
    v.scores.push_back(-static_cast<float>(i));
    v.types.push_back(i == 0  ? tokenizer::TokenType::Unknown
                      : i < 4 ? tokenizer::TokenType::Control
                              : tokenizer::TokenType::Normal);
  }
  v.special.unk = 0;
  v.special.eos = 1;
  Result<tokenizer::Tokenizer> t = tokenizer::Tokenizer::create(std::move(v));
  if (!t) qFatal("%s", t.error_message().c_str());
  return std::move(t).value();
}

// The server's reading of a reply (CompletionSession::chat_parts): the think block the prompt
// opened, then the calls in the answer.
struct Read {
  ReplyParts parts;
  ToolReply reply;
};
Read read_reply(const std::string& text, bool is_streaming, const ToolArgumentTypes& types) {
  Read r;
  r.parts = split_reply("<think>" + text, is_streaming);
  r.reply = split_tool_calls(r.parts.content, is_streaming, ToolCallFormat::QwenXml, &types);
  return r;
}

const std::string kCallParis =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
    "</function>\n</tool_call>";

}  // namespace

void TestQwen35Chat::detectsTheFamily() {
  const std::string text = qwen35_template();
  QCOMPARE(detect_chat_template(text), ChatTemplateFamily::Qwen35);
  QVERIFY(!chat_template_is_thinking_opt_in(text));
  QVERIFY(chat_template_unwritten_tool_format(text).empty());
  QCOMPARE(chat_template_summary(text),
           std::string("qwen3.5; tools: <tool_call> blocks of <function=NAME> and <parameter=KEY> tags (Qwen3-Coder, "
                       "Qwen3.5)"));
  // The releases that think only when asked: the same family.
  const std::string opt_in = "enable_thinking is defined and enable_thinking is true";
  QCOMPARE(detect_chat_template(text + opt_in), ChatTemplateFamily::Qwen35);
  QVERIFY(chat_template_is_thinking_opt_in(text + opt_in));
  // Nemotron 3 Nano's and StepFun's prompts are not Qwen3.5's: their tools are still refused.
  for (const char* other : {kNemotronMarks, kStepFunMarks}) {
    QCOMPARE(detect_chat_template(other), ChatTemplateFamily::ChatMl);
    QVERIFY(chat_template_unwritten_tool_format(other).find("Nemotron 3 Nano") != std::string::npos);
  }
  QCOMPARE(chat_template_family_name(ChatTemplateFamily::Qwen35), std::string_view("qwen3.5"));
  QCOMPARE(chat_template_family_from_name("qwen3.5"), std::optional(ChatTemplateFamily::Qwen35));
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Qwen35, {}));
  QCOMPARE(chat_stop_strings(ChatTemplateFamily::Qwen35), (std::vector<std::string>{"<|im_end|>", "<|im_start|>"}));
}

void TestQwen35Chat::rendersToolsCallsAndResults() {
  // Contents trimmed (the system text after the tool instructions); a past turn's think block
  // (before the last user query) dropped; calls after a blank line; results in one user turn.
  ChatRenderOptions o;
  o.tools = {kWeather, kNow};
  const std::vector<ChatMessage> conversation = {
      {"system", "  Be brief.  "},
      {"user", " Weather in Paris and the time? "},
      assistant("<think>\nTwo tools.\n</think>\n\nChecking.",
                {{"call00001", "get_weather", R"({"unit": "c", "city": "Paris"})"}, {"call00002", "now", "{}"}}),
      result(R"({"temp": 21})"),
      result(" 12:00\n"),
      {"assistant", "21 °C at noon."},
      {"user", "Thanks"}};
  QCOMPARE(render(conversation, o),
           tools_turn(o.tools, "Be brief.") +
               "<|im_start|>user\nWeather in Paris and the time?<|im_end|>\n<|im_start|>assistant\nChecking.\n\n"
               "<tool_call>\n<function=get_weather>\n<parameter=unit>\nc\n</parameter>\n<parameter=city>\nParis\n"
               "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=now>\n</function>\n</tool_call>"
               "<|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<tool_response>\n"
               "12:00\n</tool_response><|im_end|>\n<|im_start|>assistant\n21 °C at noon.<|im_end|>\n"
               "<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n<think>\n");
  // The current turn: its reasoning_content in a think block, values as Python prints them
  // (mappings and lists as JSON), a think block read from the text keeping the text's spaces;
  // thinking off closes the generation prompt's block.
  o.tools = {kWeather};
  o.enable_thinking = false;
  const std::vector<ChatMessage> agent = {
      {"user", "Weather in Oslo?"},
      assistant("",
                {{"call00001", "get_weather",
                  R"({"city": "Oslo", "days": 3, "opts": {"a": [1, true, null]}, "ratio": 0.5, "flag": false, )"
                  R"("none": null, "big": 1e20})"}},
                "\nUse the tool.\n"),
      result("-3"),
      assistant("<think>\nCold.\n</think>\n\n  It is -3 °C.")};
  QCOMPARE(render(agent, o),
           tools_turn(o.tools, "") +
               "<|im_start|>user\nWeather in Oslo?<|im_end|>\n<|im_start|>assistant\n<think>\nUse the tool.\n"
               "</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
               "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"a\": [1, true, null]}\n</parameter>\n"
               "<parameter=ratio>\n0.5\n</parameter>\n<parameter=flag>\nFalse\n</parameter>\n<parameter=none>\n"
               "None\n</parameter>\n<parameter=big>\n1e+20\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
               "<|im_start|>user\n<tool_response>\n-3\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
               "<think>\nCold.\n</think>\n\n  It is -3 °C.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // No tools: a system turn of its own, written even when empty; a result first in the
  // conversation opens no user turn (the template's loop.previtem).
  QCOMPARE(render({{"system", " "}, {"user", "Hi"}}, {}),
           std::string("<|im_start|>system\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                       "<think>\n"));
  // Trimmed as Python's str.strip() trims: Unicode's spaces (U+3000, U+2003, U+00A0, U+2028) and
  // the separators \x1c-\x1f too, not the letters beside them.
  ChatRenderOptions plain;
  plain.add_generation_prompt = false;
  QCOMPARE(render({{"system", "\u3000Be brief.\u2003"}, {"user", "\u00a0\x1cH\u00e9 \u4e16\u3000\u2028\n"}}, plain),
           std::string("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nH\u00e9 \u4e16<|im_end|>\n"));
  // Bytes that are no whole character stay (a cut sequence, a lone continuation byte).
  QCOMPARE(detail::python_strip("\x80 a \xe3\x80"), std::string("\x80 a \xe3\x80"));
  QCOMPARE(detail::python_strip(" \xe3\x80\x80"), std::string());
  QCOMPARE(render({result("r"), {"user", "Hi"}}, {}),
           std::string("\n<tool_response>\nr\n</tool_response><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                       "<|im_start|>assistant\n<think>\n"));
}

void TestQwen35Chat::rendersReasoningAfterTheLastQuery() {
  // Before the last user query: the reasoning dropped (a think block in the text as well); with
  // reasoning_content the text is written as it is, its own think block included.
  const std::vector<ChatMessage> turns = {{"user", "Hi"},
                                          {"assistant", "<think>Greet.</think>Hello!"},
                                          {"user", "And now?"},
                                          assistant("<think>Still.</think>Now.", {}, "Answer."),
                                          {"user", "Ok"}};
  QCOMPARE(render(turns),
           std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n"
                       "And now?<|im_end|>\n<|im_start|>assistant\n<think>Still.</think>Now.<|im_end|>\n"
                       "<|im_start|>user\nOk<|im_end|>\n<|im_start|>assistant\n<think>\n"));
  // After it: every assistant turn has a think block, empty without reasoning. A user message that
  // is a <tool_response> block (a client's own wrapping) is no query.
  ChatRenderOptions o;
  o.add_generation_prompt = false;
  const std::vector<ChatMessage> loop = {{"user", "Time?"},
                                         assistant("", {{"call00001", "now", "{}"}}),
                                         {"user", "<tool_response>\nnoon\n</tool_response>"},
                                         {"assistant", "Noon."}};
  QCOMPARE(render(loop, o),
           std::string("<|im_start|>user\nTime?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"
                       "<function=now>\n</function>\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nnoon\n"
                       "</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nNoon.<|im_end|>\n"));
  // The reasoning between the last <think> and the first </think>, the text after the last one
  // (Python's split()[0] and split()[-1]).
  QCOMPARE(render({{"user", "Q"}, {"assistant", "a<think>\nb<think>c\n</think>d</think>\n\ne"}}, o),
           std::string("<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nc\n</think>\n\ne<|im_end|>\n"));
}

void TestQwen35Chat::generationPromptFollowsThinking() {
  const std::vector<ChatMessage> hi = {{"user", "Hi"}};
  const std::string head = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  const std::string open = head + "<think>\n", closed = head + "<think>\n\n</think>\n\n";
  ChatRenderOptions o;
  QCOMPARE(render(hi, o), open);  // thinking unless enable_thinking is false
  o.enable_thinking = true;
  QCOMPARE(render(hi, o), open);
  o.enable_thinking = false;
  QCOMPARE(render(hi, o), closed);
  // The releases that think only when asked.
  o.is_thinking_opt_in = true;
  QCOMPARE(render(hi, o), closed);
  o.enable_thinking.reset();
  QCOMPARE(render(hi, o), closed);
  o.enable_thinking = true;
  QCOMPARE(render(hi, o), open);
  o.add_generation_prompt = false;
  QCOMPARE(render(hi, o), std::string("<|im_start|>user\nHi<|im_end|>\n"));
}

void TestQwen35Chat::refusesWhatItsTemplateRefuses() {
  const auto refusal = [](const std::vector<ChatMessage>& messages) {
    return chat_template_refusal(ChatTemplateFamily::Qwen35, messages, {}).value_or("");
  };
  QCOMPARE(refusal({{"system", "S"}, {"assistant", "x"}}),
           std::string("Qwen3.5's template: No user query found in messages."));
  QCOMPARE(refusal({{"user", " <tool_response>a</tool_response>\n"}}),
           std::string("Qwen3.5's template: No user query found in messages."));
  QCOMPARE(refusal({{"user", "Hi"}, {"system", "S"}}),
           std::string("Qwen3.5's template: System message must be at the beginning."));
  QCOMPARE(refusal({{"user", "Hi"}, assistant("", {{"c", "now", "[1]"}})}),
           std::string("Qwen3.5's template takes a tool call's arguments only as a JSON object (call 'now')"));
  QVERIFY(!chat_template_refusal(ChatTemplateFamily::Qwen35, {{"system", "S"}, {"user", "Hi"}}, {}));
  const tokenizer::Tokenizer tok = small_tokenizer();
  const Result<ChatPrompt> refused = build_chat_prompt(tok, qwen35_template(), {{"user", "Hi"}, {"system", "S"}});
  QVERIFY(!refused.is_ok());
  QVERIFY(refused.error_message().find("System message must be at the beginning") != std::string::npos);
}

void TestQwen35Chat::buildsThePrompt() {
  const tokenizer::Tokenizer tok = small_tokenizer();
  const std::string text = qwen35_template();
  ChatPromptOptions options;
  options.tools = {kWeather};
  // Thinking on (the template's default): the prompt opens the reply's think block.
  Result<ChatPrompt> prompt = build_chat_prompt(tok, text, {{"user", "Weather?"}}, options);
  QVERIFY2(prompt.is_ok(), prompt.error_message().c_str());
  QCOMPARE(prompt->family, ChatTemplateFamily::Qwen35);
  QCOMPARE(prompt->tool_format, std::optional(ToolCallFormat::QwenXml));
  QVERIFY(prompt->opens_reasoning);
  QVERIFY(!prompt->renders_special_tokens);
  QVERIFY(prompt->text.starts_with(tools_turn({kWeather}, "")));
  QCOMPARE(prompt->stop_strings, (std::vector<std::string>{"<|im_end|>", "<|im_start|>"}));
  QCOMPARE(prompt->tokens[0], 2);  // <|im_start|>: no BOS added
  // Off: the reply opens after an empty block, as its answer.
  options.enable_thinking = false;
  prompt = build_chat_prompt(tok, text, {{"user", "Weather?"}}, options);
  QVERIFY(prompt.is_ok() && !prompt->opens_reasoning);
  QVERIFY(prompt->text.ends_with("<think>\n\n</think>\n\n"));
  // The releases that think only when asked; a family named by the user.
  options.enable_thinking.reset();
  prompt = build_chat_prompt(tok, text + "enable_thinking is defined and enable_thinking is true", {{"user", "Hi"}},
                             options);
  QVERIFY(prompt.is_ok() && !prompt->opens_reasoning);
  options.family = ChatTemplateFamily::Qwen35;
  prompt = build_chat_prompt(tok, "", {{"user", "Hi"}}, options);
  QVERIFY(prompt.is_ok() && prompt->opens_reasoning && prompt->tool_format == ToolCallFormat::QwenXml);
}

void TestQwen35Chat::splitsReasoningAndCalls() {
  const ToolArgumentTypes types = tool_argument_types(tools());
  // After the prompt's "<think>\n": the reasoning, the text and a call, as Qwen3.5 writes them.
  Read r = read_reply("The user wants weather.\n</think>\n\nLet me check.\n\n" + kCallParis, false, types);
  QCOMPARE(r.parts.reasoning, std::string("The user wants weather."));
  QVERIFY(!r.parts.is_reasoning);
  QCOMPARE(r.reply.content, std::string("Let me check."));
  QCOMPARE(r.reply.calls.size(), size_t{1});
  QCOMPARE(r.reply.calls[0].name, std::string("get_weather"));
  QCOMPARE(r.reply.calls[0].arguments, std::string(R"({"city":"Paris","days":3})"));
  // Two calls and no text; a string parameter's text stays a string.
  r = read_reply("Two.\n</think>\n\n" + kCallParis +
                     "\n<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n</function>\n"
                     "</tool_call>",
                 false, types);
  QCOMPARE(r.reply.calls.size(), size_t{2});
  QCOMPARE(r.reply.calls[1].arguments, std::string(R"({"city":"42"})"));
  QVERIFY(r.reply.content.empty());
  // Cut inside its reasoning (still thinking), and inside a call (max_tokens).
  r = read_reply("Hmm, the", false, types);
  QCOMPARE(r.parts.reasoning, std::string("Hmm, the"));
  QVERIFY(r.parts.is_reasoning && r.reply.content.empty());
  r = read_reply("R\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", false, types);
  QCOMPARE(r.reply.calls.size(), size_t{1});
  QCOMPARE(r.reply.calls[0].arguments, std::string("{\"city\":\"Par"));
  // Thinking off: the reply is the answer (the prompt closed the block).
  const ToolReply off =
      split_tool_calls(split_reply("Sure.\n\n" + kCallParis).content, false, ToolCallFormat::QwenXml, &types);
  QCOMPARE(off.content, std::string("Sure."));
  QCOMPARE(off.calls.size(), size_t{1});
}

void TestQwen35Chat::streamedPartsOnlyGrow() {
  const ToolArgumentTypes types = tool_argument_types(tools());
  const std::string reply =
      "I should call <b>it</b>.\n</think>\n\nLet me check  São Paulo.\n\n<tool_call>\n"
      "<function=get_weather>\n<parameter=city>\nSão\nPaulo </parameter> x\n</parameter>\n"
      "<parameter=days>\n12\n</parameter>\n</function>\n</tool_call>\n" +
      kCallParis;
  const Read whole = read_reply(reply, false, types);
  QCOMPARE(whole.reply.calls.size(), size_t{2});
  QCOMPARE(whole.reply.calls[0].arguments, std::string(R"({"city":"São\nPaulo </parameter> x","days":12})"));
  int num_growing = 0;
  for (size_t cut = 0; cut <= reply.size(); ++cut) {
    const Read part = read_reply(reply.substr(0, cut), true, types);
    const QString where = printable(reply.substr(0, cut));
    QVERIFY2(whole.parts.reasoning.starts_with(part.parts.reasoning), qPrintable(where));
    QVERIFY2(whole.reply.content.starts_with(part.reply.content), qPrintable(where));
    QVERIFY2(part.parts.reasoning.find("</t") == std::string::npos, qPrintable(where));  // no marker leaks
    QVERIFY2(part.reply.content.find("<tool") == std::string::npos, qPrintable(where));
    QVERIFY2(part.reply.calls.size() <= whole.reply.calls.size(), qPrintable(where));
    for (size_t i = 0; i < part.reply.calls.size(); ++i) {
      QCOMPARE(part.reply.calls[i].name, whole.reply.calls[i].name);
      QVERIFY2(whole.reply.calls[i].arguments.starts_with(part.reply.calls[i].arguments), qPrintable(where));
      num_growing += part.reply.calls[i].arguments != whole.reply.calls[i].arguments;
    }
  }
  QVERIFY(num_growing > 10);  // a string's text streamed as it came
  // The answer alone (thinking off), through the shared check.
  test::expect_streamed_calls_grow("Sure.\n\n" + kCallParis, ToolCallFormat::QwenXml, {&types, {"<tool"}});
}

void TestQwen35Chat::repliesGoBackAsTheModelWroteThem() {
  // A reply read as the server reads it and sent back (reasoning_content, text, calls) renders as
  // the prompt plus the reply: the next turn's prompt extends this one's (its KV cache reused).
  const ToolArgumentTypes types = tool_argument_types(tools());
  ChatRenderOptions o;
  o.tools = {kWeather, kNow};
  std::vector<ChatMessage> conversation = {{"system", "Be brief."}, {"user", "Weather in Paris?"}};
  const std::string prompt = render(conversation, o);
  const std::string reply = "The user wants weather.\n</think>\n\nLet me check.\n\n" + kCallParis +
                            "\n<tool_call>\n<function=now>\n</function>\n</tool_call>";
  const Read r = read_reply(reply, false, types);
  std::vector<ChatToolCall> calls;
  for (const ParsedToolCall& call : r.reply.calls) calls.push_back({"call00001", call.name, call.arguments});
  conversation.push_back(assistant(r.reply.content, calls, r.parts.reasoning));
  conversation.push_back(result("18 °C"));
  const std::string next = render(conversation, o);
  QVERIFY2(next.starts_with(prompt + reply + "<|im_end|>\n"), qPrintable(printable(next)));
  // The same with the reply's text as the chat view keeps it (its think block in the content).
  conversation[2] = assistant("<think>" + r.parts.reasoning + "</think>\n\n" + r.reply.content, calls);
  QCOMPARE(render(conversation, o), next);
}

QTEST_GUILESS_MAIN(TestQwen35Chat)
#include "test_qwen35_chat.moc"
