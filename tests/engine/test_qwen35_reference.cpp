// qwen35 against the tests' own Qwen 3.5 reference (reference_qwen35.cpp, from llama.cpp's graph):
// `iwb synth`'s test-qwen35 (gated delta net layers and gated full attention) in F32 and Q8_0.
// Every position of a prompt (logits_for_positions), the last-token path, a prompt prefilled in
// small chunks (the recurrent state carried between them), a prompt whose first block is cached
// from an earlier one, greedy decoding past 32 tokens through step(), and two sequences decoding
// together, each with its own state. Registered twice, as test_forward_reference: f32
// activations (IWB_MATMUL_EXACT=1), then the 8-bit activations of the integer matmuls.
#include "../kernels/random_tensors.h"
#include "forward_checks.h"
#include "reference_qwen35.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/sampling/sampler.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <map>

using namespace iwb;
using namespace iwb::test;

namespace {

const bool kIsExactMatmul = qEnvironmentVariable("IWB_MATMUL_EXACT") == "1";
// Against the reference with keys and values rounded to f16 as the engine's cache holds them.
const double kTolerance = kIsExactMatmul ? 1e-3 : 8e-2;
// Against a reference that keeps keys and values in f32.
const double kF16CacheTolerance = kIsExactMatmul ? 5e-3 : 8e-2;
constexpr size_t kPromptLength = 14;
constexpr char kPreset[] = "test-qwen35";

// Writes `iwb synth`'s test-qwen35 in `type` to `path`, reads it as the reference and loads it in
// the engine with `options`. Empty on success, else what failed.
std::string synthesize_qwen35(const std::string& type, uint64_t seed, const std::string& path,
                              std::shared_ptr<RefQwen35>* ref, std::unique_ptr<Engine>* engine,
                              EngineOptions options = {0, 2}, int64_t nextn_layers = 0) {
  if (std::string written = synthesize_preset(kPreset, type, seed, path, nextn_layers); !written.empty())
    return written;
  auto file = gguf::GgufFile::open(path);
  if (!file.is_ok()) return file.error_message();
  std::string error;
  *ref = load_reference_qwen35(**file, &error);
  if (*ref == nullptr) return error;
  auto loaded = Engine::load(path, options);
  if (!loaded.is_ok()) return loaded.error_message();
  *engine = std::move(*loaded);
  return {};
}

// The reference's n greedy tokens after `seq` (keys and values in f16, as the engine's cache).
std::vector<int32_t> reference_greedy_qwen35(const RefQwen35& m, std::vector<int32_t> seq, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(qwen35_logits(m, seq, true).back()));
    seq.push_back(out.back());
  }
  return out;
}

}  // namespace

