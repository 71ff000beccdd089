// Mixture of experts in the engine beyond the logits (test_forward_reference checks those):
// the expert-load window, the profiler's expert-matmul records counting the experts a step
// was routed to (and equal to the cost model's prediction on decode steps, where one token
// reads exactly k experts), the memory side counting every expert, `iwb quantize`'s types for
// expert tensors (llama-quantize's rules: router F32, ffn_down_exps as ffn_down), and clear refusals: a
// missing expert tensor, a shared-expert tensor, experts in an architecture run dense
// (Mixtral is "llama" with experts), and the CUDA backend's refusal of expert ops.
#include "tiny_models.h"

#include "iwb/engine/backend/cuda_step_plan.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/quant/model_quantizer.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/runtime/expert_load.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QTemporaryDir>
#include <QtTest>

#include <numeric>

using namespace iwb;
using namespace iwb::test;

namespace {

TinyModelSpec moe_spec() {
  TinyModelSpec spec;
  spec.arch = "qwen3moe";
  spec.preset = WeightPreset::Q8_0;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_kv_head = 2;
  spec.head_dim = 64;
  spec.n_expert = 16;
  spec.n_expert_used = 4;
  spec.n_ff_exp = 96;
  spec.seed = 5;
  return spec;
}

GenerationRequest greedy(int64_t vocab, int n, int32_t max_new, uint32_t seed) {
  GenerationRequest r;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(vocab - 1));
  for (int i = 0; i < n; ++i) r.prompt_tokens.push_back(pick(rng));
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0.0f;
  r.stop_at_end_of_generation = false;
  return r;
}

}  // namespace

