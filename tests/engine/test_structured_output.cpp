// Structured output and logit bias through the engine, on the real aidreams model (a 512-token
// SentencePiece vocabulary with byte tokens): replies held to a JSON Schema parse and fit it,
// greedy and sampled, and end when the value closes; JSON mode gives objects; a bias moves or
// bans tokens; a grammar no allowed token can continue ends that request with the reason.
#include "aidreams_gguf.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include <cmath>

using namespace iwb;
using json = nlohmann::json;

class TestStructuredOutput : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void init();
  void enumReplyIsOneOfTheValues();
  void sampledObjectsFitTheSchema();
  void jsonModeGivesAnObject();
  void greedySpeculationKeepsToTheGrammar();
  void logitBiasMovesAndBansTokens();
  void noTokenThatFitsEndsTheRequest();
  void triggerHoldsOnlyWhatFollowsIt();
  void forcedTriggerOpensTheReply();
  void triggerAtTheStartIsTheValuesOwn();
  void greedySpeculationKeepsToTheTrigger();
  void controlTokensWriteOnlyMarkers();

 private:
  QTemporaryDir m_tmp;
  std::string m_aidreams;
  std::unique_ptr<Engine> m_engine;
};

namespace {

struct Reply {
  std::vector<int32_t> tokens;
  std::string text;
  RequestFinished finished;
};

// The model with prompt-lookup speculation (4 guesses a step), for the speculation tests.
Result<std::unique_ptr<Engine>> load_with_lookup(const std::string& path) {
  auto engine = Engine::load(path, {0, 2});
  if (!engine) return engine;
  spec::SpeculativeConfig lookup;
  lookup.kind = spec::DrafterKind::PromptLookup;
  lookup.num_draft_tokens = 4;
  if (Status s = (*engine)->set_speculation(lookup); !s.is_ok()) return s;
  return engine;
}

// `num_drafted` (when given): the speculative guesses the engine verified meanwhile.
Reply generate(Engine& engine, GenerationRequest r, int64_t* num_drafted = nullptr) {
  Reply out;
  Result<RequestId> id = engine.add_request(std::move(r));
  if (!id) qFatal("add_request: %s", id.error_message().c_str());
  if (num_drafted != nullptr) *num_drafted = 0;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> s = engine.step();
    if (!s) qFatal("step: %s", s.error_message().c_str());
    if (num_drafted != nullptr) *num_drafted += s->stats.speculation.num_drafted;
    for (const TokenEvent& e : s->tokens) {
      if (e.request != *id) continue;
      out.tokens.push_back(e.token);
      out.text += e.text;
    }
    for (const RequestFinished& f : s->finished) {
      if (f.request == *id) out.finished = f;
    }
  }
  return out;
}

GenerationRequest request(const Engine& engine, const std::string& prompt, float temperature, uint64_t seed,
                          std::shared_ptr<const JsonGrammar> grammar) {
  GenerationRequest r;
  r.prompt_tokens = engine.tokenizer().encode(prompt);
  r.max_new_tokens = 100;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.json_grammar = std::move(grammar);
  return r;
}

// A story model likes newlines and indentation, which JSON allows between tokens (a newline and
// up to 20 spaces at each place): banned here by bias, so that replies fit the 128-token context.
void ban_whitespace_tokens(const Engine& engine, GenerationRequest* r) {
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  for (size_t id = 0; id < tok.num_tokens(); ++id) {
    const std::string piece = tok.token_to_piece(static_cast<int32_t>(id));
    if (!piece.empty() && piece.find_first_not_of(" \t\n\r") == std::string::npos) {
      r->sampling.logit_bias.emplace_back(static_cast<int32_t>(id), -INFINITY);
    }
  }
}

std::shared_ptr<const JsonGrammar> compile(const char* schema) {
  Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_schema(schema);
  if (!g) qFatal("schema: %s", g.error_message().c_str());
  return *g;
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "color": {"enum": ["red", "green", "blue"]},
    "ok": {"type": "boolean"},
    "n": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}
  },
  "required": ["color", "ok", "n"]
})";

}  // namespace

