// DeepSeek V3.1's and Kimi K2's chat templates and tool calls (ToolCallFormat::DeepSeekV31,
// KimiK2) without a model: the families told apart by their templates' markers, conversations
// rendered as jinja2 renders llama.cpp's deepseek-ai-DeepSeek-V3.1.jinja, Kimi-K2-Instruct.jinja,
// moonshotai-Kimi-K2.jinja and Kimi-K2-Thinking.jinja (the expected texts below are jinja2's),
// the section grammar (each call's name and arguments held to the tools' schemas, the token mask
// against feeding each token), and replies split into text and calls, whole and streamed.
#include "grammar_checks.h"
#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/reply_parts.h"
#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/sampling/token_constraint.h"
#include "streamed_calls_check.h"

#include <QtTest>

#include <random>

using namespace iwb;
using namespace iwb::test;

class TestSectionTools : public QObject {
  Q_OBJECT

 private slots:
  void detectsTheFamilies();
  void rendersDeepSeekAsItsTemplateDoes();
  void rendersKimiAsItsTemplatesDo();
  void refusesArgumentsThatAreNoJson();
  void grammarHoldsWholeSections();
  void tokenMaskAgreesWithFeedingEachToken();
  void splitsCallsFromText();
  void keepsWhatIsNoCallAsText();
  void streamedCallsOnlyGrow();
};

