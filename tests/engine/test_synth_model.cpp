// `iwb synth` models: small test shapes of every architecture written in every type, read back
// with GgufFile (keys, shapes, the type of each tensor under llama.cpp's mix rules, row
// fallbacks), deterministic per seed, a copied tokenizer, and loaded by the engine with finite
// logits and a greedy generation.
#include "iwb/engine/backend/cuda_step_plan.h"
#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/plan/forward_plan.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "iwb/kernels/dequantize.h"

#include <QCryptographicHash>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <set>
#include "test_paths.h"

using namespace iwb;
using namespace iwb::synth;

namespace {

struct Written {
  SynthReport report;
  std::string path;
  std::unique_ptr<gguf::GgufFile> file;
};

GgmlType tensor_type(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  return t ? t->type : static_cast<GgmlType>(9999);
}

QByteArray file_hash(const std::string& path) {
  QFile f(QString::fromStdString(path));
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256);
}

std::string type_name(GgmlType t) { return std::string(ggml_type_name(t)); }

// A real preset's parameter count lies strictly between lo and hi (its model card's figure).
void check_parameter_count(const char* preset, int64_t lo, int64_t hi) {
  const int64_t n = find_synth_preset(preset)->num_parameters();
  QVERIFY2(n > lo && n < hi, qPrintable(QString("%1: %2 parameters").arg(preset).arg(n)));
}

}  // namespace

