// Mistral's, Granite's, gpt-oss's and Hermes's chat templates and tool calls without a model: Nemo's, Small 3.2's and
// Devstral's formats read from their template text, conversations rendered as jinja2 renders
// those templates, Granite 3.3's and gpt-oss's (the expected texts below are jinja2's,
// scripts/templates-vs-jinja.py's renderer, on llama.cpp's copies of the templates), what the
// templates refuse, the call grammars, and replies split into text and calls, also while
// streaming.
#include "chat/harmony_template.h"
#include "chat/hermes_template.h"
#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/clock_text.h"
#include "iwb/engine/sampling/json_grammar.h"

#include <QtTest>

#include <nlohmann/json.hpp>

using namespace iwb;

class TestToolFormats : public QObject {
  Q_OBJECT

 private slots:
  void formatIsReadFromTheTemplate();
  void defaultSystemMessageWithTodaysDate();
  void nemoRendersAsItsTemplateDoes();
  void small32AndDevstralRenderAsTheirTemplatesDo();
  void refusalsAreTheTemplates();
  void namedCallsAreHeldToTheTools();
  void nemoListIsHeldToTheTools();
  void splitNamedCalls();
  void splitNemoList();
  void callIds();
  void graniteRendersToolsAsItsTemplateDoes();
  void graniteListIsHeldAndSplit();
  void harmonyRendersToolsAsItsTemplateDoes();
  void harmonyTypescriptTypes();
  void harmonyCallsAreHeldAndSplit();
  void hermesRendersToolsAsItsTemplateDoes();
  void templateSummaryNamesTheToolFormat();
};

namespace {

const std::string kNow =
    "{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {}}}}";
const std::string kWeather =
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city, "
    "\xc2\xb0"
    "C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "
    "{\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}";

// The markers each release's template has (the parts detection reads).
const char* kNemoTemplate =
    "{%- if tools is not none and (message == user_messages[-1]) %}{{- \"[AVAILABLE_TOOLS][\" }}"
    "{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}{{- \"[TOOL_CALLS][\" }}";
const char* kSmall32Template =
    "{{- '[SYSTEM_PROMPT]' + system_prompt + '[/SYSTEM_PROMPT]' }}{%- if tools is not none and (message == "
    "user_messages[-1]) %}{{- '[INST]' }}{{- '[TOOL_CALLS]' + tool_call.function.name }}{{- '[CALL_ID]' + "
    "tool_call.id }}{{- '[ARGS]' + tool_call['function']['arguments']|tojson }}";
const char* kDevstralTemplate =
    "{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{%- set tools_description = "
    "\"[AVAILABLE_TOOLS]\" + (tools | tojson) + \"[/AVAILABLE_TOOLS]\" %}{{- '[INST]' + message['content'] + "
    "'[/INST]' }}{{- \"[TOOL_CALLS]\" + tool['function']['name'] + \"[ARGS]\" + arguments }}";
const char* kMistral7bTemplate =
    "{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}{{- \"[AVAILABLE_TOOLS] [\" }}";

ChatToolCall call(std::string id, std::string name, std::string arguments) {
  return {std::move(id), std::move(name), std::move(arguments)};
}

ChatRenderOptions options_for(const char* jinja, std::vector<std::string> tools = {}) {
  ChatRenderOptions o;
  o.bos_text = "<s>";
  o.eos_text = "</s>";
  o.mistral = chat_template_mistral_format(jinja);
  o.tools = std::move(tools);
  return o;
}

ToolDefinition definition(const std::string& whole_json) {
  const nlohmann::ordered_json t = nlohmann::ordered_json::parse(whole_json);
  return {t["function"]["name"].get<std::string>(), t["function"]["parameters"].dump(), false, t.dump()};
}

bool fits(const std::shared_ptr<const JsonGrammar>& g, const std::string& text) {
  JsonMatcher m(g);
  return m.feed(text) && m.is_complete();
}

}  // namespace

void TestToolFormats::formatIsReadFromTheTemplate() {
  using Calls = MistralFormat::Calls;
  QCOMPARE(detect_chat_template(kNemoTemplate), ChatTemplateFamily::Mistral);
  QCOMPARE(detect_chat_template(kSmall32Template), ChatTemplateFamily::Mistral);
  const std::optional<MistralFormat> nemo = chat_template_mistral_format(kNemoTemplate);
  QVERIFY(nemo && !nemo->has_system_prompt && nemo->calls == Calls::JsonList && !nemo->are_tools_after_system);
  const std::optional<MistralFormat> small = chat_template_mistral_format(kSmall32Template);
  QVERIFY(small && small->has_system_prompt && small->calls == Calls::NamedWithId && !small->are_tools_after_system);
  const std::optional<MistralFormat> devstral = chat_template_mistral_format(kDevstralTemplate);
  QVERIFY(devstral && devstral->has_system_prompt && devstral->calls == Calls::Named &&
          devstral->are_tools_after_system);
  // Mistral 7B's "[INST] " with spaces, and [INST] with neither marker: the first format, no tools.
  QVERIFY(!chat_template_mistral_format(kMistral7bTemplate));
  QVERIFY(!chat_template_mistral_format("{{ '[INST]' + content + '[/INST]' }}"));
  QVERIFY(!chat_template_has_tools(ChatTemplateFamily::Mistral, ChatRenderOptions{}));
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Mistral, options_for(kNemoTemplate)));
}