void TestStructuredOutput::initTestCase() {
  m_aidreams = iwb::test::convert_aidreams_gguf(m_tmp.path()).toStdString();
  if (m_aidreams.empty()) return;  // the shared model is absent: each test skips
  auto engine = Engine::load(m_aidreams, {0, 2});
  QVERIFY2(engine.is_ok(), engine.error_message().c_str());
  m_engine = std::move(*engine);
}

void TestStructuredOutput::init() {
  if (m_aidreams.empty()) QSKIP("shared aidreams model absent");
}

void TestStructuredOutput::enumReplyIsOneOfTheValues() {
  const auto g = compile(R"({"enum": ["red", "green", "blue"]})");
  const Reply r = generate(*m_engine, request(*m_engine, "Once upon a time", 0.0f, 1, g));
  QVERIFY2(r.text == "\"red\"" || r.text == "\"green\"" || r.text == "\"blue\"", r.text.c_str());
  // Ended by the closing quote itself, not by a further end-of-generation token.
  QCOMPARE(r.finished.reason, FinishReason::EndOfGeneration);
  QVERIFY(!m_engine->tokenizer().is_end_of_generation(r.tokens.back()));
  // Without the grammar the model writes a story, not a color.
  const Reply free = generate(*m_engine, request(*m_engine, "Once upon a time", 0.0f, 1, nullptr));
  QVERIFY(free.text.find('"') != 0);
}

void TestStructuredOutput::sampledObjectsFitTheSchema() {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    GenerationRequest q = request(*m_engine, "The little dog", 1.0f, seed, compile(kSchema));
    ban_whitespace_tokens(*m_engine, &q);
    const Reply r = generate(*m_engine, q);
    QVERIFY2(r.finished.reason == FinishReason::EndOfGeneration, r.text.c_str());
    json v;
    try {
      v = json::parse(r.text);
    } catch (const json::exception& e) {
      QFAIL(qPrintable(QString("seed %1: not JSON (%2): %3").arg(seed).arg(e.what(), QString::fromStdString(r.text))));
    }
    QVERIFY2(v.is_object(), r.text.c_str());
    const std::string color = v.at("color").get<std::string>();
    QVERIFY(color == "red" || color == "green" || color == "blue");
    QVERIFY(v.at("ok").is_boolean());
    QVERIFY(v.at("n").is_number_integer());
    for (const auto& [key, value] : v.items()) {
      QVERIFY2(key == "color" || key == "ok" || key == "n" || key == "tags", r.text.c_str());
      if (key == "tags") QVERIFY(value.is_array() && value.size() <= 3);
    }
  }
}

void TestStructuredOutput::jsonModeGivesAnObject() {
  GenerationRequest r = request(*m_engine, "Lily said", 0.8f, 7, JsonGrammar::any_object());
  r.max_new_tokens = 0;  // up to the context: a story model may write a long string
  const Reply reply = generate(*m_engine, r);
  if (reply.finished.reason == FinishReason::EndOfGeneration) {
    QVERIFY2(json::parse(reply.text).is_object(), reply.text.c_str());
  } else {
    // Cut by the context: what there is must still be the start of an object.
    QCOMPARE(reply.finished.reason, FinishReason::ContextFull);
    JsonMatcher m(JsonGrammar::any_object());
    QVERIFY2(m.feed(reply.text), reply.text.c_str());
  }
  QCOMPARE(reply.text.front(), '{');
}

