// GLM-4.5/4.6/4.7's chat templates and tool calls (ToolCallFormat::GlmXml, Glm47Xml) without a
// model: the families detected from their template texts, conversations rendered as jinja2
// renders llama.cpp's GLM-4.6.jinja and GLM-4.7-Flash.jinja (the expected texts below are
// jinja2's), the call grammar (<tool_call>NAME and <arg_key>/<arg_value> tags held to the tools'
// schemas, the token mask against feeding each token), and replies split into text and calls
// with typed arguments that only grow while streaming.
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

class TestGlmTools : public QObject {
  Q_OBJECT

 private slots:
  void detectsTheFamilies();
  void rendersAsItsTemplatesDo();
  void refusesArgumentsThatAreNoMapping();
  void grammarHoldsWholeCalls();
  void tokenMaskAgreesWithFeedingEachToken();
  void splitCallsWithTypedArguments();
  void streamedArgumentsOnlyGrow();
};

namespace {

// What the families are told apart by: GLM-4.6's call example writes each tag on its own line,
// GLM-4.7's runs them together.
const char* const kGlm46Marks =
    "[gMASK]<sop>{%- if tools -%}<|system|>\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
    "<arg_value>{arg-value-1}</arg_value>{% elif m.role == 'tool' %}<|observation|>{% endif %}<|user|><|assistant|>";
const char* const kGlm47Marks =
    "[gMASK]<sop>{%- if tools -%}<|system|>\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
    "<arg_value>{arg-value-1}</arg_value>{% elif m.role == 'tool' %}<|observation|>{% endif %}<|user|><|assistant|>";
// GLM-4's older template (glm-4-9b-chat): the same turns, calls as JSON.
const char* const kGlm4Marks =
    "[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}{% endfor %}"
    "<|observation|><|user|><|assistant|>";

const char* const kGlm46NoThinking =
    "[gMASK]<sop>"
    "<|system|>\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city, \xc2\xb0"
    "C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "
    "{\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {}}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, output the function name and arguments within the following XML format:\n"
    "<tool_call>{function-name}\n"
    "<arg_key>{arg-key-1}</arg_key>\n"
    "<arg_value>{arg-value-1}</arg_value>\n"
    "<arg_key>{arg-key-2}</arg_key>\n"
    "<arg_value>{arg-value-2}</arg_value>\n"
    "...\n"
    "</tool_call>"
    "<|system|>\n"
    "Be brief."
    "<|user|>\n"
    "Hi/nothink"
    "<|assistant|>\n"
    "<think></think>\n"
    "Hello!"
    "<|user|>\n"
    "Weather? /nothink"
    "<|assistant|>\n"
    "<think></think>\n"
    "<tool_call>get_weather\n"
    "<arg_key>city</arg_key>\n"
    "<arg_value>Paris</arg_value>\n"
    "<arg_key>days</arg_key>\n"
    "<arg_value>3</arg_value>\n"
    "<arg_key>opts</arg_key>\n"
    "<arg_value>{\"a\": [1, 2.5]}</arg_value>\n"
    "<arg_key>note</arg_key>\n"
    "<arg_value>\xc3\xa9"
    "\n"
    "</arg_value>\n"
    "<arg_key>flag</arg_key>\n"
    "<arg_value>null</arg_value>\n"
    "</tool_call>\n"
    "<tool_call>now\n"
    "</tool_call>"
    "<|observation|>\n"
    "<tool_response>\n"
    "{\"temp\": 21}\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "noon\n"
    "</tool_response>"
    "<|assistant|>\n"
    "<think></think>\n"
    "It is 21 \xc2\xb0"
    "C."
    "<|user|>\n"
    "Thanks/nothink"
    "<|assistant|>\n"
    "<think></think>";

const char* const kGlm47KeepsThinking =
    "[gMASK]<sop>"
    "<|system|>\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city, \xc2\xb0"
    "C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "
    "{\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {}}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, output the function name and arguments within the following XML format:\n"
    "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</"
    "arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
    "<|system|>Be brief."
    "<|user|>Hi"
    "<|assistant|><think>Greet.</think>Hello!"
    "<|user|>Weather? /nothink"
    "<|assistant|><think>Check it.</think>"
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</"
    "arg_value><arg_key>opts</arg_key><arg_value>{\"a\": [1, "
    "2.5]}</arg_value><arg_key>note</arg_key><arg_value>\xc3\xa9"
    "\n"
    "</arg_value><arg_key>flag</arg_key><arg_value>null</arg_value></tool_call>"
    "<tool_call>now</tool_call>"
    "<|observation|><tool_response>{\"temp\": 21}</tool_response><tool_response>noon</tool_response>"
    "<|assistant|><think>Done.</think>It is 21 \xc2\xb0"
    "C."
    "<|user|>Thanks"
    "<|assistant|><think>";

const char* const kGlm47 =
    "[gMASK]<sop>"
    "<|system|>\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city, \xc2\xb0"
    "C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "
    "{\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {}}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, output the function name and arguments within the following XML format:\n"
    "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</"
    "arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>"
    "<|system|>Be brief."
    "<|user|>Hi"
    "<|assistant|></think>Hello!"
    "<|user|>Weather? /nothink"
    "<|assistant|></think>"
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</"
    "arg_value><arg_key>opts</arg_key><arg_value>{\"a\": [1, "
    "2.5]}</arg_value><arg_key>note</arg_key><arg_value>\xc3\xa9"
    "\n"
    "</arg_value><arg_key>flag</arg_key><arg_value>null</arg_value></tool_call>"
    "<tool_call>now</tool_call>"
    "<|observation|><tool_response>{\"temp\": 21}</tool_response><tool_response>noon</tool_response>"
    "<|assistant|></think>It is 21 \xc2\xb0"
    "C."
    "<|user|>Thanks"
    "<|assistant|><think>";

const char* const kGlm46AfterLastUser =
    "[gMASK]<sop>"
    "<|user|>\n"
    "Time?"
    "<|assistant|>\n"
    "<think>Use the clock.</think>\n"
    "Let me look.\n"
    "<tool_call>now\n"
    "</tool_call>"
    "<|observation|>\n"
    "<tool_response>\n"
    "noon\n"
    "</tool_response>"
    "<|assistant|>";

const char* const kGlm47NoThinkingAfterLastUser =
    "[gMASK]<sop>"
    "<|user|>Time?"
    "<|assistant|><think>Use the clock.</think>Let me look."
    "<tool_call>now</tool_call>"
    "<|observation|><tool_response>noon</tool_response>"
    "<|assistant|></think>";

const char* const kWeatherTool =
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city, "
    "\xc2\xb0"
    "C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "
    "{\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}";
const char* const kNowTool =
    "{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {}}}}";

ChatToolCall call(const char* id, const char* name, const char* arguments) { return {id, name, arguments}; }

// The conversation of the first three expected texts: system, a past think block before the
// last user message, reasoning_content, two calls with every kind of value, two results, a
// user message that already ends with /nothink.
std::vector<ChatMessage> long_conversation() {
  ChatMessage calls{"assistant", "  "};
  calls.reasoning_content = "Check it.";
  calls.tool_calls = {call("c1", "get_weather",
                           "{\"city\": \"Paris\", \"days\": 3, \"opts\": {\"a\": [1, 2.5]}, \"note\": \"\xc3\xa9\\n\", "
                           "\"flag\": null}"),
                      call("c2", "now", "{}")};
  return {{"system", "Be brief."},
          {"user", "Hi"},
          {"assistant", "<think>\nGreet.\n</think>\n\nHello!"},
          {"user", "Weather? /nothink"},
          calls,
          {"tool", "{\"temp\": 21}", {}, "c1"},
          {"tool", "noon", {}, "c2"},
          {"assistant",
           "<think>Done.</think>It is 21 \xc2\xb0"
           "C."},
          {"user", "Thanks"}};
}

// The last two: a turn with reasoning after the last user message, then its result.
std::vector<ChatMessage> short_conversation() {
  ChatMessage look{"assistant", "<think>\nUse the clock.\n</think>\nLet me look."};
  look.tool_calls = {call("c3", "now", "{}")};
  return {{"user", "Time?"}, look, {"tool", "noon", {}, "c3"}};
}

const char* const kWeatherSchema =
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, "
    "\"unit\": {\"enum\": [\"c\", \"f\"]}, \"when\": {\"type\": [\"string\", \"null\"]}}, \"required\": [\"city\", "
    "\"days\"]}";

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

// An argument as GLM-4.5/4.6 write it, and as 4.7 does.
std::string arg(const std::string& key, const std::string& value) {
  return "<arg_key>" + key + "</arg_key>\n<arg_value>" + value + "</arg_value>\n";
}
std::string arg47(const std::string& key, const std::string& value) {
  return "<arg_key>" + key + "</arg_key><arg_value>" + value + "</arg_value>";
}

// The streaming check with GLM's marker.
void expect_growing(const std::string& reply, ToolCallFormat format, const ToolArgumentTypes& types) {
  test::expect_streamed_calls_grow(reply, format, {&types, {"<tool_call"}, false, 10});
}

}  // namespace