void TestToolFormats::defaultSystemMessageWithTodaysDate() {
  const char* jinja =
      "{%- set today = strftime_now(\"%Y-%m-%d\") %}\n{%- set default_system_message = \"You are \\\"M\\\". Today is "
      "\" + today + \".\nBe kind.\" + ' Tools:\\n' %}\n{{- bos_token }}";
  const std::string expected =
      "You are \"M\". Today is " + now_as_text("%Y-%m-%d", ClockZone::Local) + ".\nBe kind. Tools:\n";
  QCOMPARE(chat_template_default_system(jinja), expected);
  // An expression this reader cannot write gives no text rather than a wrong one.
  QCOMPARE(chat_template_default_system("{%- set default_system_message = 'a' + other %}"), std::string());
  QCOMPARE(chat_template_default_system("{%- set default_system_message = 'unclosed %}"), std::string());
}

void TestToolFormats::nemoRendersAsItsTemplateDoes() {
  const ChatRenderOptions o = options_for(kNemoTemplate, {kWeather, kNow});
  const std::vector<ChatMessage> turns = {
      {"user", "Weather in Paris and the time?"},
      {"assistant",
       "",
       {call("call00001", "get_weather", "{\"city\":\"Paris\",\"unit\":\"c\"}"), call("call00002", "now", "{}")}},
      {"tool", "{\"temp\": 21}", {}, "call00001"},
      {"tool", "12:00", {}, "call00002"},
      {"assistant",
       "21 \xc2\xb0"
       "C at noon."},
      {"user", "Thanks"}};
  QCOMPARE(render_chat(ChatTemplateFamily::Mistral, turns, o),
           std::string("<s>[INST]Weather in Paris and the time?[/INST][TOOL_CALLS][{\"name\": \"get_weather\", "
                       "\"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}, \"id\": \"call00001\"}, {\"name\": "
                       "\"now\", \"arguments\": {}, \"id\": \"call00002\"}]</s>[TOOL_RESULTS]{\"content\": {\"temp\": "
                       "21}, \"call_id\": \"call00001\"}[/TOOL_RESULTS][TOOL_RESULTS]{\"content\": 12:00, \"call_id\": "
                       "\"call00002\"}[/TOOL_RESULTS]21 \xc2\xb0"
                       "C at noon.</s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": "
                       "\"get_weather\", \"description\": \"Weather in a city, \xc2\xb0"
                       "C\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": "
                       "\"string\"}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, \"required\": [\"city\"]}}}, {\"type\": "
                       "\"function\", \"function\": {\"name\": \"now\", \"description\": \"The time\", \"parameters\": "
                       "{\"type\": \"object\", \"properties\": {}}}}][/AVAILABLE_TOOLS][INST]Thanks[/INST]"));
  // The system text joins the last user turn when that turn is the conversation's last message.
  QCOMPARE(render_chat(ChatTemplateFamily::Mistral, {{"system", "Be brief."}, {"user", "Hi"}},
                       options_for(kNemoTemplate, {kNow})),
           std::string("<s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"now\", "
                       "\"description\": \"The time\", \"parameters\": {\"type\": \"object\", \"properties\": "
                       "{}}}}][/AVAILABLE_TOOLS][INST]Be brief.\n\nHi[/INST]"));
  QCOMPARE(render_chat(ChatTemplateFamily::Mistral, {{"system", "S"}, {"user", "Hi"}, {"assistant", "Yo"}},
                       options_for(kNemoTemplate)),
           std::string("<s>[INST]Hi[/INST]Yo</s>"));
}

