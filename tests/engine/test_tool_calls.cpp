// Tool calling's pieces without a model: ChatML rendered exactly as Qwen2.5's Jinja template
// renders tools, calls and results (the expected texts were rendered by jinja2 with Hugging
// Face's `tojson`), definitions written as that `tojson` writes them, the grammar of one call
// (names, arguments held to each tool's schema, strict and loosened tools, $refs), and replies
// split into text and calls, also while streaming.
#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/sampling/json_grammar.h"

#include <QtTest>

#include <nlohmann/json.hpp>

using namespace iwb;

class TestToolCalls : public QObject {
  Q_OBJECT

 private slots:
  void tojsonWritesAsPythonDoes();
  void defaultSystemIsReadFromTheTemplate();
  void chatmlRendersToolsAsQwenDoes();
  void chatmlRendersSystemAndToolsAsQwenDoes();
  void chatmlRendersToolsAsQwen3Does();
  void qwen3ReadsPastThinking();
  void chatmlRendersCallsWithoutToolsAsQwenDoes();
  void llama31RendersToolsAsItsTemplateDoes();
  void llama3CallsAreTheWholeReply();
  void grammarHoldsACallToTheTools();
  void grammarNamedToolAndStrictness();
  void grammarFollowsRefsInParameters();
  void splitFindsCallsAndText();
  void splitWhileStreamingOnlyGrows();
};

namespace {

const char* kWeatherTool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city, °C",)"
    R"( "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},)"
    R"( "required": ["city"]}}})";
const char* kNowTool =
    R"({"type": "function", "function": {"name": "now", "description": "The time", "parameters": {"type": "object", "properties": {}}}})";

// The tool as a request carries it (compact, as a client sends it), then as the template shows it.
ToolDefinition tool(const char* whole_json) {
  const nlohmann::ordered_json t = nlohmann::ordered_json::parse(whole_json);
  ToolDefinition d;
  d.name = t["function"]["name"].get<std::string>();
  if (t["function"].contains("parameters")) d.parameters_json = t["function"]["parameters"].dump();
  d.is_strict = t["function"].value("strict", false);
  d.json = t.dump();
  return d;
}

const std::string kQwenSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
const std::string kToolsIntro =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
const std::string kToolsOutro =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}}\n</tool_call><|im_end|>\n";

bool feeds(const std::shared_ptr<const JsonGrammar>& g, const std::string& lead, const std::string& text,
           bool* is_complete = nullptr) {
  JsonMatcher m(g, lead);
  const bool ok = m.feed(text);
  if (is_complete != nullptr) *is_complete = ok && m.is_complete() && m.next_bytes().none();
  return ok;
}

}  // namespace

void TestToolCalls::tojsonWritesAsPythonDoes() {
  QCOMPARE(template_tojson(R"({"b":1,"a":[true,null,"x"],"c":{}})"),
           std::string(R"({"b": 1, "a": [true, null, "x"], "c": {}})"));
  const std::string escapes = "{\"s\":\"°C \\\"q\\\" \\\\ \\n\\u0001\"}";  // quote, backslash, newline, ^A
  QCOMPARE(template_tojson(escapes), std::string("{\"s\": \"°C \\\"q\\\" \\\\ \\n\\u0001\"}"));
  QCOMPARE(template_tojson("[]"), std::string("[]"));
  QCOMPARE(template_tojson("1.5"), std::string("1.5"));
  // tojson(indent=4): an item a line, "," at line ends, empty containers kept short.
  QCOMPARE(template_tojson(R"({"a":[1,{}],"b":{"c":[]}})", 4),
           std::string("{\n    \"a\": [\n        1,\n        {}\n    ],\n    \"b\": {\n        \"c\": []\n    }\n}"));
  QCOMPARE(template_tojson_string("21 \"C\""), std::string("\"21 \\\"C\\\"\""));
  // Not JSON: written as a string, as tojson writes a Python str.
  QCOMPARE(template_tojson("city=Paris"), std::string("\"city=Paris\""));
}

