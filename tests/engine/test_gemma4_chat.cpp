// Gemma 4's chat template and replies without a model: the family told apart from Gemma 2's and
// 3's, conversations rendered as jinja2 renders its GGUF template (the expected texts below are
// jinja2's, after llama.cpp's rewrite; test_templates_vs_jinja compares many more through
// `iwb serve`), values written as Python prints them, replies split into reasoning, text and
// calls (whole, streamed, malformed), and the call grammar with its token mask.
#include "chat/gemma4_template.h"
#include "grammar_checks.h"
#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/reply_parts.h"
#include "iwb/engine/chat/tool_calls.h"
#include "streamed_calls_check.h"

#include <QtTest>

#include <nlohmann/json.hpp>

#include <random>

using namespace iwb;
using namespace iwb::test;

class TestGemma4Chat : public QObject {
  Q_OBJECT

 private slots:
  void detectsTheFamily();
  void rendersAsItsTemplateDoes();
  void writesValuesAsPythonDoes();
  void splitsThoughtChannels();
  void streamedThoughtsOnlyGrow();
  void splitsCallsIntoJson();
  void keepsMalformedCallsAsText();
  void streamedCallsOnlyGrow();
  void randomRepliesNeverBreakTheReader();
  void grammarHoldsCallsToTheSyntax();
  void tokenMaskAgreesWithFeedingEachToken();
};

namespace {

const std::string Q = "<|\"|>";  // Gemma 4's string quote
const std::string kOpen = "<|tool_call>", kClose = "<tool_call|>";

// Snippets of the real templates (the parts detection reads).
const char* const kGemma4Marks =
    "{{- '<|turn>system\\n' -}}{{- '<|think|>' -}}{{- '<|tool_call>call:' + function['name'] + '{' -}}"
    "{{- '<turn|>\\n' -}}";
const char* const kGemma3Marks =
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}";

const std::string kNow = R"({"type": "function", "function": {"name": "now", "description": "The time", "parameters": )"
                         R"({"type": "object", "properties": {}}}})";
const std::string kWeather =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city, °C", )"
    R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, )"
    R"("required": ["city"]}}})";

std::vector<ToolDefinition> tools() {
  ToolDefinition weather;
  weather.name = "get_weather";
  weather.parameters_json = R"({"type": "object", "properties": {"city": {"type": "string"}}})";
  ToolDefinition now;
  now.name = "now";
  return {weather, now};
}

std::string call(const std::string& name, const std::string& arguments) {
  return kOpen + "call:" + name + arguments + kClose;
}

// The arguments are JSON (and compact, as OpenAI sends them).
void expect_json(const std::string& arguments, const std::string& expected) {
  QCOMPARE(arguments, expected);
  QVERIFY2(!nlohmann::json::parse(arguments, nullptr, false).is_discarded(), qPrintable(printable(arguments)));
}

// The streaming check, with Gemma 4's markers.
void expect_growing(const std::string& reply) {
  test::expect_streamed_calls_grow(reply, ToolCallFormat::Gemma4, {nullptr, {"<|"}, false, 10});
}

}  // namespace

void TestGemma4Chat::detectsTheFamily() {
  QCOMPARE(detect_chat_template(kGemma4Marks), ChatTemplateFamily::Gemma4);
  QCOMPARE(detect_chat_template(kGemma3Marks), ChatTemplateFamily::Gemma);
  QCOMPARE(chat_template_family_name(ChatTemplateFamily::Gemma4), std::string_view("gemma4"));
  QCOMPARE(chat_template_family_from_name("gemma4"), std::optional(ChatTemplateFamily::Gemma4));
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Gemma4, {}));
  QCOMPARE(chat_stop_strings(ChatTemplateFamily::Gemma4), (std::vector<std::string>{"<turn|>", "<|turn>"}));
  QCOMPARE(tool_call_syntax(ToolCallFormat::Gemma4).trigger, kOpen);
  QVERIFY(tool_call_syntax(ToolCallFormat::Gemma4).allows_several);
}