namespace {

// The markers the templates are told apart by (snippets of the real texts).
const char* const kDeepSeekV31Marks =
    "{{ bos_token }}{{ ns.system_prompt }}{{'<｜User｜>' + message['content']}}{{'<｜Assistant｜><think></think>'}}"
    "{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>' + "
    "tool['function']['arguments'] | tojson + '<｜tool▁call▁end｜>'}}{{'<｜tool▁output▁begin｜>' + "
    "message['content'] + '<｜tool▁output▁end｜>'}}";
// DeepSeek R1 (and its distills, and V3): a ```json block after the name, not written here.
const char* const kDeepSeekR1Marks =
    "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + "
    "tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + "
    "'<｜tool▁call▁end｜>'}}{{'<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}";
const char* const kKimiInstructMarks =
    "{%- set tool_response_queue = namespace(ids=[]) -%}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}"
    "<|im_end|><|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"
    "<|im_user|>{{role_name}}<|im_middle|><|tool_calls_section_begin|>";
const char* const kKimiFirstMarks =
    "<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>"
    "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|>{%- if message['role'] == 'system' -%}"
    "<|im_system|>system<|im_middle|>{%- elif -%}<|tool_calls_section_begin|>## Return of {{ message.tool_call_id }}";
const char* const kKimiThinkingMarks =
    "{%- set suffix_msgs = messages[ns.last_non_tool_call_assistant_msg+1:] -%}{%- set tool_response_queue = "
    "namespace(ids=[]) -%}<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot "
    "AI.<|im_end|><|tool_calls_section_begin|>";

const char* const kDeepSeekThinking =
    "<｜begin▁of▁sentence｜>Be brief.\n"
    "\n"
    "Use tools.<｜User｜>Hi<｜Assistant｜><think></think>\n"
    "\n"
    "Hello!<｜end▁of▁sentence｜><｜User｜>Weather?<｜Assistant｜><think>"
    "</think>On it.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
    "<｜tool▁sep｜>{\"city\": \"Paris\", \"days\": 3, \"opts\": {\"a\": [1, 2.5]}, \"note\": \"é\\n\", \"flag\": null"
    "}<｜tool▁call▁end｜><｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
    "<｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>{\"temp\": 21}"
    "<｜tool▁output▁end｜><｜tool▁output▁begin｜>noon<｜tool▁output▁end｜>It is 21 °C."
    "<｜end▁of▁sentence｜><｜User｜>Thanks<｜Assistant｜><think>";

const char* const kDeepSeek =
    "<｜begin▁of▁sentence｜>Be brief.\n"
    "\n"
    "Use tools.<｜User｜>Hi<｜Assistant｜><think></think>\n"
    "\n"
    "Hello!<｜end▁of▁sentence｜><｜User｜>Weather?<｜Assistant｜><think>"
    "</think>On it.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
    "<｜tool▁sep｜>{\"city\": \"Paris\", \"days\": 3, \"opts\": {\"a\": [1, 2.5]}, \"note\": \"é\\n\", \"flag\": null"
    "}<｜tool▁call▁end｜><｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
    "<｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>{\"temp\": 21}"
    "<｜tool▁output▁end｜><｜tool▁output▁begin｜>noon<｜tool▁output▁end｜>It is 21 °C."
    "<｜end▁of▁sentence｜><｜User｜>Thanks<｜Assistant｜><think></think>";

// After a tool's result the template writes no generation prompt: the reply goes on from it.
const char* const kDeepSeekAfterResult =
    "<｜begin▁of▁sentence｜><｜User｜>Time?<｜Assistant｜><think></think>"
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>now<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
    "<｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>noon"
    "<｜tool▁output▁end｜>";

const char* const kKimiInstruct =
    "<|im_system|>tool_declare<|im_middle|>[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"de"
    "scription\": \"Weather in a city, °C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"t"
    "ype\": \"string\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}, {\"type\": \"function\""
    ", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": {\"type\": \"object\", \"pr"
    "operties\": {}}}}]<|im_end|><|im_system|>system<|im_middle|>Be brief."
    "<|im_end|><|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant"
    "<|im_middle|><think>\n"
    "Greet.\n"
    "</think>\n"
    "\n"
    "Hello!<|im_end|><|im_system|>system<|im_middle|>Use tools.<|im_end|>"
    "<|im_user|>user<|im_middle|>Weather?<|im_end|><|im_assistant|>assistant"
    "<|im_middle|>On it.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    "<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 3, \"opts\": {\"a\": [1, 2.5]}, \"note\": \"é\\n\""
    ", \"flag\": null}<|tool_call_end|><|tool_call_begin|>functions.now:1"
    "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"
    "<|im_end|><|im_system|>tool<|im_middle|>## Return of functions.get_weather:0\n"
    "{\"temp\": 21}<|im_end|><|im_system|>tool<|im_middle|>## Return of functions.now:1\n"
    "noon<|im_end|><|im_assistant|>assistant<|im_middle|>It is 21 °C."
    "<|im_end|><|im_user|>user<|im_middle|>Thanks<|im_end|><|im_assistant|>assistant"
    "<|im_middle|>";

// The first release: ids counted within each message, results headed with the client's ids and a
// literal backslash-n, its own default system text (unused here: the conversation has one).
const char* const kKimiFirst =
    "<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>user"
    "<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>"
    "<think>\n"
    "Greet.\n"
    "</think>\n"
    "\n"
    "Hello!<|im_end|><|im_system|>system<|im_middle|>Use tools.<|im_end|>"
    "<|im_user|>user<|im_middle|>Weather?<|im_end|><|im_assistant|>assistant"
    "<|im_middle|>On it.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    "<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 3, \"opts\": {\"a\": [1, 2.5]}, \"note\": \"é\\n\""
    ", \"flag\": null}<|tool_call_end|><|tool_call_begin|>functions.now:1"
    "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"
    "<|im_end|><|im_system|>tool<|im_middle|>## Return of c1\\n{\"temp\": 21}"
    "<|im_end|><|im_system|>tool<|im_middle|>## Return of c2\\nnoon"
    "<|im_end|><|im_assistant|>assistant<|im_middle|>It is 21 °C."
    "<|im_end|><|im_user|>user<|im_middle|>Thanks<|im_end|><|im_assistant|>assistant"
    "<|im_middle|>";

// Kimi-K2-Thinking: an empty think block up to the first answer without calls, the
// reasoning_content after it.
const char* const kKimiThinking =
    "<|im_system|>tool_declare<|im_middle|>[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"de"
    "scription\": \"Weather in a city, °C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"t"
    "ype\": \"string\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}, {\"type\": \"function\""
    ", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": {\"type\": \"object\", \"pr"
    "operties\": {}}}}]<|im_end|><|im_system|>system<|im_middle|>Be brief."
    "<|im_end|><|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant"
    "<|im_middle|><think></think><think>\n"
    "Greet.\n"
    "</think>\n"
    "\n"
    "Hello!<|im_end|><|im_system|>system<|im_middle|>Use tools.<|im_end|>"
    "<|im_user|>user<|im_middle|>Weather?<|im_end|><|im_assistant|>assistant"
    "<|im_middle|><think>Check it.</think>On it.<|tool_calls_section_begin|>"
    "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 3, \"opt"
    "s\": {\"a\": [1, 2.5]}, \"note\": \"é\\n\", \"flag\": null}<|tool_call_end|>"
    "<|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}"
    "<|tool_call_end|><|tool_calls_section_end|><|im_end|><|im_system|>tool"
    "<|im_middle|>## Return of functions.get_weather:0\n"
    "{\"temp\": 21}<|im_end|><|im_system|>tool<|im_middle|>## Return of functions.now:1\n"
    "noon<|im_end|><|im_assistant|>assistant<|im_middle|><think>Done."
    "</think>It is 21 °C.<|im_end|><|im_user|>user<|im_middle|>Thanks"
    "<|im_end|><|im_assistant|>assistant<|im_middle|>";

const char* const kWeatherTool =
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city, "
    "°C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "
    "{\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}";
const char* const kNowTool =
    "{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {}}}}";

ChatToolCall call(const char* id, const char* name, const char* arguments) { return {id, name, arguments}; }

// Two system messages, a past think block before the last user message, a turn with text,
// reasoning_content and two calls with every kind of value, their results, an answer with
// reasoning_content, a last user message.
std::vector<ChatMessage> long_conversation() {
  ChatMessage calls{"assistant", "On it."};
  calls.reasoning_content = "Check it.";
  calls.tool_calls = {call("c1", "get_weather",
                           "{\"city\": \"Paris\", \"days\": 3, \"opts\": {\"a\": [1, 2.5]}, \"note\": \"é\\n\", "
                           "\"flag\": null}"),
                      call("c2", "now", "{}")};
  ChatMessage answer{"assistant", "It is 21 °C."};
  answer.reasoning_content = "Done.";
  return {{"system", "Be brief."},
          {"user", "Hi"},
          {"assistant", "<think>\nGreet.\n</think>\n\nHello!"},
          {"system", "Use tools."},
          {"user", "Weather?"},
          calls,
          {"tool", "{\"temp\": 21}", {}, "c1"},
          {"tool", "noon", {}, "c2"},
          answer,
          {"user", "Thanks"}};
}

std::vector<ChatMessage> short_conversation() {
  ChatMessage look{"assistant", ""};
  look.tool_calls = {call("c3", "now", "{}")};
  return {{"user", "Time?"}, look, {"tool", "noon", {}, "c3"}};
}

const char* const kWeatherSchema =
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, "
    "\"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\", \"days\"]}";

std::vector<ToolDefinition> weather_tools() {
  ToolDefinition weather;
  weather.name = "get_weather";
  weather.parameters_json = kWeatherSchema;
  ToolDefinition now;
  now.name = "now";
  now.parameters_json = "{\"type\": \"object\", \"properties\": {}}";
  ToolDefinition any;
  any.name = "run";
  return {weather, now, any};
}

// One call as each format writes it.
std::string deepseek_call(const std::string& name, const std::string& arguments) {
  return "<｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>" + arguments + "<｜tool▁call▁end｜>";
}
std::string kimi_call(const std::string& name, int index, const std::string& arguments) {
  return "<|tool_call_begin|>functions." + name + ":" + std::to_string(index) + "<|tool_call_argument_begin|>" +
         arguments + "<|tool_call_end|>";
}
const std::string kDeepSeekBegin = "<｜tool▁calls▁begin｜>", kDeepSeekEnd = "<｜tool▁calls▁end｜>";
const std::string kKimiBegin = "<|tool_calls_section_begin|>", kKimiEnd = "<|tool_calls_section_end|>";

// The streaming check, with the section formats' markers and call ids.
void expect_growing(const std::string& reply, ToolCallFormat format) {
  test::expect_streamed_calls_grow(reply, format, {nullptr, {"tool", "<｜", "<|"}, true, 10});
}

}  // namespace

void TestSectionTools::detectsTheFamilies() {
  QCOMPARE(detect_chat_template(kDeepSeekV31Marks), ChatTemplateFamily::DeepSeekV31);
  QVERIFY(detect_chat_template(kDeepSeekR1Marks) != ChatTemplateFamily::DeepSeekV31);  // R1's calls: not written here
  for (const char* marks : {kKimiInstructMarks, kKimiFirstMarks, kKimiThinkingMarks}) {
    QCOMPARE(detect_chat_template(marks), ChatTemplateFamily::KimiK2);
  }
  QCOMPARE(chat_template_kimi_format(kKimiInstructMarks).layout, KimiFormat::Layout::Instruct);
  QCOMPARE(chat_template_kimi_format(kKimiFirstMarks).layout, KimiFormat::Layout::First);
  QCOMPARE(chat_template_kimi_format(kKimiThinkingMarks).layout, KimiFormat::Layout::Thinking);
  QCOMPARE(chat_template_kimi_format(kKimiFirstMarks).default_system, std::string("You are a helpful assistant"));
  QCOMPARE(chat_template_kimi_format(kKimiThinkingMarks).default_system,
           std::string("You are Kimi, an AI assistant created by Moonshot AI."));
  QCOMPARE(chat_template_family_name(ChatTemplateFamily::DeepSeekV31), std::string_view("deepseek-v3.1"));
  QCOMPARE(chat_template_family_from_name("kimi-k2"), std::optional(ChatTemplateFamily::KimiK2));
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::DeepSeekV31, {}));
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::KimiK2, {}));
  QCOMPARE(chat_stop_strings(ChatTemplateFamily::KimiK2), (std::vector<std::string>{"<|im_end|>", "<|im_user|>"}));
  // The section's opening is the trigger; one held section holds every call.
  QCOMPARE(tool_call_syntax(ToolCallFormat::DeepSeekV31).trigger, kDeepSeekBegin);
  QCOMPARE(tool_call_syntax(ToolCallFormat::KimiK2).trigger, kKimiBegin);
  QVERIFY(!tool_call_syntax(ToolCallFormat::KimiK2).allows_several);
}

