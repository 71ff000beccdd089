// deepseek2 (multi-head latent attention, DeepSeek routing) against the test's own reference
// forward pass (reference_forward.cpp), which decompresses every head's keys and values from the
// latent as DeepSeek's modeling code does while the engine absorbs attn_k_b into the queries
// and runs one KV head. The files are `iwb synth`'s small deepseek2 shapes (their keys and
// tensors as llama.cpp's converter writes them; docs/llama-agreement.md has llama.cpp's own
// logits on the same shapes). Registered twice, as test_forward_reference: f32 activations
// (IWB_MATMUL_EXACT=1) to 1e-3 with equal greedy tokens, and the 8-bit activations of the
// integer matmuls to their own tolerance.
#include "../kernels/random_tensors.h"
#include "forward_checks.h"
#include "reference_forward.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/sampling/sampler.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <random>

using namespace iwb;
using namespace iwb::test;

namespace {

const bool kIsExactMatmul = qEnvironmentVariable("IWB_MATMUL_EXACT") == "1";
const double kTolerance = kIsExactMatmul ? 1e-3 : 8e-2;

}  // namespace

class TestDeepseekReference : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

 private slots:
  void synthesizedModelsMatchReference_data() {
    QTest::addColumn<QString>("preset");
    QTest::addColumn<QString>("type");
    for (const char* preset : {"test-deepseek2", "test-deepseek2-lite"}) {
      for (const char* type : {"F32", "Q8_0", "Q4_K_M"}) {
        QTest::newRow(qPrintable(QString("%1 %2").arg(preset, type))) << QString(preset) << QString(type);
      }
    }
  }
  void synthesizedModelsMatchReference() {
    QFETCH(QString, preset);
    QFETCH(QString, type);
    const std::string path = m_tmp.filePath(preset + "-" + type + ".gguf").toStdString();
    RefModel ref;
    std::unique_ptr<Engine> engine;
    const std::string error =
        synthesize_and_load(preset.toStdString(), type.toStdString(), 11 + qHash(type), path, &ref, &engine);
    QVERIFY2(error.empty(), error.c_str());
    QVERIFY(engine->config().has_latent_attention());
    const std::vector<int32_t> tokens = random_tokens(12, ref.vocab, 5);
    for (size_t len : {size_t(1), size_t(6), tokens.size()}) {
      const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(len));
      Result<std::vector<float>> got = engine->logits_for(prefix);
      QVERIFY2(got.is_ok(), got.error_message().c_str());
      const double err = max_relative_error(*got, reference_logits(ref, prefix, true));
      QVERIFY2(err < kTolerance, qPrintable(QString("%1 tokens: relative error %2").arg(len).arg(err)));
    }
    // Greedy tokens where the matmuls keep f32 activations (the 8-bit ones may part at a near-tie).
    if (kIsExactMatmul) {
      const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 4);
      QCOMPARE(engine_greedy(*engine, prompt, 8), reference_greedy(ref, prompt, 8));
    }
  }

  // Each part deepseek2 adds changes the logits: the reference without YaRN's attention scale,
  // with softmax for sigmoid routing, without the group limit, without the shared expert or
  // without the selection biases moves by over 1e-2, and the engine stays nearer the full one.
  void latentPartsMatter() {
    const std::string path = m_tmp.filePath("deepseek-parts.gguf").toStdString();
    RefModel ref;
    std::unique_ptr<Engine> engine;
    const std::string error = synthesize_and_load("test-deepseek2", "F32", 7, path, &ref, &engine);
    QVERIFY2(error.empty(), error.c_str());
    const ModelConfig& c = engine->config();
    QCOMPARE(c.num_kv_heads, int64_t{1});
    QCOMPARE(c.k_width(), int64_t{160});  // the latent's 128 and 32 roped values
    QCOMPARE(c.v_width(), int64_t{128});
    QCOMPARE(c.num_expert_groups, int64_t{4});
    QVERIFY(c.is_expert_gating_sigmoid && c.has_expert_selection_bias);
    const std::vector<int32_t> tokens = random_tokens(12, ref.vocab, 6);
    Result<std::vector<float>> got = engine->logits_for(tokens);
    QVERIFY(got.is_ok());
    const std::vector<float> full = reference_logits(ref, tokens, true);
    const double err = max_relative_error(*got, full);
    QVERIFY(err < kTolerance);
    RefModel no_mscale = ref, softmax = ref, no_groups = ref, no_shared = ref, no_bias = ref;
    no_mscale.attn_scale = 1.0 / std::sqrt(static_cast<double>(ref.mla_k));
    softmax.is_expert_sigmoid = false;
    no_groups.n_expert_groups = 0;
    no_shared.n_shared_expert = 0;
    for (RefLayer& l : no_bias.layers) std::fill(l.exp_probs_b.begin(), l.exp_probs_b.end(), 0.0f);
    for (const auto& [name, m] : {std::pair{"YaRN attention scale", &no_mscale}, std::pair{"sigmoid gating", &softmax},
                                  std::pair{"group limit", &no_groups}, std::pair{"shared expert", &no_shared},
                                  std::pair{"selection biases", &no_bias}}) {
      const std::vector<float> without = reference_logits(*m, tokens, true);
      const double apart = max_relative_error(without, full), engine_apart = max_relative_error(*got, without);
      qInfo("deepseek2 without its %s: %g from the full reference, the engine %g (and %g from the full one)", name,
            apart, engine_apart, err);
      QVERIFY2(apart > 1e-2 && engine_apart > err, name);
    }
  }

  // A file converted before llama.cpp split attn_kv_b (no key_length_mla) is refused by name, and
  // the cost model's view of a preset has the file's shapes.
  void legacyFilesAndPresets() {
    synth::SynthShape shape = *synth::find_synth_preset("test-deepseek2-lite");
    synth::SynthOptions options;
    options.shape = shape;
    options.weight_type = "F32";
    options.output_path = m_tmp.filePath("lite.gguf").toStdString();
    QVERIFY(synth::synthesize_model(options).is_ok());
    auto file = gguf::GgufFile::open(options.output_path);
    QVERIFY(file.is_ok());
    auto config = model_config_from_gguf(**file);
    QVERIFY2(config.is_ok(), config.error_message().c_str());
    QCOMPARE(config->q_lora_rank, int64_t{0});
    QVERIFY(!config->is_expert_gating_sigmoid && !config->has_expert_selection_bias);
    const ModelConfig from_shape = synth::shape_config(shape);
    QCOMPARE(from_shape.attention_scale, config->attention_scale);
    QCOMPARE(from_shape.k_width(), config->k_width());
    QCOMPARE(from_shape.attention_projection_width(), config->attention_projection_width());

    // The V3 shape's YaRN: the magnitude in q.k (mscale^2 / sqrt(96) with mscale 1 + 0.1 ln 4).
    auto v3 = synth::shape_config(*synth::find_synth_preset("test-deepseek2"));
    const double mscale = 1.0 + 0.1 * std::log(4.0);
    QVERIFY(std::abs(v3.attention_scale - mscale * mscale / std::sqrt(96.0)) < 1e-6);

    // DeepSeek-V2-Lite's keys as an older converter wrote them: no key_length_mla.
    gguf::GgufWriter legacy;
    legacy.set_string("general.architecture", "deepseek2");
    for (const auto& [key, value] :
         {std::pair{"context_length", 4096}, std::pair{"embedding_length", 2048}, std::pair{"block_count", 27},
          std::pair{"attention.head_count", 16}, std::pair{"attention.head_count_kv", 1},
          std::pair{"attention.key_length", 576}, std::pair{"attention.value_length", 512},
          std::pair{"attention.kv_lora_rank", 512}, std::pair{"rope.dimension_count", 64},
          std::pair{"expert_count", 64}, std::pair{"expert_used_count", 6},
          std::pair{"expert_feed_forward_length", 1408}, std::pair{"expert_shared_count", 2}}) {
      legacy.set_u32(std::string("deepseek2.") + key, static_cast<uint32_t>(value));
    }
    legacy.set_f32("deepseek2.attention.layer_norm_rms_epsilon", 1e-6f);
    const std::string legacy_path = m_tmp.filePath("legacy.gguf").toStdString();
    QVERIFY(legacy.write_file(legacy_path).is_ok());
    auto legacy_file = gguf::GgufFile::open(legacy_path);
    QVERIFY(legacy_file.is_ok());
    auto refused = model_config_from_gguf(**legacy_file);
    QVERIFY(!refused.is_ok());
    QCOMPARE(refused.status().code(), ErrorCode::Unsupported);
    QVERIFY2(refused.error_message().find("attn_kv_b") != std::string::npos, refused.error_message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestDeepseekReference)
#include "test_deepseek_reference.moc"