void TestGemma4Chat::rendersAsItsTemplateDoes() {
  ChatRenderOptions o;
  o.bos_text = "<bos>";
  // Thinking off (undefined or false): the generation prompt closes an empty thought channel.
  QCOMPARE(render_chat(ChatTemplateFamily::Gemma4, {{"user", " Hi "}}, o),
           std::string("<bos><|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"));
  // Thinking on: <|think|> opens a system turn (written for it alone), the reply opens freely.
  o.enable_thinking = true;
  QCOMPARE(render_chat(ChatTemplateFamily::Gemma4, {{"system", " Be brief. "}, {"user", "Hi"}}, o),
           std::string("<bos><|turn>system\n<|think|>Be brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"));
  QCOMPARE(render_chat(ChatTemplateFamily::Gemma4, {{"user", "Hi"}}, o),
           std::string("<bos><|turn>system\n<|think|><turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"));
  // Tools, calls, their results and the answer after them in one model turn; a past turn's
  // thought channel left out.
  o.enable_thinking.reset();
  o.tools = {kWeather, kNow};
  ChatMessage calls{"assistant", ""};
  calls.tool_calls = {{"call00001", "get_weather", R"({"unit": "c", "city": "Paris"})"}, {"call00002", "now", "{}"}};
  ChatMessage first{"tool", R"({"temp": 21})"}, second{"tool", "12:00"};
  first.tool_call_id = "call00001";
  second.tool_call_id = "call00002";
  const std::vector<ChatMessage> conversation = {{"user", "Weather in Paris and the time?"},
                                                 calls,
                                                 first,
                                                 second,
                                                 {"assistant", "<|channel>thought\nEasy.<channel|>21 °C at noon."},
                                                 {"user", "Thanks"}};
  QCOMPARE(render_chat(ChatTemplateFamily::Gemma4, conversation, o),
           "<bos><|turn>system\n<|tool>declaration:get_weather{description:" + Q + "Weather in a city, °C" + Q +
               ",parameters:{properties:{city:{type:" + Q + "STRING" + Q + "},unit:{type:" + Q + Q + "}},required:[" +
               Q + "city" + Q + "],type:" + Q + "OBJECT" + Q + "}}<tool|><|tool>declaration:now{description:" + Q +
               "The time" + Q + ",parameters:{type:" + Q + "OBJECT" + Q +
               "}}<tool|><turn|>\n<|turn>user\nWeather in Paris and the time?<turn|>\n<|turn>model\n"
               "<|tool_call>call:get_weather{city:" +
               Q + "Paris" + Q + ",unit:" + Q + "c" + Q +
               "}<tool_call|><|tool_call>call:now{}<tool_call|><|tool_response>response:get_weather{temp:21}"
               "<tool_response|><|tool_response>response:now{value:" +
               Q + "12:00" + Q +
               "}<tool_response|>21 °C at noon.<turn|>\n<|turn>user\nThanks<turn|>\n<|turn>model\n<|channel>thought\n"
               "<channel|>");
  // Results that end the conversation: the model's turn goes on (no new turn is opened).
  const std::vector<ChatMessage> pending = {{"user", "Time?"}, calls, first};
  QVERIFY(render_chat(ChatTemplateFamily::Gemma4, pending, o)
              .ends_with("<|tool_response>response:get_weather{temp:21}<tool_response|><|channel>thought\n<channel|>"));
  // An answer after results that ends it, thinking on: llama.cpp opens the model's turn.
  o.enable_thinking = true;
  std::vector<ChatMessage> answered = pending;
  answered.push_back({"assistant", "21 °C."});
  QVERIFY(render_chat(ChatTemplateFamily::Gemma4, answered, o).ends_with("21 °C.<turn|>\n<|turn>model\n"));
}