void TestSectionTools::rendersDeepSeekAsItsTemplateDoes() {
  ChatRenderOptions o;
  o.bos_text = "<｜begin▁of▁sentence｜>";
  o.tools = {kWeatherTool, kNowTool};  // the template lists none
  QCOMPARE(render_chat(ChatTemplateFamily::DeepSeekV31, long_conversation(), o), std::string(kDeepSeek));
  o.enable_thinking = true;  // chat_template_kwargs `thinking` (or enable_thinking)
  QCOMPARE(render_chat(ChatTemplateFamily::DeepSeekV31, long_conversation(), o), std::string(kDeepSeekThinking));
  QCOMPARE(render_chat(ChatTemplateFamily::DeepSeekV31, short_conversation(), o), std::string(kDeepSeekAfterResult));
}

void TestSectionTools::rendersKimiAsItsTemplatesDo() {
  ChatRenderOptions o;
  o.tools = {kWeatherTool, kNowTool};
  QCOMPARE(render_chat(ChatTemplateFamily::KimiK2, long_conversation(), o), std::string(kKimiInstruct));
  o.kimi = chat_template_kimi_format(kKimiThinkingMarks);
  QCOMPARE(render_chat(ChatTemplateFamily::KimiK2, long_conversation(), o), std::string(kKimiThinking));
  o.kimi = chat_template_kimi_format(kKimiFirstMarks);
  o.tools.clear();
  QCOMPARE(render_chat(ChatTemplateFamily::KimiK2, long_conversation(), o), std::string(kKimiFirst));
  // Without a system message: the release's own, Instruct's with the newline its template leaves.
  QCOMPARE(render_chat(ChatTemplateFamily::KimiK2, {{"user", "Hi"}}, o),
           std::string("<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|><|im_user|>user"
                       "<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>"));
  o.kimi = {};
  QCOMPARE(render_chat(ChatTemplateFamily::KimiK2, {{"user", "Hi"}}, o),
           std::string("<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI."
                       "<|im_end|>\n<|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>"));
}