// Greedy: the target's own (grammar-held) choice verifies each guess, so speculation gives the
// same reply as plain decoding; sampled structured replies do not speculate.
void TestStructuredOutput::greedySpeculationKeepsToTheGrammar() {
  auto engine = load_with_lookup(m_aidreams);
  QVERIFY(engine.is_ok());
  // A prompt full of the schema's own text, so that lookup finds guesses.
  const std::string prompt = R"({"color":"red","ok":true,"n":1} {"color":"red","ok":true,"n":1} {"color":)";
  const auto run = [&](float temperature, int32_t num_draft_tokens, int64_t* num_drafted) {
    GenerationRequest q = request(**engine, prompt, temperature, 3, compile(kSchema));
    ban_whitespace_tokens(**engine, &q);
    q.num_draft_tokens = num_draft_tokens;
    return generate(**engine, std::move(q), num_drafted);
  };
  int64_t drafted = 0, plain_drafted = 0, sampled_drafted = 0;
  const Reply speculated = run(0.0f, -1, &drafted);
  const Reply plain = run(0.0f, 0, &plain_drafted);
  QVERIFY2(speculated.finished.reason == FinishReason::EndOfGeneration, speculated.text.c_str());
  QVERIFY2(json::parse(speculated.text).is_object(), speculated.text.c_str());
  QVERIFY(drafted > 0);
  QCOMPARE(plain_drafted, int64_t(0));
  QCOMPARE(speculated.text, plain.text);
  const Reply sampled = run(1.0f, -1, &sampled_drafted);
  QCOMPARE(sampled_drafted, int64_t(0));
  QVERIFY2(json::parse(sampled.text).is_object(), sampled.text.c_str());

  // No token fits while a draft is verified: "red" with every token holding an r banned. The
  // quote comes first (from the prompt's step), then the step that verifies lookup's guesses
  // (the prompt's quotes) finds nothing for the r.
  GenerationRequest q = request(**engine, R"(say "a" "b" "c" ")", 0.0f, 1, compile(R"({"enum": ["red"]})"));
  const tokenizer::Tokenizer& tok = (*engine)->tokenizer();
  for (size_t id = 0; id < tok.num_tokens(); ++id) {
    if (tok.token_to_piece(static_cast<int32_t>(id)).find('r') != std::string::npos) {
      q.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), -INFINITY);
    }
  }
  Result<RequestId> id = (*engine)->add_request(std::move(q));
  QVERIFY(id.is_ok());
  RequestFinished finished;
  int64_t verified = 0;
  std::string text;
  while ((*engine)->has_unfinished_requests()) {
    Result<StepResult> s = (*engine)->step();
    QVERIFY(s.is_ok());
    verified += s->stats.speculation.num_drafted;
    for (const TokenEvent& e : s->tokens) text += e.text;
    for (const RequestFinished& f : s->finished) finished = f;
  }
  QCOMPARE(text, std::string("\""));
  QCOMPARE(finished.reason, FinishReason::Error);
  QVERIFY2(finished.error.find("no token of the vocabulary continues the reply") != std::string::npos,
           finished.error.c_str());
  QVERIFY(verified > 0);  // it ended in a verification step
}

void TestStructuredOutput::logitBiasMovesAndBansTokens() {
  const Reply plain = generate(*m_engine, request(*m_engine, "Once upon a time", 0.0f, 1, nullptr));
  QVERIFY(!plain.tokens.empty());
  const int32_t first = plain.tokens.front();
  GenerationRequest banned = request(*m_engine, "Once upon a time", 0.0f, 1, nullptr);
  banned.max_new_tokens = 1;
  banned.sampling.logit_bias = {{first, -INFINITY}};
  const Reply other = generate(*m_engine, banned);
  QCOMPARE(other.tokens.size(), size_t(1));
  QVERIFY(other.tokens.front() != first);
  const int32_t forced = m_engine->tokenizer().find_token("dog").value_or(300);
  GenerationRequest pushed = request(*m_engine, "Once upon a time", 0.0f, 1, nullptr);
  pushed.max_new_tokens = 1;
  pushed.sampling.logit_bias = {{forced, 100.0f}};
  QCOMPARE(generate(*m_engine, pushed).tokens.front(), forced);
  // Ids outside the vocabulary and +inf are refused when the request is added.
  GenerationRequest bad = request(*m_engine, "x", 0.0f, 1, nullptr);
  bad.sampling.logit_bias = {{512, 1.0f}};
  Result<RequestId> refused = m_engine->add_request(bad);
  QVERIFY(!refused);
  QVERIFY2(refused.error_message().find("token 512, outside the vocabulary (512 tokens)") != std::string::npos,
           refused.error_message().c_str());
  bad.sampling.logit_bias = {{5, INFINITY}};
  QVERIFY(!m_engine->add_request(bad));
}