void TestGemma4Chat::writesValuesAsPythonDoes() {
  const auto written = [](const char* json) {
    return detail::gemma4_argument(nlohmann::ordered_json::parse(json), /*escape_keys=*/false);
  };
  QCOMPARE(written("[1e16, 1e15, 1e-7, 0.0001, 0.25, 2.0, -0.0, 123.456, 1e300, 20261206, -3]"),
           std::string("[1e+16,1000000000000000.0,1e-07,0.0001,0.25,2.0,-0.0,123.456,1e+300,20261206,-3]"));
  QCOMPARE(written(R"({"b": null, "A": true, "a": "x"})"), "{A:true,a:" + Q + "x" + Q + ",b:None}");
  QCOMPARE(detail::gemma4_argument(nlohmann::ordered_json::parse(R"({"k": [{}]})"), /*escape_keys=*/true),
           "{" + Q + "k" + Q + ":[{}]}");
}

void TestGemma4Chat::splitsThoughtChannels() {
  ReplyParts parts = split_reply("<|channel>thought\nLet me think.\n<channel|>The answer.");
  QCOMPARE(parts.reasoning, std::string("Let me think."));
  QCOMPARE(parts.content, std::string("The answer."));
  QVERIFY(!parts.is_reasoning);
  // Still thinking (a reply cut inside its thought).
  parts = split_reply("<|channel>thought\nHmm");
  QCOMPARE(parts.reasoning, std::string("Hmm"));
  QVERIFY(parts.content.empty());
  QVERIFY(parts.is_reasoning);
  // An empty channel after the answer (as Gemma 4 writes now and then), a stray closing marker.
  parts = split_reply("Hi there.<|channel>thought\n<channel|>");
  QCOMPARE(parts.content, std::string("Hi there."));
  QVERIFY(parts.reasoning.empty());
  parts = split_reply("Hi<channel|> there.");
  QCOMPARE(parts.content, std::string("Hi there."));
  // Two thoughts, calls after them read from the answer.
  parts = split_reply("<|channel>thought\nA<channel|>Wait.<|channel>thought\nB<channel|>" + call("now", "{}"));
  QCOMPARE(parts.reasoning, std::string("A\n\nB"));
  const ToolReply reply = split_tool_calls(parts.content, false, ToolCallFormat::Gemma4);
  QCOMPARE(reply.content, std::string("Wait."));
  QCOMPARE(reply.calls.size(), size_t{1});
  // Text that merely mentions a think tag is no thought.
  QCOMPARE(split_reply("I <think> so").content, std::string("I <think> so"));
}

void TestGemma4Chat::streamedThoughtsOnlyGrow() {
  const std::string reply =
      "<|channel>thought\nThe user wants  a  word.\n\n<channel|>\n\nHello <b>world</b>.<|channel>thought\n<channel|>";
  const ReplyParts whole = split_reply(reply);
  QCOMPARE(whole.reasoning, std::string("The user wants  a  word."));
  QCOMPARE(whole.content, std::string("Hello <b>world</b>."));
  for (size_t cut = 0; cut <= reply.size(); ++cut) {
    const ReplyParts part = split_reply(reply.substr(0, cut), /*is_streaming=*/true);
    const QString where = printable(reply.substr(0, cut));
    QVERIFY2(whole.reasoning.starts_with(part.reasoning), qPrintable(where));
    QVERIFY2(whole.content.starts_with(part.content), qPrintable(where));
    QVERIFY2(part.content.find("<|") == std::string::npos && part.reasoning.find("<|") == std::string::npos,
             qPrintable(where));
  }
}

