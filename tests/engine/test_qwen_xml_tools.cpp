// Qwen3-Coder's tool calls (ToolCallFormat::QwenXml) without a model: tagged parameters held to
// the tools' schemas byte by byte (any order, each once, required ones all, a string's raw text
// up to its end tag, other values JSON), the token mask against feeding each token, replies
// split into text and calls with JSON arguments (also while streaming: the arguments only
// grow), and the template rendered as jinja2 renders it (the expected text below is jinja2's on
// llama.cpp's copy of Qwen3-Coder's template).
#include "chat/qwen_xml_template.h"
#include "grammar_checks.h"
#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/sampling/token_constraint.h"
#include "streamed_calls_check.h"

#include <QtTest>

#include <nlohmann/json.hpp>

#include <random>

using namespace iwb;
using namespace iwb::test;
using json = nlohmann::json;

class TestQwenXmlTools : public QObject {
  Q_OBJECT

 private slots:
  void taggedParametersFollowTheSchema();
  void tokenMaskAgreesWithFeedingEachToken();
  void toolGrammarHoldsWholeCalls();
  void splitCallsWithTypedArguments();
  void streamedArgumentsOnlyGrow();
  void unwrittenFormatsAreRefused();
  void rendersAsItsTemplateDoes();
  void pythonStrOfValues();
};

namespace {

const char* kWeatherSchema =
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}, "
    "\"unit\": {\"enum\": [\"c\", \"f\"]}, \"code\": {\"type\": \"string\", \"pattern\": \"^[A-Z]{3}$\"}, "
    "\"when\": {\"type\": [\"string\", \"null\"]}}, \"required\": [\"city\", \"days\"]}";

const JsonGrammar::Tags kTags = {"<parameter=", ">\n", "\n</parameter>\n"};

std::shared_ptr<const JsonGrammar> weather_call() {
  Result<std::shared_ptr<const JsonGrammar>> schema = JsonGrammar::from_schema(kWeatherSchema);
  Result<std::shared_ptr<const JsonGrammar>> tagged = JsonGrammar::tagged_parameters(**schema, kTags, "");
  return JsonGrammar::sequences({{{"<function=w>\n", nullptr}, {"", *tagged}, {"</function>", nullptr}}}, "a call");
}

std::string param(const std::string& name, const std::string& value) {
  return "<parameter=" + name + ">\n" + value + "\n</parameter>\n";
}

const std::string kWeatherTool =
    std::string("{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": ") +
    kWeatherSchema + "}}";

std::vector<ToolDefinition> weather_tools() {
  ToolDefinition weather;
  weather.name = "get_weather";
  weather.parameters_json = kWeatherSchema;
  weather.json = kWeatherTool;
  ToolDefinition any;
  any.name = "run";
  any.json = "{\"type\": \"function\", \"function\": {\"name\": \"run\"}}";
  return {weather, any};
}

// The streaming check, with the parameters' types.
void expect_growing(const std::string& reply, const ToolArgumentTypes& types) {
  test::expect_streamed_calls_grow(reply, ToolCallFormat::QwenXml, {&types});
}

}  // namespace