void TestSectionTools::refusesArgumentsThatAreNoJson() {
  ChatMessage broken{"assistant", ""};
  broken.tool_calls = {call("c1", "now", "{\"a\": ")};
  ChatMessage listed{"assistant", ""};
  listed.tool_calls = {call("c1", "now", "[1]")};
  for (const ChatTemplateFamily f : {ChatTemplateFamily::DeepSeekV31, ChatTemplateFamily::KimiK2}) {
    const std::optional<std::string> refusal = chat_template_refusal(f, {{"user", "Hi"}, broken}, {});
    QVERIFY(refusal.has_value());
    QVERIFY2(refusal->find("'now'") != std::string::npos, refusal->c_str());       // the call is named
    QVERIFY(!chat_template_refusal(f, {{"user", "Hi"}, listed}, {}).has_value());  // JSON: tojson writes it
  }
}

void TestSectionTools::grammarHoldsWholeSections() {
  Result<ToolGrammar> grammar = tool_call_grammar(weather_tools(), {}, ToolCallFormat::DeepSeekV31);
  QVERIFY(grammar.is_ok());
  const auto g = grammar->grammar;
  // After the trigger (the section's opening): calls, then the section's end.
  const std::string paris = deepseek_call("get_weather", "{\"city\": \"Paris\", \"days\": 3}");
  expect_fits(g, paris + kDeepSeekEnd);
  expect_fits(g, paris + deepseek_call("now", "{}") + deepseek_call("run", "{\"cmd\": [1]}") + kDeepSeekEnd);
  expect_refused_at(g, "<｜tool▁call▁begin｜>get_time", 't');
  expect_refused_at(g, deepseek_call("get_weather", "{\"city\": \"Paris\"}"), '}');  // days is required
  expect_refused_at(g, deepseek_call("now", "{\"a\": 1}"), '"');                     // now takes none
  expect_refused_at(g, paris + "x", 'x');                                            // only another call or the end
  bool is_complete = true;
  QCOMPARE(bytes_taken(g, paris, &is_complete), paris.size());
  QVERIFY(!is_complete);  // the section's end is due
  // parallel_tool_calls false: one call, then the end.
  const auto one = tool_call_grammar(weather_tools(), {}, ToolCallFormat::DeepSeekV31, false)->grammar;
  expect_fits(one, paris + kDeepSeekEnd);
  // (The end and a call share "<｜tool▁call": the call's "▁" is the byte refused.)
  expect_refused_at(one, paris + deepseek_call("now", "{}"), '\xe2');
  // At most kMaxSectionCalls in one section: then only its end.
  std::string many;
  for (int i = 0; i < 8; ++i) many += deepseek_call("now", "{}");
  expect_fits(g, many + kDeepSeekEnd);
  expect_refused_at(g, many + deepseek_call("now", "{}"), '\xe2');

  Result<ToolGrammar> kimi = tool_call_grammar(weather_tools(), {}, ToolCallFormat::KimiK2);
  QVERIFY(kimi.is_ok());
  const auto k = kimi->grammar;
  expect_fits(k,
              kimi_call("get_weather", 0, "{\"days\": 1, \"city\": \"Oslo\"}") + kimi_call("now", 1, "{}") + kKimiEnd);
  expect_refused_at(k, "<|tool_call_begin|>get_weather", 'g');          // functions.NAME
  expect_refused_at(k, "<|tool_call_begin|>functions.now:x", 'x');      // an index
  expect_refused_at(k, "<|tool_call_begin|>functions.now<|tool", '<');  // its index first
  // A tool named alone.
  const auto only = tool_call_grammar(weather_tools(), std::string("now"), ToolCallFormat::KimiK2)->grammar;
  expect_fits(only, kimi_call("now", 0, "{}") + kKimiEnd);
  expect_refused_at(only, "<|tool_call_begin|>functions.get", 'g');
}

