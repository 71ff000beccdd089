// Batch-invariant mode (EngineOptions::is_batch_invariant): a token's logits are bit for bit the
// same whether its pass carries it alone or with many others, on quantized and float models,
// so greedy output never depends on batching or speculation.
#include "tiny_models.h"

#include "iwb/engine/runtime/engine.h"

#include <QTemporaryDir>
#include <QTest>

#include <cstring>
#include <random>

using namespace iwb;

namespace {

std::unique_ptr<Engine> load(const std::string& path, int64_t max_batch_tokens, bool is_batch_invariant) {
  EngineOptions o;
  o.num_threads = 2;
  o.max_batch_tokens = max_batch_tokens;
  o.enable_prefix_caching = false;  // every logits_for pass computes all its positions
  o.is_batch_invariant = is_batch_invariant;
  Result<std::unique_ptr<Engine>> engine = Engine::load(path, o);
  if (!engine) qWarning("%s", engine.error_message().c_str());
  return engine ? std::move(*engine) : nullptr;
}

std::vector<int32_t> random_tokens(int64_t vocab, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t& t : tokens) t = pick(rng);
  return tokens;
}

// Logits of every position, computed in passes of at most `max_batch_tokens` tokens.
std::vector<float> all_logits(Engine& engine, const std::vector<int32_t>& tokens) {
  std::vector<float> out;
  const Status s = engine.logits_for_positions(tokens, 0, [&](int64_t, std::span<const float> row) {
    out.insert(out.end(), row.begin(), row.end());
    return Status{};
  });
  if (!s) qWarning("%s", s.message().c_str());
  return out;
}

}  // namespace