void TestGlmTools::detectsTheFamilies() {
  QCOMPARE(detect_chat_template(kGlm46Marks), ChatTemplateFamily::Glm45);
  QCOMPARE(detect_chat_template(kGlm47Marks), ChatTemplateFamily::Glm47);
  QCOMPARE(detect_chat_template(kGlm4Marks), ChatTemplateFamily::Zephyr);  // not GLM-4.5's calls
  QCOMPARE(chat_template_family_name(ChatTemplateFamily::Glm45), std::string_view("glm-4.5"));
  QCOMPARE(chat_template_family_from_name("glm-4.7"), std::optional(ChatTemplateFamily::Glm47));
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Glm45, {}));
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Glm47, {}));
  // A reply ends where the model opens the next turn.
  QCOMPARE(chat_stop_strings(ChatTemplateFamily::Glm47), (std::vector<std::string>{"<|user|>", "<|observation|>"}));
  QCOMPARE(tool_call_syntax(ToolCallFormat::GlmXml).separator, std::string("\n"));
  QCOMPARE(tool_call_syntax(ToolCallFormat::Glm47Xml).separator, std::string(""));
  QCOMPARE(tool_call_syntax(ToolCallFormat::Glm47Xml).trigger, std::string("<tool_call>"));
}

void TestGlmTools::rendersAsItsTemplatesDo() {
  ChatRenderOptions o;
  o.tools = {kWeatherTool, kNowTool};
  o.enable_thinking = false;
  QCOMPARE(render_chat(ChatTemplateFamily::Glm45, long_conversation(), o), std::string(kGlm46NoThinking));
  o.enable_thinking.reset();
  o.clear_thinking = false;
  QCOMPARE(render_chat(ChatTemplateFamily::Glm47, long_conversation(), o), std::string(kGlm47KeepsThinking));
  o.clear_thinking.reset();
  QCOMPARE(render_chat(ChatTemplateFamily::Glm47, long_conversation(), o), std::string(kGlm47));

  ChatRenderOptions plain;
  QCOMPARE(render_chat(ChatTemplateFamily::Glm45, short_conversation(), plain), std::string(kGlm46AfterLastUser));
  plain.enable_thinking = false;
  QCOMPARE(render_chat(ChatTemplateFamily::Glm47, short_conversation(), plain),
           std::string(kGlm47NoThinkingAfterLastUser));
}

