// The engine's step API on the real aidreams model (converted here) and on generated models:
// deterministic greedy and seeded sampling, the stop rules (end of generation, stop strings
// held back and never shown, max tokens, full context), prompts longer than the context,
// abort of running and queued requests, cached-prefix reuse, chat prompts without a double
// BOS, and clear errors for models that cannot load. (Several requests served together:
// test_batched_generation.)
#include "tiny_models.h"

#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "runtime/request_state.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>
#include "test_paths.h"

using namespace iwb;

namespace {

struct Generation {
  std::vector<int32_t> tokens;
  std::string text;
  RequestFinished finished;
  int num_finished = 0;
};

GenerationRequest make_request(std::vector<int32_t> prompt, int max_new, float temperature = 0.0f, uint64_t seed = 1) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;  // the default repeat penalty (1.1) stays on, greedy included
  return r;
}

// Runs every step until the engine is idle; collects the events of request `id`.
Generation run_all(Engine& engine, RequestId id) {
  Generation g;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> s = engine.step();
    if (!s) break;
    for (const TokenEvent& e : s->tokens) {
      if (e.request != id) continue;
      g.tokens.push_back(e.token);
      g.text += e.text;
    }
    for (const RequestFinished& f : s->finished) {
      if (f.request != id) continue;
      g.finished = f;
      g.num_finished += 1;
    }
  }
  return g;
}

Generation generate(Engine& engine, GenerationRequest r) {
  Result<RequestId> id = engine.add_request(std::move(r));
  if (!id) return {};
  return run_all(engine, *id);
}

}  // namespace

