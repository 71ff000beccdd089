// The profiler on real steps: records arrive for every kernel of a prefill and a decode step
// (counted per op kind per layer), equal the cost model's predictions for the same shapes
// record by record (a long prompt's chunks step by step, and a batched step of several
// sequences), carry sane timings, cost nothing while profiling is off, and per-token
// timestamps reach TokenEvent and RequestFinished. Models: aidreams (llama, converted here),
// and generated qwen2 (biases, K-quant mix) and gemma3 (q/k norms, post-norms, sliding window).
#include "tiny_models.h"

#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/profile/op_costs.h"
#include "iwb/engine/profile/profile_aggregate.h"
#include "iwb/engine/runtime/engine.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <map>
#include <random>
#include "test_paths.h"

using namespace iwb;

namespace {

std::vector<int32_t> random_prompt(int64_t vocab, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t& t : tokens) t = pick(rng);
  return tokens;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_new) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0.0f;
  r.stop_at_end_of_generation = false;
  return r;
}

// Same call, same shape, same predicted cost.
void compare_records(const std::vector<KernelRecord>& measured, const std::vector<KernelRecord>& predicted) {
  QCOMPARE(measured.size(), predicted.size());
  for (size_t i = 0; i < measured.size(); ++i) {
    const KernelRecord& m = measured[i];
    const KernelRecord& p = predicted[i];
    const QByteArray where = QByteArray::number(qulonglong(i)) + ": " + m.name + " layer " +
                             QByteArray::number(m.layer) + " vs " + p.name + " layer " + QByteArray::number(p.layer);
    QVERIFY2(std::strcmp(m.name, p.name) == 0 && m.layer == p.layer && m.kind == p.kind, where.constData());
    QVERIFY2(m.phase == p.phase && m.data_type == p.data_type, where.constData());
    QVERIFY2(m.shape == p.shape, (where + " " + m.shape_text().c_str() + " vs " + p.shape_text().c_str()).constData());
    QCOMPARE(m.flops, p.flops);
    QCOMPARE(m.bytes, p.bytes);
    QVERIFY2(m.seconds >= 0 && m.seconds < 10, where.constData());
    QCOMPARE(p.seconds, 0.0);
    QCOMPARE(m.device.id(), std::string("cpu"));
  }
}

}  // namespace