void TestSectionTools::tokenMaskAgreesWithFeedingEachToken() {
  std::mt19937 rng(7);
  const std::vector<std::string> atoms = {"a", "Paris", " ",    "\"",   "\\",    "{",    "}",   ":",    ",",
                                          "1", "2",     "-",    "city", "days",  "unit", "now", "get_", "weather",
                                          "é", "\xc3",  "\xa9", "func", "tions", ".",    "0",   "run"};
  std::vector<std::string> pieces = random_pieces(rng, atoms, 2000, 3);
  for (const char* whole : {"get_weather", "functions.", "{\"", "\":"}) pieces.push_back(whole);
  // The markers are control tokens here, as in Kimi's vocabulary: only a marker takes them.
  const TokenBytes tokens = tag_test_vocabulary(
      std::move(pieces),
      {"<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<|tool_call_begin|>",
       "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>"});
  const auto g = tool_call_grammar(weather_tools(), {}, ToolCallFormat::DeepSeekV31)->grammar;
  expect_mask_agrees_at_every_cut(
      g, tokens,
      deepseek_call("get_weather", "{\"days\": 12, \"city\": \"Par é\"}") + deepseek_call("now", "{}") + kDeepSeekEnd);
  if (QTest::currentTestFailed()) return;
  const auto k = tool_call_grammar(weather_tools(), {}, ToolCallFormat::KimiK2)->grammar;
  expect_mask_agrees_at_every_cut(k, tokens,
                                  kimi_call("run", 0, "{\"a\": [1, {\"b\": null}]}") +
                                      kimi_call("get_weather", 12, "{\"city\": \"x\", \"days\": -2}") + kKimiEnd);
}