void TestToolFormats::small32AndDevstralRenderAsTheirTemplatesDo() {
  const std::vector<ChatMessage> turns = {{"system", "S"},
                                          {"user", "Hi"},
                                          {"assistant", "Let me look.", {call("call00003", "now", "{}")}},
                                          {"tool", "noon", {}, "call00003"}};
  QCOMPARE(render_chat(ChatTemplateFamily::Mistral, turns, options_for(kSmall32Template)),
           std::string("<s>[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST]Hi[/INST][TOOL_CALLS]now[CALL_ID]call00003[ARGS]{}</s>"
                       "[TOOL_RESULTS]call00003[TOOL_CONTENT]noon[/TOOL_RESULTS]"));
  QCOMPARE(render_chat(ChatTemplateFamily::Mistral, turns, options_for(kDevstralTemplate)),
           std::string("<s>[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST]Hi[/INST]Let me look.[TOOL_CALLS]now[ARGS]{}</s>"
                       "[TOOL_RESULTS]noon[/TOOL_RESULTS]"));
  const std::string tools =
      "[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"now\", "
      "\"description\": \"The time\", \"parameters\": {\"type\": \"object\", \"properties\": "
      "{}}}}][/AVAILABLE_TOOLS]";
  const std::vector<ChatMessage> hi = {{"system", "Be brief."}, {"user", "Hi"}};
  QCOMPARE(render_chat(ChatTemplateFamily::Mistral, hi, options_for(kSmall32Template, {kNow})),
           "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT]" + tools + "[INST]Hi[/INST]");
  QCOMPARE(render_chat(ChatTemplateFamily::Mistral, hi, options_for(kDevstralTemplate, {kNow})),
           "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT]" + tools + "[INST]Hi[/INST]");
  // Without a system message, the template's default text.
  ChatRenderOptions o = options_for(kSmall32Template);
  o.default_system = "You are Mistral Small 3.";
  QCOMPARE(render_chat(ChatTemplateFamily::Mistral, {{"user", "Hi"}}, o),
           std::string("<s>[SYSTEM_PROMPT]You are Mistral Small 3.[/SYSTEM_PROMPT][INST]Hi[/INST]"));
}

void TestToolFormats::refusalsAreTheTemplates() {
  const ChatRenderOptions nemo = options_for(kNemoTemplate), small = options_for(kSmall32Template);
  const ChatRenderOptions devstral = options_for(kDevstralTemplate);
  const std::vector<ChatMessage> short_id = {{"user", "Hi"}, {"assistant", "", {call("call_1", "now", "{}")}}};
  const std::vector<ChatMessage> twice = {{"user", "Hi"}, {"user", "Hello?"}};
  // A later system message: Small 3.2 writes it as [SYSTEM_PROMPT] (counted in the alternation).
  const std::vector<ChatMessage> late_system = {{"user", "Hi"}, {"system", "S"}, {"user", "Yo"}};
  const auto refusal = [](const std::vector<ChatMessage>& m, const ChatRenderOptions& o) {
    return chat_template_refusal(ChatTemplateFamily::Mistral, m, o).value_or("");
  };
  QVERIFY(refusal(short_id, nemo).find("ids of 9 letters and digits; this call's is 'call_1'") != std::string::npos);
  QVERIFY(refusal(short_id, small).find("'call_1'") != std::string::npos);
  QVERIFY(refusal(twice, nemo).find("must alternate user/assistant") != std::string::npos);
  QVERIFY(refusal(twice, small).find("must alternate") != std::string::npos);
  QVERIFY(refusal(late_system, nemo).find("one system message, the first") != std::string::npos);
  QVERIFY(!chat_template_refusal(ChatTemplateFamily::Mistral, late_system, small));  // [SYSTEM_PROMPT] there
  // Devstral's template (Unsloth's) checks nothing; a 9-character id of any letters passes.
  QVERIFY(!chat_template_refusal(ChatTemplateFamily::Mistral, short_id, devstral));
  QVERIFY(!chat_template_refusal(ChatTemplateFamily::Mistral, twice, devstral));
  const std::vector<ChatMessage> unicode_id = {{"user", "Hi"},
                                               {"assistant", "", {call("\xc3\xa9t\xc3\xa9-00001", "now", "{}")}}};
  QVERIFY(!chat_template_refusal(ChatTemplateFamily::Mistral, unicode_id, small));  // 9 characters, 11 bytes
}

