// Continuous batching through the paged KV cache, end to end on the engine: greedy generation
// of several different prompts served together produces exactly the tokens of one-at-a-time
// runs (aidreams, generated llama, qwen2 and gemma3 models with a sliding window, a deepseek2
// one whose values live in the cache's key rows, and glm4moe with its MTP head drafting), also
// when a tiny KV budget forces preemptions; a shared prompt prefix is served from the prefix
// cache with fewer blocks; a prompt that can never fit is refused while others go on; abort
// mid-batch; the KV snapshot and the memory report describe what the cache holds.
#include "tiny_models.h"

#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <map>
#include <random>
#include "test_paths.h"

using namespace iwb;

namespace {

std::vector<int32_t> random_prompt(int64_t vocab, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = pick(rng);
  return tokens;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_new) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0.0f;  // the default repeat penalty stays on: each request's own history
  r.stop_at_end_of_generation = false;
  return r;
}

struct Outcome {
  std::vector<int32_t> tokens;
  RequestFinished finished;
  int num_finished = 0;
};

// What the steps showed while the engine ran until idle.
struct RunLog {
  std::map<RequestId, Outcome> outcomes;
  int max_sequences_in_step = 0;
  int64_t num_preemptions = 0;
  int64_t peak_used_blocks = 0;
  int64_t num_drafted = 0;  // guesses verified (speculation on)
  bool is_ok = true;
};

void run_until_idle(Engine& engine, RunLog* log) {
  while (engine.has_unfinished_requests()) {
    Result<StepResult> s = engine.step();
    if (!s) {
      log->is_ok = false;
      return;
    }
    for (const TokenEvent& e : s->tokens) log->outcomes[e.request].tokens.push_back(e.token);
    for (const RequestFinished& f : s->finished) {
      log->outcomes[f.request].finished = f;
      log->outcomes[f.request].num_finished += 1;
    }
    log->max_sequences_in_step = std::max(log->max_sequences_in_step, s->stats.num_sequences);
    log->num_preemptions += s->stats.num_preemptions;
    log->peak_used_blocks = std::max(log->peak_used_blocks, s->stats.kv.num_used_blocks);
    log->num_drafted += s->stats.speculation.num_drafted;
  }
}

// Each request alone on its own engine: the tokens batching must reproduce.
std::vector<std::vector<int32_t>> one_at_a_time(const std::string& path, const EngineOptions& options,
                                                const std::vector<GenerationRequest>& requests) {
  std::vector<std::vector<int32_t>> out;
  for (const GenerationRequest& r : requests) {
    auto engine = Engine::load(path, options);
    if (!engine) return {};
    Result<RequestId> id = (*engine)->add_request(r);
    if (!id) return {};
    RunLog log;
    run_until_idle(**engine, &log);
    out.push_back(log.outcomes[*id].tokens);
  }
  return out;
}

// Prompts of different lengths: shorter and longer than a block and than the step budget.
std::vector<GenerationRequest> mixed_requests(int64_t vocab) {
  const size_t lengths[] = {5, 17, 40, 3, 70};
  const int32_t generated[] = {24, 16, 20, 30, 12};
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < std::size(lengths); ++i) {
    requests.push_back(greedy(random_prompt(vocab, lengths[i], 100 + static_cast<uint32_t>(i)), generated[i]));
  }
  return requests;
}

}  // namespace