void TestToolCalls::defaultSystemIsReadFromTheTemplate() {
  const char* qwen =
      "{%- if messages[0]['role'] == 'system' %}\n"
      "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
      "    {%- else %}\n"
      "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\\n' }}\n";
  QCOMPARE(chat_template_default_system(qwen), kQwenSystem);
  QCOMPARE(chat_template_default_system("{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"),
           std::string());
  QCOMPARE(chat_template_default_system("{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"), std::string());
}

void TestToolCalls::chatmlRendersToolsAsQwenDoes() {
  std::vector<ChatMessage> messages = {
      {"user", "Weather in Paris and the time?", {}, {}},
      {"assistant", "", {{"call_1", "get_weather", R"({"city":"Paris","unit":"c"})"}, {"call_2", "now", "{}"}}, {}},
      {"tool", R"({"temp": 21})", {}, "call_1"},
      {"tool", "12:00", {}, "call_2"},
      {"assistant", "21 °C at noon.", {}, {}},
      {"user", "Thanks", {}, {}},
  };
  ChatRenderOptions o;
  o.tools = {tool(kWeatherTool).json, tool(kNowTool).json};
  o.default_system = kQwenSystem;
  o.doubles_tool_example_braces = true;  // Qwen2.5-Coder's template (the default model's)
  const std::string expected =
      "<|im_start|>system\n" + kQwenSystem + "\n\n" + kToolsIntro +
      "\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city, "
      "°C\", "
      "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"enum\": "
      "[\"c\", \"f\"]}}, \"required\": [\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"now\", "
      "\"description\": \"The time\", \"parameters\": {\"type\": \"object\", \"properties\": {}}}}" +
      kToolsOutro +
      "<|im_start|>user\nWeather in Paris and the time?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": "
      "\"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"now\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": "
      "21}\n</tool_response>\n<tool_response>\n12:00\n</tool_response><|im_end|>\n<|im_start|>assistant\n21 °C at "
      "noon.<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n";
  QCOMPARE(render_chat(ChatTemplateFamily::ChatMl, messages, o), expected);
}

void TestToolCalls::chatmlRendersSystemAndToolsAsQwenDoes() {
  ChatRenderOptions o;
  o.tools = {tool(kNowTool).json};
  o.default_system = kQwenSystem;  // not used: the conversation has its own
  o.doubles_tool_example_braces = true;
  const std::string expected =
      "<|im_start|>system\nBe brief.\n\n" + kToolsIntro +
      "\n{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": "
      "{\"type\": \"object\", \"properties\": {}}}}" +
      kToolsOutro + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  QCOMPARE(render_chat(ChatTemplateFamily::ChatMl, {{"system", "Be brief.", {}, {}}, {"user", "Hi", {}, {}}}, o),
           expected);
}

// Qwen3's template (and Qwen2.5-Instruct's current one): no default system text, so the tools
// open the system turn; the call example with single braces. (Expected text rendered by jinja2
// from llama.cpp's models/templates/Qwen-Qwen3-0.6B.jinja.)
void TestToolCalls::chatmlRendersToolsAsQwen3Does() {
  ChatRenderOptions o;
  o.tools = {tool(kNowTool).json};
  const std::string expected =
      "<|im_start|>system\n" + kToolsIntro +
      "\n{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": "
      "{\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\nFor each function call, return a json object with "
      "function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
      "\"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  QCOMPARE(render_chat(ChatTemplateFamily::ChatMl, {{"user", "Hi", {}, {}}}, o), expected);
  QVERIFY(
      chat_template_doubles_tool_example("{{- \"...<tool_call>\\n{{\\\"name\\\": <function-name>, \\\"arguments\\\": "
                                         "<args-json-object>}}\\n</tool_call>\" }}"));
  QVERIFY(
      !chat_template_doubles_tool_example("{{- \"...<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": "
                                          "<args-json-object>}\\n</tool_call>\" }}"));
}