void TestStructuredOutput::noTokenThatFitsEndsTheRequest() {
  // Every token that could open the string is banned: nothing may come first.
  GenerationRequest r = request(*m_engine, "Once upon a time", 0.0f, 1, compile(R"({"enum": ["red"]})"));
  const tokenizer::Tokenizer& tok = m_engine->tokenizer();
  for (size_t id = 0; id < tok.num_tokens(); ++id) {
    const std::string piece = tok.token_to_piece(static_cast<int32_t>(id));
    if (!piece.empty() && piece[0] == '"') r.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), -INFINITY);
  }
  QVERIFY(!r.sampling.logit_bias.empty());
  const Reply reply = generate(*m_engine, r);
  QCOMPARE(reply.finished.reason, FinishReason::Error);
  QVERIFY2(reply.finished.error.find("no token of the vocabulary continues the reply as the JSON schema asks") !=
               std::string::npos,
           reply.finished.error.c_str());
  QVERIFY(reply.tokens.empty());
  // The engine goes on serving.
  const Reply next =
      generate(*m_engine, request(*m_engine, "Once upon a time", 0.0f, 1, compile(R"({"enum": ["red"]})")));
  QCOMPARE(next.text, std::string("\"red\""));
}

namespace {

std::shared_ptr<const JsonGrammar> framed_choices(const std::vector<std::string>& choices, std::string prefix,
                                                  std::string suffix) {
  Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_choices(choices);
  if (!g) qFatal("choices: %s", g.error_message().c_str());
  return JsonGrammar::framed(**g, std::move(prefix), std::move(suffix), "the words");
}

// From the first place `text` writes `trigger` on, it holds only "trigger word" pieces
// separated by "\n" (what may follow a held value is another one or the end), perhaps cut short.
bool held_after_trigger(const std::string& text, const std::string& trigger, const std::vector<std::string>& words,
                        int* count) {
  *count = 0;
  const size_t at = text.find(trigger);
  if (at == std::string::npos) return true;
  std::string rest = text.substr(at);
  for (std::string separator;; separator = "\n") {
    bool took = false;
    for (const std::string& w : words) {
      const std::string piece = separator + trigger + w;
      if (rest.rfind(piece, 0) == 0) {
        rest.erase(0, piece.size());
        ++*count;
        took = true;
        break;
      }
      if (piece.rfind(rest, 0) == 0) return true;  // the text ends inside it
    }
    if (!took) return false;
    if (rest.empty()) return true;
  }
}

}  // namespace

// Tool calls' lazy grammar: free text until the trigger, where the grammar holds what follows;
// then only another (separated by "\n") or the end, as llama.cpp's tool grammars allow. Here
// the trigger is " of" and what follows one of two words.
void TestStructuredOutput::triggerHoldsOnlyWhatFollowsIt() {
  const std::vector<std::string> words = {" noise", " light"};
  const std::string trigger = " of";
  int count = 0;
  // Without the trigger the story says other things after " of".
  const Reply free = generate(*m_engine, request(*m_engine, "Once upon a time", 0.0f, 1, nullptr));
  QVERIFY2(!held_after_trigger(free.text, trigger, words, &count), free.text.c_str());
  int total = 0;
  for (const float temperature : {0.0f, 0.9f}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      GenerationRequest q = request(*m_engine, "Once upon a time", temperature, seed, framed_choices(words, "", ""));
      q.grammar_trigger = trigger;
      q.max_new_tokens = 80;
      const Reply r = generate(*m_engine, q);
      QVERIFY2(held_after_trigger(r.text, trigger, words, &count), r.text.c_str());
      // The greedy reply writes the trigger where the free one does (the grammar had something
      // to hold); sampled ones may not within 80 tokens.
      if (temperature == 0.0f) QVERIFY2(count >= 1, r.text.c_str());
      total += count;
      // After a held value the reply may end (the model's own end) or hold another.
      const bool model_ended = r.finished.reason == FinishReason::EndOfGeneration &&
                               m_engine->tokenizer().is_end_of_generation(r.tokens.back());
      QVERIFY2(r.finished.reason == FinishReason::MaxTokens || model_ended, r.text.c_str());
    }
  }
  QVERIFY(total >= 3);
  // One call at most (parallel_tool_calls false): the reply ends where the first one does.
  GenerationRequest once = request(*m_engine, "Once upon a time", 0.0f, 1, framed_choices(words, "", ""));
  once.grammar_trigger = trigger;
  once.ends_after_grammar = true;
  const Reply r = generate(*m_engine, once);
  QCOMPARE(r.finished.reason, FinishReason::EndOfGeneration);
  QVERIFY2(r.text.size() > 6 && (r.text.ends_with(" of noise") || r.text.ends_with(" of light")), r.text.c_str());
  QVERIFY(held_after_trigger(r.text, trigger, words, &count));
  QCOMPARE(count, 1);
  // A trigger needs a grammar.
  GenerationRequest bad = request(*m_engine, "Once upon a time", 0.0f, 1, nullptr);
  bad.grammar_trigger = trigger;
  QVERIFY(!m_engine->add_request(bad).is_ok());
}