void TestToolFormats::namedCallsAreHeldToTheTools() {
  Result<ToolGrammar> g = tool_call_grammar({definition(kWeather), definition(kNow)}, {}, ToolCallFormat::MistralNamed);
  QVERIFY(g.is_ok());
  QVERIFY(fits(g->grammar, "get_weather[ARGS]{\"city\": \"Paris\"}"));
  QVERIFY(fits(g->grammar, "now[CALL_ID]a1b2c3d4e[ARGS]{}"));
  QVERIFY(!fits(g->grammar, "get_weather[ARGS]{\"unit\": \"c\"}"));  // city is required
  QVERIFY(!fits(g->grammar, "now[CALL_ID]a1b2[ARGS]{}"));
  QVERIFY(!fits(g->grammar, "get_time[ARGS]{}"));
  Result<ToolGrammar> only =
      tool_call_grammar({definition(kWeather), definition(kNow)}, "now", ToolCallFormat::MistralNamed);
  QVERIFY(only.is_ok());
  QVERIFY(!fits(only->grammar, "get_weather[ARGS]{\"city\": \"Paris\"}"));
  QVERIFY(fits(only->grammar, "now[ARGS]{}"));
  const ToolCallSyntax syntax = tool_call_syntax(ToolCallFormat::MistralNamed);
  QCOMPARE(syntax.trigger, std::string("[TOOL_CALLS]"));
  QCOMPARE(syntax.separator, std::string());  // [TOOL_CALLS]a[ARGS]{}[TOOL_CALLS]b[ARGS]{}
  QVERIFY(syntax.allows_several && !syntax.is_trigger_at_start);
}

void TestToolFormats::nemoListIsHeldToTheTools() {
  const std::vector<ToolDefinition> tools = {definition(kWeather), definition(kNow)};
  Result<ToolGrammar> g = tool_call_grammar(tools, {}, ToolCallFormat::MistralList);
  QVERIFY(g.is_ok());
  QVERIFY(fits(g->grammar,
               "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1b2c3d4e\"}, "
               "{\"name\": \"now\", \"arguments\": {}}]"));
  QVERIFY(!fits(g->grammar, "[]"));                                                           // one call at least
  QVERIFY(!fits(g->grammar, "[{\"name\": \"now\", \"arguments\": {}, \"id\": \"short\"}]"));  // 9 characters
  QVERIFY(!fits(g->grammar, "{\"name\": \"now\", \"arguments\": {}}"));                       // a list
  Result<ToolGrammar> one = tool_call_grammar(tools, {}, ToolCallFormat::MistralList, /*allows_several=*/false);
  QVERIFY(one.is_ok());
  QVERIFY(fits(one->grammar, "[{\"name\": \"now\", \"arguments\": {}}]"));
  QVERIFY(!fits(one->grammar, "[{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"now\", \"arguments\": {}}]"));
  QVERIFY(!tool_call_syntax(ToolCallFormat::MistralList).allows_several);
}

void TestToolFormats::splitNamedCalls() {
  const std::string reply =
      "Let me look.[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Oslo\", \"unit\": \"c\"}"
      "[TOOL_CALLS]now[ARGS]{}";
  const ToolReply whole = split_tool_calls(reply, false, ToolCallFormat::MistralNamed);
  QCOMPARE(whole.content, std::string("Let me look."));
  QCOMPARE(whole.calls.size(), size_t{2});
  QCOMPARE(whole.calls[0].name, std::string("get_weather"));
  QCOMPARE(whole.calls[0].id, std::string("a1b2c3d4e"));
  QCOMPARE(whole.calls[0].arguments, std::string("{\"city\":\"Oslo\",\"unit\":\"c\"}"));
  QCOMPARE(whole.calls[1].name, std::string("now"));
  QCOMPARE(whole.calls[1].id, std::string());
  QCOMPARE(whole.calls[1].arguments, std::string("{}"));
  // While streaming the text and each call's arguments only grow, to what the whole reply gives.
  ToolReply last;
  for (size_t n = 0; n <= reply.size(); ++n) {
    const ToolReply part = split_tool_calls(std::string_view(reply).substr(0, n), true, ToolCallFormat::MistralNamed);
    QVERIFY(part.content.rfind(last.content, 0) == 0 && whole.content.rfind(part.content, 0) == 0);
    QVERIFY(part.content.find('[') == std::string::npos);  // no marker leaks as text
    QVERIFY(part.calls.size() >= last.calls.size() && part.calls.size() <= whole.calls.size());
    for (size_t i = 0; i < part.calls.size(); ++i) {
      QCOMPARE(part.calls[i].name, whole.calls[i].name);
      QVERIFY(whole.calls[i].arguments.rfind(part.calls[i].arguments, 0) == 0);
      if (i < last.calls.size()) QVERIFY(part.calls[i].arguments.rfind(last.calls[i].arguments, 0) == 0);
    }
    last = part;
  }
  // A marker without arguments is text in a finished reply.
  QCOMPARE(split_tool_calls("Hi[TOOL_CALLS]now", false, ToolCallFormat::MistralNamed).content,
           std::string("Hi[TOOL_CALLS]now"));
  QVERIFY(split_tool_calls("No calls.", false, ToolCallFormat::MistralNamed).calls.empty());
}