void TestGlmTools::refusesArgumentsThatAreNoMapping() {
  ChatMessage listed{"assistant", ""};
  listed.tool_calls = {call("c1", "now", "[1]")};
  ChatMessage none{"assistant", ""};
  none.tool_calls = {call("c1", "now", "null")};
  for (const ChatTemplateFamily f : {ChatTemplateFamily::Glm45, ChatTemplateFamily::Glm47}) {
    QVERIFY(chat_template_refusal(f, {{"user", "Hi"}, listed}, {}).has_value());
  }
  // 4.5/4.6 write `tc.arguments or {}`: null is no arguments; 4.7 has no such fallback.
  QVERIFY(!chat_template_refusal(ChatTemplateFamily::Glm45, {{"user", "Hi"}, none}, {}).has_value());
  QVERIFY(chat_template_refusal(ChatTemplateFamily::Glm47, {{"user", "Hi"}, none}, {}).has_value());
  QCOMPARE(render_chat(ChatTemplateFamily::Glm45, {{"user", "Hi"}, none}, {}),
           std::string("[gMASK]<sop><|user|>\nHi<|assistant|>\n<think></think>\n<tool_call>now\n</tool_call>"
                       "<|assistant|>"));
}

void TestGlmTools::grammarHoldsWholeCalls() {
  Result<ToolGrammar> grammar = tool_call_grammar(weather_tools(), {}, ToolCallFormat::GlmXml);
  QVERIFY(grammar.is_ok());
  const auto g = grammar->grammar;
  // After the trigger "<tool_call>": the name and its line, the arguments in any order, the end.
  expect_fits(g, "get_weather\n" + arg("city", "Paris") + arg("days", "3") + "</tool_call>");
  expect_fits(g, "get_weather\n" + arg("days", "-1") + arg("unit", "f") + arg("when", "null") +
                     arg("city", "S\xc3\xa3o\n</arg_value> Paulo") + "</tool_call>");
  expect_fits(g, "now\n</tool_call>");
  expect_fits(g, "run\n" + arg("cmd", "ls") + arg("n", "{\"a\": 1}") + "</tool_call>");
  expect_refused_at(g, "get_time", 't');
  expect_refused_at(g, "get_weather\n" + arg("city", "Paris") + "</tool_call>", '/');   // days is required
  expect_refused_at(g, "get_weather\n<arg_key>days</arg_key>\n<arg_value>three", 't');  // an integer is JSON
  expect_refused_at(g, "get_weather\n<arg_key>unit</arg_key>\n<arg_value>k", 'k');
  expect_refused_at(g, "get_weather\n" + arg("city", "A") + "<arg_key>city", 'c');  // each once
  expect_refused_at(g, "now\n<arg_key>", 'a');                                      // no parameters: only </tool_call>
  expect_refused_at(g, "get_weather<", '<');                                        // 4.5/4.6: a newline first
  // A string's text ends at its first "</arg_value>\n".
  expect_refused_at(g, "get_weather\n<arg_key>city</arg_key>\n<arg_value>A</arg_value>\nB", 'B');

  Result<ToolGrammar> compact = tool_call_grammar(weather_tools(), {}, ToolCallFormat::Glm47Xml);
  QVERIFY(compact.is_ok());
  const auto g47 = compact->grammar;
  expect_fits(g47, "get_weather" + arg47("city", "Paris") + arg47("days", "3") + "</tool_call>");
  expect_fits(g47, "now</tool_call>");
  expect_refused_at(g47, "get_weather\n", '\n');
  expect_refused_at(g47, "get_weather" + arg47("city", "A") + "\n", '\n');
  expect_refused_at(g47, "get_weather<arg_key>city</arg_key><arg_value>A</arg_value>B", 'B');
  // A tool named alone.
  Result<ToolGrammar> only = tool_call_grammar(weather_tools(), std::string("now"), ToolCallFormat::Glm47Xml);
  QVERIFY(only.is_ok());
  expect_refused_at(only->grammar, "get_weather", 'g');
}