// tool_choice "required": the reply opens with the trigger and the held value, marker to marker;
// then more calls or the end (parallel calls), or the end right there (one call).
void TestStructuredOutput::forcedTriggerOpensTheReply() {
  const std::vector<std::string> calls = {"\nyes\n</tool_call>", "\nno\n</tool_call>"};
  for (const bool ends : {true, false}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      GenerationRequest q =
          request(*m_engine, "Once upon a time", 0.9f, seed, framed_choices({"yes", "no"}, "\n", "\n</tool_call>"));
      q.grammar_trigger = "<tool_call>";
      q.is_grammar_trigger_forced = true;
      q.ends_after_grammar = ends;
      q.max_new_tokens = 60;
      const Reply r = generate(*m_engine, q);
      QVERIFY2(r.text.rfind("<tool_call>\n", 0) == 0, r.text.c_str());
      int count = 0;
      QVERIFY2(held_after_trigger(r.text, "<tool_call>", calls, &count), r.text.c_str());
      QVERIFY(count >= 1);
      if (ends) {
        QCOMPARE(count, 1);
        QVERIFY2(r.text.ends_with("</tool_call>"), r.text.c_str());
        QCOMPARE(r.finished.reason, FinishReason::EndOfGeneration);
        QVERIFY(!m_engine->tokenizer().is_end_of_generation(r.tokens.back()));  // ended by the grammar
      } else {
        const bool model_ended = r.finished.reason == FinishReason::EndOfGeneration &&
                                 m_engine->tokenizer().is_end_of_generation(r.tokens.back());
        QVERIFY2(model_ended || r.finished.reason == FinishReason::MaxTokens, r.text.c_str());
      }
    }
  }
}

// Llama 3's calls: the trigger ("{" there) is the value's own first byte and counts only at the
// reply's start. Here the story model's greedy reply opens with ",": with "," as the trigger the
// reply is one of the held values; a trigger found later ("like") changes nothing.
void TestStructuredOutput::triggerAtTheStartIsTheValuesOwn() {
  const Reply free = generate(*m_engine, request(*m_engine, "Once upon a time", 0.0f, 1, nullptr));
  QVERIFY2(free.text.rfind(",", 0) == 0 && free.text.find(" like") != std::string::npos, free.text.c_str());
  GenerationRequest q = request(*m_engine, "Once upon a time", 0.0f, 1, framed_choices({", yes", ", no"}, "", ""));
  q.grammar_trigger = ",";
  q.is_trigger_in_grammar = true;
  q.is_trigger_at_start = true;
  q.ends_after_grammar = true;
  const Reply held = generate(*m_engine, q);
  QVERIFY2(held.text == ", yes" || held.text == ", no", held.text.c_str());
  QCOMPARE(held.finished.reason, FinishReason::EndOfGeneration);
  GenerationRequest later = request(*m_engine, "Once upon a time", 0.0f, 1, framed_choices({" like it"}, "", ""));
  later.grammar_trigger = " like";
  later.is_trigger_in_grammar = true;
  later.is_trigger_at_start = true;
  QCOMPARE(generate(*m_engine, later).text, free.text);
  // Forced: the reply is the value from its first byte.
  GenerationRequest forced = request(*m_engine, "Once upon a time", 0.0f, 1, framed_choices({"{yes}", "{no}"}, "", ""));
  forced.grammar_trigger = "{";
  forced.is_trigger_in_grammar = true;
  forced.is_trigger_at_start = true;
  forced.is_grammar_trigger_forced = true;
  forced.ends_after_grammar = true;
  const Reply opened = generate(*m_engine, forced);
  QVERIFY2(opened.text == "{yes}" || opened.text == "{no}", opened.text.c_str());
}

