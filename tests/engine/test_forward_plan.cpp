// The forward plan itself: every architecture's plan passes check_forward_plan, switches its
// optional ops on the architecture's flags, and counts the records the cost model predicts; a
// plan wired wrong (a missing KV write, a matmul of the wrong width, no embedding, nothing
// writing the logits) is refused with the op it names.
#include "iwb/engine/plan/forward_plan.h"
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <string>

using namespace iwb;

namespace {

ModelConfig config_of(const char* preset) {
  const synth::SynthShape* shape = synth::find_synth_preset(preset);
  return shape != nullptr ? synth::shape_config(*shape) : ModelConfig{};
}

int count_named(const std::vector<PlanOp>& ops, const std::string& name) {
  return static_cast<int>(std::count_if(ops.begin(), ops.end(), [&](const PlanOp& op) { return name == op.name; }));
}

// Ops of that name in the whole pass: the body and the logits section.
int count_in_pass(const ForwardPlan& plan, const std::string& name) {
  return count_named(plan.body, name) + count_named(plan.logits, name);
}

}  // namespace

class TestForwardPlan : public QObject {
  Q_OBJECT

 private slots:
  void everyArchitecturePlansAndChecks_data() {
    QTest::addColumn<QString>("preset");
    for (const char* p : {"test-llama", "test-qwen2", "test-gemma3", "test-qwen3", "test-phi3", "phi-3.5-mini",
                          "test-qwen3moe", "qwen3-30b-a3b", "test-gpt-oss", "gpt-oss-20b", "test-gemma4-dense"}) {
      QTest::newRow(p) << QString(p);
    }
  }
  void everyArchitecturePlansAndChecks() {
    QFETCH(QString, preset);
    const ModelConfig c = config_of(qPrintable(preset));
    QVERIFY(c.num_layers > 0);
    const ForwardPlan plan = build_forward_plan(c);
    const Status checked = check_forward_plan(plan);
    QVERIFY2(checked.is_ok(), checked.message().c_str());
    const int layers = static_cast<int>(c.num_layers);
    QCOMPARE(count_named(plan.body, "q_norm"), c.has_qk_norm ? layers : 0);
    QCOMPARE(count_in_pass(plan, "post_ffw_norm"), c.has_post_norms ? layers : 0);
    QCOMPARE(count_named(plan.body, "attention"), layers);
    // A mixture of experts replaces the dense FFN in every layer.
    QCOMPARE(count_in_pass(plan, "ffn_gate_exps"), c.has_experts() ? layers : 0);
    QCOMPARE(count_in_pass(plan, "ffn_moe_gating"), c.has_experts() ? layers : 0);
    QCOMPARE(count_in_pass(plan, "ffn_gate"), c.has_experts() ? 0 : layers);
    // Every layer's FFN in the body but the last one's, which runs on the rows that sample.
    QCOMPARE(count_named(plan.body, "ffn_norm"), layers - 1);
    QCOMPARE(count_named(plan.logits, "ffn_norm"), 1);
    QCOMPARE(count_named(plan.logits, "ffn_residual"), 1);
    QCOMPARE(count_named(plan.logits, "logit_softcap"), c.final_logit_softcap > 0.0f ? 1 : 0);
    // Sliding layers are the ones the config marks.
    int num_sliding = 0;
    for (const PlanOp& op : plan.body) {
      if (op.kind == PlanOpKind::Attention) num_sliding += op.is_sliding ? 1 : 0;
    }
    QCOMPARE(num_sliding, static_cast<int>(std::count(c.is_sliding_layer.begin(), c.is_sliding_layer.end(), true)));
    // One forward pass of one batch: what the profiler reserves for.
    QCOMPARE(num_plan_records(plan, true), num_step_records(c, 7, 0, true));
  }