void TestGemma4Chat::splitsCallsIntoJson() {
  ToolReply out = split_tool_calls(
      "Let me check.\n" + call("get_weather", "{city:" + Q + "Paris" + Q + ",days:3}") + call("now", "{}"), false,
      ToolCallFormat::Gemma4);
  QCOMPARE(out.content, std::string("Let me check."));
  QCOMPARE(out.calls.size(), size_t{2});
  QCOMPARE(out.calls[0].name, std::string("get_weather"));
  expect_json(out.calls[0].arguments, R"({"city":"Paris","days":3})");
  QCOMPARE(out.calls[1].name, std::string("now"));
  expect_json(out.calls[1].arguments, "{}");
  QVERIFY(out.calls[0].id.empty());  // the server makes one
  // Every kind of value, nested; a string's quotes, backslashes and line breaks escaped; white
  // space outside strings dropped; Python's None and True taken.
  out = split_tool_calls(call("add", "{items:[{text:" + Q + "say \"hi\"\\\n\t" + Q + ", due:-1.5e3}, []], ok:true," +
                                         "none:null, flag:False, o:{}, p:None, s:" + Q + "a:b}" + Q + "}"),
                         false, ToolCallFormat::Gemma4);
  QCOMPARE(out.calls.size(), size_t{1});
  expect_json(out.calls[0].arguments,
              R"({"items":[{"text":"say \"hi\"\\\n\t","due":-1.5e3},[]],"ok":true,"none":null,"flag":false,)"
              R"("o":{},"p":null,"s":"a:b}"})");
  QVERIFY(out.content.empty());
  // Quoted keys (as the template writes a declaration's), text after a call.
  out = split_tool_calls(call("f", "{" + Q + "k" + Q + ":1}") + " Done.", false, ToolCallFormat::Gemma4);
  expect_json(out.calls[0].arguments, R"({"k":1})");
  QCOMPARE(out.content, std::string(" Done."));
  // A reply cut off inside a call (max_tokens): the call so far, as OpenAI returns one.
  out = split_tool_calls(kOpen + "call:f{a:" + Q + "unfinished", false, ToolCallFormat::Gemma4);
  QCOMPARE(out.calls.size(), size_t{1});
  QCOMPARE(out.calls[0].arguments, std::string(R"({"a":"unfinished)"));
}

void TestGemma4Chat::keepsMalformedCallsAsText() {
  std::string deep = kOpen + "call:f{a:";
  for (int i = 0; i < 200; ++i) deep += "[";
  deep += kClose;
  for (const std::string& broken :
       {call("f", "{a:}"), kOpen + "hello" + kClose, kOpen + "call:bad name{}" + kClose, call("f", "{a:1 b:2}"),
        call("f", "{a:[1,2}"), call("f", "{a:tru}"), call("f", "{a,b}"), call("f", "{a:" + Q + "x}"), deep,
        kOpen + "call:" + kClose, kOpen + "call:{}" + kClose}) {
    const ToolReply out = split_tool_calls("A " + broken, false, ToolCallFormat::Gemma4);
    QVERIFY2(out.calls.empty(), qPrintable(printable(broken)));
    QCOMPARE(out.content, "A " + broken);
    // While streaming, nothing beyond what the finished reply gives.
    const ToolReply streamed = split_tool_calls("A " + broken, true, ToolCallFormat::Gemma4);
    QVERIFY2(out.content.starts_with(streamed.content), qPrintable(printable(broken)));
  }
  // An opening marker with no call after it, and text after it.
  const ToolReply out = split_tool_calls("See " + kOpen + " here", false, ToolCallFormat::Gemma4);
  QVERIFY(out.calls.empty());
  QCOMPARE(out.content, "See " + kOpen + " here");
  // A good call after a broken one.
  const ToolReply mixed = split_tool_calls(call("f", "{a:}") + call("g", "{b:2}"), false, ToolCallFormat::Gemma4);
  QCOMPARE(mixed.calls.size(), size_t{1});
  QCOMPARE(mixed.calls[0].name, std::string("g"));
  QCOMPARE(mixed.content, call("f", "{a:}"));
}

void TestGemma4Chat::streamedCallsOnlyGrow() {
  expect_growing("Sure, both.\n" +
                 call("get_weather", "{city:" + Q + "São Paulo <b>\"x\"</b> été" + Q + ",days:12,opts:[1,{a:" + Q +
                                         "}<|" + Q + "},-2.5e-3,true,null],more:{}}") +
                 call("now", "{}") + " Done.");
}