void TestGlmTools::tokenMaskAgreesWithFeedingEachToken() {
  std::mt19937 rng(11);
  const std::vector<std::string> atoms = {
      "a",           "Paris", "\n",   "</",        "arg_", "key",          "value",     ">",
      "<",           "3",     "-",    " ",         "\"",   "\\",           "c",         "f",
      "\xc3\xa9",    "\xc3",  "\xa9", "city",      "days", "</arg_value>", "<arg_key>", "</arg_key>",
      "<arg_value>", "null",  "{",    "tool_call", "\x01"};
  std::vector<std::string> pieces = random_pieces(rng, atoms, 2500, 3);
  for (const char* whole : {"</arg_value>\n", "</arg_key>\n<arg_value>", "get_weather\n", "</tool_call>"}) {
    pieces.push_back(whole);
  }
  const TokenBytes tokens = tag_test_vocabulary(std::move(pieces));
  const auto g = tool_call_grammar(weather_tools(), {}, ToolCallFormat::GlmXml)->grammar;
  const std::string text =
      "get_weather\n" + arg("days", "12") + arg("city", "Par\nis </arg_value>x") + arg("unit", "c") + "</tool_call>";
  const int num_raw = expect_mask_agrees_at_every_cut(g, tokens, text);
  if (QTest::currentTestFailed()) return;
  QVERIFY(num_raw > 10);  // the raw-text shortcut was exercised
}