void TestQwenXmlTools::taggedParametersFollowTheSchema() {
  const auto g = weather_call();
  const std::string close = "</function>";
  expect_fits(g, "<function=w>\n" + param("city", "Paris") + param("days", "3") + close);
  // Any order; optional ones anywhere; a string's text over lines with tags that are not its end.
  expect_fits(g, "<function=w>\n" + param("days", "-2") + param("unit", "f") +
                     param("city", "Saint-\xc3\x89tienne\n</parameter> <b>\"x\"</b>") + close);
  expect_fits(g, "<function=w>\n" + param("code", "PAR") + param("city", "") + param("days", "0") + close);
  expect_fits(g, "<function=w>\n" + param("city", "Oslo") + param("when", "null") + param("days", "1") + close);
  // Required ones all: the function may not end before "days".
  expect_refused_at(g, "<function=w>\n" + param("city", "Paris") + close, '/');
  // Each once: a second "city" is no name left ("code" shares its first letter).
  expect_refused_at(g, "<function=w>\n" + param("city", "A") + "<parameter=city>", 'i');
  expect_refused_at(g, "<function=w>\n<parameter=zone>", 'z');
  expect_refused_at(g, "<function=w>\n<parameter=days>\nthree", 't');  // an integer is JSON
  expect_refused_at(g, "<function=w>\n<parameter=days>\n 3", ' ');     // ... with nothing around it
  expect_refused_at(g, "<function=w>\n<parameter=unit>\nk", 'k');      // an enum's texts as written
  expect_refused_at(g, "<function=w>\n<parameter=unit>\n\"c", '"');
  expect_refused_at(g, "<function=w>\n<parameter=code>\nPa", 'a');  // a pattern's text
  expect_refused_at(g, std::string("<function=w>\n<parameter=city>\nA\0B", 33), '\0');
  expect_refused_at(g, "<function=w>\n<parameter=city>\nA\xc3(", '(');  // cut UTF-8
  // A string's text ends at its first end tag.
  expect_refused_at(g, "<function=w>\n<parameter=city>\nA\n</parameter>\nB", 'B');
  JsonMatcher m(g);
  QVERIFY(m.feed("<function=w>\n<parameter=city>\nPar"));
  QCOMPARE(m.raw_text()->end, std::string_view("\n</parameter>\n"));
  QCOMPARE(m.raw_text()->matched, int64_t{0});
  QVERIFY(!m.can_feed("x", /*is_raw_only=*/true));  // a control token writes no text
  QVERIFY(m.feed("\n</param"));
  QCOMPARE(m.raw_text()->matched, int64_t{8});  // part of the end written
  QVERIFY(m.feed("\xc3"));
  QVERIFY(!m.raw_text());  // inside a character

  // A string's length limits hold for its text (the end tag not counted).
  Result<std::shared_ptr<const JsonGrammar>> short_city = JsonGrammar::from_schema(
      "{\"type\": \"object\", \"properties\": {\"c\": {\"type\": \"string\", \"minLength\": 2, \"maxLength\": 5}}}");
  const auto bounded = JsonGrammar::sequences(
      {{{"<f>", nullptr}, {"", *JsonGrammar::tagged_parameters(**short_city, kTags, "")}, {"</f>", nullptr}}},
      "a call");
  expect_fits(bounded, "<f>" + param("c", "S\xc3\xa3o P") + "</f>");
  expect_fits(bounded, "<f>" + param("c", "\n\n") + "</f>");
  expect_refused_at(bounded, "<f><parameter=c>\nParis!", '!');
  expect_refused_at(bounded, "<f><parameter=c>\nA\n</parameter>\n</f>", '\n');
  JsonMatcher five(bounded);
  QVERIFY(five.feed("<f><parameter=c>\nPar"));
  QVERIFY(!five.raw_text());  // bounded: each token's length matters

  // A marker after the parameters may be a control token's text; a parameter's tag never is.
  const auto marked = JsonGrammar::sequences(
      {{{"<f>", nullptr}, {"", *JsonGrammar::tagged_parameters(**short_city, kTags, "")}, {"[END]", nullptr}}},
      "a call");
  JsonMatcher ending(marked);
  QVERIFY(ending.feed("<f>"));
  QVERIFY(ending.can_feed("[END]", /*is_raw_only=*/true));
  QVERIFY(!ending.can_feed("<parameter=", /*is_raw_only=*/true));
  QVERIFY(ending.feed("<parameter=c>\nab\n</parameter>\n"));
  QVERIFY(ending.can_feed("[END]", /*is_raw_only=*/true));

  // A schema with no properties listed takes any names, their values raw text.
  Result<std::shared_ptr<const JsonGrammar>> any =
      JsonGrammar::tagged_parameters(*JsonGrammar::any_object(), kTags, "");
  QVERIFY(any.is_ok());
  const auto any_call =
      JsonGrammar::sequences({{{"<function=r>\n", nullptr}, {"", *any}, {"</function>", nullptr}}}, "a call");
  expect_fits(any_call, "<function=r>\n" + param("cmd", "ls -l") + param("n", "{\"a\": 1}") + close);
  expect_fits(any_call, "<function=r>\n" + close);
  expect_refused_at(any_call, "<function=r>\n<parameter=>\n", '\n');  // a name is not empty
  // Not an object: refused (the caller holds such a tool to any names).
  Result<std::shared_ptr<const JsonGrammar>> list = JsonGrammar::from_schema("{\"type\": \"array\"}");
  QVERIFY(!JsonGrammar::tagged_parameters(**list, kTags, "").is_ok());
}