class TestBatchedGeneration : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  std::string m_aidreams;
  std::map<QString, std::string> m_models;

  std::string model_path(const QString& name) { return name == "aidreams" ? m_aidreams : m_models[name]; }

  // KV bytes of one block of `block_size` positions for the model at `path`.
  uint64_t block_bytes(const std::string& path, int32_t block_size) {
    auto engine = Engine::load(path, {.context_length = 0, .num_threads = 2, .kv_cache_type = {}});
    return engine ? (*engine)->memory_report().kv_bytes_per_position * static_cast<uint64_t>(block_size) : 0;
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    const std::string dir = iwb::test::shared_models_dir() + "/llama2c/";
    if (QFile::exists(QString::fromStdString(dir + "aidreams260K.bin"))) {
      m_aidreams = m_tmp.filePath("aidreams.gguf").toStdString();
      auto converted =
          convert::convert_llama2c_to_gguf(dir + "aidreams260K.bin", dir + "aidreams260K-tok512.bin", m_aidreams, {});
      QVERIFY2(converted.is_ok(), converted.error_message().c_str());
    }
    test::TinyModelSpec llama;
    test::TinyModelSpec qwen;
    qwen.arch = "qwen2";
    qwen.has_qkv_bias = true;
    qwen.preset = test::WeightPreset::MixedK;
    test::TinyModelSpec gemma;
    gemma.arch = "gemma3";
    gemma.n_layer = 3;
    gemma.sliding_window = 8;  // shorter than most prompts: the window crosses block boundaries
    for (const auto& [name, spec] :
         {std::pair{QString("llama"), llama}, {QString("qwen2"), qwen}, {QString("gemma3"), gemma}}) {
      const std::string path = m_tmp.filePath(name + ".gguf").toStdString();
      const Status s = test::write_tiny_model(spec, path);
      QVERIFY2(s.is_ok(), s.message().c_str());
      m_models[name] = path;
    }
    // iwb synth's small shapes in Q8_0: deepseek2 (latent attention: values read from the key
    // rows of the paged cache), glm4moe with its prediction layer, run with the MTP drafter
    // ("-mtp": speculation on, so its head's catch-up, rollback and cache go through batching,
    // preemption and recomputation), and gemma4 (a cache of layers of their own KV heads and
    // head sizes; a sliding window of 8 across block boundaries; experts beside the dense FFN).
    for (const auto& [name, preset] :
         {std::pair{QString("deepseek2"), "test-deepseek2"}, std::pair{QString("glm4moe-mtp"), "test-glm4moe"},
          std::pair{QString("gemma4"), "test-gemma4"}}) {
      synth::SynthOptions o;
      o.shape = *synth::find_synth_preset(preset);
      o.weight_type = "Q8_0";
      o.output_path = m_tmp.filePath(name + ".gguf").toStdString();
      QVERIFY(synth::synthesize_model(o).is_ok());
      m_models[name] = o.output_path;
    }
  }

  // "-mtp" rows draft with the model's MTP head; the tokens must not change.
  static void speculate_if_asked(const QString& model, Engine& engine) {
    if (!model.endsWith(QStringLiteral("-mtp"))) return;
    spec::SpeculativeConfig c;
    c.kind = spec::DrafterKind::Mtp;
    c.num_draft_tokens = 3;
    const Status s = engine.set_speculation(c);
    QVERIFY2(s.is_ok(), s.message().c_str());
  }

  void batchedGreedyMatchesOneAtATime_data() {
    QTest::addColumn<QString>("model");
    for (const char* m : {"aidreams", "llama", "qwen2", "gemma3", "deepseek2", "glm4moe-mtp", "gemma4"}) {
      QTest::newRow(m) << m;
    }
  }

  // Five prompts at once, a 32-token step budget (long prompts prefill in chunks beside the
  // others' decodes), against each prompt run alone. In batch-invariant mode, so the tokens
  // must be equal by design: the fast kernels take other code for other token counts, whose
  // sums round differently, and a near-tie of two logits may flip (on the tiny qwen2 model,
  // the tenth token of the 70-token prompt's answer did when the token lanes took over steps
  // of 17-31 tokens from the AMX tiles).
  void batchedGreedyMatchesOneAtATime() {
    QFETCH(QString, model);
    const std::string path = model_path(model);
    if (path.empty()) QSKIP("shared aidreams model absent");
    EngineOptions options{.context_length = 0, .num_threads = 2, .max_batch_tokens = 32, .kv_cache_type = {}};
    options.is_batch_invariant = true;
    auto engine = Engine::load(path, options);
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    speculate_if_asked(model, **engine);
    const std::vector<GenerationRequest> requests = mixed_requests((*engine)->config().vocab_size);
    const auto expected = one_at_a_time(path, options, requests);
    QCOMPARE(expected.size(), requests.size());

    std::vector<RequestId> ids;
    for (const GenerationRequest& r : requests) ids.push_back(*(*engine)->add_request(r));
    RunLog log;
    run_until_idle(**engine, &log);
    QVERIFY(log.is_ok);
    QVERIFY2(log.max_sequences_in_step >= 4, "the requests were not served together");
    QVERIFY(!model.endsWith(QStringLiteral("-mtp")) || log.num_drafted > 0);
    for (size_t i = 0; i < ids.size(); ++i) {
      const Outcome& o = log.outcomes[ids[i]];
      QCOMPARE(o.num_finished, 1);
      QCOMPARE(o.finished.reason, FinishReason::MaxTokens);
      QCOMPARE(o.tokens, expected[i]);
      QCOMPARE(o.finished.num_generated_tokens, requests[i].max_new_tokens);
    }
    QCOMPARE(log.num_preemptions, int64_t(0));
    const EngineKvSnapshot idle = (*engine)->kv_snapshot();
    QCOMPARE(idle.cache.stats.num_used_blocks, int64_t(0));  // everything went back to the pool
    QVERIFY(idle.sequences.empty());
  }

  void preemptedGenerationMatchesOneAtATime_data() {
    QTest::addColumn<QString>("model");
    for (const char* m : {"aidreams", "qwen2", "gemma3", "deepseek2", "glm4moe-mtp", "gemma4"}) QTest::newRow(m) << m;
  }

  // Room for 14 blocks of 8 tokens where the five sequences grow to 33 blocks together:
  // sequences are preempted, recomputed, and still produce exactly their tokens (batch-invariant
  // mode, as above).
  void preemptedGenerationMatchesOneAtATime() {
    QFETCH(QString, model);
    const std::string path = model_path(model);
    if (path.empty()) QSKIP("shared aidreams model absent");
    EngineOptions roomy{.context_length = 0, .num_threads = 2, .max_batch_tokens = 32, .kv_cache_type = {}};
    roomy.kv_block_size = 8;
    roomy.is_batch_invariant = true;
    EngineOptions tiny = roomy;
    tiny.kv_cache_bytes = 14 * block_bytes(path, 8);
    tiny.enable_prefix_caching = model != "qwen2";  // recomputation with and without cached blocks
    auto engine = Engine::load(path, tiny);
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    speculate_if_asked(model, **engine);
    QCOMPARE((*engine)->memory_report().kv_num_blocks, int64_t(14));
    const std::vector<GenerationRequest> requests = mixed_requests((*engine)->config().vocab_size);
    const auto expected = one_at_a_time(path, roomy, requests);
    QCOMPARE(expected.size(), requests.size());

    std::vector<RequestId> ids;
    for (const GenerationRequest& r : requests) ids.push_back(*(*engine)->add_request(r));
    RunLog log;
    run_until_idle(**engine, &log);
    QVERIFY(log.is_ok);
    QVERIFY2(log.num_preemptions > 0, "the tiny KV budget forced no preemption");
    QVERIFY(!model.endsWith(QStringLiteral("-mtp")) || log.num_drafted > 0);
    QVERIFY(log.peak_used_blocks <= 14);
    int64_t num_reported = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const Outcome& o = log.outcomes[ids[i]];
      QCOMPARE(o.num_finished, 1);
      QCOMPARE(o.finished.reason, FinishReason::MaxTokens);
      QCOMPARE(o.tokens, expected[i]);
      num_reported += o.finished.num_preemptions;
    }
    QCOMPARE(num_reported, log.num_preemptions);
    QCOMPARE((*engine)->kv_snapshot().scheduler.num_preemptions, log.num_preemptions);
  }

  // A 48-token prefix shared by four prompts: the later three find its three blocks cached
  // (while the first still runs, the blocks are shared), use fewer blocks than without prefix
  // caching, and generate what they would alone.
  void sharedPrefixHitsThePrefixCache() {
    const std::string path = m_models["llama"];
    EngineOptions options{.context_length = 0, .num_threads = 2, .max_batch_tokens = 64, .kv_cache_type = {}};
    EngineOptions uncached = options;
    uncached.enable_prefix_caching = false;
    const std::vector<int32_t> prefix = random_prompt(320, 48, 7);
    std::vector<GenerationRequest> requests;
    for (uint32_t i = 0; i < 4; ++i) {
      std::vector<int32_t> prompt = prefix;
      const std::vector<int32_t> suffix = random_prompt(320, 5 + i, 20 + i);
      prompt.insert(prompt.end(), suffix.begin(), suffix.end());
      requests.push_back(greedy(std::move(prompt), 12));
    }
    const auto expected = one_at_a_time(path, uncached, requests);
    QCOMPARE(expected.size(), requests.size());

    auto serve = [&](const EngineOptions& o, RunLog* log, std::vector<RequestId>* ids) {
      auto engine = Engine::load(path, o);
      QVERIFY(engine.is_ok());
      ids->push_back(*(*engine)->add_request(requests[0]));
      Result<StepResult> first = (*engine)->step();  // the first prompt is computed (and cached)
      QVERIFY(first.is_ok());
      for (const TokenEvent& e : first->tokens) log->outcomes[e.request].tokens.push_back(e.token);
      for (size_t i = 1; i < requests.size(); ++i) ids->push_back(*(*engine)->add_request(requests[i]));
      run_until_idle(**engine, log);
      QVERIFY(log->is_ok);
      const BlockManagerStats st = (*engine)->kv_snapshot().cache.stats;
      if (o.enable_prefix_caching) {
        QVERIFY(st.prefix_hit_rate > 0);
        QCOMPARE(st.num_prefix_hit_tokens, int64_t(3 * 48));
      } else {
        QCOMPARE(st.num_prefix_hit_tokens, int64_t(0));
      }
    };
    RunLog cached, plain;
    std::vector<RequestId> cached_ids, plain_ids;
    serve(options, &cached, &cached_ids);
    serve(uncached, &plain, &plain_ids);
    QVERIFY2(cached.peak_used_blocks < plain.peak_used_blocks,
             qPrintable(QString("%1 blocks with the prefix cache, %2 without")
                            .arg(cached.peak_used_blocks)
                            .arg(plain.peak_used_blocks)));
    for (size_t i = 0; i < requests.size(); ++i) {
      QCOMPARE(cached.outcomes[cached_ids[i]].tokens, expected[i]);
      QCOMPARE(plain.outcomes[plain_ids[i]].tokens, expected[i]);
      QCOMPARE(cached.outcomes[cached_ids[i]].finished.num_reused_prompt_tokens, i == 0 ? 0 : 48);
    }
  }

  // 4 blocks of 16 tokens in all: a 100-token prompt can never fit and is refused with the
  // reason; the requests that fit run to completion.
  void promptThatCanNeverFitIsRefused() {
    const std::string path = m_models["llama"];
    EngineOptions options{.context_length = 128, .num_threads = 2, .kv_cache_type = {}};
    options.kv_cache_bytes = 4 * block_bytes(path, 16);
    auto engine = Engine::load(path, options);
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    Engine& e = **engine;
    const RequestId a = *e.add_request(greedy(random_prompt(320, 10, 1), 8));
    Result<RequestId> huge = e.add_request(greedy(random_prompt(320, 100, 2), 8));
    QVERIFY(!huge.is_ok());
    QCOMPARE(huge.error_message(),
             std::string("prompt is 100 tokens and needs 7 KV blocks of 16 tokens, but the whole KV "
                         "cache holds 4 (32 KiB); give the KV cache more memory"));
    const RequestId b = *e.add_request(greedy(random_prompt(320, 12, 3), 8));
    RunLog log;
    run_until_idle(e, &log);
    QVERIFY(log.is_ok);
    QCOMPARE(log.outcomes[a].finished.reason, FinishReason::MaxTokens);
    QCOMPARE(log.outcomes[b].finished.reason, FinishReason::MaxTokens);
    QCOMPARE(log.outcomes[b].tokens.size(), size_t(8));
    // The pool (64 positions) is smaller than the context (128): a sequence ends when it fills it.
    const RequestId c = *e.add_request(greedy(random_prompt(320, 60, 4), 100));
    RunLog full;
    run_until_idle(e, &full);
    QCOMPARE(full.outcomes[c].finished.reason, FinishReason::ContextFull);
    QCOMPARE(full.outcomes[c].tokens.size(), size_t(64 - 60 + 1));
  }

  // Three generating and one waiting (two run at most); the middle one and the waiting one are
  // aborted; the others finish with their one-at-a-time tokens and every block comes back.
  void abortMidBatch() {
    const std::string path = m_models["qwen2"];
    EngineOptions options{.context_length = 0, .num_threads = 2, .max_batch_tokens = 64, .kv_cache_type = {}};
    options.max_running_sequences = 3;
    auto engine = Engine::load(path, options);
    QVERIFY(engine.is_ok());
    Engine& e = **engine;
    std::vector<GenerationRequest> requests;
    for (uint32_t i = 0; i < 4; ++i) requests.push_back(greedy(random_prompt(320, 10 + 3 * i, 40 + i), 16));
    const auto expected = one_at_a_time(path, options, requests);
    std::vector<RequestId> ids;
    for (const GenerationRequest& r : requests) ids.push_back(*e.add_request(r));
    RunLog log;
    for (int i = 0; i < 4; ++i) {
      Result<StepResult> s = e.step();
      QVERIFY(s.is_ok());
      for (const TokenEvent& t : s->tokens) log.outcomes[t.request].tokens.push_back(t.token);
      QVERIFY(s->finished.empty());
    }
    const EngineKvSnapshot during = e.kv_snapshot();
    QCOMPARE(during.scheduler.num_running, int64_t(3));
    QCOMPARE(during.scheduler.num_waiting, int64_t(1));
    QCOMPARE(during.sequences.size(), size_t(4));
    QCOMPARE(during.sequences.front().request, ids[3]);  // waiting ones first
    QVERIFY(!during.sequences.front().is_running);
    e.abort_request(ids[1]);
    e.abort_request(ids[3]);
    e.abort_request(12345);  // unknown: ignored
    Result<StepResult> s = e.step();
    QVERIFY(s.is_ok());
    QCOMPARE(s->finished.size(), size_t(2));
    for (const RequestFinished& f : s->finished) {
      QCOMPARE(f.reason, FinishReason::Aborted);
      QVERIFY(f.request == ids[1] || f.request == ids[3]);
      QCOMPARE(f.num_generated_tokens, f.request == ids[1] ? 4 : 0);
    }
    for (const TokenEvent& t : s->tokens) {
      QVERIFY(t.request == ids[0] || t.request == ids[2]);
      log.outcomes[t.request].tokens.push_back(t.token);
    }
    run_until_idle(e, &log);
    QCOMPARE(log.outcomes[ids[0]].tokens, expected[0]);
    QCOMPARE(log.outcomes[ids[2]].tokens, expected[2]);
    QCOMPARE(log.outcomes[ids[1]].tokens, std::vector<int32_t>(expected[1].begin(), expected[1].begin() + 4));
    const EngineKvSnapshot idle = e.kv_snapshot();
    QCOMPARE(idle.cache.stats.num_used_blocks, int64_t(0));
    QCOMPARE(idle.cache.stats.num_free_blocks + idle.cache.stats.num_cached_blocks, idle.cache.stats.num_blocks);
  }

  // The snapshot and the memory report during a batch agree with each other and with the
  // sequences' lengths.
  void snapshotAndMemoryReport() {
    const std::string path = m_models["llama"];
    auto engine =
        Engine::load(path, {.context_length = 0, .num_threads = 2, .max_batch_tokens = 64, .kv_cache_type = {}});
    QVERIFY(engine.is_ok());
    Engine& e = **engine;
    const MemoryReport before = e.memory_report();
    QCOMPARE(before.kv_block_size, 16);
    QCOMPARE(before.kv_positions_total, before.kv_num_blocks * 16);
    QCOMPARE(before.kv_pool_bytes, uint64_t(before.kv_positions_total) * before.kv_bytes_per_position);
    // The default pool: kDefaultKvContexts full contexts (512 positions each).
    QCOMPARE(before.kv_positions_total, kDefaultKvContexts * 512);
    QCOMPARE(before.kv_positions_used, int64_t(0));
    QVERIFY(before.weights_bytes > 0 && before.weights_bytes < before.file_bytes);
    QVERIFY(before.scratch_bytes > 0);

    const RequestId a = *e.add_request(greedy(random_prompt(320, 20, 1), 10));
    const RequestId b = *e.add_request(greedy(random_prompt(320, 35, 2), 10));
    for (int i = 0; i < 3; ++i) QVERIFY(e.step().is_ok());
    const EngineKvSnapshot snap = e.kv_snapshot();
    const MemoryReport during = e.memory_report();
    // 20 + 2 and 35 + 2 tokens hold slots (the last sampled token has none yet).
    QCOMPARE(during.kv_positions_used, int64_t(22 + 37));
    QCOMPARE(during.kv_positions_allocated, int64_t((2 + 3) * 16));
    QCOMPARE(snap.cache.stats.num_used_blocks, int64_t(5));
    QCOMPARE(snap.cache.stats.num_used_slots, during.kv_positions_used);
    QVERIFY(qAbs(snap.cache.stats.internal_fragmentation - (1.0 - 59.0 / 80.0)) < 1e-9);
    QCOMPARE(snap.sequences.size(), size_t(2));
    std::map<RequestId, SequenceId> sequence_of;
    for (const KvSequenceInfo& s : snap.sequences) {
      QVERIFY(s.is_running);
      sequence_of[s.request] = s.sequence;
      QCOMPARE(s.num_computed_tokens, s.num_tokens - 1);
    }
    QVERIFY(sequence_of.count(a) && sequence_of.count(b));
    int64_t owned = 0;
    for (const BlockSnapshot& block : snap.cache.blocks) {
      if (block.state != BlockState::InUse) continue;
      QCOMPARE(block.owners.size(), size_t(1));
      owned += block.fill;
      QVERIFY(block.owners[0] == sequence_of[a] || block.owners[0] == sequence_of[b]);
    }
    QCOMPARE(owned, during.kv_positions_used);
    RunLog log;
    run_until_idle(e, &log);
    const MemoryReport after = e.memory_report();
    QCOMPARE(after.kv_positions_used, int64_t(0));
    QCOMPARE(after.kv_positions_cached, int64_t((1 + 2) * 16));  // the prompts' full blocks stay cached
  }
};

QTEST_GUILESS_MAIN(TestBatchedGeneration)
#include "test_batched_generation.moc"