class TestMoeEngine : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

  std::string write(const TinyModelSpec& spec, const QString& name) {
    const std::string path = m_tmp.filePath(name).toStdString();
    const Status s = write_tiny_model(spec, path);
    if (!s) qFatal("%s", s.message().c_str());
    return path;
  }

 private slots:
  void theWindowSumsTheLastSteps() {
    ExpertLoadWindow window(2, 3, 2, 2);  // 2 layers, 3 experts, k = 2, the last 2 steps
    QVERIFY(window.snapshot().is_moe());
    QCOMPARE(window.snapshot().num_steps, 0);
    window.add_step(std::vector<int32_t>{2, 0, 0, 1, 1, 0}, 1, 1);
    window.add_step(std::vector<int32_t>{1, 1, 0, 0, 2, 0}, 1, 2);
    window.add_step(std::vector<int32_t>{0, 3, 1, 2, 1, 1}, 2, 3);  // the first step leaves
    const ExpertLoadSnapshot s = window.snapshot();
    QCOMPARE(s.num_steps, 2);
    QCOMPARE(s.window_steps, 2);
    QCOMPARE(s.num_tokens, int64_t(3));
    QCOMPARE(s.last_step, uint64_t(3));
    QCOMPARE(s.counts, (std::vector<int64_t>{1, 4, 1, 2, 3, 1}));
    QCOMPARE(s.count(1, 1), int64_t(3));
    QCOMPARE(s.imbalance(0), 4.0 * 3 / 6);              // the busiest expert over the mean
    window.add_step(std::vector<int32_t>{1, 2}, 1, 4);  // another model's size: ignored
    QCOMPARE(window.snapshot().num_steps, 2);
    window.clear();
    QCOMPARE(window.snapshot().num_tokens, int64_t(0));
    QCOMPARE(window.snapshot().counts, std::vector<int64_t>(6, 0));
    // A dense model has no load to show.
    ExpertLoadWindow dense(4, 0, 0, 8);
    dense.add_step({}, 5, 1);
    QVERIFY(!dense.snapshot().is_moe());
    QVERIFY(dense.snapshot().counts.empty());
  }

  void expertRecordsCountTheRoutedExperts() {
    const TinyModelSpec spec = moe_spec();
    const std::string path = write(spec, "moe.gguf");
    EngineOptions options;
    options.num_threads = 2;
    options.expert_load_steps = 1;  // the last step's routing only
    auto loaded = Engine::load(path, options);
    QVERIFY2(loaded.is_ok(), loaded.error_message().c_str());
    Engine& engine = **loaded;
    engine.set_profiling(true);
    auto shape = model_shape_from_gguf(path);
    QVERIFY2(shape.is_ok(), shape.error_message().c_str());
    const uint64_t expert_bytes = *ggml_row_bytes(GgmlType::Q8_0, spec.n_embd) * uint64_t(spec.n_ff_exp);
    QCOMPARE(*ggml_row_bytes(GgmlType::Q8_0, spec.n_ff_exp) * uint64_t(spec.n_embd), expert_bytes);

    QVERIFY(engine.add_request(greedy(spec.vocab, 11, 4, 1)).is_ok());
    int num_decode_steps = 0, num_prefill_steps = 0;
    int64_t context = 0;
    while (engine.has_unfinished_requests()) {
      Result<StepResult> step = engine.step();
      QVERIFY2(step.is_ok(), step.error_message().c_str());
      const ProfileBatch& p = step->profile;
      if (p.kernels.empty()) continue;
      const int64_t n = p.num_tokens;
      QCOMPARE(int64_t(p.kernels.size()), num_step_records(engine.config(), n, 0, true));
      const ExpertLoadSnapshot load = engine.expert_load();
      QCOMPARE(load.num_tokens, n);
      int num_expert_records = 0;
      for (const KernelRecord& r : p.kernels) {
        if (r.kind != OpKind::ExpertMatmul) continue;
        ++num_expert_records;
        // The experts this layer's tokens went to, from the engine's own counts.
        int routed = 0;
        for (int64_t e = 0; e < spec.n_expert; ++e) routed += load.count(r.layer, e) > 0 ? 1 : 0;
        QCOMPARE(r.shape.num_experts, routed);
        QCOMPARE(r.shape.num_experts_used, int32_t(spec.n_expert_used));
        // The last layer's FFN runs on the one row that samples (forward_plan.h).
        const int64_t rows = r.layer == int64_t(spec.n_layer) - 1 ? 1 : n;
        QCOMPARE(r.bytes, double(routed) * double(expert_bytes) +
                              4.0 * double(rows * spec.n_expert_used) * double(r.shape.rows + r.shape.cols));
        QCOMPARE(r.flops, 2.0 * double(rows * spec.n_expert_used) * double(r.shape.rows * r.shape.cols));
        if (rows == 1) QCOMPARE(routed, int(spec.n_expert_used));
        QVERIFY(routed <= rows * spec.n_expert_used && routed <= spec.n_expert);
      }
      QCOMPARE(num_expert_records, 3 * int(spec.n_layer));
      if (p.phase == Phase::Decode) {
        // One token reads exactly k experts: the cost model's prediction is the measurement.
        ++num_decode_steps;
        auto predicted = predict_step(*shape, {Phase::Decode, 1, context, 0, true});
        QVERIFY(predicted.is_ok());
        QCOMPARE(predicted->size(), p.kernels.size());
        for (size_t i = 0; i < predicted->size(); ++i) {
          QCOMPARE((*predicted)[i].flops, p.kernels[i].flops);
          QCOMPARE((*predicted)[i].bytes, p.kernels[i].bytes);
          QCOMPARE((*predicted)[i].shape, p.kernels[i].shape);
        }
      } else {
        ++num_prefill_steps;
      }
      context += n;
    }
    QCOMPARE(num_prefill_steps, 1);
    QCOMPARE(num_decode_steps, 3);
  }

  void memoryCountsEveryExpert() {
    const TinyModelSpec spec = moe_spec();
    const std::string path = write(spec, "moe-memory.gguf");
    auto file = gguf::GgufFile::open(path);
    QVERIFY(file.is_ok());
    auto summary = summarize_model(**file);
    QVERIFY(summary.is_ok());
    QCOMPARE(summary->hparams.expert_count, spec.n_expert);
    QCOMPARE(summary->hparams.expert_used_count, spec.n_expert_used);
    QCOMPARE(summary->hparams.expert_feed_forward_length, spec.n_ff_exp);
    uint64_t experts = 0;
    for (const gguf::TensorInfo& t : (*file)->tensors()) {
      if (t.name.find("_exps.") != std::string::npos) experts += t.num_bytes;
    }
    const uint64_t one = *ggml_row_bytes(GgmlType::Q8_0, spec.n_embd) * uint64_t(spec.n_ff_exp);
    QCOMPARE(experts, 3 * uint64_t(spec.n_layer * spec.n_expert) * one);
    auto engine = Engine::load(path, {0, 2});
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    const MemoryReport memory = (*engine)->memory_report();
    QVERIFY(memory.weights_bytes >= experts);
    QCOMPARE(memory.weights_bytes, summary->tensor_bytes);
    auto shape = model_shape_from_gguf(path);
    QVERIFY(shape.is_ok());
    QVERIFY(shape->weight_bytes >= experts);
  }

  void quantizingFollowsLlamaQuantizeForExperts() {
    // 3 layers, Q4_K_M: llama.cpp's use_more_bits gives layer 2 of 3 (not 0 or 1) Q6_K, out of
    // as many layers as there are tensors whose name holds "ffn_down" (the experts' count).
    TinyModelSpec spec = moe_spec();
    spec.preset = WeightPreset::F32;
    spec.n_layer = 3;
    spec.n_ff_exp = 256;  // whole Q4_K blocks
    quant::QuantizeOptions o;
    o.source_path = write(spec, "moe-f32.gguf");
    o.output_path = m_tmp.filePath("moe-q4km.gguf").toStdString();
    o.type = "Q4_K_M";
    o.num_threads = 2;
    auto r = quant::quantize_model(o);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    auto f = gguf::GgufFile::open(o.output_path);
    QVERIFY(f.is_ok());
    auto type_of = [&](const std::string& name) { return (*f)->find_tensor(name)->type; };
    for (int il = 0; il < 3; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      QCOMPARE(type_of(p + "ffn_gate_inp.weight"), GgmlType::F32);
      QCOMPARE(type_of(p + "ffn_gate_exps.weight"), GgmlType::Q4_K);
      QCOMPARE(type_of(p + "ffn_up_exps.weight"), GgmlType::Q4_K);
      QCOMPARE(type_of(p + "ffn_down_exps.weight"), synth::uses_more_bits(il, 3) ? GgmlType::Q6_K : GgmlType::Q4_K);
    }
    QVERIFY(!synth::uses_more_bits(0, 3) && synth::uses_more_bits(2, 3));
    auto engine = Engine::load(o.output_path, {0, 2});
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
  }

  void missingExpertTensorsAreNamed() {
    TinyModelSpec spec = moe_spec();
    spec.skip_tensor = "blk.1.ffn_up_exps.weight";
    auto engine = Engine::load(write(spec, "moe-missing.gguf"), {0, 2});
    QVERIFY(!engine.is_ok());
    QCOMPARE(engine.status().code(), ErrorCode::NotFound);
    QVERIFY2(engine.error_message().find("'blk.1.ffn_up_exps.weight' (the routed experts") != std::string::npos,
             engine.error_message().c_str());

    spec.skip_tensor = "blk.0.ffn_gate_inp.weight";
    auto no_router = Engine::load(write(spec, "moe-no-router.gguf"), {0, 2});
    QVERIFY(!no_router.is_ok());
    QVERIFY2(no_router.error_message().find("blk.0.ffn_gate_inp.weight") != std::string::npos,
             no_router.error_message().c_str());
  }

  void expertLayoutsThisEngineDoesNotRunAreRefused() {
    // A shared expert (qwen2moe's layout) would silently be left out: refused by name.
    TinyModelWriter shared(moe_spec());
    const std::vector<float> values(size_t(256 * 96), 0.01f);
    QVERIFY(
        shared.writer()
            .add_tensor("blk.0.ffn_up_shexp.weight", {256, 96}, GgmlType::F32,
                        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()), values.size() * 4))
            .is_ok());
    const std::string path = m_tmp.filePath("moe-shared.gguf").toStdString();
    QVERIFY(shared.write(path).is_ok());
    auto engine = Engine::load(path, {0, 2});
    QVERIFY(!engine.is_ok());
    QCOMPARE(engine.status().code(), ErrorCode::Unsupported);
    QVERIFY2(engine.error_message().find("blk.0.ffn_up_shexp.weight") != std::string::npos,
             engine.error_message().c_str());

    // Mixtral's files are "llama" with llama.expert_count: not run as a dense llama.
    TinyModelSpec llama;
    TinyModelWriter mixtral(llama);
    mixtral.writer().set_u32("llama.expert_count", 8);
    const std::string mixtral_path = m_tmp.filePath("mixtral-like.gguf").toStdString();
    QVERIFY(mixtral.write(mixtral_path).is_ok());
    auto refused = Engine::load(mixtral_path, {0, 2});
    QVERIFY(!refused.is_ok());
    QCOMPARE(refused.status().code(), ErrorCode::Unsupported);
    QVERIFY2(refused.error_message().find("mixture of experts") != std::string::npos, refused.error_message().c_str());
  }

  // glm4moe's keys as llama.cpp's loader reads them: the shared experts' count is required, a
  // gating function other than softmax or sigmoid is refused, the prediction layers must leave
  // a trunk, and a shared-expert tensor left out is named.
  void glmKeysAndTensorsAreChecked() {
    TinyModelSpec glm;
    glm.arch = "glm4moe";
    glm.n_head = 4;
    glm.head_dim = 64;
    glm.n_layer = 3;
    const auto refused = [&](TinyModelWriter& w, const char* name, ErrorCode code, const char* says) {
      const std::string path = m_tmp.filePath(name).toStdString();
      QVERIFY(w.write(path).is_ok());
      auto engine = Engine::load(path, {0, 2});
      QVERIFY(!engine.is_ok());
      QCOMPARE(engine.status().code(), code);
      QVERIFY2(engine.error_message().find(says) != std::string::npos, engine.error_message().c_str());
    };
    TinyModelSpec softplus_spec = glm;
    softplus_spec.expert_gating_func = 4;  // llama.cpp's SQRT_SOFTPLUS
    TinyModelWriter softplus(softplus_spec);
    refused(softplus, "glm-softplus.gguf", ErrorCode::Unsupported, "'glm4moe.expert_gating_func' = 4");
    // DeepSeek V3's n_group without its topk_group, and groups too small to score by two.
    TinyModelWriter grouped(glm);
    grouped.writer().set_u32("glm4moe.expert_group_count", 4);
    refused(grouped, "glm-grouped.gguf", ErrorCode::NotFound, "'glm4moe.expert_group_used_count'");
    TinyModelWriter singles(glm);
    singles.writer().set_u32("glm4moe.expert_group_count", 8);
    singles.writer().set_u32("glm4moe.expert_group_used_count", 4);
    refused(singles, "glm-single-groups.gguf", ErrorCode::CorruptFile, "equal groups of at least two");
    TinyModelWriter too_few(glm);
    too_few.writer().set_u32("glm4moe.expert_group_count", 4);
    too_few.writer().set_u32("glm4moe.expert_group_used_count", 0);
    refused(too_few, "glm-no-groups-used.gguf", ErrorCode::CorruptFile, "'glm4moe.expert_group_used_count'");
    TinyModelSpec only_nextn = glm;
    only_nextn.n_layer = 0;
    only_nextn.n_dense_lead = 0;
    TinyModelWriter all_nextn(only_nextn);
    refused(all_nextn, "glm-all-nextn.gguf", ErrorCode::CorruptFile, "leaves no trunk layers");
    TinyModelSpec no_shexp = glm;
    no_shexp.skip_tensor = "blk.2.ffn_up_shexp.weight";
    TinyModelWriter missing(no_shexp);
    refused(missing, "glm-no-shexp.gguf", ErrorCode::NotFound, "blk.2.ffn_up_shexp.weight");
    // Without the key the shared experts would silently be left out.
    TinyModelSpec no_count = glm;
    no_count.has_shared_count_key = false;
    TinyModelWriter uncounted(no_count);
    refused(uncounted, "glm-no-shared-key.gguf", ErrorCode::NotFound, "'glm4moe.expert_shared_count'");
    // The same file with its keys loads.
    TinyModelWriter whole(glm);
    const std::string path = m_tmp.filePath("glm-ok.gguf").toStdString();
    QVERIFY(whole.write(path).is_ok());
    auto engine = Engine::load(path, {0, 2});
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    QCOMPARE((*engine)->config().num_layers, int64_t{3});
  }

  void cudaTakesExpertsItHasKernelsFor() {
    // Checked on the host before anything is uploaded, so "auto" falls back to the CPU for what
    // the device lacks. Since 2026-12-08 the device routes experts (softmax, sigmoid with
    // selection biases and shared experts, gpt-oss's softmax over the top k, with its attention
    // sinks and clamped SwiGLU); the engine test runs them (test_cuda_engine).
    auto support = [](const char* preset) {
      const synth::SynthShape* shape = synth::find_synth_preset(preset);
      return shape != nullptr ? check_cuda_plan_support(build_forward_plan(synth::shape_config(*shape)))
                              : make_error(ErrorCode::NotFound, preset);
    };
    for (const char* preset : {"qwen3-30b-a3b", "glm-4.5-air", "gpt-oss-20b", "qwen3-0.6b"}) {
      const Status s = support(preset);
      QVERIFY2(s.is_ok(), qPrintable(QString("%1: %2").arg(preset, QString::fromStdString(s.message()))));
    }
    // Refused by name, each for a kernel the device lacks, saying the CPU runs it.
    struct Refusal {
      const char* preset;
      const char* names;
    };
    for (const Refusal& r : {Refusal{"deepseek-v2-lite", "multi-head latent attention"}}) {
      const Status s = support(r.preset);
      QCOMPARE(s.code(), ErrorCode::Unsupported);
      QVERIFY2(s.message().find(r.names) != std::string::npos, s.message().c_str());
      QVERIFY2(s.message().find("the CPU runs this model") != std::string::npos, s.message().c_str());
    }
    // DeepSeek V3's group-limited routing, on an otherwise supported shape.
    ModelConfig grouped = synth::shape_config(*synth::find_synth_preset("qwen3-30b-a3b"));
    grouped.num_expert_groups = 8;
    grouped.num_expert_groups_used = 4;
    const Status g = check_cuda_plan_support(build_forward_plan(grouped));
    QCOMPARE(g.code(), ErrorCode::Unsupported);
    QVERIFY2(g.message().find("group-limited expert routing") != std::string::npos, g.message().c_str());
    // More experts than the routing kernel holds.
    ModelConfig wide = synth::shape_config(*synth::find_synth_preset("qwen3-30b-a3b"));
    wide.num_experts = kCudaPlanMaxExperts + 1;
    QCOMPARE(check_cuda_plan_support(build_forward_plan(wide)).code(), ErrorCode::Unsupported);
  }
};

QTEST_GUILESS_MAIN(TestMoeEngine)
#include "test_moe_engine.moc"