void TestQwenXmlTools::tokenMaskAgreesWithFeedingEachToken() {
  std::mt19937 rng(7);
  const std::vector<std::string> atoms = {
      "a",        "Paris",    "\n",   "\n\n", "</",           "parameter",   ">",    "<",
      "=",        "3",        "-",    " ",    "\"",           "\\",          "c",    "f",
      "PAR",      "\xc3\xa9", "\xc3", "\xa9", "</parameter>", "<parameter=", "city", "days",
      "function", "\t",       "{",    "null", "\x01"};
  std::vector<std::string> pieces = random_pieces(rng, atoms, 2500, 3);
  for (const char* whole : {"\n</parameter>\n", "<parameter=city>\n", "city>\n", "3\n</parameter>\n<parameter="}) {
    pieces.push_back(whole);
  }
  // A control token's text ("<parameter=") is never a parameter.
  const TokenBytes tokens = tag_test_vocabulary(std::move(pieces), {"<parameter="});
  const auto g = weather_call();
  const std::string text = "<function=w>\n" + param("days", "12") + param("city", "Par\nis </parameter>x") +
                           param("unit", "c") + param("code", "ABC") + "</function>";
  const int num_raw = expect_mask_agrees_at_every_cut(g, tokens, text);
  if (QTest::currentTestFailed()) return;
  QVERIFY(num_raw > 10);  // the raw-text shortcut was exercised
}

void TestQwenXmlTools::toolGrammarHoldsWholeCalls() {
  Result<ToolGrammar> grammar = tool_call_grammar(weather_tools(), {}, ToolCallFormat::QwenXml);
  QVERIFY(grammar.is_ok());
  QVERIFY(grammar->loosened.empty());
  const auto g = grammar->grammar;
  // After the trigger "<tool_call>": the function, its parameters, the block's end.
  expect_fits(g,
              "\n<function=get_weather>\n" + param("city", "Paris") + param("days", "1") + "</function>\n</tool_call>");
  expect_fits(g, "\n<function=run>\n" + param("anything", "at all") + "</function>\n</tool_call>");
  expect_refused_at(g, "\n<function=get_time>", 't');
  expect_refused_at(g, "\n<function=get_weather>\n</function>", '/');
  QCOMPARE(tool_call_syntax(ToolCallFormat::QwenXml).trigger, std::string("<tool_call>"));
  // A tool named alone; a strict tool whose schema is no object is refused by name.
  Result<ToolGrammar> only = tool_call_grammar(weather_tools(), std::string("run"), ToolCallFormat::QwenXml);
  QVERIFY(only.is_ok());
  expect_refused_at(only->grammar, "\n<function=get_weather>", 'g');
  ToolDefinition list;
  list.name = "list";
  list.parameters_json = "{\"type\": \"array\"}";
  list.is_strict = true;
  Result<ToolGrammar> strict = tool_call_grammar({list}, {}, ToolCallFormat::QwenXml);
  QVERIFY(!strict.is_ok());
  QVERIFY(strict.error_message().find("strict tool 'list'") != std::string::npos);
  list.is_strict = false;
  Result<ToolGrammar> loose = tool_call_grammar({list}, {}, ToolCallFormat::QwenXml);
  QVERIFY(loose.is_ok());
  QCOMPARE(loose->loosened.size(), size_t{1});
  expect_fits(loose->grammar, "\n<function=list>\n" + param("x", "1") + "</function>\n</tool_call>");
}