// Qwen3's template takes past reasoning out of assistant turns (the text before </think>), and
// writes a think block for turns after the last user query that are the last message or had
// reasoning. (Expected text rendered by jinja2 from Qwen-Qwen3-0.6B.jinja.)
void TestToolCalls::qwen3ReadsPastThinking() {
  QVERIFY(chat_template_reads_past_thinking(
      "<|im_start|>{%- set ns = namespace(last_query_index=messages|length - 1) %}{{ '</think>' }}"));
  QVERIFY(!chat_template_reads_past_thinking("<|im_start|>{{ '</think>' }}"));
  ChatRenderOptions o;
  o.reads_past_thinking = true;
  o.add_generation_prompt = false;
  const std::vector<ChatMessage> turns = {{"user", "Hi"},
                                          {"assistant", "<think>\nhmm\n</think>\n\nHello!"},
                                          {"user", "Again"},
                                          {"assistant", "<think>plan</think>\nLooking.", {{"c1", "now", "{}"}}},
                                          {"tool", "noon", {}, "c1"},
                                          {"assistant", "It is noon."}};
  const std::string expected =
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n"
      "<|im_start|>assistant\n<think>\nplan\n</think>\n\nLooking.\n<tool_call>\n{\"name\": \"now\", "
      "\"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nnoon\n</tool_response>"
      "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nIt is noon.<|im_end|>\n";
  QCOMPARE(render_chat(ChatTemplateFamily::ChatMl, turns, o), expected);

  // reasoning_content sent back is written instead of the content's think block (null: read
  // from the content).
  ChatMessage called{"assistant", "", {{"c2", "now", "{}"}}};
  called.reasoning_content = "\nUse the clock.\n";
  const std::vector<ChatMessage> agent = {
      {"user", "Time?"}, called, {"tool", "noon", {}, "c2"}, {"assistant", "<think>x</think>Noon."}};
  o.add_generation_prompt = true;
  QCOMPARE(
      render_chat(ChatTemplateFamily::ChatMl, agent, o),
      std::string("<|im_start|>user\nTime?<|im_end|>\n<|im_start|>assistant\n<think>\nUse the clock.\n</think>\n\n"
                  "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n"
                  "<tool_response>\nnoon\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\nx\n</think>\n\n"
                  "Noon.<|im_end|>\n<|im_start|>assistant\n"));
}

void TestToolCalls::chatmlRendersCallsWithoutToolsAsQwenDoes() {
  ChatRenderOptions o;
  o.default_system = kQwenSystem;
  const std::vector<ChatMessage> messages = {
      {"user", "Hi", {}, {}}, {"assistant", "Let me look.", {{"", "now", "{}"}}, {}}, {"tool", "noon", {}, {}}};
  const std::string expected = "<|im_start|>system\n" + kQwenSystem +
                               "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nLet me "
                               "look.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
                               "<|im_start|>user\n<tool_response>\nnoon\n</tool_response><|im_end|>\n"
                               "<|im_start|>assistant\n";
  QCOMPARE(render_chat(ChatTemplateFamily::ChatMl, messages, o), expected);
  // Without a default (a ChatML template that has none), no system turn is made up.
  QVERIFY(render_chat(ChatTemplateFamily::ChatMl, messages, {}).rfind("<|im_start|>user\nHi", 0) == 0);
}