class TestQwen35Reference : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

 private slots:
  // The preset exercises what Qwen 3.5 adds: both layer kinds, and fewer key heads than value
  // heads (the key heads tiled over the value heads, h % n_group), and GQA in the attention.
  void presetCoversQwen35() {
    std::shared_ptr<RefQwen35> ref;
    std::unique_ptr<Engine> engine;
    const std::string error = synthesize_qwen35("F32", 3, m_tmp.filePath("shape.gguf").toStdString(), &ref, &engine);
    QVERIFY2(error.empty(), error.c_str());
    const auto recurrent =
        std::count_if(ref->layers.begin(), ref->layers.end(), [](const RefQwen35Layer& l) { return l.is_recurrent; });
    qInfo(
        "test-qwen35: %lld layers (%lld recurrent), n_embd %lld, vocab %lld; delta net: %lld key heads, %lld "
        "value heads of %lld, conv %lld; attention: %lld heads, %lld KV heads of %lld, %lld rotated",
        static_cast<long long>(ref->n_layer), static_cast<long long>(recurrent), static_cast<long long>(ref->n_embd),
        static_cast<long long>(ref->vocab), static_cast<long long>(ref->n_group), static_cast<long long>(ref->dt_rank),
        static_cast<long long>(ref->d_state), static_cast<long long>(ref->conv_kernel),
        static_cast<long long>(ref->n_head), static_cast<long long>(ref->n_kv_head),
        static_cast<long long>(ref->head_dim), static_cast<long long>(ref->n_rot));
    QVERIFY2(recurrent > 0 && recurrent < ref->n_layer, "the preset needs recurrent and full-attention layers");
    QVERIFY2(ref->dt_rank > ref->n_group, "the preset needs fewer key heads than value heads");
    QVERIFY2(ref->n_kv_head < ref->n_head, "the preset needs fewer KV heads than query heads");
    QVERIFY2(ref->n_rot < ref->head_dim, "the preset needs a partly rotated head");
  }

  void everyPositionMatchesReference_data() {
    QTest::addColumn<QString>("type");
    QTest::newRow("F32") << QString("F32");
    QTest::newRow("Q8_0") << QString("Q8_0");
  }
  void everyPositionMatchesReference() {
    QFETCH(QString, type);
    std::shared_ptr<RefQwen35> ref;
    std::unique_ptr<Engine> engine;
    const std::string error = synthesize_qwen35(type.toStdString(), 21 + qHash(type),
                                                m_tmp.filePath("every-" + type + ".gguf").toStdString(), &ref, &engine);
    QVERIFY2(error.empty(), error.c_str());
    const std::vector<int32_t> tokens = random_tokens(kPromptLength, ref->vocab, 5);
    Result<std::vector<std::vector<float>>> got = engine_logits_all(*engine, tokens);
    QVERIFY2(got.is_ok(), got.error_message().c_str());
    const double err16 = max_error_over_positions(*got, qwen35_logits(*ref, tokens, true));
    const double err32 = max_error_over_positions(*got, qwen35_logits(*ref, tokens, false));
    qInfo("%s: every position within %g of the reference (%g of the all-f32 one)", qPrintable(type), err16, err32);
    QVERIFY2(err16 < kTolerance, qPrintable(QString("relative error %1").arg(err16)));
    QVERIFY2(err32 < kF16CacheTolerance, qPrintable(QString("relative error %1 against all-f32").arg(err32)));
    // The last-token path (logits_for) agrees with it.
    Result<std::vector<float>> last = engine->logits_for(tokens);
    QVERIFY2(last.is_ok(), last.error_message().c_str());
    QVERIFY(max_relative_error(*last, got->back()) < kTolerance);
  }

  // A prompt prefilled five tokens a step: each chunk starts from the recurrent layers' state
  // (and convolution history) the previous one left.
  void chunkedPrefillMatchesReference() {
    std::shared_ptr<RefQwen35> ref;
    std::unique_ptr<Engine> engine;
    EngineOptions options{0, 2};
    options.max_batch_tokens = 5;
    const std::string error =
        synthesize_qwen35("F32", 8, m_tmp.filePath("chunked.gguf").toStdString(), &ref, &engine, options);
    QVERIFY2(error.empty(), error.c_str());
    const std::vector<int32_t> tokens = random_tokens(kPromptLength, ref->vocab, 7);
    Result<std::vector<std::vector<float>>> got = engine_logits_all(*engine, tokens);
    QVERIFY2(got.is_ok(), got.error_message().c_str());
    const double err = max_error_over_positions(*got, qwen35_logits(*ref, tokens, true));
    qInfo("prefilled in chunks of 5: every position within %g of the reference", err);
    QVERIFY2(err < kTolerance, qPrintable(QString("relative error %1").arg(err)));
  }

  // Prompts sharing their first KV block (16 positions), one after another: the engine turns
  // prefix caching off for recurrent layers (no cached block can give their state back), so each
  // is computed from its start, and none may see the state another left.
  void sharedPrefixesMatchReference() {
    std::shared_ptr<RefQwen35> ref;
    std::unique_ptr<Engine> engine;
    const std::string error = synthesize_qwen35("F32", 9, m_tmp.filePath("prefix.gguf").toStdString(), &ref, &engine);
    QVERIFY2(error.empty(), error.c_str());
    const std::vector<int32_t> prefix = random_tokens(20, ref->vocab, 11);
    std::vector<int32_t> first = prefix, second = prefix;
    for (int32_t t : random_tokens(3, ref->vocab, 12)) first.push_back(t);
    for (int32_t t : random_tokens(4, ref->vocab, 13)) second.push_back(t);
    for (const std::vector<int32_t>* tokens : {&first, &second, &first}) {
      Result<std::vector<float>> got = engine->logits_for(*tokens);
      QVERIFY2(got.is_ok(), got.error_message().c_str());
      const double err = max_relative_error(*got, qwen35_logits(*ref, *tokens, true).back());
      qInfo("%zu tokens sharing their first 20: last position within %g of the reference", tokens->size(), err);
      QVERIFY2(err < kTolerance, qPrintable(QString("relative error %1").arg(err)));
    }
  }

  // Greedy decoding through step() past 32 tokens, one token a step through the recurrent state
  // and the KV cache; where the matmuls keep f32 activations (the 8-bit ones may part at a
  // near-tie).
  void greedyMatchesReference_data() { everyPositionMatchesReference_data(); }
  void greedyMatchesReference() {
    QFETCH(QString, type);
    if (!kIsExactMatmul && type != "F32") QSKIP("8-bit activations may part from the reference at a near-tie");
    std::shared_ptr<RefQwen35> ref;
    std::unique_ptr<Engine> engine;
    const std::string error = synthesize_qwen35(
        type.toStdString(), 31 + qHash(type), m_tmp.filePath("greedy-" + type + ".gguf").toStdString(), &ref, &engine);
    QVERIFY2(error.empty(), error.c_str());
    const std::vector<int32_t> prompt = random_tokens(4, ref->vocab, 17);
    QCOMPARE(engine_greedy(*engine, prompt, 36), reference_greedy_qwen35(*ref, prompt, 36));
  }

  // Two sequences decoding in the same steps, prompts of different lengths: each keeps its own
  // recurrent state and follows the reference on its own (F32 weights: f32 activations either way).
  void concurrentSequencesMatchReference() {
    std::shared_ptr<RefQwen35> ref;
    std::unique_ptr<Engine> engine;
    const std::string error = synthesize_qwen35("F32", 41, m_tmp.filePath("two.gguf").toStdString(), &ref, &engine);
    QVERIFY2(error.empty(), error.c_str());
    const std::vector<std::vector<int32_t>> prompts = {random_tokens(5, ref->vocab, 19),
                                                       random_tokens(9, ref->vocab, 23)};
    std::map<RequestId, size_t> which;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Result<RequestId> id = engine->add_request(greedy_request(prompts[i], 20));
      QVERIFY2(id.is_ok(), id.error_message().c_str());
      which[*id] = i;
    }
    std::vector<std::vector<int32_t>> got(prompts.size());
    while (engine->has_unfinished_requests()) {
      Result<StepResult> s = engine->step();
      QVERIFY2(s.is_ok(), s.error_message().c_str());
      for (const TokenEvent& e : s->tokens) got[which.at(e.request)].push_back(e.token);
    }
    for (size_t i = 0; i < prompts.size(); ++i) QCOMPARE(got[i], reference_greedy_qwen35(*ref, prompts[i], 20));
  }

  // The file's multi-token-prediction block (an attention layer, llama.cpp's graph_mtp) as `iwb
  // logits --mtp` runs it: at every position, reading the target's hidden state of the position
  // before, the reference's logits.
  void mtpHeadMatchesReference() {
    std::shared_ptr<RefQwen35> ref;
    std::unique_ptr<Engine> engine;
    const std::string error = synthesize_qwen35("F32", 31, m_tmp.filePath("mtp.gguf").toStdString(), &ref, &engine,
                                                {0, 2}, /*nextn_layers=*/1);
    QVERIFY2(error.empty(), error.c_str());
    QVERIFY(ref->has_mtp);
    const std::vector<int32_t> tokens = random_tokens(kPromptLength, ref->vocab, 9);
    std::vector<std::vector<float>> rows;
    const Status s = engine->mtp_logits_for_positions(tokens, [&](int64_t p, std::span<const float> logits) -> Status {
      if (p != static_cast<int64_t>(rows.size())) return make_error(ErrorCode::InvalidArgument, "out of order");
      rows.emplace_back(logits.begin(), logits.end());
      return {};
    });
    QVERIFY2(s.is_ok(), s.message().c_str());
    QCOMPARE(rows.size(), tokens.size());
    const std::vector<std::vector<float>> want = qwen35_mtp_logits(*ref, tokens, qwen35_hidden_states(*ref, tokens));
    double worst = 0;
    for (size_t p = 0; p < tokens.size(); ++p) {
      worst = std::max(worst, max_relative_error(rows[p], want[p]));
      QCOMPARE(argmax(rows[p]), argmax(want[p]));
    }
    qInfo("MTP head within %.2e of the reference", worst);
    QVERIFY2(worst < kF16CacheTolerance, qPrintable(QString::number(worst)));
  }
};

QTEST_GUILESS_MAIN(TestQwen35Reference)
#include "test_qwen35_reference.moc"