void TestQwenXmlTools::splitCallsWithTypedArguments() {
  const ToolArgumentTypes types = tool_argument_types(weather_tools());
  QCOMPARE(types.of("get_weather", "city"), ArgumentText::String);
  QCOMPARE(types.of("get_weather", "days"), ArgumentText::Json);
  QCOMPARE(types.of("get_weather", "unit"), ArgumentText::String);
  QCOMPARE(types.of("get_weather", "when"), ArgumentText::JsonOrString);
  QCOMPARE(types.of("get_weather", "other"), ArgumentText::String);
  QCOMPARE(types.of("run", "x"), ArgumentText::String);

  const std::string reply = "Let me check.\n<tool_call>\n<function=get_weather>\n" + param("city", "42") +
                            param("days", "3") + param("when", "null") + "</function>\n</tool_call>\n<tool_call>\n" +
                            "<function=run>\n" + param("cmd", "echo \"hi\"\n\tdone") + "</function>\n</tool_call>";
  ToolReply out = split_tool_calls(reply, false, ToolCallFormat::QwenXml, &types);
  QCOMPARE(out.content, std::string("Let me check."));
  QCOMPARE(out.calls.size(), size_t{2});
  QCOMPARE(out.calls[0].name, std::string("get_weather"));
  QCOMPARE(out.calls[0].arguments, std::string("{\"city\":\"42\",\"days\":3,\"when\":null}"));
  QCOMPARE(out.calls[1].name, std::string("run"));
  QCOMPARE(out.calls[1].arguments, std::string("{\"cmd\":\"echo \\\"hi\\\"\\n\\tdone\"}"));
  // JSON values, Python's words, text that is no JSON; a "when" that is text stays a string.
  const std::string loose = "<tool_call>\n<function=get_weather>\n" + param("days", "True") + param("when", "soon") +
                            param("unit", "[1]") + "</function>\n</tool_call>";
  QCOMPARE(split_tool_calls(loose, false, ToolCallFormat::QwenXml, &types).calls[0].arguments,
           std::string("{\"days\":true,\"when\":\"soon\",\"unit\":\"[1]\"}"));
  // A value ends where the grammar ends it, at "\n</parameter>\n": any other tag is its text (a
  // code argument may hold "<parameter=" or "</function>"); a finished reply may end after
  // "\n</parameter>".
  const std::string tags = "<tool_call>\n<function=run>\n" + param("cmd", "echo '<parameter=b>\n</function>'") +
                           param("n", "a </parameter> b") + "</function>\n</tool_call>";
  QCOMPARE(split_tool_calls(tags, false, ToolCallFormat::QwenXml).calls[0].arguments,
           std::string("{\"cmd\":\"echo '<parameter=b>\\n</function>'\",\"n\":\"a </parameter> b\"}"));
  QCOMPARE(
      split_tool_calls("<tool_call>\n<function=run>\n<parameter=a>\nx\n</parameter>", false, ToolCallFormat::QwenXml)
          .calls[0]
          .arguments,
      std::string("{\"a\":\"x\""));
  // A block that is no call stays in the text; a reply cut inside a call ends with the call.
  const std::string not_a_call = "A <tool_call>maybe</tool_call> B";
  out = split_tool_calls(not_a_call, false, ToolCallFormat::QwenXml);
  QCOMPARE(out.content, not_a_call);
  QVERIFY(out.calls.empty());
  // A call without its <tool_call> tag, as Qwen3-Coder now and then writes one: a call when the
  // function is one of the request's tools.
  const std::string bare = "Sure.\n<function=run>\n" + param("cmd", "ls") + "</function>\nDone.";
  out = split_tool_calls(bare, false, ToolCallFormat::QwenXml, &types);
  QCOMPARE(out.content, std::string("Sure.\n\nDone."));
  QCOMPARE(out.calls.size(), size_t{1});
  QCOMPARE(out.calls[0].arguments, std::string("{\"cmd\":\"ls\"}"));
  QCOMPARE(split_tool_calls(bare, false, ToolCallFormat::QwenXml).content, bare);  // no tools known
  const std::string other = "#include <functional>\n<function=other>\nx</function>";
  QCOMPARE(split_tool_calls(other, false, ToolCallFormat::QwenXml, &types).content, other);
  out = split_tool_calls("<tool_call>\n<function=run>\n<parameter=cmd>\nls -", false, ToolCallFormat::QwenXml);
  QCOMPARE(out.calls.size(), size_t{1});
  QCOMPARE(out.calls[0].arguments, std::string("{\"cmd\":\"ls -"));
  QVERIFY(out.content.empty());
}