// Llama 3.1's template (jinja2 rendering of llama.cpp's models/templates copy): the system
// block with its date, the tools in the first user message as tojson(indent=4), contents
// trimmed, the call as {"name", "parameters"}, a tool's result as a JSON string in an ipython
// turn. Without tools the system block is still written.
void TestToolCalls::llama31RendersToolsAsItsTemplateDoes() {
  ChatRenderOptions o;
  o.bos_text = "<|begin_of_text|>";
  o.llama3_date = "26 Jul 2024";
  o.tools = {tool(kWeatherTool).json, tool(kNowTool).json};
  const std::vector<ChatMessage> messages = {{"system", " Be brief. ", {}, {}},
                                             {"user", "Weather in Oslo? ", {}, {}},
                                             {"assistant", "", {{"", "get_weather", R"({"city":"Oslo"})"}}, {}},
                                             {"tool", "21 degrees", {}, {}}};
  const std::string expected =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: "
      "December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven "
      "the following functions, please respond with a JSON for a function call with its proper arguments that best "
      "answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of "
      "argument name and its value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n    "
      "    \"name\": \"get_weather\",\n        \"description\": \"Weather in a city, °C\",\n        \"parameters\": "
      "{\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n           "
      "         \"type\": \"string\"\n                },\n                \"unit\": {\n                    \"enum\": "
      "[\n                        \"c\",\n                        \"f\"\n                    ]\n                }\n   "
      "         },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}\n\n{\n  "
      "  \"type\": \"function\",\n    \"function\": {\n        \"name\": \"now\",\n        \"description\": \"The "
      "time\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {}\n      "
      "  }\n    }\n}\n\nWeather in Oslo?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": "
      "\"get_weather\", \"parameters\": {\"city\": "
      "\"Oslo\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"21 "
      "degrees\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  QCOMPARE(render_chat(ChatTemplateFamily::Llama3, messages, o), expected);
  o.tools.clear();
  QCOMPARE(
      render_chat(ChatTemplateFamily::Llama3, {{"user", "Hi", {}, {}}}, o),
      std::string("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
                  "2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n"));
  // Which templates are 3.1+ and their dates.
  QCOMPARE(chat_template_llama3_date("<|start_header_id|>{{ m.role }}"), std::string());
  const std::string today = chat_template_llama3_date(
      "{%- set date_string = \"26 Jul 2024\" %}{{- \"Cutting Knowledge Date: December 2023\\n\" }}");
  QCOMPARE(today.size(), size_t{11});  // "05 Dec 2026"
  QVERIFY(today != "26 Jul 2024");
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Llama3, o));
  QVERIFY(!chat_template_has_tools(ChatTemplateFamily::Llama3, ChatRenderOptions{}));  // Llama 3.0
}