void TestGlmTools::splitCallsWithTypedArguments() {
  const ToolArgumentTypes types = tool_argument_types(weather_tools());
  const std::string reply = "Let me check.\n<tool_call>get_weather\n" + arg("city", "42") + arg("days", "3") +
                            arg("when", "null") + "</tool_call>\n<tool_call>run\n" + arg("cmd", "echo \"hi\"\n\tdone") +
                            "</tool_call>";
  ToolReply out = split_tool_calls(reply, false, ToolCallFormat::GlmXml, &types);
  QCOMPARE(out.content, std::string("Let me check."));
  QCOMPARE(out.calls.size(), size_t{2});
  QCOMPARE(out.calls[0].name, std::string("get_weather"));
  QCOMPARE(out.calls[0].arguments, std::string("{\"city\":\"42\",\"days\":3,\"when\":null}"));
  QCOMPARE(out.calls[1].name, std::string("run"));
  QCOMPARE(out.calls[1].arguments, std::string("{\"cmd\":\"echo \\\"hi\\\"\\n\\tdone\"}"));
  // 4.7's layout; a call without arguments; Python's words and text that is no JSON.
  const std::string compact = "<tool_call>now</tool_call><tool_call>get_weather" + arg47("days", "True") +
                              arg47("when", "soon") + arg47("city", "a</arg_key>b") + "</tool_call>";
  out = split_tool_calls(compact, false, ToolCallFormat::Glm47Xml, &types);
  QCOMPARE(out.calls.size(), size_t{2});
  QCOMPARE(out.calls[0].arguments, std::string("{}"));
  QCOMPARE(out.calls[1].arguments, std::string("{\"days\":true,\"when\":\"soon\",\"city\":\"a</arg_key>b\"}"));
  QVERIFY(out.content.empty());
  // A value ends where the grammar ends it: 4.5/4.6 at "</arg_value>\n" (the tag alone is its
  // text), and a finished reply may end right after "</arg_value>".
  QCOMPARE(split_tool_calls("<tool_call>run\n" + arg("cmd", "a</arg_value>b") + "</tool_call>", false,
                            ToolCallFormat::GlmXml)
               .calls[0]
               .arguments,
           std::string("{\"cmd\":\"a</arg_value>b\"}"));
  QCOMPARE(
      split_tool_calls("<tool_call>run\n<arg_key>a</arg_key>\n<arg_value>x</arg_value>", false, ToolCallFormat::GlmXml)
          .calls[0]
          .arguments,
      std::string("{\"a\":\"x\""));
  // A block that is no call (prose for a name) stays in the text; a reply cut inside a call ends
  // with the call.
  const std::string prose = "A <tool_call>I would call it</tool_call> B";
  out = split_tool_calls(prose, false, ToolCallFormat::GlmXml);
  QCOMPARE(out.content, prose);
  QVERIFY(out.calls.empty());
  out = split_tool_calls("<tool_call>run\n<arg_key>cmd</arg_key>\n<arg_value>ls -", false, ToolCallFormat::GlmXml);
  QCOMPARE(out.calls.size(), size_t{1});
  QCOMPARE(out.calls[0].arguments, std::string("{\"cmd\":\"ls -"));
  // With its reasoning first, as GLM-4.5/4.6 reply: split_reply takes the think block out, the
  // calls are read from the answer.
  const ReplyParts parts = split_reply("\n<think>Use the tool.</think>\nOn it.\n<tool_call>now\n</tool_call>");
  QCOMPARE(parts.reasoning, std::string("Use the tool."));
  out = split_tool_calls(parts.content, false, ToolCallFormat::GlmXml, &types);
  QCOMPARE(out.content, std::string("On it."));
  QCOMPARE(out.calls.size(), size_t{1});
}

void TestGlmTools::streamedArgumentsOnlyGrow() {
  const ToolArgumentTypes types = tool_argument_types(weather_tools());
  const std::string reply = "Sure.\n<tool_call>get_weather\n" + arg("city", "S\xc3\xa3o\nPaulo </arg_value>!") +
                            arg("days", "12") + arg("when", "[1, 2]") + "</tool_call>\n<tool_call>run\n" +
                            arg("cmd", "a </b> c") + "</tool_call>";
  const ToolReply whole = split_tool_calls(reply, false, ToolCallFormat::GlmXml, &types);
  QCOMPARE(whole.calls.size(), size_t{2});
  QCOMPARE(whole.calls[0].arguments,
           std::string("{\"city\":\"S\xc3\xa3o\\nPaulo </arg_value>!\",\"days\":12,\"when\":[1,2]}"));
  expect_growing(reply, ToolCallFormat::GlmXml, types);
  expect_growing("Sure.<tool_call>get_weather" + arg47("city", "Oslo \xc3\xa9t\xc3\xa9") + arg47("days", "2") +
                     "</tool_call><tool_call>now</tool_call>",
                 ToolCallFormat::Glm47Xml, types);
}

QTEST_GUILESS_MAIN(TestGlmTools)
#include "test_glm_tools.moc"