class TestBatchInvariance : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { QVERIFY(m_tmp.isValid()); }

  void logitsDoNotDependOnThePass_data() {
    QTest::addColumn<int>("preset");
    QTest::newRow("F32") << int(test::WeightPreset::F32);
    QTest::newRow("Q8_0") << int(test::WeightPreset::Q8_0);
    QTest::newRow("Q4_K/Q6_K/Q5_0") << int(test::WeightPreset::MixedK);
  }

  // One token per pass (decode's kernels), 7 (a speculative verify) and 64 (a prompt chunk):
  // the same bits for every position.
  void logitsDoNotDependOnThePass() {
    QFETCH(int, preset);
    test::TinyModelSpec spec;
    spec.arch = "qwen2";
    spec.has_qkv_bias = true;
    spec.preset = static_cast<test::WeightPreset>(preset);
    const std::string path = m_tmp.filePath(QString("model-%1.gguf").arg(preset)).toStdString();
    const Status written = test::write_tiny_model(spec, path);
    QVERIFY2(written.is_ok(), written.message().c_str());

    const std::vector<int32_t> tokens = random_tokens(spec.vocab, 70, 7);
    std::vector<float> reference;
    for (const int64_t pass : {1, 7, 64}) {
      std::unique_ptr<Engine> engine = load(path, pass, true);
      QVERIFY(engine);
      const std::vector<float> logits = all_logits(*engine, tokens);
      QCOMPARE(logits.size(), tokens.size() * static_cast<size_t>(spec.vocab));
      if (reference.empty()) {
        reference = logits;
        continue;
      }
      size_t num_different = 0;
      for (size_t i = 0; i < logits.size(); ++i) num_different += std::memcmp(&logits[i], &reference[i], sizeof(float)) != 0;
      QVERIFY2(num_different == 0, qPrintable(QString("%1 of %2 logits differ between passes of 1 and %3 tokens")
                                                  .arg(num_different).arg(logits.size()).arg(pass)));
    }
  }

  void theLastRowAloneMatchesEveryRow_data() {
    QTest::addColumn<QString>("arch");
    QTest::addColumn<int>("preset");
    QTest::newRow("llama F32") << "llama" << int(test::WeightPreset::F32);
    QTest::newRow("qwen2 Q4_K/Q6_K/Q5_0") << "qwen2" << int(test::WeightPreset::MixedK);
    QTest::newRow("gemma3 Q8_0 (post-norms)") << "gemma3" << int(test::WeightPreset::Q8_0);
    QTest::newRow("qwen3moe F32 (experts)") << "qwen3moe" << int(test::WeightPreset::F32);
  }

  // The last layer's FFN runs on the rows that sample only (forward_plan.h): a prompt's last
  // row alone (logits_for) and the same row among all 41 (logits_for_positions) must give the
  // same bits, so the gather takes the right row and the FFN and its residual add see it whole.
  void theLastRowAloneMatchesEveryRow() {
    QFETCH(QString, arch);
    QFETCH(int, preset);
    test::TinyModelSpec spec;
    spec.arch = arch.toStdString();
    spec.has_qkv_bias = arch == "qwen2";
    spec.preset = static_cast<test::WeightPreset>(preset);
    const std::string path = m_tmp.filePath(QString("last-row-%1-%2.gguf").arg(arch).arg(preset)).toStdString();
    const Status written = test::write_tiny_model(spec, path);
    QVERIFY2(written.is_ok(), written.message().c_str());
    std::unique_ptr<Engine> engine = load(path, 64, true);
    QVERIFY(engine);
    const std::vector<int32_t> tokens = random_tokens(spec.vocab, 41, 11);
    const std::vector<float> every = all_logits(*engine, tokens);
    QCOMPARE(every.size(), tokens.size() * static_cast<size_t>(spec.vocab));
    for (const size_t n : {size_t{41}, size_t{17}, size_t{1}}) {
      Result<std::vector<float>> alone =
          engine->logits_for({tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(n)});
      QVERIFY2(alone.is_ok(), alone.error_message().c_str());
      QCOMPARE(alone->size(), static_cast<size_t>(spec.vocab));
      const float* row = every.data() + (n - 1) * static_cast<size_t>(spec.vocab);
      QVERIFY2(std::memcmp(alone->data(), row, alone->size() * sizeof(float)) == 0,
               qPrintable(QString("position %1's logits differ alone and among every row").arg(n - 1)));
    }
  }

  // Greedy requests decoded together, with prompt chunks of others in the same steps, give each
  // the tokens it gets alone.
  void batchedGreedyEqualsAlone() {
    test::TinyModelSpec spec;
    spec.preset = test::WeightPreset::MixedK;
    const std::string path = m_tmp.filePath("batched.gguf").toStdString();
    QVERIFY(test::write_tiny_model(spec, path).is_ok());
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 4; ++i) prompts.push_back(random_tokens(spec.vocab, 5 + 9 * static_cast<int>(i), 100 + i));

    auto generate = [&](Engine& engine, const std::vector<std::vector<int32_t>>& batch) {
      std::map<RequestId, size_t> index;
      for (size_t i = 0; i < batch.size(); ++i) {
        GenerationRequest r;
        r.prompt_tokens = batch[i];
        r.max_new_tokens = 24;
        r.stop_at_end_of_generation = false;
        r.sampling.temperature = 0;
        r.sampling.repeat_penalty = 1.0f;
        Result<RequestId> id = engine.add_request(r);
        if (id) index[*id] = i;
      }
      std::vector<std::vector<int32_t>> out(batch.size());
      while (engine.has_unfinished_requests()) {
        Result<StepResult> step = engine.step();
        if (!step) break;
        for (const TokenEvent& e : step->tokens) out[index[e.request]].push_back(e.token);
      }
      return out;
    };
    std::unique_ptr<Engine> engine = load(path, 16, true);
    QVERIFY(engine);
    const std::vector<std::vector<int32_t>> together = generate(*engine, prompts);
    for (size_t i = 0; i < prompts.size(); ++i) {
      QCOMPARE(together[i].size(), size_t{24});
      QCOMPARE(generate(*engine, {prompts[i]})[0], together[i]);
    }
  }

 private:
  QTemporaryDir m_tmp;
};

QTEST_APPLESS_MAIN(TestBatchInvariance)
#include "test_batch_invariance.moc"
