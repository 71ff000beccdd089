// The server's parts without HTTP: request bodies read into values (and every kind of bad
// body refused with OpenAI's error shape), the Prometheus exposition of the metrics, the
// engine's log-probabilities, and EngineLoop serving a generated llama model: tokens routed to
// their channels, a request aborted mid-generation frees its KV blocks, a prompt that can
// never fit refused with the engine's reason, all or none of a submission queued.
#include "../engine/tiny_models.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "serve/completion_session.h"
#include "serve/openai_request.h"
#include "serve/openai_tools.h"

#include "iwb/engine/serve/engine_loop.h"
#include "iwb/engine/serve/http_server.h"
#include "iwb/engine/serve/serve_metrics.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <set>

using namespace iwb;
using namespace iwb::serve;
using json = nlohmann::json;

namespace {

ApiError chat_error(const std::string& body) {
  std::variant<json, ApiError> parsed = parse_body(body);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) return *e;
  std::variant<ChatCompletionRequest, ApiError> read = read_chat_request(std::get<json>(parsed), SamplingParams{}, {});
  if (const ApiError* e = std::get_if<ApiError>(&read)) return *e;
  return ApiError{0, "accepted", "", "", ""};
}

// Events of one submission until every request has finished (or `limit` passes).
struct Collected {
  std::vector<std::vector<TokenEvent>> tokens;
  std::vector<RequestFinished> finished;
};
Collected collect(ResponseChannel& channel, size_t num_requests,
                  std::chrono::seconds limit = std::chrono::seconds(60)) {
  Collected c;
  c.tokens.resize(num_requests);
  c.finished.resize(num_requests);
  size_t num_finished = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (num_finished < num_requests && std::chrono::steady_clock::now() < deadline) {
    for (ServeEvent& e : channel.take(std::chrono::milliseconds(50))) {
      if (auto* t = std::get_if<TokenEvent>(&e.event)) {
        c.tokens[e.index].push_back(*t);
      } else {
        c.finished[e.index] = std::get<RequestFinished>(e.event);
        ++num_finished;
      }
    }
  }
  return c;
}

}  // namespace