class TestSynthModel : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

  // Synthesizes `preset` as `type`; the file is opened for the checks (nullptr on failure).
  Written synthesize(const std::string& preset, const std::string& type, uint64_t seed = 7,
                     const std::string& vocab = {}, const std::string& suffix = {}, int64_t distinct_rows = 0) {
    Written w;
    SynthOptions o;
    o.distinct_rows = distinct_rows;
    o.shape = *find_synth_preset(preset);
    o.weight_type = type;
    o.seed = seed;
    o.vocab_path = vocab;
    o.num_threads = 2;
    w.path = m_tmp.filePath(QString::fromStdString(preset + "-" + type + suffix + ".gguf")).toStdString();
    o.output_path = w.path;
    auto r = synthesize_model(o);
    if (!r) {
      qWarning("%s", r.error_message().c_str());
      return w;
    }
    w.report = *r;
    auto f = gguf::GgufFile::open(w.path);
    if (f) w.file = std::move(*f);
    return w;
  }

  // Loads the file in the engine: finite logits after a short prompt, and a greedy run.
  void check_engine_runs(const std::string& path) {
    auto engine = Engine::load(path, {256, 2});
    QVERIFY2(engine, engine.error_message().c_str());
    const std::vector<int32_t> prompt = (*engine)->tokenizer().encode("hello");
    QVERIFY(prompt.size() >= 5);
    auto logits = (*engine)->logits_for(prompt);
    QVERIFY2(logits, logits.error_message().c_str());
    QCOMPARE(static_cast<int64_t>(logits->size()), (*engine)->config().vocab_size);
    float lo = INFINITY, hi = -INFINITY;
    for (float v : *logits) {
      QVERIFY(std::isfinite(v));
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    QVERIFY2(hi - lo > 1e-3f, "the logits should not all be equal");  // weights are random, not zero

    GenerationRequest request;
    request.prompt_tokens = prompt;
    request.max_new_tokens = 6;
    request.sampling.temperature = 0.0f;
    request.stop_at_end_of_generation = false;
    auto id = (*engine)->add_request(request);
    QVERIFY2(id, id.error_message().c_str());
    int num_tokens = 0;
    while ((*engine)->has_unfinished_requests()) {
      auto step = (*engine)->step();
      QVERIFY2(step, step.error_message().c_str());
      num_tokens += static_cast<int>(step->tokens.size());
    }
    QCOMPARE(num_tokens, 6);
  }

 private slots:
  void initTestCase() { QVERIFY(m_tmp.isValid()); }

  void every_type_writes_the_shape_and_loads_data() {
    QTest::addColumn<QString>("type");
    for (const std::string& t : weight_type_names()) QTest::newRow(t.c_str()) << QString::fromStdString(t);
  }
  void every_type_writes_the_shape_and_loads() {
    QFETCH(QString, type);
    const Written w = synthesize("test-llama", type.toStdString());
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    const SynthShape& s = *find_synth_preset("test-llama");
    const WeightTypePlan plan = *parse_weight_type(type.toStdString());
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("llama"));
    QCOMPARE(f.get_int("general.file_type").value_or(-1), static_cast<int64_t>(plan.file_type));
    QCOMPARE(f.get_int("llama.embedding_length").value_or(0), s.embedding_length);
    QCOMPARE(f.get_int("llama.block_count").value_or(0), s.num_layers);
    QCOMPARE(f.get_int("llama.attention.head_count_kv").value_or(0), s.num_kv_heads);
    QCOMPARE(f.get_int("llama.feed_forward_length").value_or(0), s.feed_forward_length);
    QCOMPARE(static_cast<int64_t>(f.get_array("tokenizer.ggml.tokens")->items.size()), s.vocab_size);
    // 2 tensors outside the layers + 9 per layer + output norm.
    QCOMPARE(static_cast<int64_t>(f.tensors().size()), 1 + 9 * s.num_layers + 2);
    const gguf::TensorInfo* q = f.find_tensor("blk.1.attn_q.weight");
    QVERIFY(q);
    QCOMPARE(q->shape, (std::vector<int64_t>{s.embedding_length, s.q_width()}));
    QCOMPARE(f.find_tensor("blk.0.ffn_down.weight")->shape,
             (std::vector<int64_t>{s.feed_forward_length, s.embedding_length}));
    for (const gguf::TensorInfo& t : f.tensors()) {
      if (t.shape.size() == 1) QCOMPARE(type_name(t.type), std::string("F32"));  // norms stay F32
    }
    // The untied classifier: Q6_K in every quantized file but Q8_0 and MXFP4 (Q8_0), the file's
    // type otherwise.
    const bool is_float =
        plan.base_type == GgmlType::F32 || plan.base_type == GgmlType::F16 || plan.base_type == GgmlType::BF16;
    const GgmlType classifier = is_float || plan.base_type == GgmlType::Q8_0 ? plan.base_type
                                : plan.base_type == GgmlType::MXFP4          ? GgmlType::Q8_0
                                                                             : GgmlType::Q6_K;
    QCOMPARE(type_name(tensor_type(f, "output.weight")), type_name(classifier));
    QCOMPARE(type_name(tensor_type(f, "token_embd.weight")), type_name(plan.base_type));
    QCOMPARE(type_name(tensor_type(f, "blk.0.attn_q.weight")), type_name(plan.base_type));
    // Tensor data: what the report says, and values of the intended scale (N(0, 0.02)).
    const gguf::TensorInfo* up = f.find_tensor("blk.0.ffn_up.weight");
    std::vector<float> values(static_cast<size_t>(up->num_elements()));
    QVERIFY(dequantize_row_ref(up->type, f.tensor_data(*up).data(), values.data(), up->num_elements()));
    double sum_sq = 0;
    for (float v : values) sum_sq += static_cast<double>(v) * v;
    const double rms = std::sqrt(sum_sq / static_cast<double>(values.size()));
    QVERIFY2(rms > 0.015 && rms < 0.025, qPrintable(QString::number(rms)));
    check_engine_runs(w.path);
  }

  void q4_k_m_follows_llama_cpp_rules() {
    for (const std::string& mix : {std::string("Q4_K_M"), std::string("Q5_K_M")}) {
      const Written w = synthesize("test-gemma3", mix);  // 7 layers: more bits in 2, 5, 6
      QVERIFY(w.file);
      const GgmlType base = mix == "Q4_K_M" ? GgmlType::Q4_K : GgmlType::Q5_K;
      for (int64_t il = 0; il < 7; ++il) {
        const bool more = il == 2 || il == 5 || il == 6;
        QCOMPARE(uses_more_bits(il, 7), more);
        const std::string p = "blk." + std::to_string(il) + ".";
        QCOMPARE(type_name(tensor_type(*w.file, p + "attn_v.weight")), type_name(more ? GgmlType::Q6_K : base));
        QCOMPARE(type_name(tensor_type(*w.file, p + "ffn_down.weight")), type_name(more ? GgmlType::Q6_K : base));
        QCOMPARE(type_name(tensor_type(*w.file, p + "attn_k.weight")), type_name(base));
        QCOMPARE(type_name(tensor_type(*w.file, p + "attn_q_norm.weight")), std::string("F32"));
      }
      // Tied embeddings: token_embd is the classifier and gets Q6_K.
      QVERIFY(!w.file->find_tensor("output.weight"));
      QCOMPARE(type_name(tensor_type(*w.file, "token_embd.weight")), std::string("Q6_K"));
      QCOMPARE(w.file->get_int("general.file_type").value_or(0), int64_t{mix == "Q4_K_M" ? 15 : 17});
    }
    // The real Llama 3.2 1B Q4_K_M: 8 attn_v and 8 ffn_down of its 16 layers get Q6_K.
    int num_more = 0;
    for (int64_t il = 0; il < 16; ++il) num_more += uses_more_bits(il, 16);
    QCOMPARE(num_more, 8);
  }

  void gemma3_keys_and_tensors() {
    const Written w = synthesize("test-gemma3", "Q8_0");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("gemma3"));
    QCOMPARE(f.get_int("gemma3.attention.sliding_window").value_or(0), int64_t{16});
    QCOMPARE(f.get_int("gemma3.attention.key_length").value_or(0), int64_t{128});
    for (const char* name : {"blk.6.attn_q_norm.weight", "blk.6.attn_k_norm.weight", "blk.6.post_attention_norm.weight",
                             "blk.6.post_ffw_norm.weight"}) {
      QVERIFY2(f.find_tensor(name), name);
    }
    QCOMPARE(f.find_tensor("blk.0.attn_q.weight")->shape, (std::vector<int64_t>{256, 256}));  // 2 heads of 128
    check_engine_runs(w.path);
  }

  void gemma2_keys_tensors_and_config() {
    const Written w = synthesize("test-gemma2", "Q8_0");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("gemma2"));
    QCOMPARE(f.get_int("gemma2.attention.sliding_window").value_or(0), int64_t{8});
    QCOMPARE(f.get_int("gemma2.attention.key_length").value_or(0), int64_t{128});
    QCOMPARE(f.get_float("gemma2.attn_logit_softcapping").value_or(0.0), 2.0);
    QCOMPARE(f.get_float("gemma2.final_logit_softcapping").value_or(0.0), 1.5);
    for (const char* name : {"blk.3.post_attention_norm.weight", "blk.3.post_ffw_norm.weight"}) {
      QVERIFY2(f.find_tensor(name), name);
    }
    QVERIFY(!f.find_tensor("blk.0.attn_q_norm.weight"));  // gemma 3's per-head norms, not gemma 2's
    QVERIFY(!f.find_tensor("output.weight"));             // tied
    auto loaded = model_config_from_gguf(f);
    QVERIFY2(loaded.is_ok(), loaded.error_message().c_str());
    const ModelConfig c = shape_config(*find_synth_preset("test-gemma2"));
    QCOMPARE(loaded->attention_softcap, 2.0f);
    QCOMPARE(loaded->final_logit_softcap, 1.5f);
    QCOMPARE(loaded->attention_softcap, c.attention_softcap);
    QCOMPARE(loaded->final_logit_softcap, c.final_logit_softcap);
    QCOMPARE(loaded->is_sliding_layer, (std::vector<bool>{true, false, true, false}));  // the even layers
    QCOMPARE(loaded->is_sliding_layer, c.is_sliding_layer);
    QCOMPARE(loaded->rope_freq_base_swa, loaded->rope_freq_base);  // one RoPE for both kinds of layer
    QCOMPARE(loaded->rope_freq_base_swa, c.rope_freq_base_swa);
    QCOMPARE(loaded->embedding_scale, std::sqrt(256.0f));
    QCOMPARE(loaded->attention_scale, 1.0f / std::sqrt(128.0f));
    check_engine_runs(w.path);

    // Gemma 2 2B: 2.61 B parameters (Google's model card: 2.6 B), 27B's queries scaled by
    // 1/sqrt(width / heads) rather than 1/sqrt(head size), as gemma_pytorch does.
    const SynthShape& two_b = *find_synth_preset("gemma-2-2b");
    check_parameter_count("gemma-2-2b", 2'600'000'000, 2'620'000'000);
    SynthShape big = two_b;
    big.embedding_length = 4608;
    big.num_layers = 46;
    big.num_heads = 32;
    big.head_dim = 128;
    QCOMPARE(shape_config(big).attention_scale, 1.0f / std::sqrt(144.0f));
  }

  void smollm3_layers_without_rope() {
    const Written w = synthesize("test-smollm3", "Q8_0");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("smollm3"));
    auto loaded = model_config_from_gguf(f);
    QVERIFY2(loaded.is_ok(), loaded.error_message().c_str());
    QCOMPARE(loaded->rope_layout, RopeLayout::Normal);  // llama's pairs, as llama.cpp's LLAMA_ROPE_TYPE_NORM
    // Layers 3 and 7 of 8 attend without RoPE: the plan has no rope op there, and one elsewhere.
    const ForwardPlan plan = build_forward_plan(*loaded);
    std::vector<int32_t> roped;
    for (const PlanOp& op : plan.body) {
      if (op.kind == PlanOpKind::Rope) roped.push_back(op.layer);
    }
    QCOMPARE(roped, (std::vector<int32_t>{0, 1, 2, 4, 5, 6}));
    check_engine_runs(w.path);
    // SmolLM3-3B: 3.08 B parameters (the model card: 3B; tied embeddings).
    check_parameter_count("smollm3-3b", 3'000'000'000, 3'100'000'000);
  }

  void olmo2_norms_and_olmo3_window() {
    const Written w = synthesize("test-olmo2", "Q8_0");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("olmo2"));
    QVERIFY(!f.find_tensor("blk.0.attn_norm.weight"));  // no pre-norms
    QVERIFY(!f.find_tensor("blk.0.ffn_norm.weight"));
    QCOMPARE(f.find_tensor("blk.0.attn_q_norm.weight")->shape, (std::vector<int64_t>{256}));  // 4 heads of 64
    QCOMPARE(f.find_tensor("blk.0.attn_k_norm.weight")->shape, (std::vector<int64_t>{128}));  // 2 KV heads
    QVERIFY(f.find_tensor("blk.3.post_ffw_norm.weight"));
    QVERIFY(!f.find("olmo2.attention.sliding_window"));  // OLMo 2: no window
    auto loaded = model_config_from_gguf(f);
    QVERIFY2(loaded.is_ok(), loaded.error_message().c_str());
    QVERIFY(!loaded->has_pre_norms);
    QCOMPARE(loaded->q_norm_width(), int64_t{256});
    QCOMPARE(loaded->sliding_window, int64_t{0});
    uint64_t elements = 0;
    for (const gguf::TensorInfo& t : f.tensors()) elements += static_cast<uint64_t>(t.num_elements());
    QCOMPARE(static_cast<uint64_t>(w.report.num_parameters), elements);
    check_engine_runs(w.path);

    // OLMo 3: the window and one bool per layer, as llama.cpp's converter writes them; the
    // sliding layers rotate with the global base and without scaling.
    const Written w3 = synthesize("test-olmo3", "Q8_0");
    QVERIFY(w3.file);
    const gguf::Value* pattern = w3.file->find("olmo2.attention.sliding_window_pattern");
    QVERIFY(pattern && pattern->as_array());
    QCOMPARE(pattern->as_array()->items.size(), size_t{8});
    auto loaded3 = model_config_from_gguf(*w3.file);
    QVERIFY2(loaded3.is_ok(), loaded3.error_message().c_str());
    QCOMPARE(loaded3->sliding_window, int64_t{6});
    QCOMPARE(loaded3->is_sliding_layer, (std::vector<bool>{true, true, true, false, true, true, true, false}));
    QCOMPARE(loaded3->is_sliding_layer, shape_config(*find_synth_preset("test-olmo3")).is_sliding_layer);
    QVERIFY(loaded3->is_sliding_rope_unscaled);
    QCOMPARE(loaded3->rope_freq_base_swa, loaded3->rope_freq_base);
    check_engine_runs(w3.path);

    // OLMo 2 1B: 1.48 B parameters (allenai's model card: 1.5 B), untied.
    check_parameter_count("olmo-2-1b", 1'450'000'000, 1'500'000'000);
  }

  void granite_multipliers() {
    const Written w = synthesize("test-granite", "Q8_0");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_float("granite.logit_scale").value_or(0.0), 8.0);
    QCOMPARE(f.get_float("granite.residual_scale").value_or(0.0), double(0.22f));
    auto loaded = model_config_from_gguf(f);
    QVERIFY2(loaded.is_ok(), loaded.error_message().c_str());
    const ModelConfig c = shape_config(*find_synth_preset("test-granite"));
    QCOMPARE(loaded->embedding_scale, 12.0f);
    QCOMPARE(loaded->residual_scale, 0.22f);
    QCOMPARE(loaded->attention_scale, 0.015625f);  // in place of 1/sqrt(64)
    QCOMPARE(loaded->logit_scale, 8.0f);
    QCOMPARE(loaded->residual_scale, c.residual_scale);
    QCOMPARE(loaded->attention_scale, c.attention_scale);
    QCOMPARE(loaded->rope_layout, RopeLayout::Normal);
    check_engine_runs(w.path);
    // The CUDA backend runs it too (its residual adds take the scale since 2026-12-07;
    // test_cuda_engine compares its logits with the CPU's).
    QVERIFY(check_cuda_plan_support(build_forward_plan(c)).is_ok());
  }

  void phi3_keys_and_tensors() {
    // The real preset's metadata as llama.cpp's converter writes it for Phi-3.5-mini.
    const SynthShape& mini = *find_synth_preset("phi-3.5-mini");
    QCOMPARE(mini.longrope.long_factors.size(), size_t{48});
    QCOMPARE(mini.longrope.short_factors.size(), size_t{48});
    QCOMPARE(mini.num_parameters(), int64_t{3821079648});                // Phi-3.5-mini's 3.82 B
    QVERIFY(std::fabs(longrope_attn_factor(mini) - 1.190238f) < 1e-5f);  // sqrt(1 + ln 32 / ln 4096)

    const Written w = synthesize("test-phi3", "Q8_0");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("phi3"));
    QCOMPARE(f.get_int("phi3.rope.scaling.original_context_length").value_or(0), int64_t{256});
    QVERIFY(std::fabs(f.get_float("phi3.rope.scaling.attn_factor").value_or(0) - std::sqrt(1.25)) < 1e-6);
    QVERIFY(!f.find_tensor("blk.0.attn_q.weight") && !f.find_tensor("blk.0.ffn_gate.weight"));
    QCOMPARE(f.find_tensor("blk.1.attn_qkv.weight")->shape, (std::vector<int64_t>{192, 192 + 2 * 64}));
    QCOMPARE(f.find_tensor("blk.1.ffn_up.weight")->shape, (std::vector<int64_t>{192, 2 * 320}));
    QCOMPARE(f.find_tensor("rope_factors_long.weight")->shape, (std::vector<int64_t>{32}));
    QVERIFY(f.find_tensor("rope_factors_short.weight"));
    // Phi-3's chat markers are control tokens and its template is Phi-3.5's.
    auto tok = tokenizer::Tokenizer::from_gguf(f);
    QVERIFY(tok);
    const std::vector<int32_t> ids = tok->encode("<|user|>", {.add_bos = false, .parse_special = true});
    QCOMPARE(ids.size(), size_t{1});
    QVERIFY(tok->is_end_of_generation(tok->encode("<|end|>", {.add_bos = false, .parse_special = true}).at(0)));
    QCOMPARE(chat_template_family_name(detect_chat_template(f.get_string("tokenizer.chat_template").value_or(""))),
             std::string_view("phi3"));
    check_engine_runs(w.path);
  }

  void qwen3moe_experts_as_llama_cpp_writes_them() {
    // test-qwen3moe: 2 layers of 8 experts (2 per token) of 256, width 256. Q4_K_M: the router
    // stays F32; ffn_down_exps follows ffn_down's more-bits rule (both of 2 layers: Q6_K).
    const Written w = synthesize("test-qwen3moe", "Q4_K_M");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("qwen3moe"));
    QCOMPARE(f.get_int("qwen3moe.expert_count").value_or(0), int64_t{8});
    QCOMPARE(f.get_int("qwen3moe.expert_used_count").value_or(0), int64_t{2});
    QCOMPARE(f.get_int("qwen3moe.expert_feed_forward_length").value_or(0), int64_t{256});
    QCOMPARE(f.find_tensor("blk.1.ffn_gate_inp.weight")->shape, (std::vector<int64_t>{256, 8}));
    QCOMPARE(f.find_tensor("blk.1.ffn_gate_exps.weight")->shape, (std::vector<int64_t>{256, 256, 8}));
    QCOMPARE(f.find_tensor("blk.1.ffn_down_exps.weight")->shape, (std::vector<int64_t>{256, 256, 8}));
    QVERIFY(!f.find_tensor("blk.0.ffn_gate.weight"));
    QCOMPARE(type_name(tensor_type(f, "blk.0.ffn_gate_inp.weight")), std::string("F32"));
    QCOMPARE(type_name(tensor_type(f, "blk.0.ffn_up_exps.weight")), std::string("Q4_K"));
    QCOMPARE(type_name(tensor_type(f, "blk.1.ffn_down_exps.weight")), std::string("Q6_K"));
    // Parameters count every expert: the report and the file agree.
    uint64_t elements = 0;
    for (const gguf::TensorInfo& t : f.tensors()) elements += static_cast<uint64_t>(t.num_elements());
    QCOMPARE(static_cast<uint64_t>(w.report.num_parameters), elements);
    check_engine_runs(w.path);

    // The real shape's parameters: Qwen3-30B-A3B has 30.5 B, 3.3 B of them active per token.
    const SynthShape& big = *find_synth_preset("qwen3-30b-a3b");
    check_parameter_count("qwen3-30b-a3b", 30'400'000'000, 30'600'000'000);
    SynthShape no_experts = big;
    no_experts.num_experts = 0;
    SynthOptions o;
    o.shape = no_experts;
    o.output_path = m_tmp.filePath("no-experts.gguf").toStdString();
    auto r = synthesize_model(o);
    QVERIFY(!r);
    QVERIFY2(r.error_message().find("needs experts") != std::string::npos, r.error_message().c_str());
  }

  void gpt_oss_as_llama_cpp_writes_it() {
    // test-gpt-oss: 3 layers (0 and 2 slide, window 8), 6 experts of 96 (2 per token) in MXFP4
    // over a Q8_0 file, biases everywhere, sinks per head, YaRN factor 4 over 256.
    const Written w = synthesize("test-gpt-oss", "Q8_0");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("gpt-oss"));
    QCOMPARE(f.get_int("gpt-oss.expert_count").value_or(0), int64_t{6});
    QCOMPARE(f.get_int("gpt-oss.attention.sliding_window").value_or(0), int64_t{8});
    QCOMPARE(f.get_string("gpt-oss.rope.scaling.type").value_or(""), std::string("yarn"));
    QCOMPARE(f.get_int("gpt-oss.rope.scaling.original_context_length").value_or(0), int64_t{256});
    QCOMPARE(type_name(tensor_type(f, "blk.0.ffn_gate_exps.weight")), std::string("MXFP4"));
    QCOMPARE(type_name(tensor_type(f, "blk.2.ffn_down_exps.weight")), std::string("MXFP4"));
    QCOMPARE(type_name(tensor_type(f, "blk.0.attn_q.weight")), std::string("Q8_0"));
    QCOMPARE(type_name(tensor_type(f, "blk.0.ffn_gate_inp.weight")), std::string("F32"));
    QCOMPARE(f.find_tensor("blk.1.ffn_up_exps.bias")->shape, (std::vector<int64_t>{96, 6}));
    QCOMPARE(f.find_tensor("blk.1.ffn_down_exps.bias")->shape, (std::vector<int64_t>{160, 6}));
    QCOMPARE(f.find_tensor("blk.1.attn_sinks.weight")->shape, (std::vector<int64_t>{4}));
    QVERIFY(f.find_tensor("blk.1.post_attention_norm.weight") && !f.find_tensor("blk.1.ffn_norm.weight"));
    // Harmony's markers are single tokens, <|return|> ends generation and <|end|> does not.
    auto tok = tokenizer::Tokenizer::from_gguf(f);
    QVERIFY(tok);
    const auto one = [&](const char* text) {
      const std::vector<int32_t> ids = tok->encode(text, {.add_bos = false, .parse_special = true});
      return ids.size() == 1 ? ids[0] : -1;
    };
    QVERIFY(one("<|start|>") >= 0 && one("<|message|>") >= 0 && one("<|channel|>") >= 0);
    QVERIFY(tok->is_end_of_generation(one("<|return|>")));
    QVERIFY(!tok->is_end_of_generation(one("<|end|>")));
    QCOMPARE(chat_template_family_name(detect_chat_template(f.get_string("tokenizer.chat_template").value_or(""))),
             std::string_view("harmony"));
    uint64_t elements = 0;
    for (const gguf::TensorInfo& t : f.tensors()) elements += static_cast<uint64_t>(t.num_elements());
    QCOMPARE(static_cast<uint64_t>(w.report.num_parameters), elements);
    // The file's config is the one the cost model prices the shape with.
    auto loaded = model_config_from_gguf(f);
    QVERIFY2(loaded.is_ok(), loaded.error_message().c_str());
    const ModelConfig c = shape_config(*find_synth_preset("test-gpt-oss"));
    QCOMPARE(loaded->rope_freq_scale, c.rope_freq_scale);
    QCOMPARE(loaded->rope_freq_base_swa, c.rope_freq_base_swa);
    QCOMPARE(loaded->rope_yarn_attn_factor, c.rope_yarn_attn_factor);
    QCOMPARE(loaded->is_sliding_layer, c.is_sliding_layer);
    check_engine_runs(w.path);

    // gpt-oss-20b has 20.9 B parameters (OpenAI's model card: 20.91 B).
    check_parameter_count("gpt-oss-20b", 20'800'000'000, 21'000'000'000);
  }

  void deepseek2_as_llama_cpp_writes_it() {
    // test-deepseek2: DeepSeek V3's layout in small (a query latent of 128, a key/value latent of
    // 128 with 32 roped values, heads of 64 + 32 and values of 64, 8 experts in 4 groups).
    const Written w = synthesize("test-deepseek2", "Q8_0");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_int("deepseek2.attention.head_count_kv").value_or(0), int64_t{1});
    QCOMPARE(f.get_int("deepseek2.attention.key_length").value_or(0), int64_t{160});
    QCOMPARE(f.get_int("deepseek2.attention.value_length").value_or(0), int64_t{128});
    QCOMPARE(f.get_int("deepseek2.attention.key_length_mla").value_or(0), int64_t{96});
    QCOMPARE(f.get_int("deepseek2.attention.value_length_mla").value_or(0), int64_t{64});
    QCOMPARE(f.get_int("deepseek2.attention.q_lora_rank").value_or(0), int64_t{128});
    QCOMPARE(f.get_int("deepseek2.attention.kv_lora_rank").value_or(0), int64_t{128});
    QCOMPARE(f.get_int("deepseek2.expert_group_count").value_or(0), int64_t{4});
    QCOMPARE(f.get_int("deepseek2.expert_group_used_count").value_or(0), int64_t{2});
    QVERIFY(std::abs(f.get_float("deepseek2.rope.scaling.yarn_log_multiplier").value_or(0.0) - 0.1) < 1e-6);
    QCOMPARE(f.find_tensor("blk.1.attn_q_a.weight")->shape, (std::vector<int64_t>{256, 128}));
    QCOMPARE(f.find_tensor("blk.1.attn_q_b.weight")->shape, (std::vector<int64_t>{128, 4 * 96}));
    QCOMPARE(f.find_tensor("blk.1.attn_kv_a_mqa.weight")->shape, (std::vector<int64_t>{256, 160}));
    QCOMPARE(f.find_tensor("blk.1.attn_k_b.weight")->shape, (std::vector<int64_t>{64, 128, 4}));
    QCOMPARE(f.find_tensor("blk.1.attn_v_b.weight")->shape, (std::vector<int64_t>{128, 64, 4}));
    QCOMPARE(f.find_tensor("blk.1.attn_output.weight")->shape, (std::vector<int64_t>{256, 256}));
    QVERIFY(!f.find_tensor("blk.0.attn_k.weight") && !f.find_tensor("blk.0.attn_q.weight"));
    uint64_t elements = 0;
    for (const gguf::TensorInfo& t : f.tensors()) elements += static_cast<uint64_t>(t.num_elements());
    QCOMPARE(static_cast<uint64_t>(w.report.num_parameters), elements);
    auto loaded = model_config_from_gguf(f);
    QVERIFY2(loaded.is_ok(), loaded.error_message().c_str());
    const ModelConfig c = shape_config(*find_synth_preset("test-deepseek2"));
    QCOMPARE(loaded->attention_scale, c.attention_scale);
    QCOMPARE(loaded->rope_yarn_attn_factor, c.rope_yarn_attn_factor);
    QCOMPARE(loaded->num_expert_groups_used, c.num_expert_groups_used);
    QCOMPARE(loaded->q_heads_width(), c.q_heads_width());
    QCOMPARE(loaded->latent_kv_width(), c.latent_kv_width());
    check_engine_runs(w.path);
    // The lite shape: no query latent, attn_q straight from the input, no selection biases.
    const Written lite = synthesize("test-deepseek2-lite", "Q4_K_M");
    QVERIFY(lite.file);
    QVERIFY(lite.file->find_tensor("blk.0.attn_q.weight") && !lite.file->find_tensor("blk.0.attn_q_a.weight"));
    QVERIFY(!lite.file->find_tensor("blk.1.exp_probs_b.bias"));
    QVERIFY(!lite.file->find("deepseek2.attention.q_lora_rank"));
    QCOMPARE(type_name(tensor_type(*lite.file, "blk.1.attn_k_b.weight")), std::string("Q5_0"));  // 64 per row
    check_engine_runs(lite.path);

    // iwb synth --layers 2 of DeepSeek-V3: its first two layers, both dense (the first three are).
    const SynthShape cut = find_synth_preset("deepseek-v3")->with_layers(2);
    QCOMPARE(cut.num_layers, int64_t{2});
    QCOMPARE(cut.num_leading_dense_layers, int64_t{2});
    QVERIFY(!shape_config(cut).is_expert_layer(1));
    QCOMPARE(find_synth_preset("deepseek-v3")->with_layers(5).num_leading_dense_layers, int64_t{3});

    // The published totals: DeepSeek-V2-Lite 15.7 B, DeepSeek-V3 671 B (its prediction layer
    // left out, as llama.cpp's converter leaves it), GLM-4.7-Flash "30B-A3B", Kimi K2 1.03 T.
    check_parameter_count("deepseek-v2-lite", 15'600'000'000, 15'800'000'000);
    check_parameter_count("deepseek-v3", 670'000'000'000, 672'000'000'000);
    check_parameter_count("glm-4.7-flash", 29'000'000'000, 31'500'000'000);
    check_parameter_count("kimi-k2", 1'020'000'000'000, 1'040'000'000'000);
  }

  void glm4moe_as_llama_cpp_writes_it() {
    // test-glm4moe: 4 trunk layers (the first dense) and one prediction layer after them, 6
    // experts of 64 (2 per token) and a shared one, sigmoid routing with selection biases,
    // weights renormalised and scaled by 2.5, q/k norms, 32 of each 64-wide head rotated.
    const Written w = synthesize("test-glm4moe", "Q8_0");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(f.get_string("general.architecture").value_or(""), std::string("glm4moe"));
    QCOMPARE(f.get_int("glm4moe.block_count").value_or(0), int64_t{5});
    QCOMPARE(f.get_int("glm4moe.nextn_predict_layers").value_or(0), int64_t{1});
    QCOMPARE(f.get_int("glm4moe.leading_dense_block_count").value_or(0), int64_t{1});
    QCOMPARE(f.get_int("glm4moe.expert_shared_count").value_or(0), int64_t{1});
    QCOMPARE(f.get_int("glm4moe.expert_gating_func").value_or(0), int64_t{2});
    QCOMPARE(f.get_int("glm4moe.rope.dimension_count").value_or(0), int64_t{32});
    QCOMPARE(f.get_float("glm4moe.expert_weights_scale").value_or(0.0), 2.5);
    QVERIFY(f.find_tensor("blk.0.ffn_gate.weight") && !f.find_tensor("blk.0.ffn_gate_inp.weight"));
    QCOMPARE(f.find_tensor("blk.1.exp_probs_b.bias")->shape, (std::vector<int64_t>{6}));
    QCOMPARE(f.find_tensor("blk.1.ffn_gate_shexp.weight")->shape, (std::vector<int64_t>{192, 64}));
    QCOMPARE(f.find_tensor("blk.3.ffn_down_shexp.weight")->shape, (std::vector<int64_t>{64, 192}));
    QCOMPARE(f.find_tensor("blk.4.nextn.eh_proj.weight")->shape, (std::vector<int64_t>{384, 192}));
    QVERIFY(f.find_tensor("blk.4.ffn_up_exps.weight") && f.find_tensor("blk.2.attn_q_norm.weight"));
    QVERIFY(f.find_tensor("blk.1.post_attention_norm.weight") && !f.find_tensor("blk.1.ffn_norm.weight"));
    QCOMPARE(type_name(tensor_type(f, "blk.1.exp_probs_b.bias")), std::string("F32"));
    uint64_t elements = 0;
    for (const gguf::TensorInfo& t : f.tensors()) elements += static_cast<uint64_t>(t.num_elements());
    QCOMPARE(static_cast<uint64_t>(w.report.num_parameters), elements);
    // The file's config is the shape's (the cost model's), the prediction layer outside the trunk.
    auto loaded = model_config_from_gguf(f);
    QVERIFY2(loaded.is_ok(), loaded.error_message().c_str());
    const ModelConfig c = shape_config(*find_synth_preset("test-glm4moe"));
    QCOMPARE(loaded->num_layers, int64_t{4});
    QCOMPARE(c.num_layers, int64_t{4});
    QCOMPARE(loaded->num_nextn_layers, c.num_nextn_layers);
    QCOMPARE(loaded->rope_num_rotated, c.rope_num_rotated);
    QCOMPARE(loaded->expert_weights_scale, c.expert_weights_scale);
    QCOMPARE(loaded->is_expert_weight_normalized, c.is_expert_weight_normalized);
    QCOMPARE(loaded->has_qk_norm, c.has_qk_norm);
    QCOMPARE(loaded->num_shared_experts, c.num_shared_experts);
    QCOMPARE(loaded->num_leading_dense_layers, c.num_leading_dense_layers);
    QVERIFY(loaded->is_expert_gating_sigmoid && c.is_expert_gating_sigmoid);
    check_engine_runs(w.path);

    // GLM-4.5-Air: 106 B in its trunk (Z.ai's figure), 109 B with the prediction layer the file holds.
    check_parameter_count("glm-4.5-air", 109'000'000'000, 109'500'000'000);
    SynthShape dense = *find_synth_preset("test-llama");
    dense.num_shared_experts = 1;
    SynthOptions o;
    o.shape = dense;
    o.output_path = m_tmp.filePath("llama-shared.gguf").toStdString();
    auto r = synthesize_model(o);
    QVERIFY(!r);
    QVERIFY2(r.error_message().find("no shared experts") != std::string::npos, r.error_message().c_str());
  }

  void rows_that_do_not_fit_fall_back_like_llama_cpp() {
    // Width 192 is no multiple of 256 (as Qwen2.5's 896): Q4_K -> Q5_0, Q6_K -> Q8_0, and the
    // classifier is Q8_0 outright; ffn_down (rows of 512) keeps its K type.
    const Written w = synthesize("test-qwen2", "Q4_K_M");
    QVERIFY(w.file);
    const gguf::GgufFile& f = *w.file;
    QCOMPARE(type_name(tensor_type(f, "token_embd.weight")), std::string("Q8_0"));
    QCOMPARE(type_name(tensor_type(f, "blk.1.attn_q.weight")), std::string("Q5_0"));
    QCOMPARE(type_name(tensor_type(f, "blk.2.attn_v.weight")), std::string("Q8_0"));  // wanted Q6_K
    QCOMPARE(type_name(tensor_type(f, "blk.1.attn_v.weight")), std::string("Q5_0"));  // wanted Q4_K
    QCOMPARE(type_name(tensor_type(f, "blk.1.ffn_down.weight")), std::string("Q4_K"));
    QCOMPARE(type_name(tensor_type(f, "blk.2.ffn_down.weight")), std::string("Q6_K"));
    QCOMPARE(type_name(tensor_type(f, "blk.0.attn_q.bias")), std::string("F32"));
    int num_fallbacks = 0;
    for (const SynthTensorSummary& t : w.report.tensors) num_fallbacks += t.type != t.wanted;
    QCOMPARE(num_fallbacks, 3 * 6);  // q, k, v, output, gate, up in each of 3 layers
    check_engine_runs(w.path);
  }

  void same_seed_same_file_other_seed_other_weights() {
    const Written a = synthesize("test-qwen2", "Q5_K_M", 11, {}, "-a");
    const Written b = synthesize("test-qwen2", "Q5_K_M", 11, {}, "-b");
    const Written c = synthesize("test-qwen2", "Q5_K_M", 12, {}, "-c");
    QVERIFY(a.file && b.file && c.file);
    QCOMPARE(file_hash(a.path), file_hash(b.path));
    const gguf::TensorInfo* ta = a.file->find_tensor("blk.0.ffn_up.weight");
    const gguf::TensorInfo* tc = c.file->find_tensor("blk.0.ffn_up.weight");
    QCOMPARE(ta->offset, tc->offset);  // same layout, only the seed in the description differs
    QVERIFY(!std::equal(a.file->tensor_data(*ta).begin(), a.file->tensor_data(*ta).end(),
                        c.file->tensor_data(*tc).begin()));
    // Deterministic whatever the thread count: one thread writes the same bytes as two.
    SynthOptions o;
    o.shape = *find_synth_preset("test-qwen2");
    o.weight_type = "Q5_K_M";
    o.seed = 11;
    o.num_threads = 1;
    o.output_path = m_tmp.filePath("one-thread.gguf").toStdString();
    QVERIFY(synthesize_model(o));
    QCOMPARE(file_hash(o.output_path), file_hash(a.path));
  }

  // --distinct-rows: quantized tensors repeat a few drawn rows; F32 ones (the router) do not.
  void distinct_rows_repeat_quantized_rows_only() {
    const Written w = synthesize("test-qwen3moe", "Q4_K_M", 7, {}, "-distinct", 3);
    const Written full = synthesize("test-qwen3moe", "Q4_K_M", 7, {}, "-full");
    QVERIFY(w.file && full.file);
    auto distinct_rows = [](const gguf::GgufFile& f, const std::string& name) {
      const gguf::TensorInfo* t = f.find_tensor(name);
      const std::span<const uint8_t> data = f.tensor_data(*t);
      const size_t row_bytes = *ggml_row_bytes(t->type, t->shape[0]);
      std::set<std::string> rows;
      for (size_t off = 0; off < data.size(); off += row_bytes) {
        rows.emplace(reinterpret_cast<const char*>(data.data() + off), row_bytes);
      }
      return rows.size();
    };
    QCOMPARE(distinct_rows(*w.file, "blk.0.ffn_up_exps.weight"), size_t{3});  // 2,048 rows, 3 drawn
    QCOMPARE(distinct_rows(*w.file, "token_embd.weight"), size_t{3});
    QVERIFY(distinct_rows(*full.file, "blk.0.ffn_up_exps.weight") > 2000);
    QCOMPARE(distinct_rows(*w.file, "blk.0.ffn_gate_inp.weight"), size_t{8});  // F32 router: all drawn
    // The drawn rows are the full file's first rows, and the layout is the same.
    const gguf::TensorInfo* a = w.file->find_tensor("blk.1.ffn_down_exps.weight");
    const gguf::TensorInfo* b = full.file->find_tensor("blk.1.ffn_down_exps.weight");
    QCOMPARE(a->offset, b->offset);
    const size_t row_bytes = *ggml_row_bytes(a->type, a->shape[0]);
    QVERIFY(std::equal(w.file->tensor_data(*a).begin(), w.file->tensor_data(*a).begin() + 3 * row_bytes,
                       full.file->tensor_data(*b).begin()));
    QVERIFY(w.file->get_string("general.description").value_or("").find("3 distinct rows") != std::string::npos);
    check_engine_runs(w.path);
  }

  void copies_a_real_tokenizer_and_follows_its_size() {
    const std::string vocab = iwb::test::shared_models_dir() + "/vocab-gguf/ggml-vocab-llama-spm.gguf";
    if (!QFile::exists(QString::fromStdString(vocab))) QSKIP("shared vocab-gguf/ggml-vocab-llama-spm.gguf is absent");
    const Written w = synthesize("test-llama", "Q4_0", 7, vocab);
    QVERIFY(w.file);
    QCOMPARE(w.report.shape.vocab_size, int64_t{32000});
    QVERIFY(w.report.tokenizer_note.find("changes from the preset's 320 to 32000") != std::string::npos);
    QCOMPARE(w.file->find_tensor("token_embd.weight")->shape, (std::vector<int64_t>{256, 32000}));
    QCOMPARE(w.file->get_int("tokenizer.ggml.bos_token_id").value_or(-1), int64_t{1});
    auto source = gguf::GgufFile::open(vocab);
    QVERIFY(source);
    QCOMPARE(w.file->get_array("tokenizer.ggml.scores")->items.size(),
             (*source)->get_array("tokenizer.ggml.scores")->items.size());
    auto engine = Engine::load(w.path, {128, 2});
    QVERIFY2(engine, engine.error_message().c_str());
    // The real SentencePiece vocabulary: "hello world" is a few word pieces, not 11 bytes.
    QVERIFY((*engine)->tokenizer().encode("hello world").size() < 6);
  }

  void byte_level_tokenizer_round_trips_text() {
    const Written w = synthesize("test-llama", "F16");
    QVERIFY(w.file);
    auto tok = tokenizer::Tokenizer::from_gguf(*w.file);
    QVERIFY2(tok, tok.error_message().c_str());
    const std::string text = "héllo [PAD300] <0x41>\n";
    const std::vector<int32_t> ids = tok->encode(text);
    // BOS, then one token per byte (a space is the U+2581 token): the padding and byte-token
    // names are never matched as text.
    QCOMPARE(ids.size(), text.size() + 1);
    QCOMPARE(tok->decode(std::span<const int32_t>(ids).subspan(1)), text);
  }

  void bad_requests_say_what_is_wrong() {
    SynthOptions o;
    o.shape = *find_synth_preset("test-llama");
    o.output_path = m_tmp.filePath("bad.gguf").toStdString();
    o.weight_type = "Q4_K_X";
    auto r = synthesize_model(o);
    QVERIFY(!r);
    QVERIFY(r.error_message().find("unknown weight type 'Q4_K_X'") != std::string::npos);
    o.weight_type = "Q4_0";
    o.vocab_path = m_tmp.filePath("missing.gguf").toStdString();
    r = synthesize_model(o);
    QVERIFY(!r);
    QVERIFY(r.error_message().find("missing.gguf") != std::string::npos);
    o.vocab_path.clear();
    o.shape.vocab_size = 100;  // fewer than the 260 byte-level tokens
    r = synthesize_model(o);
    QVERIFY(!r);
    QVERIFY(r.error_message().find("at least 260") != std::string::npos);
    o.shape = *find_synth_preset("test-llama");
    o.shape.num_kv_heads = 3;  // 4 heads do not share 3 KV heads
    r = synthesize_model(o);
    QVERIFY(!r);
    QVERIFY(r.error_message().find("KV head") != std::string::npos);
    QVERIFY(!QFile::exists(m_tmp.filePath("bad.gguf")));  // nothing half-written left behind
  }
};

QTEST_GUILESS_MAIN(TestSynthModel)
#include "test_synth_model.moc"