void TestToolCalls::llama3CallsAreTheWholeReply() {
  const ToolCallFormat llama = ToolCallFormat::Llama3;
  ToolReply r = split_tool_calls(" {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", false, llama);
  QCOMPARE(r.calls.size(), size_t{1});
  QCOMPARE(r.calls[0].arguments, std::string(R"({"city":"Oslo"})"));
  QCOMPARE(r.content, std::string());
  // Streaming: a reply that opens with {"name" (or may yet) waits for its end; text, and JSON
  // that is not a call, go out as they come.
  QCOMPARE(split_tool_calls("{\"name\": \"get_wea", true, llama).content, std::string());
  QCOMPARE(split_tool_calls(" {\"na", true, llama).content, std::string());
  QCOMPARE(split_tool_calls("{\"answer\": 4", true, llama).content, std::string("{\"answer\": 4"));
  QCOMPARE(split_tool_calls("Hello {", true, llama).content, std::string("Hello {"));
  QCOMPARE(split_tool_calls("{ \"name\": \"get_wea", true, llama).content, std::string());  // a forced call's space
  // Once its parameters begin, the call streams like a Hermes one.
  r = split_tool_calls("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Os", true, llama);
  QCOMPARE(r.calls.size(), size_t{1});
  QCOMPARE(r.calls[0].name, std::string("get_weather"));
  QCOMPARE(r.calls[0].arguments, std::string("{\"city\":\"Os"));
  QCOMPARE(r.content, std::string());
  QCOMPARE(split_tool_calls("{ \"name\": \"now\", \"parameters\": {}}", false, llama).calls.size(), size_t{1});
  QCOMPARE(split_tool_calls("{\"name\": \"Ann\"}", false, llama).content, std::string("{\"name\": \"Ann\"}"));
  // JSON that is not a call is the answer.
  QCOMPARE(split_tool_calls("{\"a\": 1}", false, llama).content, std::string("{\"a\": 1}"));
  QVERIFY(split_tool_calls("{\"a\": 1}", false, llama).calls.empty());
  // The grammar: the call object itself, "parameters" held to the tool's schema.
  Result<ToolGrammar> g = tool_call_grammar({tool(kWeatherTool), tool(kNowTool)}, {}, llama);
  QVERIFY2(g.is_ok(), g.error_message().c_str());
  bool complete = false;
  QVERIFY(feeds(g->grammar, "", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", &complete));
  QVERIFY(complete);
  QVERIFY(!feeds(g->grammar, "", "{\"name\": \"get_weather\", \"arguments\""));
  const ToolCallSyntax syntax = tool_call_syntax(llama);
  QCOMPARE(syntax.trigger, std::string("{\"name\""));
  QVERIFY(syntax.is_trigger_in_grammar && syntax.is_trigger_at_start && !syntax.allows_several);
}

void TestToolCalls::grammarHoldsACallToTheTools() {
  Result<ToolGrammar> g = tool_call_grammar({tool(kWeatherTool), tool(kNowTool)});
  QVERIFY2(g.is_ok(), g.error_message().c_str());
  QVERIFY(g->loosened.empty());
  const std::string lead(kToolCallOpen);
  bool complete = false;
  QVERIFY(feeds(g->grammar, lead,
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                &complete));
  QVERIFY(complete);
  QVERIFY(feeds(g->grammar, lead, "<tool_call>\n{\"arguments\": {}, \"name\": \"now\"}\n</tool_call>", &complete));
  QVERIFY(complete);
  // Not whole until the closing marker.
  QVERIFY(feeds(g->grammar, lead, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_", &complete));
  QVERIFY(!complete);
  // Refused: another tool, a missing required argument, an argument not in the schema, an
  // enum value not listed, white space before the value, no newline before the marker.
  QVERIFY(!feeds(g->grammar, lead, "<tool_call>\n{\"name\": \"get_time"));
  QVERIFY(!feeds(g->grammar, lead, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}"));
  QVERIFY(!feeds(g->grammar, lead, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"x"));
  QVERIFY(!feeds(g->grammar, lead,
                 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": \"k"));
  QVERIFY(!feeds(g->grammar, lead, "<tool_call>\n {"));
  QVERIFY(!feeds(g->grammar, lead, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}</"));
  QVERIFY(!feeds(g->grammar, lead, "<tool_cal!"));
  // Without the lead (after the trigger, in free text): the call starts at the newline.
  QVERIFY(feeds(g->grammar, "", "\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>", &complete));
  QVERIFY(complete);
  QVERIFY(!feeds(g->grammar, "", "{"));
  QCOMPARE(JsonMatcher(g->grammar, lead).next_bytes().count(), size_t{1});  // '<' only
}

void TestToolCalls::grammarNamedToolAndStrictness() {
  Result<ToolGrammar> only_now = tool_call_grammar({tool(kWeatherTool), tool(kNowTool)}, "now");
  QVERIFY2(only_now.is_ok(), only_now.error_message().c_str());
  QVERIFY(feeds(only_now->grammar, "", "\n{\"name\": \"now\""));
  QVERIFY(!feeds(only_now->grammar, "", "\n{\"name\": \"get_weather\""));
  Result<ToolGrammar> missing = tool_call_grammar({tool(kNowTool)}, "get_weather");
  QVERIFY(!missing.is_ok());
  QVERIFY(missing.error_message().find("no tool is named 'get_weather'") != std::string::npos);

  ToolDefinition patterned = tool(kNowTool);
  patterned.name = "lookup";
  patterned.parameters_json = R"({"type": "object", "properties": {"id": {"type": "integer", "multipleOf": 5}}})";
  Result<ToolGrammar> loose = tool_call_grammar({patterned});
  QVERIFY2(loose.is_ok(), loose.error_message().c_str());
  QCOMPARE(loose->loosened.size(), size_t{1});
  QVERIFY(loose->loosened[0].find("lookup") != std::string::npos);
  QVERIFY(loose->loosened[0].find("'multipleOf' is not supported") != std::string::npos);
  QVERIFY(feeds(loose->grammar, "", "\n{\"name\": \"lookup\", \"arguments\": {\"anything\": [1, 2]}}\n</tool_call>"));
  QVERIFY(!feeds(loose->grammar, "", "\n{\"name\": \"lookup\", \"arguments\": ["));  // still an object
  patterned.is_strict = true;
  Result<ToolGrammar> strict = tool_call_grammar({patterned});
  QVERIFY(!strict.is_ok());
  QVERIFY(strict.error_message().find("strict tool 'lookup'") != std::string::npos);
}

void TestToolCalls::grammarFollowsRefsInParameters() {
  ToolDefinition t;
  t.name = "add_people";
  t.parameters_json = R"({"type": "object", "$defs": {"P": {"type": "object", "properties": {"age": {"type": "integer",
      "minimum": 0}, "next": {"$ref": "#/$defs/P"}}, "required": ["age"]}},
      "properties": {"people": {"type": "array", "items": {"$ref": "#/$defs/P"}},
      "note": {"const": {"$ref": "#/not/a/schema"}}}, "required": ["people"]})";
  Result<ToolGrammar> g = tool_call_grammar({tool(kNowTool), t});
  QVERIFY2(g.is_ok(), g.error_message().c_str());
  bool complete = false;
  QVERIFY(feeds(g->grammar, "",
                "\n{\"name\": \"add_people\", \"arguments\": {\"people\": [{\"age\": 3, \"next\": {\"age\": 4}}], "
                "\"note\": {\"$ref\":\"#/not/a/schema\"}}}\n</tool_call>",  // a const: compact
                &complete));
  QVERIFY(complete);
  QVERIFY(!feeds(g->grammar, "", "\n{\"name\": \"add_people\", \"arguments\": {\"people\": [{\"age\": -1"));
  QVERIFY(
      !feeds(g->grammar, "", "\n{\"name\": \"add_people\", \"arguments\": {\"people\": [{\"next\": {\"age\": 1}, \"x"));
}