class TestServeCore : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;
  std::string m_model;

  GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_new) const {
    GenerationRequest r;
    r.prompt_tokens = std::move(prompt);
    r.max_new_tokens = max_new;
    r.sampling.temperature = 0.0f;
    r.stop_at_end_of_generation = false;
    return r;
  }

 private slots:
  void initTestCase() {
    test::TinyModelSpec spec;
    spec.context = 512;
    m_model = m_tmp.filePath("tiny.gguf").toStdString();
    QVERIFY(test::write_tiny_model(spec, m_model).is_ok());
  }

  // A harmony reply (control tokens rendered, as the route asks for a harmony chat): streamed
  // as `reasoning_content` and `content` deltas with no marker in either; the whole body the same.
  void chatSessionSendsReasoningApart() {
    auto file = gguf::GgufFile::open(m_model);
    QVERIFY(file);
    auto tok = tokenizer::Tokenizer::from_gguf(**file);
    QVERIFY(tok);
    auto model = std::make_shared<ServedModel>(ServedModel{"m", {}, *tok, {}, 512, false, {}, {}});
    const std::vector<std::string> pieces = {"<|channel|>", "analysis",    "<|message|>", "Think",     " <",
                                             "b> hard.",    "<|end|>",     "<|start|>",   "assistant", "<|channel|>",
                                             "final",       "<|message|>", "Forty",       "-two <"};
    for (const bool is_stream : {true, false}) {
      CompletionParams params;
      params.is_stream = is_stream;
      CompletionSession session(CompletionKind::Chat, model, params, {5});
      std::vector<ServeEvent> events;
      for (const std::string& p : pieces) events.push_back({0, TokenEvent{1, 7, p}});
      RequestFinished done;
      done.num_generated_tokens = static_cast<int32_t>(pieces.size());
      events.push_back({0, done});
      std::string sent;
      for (ServeEvent& e : events) sent += session.add({std::move(e)});
      if (!is_stream) {
        const json body = json::parse(session.finish_text());
        const json& message = body["choices"][0]["message"];
        QCOMPARE(message["reasoning_content"].get<std::string>(), std::string("Think <b> hard."));
        QCOMPARE(message["content"].get<std::string>(), std::string("Forty-two <"));
        continue;
      }
      std::string reasoning, content;
      for (size_t at = sent.find("data: "); at != std::string::npos; at = sent.find("data: ", at + 1)) {
        const json chunk = json::parse(sent.substr(at + 6, sent.find("\n\n", at) - at - 6));
        const json& delta = chunk["choices"][0]["delta"];
        if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
        if (delta.contains("content")) content += delta["content"].get<std::string>();
      }
      QCOMPARE(reasoning, std::string("Think <b> hard."));
      QCOMPARE(content, std::string("Forty-two <"));  // the held-back "<" arrives at the end
    }
  }

  // GLM-4.7's prompt opens the reply's think block (DeepSeek V3.1's with thinking on too): the
  // reply's text up to </think> is its reasoning, streamed or whole, and the calls after it are
  // read from the answer (Kimi K2 opens its think block itself, and its calls carry their ids).
  void chatSessionReadsAReplyWhosePromptOpenedThinking() {
    auto file = gguf::GgufFile::open(m_model);
    QVERIFY(file);
    auto tok = tokenizer::Tokenizer::from_gguf(**file);
    QVERIFY(tok);
    auto model = std::make_shared<ServedModel>(ServedModel{"m", {}, *tok, {}, 512, false, {}, {}});
    struct Case {
      ToolCallFormat format;
      bool is_in_reasoning;
      std::vector<std::string> pieces;
      std::string id;  // the call's id when the model writes one
    };
    const std::vector<Case> cases = {
        {ToolCallFormat::Glm47Xml,
         true,
         {"Check", " the clock.</th", "ink>On it.", "<tool_call>now", "</tool_call>"},
         ""},
        {ToolCallFormat::DeepSeekV31,
         true,
         {"Check", " the clock.</th", "ink>On it.", "<｜tool▁calls▁begin｜><｜tool▁call▁be", "gin｜>now<｜tool▁sep｜>{",
          "}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
         ""},
        {ToolCallFormat::KimiK2,
         false,
         {"<think>Check", " the clock.</th", "ink>On it.",
          "<|tool_calls_section_begin|><|tool_call_begin|>functions.no", "w:0<|tool_call_argument_begin|>{",
          "}<|tool_call_end|><|tool_calls_section_end|>"},
         "functions.now:0"},
        {ToolCallFormat::Gemma4,  // its thought channel, a call with a <|"|> string
         false,
         {"<|channel>thought\nCheck the clock.", "<channel|>On it.<|tool_call>call:now{tz:<|\"|>U", "TC<|\"|>}"},
         ""}};
    for (const Case& c : cases) {
      for (const bool is_stream : {true, false}) {
        CompletionParams params;
        params.is_stream = is_stream;
        params.is_reply_in_reasoning = c.is_in_reasoning;
        params.tool_format = c.format;
        CompletionSession session(CompletionKind::Chat, model, params, {5});
        std::string sent;
        for (const std::string& p : c.pieces) sent += session.add({{0, TokenEvent{1, 7, p}}});
        sent += session.add({{0, RequestFinished{}}});
        std::string reasoning, content, name, id;
        if (!is_stream) {
          const json message = json::parse(session.finish_text())["choices"][0]["message"];
          reasoning = message["reasoning_content"].get<std::string>();
          content = message["content"].get<std::string>();
          name = message["tool_calls"][0]["function"]["name"].get<std::string>();
          id = message["tool_calls"][0]["id"].get<std::string>();
        }
        for (size_t at = sent.find("data: "); is_stream && at != std::string::npos; at = sent.find("data: ", at + 1)) {
          const json chunk = json::parse(sent.substr(at + 6, sent.find("\n\n", at) - at - 6));
          const json& delta = chunk["choices"][0]["delta"];
          if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
          if (delta.contains("content")) content += delta["content"].get<std::string>();
          if (delta.contains("tool_calls")) name += delta["tool_calls"][0]["function"].value("name", "");
          if (delta.contains("tool_calls")) id += delta["tool_calls"][0].value("id", "");
        }
        QCOMPARE(reasoning, std::string("Check the clock."));
        QCOMPARE(content, std::string("On it."));
        QCOMPARE(name, std::string("now"));
        if (!c.id.empty()) QCOMPARE(id, c.id);
        QVERIFY(!id.empty());
      }
    }
  }

  // A reply with text and two calls, cut into pieces anywhere: streamed as content deltas with
  // no marker in them and tool_calls entries as OpenAI sends them (the first of a call with its
  // id, type and name, then argument pieces by index), joined equal to the whole body's calls,
  // finish_reason tool_calls; the whole body has content null when there is only calls; a reply
  // cut by max_tokens is "length", a call cut inside its arguments a call with the arguments
  // written so far, one cut before them text.
  void chatSessionSendsToolCalls() {
    auto file = gguf::GgufFile::open(m_model);
    QVERIFY(file);
    auto tok = tokenizer::Tokenizer::from_gguf(**file);
    QVERIFY(tok);
    auto model = std::make_shared<ServedModel>(ServedModel{"m", {}, *tok, {}, 512, false, {}, {}});
    const std::string reply =
        "Checking <b>.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
    for (const size_t cut : {size_t{1}, size_t{3}, size_t{7}}) {
      for (const bool is_stream : {true, false}) {
        CompletionParams params;
        params.is_stream = is_stream;
        params.tool_format = ToolCallFormat::Hermes;
        CompletionSession session(CompletionKind::Chat, model, params, {5});
        std::string sent;
        for (size_t at = 0; at < reply.size(); at += cut) {
          sent += session.add({{0, TokenEvent{1, 7, reply.substr(at, cut)}}});
        }
        RequestFinished done;
        done.reason = FinishReason::EndOfGeneration;
        sent += session.add({{0, done}});
        if (!is_stream) {
          const json body = json::parse(session.finish_text());
          const json& choice = body["choices"][0];
          QCOMPARE(choice["finish_reason"].get<std::string>(), std::string("tool_calls"));
          QCOMPARE(choice["message"]["content"].get<std::string>(), std::string("Checking <b>."));
          QCOMPARE(choice["message"]["tool_calls"].size(), size_t{2});
          QCOMPARE(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>(),
                   std::string(R"({"city":"Oslo"})"));
          QCOMPARE(choice["message"]["tool_calls"][1]["function"]["name"].get<std::string>(), std::string("now"));
          continue;
        }
        std::string content, finish;
        std::vector<json> calls;  // joined as the openai client joins them
        size_t num_argument_pieces = 0;
        for (size_t at = sent.find("data: "); at != std::string::npos; at = sent.find("data: ", at + 1)) {
          const json chunk = json::parse(sent.substr(at + 6, sent.find("\n\n", at) - at - 6));
          const json& delta = chunk["choices"][0]["delta"];
          if (delta.contains("content")) content += delta["content"].get<std::string>();
          for (const json& c : delta.value("tool_calls", json::array())) {
            const size_t index = c["index"].get<size_t>();
            if (index == calls.size()) {
              QVERIFY(c.contains("id") && c.contains("type") && c["function"].contains("name"));
              calls.push_back(c);
            } else {
              QVERIFY(index < calls.size());
              QVERIFY(!c.contains("id") && !c["function"].contains("name"));  // only the next piece
              calls[index]["function"]["arguments"] = calls[index]["function"]["arguments"].get<std::string>() +
                                                      c["function"]["arguments"].get<std::string>();
            }
            ++num_argument_pieces;
          }
          if (chunk["choices"][0]["finish_reason"].is_string()) finish = chunk["choices"][0]["finish_reason"];
        }
        QCOMPARE(content, std::string("Checking <b>."));
        QCOMPARE(calls.size(), size_t{2});
        QVERIFY(calls[0]["id"].get<std::string>().rfind("call_", 0) == 0);
        QVERIFY(calls[0]["id"] != calls[1]["id"]);
        QCOMPARE(calls[0]["function"]["name"].get<std::string>(), std::string("get_weather"));
        QCOMPARE(calls[0]["function"]["arguments"].get<std::string>(), std::string(R"({"city":"Oslo"})"));
        QCOMPARE(calls[1]["function"]["arguments"].get<std::string>(), std::string("{}"));
        // Cut small, the arguments arrive in several pieces; whole, each call in one.
        QVERIFY(cut == 1 ? num_argument_pieces > 4 : num_argument_pieces >= 2);
        QCOMPARE(finish, std::string("tool_calls"));
      }
    }
    // Only calls: content null. Cut inside a call by max_tokens: "length", the call as text.
    CompletionParams params;
    params.tool_format = ToolCallFormat::Hermes;
    CompletionSession only(CompletionKind::Chat, model, params, {5});
    only.add({{0, TokenEvent{1, 7, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"}}});
    RequestFinished done;
    only.add({{0, done}});
    QVERIFY(json::parse(only.finish_text())["choices"][0]["message"]["content"].is_null());
    CompletionSession cut(CompletionKind::Chat, model, params, {5});
    cut.add({{0, TokenEvent{1, 7, "<tool_call>\n{\"name\": \"no"}}});
    done.reason = FinishReason::MaxTokens;
    cut.add({{0, done}});
    const json body = json::parse(cut.finish_text());
    QCOMPARE(body["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
    QCOMPARE(body["choices"][0]["message"]["content"].get<std::string>(), std::string("<tool_call>\n{\"name\": \"no"));
    CompletionSession cut_arguments(CompletionKind::Chat, model, params, {5});
    cut_arguments.add(
        {{0, TokenEvent{1, 7, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Os"}}});
    cut_arguments.add({{0, done}});
    const json cut_body = json::parse(cut_arguments.finish_text());
    QCOMPARE(cut_body["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
    QVERIFY(cut_body["choices"][0]["message"]["content"].is_null());
    QCOMPARE(cut_body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>(),
             std::string("{\"city\":\"Os"));
    // Without tools the same text is content, as written.
    CompletionSession plain(CompletionKind::Chat, model, CompletionParams{}, {5});
    plain.add({{0, TokenEvent{1, 7, reply}}});
    done.reason = FinishReason::EndOfGeneration;
    plain.add({{0, done}});
    QCOMPARE(json::parse(plain.finish_text())["choices"][0]["message"]["content"].get<std::string>(), reply);
    // Mistral's calls keep the ids the model wrote when its template takes them back (9 letters
    // and digits) and no earlier call has them; others get new ones of that form.
    CompletionParams mistral;
    mistral.tool_format = ToolCallFormat::MistralNamed;
    CompletionSession ids(CompletionKind::Chat, model, mistral, {5});
    ids.add({{0, TokenEvent{1, 7,
                            "[TOOL_CALLS]now[CALL_ID]a1b2c3d4e[ARGS]{}[TOOL_CALLS]now[CALL_ID]a1b2c3d4e[ARGS]{}"
                            "[TOOL_CALLS]now[CALL_ID]call_1[ARGS]{}[TOOL_CALLS]now[ARGS]{}"}}});
    ids.add({{0, done}});
    const json calls = json::parse(ids.finish_text())["choices"][0]["message"]["tool_calls"];
    QCOMPARE(calls.size(), size_t{4});
    QCOMPARE(calls[0]["id"].get<std::string>(), std::string("a1b2c3d4e"));
    std::set<std::string> seen;
    for (const json& c : calls) {
      const std::string id = c["id"].get<std::string>();
      QCOMPARE(id.size(), size_t{9});
      QVERIFY(seen.insert(id).second);
    }
  }

  // tools, tool_choice and the messages of a tool conversation read into the request: the
  // call grammar and trigger set, the tools rendered in the client's key order.
  void readsAToolRequest() {
    const std::string text = R"({"messages": [{"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "21"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
         "properties": {"city": {"type": "string"}}, "required": ["city"]}, "description": "Weather"}}],
        "tool_choice": "required", "parallel_tool_calls": false})";
    auto read = read_chat_request(json::parse(text), SamplingParams{}, {}, text);
    QVERIFY(std::holds_alternative<ChatCompletionRequest>(read));
    const ChatCompletionRequest& r = std::get<ChatCompletionRequest>(read);
    QCOMPARE(r.messages.size(), size_t{3});
    QCOMPARE(r.messages[1].tool_calls.size(), size_t{1});
    QCOMPARE(r.messages[1].tool_calls[0].arguments, std::string("{}"));
    QCOMPARE(r.messages[1].tool_calls[0].name, std::string("get_weather"));
    QCOMPARE(r.messages[2].role, std::string("tool"));
    QCOMPARE(r.messages[2].tool_call_id, std::string("c1"));
    QCOMPARE(r.tools.size(), size_t{1});
    QVERIFY(r.tools[0].json.find(R"("parameters":{"type":"object")") <
            r.tools[0].json.find(R"("description":"Weather")"));  // the client's order, not sorted
    QCOMPARE(r.tool_choice, ToolChoice::Required);
    QVERIFY(!r.is_parallel_tool_calls);
    QVERIFY(r.params.json_grammar == nullptr);  // made for the model's format, by the route
    // Qwen's format: the trigger before the call; Llama 3's: the call's own "{" at the start.
    ChatCompletionRequest qwen = r;
    QVERIFY(!hold_tool_calls(&qwen, ToolCallFormat::Hermes));
    QVERIFY(qwen.params.json_grammar != nullptr);
    QCOMPARE(qwen.params.grammar_trigger, std::string("<tool_call>"));
    QVERIFY(qwen.params.is_grammar_trigger_forced && qwen.params.ends_after_grammar);
    QVERIFY(!qwen.params.is_trigger_in_grammar && !qwen.params.is_trigger_at_start);
    QCOMPARE(*qwen.params.tool_format, ToolCallFormat::Hermes);
    ChatCompletionRequest llama = r;
    QVERIFY(!hold_tool_calls(&llama, ToolCallFormat::Llama3));
    QCOMPARE(llama.params.grammar_trigger, std::string("{\"name\""));
    QVERIFY(llama.params.is_trigger_in_grammar && llama.params.is_trigger_at_start);
    QCOMPARE(*llama.params.tool_format, ToolCallFormat::Llama3);
    QCOMPARE(qwen.params.grammar_separator, std::string("\n"));
    // Mistral's: the [TOOL_CALLS] control token before each call, nothing between two.
    ChatCompletionRequest mistral = r;
    QVERIFY(!hold_tool_calls(&mistral, ToolCallFormat::MistralNamed));
    QCOMPARE(mistral.params.grammar_trigger, std::string("[TOOL_CALLS]"));
    QCOMPARE(mistral.params.grammar_separator, std::string());
    QVERIFY(mistral.params.is_grammar_trigger_forced && mistral.params.ends_after_grammar);
    QCOMPARE(*mistral.params.tool_format, ToolCallFormat::MistralNamed);
    // tool_choice none: the tools are read, nothing is held or parsed.
    auto none = read_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}],
        "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})"),
                                  SamplingParams{}, {});
    QVERIFY(std::holds_alternative<ChatCompletionRequest>(none));
    QVERIFY(!std::get<ChatCompletionRequest>(none).params.json_grammar);
    ChatCompletionRequest none_read = std::get<ChatCompletionRequest>(none);
    QVERIFY(!hold_tool_calls(&none_read, ToolCallFormat::Hermes));
    QVERIFY(!none_read.params.json_grammar && !none_read.params.tool_format);
  }

  // Thinking controls: OpenAI's reasoning_effort, and chat_template_kwargs as vLLM and
  // llama-server take them (the kwarg wins when both say).
  void readsThinkingControls() {
    const auto read = [](const char* text) {
      auto r = read_chat_request(json::parse(text), SamplingParams{}, {});
      if (!std::holds_alternative<ChatCompletionRequest>(r)) qFatal("refused: %s", text);
      return std::get<ChatCompletionRequest>(r);
    };
    const ChatCompletionRequest none = read("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}");
    QVERIFY(!none.enable_thinking && none.reasoning_effort.empty());
    const ChatCompletionRequest both = read(
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_effort\": \"low\", "
        "\"chat_template_kwargs\": {\"enable_thinking\": false, \"reasoning_effort\": \"high\"}}");
    QCOMPARE(both.enable_thinking, std::optional<bool>(false));
    QCOMPARE(both.reasoning_effort, std::string("high"));
    // The server's --chat-template-kwargs: the same variables, the same refusals.
    ServeOptions defaults;
    QVERIFY(set_default_chat_template_kwargs("{\"enable_thinking\": false, \"reasoning_effort\": \"low\"}", &defaults));
    QCOMPARE(defaults.default_enable_thinking, std::optional<bool>(false));
    QCOMPARE(defaults.default_reasoning_effort, std::string("low"));
    const Status unknown = set_default_chat_template_kwargs("{\"think\": true}", &defaults);
    QVERIFY(!unknown && unknown.message().find("'chat_template_kwargs.think' is not read") != std::string::npos);
    // DeepSeek V3.1's `thinking` is enable_thinking under another name; the two may not disagree.
    QVERIFY(set_default_chat_template_kwargs("{\"thinking\": true}", &defaults));
    QCOMPARE(defaults.default_enable_thinking, std::optional<bool>(true));
    QVERIFY(!set_default_chat_template_kwargs("{\"thinking\": true, \"enable_thinking\": false}", &defaults));
    QVERIFY(!set_default_chat_template_kwargs("{\"reasoning_effort\": \"max\"}", &defaults));
    // GLM-4.7's clear_thinking: true or false, nothing else.
    QVERIFY(set_default_chat_template_kwargs("{\"clear_thinking\": false}", &defaults));
    QCOMPARE(defaults.default_clear_thinking, std::optional<bool>(false));
    QVERIFY(!set_default_chat_template_kwargs("{\"clear_thinking\": 0}", &defaults));
    QVERIFY(!set_default_chat_template_kwargs("[true]", &defaults));
    QVERIFY(!set_default_chat_template_kwargs("not json", &defaults));
  }

  void readsAValidChatRequest() {
    const json body = json::parse(R"({"model": "x", "messages": [{"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}]},
        {"role": "assistant", "content": null}],
        "temperature": 0, "top_p": 0.5, "top_k": 7, "min_p": 0.1, "max_tokens": 1000000000, "stop": "x", "seed": 5,
        "n": 3, "presence_penalty": 0.5, "frequency_penalty": -0.5, "repeat_penalty": 1.0, "logprobs": true,
        "top_logprobs": 4, "stream": true, "stream_options": {"include_usage": true}, "user": "ignored",
        "ignore_eos": true})");
    auto read = read_chat_request(body, SamplingParams{}, {});
    QVERIFY(std::holds_alternative<ChatCompletionRequest>(read));
    const ChatCompletionRequest& r = std::get<ChatCompletionRequest>(read);
    QCOMPARE(r.messages.size(), size_t{3});
    QCOMPARE(r.messages[0].role, std::string("system"));
    QCOMPARE(r.messages[1].content, std::string("Hi there"));
    QCOMPARE(r.params.sampling.temperature, 0.0f);
    QCOMPARE(r.params.sampling.top_k, 7);
    QCOMPARE(r.params.sampling.seed, uint64_t{5});
    QVERIFY(r.params.has_seed);
    QCOMPARE(*r.params.max_tokens, int64_t{1000000000});  // the server clamps it to the context
    QCOMPARE(r.params.stop, std::vector<std::string>{"x"});
    QCOMPARE(r.params.n, 3);
    QCOMPARE(r.params.num_top_logprobs, 4);
    QVERIFY(r.params.is_stream && r.params.include_usage);
    QVERIFY(r.params.ignore_eos);
    QCOMPARE(r.params.sampling.repeat_penalty, 1.0f);
  }

  void refusesBadBodiesWithTheReason_data() {
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<QString>("param");
    QTest::newRow("not json") << QByteArray("{\"messages\": [") << "";
    QTest::newRow("not an object") << QByteArray("[1, 2]") << "";
    QTest::newRow("invalid utf-8") << QByteArray("{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}")
                                   << "";
    QTest::newRow("deep nesting") << QByteArray(std::string(1000, '[').c_str()) << "";
    QTest::newRow("no messages") << QByteArray("{\"model\": \"m\"}") << "messages";
    QTest::newRow("empty messages") << QByteArray("{\"messages\": []}") << "messages";
    QTest::newRow("unknown role") << QByteArray(R"({"messages": [{"role": "wizard", "content": "hi"}]})")
                                  << "messages[0].role";
    QTest::newRow("function role") << QByteArray(R"({"messages": [{"role": "function", "content": "hi"}]})")
                                   << "messages[0].role";
    QTest::newRow("content number") << QByteArray(R"({"messages": [{"role": "user", "content": 5}]})")
                                    << "messages[0].content";
    QTest::newRow("image part")
        << QByteArray(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})")
        << "messages[0].content";
    const QByteArray ok = R"("messages": [{"role": "user", "content": "hi"}])";
    QTest::newRow("temperature string") << "{" + ok + R"(, "temperature": "hot"})"
                                        << "temperature";
    QTest::newRow("temperature 5") << "{" + ok + R"(, "temperature": 5})"
                                   << "temperature";
    QTest::newRow("n 1000") << "{" + ok + R"(, "n": 1000})"
                            << "n";
    QTest::newRow("n 0") << "{" + ok + R"(, "n": 0})"
                         << "n";
    QTest::newRow("n float") << "{" + ok + R"(, "n": 1.5})"
                             << "n";
    QTest::newRow("max_tokens 0") << "{" + ok + R"(, "max_tokens": 0})"
                                  << "max_tokens";
    QTest::newRow("max_tokens float") << "{" + ok + R"(, "max_tokens": 1e9})"
                                      << "max_tokens";
    QTest::newRow("max_tokens -5") << "{" + ok + R"(, "max_tokens": -5})"
                                   << "max_tokens";
    QTest::newRow("stop number") << "{" + ok + R"(, "stop": 3})"
                                 << "stop";
    QTest::newRow("stop too many")
        << "{" + ok + R"(, "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})"
        << "stop";
    QTest::newRow("stream string") << "{" + ok + R"(, "stream": "yes"})"
                                   << "stream";
    QTest::newRow("top_logprobs alone") << "{" + ok + R"(, "top_logprobs": 2})"
                                        << "top_logprobs";
    QTest::newRow("top_logprobs 100") << "{" + ok + R"(, "logprobs": true, "top_logprobs": 100})"
                                      << "top_logprobs";
    QTest::newRow("tools") << "{" + ok + R"(, "tools": [{"type": "function"}]})"
                           << "tools[0]";
    QTest::newRow("functions") << "{" + ok + R"(, "functions": [{"name": "f"}]})"
                               << "functions";
    QTest::newRow("stream_options list") << "{" + ok + R"(, "stream_options": [true]})"
                                         << "stream_options";
    QTest::newRow("reasoning_effort") << "{" + ok + ", \"reasoning_effort\": \"extreme\"}"
                                      << "reasoning_effort";
    QTest::newRow("kwargs list") << "{" + ok + ", \"chat_template_kwargs\": [1]}"
                                 << "chat_template_kwargs";
    QTest::newRow("enable_thinking string") << "{" + ok + ", \"chat_template_kwargs\": {\"enable_thinking\": \"no\"}}"
                                            << "chat_template_kwargs";
    // A variable no template here reads would be dropped without a word: refused by name.
    QTest::newRow("unknown kwarg") << "{" + ok + ", \"chat_template_kwargs\": {\"think\": true}}"
                                   << "chat_template_kwargs";
  }

  void refusesBadBodiesWithTheReason() {
    QFETCH(QByteArray, body);
    QFETCH(QString, param);
    const ApiError e = chat_error(body.toStdString());
    QVERIFY2(e.status == 400, e.message.c_str());
    QCOMPARE(QString::fromStdString(e.param), param);
    QVERIFY(!e.message.empty());
    // The error object always serializes, whatever bytes the message quotes.
    const json j = json::parse(dump_json(error_json(e)));
    QCOMPARE(j["error"]["type"], json("invalid_request_error"));
    QVERIFY(j["error"].contains("code") && j["error"].contains("param"));
  }

  void readsCompletionPrompts() {
    auto read = [](const char* body) {
      return read_completion_request(json::parse(body), SamplingParams{}, RequestLimits{});
    };
    auto one = read(R"({"prompt": "Once upon", "logprobs": 2, "n": 2})");
    QVERIFY(std::holds_alternative<TextCompletionRequest>(one));
    QCOMPARE(std::get<TextCompletionRequest>(one).prompts.size(), size_t{1});
    QCOMPARE(std::get<TextCompletionRequest>(one).params.num_top_logprobs, 2);
    auto ids = read(R"({"prompt": [1, 2, 3]})");
    QVERIFY(std::holds_alternative<TextCompletionRequest>(ids));
    QCOMPARE(std::get<std::vector<int32_t>>(std::get<TextCompletionRequest>(ids).prompts[0]),
             (std::vector<int32_t>{1, 2, 3}));
    auto many = read(R"({"prompt": ["a", [5, 6]]})");
    QCOMPARE(std::get<TextCompletionRequest>(many).prompts.size(), size_t{2});
    QVERIFY(std::holds_alternative<ApiError>(read(R"({"prompt": [1, "a"]})")));
    QVERIFY(std::holds_alternative<ApiError>(read(R"({"prompt": [-1]})")));
    QVERIFY(std::holds_alternative<ApiError>(read(R"({"prompt": 7})")));
    QVERIFY(std::holds_alternative<ApiError>(read(R"({"prompt": "a", "echo": true})")));
    // n times the prompts is capped like n.
    QVERIFY(std::holds_alternative<ApiError>(read(R"({"prompt": ["a","b","c","d"], "n": 5})")));
  }

  void logprobsAreALogSoftmax() {
    const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
    const TokenLogprobs lp = token_logprobs(logits, 2, 3);
    double sum = 0;
    for (const float l : logits) sum += std::exp(l);
    QVERIFY(std::abs(lp.logprob - static_cast<float>(2.0 - std::log(sum))) < 1e-5f);
    QCOMPARE(lp.top.size(), size_t{3});
    QCOMPARE(lp.top[0].token, 1);  // ties: the lower id first
    QCOMPARE(lp.top[1].token, 3);
    QCOMPARE(lp.top[2].token, 2);
    QVERIFY(lp.top[0].logprob >= lp.top[2].logprob);
  }

  void metricsRenderAsPrometheusText() {
    ServeMetrics metrics;
    StepResult step;
    step.stats.num_prompt_tokens = 12;
    step.stats.num_running = 2;
    step.stats.num_waiting = 1;
    step.stats.kv.num_blocks = 8;
    step.stats.kv.num_used_blocks = 2;
    step.stats.kv.num_prefix_query_tokens = 12;
    step.stats.kv.num_prefix_hit_tokens = 4;
    step.stats.speculation.record(3, 2, 3);
    step.tokens.resize(3);
    RequestFinished f;
    f.reason = FinishReason::MaxTokens;
    f.queued_seconds = 0.002;
    f.token_seconds = {0.05, 0.07, 0.2};
    step.finished.push_back(f);
    metrics.observe_step(step);
    // The engine's cumulative prefix counters: only their growth counts.
    step.finished.clear();
    step.stats.kv.num_prefix_query_tokens = 20;
    metrics.observe_step(step);

    const ServeMetricValues v = metrics.values();
    QCOMPARE(v.prompt_tokens, uint64_t{24});
    QCOMPARE(v.generation_tokens, uint64_t{6});
    QCOMPARE(v.prefix_cache_queries, uint64_t{20});
    QCOMPARE(v.prefix_cache_hits, uint64_t{4});
    QCOMPARE(v.kv_cache_usage, 0.25);
    QCOMPARE(v.requests_finished.at("length"), uint64_t{1});
    QCOMPARE(v.spec_accepted_per_position.size(), size_t{3});

    const QString text = QString::fromStdString(metrics.prometheus_text("my \"model\""));
    QVERIFY(text.contains("# TYPE iwb:generation_tokens_total counter\n"));
    QVERIFY(text.contains("iwb:generation_tokens_total{model_name=\"my \\\"model\\\"\"} 6\n"));
    QVERIFY(text.contains("iwb:kv_cache_usage_perc{model_name=\"my \\\"model\\\"\"} 0.25\n"));
    QVERIFY(text.contains("iwb:request_success_total{model_name=\"my \\\"model\\\"\",finished_reason=\"length\"} 1\n"));
    QVERIFY(text.contains(
        "iwb:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"my \\\"model\\\"\",position=\"1\"} 2\n"));
    // Histograms: cumulative buckets, +Inf equals the count; two inter-token gaps.
    QVERIFY(text.contains("iwb:inter_token_latency_seconds_bucket{model_name=\"my \\\"model\\\"\",le=\"0.025\"} 1\n"));
    QVERIFY(text.contains("iwb:inter_token_latency_seconds_bucket{model_name=\"my \\\"model\\\"\",le=\"+Inf\"} 2\n"));
    QVERIFY(text.contains("iwb:inter_token_latency_seconds_count{model_name=\"my \\\"model\\\"\"} 2\n"));
    QVERIFY(text.contains("iwb:time_to_first_token_seconds_bucket{model_name=\"my \\\"model\\\"\",le=\"0.06\"} 1\n"));
    QVERIFY(text.contains("iwb:time_to_first_token_seconds_bucket{model_name=\"my \\\"model\\\"\",le=\"0.04\"} 0\n"));
  }

  // A model with a tool-use template (Hermes 2 Pro / 3: tokenizer.chat_template.tool_use) renders
  // conversations with tools, or tool turns, with it; others with its chat template. A
  // --chat-template replaces both.
  void toolUseTemplateForConversationsWithTools() {
    test::TinyModelSpec spec;
    spec.strings = {{"tokenizer.chat_template", "{{- '<|im_start|>' }}"},
                    {"tokenizer.chat_template.tool_use", "{{- 'You are a function calling AI model.<|im_start|>' }}"}};
    const std::string path = m_tmp.filePath("tool_use.gguf").toStdString();
    QVERIFY(test::write_tiny_model(spec, path).is_ok());
    auto engine = Engine::load(path, EngineOptions{});
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    const ServedModel model = describe_served_model(**engine, "m");
    QCOMPARE(model.chat_template_tool_use, spec.strings[1].second);
    ChatCompletionRequest chat;
    chat.messages = {{"user", "Hi"}};
    QCOMPARE(chat_template_for(model, chat), spec.strings[0].second);
    chat.tools.push_back({"now", "", false, "{}"});
    chat.tool_choice = ToolChoice::Auto;
    QCOMPARE(chat_template_for(model, chat), spec.strings[1].second);
    chat.tool_choice = ToolChoice::None;  // the tools are not shown
    QCOMPARE(chat_template_for(model, chat), spec.strings[0].second);
    chat.messages.push_back({"tool", "noon", {}, "c"});
    QCOMPARE(chat_template_for(model, chat), spec.strings[1].second);
    QCOMPARE(detect_chat_template(chat_template_for(model, chat)), ChatTemplateFamily::Hermes);
    QVERIFY(describe_served_model(**engine, "m", "chatml").chat_template_tool_use.empty());
    QVERIFY(describe_served_model(**engine, "m", "{{ '[INST]' }}").chat_template_tool_use.empty());
  }

  void engineLoopRoutesTokensAndAborts() {
    ServeMetrics metrics;
    EngineLoop loop(&metrics);
    QVERIFY(loop.model() == nullptr);  // loading
    auto refused = loop.submit({greedy({1, 5, 6}, 4)}, std::make_shared<ResponseChannel>());
    QVERIFY(!refused.is_ok());
    QCOMPARE(refused.status().code(), ErrorCode::Unsupported);

    EngineOptions options;
    options.num_threads = 2;
    auto engine = Engine::load(m_model, options);
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    loop.start(std::move(*engine), "");
    QVERIFY(loop.model() != nullptr);
    QCOMPARE(loop.model()->id, std::string("tiny"));
    QCOMPARE(loop.model()->context_length, int64_t{512});

    // Two prompts together: each channel gets only its own tokens, in order, then its end.
    auto a = std::make_shared<ResponseChannel>();
    auto b = std::make_shared<ResponseChannel>();
    auto sa = loop.submit({greedy({1, 10, 11, 12}, 6), greedy({1, 10, 11, 12}, 3)}, a);
    auto sb = loop.submit({greedy({1, 40, 41}, 5)}, b);
    QVERIFY(sa.is_ok() && sb.is_ok());
    const Collected ca = collect(*a, 2);
    const Collected cb = collect(*b, 1);
    QCOMPARE(ca.tokens[0].size(), size_t{6});
    QCOMPARE(ca.tokens[1].size(), size_t{3});
    QCOMPARE(cb.tokens[0].size(), size_t{5});
    QCOMPARE(ca.finished[0].reason, FinishReason::MaxTokens);
    for (size_t i = 0; i < 3; ++i) QCOMPARE(ca.tokens[1][i].token, ca.tokens[0][i].token);  // same prompt, greedy

    // A prompt that can never fit fails the whole submission; the other request is not left running.
    std::vector<int32_t> huge(600, 7);
    auto none = loop.submit({greedy({1, 2, 3}, 400), greedy(huge, 4)}, std::make_shared<ResponseChannel>());
    QVERIFY(!none.is_ok());
    QVERIFY2(QString::fromStdString(none.error_message()).contains("context holds 512"), none.error_message().c_str());

    // Aborted mid-generation: its end says so, and its KV blocks are free again.
    auto c = std::make_shared<ResponseChannel>();
    GenerationRequest slow = greedy({1, 20, 21, 22}, 500);
    slow.num_top_logprobs = 2;
    auto sc = loop.submit({std::move(slow)}, c);
    QVERIFY(sc.is_ok());
    std::vector<ServeEvent> first;
    for (int i = 0; i < 100 && first.empty(); ++i) first = c->take(std::chrono::milliseconds(50));
    QVERIFY(!first.empty());
    const auto* token = std::get_if<TokenEvent>(&first.front().event);
    QVERIFY(token != nullptr);
    QCOMPARE(token->top_logprobs.size(), size_t{2});
    QVERIFY(token->logprob <= 0.0f);
    loop.abort(sc->requests);
    const Collected cc = collect(*c, 1);
    QCOMPARE(cc.finished[0].reason, FinishReason::Aborted);
    QVERIFY(cc.finished[0].num_generated_tokens < 500);
    const ServeMetricValues v = metrics.values();
    QCOMPARE(v.num_requests_running, int64_t{0});
    QCOMPARE(v.kv_cache_usage, 0.0);
    // This one, and the partner of the refused submission (queued, then aborted).
    QCOMPARE(v.requests_finished.at("abort"), uint64_t{2});
    QVERIFY(v.generation_tokens >= 14);

    // Stopping aborts what is in flight; later submissions are refused.
    auto d = std::make_shared<ResponseChannel>();
    QVERIFY(loop.submit({greedy({1, 30, 31}, 500)}, d).is_ok());
    loop.stop();
    const Collected cd = collect(*d, 1, std::chrono::seconds(5));
    QVERIFY(cd.finished[0].reason == FinishReason::Aborted || cd.finished[0].reason == FinishReason::MaxTokens);
    QVERIFY(!loop.submit({greedy({1, 2}, 2)}, d).is_ok());
  }
};

QTEST_GUILESS_MAIN(TestServeCore)
#include "test_serve_core.moc"