void TestGemma4Chat::randomRepliesNeverBreakTheReader() {
  std::mt19937 rng(11);
  const std::vector<std::string> atoms = {kOpen, kClose,       Q,         "call:",      "f",  "{",  "}",    "[",
                                          "]",   ":",          ",",       "1",          "-",  "e",  "true", "nu",
                                          "ll",  " ",          "\n",      "<|",         "<",  "|>", "é",    "\xc3",
                                          "a",   "<|channel>", "thought", "<channel|>", "\"", "\\"};
  for (int n = 0; n < 3000; ++n) {
    std::string reply;
    const int length = 1 + static_cast<int>(rng() % 24);
    for (int k = 0; k < length; ++k) reply += atoms[rng() % atoms.size()];
    const ReplyParts parts = split_reply(reply);
    const ReplyParts streamed_parts = split_reply(reply, true);
    QVERIFY2(parts.content.starts_with(streamed_parts.content), qPrintable(printable(reply)));
    const ToolReply whole = split_tool_calls(parts.content, false, ToolCallFormat::Gemma4);
    const ToolReply streamed = split_tool_calls(parts.content, true, ToolCallFormat::Gemma4);
    QVERIFY2(whole.content.starts_with(streamed.content), qPrintable(printable(reply)));
    QVERIFY2(streamed.calls.size() <= whole.calls.size(), qPrintable(printable(reply)));
    for (size_t i = 0; i < streamed.calls.size(); ++i) {
      QVERIFY2(whole.calls[i].arguments.starts_with(streamed.calls[i].arguments), qPrintable(printable(reply)));
    }
    if (QTest::currentTestFailed()) return;
  }
}

void TestGemma4Chat::grammarHoldsCallsToTheSyntax() {
  Result<ToolGrammar> grammar = tool_call_grammar(tools(), {}, ToolCallFormat::Gemma4);
  QVERIFY2(grammar.is_ok(), qPrintable(QString::fromStdString(grammar.error_message())));
  const auto g = grammar->grammar;
  // After the trigger (<|tool_call>): call:NAME, the arguments, <tool_call|>.
  expect_fits(g, "call:get_weather{city:" + Q + "Paris <b>|</b> <|\" <" + Q + ",days:3}" + kClose);
  expect_fits(g, "call:now{}" + kClose);
  expect_fits(g, "call:now{a:[1,-2.5e3,true,null,{b:" + Q + Q + "}],c:{d:[]}}" + kClose);
  expect_refused_at(g, "call:now{a:[{b:[", '[');  // a fourth level
  expect_refused_at(g, "call:later{}", 'l');
  expect_refused_at(g, "call:now{a:" + Q + "x" + Q + " }", ' ');        // compact, as the template writes
  expect_refused_at(g, "call:now{a:01}", '1');                          // JSON's numbers
  expect_refused_at(g, "call:now{\"a\":1}", '"');                       // keys bare
  expect_refused_at(g, "call:now{a:" + Q + "x<|\"|>y" + Q + "}", 'y');  // a string ends at its quote
  // A tool named alone.
  const auto only = tool_call_grammar(tools(), std::string("now"), ToolCallFormat::Gemma4)->grammar;
  expect_fits(only, "call:now{}" + kClose);
  expect_refused_at(only, "call:get", 'g');
}

void TestGemma4Chat::tokenMaskAgreesWithFeedingEachToken() {
  std::mt19937 rng(5);
  const std::vector<std::string> atoms = {"a", "Paris", " ",    "\"",   "\\",   "{",       "}", "[",    "]",   ":",
                                          ",", "1",     "2",    "-",    "city", "e",       "<", "|",    ">",   "now",
                                          "é", "\xc3",  "\xa9", "call", "get_", "weather", Q,   "true", "null"};
  std::vector<std::string> pieces = random_pieces(rng, atoms, 2000, 3);
  for (const std::string& whole : {Q, kClose, std::string("call:"), std::string("get_weather")}) {
    pieces.push_back(whole);
  }
  const TokenBytes tokens = tag_test_vocabulary(std::move(pieces));
  const auto g = tool_call_grammar(tools(), {}, ToolCallFormat::Gemma4)->grammar;
  expect_mask_agrees_at_every_cut(g, tokens,
                                  "call:get_weather{city:" + Q + "Par é <|\"" + Q + ",days:[12,{x:null}]}" + kClose);
}

QTEST_GUILESS_MAIN(TestGemma4Chat)
#include "test_gemma4_chat.moc"