void TestToolFormats::splitNemoList() {
  const std::string reply =
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"a1b2c3d4e\"}, "
      "{\"name\": \"now\", \"arguments\": {}}]";
  const ToolReply whole = split_tool_calls(reply, false, ToolCallFormat::MistralList);
  QCOMPARE(whole.content, std::string());
  QCOMPARE(whole.calls.size(), size_t{2});
  QCOMPARE(whole.calls[0].id, std::string("a1b2c3d4e"));
  QCOMPARE(whole.calls[0].arguments, std::string("{\"city\":\"Oslo\"}"));
  QCOMPARE(whole.calls[1].name, std::string("now"));
  ToolReply last;
  for (size_t n = 0; n <= reply.size(); ++n) {
    const ToolReply part = split_tool_calls(std::string_view(reply).substr(0, n), true, ToolCallFormat::MistralList);
    QCOMPARE(part.content, std::string());
    QVERIFY(part.calls.size() >= last.calls.size() && part.calls.size() <= whole.calls.size());
    for (size_t i = 0; i < part.calls.size(); ++i) {
      QCOMPARE(part.calls[i].name, whole.calls[i].name);
      QVERIFY(whole.calls[i].arguments.rfind(part.calls[i].arguments, 0) == 0);
    }
    last = part;
  }
  QCOMPARE(last.calls.size(), size_t{2});
  QCOMPARE(last.calls[0].id, std::string("a1b2c3d4e"));
  // Another key order, read whole once finished; a list that is not calls stays text.
  const ToolReply reordered = split_tool_calls(
      "[TOOL_CALLS][{\"arguments\": {\"a\": 1}, \"id\": \"x\", \"name\": \"f\"}]", false, ToolCallFormat::MistralList);
  QCOMPARE(reordered.calls.size(), size_t{1});
  QCOMPARE(reordered.calls[0].arguments, std::string("{\"a\":1}"));
  QCOMPARE(reordered.calls[0].id, std::string("x"));
  QCOMPARE(split_tool_calls("[TOOL_CALLS][1, 2]", false, ToolCallFormat::MistralList).content,
           std::string("[TOOL_CALLS][1, 2]"));
  // Cut by max_tokens inside the second call: the first, whole, in any key order, is a call.
  const ToolReply cut = split_tool_calls("[TOOL_CALLS][{\"arguments\": {\"a\": 1.50}, \"name\": \"f\"}, {\"argu", false,
                                         ToolCallFormat::MistralList);
  QCOMPARE(cut.calls.size(), size_t{1});
  QCOMPARE(cut.calls[0].arguments, std::string("{\"a\":1.5}"));  // parsed: not the name-first form
  const ToolReply as_written = split_tool_calls("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1.50}}]", false,
                                                ToolCallFormat::MistralList);
  QCOMPARE(as_written.calls[0].arguments, std::string("{\"a\":1.50}"));  // as the grammar wrote it
}

void TestToolFormats::callIds() {
  for (const ToolCallFormat f : {ToolCallFormat::MistralList, ToolCallFormat::MistralNamed}) {
    const std::string id = new_tool_call_id(f);
    QCOMPARE(id.size(), size_t{9});
    QVERIFY(std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }));
    QVERIFY(new_tool_call_id(f) != id);
  }
  const std::string qwen = new_tool_call_id(ToolCallFormat::Hermes);
  QVERIFY(qwen.rfind("call_", 0) == 0);
  QCOMPARE(qwen.size(), size_t{37});
}

void TestToolFormats::graniteRendersToolsAsItsTemplateDoes() {
  ChatRenderOptions o;
  o.tools = {kNow};
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Granite, o));
  QCOMPARE(
      render_chat(ChatTemplateFamily::Granite, {{"system", "Be brief."}, {"user", "Hi"}}, o),
      std::string("<|start_of_role|>system<|end_of_role|>Be brief.<|end_of_text|>\n<|start_of_role|>"
                  "available_tools<|end_of_role|>[\n    {\n        \"type\": \"function\",\n        "
                  "\"function\": {\n            \"name\": \"now\",\n            \"description\": \"The "
                  "time\",\n            \"parameters\": {\n                \"type\": \"object\",\n        "
                  "        \"properties\": {}\n            }\n        }\n    }\n]<|end_of_text|>\n"
                  "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"));
  // Without a system message: the template's, with today's date; a call is not written back.
  const std::string today = now_as_text("%B %d, %Y", ClockZone::Local);
  QCOMPARE(
      render_chat(ChatTemplateFamily::Granite,
                  {{"user", "Hi"}, {"assistant", "Let me look.", {call("c", "now", "{}")}}, {"tool", "noon", {}, "c"}},
                  ChatRenderOptions{}),
      "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: " + today +
          ". You are Granite, developed by IBM. You are a helpful AI assistant.<|end_of_text|>\n<|start_of_role|>"
          "user<|end_of_role|>Hi<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Let me "
          "look.<|end_of_text|>\n<|start_of_role|>tool<|end_of_role|>noon<|end_of_text|>\n<|start_of_role|>"
          "assistant<|end_of_role|>");
  // With tools and no system message, its instructions for <|tool_call|>.
  QVERIFY(render_chat(ChatTemplateFamily::Granite, {{"user", "Hi"}}, o)
              .find("developed by IBM. You are a helpful assistant with access to the following tools. When a tool is "
                    "required to answer the user's query, respond only with <|tool_call|> followed by a JSON list of "
                    "tools used.") != std::string::npos);
}