class TestProfilerRecords : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  std::string m_aidreams, m_qwen, m_gemma;

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
    test::TinyModelSpec qwen;
    qwen.arch = "qwen2";
    qwen.has_qkv_bias = true;
    qwen.preset = test::WeightPreset::MixedK;
    m_qwen = m_tmp.filePath("qwen2.gguf").toStdString();
    Status s = test::write_tiny_model(qwen, m_qwen);
    QVERIFY2(s.is_ok(), s.message().c_str());
    test::TinyModelSpec gemma;
    gemma.arch = "gemma3";
    gemma.n_layer = 6;  // five sliding layers and a global one
    gemma.sliding_window = 8;
    m_gemma = m_tmp.filePath("gemma3.gguf").toStdString();
    s = test::write_tiny_model(gemma, m_gemma);
    QVERIFY2(s.is_ok(), s.message().c_str());
  }

  void matchesCostModel_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("prompt");
    QTest::addColumn<int>("batch");
    QTest::newRow("aidreams") << "aidreams" << 10 << 128;
    QTest::newRow("qwen2 in batches of 64") << "qwen2" << 150 << 64;
    QTest::newRow("gemma3 sliding window") << "gemma3" << 20 << 128;
  }

  // The prefill (in chunks of `batch` tokens, one step each, only the last with logits) and two
  // decode steps, each against predict_step for the same scenario.
  void matchesCostModel() {
    QFETCH(QString, model);
    QFETCH(int, prompt);
    QFETCH(int, batch);
    const std::string path = model == "aidreams" ? m_aidreams : model == "qwen2" ? m_qwen : m_gemma;
    if (path.empty()) QSKIP("shared aidreams model absent");
    EngineOptions options{.context_length = 0, .num_threads = 2, .max_batch_tokens = batch};
    auto engine = Engine::load(path, options);
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    auto shape = model_shape_from_gguf(path);
    QVERIFY2(shape.is_ok(), shape.error_message().c_str());
    Engine& e = **engine;
    e.set_profiling(true);
    QVERIFY(e.is_profiling());
    QVERIFY(e.add_request(greedy(random_prompt(e.config().vocab_size, prompt, 7), 3)).is_ok());

    ProfileBatch pb;
    std::vector<KernelRecord> all_prefill;
    for (int first = 0; first < prompt; first += batch) {
      auto prefill = e.step();
      QVERIFY(prefill.is_ok());
      pb = prefill->profile;
      const int n = std::min(batch, prompt - first);
      const bool is_last = first + n == prompt;
      QCOMPARE(pb.phase, Phase::Prefill);
      QCOMPARE(pb.num_tokens, n);
      QCOMPARE(pb.num_kv, int64_t(first + n));
      QCOMPARE(pb.num_dropped, 0u);
      QCOMPARE(prefill->tokens.size(), size_t(is_last ? 1 : 0));
      QCOMPARE(int64_t(pb.kernels.size()), num_step_records(shape->config, n, 0, is_last));
      auto predicted = predict_step(*shape, {Phase::Prefill, n, first, 0, is_last});
      QVERIFY(predicted.is_ok());
      compare_records(pb.kernels, *predicted);
      QVERIFY(pb.kernel_seconds() > 0);
      QVERIFY(pb.kernel_seconds() <= pb.step_seconds);
      all_prefill.insert(all_prefill.end(), pb.kernels.begin(), pb.kernels.end());
    }
    // Together the chunks are the whole prompt's prefill as the cost model prices it.
    auto whole = predict_step(*shape, {Phase::Prefill, prompt, 0, batch, true});
    QVERIFY(whole.is_ok());
    compare_records(all_prefill, *whole);

    for (int i = 0; i < 2; ++i) {
      auto decode = e.step();
      QVERIFY(decode.is_ok());
      const ProfileBatch& db = decode->profile;
      QCOMPARE(db.phase, Phase::Decode);
      QCOMPARE(db.num_tokens, 1);
      QCOMPARE(db.step_index, pb.step_index + 1 + i);
      auto d = predict_step(*shape, {Phase::Decode, 1, prompt + i, batch, true});
      QVERIFY(d.is_ok());
      compare_records(db.kernels, *d);
      QVERIFY(db.kernel_seconds() <= db.step_seconds);
    }
  }

  // A step of three sequences (two decodes and a prompt) is one forward pass: each kernel once,
  // over all 2 + 9 tokens, attention summed over the sequences, the classifier for 3 rows.
  void batchedStepMatchesCostModel() {
    if (m_aidreams.empty()) QSKIP("shared aidreams model absent");
    auto engine = Engine::load(m_aidreams, {0, 2});
    QVERIFY(engine.is_ok());
    auto shape = model_shape_from_gguf(m_aidreams);
    QVERIFY(shape.is_ok());
    Engine& e = **engine;
    QVERIFY(e.add_request(greedy(random_prompt(512, 6, 1), 4)).is_ok());
    QVERIFY(e.add_request(greedy(random_prompt(512, 20, 2), 4)).is_ok());
    QVERIFY(e.step().is_ok());  // both prompts, one token each
    QVERIFY(e.add_request(greedy(random_prompt(512, 9, 3), 4)).is_ok());
    e.set_profiling(true);
    auto step = e.step();
    QVERIFY(step.is_ok());
    const ProfileBatch& b = step->profile;
    QCOMPARE(b.phase, Phase::Prefill);  // any prompt tokens make it a prefill step
    QCOMPARE(b.num_tokens, 1 + 1 + 9);
    QCOMPARE(b.num_kv, int64_t(7 + 21 + 9));
    QCOMPARE(step->tokens.size(), size_t(3));
    QCOMPARE(int64_t(b.kernels.size()), num_step_records(shape->config, 11, 0, true));
    StepScenario all{Phase::Prefill, 11, 0, 0, true, 3};
    auto predicted = predict_step(*shape, all);
    QVERIFY(predicted.is_ok());
    // The cost model prices one sequence; its attention records are the batch's sums instead.
    const op_costs::AttentionSpan spans[] = {{1, 6}, {1, 20}, {9, 0}};
    const ModelConfig& c = shape->config;
    for (KernelRecord& r : *predicted) {
      if (r.kind == OpKind::Attention) {
        r = op_costs::batched_attention(r.layer, spans, c.num_heads, c.num_kv_heads, c.head_dim_k, c.head_dim_v, 0);
        r.phase = Phase::Prefill;
      }
    }
    compare_records(b.kernels, *predicted);
  }

  // Independently of the cost model: the kernels of one aidreams layer, by kind.
  void everyKernelOfTheForwardPass() {
    if (m_aidreams.empty()) QSKIP("shared aidreams model absent");
    auto engine = Engine::load(m_aidreams, {0, 2});
    QVERIFY(engine.is_ok());
    Engine& e = **engine;
    e.set_profiling(true);
    QVERIFY(e.add_request(greedy(random_prompt(512, 12, 3), 2)).is_ok());
    for (const Phase phase : {Phase::Prefill, Phase::Decode}) {
      auto step = e.step();
      QVERIFY(step.is_ok());
      std::map<std::pair<int, OpKind>, int> counts;
      for (const KernelRecord& r : step->profile.kernels) {
        QCOMPARE(r.phase, phase);
        counts[{r.layer, r.kind}] += 1;
      }
      auto count = [&](int layer, OpKind kind) { return counts[{layer, kind}]; };
      const int64_t num_layers = e.config().num_layers;  // 4
      QCOMPARE(num_layers, int64_t(4));
      for (int il = 0; il < num_layers; ++il) {
        // q, k, v, output, gate, up, down; attention and FFN norms; RoPE of q and k; one KV
        // write; attention; SwiGLU; two residual adds.
        QCOMPARE(count(il, OpKind::Matmul), 7);
        QCOMPARE(count(il, OpKind::RmsNorm), 2);
        QCOMPARE(count(il, OpKind::Rope), 2);
        QCOMPARE(count(il, OpKind::KvWrite), 1);
        QCOMPARE(count(il, OpKind::Attention), 1);
        QCOMPARE(count(il, OpKind::Activation), 1);
        QCOMPARE(count(il, OpKind::Add), 2);
      }
      QCOMPARE(count(-1, OpKind::Embedding), 1);
      QCOMPARE(count(-1, OpKind::RmsNorm), 1);  // the output norm
      QCOMPARE(count(-1, OpKind::Logits), 1);
      QCOMPARE(step->profile.kernels.size(), size_t(1 + 4 * 16 + 2));
      // Aggregates by kind: seven matmuls per layer.
      for (const OpAggregate& a : aggregate_records(step->profile.kernels)) {
        if (a.kind == OpKind::Matmul) QCOMPARE(a.count, int64_t(28));
      }
    }
  }

  void offMeansNoRecords() {
    if (m_aidreams.empty()) QSKIP("shared aidreams model absent");
    auto engine = Engine::load(m_aidreams, {0, 2});
    QVERIFY(engine.is_ok());
    Engine& e = **engine;
    QVERIFY(!e.is_profiling());
    QVERIFY(e.add_request(greedy(random_prompt(512, 8, 5), 4)).is_ok());
    auto s0 = e.step();
    QVERIFY(s0.is_ok());
    QVERIFY(s0->profile.is_empty());
    e.set_profiling(true);  // from the next step on
    auto s1 = e.step();
    QVERIFY(s1.is_ok());
    QCOMPARE(s1->profile.kernels.size(), size_t(67));
    QCOMPARE(s1->profile.step_index, s0->profile.step_index + 1);
    e.set_profiling(false);
    auto s2 = e.step();
    QVERIFY(s2.is_ok());
    QVERIFY(s2->profile.is_empty());
  }

  // Token timestamps: since add_request, increasing, and consistent with the request's timings.
  void tokenTimestamps() {
    if (m_aidreams.empty()) QSKIP("shared aidreams model absent");
    auto engine = Engine::load(m_aidreams, {0, 2});
    QVERIFY(engine.is_ok());
    Engine& e = **engine;
    const std::vector<int32_t> prompt = random_prompt(512, 10, 9);
    QVERIFY(e.add_request(greedy(prompt, 6)).is_ok());
    std::vector<double> event_times;
    RequestFinished finished;
    while (e.has_unfinished_requests()) {
      auto s = e.step();
      QVERIFY(s.is_ok());
      for (const TokenEvent& t : s->tokens) event_times.push_back(t.seconds);
      for (const RequestFinished& f : s->finished) finished = f;
    }
    QCOMPARE(event_times.size(), size_t(6));
    QCOMPARE(finished.token_seconds, event_times);
    for (size_t i = 1; i < event_times.size(); ++i) QVERIFY(event_times[i] > event_times[i - 1]);
    QVERIFY(finished.queued_seconds >= 0);
    QVERIFY(qAbs(event_times[0] - (finished.queued_seconds + finished.prompt_seconds)) < 1e-6);
    QVERIFY(qAbs(event_times.back() - event_times.front() - finished.generation_seconds) < 1e-6);
    QCOMPARE(finished.num_reused_prompt_tokens, 0);

    // A 40-token prompt, then the same again: its two full 16-token blocks come from the prefix
    // cache (the block holding the last prompt token is always computed).
    const std::vector<int32_t> longer = random_prompt(512, 40, 11);
    for (const int expected : {0, 32}) {
      QVERIFY(e.add_request(greedy(longer, 2)).is_ok());
      while (e.has_unfinished_requests()) {
        auto s = e.step();
        QVERIFY(s.is_ok());
        for (const RequestFinished& f : s->finished) finished = f;
      }
      QCOMPARE(finished.num_reused_prompt_tokens, expected);
    }
  }
};

QTEST_GUILESS_MAIN(TestProfilerRecords)
#include "test_profiler_records.moc"