void TestQwenXmlTools::streamedArgumentsOnlyGrow() {
  const ToolArgumentTypes types = tool_argument_types(weather_tools());
  const std::string reply = "Sure.\n<tool_call>\n<function=get_weather>\n" + param("city", "S\xc3\xa3o\nPaulo") +
                            param("days", "12") + param("when", "[1, 2]") + "</function>\n</tool_call>\n" +
                            "<tool_call>\n<function=run>\n" + param("cmd", "a </b> c") + "</function>\n</tool_call>";
  const ToolReply whole = split_tool_calls(reply, false, ToolCallFormat::QwenXml, &types);
  QCOMPARE(whole.calls.size(), size_t{2});
  QCOMPARE(whole.calls[0].arguments, std::string("{\"city\":\"S\xc3\xa3o\\nPaulo\",\"days\":12,\"when\":[1,2]}"));
  QCOMPARE(whole.calls[1].arguments, std::string("{\"cmd\":\"a </b> c\"}"));
  expect_growing(reply, types);
  // Calls without their <tool_call> tags, text between and after.
  expect_growing("A <fun <function=run>\n" + param("cmd", "x") + "</function>\nB <function=run>\n" + param("cmd", "y") +
                     "</function>\nC",
                 types);
}

void TestQwenXmlTools::unwrittenFormatsAreRefused() {
  // Nemotron 3 Nano's template: ChatML, calls as tags, its own prompt: tools refused, not
  // Qwen2.5's (Qwen3.5's, which lists its tools as JSON there, is written: test_qwen35_chat).
  const std::string nemotron =
      "{{- '<|im_start|>system\\n' }}# Tools\n\nYou have access to the following functions:"
      "<parameter=example_parameter_1>";
  QCOMPARE(detect_chat_template(nemotron), ChatTemplateFamily::ChatMl);
  QVERIFY(chat_template_unwritten_tool_format(nemotron).find("Nemotron 3 Nano") != std::string::npos);
  QVERIFY(chat_template_summary(nemotron).starts_with("chatml; no tool format (calls as <function=NAME>"));
  QVERIFY(chat_template_summary(nemotron, ChatTemplateFamily::ChatMl).starts_with("chatml; tools: <tool_call> blocks"));
  QVERIFY(
      chat_template_unwritten_tool_format("<|im_start|>You have access to the following tools:<parameter=").empty());
  QVERIFY(chat_template_unwritten_tool_format("<|im_start|>").empty());
}