void TestSectionTools::splitsCallsFromText() {
  // DeepSeek: text, then the section; the arguments compact, as OpenAI sends them.
  const std::string reply = "Let me check.\n" + kDeepSeekBegin +
                            deepseek_call("get_weather", "{\"city\": \"Paris\", \"note\": \"a b\"}") +
                            deepseek_call("now", "{}") + kDeepSeekEnd;
  ToolReply out = split_tool_calls(reply, false, ToolCallFormat::DeepSeekV31);
  QCOMPARE(out.content, std::string("Let me check."));
  QCOMPARE(out.calls.size(), size_t{2});
  QCOMPARE(out.calls[0].name, std::string("get_weather"));
  QCOMPARE(out.calls[0].arguments, std::string("{\"city\":\"Paris\",\"note\":\"a b\"}"));
  QVERIFY(out.calls[0].id.empty());  // the server makes one
  QCOMPARE(out.calls[1].arguments, std::string("{}"));
  // V3.1 thinking: the prompt opened <think>, the reply is read as if it had.
  const ReplyParts parts = split_reply("<think>Use the tool.</think>" + kDeepSeekBegin + deepseek_call("now", "{}"));
  QCOMPARE(parts.reasoning, std::string("Use the tool."));
  out = split_tool_calls(parts.content, false, ToolCallFormat::DeepSeekV31);
  QCOMPARE(out.calls.size(), size_t{1});  // the section's end missing (as llama.cpp takes it)
  QVERIFY(out.content.empty());

  // Kimi: functions.NAME:INDEX, the whole the call's id.
  out = split_tool_calls(
      kKimiBegin + kimi_call("get_weather", 0, "{\"city\": \"Oslo\"}") + kimi_call("now", 1, "{}") + kKimiEnd, false,
      ToolCallFormat::KimiK2);
  QCOMPARE(out.calls.size(), size_t{2});
  QCOMPARE(out.calls[0].name, std::string("get_weather"));
  QCOMPARE(out.calls[0].id, std::string("functions.get_weather:0"));
  QCOMPARE(out.calls[1].id, std::string("functions.now:1"));
  // Calls without the section's markers or their ends (Kimi K2 Thinking writes them so, llama.cpp
  // reads them), a name without its prefix.
  out = split_tool_calls(
      "Sure. <|tool_call_begin|>functions.now:0<|tool_call_argument_begin|>{} "
      "<|tool_call_begin|>run<|tool_call_argument_begin|>{\"x\": 1}",
      false, ToolCallFormat::KimiK2);
  QCOMPARE(out.content, std::string("Sure."));
  QCOMPARE(out.calls.size(), size_t{2});
  QCOMPARE(out.calls[1].name, std::string("run"));
  QVERIFY(out.calls[1].id.empty());
  // A reply cut inside a call's arguments: the call so far.
  out = split_tool_calls(kKimiBegin + "<|tool_call_begin|>functions.run:0<|tool_call_argument_begin|>{\"cmd\": \"ls -",
                         false, ToolCallFormat::KimiK2);
  QCOMPARE(out.calls.size(), size_t{1});
  QCOMPARE(out.calls[0].arguments, std::string("{\"cmd\":\"ls -"));
}