void TestToolFormats::graniteListIsHeldAndSplit() {
  Result<ToolGrammar> g = tool_call_grammar({definition(kWeather), definition(kNow)}, {}, ToolCallFormat::GraniteList);
  QVERIFY(g.is_ok());
  QVERIFY(fits(g->grammar,
               "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": \"now\", "
               "\"arguments\": {}}]"));
  QVERIFY(!fits(g->grammar, "[{\"name\": \"now\", \"arguments\": {}, \"id\": \"a1b2c3d4e\"}]"));  // no ids
  const ToolCallSyntax syntax = tool_call_syntax(ToolCallFormat::GraniteList);
  QCOMPARE(syntax.trigger, std::string("<|tool_call|>"));
  QVERIFY(!syntax.allows_several);
  const std::string reply = "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]";
  const ToolReply whole = split_tool_calls(reply, false, ToolCallFormat::GraniteList);
  QCOMPARE(whole.content, std::string());
  QCOMPARE(whole.calls.size(), size_t{1});
  QCOMPARE(whole.calls[0].arguments, std::string("{\"city\":\"Oslo\"}"));
  for (size_t n = 0; n <= reply.size(); ++n) {
    const ToolReply part = split_tool_calls(std::string_view(reply).substr(0, n), true, ToolCallFormat::GraniteList);
    QCOMPARE(part.content, std::string());  // the marker, whole or begun, never shows as text
    QVERIFY(part.calls.size() <= 1);
    if (!part.calls.empty()) QVERIFY(whole.calls[0].arguments.rfind(part.calls[0].arguments, 0) == 0);
  }
  QVERIFY(new_tool_call_id(ToolCallFormat::GraniteList).rfind("call_", 0) == 0);
}

void TestToolFormats::harmonyRendersToolsAsItsTemplateDoes() {
  ChatRenderOptions o;
  o.tools = {kNow};
  o.harmony_date = "2026-12-06";
  const std::vector<ChatMessage> turns = {{"system", "S"},
                                          {"user", "Hi"},
                                          {"assistant", "Let me look.", {call("c", "now", "{}")}},
                                          {"tool", "noon", {}, "c"}};
  QCOMPARE(
      render_chat(ChatTemplateFamily::Harmony, turns, o),
      std::string("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                  "Knowledge cutoff: 2024-06\nCurrent date: 2026-12-06\n\nReasoning: medium\n\n# Valid channels: "
                  "analysis, commentary, final. Channel must be included for every message.\nCalls to these "
                  "tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># "
                  "Instructions\n\nS\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n// The time\ntype now = "
                  "() => any;\n\n} // namespace functions<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant"
                  "<|channel|>analysis<|message|>Let me look.<|end|><|start|>assistant to=functions.now<|channel|>"
                  "commentary json<|message|>{}<|call|><|start|>functions.now to=assistant<|channel|>commentary"
                  "<|message|>\"noon\"<|end|><|start|>assistant"));
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Harmony, o));
  QCOMPARE(
      chat_template_harmony_date("{{- \"<|start|>system\" }}{{- \"Current date: \" + strftime_now(\"%Y-%m-%d\") }}"),
      now_as_text("%Y-%m-%d", ClockZone::Local));
  QCOMPARE(chat_template_harmony_date("{{- '<|start|>system<|message|>' }}"), std::string());
  // What the template refuses, or would drop.
  const auto refusal = [](const std::vector<ChatMessage>& m) {
    return chat_template_refusal(ChatTemplateFamily::Harmony, m, ChatRenderOptions{}).value_or("");
  };
  QVERIFY(refusal({{"user", "Hi"}, {"tool", "noon", {}, "c"}})
              .find("needs an earlier assistant message with a tool call") != std::string::npos);
  QVERIFY(refusal({{"user", "Hi"}, {"assistant", "", {call("a", "now", "{}"), call("b", "now", "{}")}}})
              .find("one tool call per assistant message") != std::string::npos);
  QVERIFY(refusal({{"user", "Hi"}, {"assistant", "<|channel|>final<|message|>x"}}).find("<|channel|>") !=
          std::string::npos);
  QVERIFY(!chat_template_refusal(ChatTemplateFamily::Harmony, turns, o));
}