void TestQwenXmlTools::rendersAsItsTemplateDoes() {
  const std::string jinja =
      "{{- '<|im_start|>system\\nYou are Qwen' }}<parameter=example_parameter_1>"
      "You have access to the following tools:";
  QCOMPARE(detect_chat_template(jinja), ChatTemplateFamily::Qwen3Coder);
  QCOMPARE(chat_template_family_from_name("qwen3-coder"),
           std::optional<ChatTemplateFamily>(ChatTemplateFamily::Qwen3Coder));
  QCOMPARE(
      chat_template_summary(jinja),
      std::string("qwen3-coder; tools: <tool_call> blocks of <function=NAME> and <parameter=KEY> tags (Qwen3-Coder, "
                  "Qwen3.5)"));
  ChatRenderOptions o;
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Qwen3Coder, o));
  o.tools = {
      "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a "
      "city \", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
      "\"description\": \"A city\"}, \"days\": {\"type\": \"integer\", \"minimum\": 1}, \"unit\": {\"enum\": "
      "[\"c\", \"f\"]}, \"when\": {\"type\": [\"string\", \"null\"]}}, \"required\": [\"city\"]}, \"strict\": "
      "true}}"};
  const std::vector<ChatMessage> turns = {
      {"user", "Weather?"},
      {"assistant",
       "",
       {{"a", "get_weather", "{\"city\": \"Paris\", \"days\": 2, \"unit\": null, \"when\": [1.5, true]}"}}},
      {"tool", "{\"temp\": 21}", {}, "a"},
      {"tool", "ok", {}, "a"}};
  const std::string expected =
      "<|im_start|>system\n"
      "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks.\n"
      "\n"
      "# Tools\n"
      "\n"
      "You have access to the following tools:\n"
      "\n"
      "<tools>\n"
      "<function>\n"
      "<name>get_weather</name>\n"
      "<description>Weather in a city</description>\n"
      "<parameters>\n"
      "<parameter>\n"
      "<name>city</name>\n"
      "<type>string</type>\n"
      "<description>A city</description>\n"
      "</parameter>\n"
      "<parameter>\n"
      "<name>days</name>\n"
      "<type>integer</type>\n"
      "<minimum>1</minimum>\n"
      "</parameter>\n"
      "<parameter>\n"
      "<name>unit</name>\n"
      "<enum>[\"c\", \"f\"]</enum>\n"
      "</parameter>\n"
      "<parameter>\n"
      "<name>when</name>\n"
      "<type>['string', 'null']</type>\n"
      "</parameter>\n"
      "<required>[\"city\"]</required>\n"
      "</parameters>\n"
      "<strict>True</strict>\n"
      "</function>\n"
      "</tools>\n"
      "\n"
      "If you choose to call a tool ONLY reply in the following format with NO suffix:\n"
      "\n"
      "<tool_call>\n"
      "<function=example_function_name>\n"
      "<parameter=example_parameter_1>\n"
      "value_1\n"
      "</parameter>\n"
      "<parameter=example_parameter_2>\n"
      "value_2\n"
      "</parameter>\n"
      "</function>\n"
      "</tool_call>\n"
      "\n"
      "<IMPORTANT>\n"
      "Reminder:\n"
      "- Function calls MUST follow the specified format: the tool calling block MUST begin with an opening "
      "<tool_call> tag and end with a closing </tool_call> tag.\n"
      "- Required parameters MUST be specified\n"
      "- You may provide optional reasoning for your function call in natural language BEFORE the function call, but "
      "NOT after\n"
      "- If there is no function call available, answer the question like normal with your current knowledge and do "
      "not tell the user about function calls\n"
      "</IMPORTANT><|im_end|>\n"
      "<|im_start|>user\n"
      "Weather?<|im_end|>\n"
      "<|im_start|>assistant\n"
      "<tool_call>\n"
      "<function=get_weather>\n"
      "<parameter=city>\n"
      "Paris\n"
      "</parameter>\n"
      "<parameter=days>\n"
      "2\n"
      "</parameter>\n"
      "<parameter=unit>\n"
      "None\n"
      "</parameter>\n"
      "<parameter=when>\n"
      "[1.5, true]\n"
      "</parameter>\n"
      "</function>\n"
      "</tool_call><|im_end|>\n"
      "<|im_start|>user\n"
      "<tool_response>\n"
      "{\"temp\": 21}\n"
      "</tool_response>\n"
      "<tool_response>\n"
      "ok\n"
      "</tool_response>\n"
      "<|im_end|>\n"
      "<|im_start|>assistant\n";
  QCOMPARE(render_chat(ChatTemplateFamily::Qwen3Coder, turns, o), expected);
}

void TestQwenXmlTools::pythonStrOfValues() {
  using detail::python_str;
  QCOMPARE(python_str("1e20"), std::string("1e+20"));
  QCOMPARE(python_str("1e-7"), std::string("1e-07"));
  QCOMPARE(python_str("0.0001"), std::string("0.0001"));
  QCOMPARE(python_str("1e16"), std::string("1e+16"));
  QCOMPARE(python_str("1e15"), std::string("1000000000000000.0"));
  QCOMPARE(python_str("123.456"), std::string("123.456"));
  QCOMPARE(python_str("2.0"), std::string("2.0"));
  QCOMPARE(python_str("-0.0"), std::string("-0.0"));
  QCOMPARE(python_str("0.1"), std::string("0.1"));
  QCOMPARE(python_str("1.2345678901234567e-300"), std::string("1.2345678901234568e-300"));
  QCOMPARE(python_str("42"), std::string("42"));
  QCOMPARE(python_str("true"), std::string("True"));
  QCOMPARE(python_str("null"), std::string("None"));
  QCOMPARE(python_str("\"text\""), std::string("text"));
  QCOMPARE(python_str("[\"a\", \"it's\", \"\\\"q\\\"\", 1.0, false]"),
           std::string("['a', \"it's\", '\"q\"', 1.0, False]"));
  QCOMPARE(python_str("{\"k\": [\"a\\nb\"]}"), std::string("{'k': ['a\\nb']}"));
}

QTEST_GUILESS_MAIN(TestQwenXmlTools)
#include "test_qwen_xml_tools.moc"