// Greedy speculation with a lazy grammar (tool calls): the same reply as plain decoding, and
// guesses were drafted and verified through the free text, the trigger and the held values.
void TestStructuredOutput::greedySpeculationKeepsToTheTrigger() {
  auto engine = load_with_lookup(m_aidreams);
  QVERIFY(engine.is_ok());
  // The free reply's start in the prompt: lookup finds guesses in it.
  const std::string story = generate(**engine, request(**engine, "Once upon a time", 0.0f, 1, nullptr)).text;
  const std::string prompt = "Once upon a time" + story.substr(0, 150) + "\nOnce upon a time";
  const auto run = [&](int32_t num_draft_tokens, int64_t* num_drafted) {
    GenerationRequest q = request(**engine, prompt, 0.0f, 1, framed_choices({" noise", " light"}, "", ""));
    q.grammar_trigger = " of";
    q.max_new_tokens = 40;
    q.num_draft_tokens = num_draft_tokens;
    return generate(**engine, std::move(q), num_drafted).text;
  };
  int64_t drafted = 0, plain_drafted = 0;
  const std::string speculated = run(-1, &drafted);
  const std::string plain = run(0, &plain_drafted);
  QVERIFY(drafted > 0);
  QCOMPARE(plain_drafted, int64_t(0));
  QCOMPARE(speculated, plain);
  int count = 0;
  QVERIFY2(held_after_trigger(plain, " of", {" noise", " light"}, &count), plain.c_str());
  QVERIFY2(count >= 1, plain.c_str());
}

// Mistral's calls open with a control token ([TOOL_CALLS]) and repeat without a separator. With
// control tokens shown, such a token may write the trigger (a grammar's raw marker) but never a
// held value's text, even where its text would fit: here BOS ("<s>") is the trigger, biased far
// above every other token, and the held value a text that "<s>" could be part of.
void TestStructuredOutput::controlTokensWriteOnlyMarkers() {
  const int32_t bos = m_engine->tokenizer().bos();
  Result<std::shared_ptr<const JsonGrammar>> text = JsonGrammar::from_regex("[a-z<>]{2,6}");
  QVERIFY(text.is_ok());
  GenerationRequest q = request(*m_engine, "Once upon a time", 0.0f, 1, *text);
  q.render_special_tokens = true;
  q.grammar_trigger = "<s>";
  q.grammar_separator = "";
  q.is_grammar_trigger_forced = true;
  q.max_new_tokens = 16;
  q.sampling.logit_bias.emplace_back(bos, 100.0f);
  const Reply r = generate(*m_engine, q);
  QCOMPARE(r.finished.reason, FinishReason::MaxTokens);
  QCOMPARE(r.tokens.front(), bos);
  // <s> then a text, again and again: each <s> the control token, each text written in letters.
  std::vector<std::string> values;
  for (const int32_t token : r.tokens) {
    if (token == bos) {
      values.emplace_back();
    } else {
      values.back() += m_engine->tokenizer().token_to_piece(token);
    }
  }
  QVERIFY2(values.size() >= 3, r.text.c_str());
  std::string joined;
  for (size_t i = 0; i < values.size(); ++i) {
    joined += "<s>" + values[i];
    const bool is_last = i + 1 == values.size();
    QVERIFY2(values[i].size() <= 6 && (is_last || values[i].size() >= 2), r.text.c_str());
    QVERIFY2(values[i].find_first_not_of("abcdefghijklmnopqrstuvwxyz<>") == std::string::npos, r.text.c_str());
  }
  QCOMPARE(r.text, joined);
}

QTEST_GUILESS_MAIN(TestStructuredOutput)
#include "test_structured_output.moc"