void TestSectionTools::keepsWhatIsNoCallAsText() {
  // A section whose call has no arguments object, or a name that is prose: the text as written,
  // from its first marker on.
  for (const std::string& broken :
       {kDeepSeekBegin + "<｜tool▁call▁begin｜>now<｜tool▁sep｜>soon<｜tool▁call▁end｜>" + kDeepSeekEnd,
        kDeepSeekBegin + "<｜tool▁call▁begin｜>I would call it<｜tool▁sep｜>{}" + kDeepSeekEnd,
        kDeepSeekBegin + "<｜tool▁call▁begin｜>now"}) {
    const ToolReply out = split_tool_calls("A " + broken, false, ToolCallFormat::DeepSeekV31);
    QVERIFY(out.calls.empty());
    QCOMPARE(out.content, "A " + broken);
    // While streaming it is held back, so the text only grows to the finished reply's.
    QCOMPARE(split_tool_calls("A " + broken, true, ToolCallFormat::DeepSeekV31).content, std::string("A"));
  }
  // A call that can be read stays a call; the unreadable one after it, and text after the
  // section, join the text.
  const std::string second = "<|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>[1]<|tool_call_end|>";
  ToolReply out = split_tool_calls("Hi" + kKimiBegin + kimi_call("now", 0, "{}") + second + kKimiEnd, false,
                                   ToolCallFormat::KimiK2);
  QCOMPARE(out.calls.size(), size_t{1});
  QCOMPARE(out.content, "Hi" + second + kKimiEnd);
  out = split_tool_calls(kKimiBegin + kimi_call("now", 0, "{}") + kKimiEnd + "\nDone.", false, ToolCallFormat::KimiK2);
  QCOMPARE(out.calls.size(), size_t{1});
  QCOMPARE(out.content, std::string("Done."));
}

void TestSectionTools::streamedCallsOnlyGrow() {
  expect_growing(
      "Sure, both.\n" + kDeepSeekBegin +
          deepseek_call("get_weather", "{\"city\": \"São Paulo\", \"days\": 12, \"opts\": [1, {\"a\": \"}\"}]}") +
          deepseek_call("now", "{}") + kDeepSeekEnd,
      ToolCallFormat::DeepSeekV31);
  expect_growing("Sure." + kKimiBegin + kimi_call("get_weather", 0, "{\"city\": \"Oslo <|x|> été\", \"days\": 2}") +
                     kimi_call("run", 1, "{\"cmd\": \"echo \\\"hi\\\"\"}") + kKimiEnd + " Done.",
                 ToolCallFormat::KimiK2);
}

QTEST_GUILESS_MAIN(TestSectionTools)
#include "test_section_tools.moc"