void TestToolCalls::splitFindsCallsAndText() {
  ToolReply r = split_tool_calls("The capital is Paris.");
  QCOMPARE(r.content, std::string("The capital is Paris."));
  QVERIFY(r.calls.empty());

  r = split_tool_calls(
      "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\", \"city\": \"Paris\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>");
  QCOMPARE(r.content, std::string("Checking."));
  QCOMPARE(r.calls.size(), size_t{2});
  QCOMPARE(r.calls[0].name, std::string("get_weather"));
  QCOMPARE(r.calls[0].arguments, std::string(R"({"unit":"c","city":"Paris"})"));  // order kept, compact
  QCOMPARE(r.calls[1].arguments, std::string("{}"));

  // Only calls: no text at all.
  r = split_tool_calls("<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n");
  QCOMPARE(r.content, std::string());
  QCOMPARE(r.calls.size(), size_t{1});

  // A block that is not a call stays as written; so does one cut off.
  r = split_tool_calls("a <tool_call>not json</tool_call> b");
  QCOMPARE(r.content, std::string("a <tool_call>not json</tool_call> b"));
  QVERIFY(r.calls.empty());
  r = split_tool_calls("<tool_call>{\"arguments\": {}}</tool_call>");
  QVERIFY(r.calls.empty());
  r = split_tool_calls("x <tool_call>\n{\"name\": \"now\", \"argu");
  QCOMPARE(r.content, std::string("x <tool_call>\n{\"name\": \"now\", \"argu"));
  // Cut inside its arguments (max_tokens), it is a call with the arguments written so far.
  r = split_tool_calls("x <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"New Yo");
  QCOMPARE(r.content, std::string("x"));
  QCOMPARE(r.calls.size(), size_t{1});
  QCOMPARE(r.calls[0].arguments, std::string("{\"city\":\"New Yo"));
  // The arguments' bytes as the model wrote them, only the white space between tokens dropped.
  r = split_tool_calls(
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"n\": 1.50, \"s\": \"a \\\" } b\", \"e\": "
      "\"\\u00e9\"}}</tool_call>");
  QCOMPARE(r.calls.size(), size_t{1});
  QCOMPARE(r.calls[0].arguments, std::string("{\"n\":1.50,\"s\":\"a \\\" } b\",\"e\":\"\\u00e9\"}"));
  // Other key orders are calls when the whole block parses.
  r = split_tool_calls("<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"f\"}</tool_call>");
  QCOMPARE(r.calls.size(), size_t{1});
  QCOMPARE(r.calls[0].arguments, std::string("{\"a\":1}"));
  // A list nesting past what a held call can is text (parse_call's writer recurses); an object
  // of arguments is read without recursing, however deep.
  const std::string deep =
      "<tool_call>{\"name\": \"f\", \"arguments\": " + std::string(200, '[') + std::string(200, ']') + "}</tool_call>";
  QVERIFY(split_tool_calls(deep).calls.empty());
  std::string deep_object;
  for (int i = 0; i < 100000; ++i) deep_object += "{\"a\": ";
  deep_object += "1" + std::string(100000, '}');
  r = split_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": " + deep_object + "}</tool_call>");
  QCOMPARE(r.calls.size(), size_t{1});
  QCOMPARE(r.calls[0].arguments.size(), deep_object.size() - 100000);  // each ": " lost its space
  QCOMPARE(json_nesting_depth(R"({"a": [1, {"b": "[[[{"}]})"), 3);
  // Arguments some models write as a string of JSON are taken as that text.
  r = split_tool_calls("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>");
  QCOMPARE(r.calls.size(), size_t{1});
  QCOMPARE(r.calls[0].arguments, std::string("{\"a\": 1}"));
}

void TestToolCalls::splitWhileStreamingOnlyGrows() {
  const std::string reply =
      "Let me check <b>that</b>.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\nDone <tool";
  const ToolReply final_reply = split_tool_calls(reply);
  QCOMPARE(final_reply.calls.size(), size_t{2});
  QCOMPARE(final_reply.content, std::string("Let me check <b>that</b>.\n\n\nDone <tool"));
  std::string last_content;
  std::vector<ParsedToolCall> last_calls;
  std::vector<std::string> oslo_arguments_seen;  // each length the Oslo call's arguments had
  for (size_t n = 0; n <= reply.size(); ++n) {
    const ToolReply part = split_tool_calls(std::string_view(reply).substr(0, n), /*is_streaming=*/true);
    QVERIFY2(part.content.rfind(last_content, 0) == 0, ("text shrank at byte " + std::to_string(n)).c_str());
    QVERIFY(final_reply.content.rfind(part.content, 0) == 0);
    QVERIFY(part.calls.size() >= last_calls.size());
    QVERIFY(part.calls.size() <= final_reply.calls.size());
    QVERIFY(part.content.find("<tool_call") == std::string::npos);  // a marker never leaks as text
    // Each call's name is whole from the first; its arguments only grow, to the final ones.
    for (size_t i = 0; i < part.calls.size(); ++i) {
      QCOMPARE(part.calls[i].name, final_reply.calls[i].name);
      QVERIFY(final_reply.calls[i].arguments.rfind(part.calls[i].arguments, 0) == 0);
      if (i < last_calls.size()) QVERIFY(part.calls[i].arguments.rfind(last_calls[i].arguments, 0) == 0);
    }
    if (part.calls.size() == 2 &&
        (oslo_arguments_seen.empty() || oslo_arguments_seen.back() != part.calls[1].arguments)) {
      oslo_arguments_seen.push_back(part.calls[1].arguments);
    }
    last_content = part.content;
    last_calls = part.calls;
  }
  QCOMPARE(last_calls.size(), size_t{2});
  QCOMPARE(oslo_arguments_seen.front(), std::string("{"));  // announced as its arguments begin
  QCOMPARE(oslo_arguments_seen.back(), std::string("{\"city\":\"Oslo\"}"));
  QVERIFY(oslo_arguments_seen.size() > 8);
}

QTEST_GUILESS_MAIN(TestToolCalls)
#include "test_tool_calls.moc"