class TestEngineGeneration : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;
  std::string m_aidreams;  // empty when the shared model is absent
  std::unique_ptr<Engine> m_engine;

  std::vector<int32_t> encode(const std::string& text) { return m_engine->tokenizer().encode(text); }

  // The engine's answer to loading a tiny model written from `spec` (the write's own error when
  // that fails).
  Status load_status(const test::TinyModelSpec& spec, const char* file) {
    const std::string path = m_tmp.filePath(file).toStdString();
    if (Status written = test::write_tiny_model(spec, path); !written) return written;
    auto engine = Engine::load(path, {});
    return engine ? Status{} : engine.status();
  }

  std::unique_ptr<Engine> load(int64_t context) {
    auto e = Engine::load(m_aidreams, {context, 2});
    return e ? std::move(*e) : nullptr;
  }

 private slots:
  void initTestCase() {
    const std::string dir = iwb::test::shared_models_dir() + "/llama2c/";
    if (!QFile::exists(QString::fromStdString(dir + "aidreams260K.bin"))) return;
    m_aidreams = m_tmp.filePath("aidreams.gguf").toStdString();
    auto converted =
        convert::convert_llama2c_to_gguf(dir + "aidreams260K.bin", dir + "aidreams260K-tok512.bin", m_aidreams, {});
    QVERIFY2(converted.is_ok(), converted.error_message().c_str());
    std::vector<std::string> stages;
    auto engine = Engine::load(m_aidreams, {0, 2}, [&](double, const std::string& stage) { stages.push_back(stage); });
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    m_engine = std::move(*engine);
    QCOMPARE(m_engine->context_length(), int64_t(128));  // the model's trained context
    QVERIFY(stages.size() >= 3);
    QCOMPARE(stages.back(), std::string("ready"));
  }

  void init() {
    if (m_aidreams.empty()) QSKIP("shared aidreams model absent");
  }

  void greedyIsDeterministic() {
    const auto prompt = encode("Once upon a time");
    const Generation a = generate(*m_engine, make_request(prompt, 40));
    const Generation b = generate(*m_engine, make_request(prompt, 40));  // cached prefix reused
    auto fresh = load(0);
    QVERIFY(fresh);
    const Generation c = generate(*fresh, make_request(prompt, 40));
    QCOMPARE(a.tokens.size(), size_t(40));
    QVERIFY(a.text.size() > 40);
    QCOMPARE(b.tokens, a.tokens);
    QCOMPARE(c.tokens, a.tokens);
    QCOMPARE(a.text, c.text);
    QCOMPARE(a.finished.reason, FinishReason::MaxTokens);
    QCOMPARE(a.finished.num_generated_tokens, 40);
    QCOMPARE(a.finished.num_prompt_tokens, static_cast<int32_t>(prompt.size()));
    QVERIFY(a.finished.prompt_seconds > 0 && a.finished.generation_seconds > 0);
  }

  // The weights read into memory (llama.cpp's load mode none) and mapped from the file give the
  // same logits bit for bit, and the model says where its weights are.
  void readAndMappedWeightsAgree() {
    EngineOptions read_options{0, 2};
    read_options.load_mode = "none";
    EngineOptions mapped_options{0, 2};
    mapped_options.load_mode = "mmap";
    auto read = Engine::load(m_aidreams, read_options);
    auto mapped = Engine::load(m_aidreams, mapped_options);
    QVERIFY2(read.is_ok(), read.error_message().c_str());
    QVERIFY2(mapped.is_ok(), mapped.error_message().c_str());
    QVERIFY2((*read)->model().weights_memory.starts_with("read into memory"), (*read)->model().weights_memory.c_str());
    QVERIFY2((*mapped)->model().weights_memory.starts_with("mapped from the file"),
             (*mapped)->model().weights_memory.c_str());
    const auto prompt = encode("Once upon a time");
    Result<std::vector<float>> a = (*read)->logits_for(prompt);
    Result<std::vector<float>> b = (*mapped)->logits_for(prompt);
    QVERIFY(a.is_ok() && b.is_ok());
    QVERIFY(*a == *b);
    // mlock: mapped and locked (or, where the kernel refuses, said so), the same logits.
    EngineOptions lock_options{0, 2};
    lock_options.load_mode = "mlock";
    auto locked = Engine::load(m_aidreams, lock_options);
    QVERIFY2(locked.is_ok(), locked.error_message().c_str());
    const std::string& memory = (*locked)->model().weights_memory;
    QVERIFY2(memory.find("mapped from the file (load mode mlock), locked in memory") != std::string::npos ||
                 memory.find("not locked: cannot lock its") != std::string::npos,
             memory.c_str());
    Result<std::vector<float>> c = (*locked)->logits_for(prompt);
    QVERIFY(c.is_ok() && *c == *a);
    EngineOptions unknown{0, 2};
    unknown.load_mode = "dio";
    auto refused = Engine::load(m_aidreams, unknown);
    QVERIFY(!refused.is_ok());
    QVERIFY2(refused.error_message().find("unknown load mode 'dio': auto, mmap, mlock or none") != std::string::npos,
             refused.error_message().c_str());
  }

  void seededSamplingRepeats() {
    const auto prompt = encode("I dream");
    GenerationRequest r = make_request(prompt, 40, 1.0f, 42);
    r.stop_at_end_of_generation = false;
    const Generation a = generate(*m_engine, r);
    const Generation b = generate(*m_engine, r);
    r.sampling.seed = 43;
    const Generation c = generate(*m_engine, r);
    QCOMPARE(a.tokens.size(), size_t(40));
    QCOMPARE(a.tokens, b.tokens);
    QVERIFY(a.tokens != c.tokens);
  }

  void stopsAtEndOfGeneration() {
    const auto prompt = encode("I dream");
    const Generation g = generate(*m_engine, make_request(prompt, 0));  // no token limit
    QCOMPARE(g.finished.reason, FinishReason::EndOfGeneration);
    QVERIFY(!g.tokens.empty());
    QVERIFY(m_engine->tokenizer().is_end_of_generation(g.tokens.back()));
    QCOMPARE(g.finished.num_generated_tokens, static_cast<int32_t>(g.tokens.size()));
    // Told to ignore it, the same request runs on past the end-of-generation token.
    GenerationRequest r = make_request(prompt, static_cast<int>(g.tokens.size()) + 5);
    r.stop_at_end_of_generation = false;
    const Generation longer = generate(*m_engine, r);
    QCOMPARE(longer.finished.reason, FinishReason::MaxTokens);
    QCOMPARE(longer.tokens.size(), g.tokens.size() + 5);
  }

  void stopStringIsHeldBackAndNeverShown() {
    const auto prompt = encode("Once upon a time");
    const Generation full = generate(*m_engine, make_request(prompt, 60));
    const std::string stop = "as I adapt";
    const size_t at = full.text.find(stop);
    QVERIFY2(at != std::string::npos && at > 0, full.text.c_str());

    GenerationRequest r = make_request(prompt, 60);
    r.stop_strings = {stop};
    Result<RequestId> id = m_engine->add_request(r);
    QVERIFY(id.is_ok());
    std::string shown;
    Generation g;
    while (m_engine->has_unfinished_requests()) {
      Result<StepResult> s = m_engine->step();
      QVERIFY(s.is_ok());
      for (const TokenEvent& e : s->tokens) {
        shown += e.text;
        // Never any part of the stop string beyond the text before it.
        QVERIFY2(full.text.compare(0, shown.size(), shown) == 0 && shown.size() <= at, shown.c_str());
      }
      for (const RequestFinished& f : s->finished) g.finished = f;
    }
    QCOMPARE(g.finished.reason, FinishReason::StopString);
    QCOMPARE(shown, full.text.substr(0, at));

    // A stop string that starts like the text but never completes holds nothing back at the end.
    r.stop_strings = {"as I adapt to the zebra"};
    const Generation unmatched = generate(*m_engine, r);
    QCOMPARE(unmatched.finished.reason, FinishReason::MaxTokens);
    QCOMPARE(unmatched.text, full.text);
  }

  void contextFullEndsGeneration() {
    auto engine = load(32);
    QVERIFY(engine);
    QCOMPARE(engine->context_length(), int64_t(32));
    std::vector<int32_t> prompt = encode("Once upon a time, the dream of a machine");
    prompt.resize(20);
    GenerationRequest r = make_request(prompt, 100);
    r.stop_at_end_of_generation = false;
    const Generation g = generate(*engine, r);
    QCOMPARE(g.finished.reason, FinishReason::ContextFull);
    QCOMPARE(g.tokens.size(), size_t(32 - 20 + 1));  // the last one is sampled, never stored
  }

  void promptLongerThanContextIsRefused() {
    auto engine = load(32);
    QVERIFY(engine);
    std::vector<int32_t> prompt(33, 100);
    Result<RequestId> id = engine->add_request(make_request(prompt, 5));
    QVERIFY(!id.is_ok());
    QCOMPARE(id.error_message(), std::string("prompt is 33 tokens but the context holds 32"));
    prompt.resize(32);  // exactly the context: one token, then the context is full
    const Generation g = generate(*engine, make_request(prompt, 5));
    QCOMPARE(g.finished.reason, FinishReason::ContextFull);
    QCOMPARE(g.tokens.size(), size_t(1));
    QVERIFY(!engine->add_request(make_request({}, 5)).is_ok());
    QVERIFY(!engine->add_request(make_request({1, 512}, 5)).is_ok());  // vocabulary has 512 ids
  }

  void abortStopsRunningAndQueuedRequests() {
    const auto prompt = encode("Once upon a time");
    RequestId running = *m_engine->add_request(make_request(prompt, 50));
    int running_tokens = 0;
    for (int i = 0; i < 3; ++i) {
      Result<StepResult> s = m_engine->step();
      QVERIFY(s.is_ok());
      for (const TokenEvent& e : s->tokens) {
        QCOMPARE(e.request, running);
        ++running_tokens;
      }
    }
    QCOMPARE(running_tokens, 3);
    // Queued: added, not yet taken by a step.
    RequestId queued = *m_engine->add_request(make_request(prompt, 50));
    RequestId later = *m_engine->add_request(make_request(encode("I dream"), 3));
    m_engine->abort_request(queued);
    m_engine->abort_request(running);
    m_engine->abort_request(9999);  // unknown: ignored
    Result<StepResult> s = m_engine->step();
    QVERIFY(s.is_ok());
    // The step that carries out the aborts already serves `later` (its prompt, its first token).
    QCOMPARE(s->tokens.size(), size_t(1));
    QCOMPARE(s->tokens[0].request, later);
    QCOMPARE(s->finished.size(), size_t(2));
    for (const RequestFinished& f : s->finished) QCOMPARE(f.reason, FinishReason::Aborted);
    QCOMPARE(s->finished[0].request, queued);
    QCOMPARE(s->finished[0].num_generated_tokens, 0);
    QCOMPARE(s->finished[1].request, running);
    QCOMPARE(s->finished[1].num_generated_tokens, 3);
    const Generation rest = run_all(*m_engine, later);
    QCOMPARE(rest.finished.reason, FinishReason::MaxTokens);
    QCOMPARE(rest.tokens.size(), size_t(3 - 1));
    QVERIFY(!m_engine->has_unfinished_requests());
    Result<StepResult> idle = m_engine->step();
    QVERIFY(idle.is_ok() && idle->tokens.empty() && idle->finished.empty());
  }

  void continuingFromACachedPrefixMatchesAFreshStart() {
    const auto prompt = encode("I dream");
    const Generation first = generate(*m_engine, make_request(prompt, 20));
    std::vector<int32_t> longer = prompt;
    longer.insert(longer.end(), first.tokens.begin(), first.tokens.begin() + 10);
    const Generation cached = generate(*m_engine, make_request(longer, 10));
    auto fresh = load(0);
    QVERIFY(fresh);
    const Generation expected = generate(*fresh, make_request(longer, 10));
    QCOMPARE(cached.tokens, expected.tokens);
    QCOMPARE(cached.tokens, std::vector<int32_t>(first.tokens.begin() + 10, first.tokens.end()));
  }

  void logitsForWaitsForAnIdleEngine() {
    RequestId id = *m_engine->add_request(make_request(encode("I dream"), 5));
    QVERIFY(m_engine->step().is_ok());
    QVERIFY(!m_engine->logits_for({1, 2, 3}).is_ok());
    run_all(*m_engine, id);
    Result<std::vector<float>> logits = m_engine->logits_for({1, 100});
    QVERIFY(logits.is_ok());
    QCOMPARE(logits->size(), size_t(512));
  }

  // GenerationRequest::render_special_tokens: a control token's text ("<s>") is streamed only
  // when asked for (harmony chats: their channels are control tokens), and only harmony asks.
  void controlTokensAreRenderedOnlyWhenAsked() {
    const tokenizer::Tokenizer& tok = m_engine->tokenizer();
    std::vector<std::string> texts;
    for (const bool render : {false, true}) {
      GenerationRequest params;
      params.render_special_tokens = render;
      params.stop_at_end_of_generation = false;
      RequestState state(1, params, RequestState::Clock::now(), tok);
      std::string text = state.accept(tok.bos(), false, tok).event.text;
      for (int32_t t : tok.encode("hi", {.add_bos = false})) text += state.accept(t, false, tok).event.text;
      texts.push_back(text);
    }
    QVERIFY(texts[0].find("hi") != std::string::npos);
    QCOMPARE(QString::fromStdString(texts[1]), QString::fromStdString("<s>" + texts[0]));
    const std::vector<ChatMessage> messages = {{"user", "Hello"}};
    for (const ChatTemplateFamily family :
         {ChatTemplateFamily::Harmony, ChatTemplateFamily::ChatMl, ChatTemplateFamily::Plain}) {
      ChatPromptOptions options;
      options.family = family;
      Result<ChatPrompt> prompt = build_chat_prompt(tok, "", messages, options);
      QVERIFY2(prompt.is_ok(), prompt.error_message().c_str());
      QCOMPARE(prompt->renders_special_tokens, family == ChatTemplateFamily::Harmony);
    }
    // Mistral's and Granite's calls open with a control token: shown when the model is shown tools.
    const std::string tool = "{\"type\": \"function\", \"function\": {\"name\": \"now\"}}";
    for (const char* jinja :
         {"{{ '[SYSTEM_PROMPT]' }}{{ '[INST]' }}{{ '[TOOL_CALLS]' }}{{ '[ARGS]' }}", "{{ '<|start_of_role|>' }}"}) {
      Result<ChatPrompt> plain = build_chat_prompt(tok, jinja, messages);
      QVERIFY2(plain.is_ok(), plain.error_message().c_str());
      QVERIFY(!plain->renders_special_tokens);
      ChatPromptOptions with_tools;
      with_tools.tools = {tool};
      Result<ChatPrompt> tools = build_chat_prompt(tok, jinja, messages, with_tools);
      QVERIFY2(tools.is_ok(), tools.error_message().c_str());
      QVERIFY(tools->renders_special_tokens && tools->tool_format);
    }
  }

  void chatPromptHasOneBos() {
    const tokenizer::Tokenizer& tok = m_engine->tokenizer();
    const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hello"}};
    // Llama 2 writes "<s>" itself: parsed as the BOS token, and no second one is added.
    ChatPromptOptions options;
    options.family = ChatTemplateFamily::Llama2;
    Result<ChatPrompt> llama2 = build_chat_prompt(tok, "", messages, options);
    QVERIFY2(llama2.is_ok(), llama2.error_message().c_str());
    QCOMPARE(llama2->text.substr(0, 10), std::string("<s>[INST] "));
    QCOMPARE(llama2->tokens[0], tok.bos());
    QVERIFY(llama2->tokens[1] != tok.bos());
    // Without a template the family is Plain, and the vocabulary's BOS is added once.
    Result<ChatPrompt> plain = build_chat_prompt(tok, "", messages);
    QVERIFY(plain.is_ok());
    QCOMPARE(plain->family, ChatTemplateFamily::Plain);
    QCOMPARE(plain->tokens[0], tok.bos());
    QVERIFY(plain->tokens[1] != tok.bos());
    QVERIFY(!build_chat_prompt(tok, "", {{"robot", "hi"}}).is_ok());
  }

  void unloadableModelsGiveClearErrors() {
    test::TinyModelSpec spec;
    spec.arch = "gptj";
    const Status a = load_status(spec, "gptj.gguf");
    QVERIFY(!a.is_ok());
    QCOMPARE(a.code(), ErrorCode::Unsupported);
    QCOMPARE(a.message(),
             std::string(
                 "architecture 'gptj' is not supported by this engine (supported: llama, qwen2, gemma3, qwen3, phi3, "
                 "qwen3moe, gpt-oss, gemma2, smollm3, olmo2, granite, glm4moe, deepseek2, gemma4, qwen35, qwen35moe)"));

    // A soft-cap of zero or below would divide by zero in cap * tanh(x / cap).
    spec.arch = "gemma2";
    spec.attn_softcap = -1.0f;
    const Status capped = load_status(spec, "gemma2-cap.gguf");
    QVERIFY(!capped.is_ok());
    QCOMPARE(capped.code(), ErrorCode::CorruptFile);
    QCOMPARE(capped.message(), std::string("'gemma2.attn_logit_softcapping' and 'gemma2.final_logit_softcapping' "
                                           "must be positive"));
    spec.attn_softcap = 0.0f;

    // OLMo 3's per-layer pattern must name every layer.
    spec.arch = "olmo2";
    spec.sliding_window = 4;
    spec.sliding_pattern = {true, false, true};
    const Status patterned = load_status(spec, "olmo2-pattern.gguf");
    QVERIFY(!patterned.is_ok());
    QCOMPARE(patterned.code(), ErrorCode::CorruptFile);
    QCOMPARE(patterned.message(), std::string("'olmo2.attention.sliding_window_pattern' has 3 entries for 2 layers"));
    spec.sliding_window = 0;
    spec.sliding_pattern.clear();

    // A layer count past llama.cpp's 512 is refused before any per-layer table is sized by it
    // (found by fuzz_gguf: four billion layers with a window kept the loader busy for minutes).
    gguf::GgufWriter huge;
    huge.set_string("general.architecture", "olmo2");
    huge.set_u32("olmo2.context_length", 256);
    huge.set_u32("olmo2.embedding_length", 64);
    huge.set_u32("olmo2.block_count", 4278190084u);
    huge.set_u32("olmo2.attention.sliding_window", 4);
    const std::vector<uint8_t> embd(64 * 8 * sizeof(float), 0);
    QVERIFY(huge.add_tensor("token_embd.weight", {64, 8}, GgmlType::F32, embd).is_ok());
    const std::string huge_path = m_tmp.filePath("huge-layers.gguf").toStdString();
    QVERIFY(huge.write_file(huge_path).is_ok());
    auto many = Engine::load(huge_path, {});
    QVERIFY(!many.is_ok());
    QCOMPARE(many.status().code(), ErrorCode::CorruptFile);
    QCOMPARE(many.error_message(), std::string("'olmo2.block_count' is 4278190084; no model has more than 512 layers"));

    spec.arch = "llama";
    spec.skip_tensor = "blk.1.ffn_up.weight";
    const Status b = load_status(spec, "missing.gguf");
    QVERIFY(!b.is_ok());
    QCOMPARE(b.message(), std::string("the model is missing tensor 'blk.1.ffn_up.weight'"));

    spec.skip_tensor.clear();
    spec.declared_n_ff = 768;
    const Status c = load_status(spec, "shape.gguf");
    QVERIFY(!c.is_ok());
    QCOMPARE(c.message(), std::string("tensor 'blk.0.ffn_gate.weight' has shape 256 x 512, expected 256 x 768"));
  }
};

QTEST_GUILESS_MAIN(TestEngineGeneration)
#include "test_engine_generation.moc"