// Expected texts: jinja2 rendering render_typescript_type (scripts/template_cases.py's SEARCH tool).
void TestToolFormats::harmonyTypescriptTypes() {
  QCOMPARE(detail::harmony_typescript_type("{\"type\": \"string\", \"enum\": [\"new\", \"old\"]}"),
           std::string("\"new\" | \"old\""));
  QCOMPARE(detail::harmony_typescript_type("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}}"),
           std::string("number[]"));
  QCOMPARE(detail::harmony_typescript_type("{\"type\": \"array\"}"), std::string("any[]"));
  QCOMPARE(detail::harmony_typescript_type("{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": "
                                           "{\"lo\": {\"type\": \"number\"}}}}"),
           std::string("{\nlo?: \n                number}[]"));
  QCOMPARE(detail::harmony_typescript_type(
               "{\"type\": \"object\", \"required\": [\"field\"], \"properties\": {\"field\": "
               "{\"type\": \"string\"}, \"exact\": {\"type\": \"boolean\", \"nullable\": true}}}"),
           std::string("{\nfield: \n                string, exact?: \n                boolean}"));
  QCOMPARE(
      detail::harmony_typescript_type("{\"oneOf\": [{\"type\": \"string\", \"description\": \"a date\"}, {\"type\": "
                                      "\"integer\", \"default\": 0}]}"),
      std::string("string// a date | \nnumber                    // default: 0"));
  QCOMPARE(detail::harmony_typescript_type("{\"type\": [\"string\", \"null\"]}"), std::string("string | null"));
  QCOMPARE(detail::harmony_typescript_type("{\"type\": \"string\", \"nullable\": true}"), std::string("string | null"));
  QCOMPARE(detail::harmony_typescript_type("{\"enum\": [\"c\", \"f\"]}"), std::string("any"));  // no type: any
  QCOMPARE(detail::harmony_typescript_type("{\"type\": \"object\"}"), std::string("object"));
}

void TestToolFormats::harmonyCallsAreHeldAndSplit() {
  Result<ToolGrammar> g = tool_call_grammar({definition(kWeather), definition(kNow)}, {}, ToolCallFormat::Harmony);
  QVERIFY(g.is_ok());
  // After the trigger " to=functions.": the name, the header's rest as gpt-oss writes it, the arguments.
  QVERIFY(fits(g->grammar, "get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}"));
  QVERIFY(fits(g->grammar, "get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}"));
  QVERIFY(fits(g->grammar, "now<|message|>{}"));
  QVERIFY(!fits(g->grammar, "get_weather<|message|>{}"));  // city is required
  QVERIFY(!fits(g->grammar, "get_time<|message|>{}"));
  const ToolCallSyntax syntax = tool_call_syntax(ToolCallFormat::Harmony);
  QCOMPARE(syntax.trigger, std::string(" to=functions."));
  QVERIFY(!syntax.allows_several);  // a call ends the turn (<|call|>)

  const std::string reply =
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}";
  const ToolReply whole = split_tool_calls(reply, false, ToolCallFormat::Harmony);
  QCOMPARE(whole.calls.size(), size_t{1});
  QCOMPARE(whole.calls[0].name, std::string("get_weather"));
  QCOMPARE(whole.calls[0].arguments, std::string("{\"city\":\"Oslo\"}"));
  // The call's header and arguments are out of the text; its channels are read from the rest.
  QCOMPARE(whole.content, std::string("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
                                      "<|channel|>commentary"));
  ToolReply last;
  for (size_t n = 0; n <= reply.size(); ++n) {
    const ToolReply part = split_tool_calls(std::string_view(reply).substr(0, n), true, ToolCallFormat::Harmony);
    QVERIFY(part.content.rfind(last.content, 0) == 0 && whole.content.rfind(part.content, 0) == 0);
    QVERIFY(part.content.find(" to=") == std::string::npos);
    if (!part.calls.empty()) QVERIFY(whole.calls[0].arguments.rfind(part.calls[0].arguments, 0) == 0);
    last = part;
  }
  // The recipient before the channel, as the template writes past calls (and a forced call opens).
  const ToolReply forced =
      split_tool_calls(" to=functions.now<|channel|>commentary json<|message|>{}", false, ToolCallFormat::Harmony);
  QCOMPARE(forced.calls.size(), size_t{1});
  QCOMPARE(forced.content, std::string());
  // A recipient that never reaches its arguments is text as written.
  QCOMPARE(split_tool_calls("I send it to=functions.now later", false, ToolCallFormat::Harmony).content,
           std::string("I send it to=functions.now later"));
}