  // Gemma 4: each layer's products in its own widths (sliding heads of 64, two KV heads; the
  // global layer's of 128, one KV head), weightless value norms per KV head, RoPE and attention
  // sliding where the layer does, the layer output scale last in every layer where the file has
  // one, and in expert layers the experts beside the dense FFN (llama.cpp's gemma4 graph).
  void gemma4PlansEachLayersShape_data() {
    QTest::addColumn<QString>("preset");
    for (const char* p : {"test-gemma4", "test-gemma4-dense", "gemma-4-26b-a4b"}) QTest::newRow(p) << QString(p);
  }
  void gemma4PlansEachLayersShape() {
    QFETCH(QString, preset);
    const ModelConfig c = config_of(qPrintable(preset));
    QVERIFY(c.has_value_norm && c.has_layer_attention_shapes());
    QCOMPARE(c.has_parallel_dense_ffn, c.has_experts());
    PlanWeightTypes types;
    types.layers.resize(static_cast<size_t>(c.num_layers));
    for (LayerWeightTypes& t : types.layers) t.has_output_scale = true;
    const ForwardPlan plan = build_forward_plan(c, &types);
    const ForwardPlan bare = build_forward_plan(c);
    for (const ForwardPlan* p : {&plan, &bare}) {
      const Status checked = check_forward_plan(*p);
      QVERIFY2(checked.is_ok(), checked.message().c_str());
    }
    const int layers = static_cast<int>(c.num_layers);
    QCOMPARE(count_in_pass(plan, "layer_output_scale"), layers);
    QCOMPARE(count_in_pass(bare, "layer_output_scale"), 0);
    QCOMPARE(count_in_pass(plan, "v_norm"), layers);
    QCOMPARE(count_in_pass(plan, "ffn_gate"), layers);  // the dense FFN runs in every layer
    QCOMPARE(count_in_pass(plan, "ffn_gate_exps"), c.has_experts() ? layers : 0);
    QCOMPARE(count_in_pass(plan, "ffn_moe_add"), c.has_experts() ? layers : 0);
    QCOMPARE(count_named(plan.logits, "logit_softcap"), 1);
    QCOMPARE(num_plan_records(bare, true), num_step_records(c, 7, 0, true));
    if (preset.startsWith("test-")) {  // the presets' numbers, not only the config's
      QCOMPARE(c.layer_q_width(0), int64_t{256});
      QCOMPARE(c.layer_q_width(5), int64_t{512});
      QCOMPARE(c.layer_num_kv_heads(0), int64_t{2});
      QCOMPARE(c.layer_num_kv_heads(5), int64_t{1});
      QVERIFY(c.is_sliding(0) && !c.is_sliding(5) && c.is_sliding(6));
    }
    std::vector<PlanOp> all = plan.body;
    all.insert(all.end(), plan.logits.begin(), plan.logits.end());
    const std::vector<std::string> parallel = {
        "ffn_gate_inp_norm", "ffn_gate_inp",    "ffn_norm",          "ffn_gate",        "activation",
        "ffn_down",          "post_ffw_norm_1", "pre_ffw_norm_2",    "ffn_moe_gating",  "ffn_gate_exps",
        "activation",        "ffn_down_exps",   "ffn_moe_combine",   "post_ffw_norm_2", "ffn_moe_add",
        "post_ffw_norm",     "ffn_residual",    "layer_output_scale"};
    for (int32_t il = 0; il < layers; ++il) {
      std::vector<const PlanOp*> ops;
      for (const PlanOp& op : all) {
        if (op.layer == il) ops.push_back(&op);
      }
      QVERIFY(!ops.empty());
      QCOMPARE(ops.back()->kind, PlanOpKind::LayerScale);
      int num_v_norms = 0;
      for (size_t i = 0; i < ops.size(); ++i) {
        const PlanOp& op = *ops[i];
        const std::string name = op.name;
        for (const PlanProduct& p : op.matmuls()) {
          const std::string product = p.name;
          if (product == "attn_q") QCOMPARE(p.out_features, c.layer_q_width(il));
          if (product == "attn_k") QCOMPARE(p.out_features, c.layer_k_width(il));
          if (product == "attn_v") QCOMPARE(p.out_features, c.layer_v_width(il));
          if (product == "attn_output") QCOMPARE(p.in_features, c.layer_attention_output_width(il));
        }
        if (name == "q_norm") QCOMPARE(op.rows_per_token * op.width, c.num_heads * c.layer_head_dim_k(il));
        if (name == "k_norm" || name == "v_norm") {
          QCOMPARE(op.rows_per_token, c.layer_num_kv_heads(il));
          QCOMPARE(op.width, name == "k_norm" ? c.layer_head_dim_k(il) : c.layer_head_dim_v(il));
        }
        if (name == "v_norm") {
          ++num_v_norms;
          QCOMPARE(op.norm, PlanNorm::Unit);
          QCOMPARE(ops[i + 1]->kind, PlanOpKind::Rope);  // after the k norm, before RoPE and the KV write
        }
        if (op.kind == PlanOpKind::Rope || op.kind == PlanOpKind::Attention) QCOMPARE(op.is_sliding, c.is_sliding(il));
        if (name == "ffn_gate_inp_norm") {
          QVERIFY(c.is_expert_layer(il));
          QCOMPARE(op.norm, PlanNorm::RouterNorm);
          QCOMPARE(ops.size() - i, parallel.size());
          for (size_t j = 0; j < parallel.size(); ++j) QCOMPARE(std::string(ops[i + j]->name), parallel[j]);
          QCOMPARE(ops[i + 7]->output, PlanBuffer::Xn);  // pre_ffw_norm_2: the experts' input
          QCOMPARE(ops[i + 12]->output, PlanBuffer::MoeOut);
          QCOMPARE(ops[i + 14]->input, PlanBuffer::MoeOut);
          QCOMPARE(ops[i + 14]->output, PlanBuffer::Proj);
        }
      }
      QCOMPARE(num_v_norms, 1);
    }

    // A sliding layer's query product in the global layer's width is refused by the check.
    ForwardPlan wrong = plan;
    for (PlanOp& op : wrong.body) {
      if (op.kind == PlanOpKind::Matmuls && op.layer == 0 && std::string(op.products[0].name) == "attn_q") {
        op.products[0].out_features = c.layer_q_width(5);
      }
    }
    const Status s = check_forward_plan(wrong);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("of layer 0") != std::string::npos, s.message().c_str());
  }

  // Gemma 4 E2B's layout: the shared KV layers compute queries only and attend over layer 4's
  // (sliding) or 5's (global) cache; the per-layer inputs are laid out after the embedding and
  // each layer's gate reads its slice; the last layer runs whole in the body.
  void gemma4SharedKvAndPerLayerInputs() {
    const ModelConfig c = config_of("test-gemma4-e2b");
    QCOMPARE(c.num_kv_shared_layers, int64_t{6});
    QCOMPARE(c.per_layer_embedding_length, int64_t{32});
    const ForwardPlan plan = build_forward_plan(c);
    const Status checked = check_forward_plan(plan);
    QVERIFY2(checked.is_ok(), checked.message().c_str());
    QCOMPARE(count_in_pass(plan, "kv_write"), 6);
    QCOMPARE(count_in_pass(plan, "k_norm"), 6);
    QCOMPARE(count_in_pass(plan, "inp_gate"), 12);
    QCOMPARE(count_in_pass(plan, "per_layer_inputs"), 1);
    QCOMPARE(count_named(plan.logits, "ffn_down"), 0);  // the last layer's FFN is in the body
    for (const PlanOp& op : plan.body) {
      if (op.kind == PlanOpKind::Attention) {
        const int32_t expected = op.layer < 6 ? op.layer : (c.is_sliding(op.layer) ? 4 : 5);
        QCOMPARE(op.cache_layer(), expected);
      }
      if (op.kind == PlanOpKind::Rope) QCOMPARE(op.is_query_only, op.layer >= 6);
      if (op.kind == PlanOpKind::Matmuls && std::string(op.name) == "attn_q") {
        QCOMPARE(op.num_products, op.layer >= 6 ? 1 : 3);
      }
      if (op.kind == PlanOpKind::Matmuls && std::string(op.name) == "ffn_gate") {
        QCOMPARE(op.products[0].out_features, op.layer >= 6 ? int64_t{512} : int64_t{256});  // double-wide
      }
      if (op.kind == PlanOpKind::GatedActivation && op.multiplier == PlanBuffer::PleIn) {
        QVERIFY(op.is_multiplier_layer_slice);
      }
    }
    // A shared layer reading a cache no layer wrote is refused.
    ForwardPlan wrong = plan;
    for (PlanOp& op : wrong.body) {
      if (op.kind == PlanOpKind::Attention && op.layer == 7) op.kv_layer = 9;
    }
    const Status s = check_forward_plan(wrong);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("cache of layer 9") != std::string::npos, s.message().c_str());
  }

  void theArchitectureRowDecidesTheOps() {
    // qwen3: q/k norms without gemma's post-norms or biases; qwen2: biases without norms.
    const ModelConfig qwen3 = config_of("test-qwen3");
    QVERIFY(qwen3.has_qk_norm && !qwen3.has_post_norms && !qwen3.requires_qkv_bias);
    QVERIFY(qwen3.q_width() != qwen3.embedding_length);  // its own head size
    const ModelConfig qwen2 = config_of("test-qwen2");
    QVERIFY(!qwen2.has_qk_norm && qwen2.requires_qkv_bias);
  }

  void phi3PlansItsFusedMatricesAsSeparateProducts() {
    // phi3's attn_qkv and gate/up ffn_up are row views at load time: the plan keeps llama's q/k/v
    // and gate/up products (so every backend and the cost model run it unchanged), and LongRoPE's
    // attention factor is in the attention scale.
    const synth::SynthShape& mini = *synth::find_synth_preset("phi-3.5-mini");
    const ModelConfig c = synth::shape_config(mini);
    QCOMPARE(c.rope_layout, RopeLayout::NeoX);
    QVERIFY(c.has_fused_gate_up && !c.requires_qkv_bias && !c.has_qk_norm);
    QCOMPARE(c.sliding_window, int64_t{0});  // the file's window is ignored, as llama.cpp does
    const float attn_factor = synth::longrope_attn_factor(mini);
    QVERIFY(std::fabs(c.attention_scale - attn_factor * attn_factor / std::sqrt(96.0f)) < 1e-6f);
    const ForwardPlan plan = build_forward_plan(c);
    for (const PlanOp& op : plan.body) {
      if (op.kind != PlanOpKind::Matmuls || op.layer != 0) continue;
      for (int i = 0; i < op.num_products; ++i) {
        const PlanProduct& p = op.products[static_cast<size_t>(i)];
        const std::string name = p.name;
        if (name == "attn_q" || name == "attn_k" || name == "attn_v") QCOMPARE(p.out_features, int64_t{3072});
        if (name == "ffn_gate" || name == "ffn_up") QCOMPARE(p.out_features, int64_t{8192});
      }
    }
    QCOMPARE(count_in_pass(plan, "ffn_gate"), 32);
  }

  void aMixtureOfExpertsLayerRoutesThenRunsExperts() {
    const ModelConfig c = config_of("test-qwen3moe");
    QVERIFY(c.has_experts() && c.num_experts == 8 && c.num_experts_used == 2 && c.is_expert_weight_normalized);
    const ForwardPlan plan = build_forward_plan(c);
    // Layer 0's FFN, from its norm to its residual add.
    auto first = std::find_if(plan.body.begin(), plan.body.end(),
                              [](const PlanOp& op) { return op.layer == 0 && std::string(op.name) == "ffn_norm"; });
    QVERIFY(first != plan.body.end());
    const std::vector<PlanOpKind> expected = {
        PlanOpKind::RmsNorm,         PlanOpKind::Matmuls,       PlanOpKind::ExpertRouting, PlanOpKind::ExpertMatmuls,
        PlanOpKind::GatedActivation, PlanOpKind::ExpertMatmuls, PlanOpKind::ExpertCombine, PlanOpKind::ResidualAdd};
    for (size_t i = 0; i < expected.size(); ++i) QCOMPARE(int((first + i)->kind), int(expected[i]));
    const PlanOp& router = *(first + 1);
    QCOMPARE(std::string(router.products[0].name), std::string("ffn_gate_inp"));
    QCOMPARE(router.products[0].out_features, c.num_experts);
    QCOMPARE(router.matmul_kind, OpKind::Matmul);
    const PlanOp& gate_up = *(first + 3);
    QCOMPARE(gate_up.num_products, 2);
    QCOMPARE(gate_up.matmul_kind, OpKind::ExpertMatmul);
    QCOMPARE(gate_up.products[1].out_features, c.expert_feed_forward_length);
    const PlanOp& act = *(first + 4);
    QCOMPARE(act.rows_per_token, c.num_experts_used);
    QCOMPARE(act.width, c.expert_feed_forward_length);
    QCOMPARE(act.multiplier, PlanBuffer::ExpertUp);
    // Records: the router, gate/up/down experts (one each, over all routed experts), the
    // gating and the weighted sum.
    QCOMPARE(num_op_records(gate_up), 2);
    QCOMPARE(op_record(plan, gate_up, 0, 1).kind, OpKind::ExpertMatmul);
    QCOMPARE(op_record(plan, *(first + 2), 0, 1).kind, OpKind::Softmax);
    QCOMPARE(op_record(plan, *(first + 6), 0, 1).kind, OpKind::Add);
    // One token routes to exactly k experts; many tokens to at most all of them.
    QCOMPARE(expected_active_experts(c, 1), double(c.num_experts_used));
    QVERIFY(expected_active_experts(c, 1000) <= double(c.num_experts));
    QCOMPARE(op_record(plan, gate_up, 0, 5, {}, 3).shape.num_experts, 3);
  }

  void expertsRunWithoutTheirRoutingAreRefused() {
    // (Layer 1 of 48: layer 0's routing wrote the expert rows before, so only the layer differs.)
    ForwardPlan plan = build_forward_plan(config_of("qwen3-30b-a3b"));
    const auto routing = std::find_if(plan.body.begin(), plan.body.end(), [](const PlanOp& op) {
      return op.layer == 1 && op.kind == PlanOpKind::ExpertRouting;
    });
    QVERIFY(routing != plan.body.end());
    plan.body.erase(routing);
    const Status s = check_forward_plan(plan);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("ffn_gate_exps of layer 1 runs experts its layer did not route to") != std::string::npos,
             s.message().c_str());

    // Expert products write the grouped expert rows, never the tokens' own buffers.
    ForwardPlan mixed = build_forward_plan(config_of("test-qwen3moe"));
    for (PlanOp& op : mixed.body) {
      if (op.kind == PlanOpKind::ExpertMatmuls && op.layer == 0 && op.num_products == 1) {
        op.products[0].output = PlanBuffer::Proj;
      }
    }
    const Status m = check_forward_plan(mixed);
    QVERIFY(!m.is_ok());
    QVERIFY2(m.message().find("ffn_down_exps of layer 0") != std::string::npos, m.message().c_str());
  }

  // Qwen 3.5: the recurrent layers (0-2, 4-6 of test-qwen35) run attn_qkv/attn_gate and
  // ssm_beta/ssm_alpha, the convolution, the delta rule, the per-head norm, silu(z) and ssm_out,
  // with no KV write or attention; the attention layers (3, 7) split attn_q's queries from their
  // gates and gate the attention's output; every layer's FFN reads post_attention_norm's rows.
  void qwen35PlansRecurrentAndGatedLayers_data() {
    QTest::addColumn<QString>("preset");
    for (const char* p : {"test-qwen35", "qwen3.5-9b", "qwen3.5-27b", "test-qwen35moe", "qwen3.5-35b-a3b"}) {
      QTest::newRow(p) << QString(p);
    }
  }
  void qwen35PlansRecurrentAndGatedLayers() {
    QFETCH(QString, preset);
    const ModelConfig c = config_of(qPrintable(preset));
    const ForwardPlan plan = build_forward_plan(c);
    const Status checked = check_forward_plan(plan);
    QVERIFY2(checked.is_ok(), checked.message().c_str());
    const int layers = static_cast<int>(c.num_layers), recurrent = static_cast<int>(c.num_recurrent_layers());
    QCOMPARE(recurrent, layers / 4 * 3);
    QCOMPARE(count_named(plan.body, "ssm_conv"), recurrent);
    QCOMPARE(count_named(plan.body, "delta_net"), recurrent);
    QCOMPARE(count_named(plan.body, "ssm_norm"), recurrent);
    QCOMPARE(count_named(plan.body, "attention"), layers - recurrent);
    QCOMPARE(count_named(plan.body, "kv_write"), layers - recurrent);
    QCOMPARE(count_named(plan.body, "attn_q_split"), layers - recurrent);
    QCOMPARE(count_named(plan.body, "attn_output_gate"), layers - recurrent);
    for (const PlanOp& op : plan.body) {
      if (op.layer < 0) continue;
      const bool is_recurrent = c.is_recurrent(op.layer);
      if (op.kind == PlanOpKind::Attention || op.kind == PlanOpKind::KvWrite) QVERIFY(!is_recurrent);
      if (op.kind == PlanOpKind::DeltaNet || op.kind == PlanOpKind::ShortConv) QVERIFY(is_recurrent);
      if (op.kind == PlanOpKind::Matmuls && std::string(op.products[0].name) == "attn_q") {
        QCOMPARE(op.products[0].out_features, 2 * c.q_width());  // queries and their gates
        QCOMPARE(op.products[0].output, PlanBuffer::QGate);
      }
      if (op.kind == PlanOpKind::Matmuls && std::string(op.products[0].name) == "attn_qkv") {
        QCOMPARE(op.products[0].out_features, c.linear_conv_channels());
        QCOMPARE(op.products[1].out_features, c.linear_value_width());
      }
    }
    // Qwen 3.5 MoE: every layer's FFN is the routed experts plus the shared expert, gated.
    QCOMPARE(count_in_pass(plan, "ffn_moe_gating"), c.has_experts() ? layers : 0);
    QCOMPARE(count_in_pass(plan, "ffn_shexp_gate"), c.has_shared_expert_gate ? layers : 0);
    QCOMPARE(count_in_pass(plan, "ffn_gate"), c.has_experts() ? 0 : layers);
    // The last layer attends: its FFN runs on the rows that sample, as every model's does.
    QVERIFY(!c.is_recurrent(c.num_layers - 1));
    QCOMPARE(count_named(plan.logits, "ffn_residual"), 1);
    QCOMPARE(num_plan_records(plan, true), num_step_records(c, 7, 0, true));
  }

  void aRecurrenceInAnAttentionLayerIsRefused() {
    ForwardPlan plan = build_forward_plan(config_of("test-qwen35"));
    for (PlanOp& op : plan.body) {
      if (op.kind == PlanOpKind::DeltaNet) op.layer = 3;  // layer 3 attends
    }
    const Status s = check_forward_plan(plan);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("delta_net of layer 3 runs a recurrence in a layer that is not recurrent") !=
                 std::string::npos,
             s.message().c_str());
  }

  void aMissingKvWriteIsRefused() {
    ForwardPlan plan = build_forward_plan(config_of("test-llama"));
    const auto it = std::find_if(plan.body.begin(), plan.body.end(),
                                 [](const PlanOp& op) { return op.kind == PlanOpKind::KvWrite; });
    QVERIFY(it != plan.body.end());
    plan.body.erase(it);
    const Status s = check_forward_plan(plan);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("attention of layer 0 reads the cache of layer 0 before") != std::string::npos,
             s.message().c_str());
  }

  void aMatmulOfTheWrongWidthIsRefused() {
    ForwardPlan plan = build_forward_plan(config_of("test-qwen3"));
    for (PlanOp& op : plan.body) {
      if (op.kind == PlanOpKind::Matmuls && op.layer == 1 && std::string(op.products[0].name) == "attn_q") {
        op.products[0].out_features = plan.config.embedding_length;  // as if heads x head size were the width
      }
    }
    const Status s = check_forward_plan(plan);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("attn_q of layer 1") != std::string::npos, s.message().c_str());
  }

  // llama.cpp's inp_out_ids: after the last layer's attention only the rows that sample go on,
  // through that layer's FFN, the output norm and the classifier.
  void theLastLayersFfnRunsOnTheRowsThatSample() {
    const ModelConfig c = config_of("test-qwen2");
    const ForwardPlan plan = build_forward_plan(c);
    const int32_t last = static_cast<int32_t>(c.num_layers - 1);
    QCOMPARE(plan.body.back().kind, PlanOpKind::ResidualAdd);
    QCOMPARE(std::string(plan.body.back().name), std::string("attn_residual"));
    QCOMPARE(plan.body.back().layer, last);
    const std::vector<std::pair<PlanOpKind, std::string>> expected = {
        {PlanOpKind::GatherRows, "gather_rows"}, {PlanOpKind::RmsNorm, "ffn_norm"},
        {PlanOpKind::Matmuls, "ffn_gate"},       {PlanOpKind::GatedActivation, "activation"},
        {PlanOpKind::Matmuls, "ffn_down"},       {PlanOpKind::ResidualAdd, "ffn_residual"},
        {PlanOpKind::RmsNorm, "output_norm"},    {PlanOpKind::Matmuls, "output"}};
    QCOMPARE(plan.logits.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      QCOMPARE(int(plan.logits[i].kind), int(expected[i].first));
      QCOMPARE(std::string(plan.logits[i].name), expected[i].second);
    }
    // The gathered residual rows live in Final: X keeps the step's rows whole.
    QCOMPARE(plan.logits[0].input, PlanBuffer::X);
    QCOMPARE(plan.logits[0].output, PlanBuffer::Final);
    QCOMPARE(plan.logits[1].input, PlanBuffer::Final);
    QCOMPARE(plan.logits[1].layer, last);
    QCOMPARE(plan.logits[5].output, PlanBuffer::Final);
    QCOMPARE(plan.logits[5].input, PlanBuffer::Proj);
    QCOMPARE(plan.logits[6].input, PlanBuffer::Final);
    // A step without rows that sample (a prompt chunk before the last) runs the body alone:
    // its records leave out the last FFN too.
    QCOMPARE(num_plan_records(plan, true) - num_plan_records(plan, false), int64_t(6 + 2));
  }

  void theLogitsSectionMustGatherItsRows() {
    // The last FFN's norm reading X (every token's rows) instead of the gathered ones.
    ForwardPlan ungathered = build_forward_plan(config_of("test-llama"));
    ungathered.logits[1].input = PlanBuffer::X;
    const Status s = check_forward_plan(ungathered);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("ffn_norm of layer 1 reads the step's token rows") != std::string::npos,
             s.message().c_str());

    // No gather at all: the FFN's own buffers still hold the body's rows.
    ForwardPlan no_gather = build_forward_plan(config_of("test-llama"));
    no_gather.logits.erase(no_gather.logits.begin());
    QVERIFY(!check_forward_plan(no_gather).is_ok());

    // Attention needs every token's query: it cannot run on the rows that sample.
    ForwardPlan late_attention = build_forward_plan(config_of("test-llama"));
    const auto attention = std::find_if(late_attention.body.begin(), late_attention.body.end(),
                                        [](const PlanOp& op) { return op.kind == PlanOpKind::Attention; });
    late_attention.logits.insert(late_attention.logits.begin() + 1, *attention);
    const Status a = check_forward_plan(late_attention);
    QVERIFY(!a.is_ok());
    QVERIFY2(a.message().find("needs the step's tokens but is in the logits section") != std::string::npos,
             a.message().c_str());
  }

  void aPlanWithoutEmbeddingOrClassifierIsRefused() {
    ForwardPlan no_embedding = build_forward_plan(config_of("test-llama"));
    no_embedding.body.erase(no_embedding.body.begin());
    QVERIFY(!check_forward_plan(no_embedding).is_ok());

    ForwardPlan no_classifier = build_forward_plan(config_of("test-llama"));
    no_classifier.logits.erase(std::remove_if(no_classifier.logits.begin(), no_classifier.logits.end(),
                                              [](const PlanOp& op) {
                                                return op.kind == PlanOpKind::Matmuls &&
                                                       op.products[0].output == PlanBuffer::Logits;
                                              }),
                               no_classifier.logits.end());
    const Status s = check_forward_plan(no_classifier);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("nothing writes the logits") != std::string::npos, s.message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestForwardPlan)
#include "test_forward_plan.moc"