// Hermes 2 Pro's and Hermes 3's tool-use template (jinja2's texts).
void TestToolFormats::hermesRendersToolsAsItsTemplateDoes() {
  const char* jinja =
      "{{- '<|im_start|>system\n' }}{{- \"You are a function calling AI model. You are provided ...\" }}";
  QCOMPARE(detect_chat_template(jinja), ChatTemplateFamily::Hermes);
  QCOMPARE(chat_template_family_from_name("hermes"), std::optional<ChatTemplateFamily>(ChatTemplateFamily::Hermes));
  ChatRenderOptions o;
  o.bos_text = "<s>";
  o.tools = {kNow};
  o.add_generation_prompt = false;
  QVERIFY(chat_template_has_tools(ChatTemplateFamily::Hermes, o));
  const std::vector<ChatMessage> turns = {
      {"user", "Time?"},
      {"assistant", "", {call("a", "now", "{}"), call("b", "now", "{\"tz\":\"UTC\"}")}},
      {"tool", "noon", {}, "a"},
      {"tool", "12:00", {}, "b"},
      {"assistant", "Noon."}};
  const std::string prompt = render_chat(ChatTemplateFamily::Hermes, turns, o);
  QVERIFY(prompt.rfind("<s><|im_start|>system\nYou are a function calling AI model. You are provided with function "
                       "signatures within <tools></tools> XML tags.",
                       0) == 0);
  const std::string tail =
      "<tools> {\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"now() - The time\n\n\", "
      "\"parameters\": {}} </tools>Use the following pydantic model json schema for each tool call you will make: "
      "{\"properties\": {\"name\": {\"title\": \"Name\", \"type\": \"string\"}, \"arguments\": {\"title\": "
      "\"Arguments\", \"type\": \"object\"}}, \"required\": [\"name\", \"arguments\"], \"title\": \"FunctionCall\", "
      "\"type\": \"object\"}}\nFor each function call return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags as follows:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-dict>}\n</tool_call><|im_end|>\n<|im_start|>user\nTime?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n"
      "{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {\"tz\": "
      "\"UTC\"}}\n</tool_call><|im_end|>\n<|im_start|>tool\n<tool_response>\nnoon\n</tool_response>\n<tool_response>\n"
      "12:00\n</tool_response>\n<|im_end|><|im_start|>assistant\nNoon.<|im_end|>\n";
  QCOMPARE(prompt.substr(prompt.find("<tools> ")), tail);
  // json_to_python_type as jinja2 runs it (an array's items and a missing type read as "Union[]").
  QCOMPARE(detail::hermes_python_type("{\"type\": \"string\"}"), std::string("str"));
  QCOMPARE(detail::hermes_python_type("{\"type\": \"integer\"}"), std::string("int"));
  QCOMPARE(detail::hermes_python_type("{\"type\": \"array\", \"items\": {\"type\": \"string\"}}"),
           std::string("list[Union[]]"));
  QCOMPARE(detail::hermes_python_type("{\"enum\": [\"c\", \"f\"]}"), std::string("Union[]"));
  QCOMPARE(detail::hermes_python_type("{\"type\": \"object\"}"), std::string("dict"));
  QCOMPARE(detail::hermes_python_type("{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}"),
           std::string("dict[str, int]"));
  QCOMPARE(detail::hermes_python_type("{\"type\": [\"string\", \"integer\"]}"), std::string("Union[str,int]"));
  // The Qwen-style calls are read as Qwen's are.
  QCOMPARE(tool_call_syntax(ToolCallFormat::Hermes).trigger, std::string("<tool_call>"));
}

// What `iwb serve` logs of a template: its family and how tools are written with it.
void TestToolFormats::templateSummaryNamesTheToolFormat() {
  QCOMPARE(chat_template_summary(kSmall32Template),
           std::string("mistral; tools: [TOOL_CALLS]name[ARGS]{...} (Mistral Small 3.2, Devstral)"));
  QCOMPARE(chat_template_summary(kNemoTemplate),
           std::string("mistral; tools: [TOOL_CALLS] and a JSON list with ids (Mistral Nemo)"));
  QCOMPARE(chat_template_summary(kMistral7bTemplate), std::string("mistral; no tool format"));
  QCOMPARE(chat_template_summary("{{ '<start_of_turn>' }}"), std::string("gemma; no tool format"));
  QCOMPARE(chat_template_summary("", ChatTemplateFamily::Granite),
           std::string("granite; tools: <|tool_call|> and a JSON list (Granite 3.x)"));
  QCOMPARE(chat_template_summary(""), std::string("plain (the model has no chat template); no tool format"));
}

QTEST_GUILESS_MAIN(TestToolFormats)
#include "test_tool_formats.moc"
