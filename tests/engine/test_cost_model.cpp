// The analytic cost model against hand-computed FLOPs and minimum bytes for given model shapes
// and phases (each expected number is written out with its arithmetic), and the cost formulas
// against the kernels' own cost helpers where both count the same thing.
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/profile/op_costs.h"
#include "iwb/kernels/activations.h"
#include "iwb/kernels/embedding.h"
#include "iwb/kernels/matmul.h"
#include "iwb/kernels/paged_attention.h"
#include "iwb/kernels/rmsnorm.h"
#include "iwb/kernels/rope.h"

#include <QtTest>

#include <algorithm>
#include <cstring>

using namespace iwb;

namespace {

// The record of call `name` in `layer`; fails the test when there is not exactly one.
const KernelRecord* find(const std::vector<KernelRecord>& records, const char* name, int layer) {
  const KernelRecord* found = nullptr;
  for (const KernelRecord& r : records) {
    if (std::strcmp(r.name, name) == 0 && r.layer == layer) {
      if (found) return nullptr;
      found = &r;
    }
  }
  return found;
}

std::vector<KernelRecord> predict(const char* preset, GgmlType type, StepScenario s) {
  auto shape = model_shape_preset(preset, type);
  if (!shape) qFatal("%s", shape.error_message().c_str());
  auto records = predict_step(*shape, s);
  if (!records) qFatal("%s", records.error_message().c_str());
  return *records;
}

#define EXPECT_COST(records, name, layer, flops_, bytes_) \
  do {                                                    \
    const KernelRecord* r_ = find(records, name, layer);  \
    QVERIFY2(r_ != nullptr, name);                        \
    QCOMPARE(r_->flops, double(flops_));                  \
    QCOMPARE(r_->bytes, double(bytes_));                  \
  } while (0)

}  // namespace

class TestCostModel : public QObject {
  Q_OBJECT

 private slots:
  // llama-3-8b shapes in Q8_0 (34-byte blocks of 32 values: a 4096-value row is 128 blocks =
  // 4352 bytes; a 14336-value row 448 blocks = 15232 bytes), one token at context 1024.
  void llama3_8b_q8_0_decode() {
    const auto r = predict("llama-3-8b", GgmlType::Q8_0, {Phase::Decode, 1, 1023, 0, true});
    // 1 embedding + 32 layers x 16 kernels + output norm + classifier.
    QCOMPARE(r.size(), size_t(515));
    for (const KernelRecord& k : r) QCOMPARE(k.phase, Phase::Decode);
    // attn_q 4096 -> 4096: flops 2*4096*4096 = 33554432; bytes 4096 rows*4352 = 17825792
    // weights + 4*4096 input + 4*4096 output = 17858560.
    EXPECT_COST(r, "attn_q", 0, 33554432, 17858560);
    // attn_k 4096 -> 8 KV heads * 128 = 1024: flops 2*4096*1024 = 8388608;
    // bytes 1024*4352 = 4456448 + 16384 + 4096 = 4476928.
    EXPECT_COST(r, "attn_k", 7, 8388608, 4476928);
    // ffn_up 4096 -> 14336: flops 2*4096*14336 = 117440512; bytes 14336*4352 = 62390272
    // + 16384 + 4*14336 = 57344 -> 62464000.
    EXPECT_COST(r, "ffn_up", 31, 117440512, 62464000);
    // ffn_down 14336 -> 4096: same flops; bytes 4096*15232 = 62390272 + 57344 + 16384 = 62464000.
    EXPECT_COST(r, "ffn_down", 3, 117440512, 62464000);
    // attention, one query at position 1023 over 1024 keys, 32 query heads sharing 8 KV heads:
    // flops 32 heads * 1024 keys * (2*128 + 2*128 + 5) = 32*1024*517 = 16941056;
    // bytes: K and V rows read once per KV head, f16: 2 bytes * 1024 * 8 * (128+128) = 4194304,
    // plus q read and output written, f32: 4 * 32 * (128+128) = 32768 -> 4227072.
    EXPECT_COST(r, "attention", 10, 16941056, 4227072);
    const KernelRecord* attn = find(r, "attention", 10);
    QCOMPARE(attn->shape.num_kv, int64_t(1024));
    QCOMPARE(attn->shape_text(), std::string("32/8 heads x 128, ctx 1024, 1 tok"));
    // classifier 4096 -> 128256: flops 2*4096*128256 = 1050673152; bytes 128256*4352 =
    // 558170112 + 16384 + 4*128256 = 513024 -> 558699520.
    EXPECT_COST(r, "output", -1, 1050673152, 558699520);
    QCOMPARE(find(r, "output", -1)->kind, OpKind::Logits);
    QCOMPARE(find(r, "output", -1)->shape_text(), std::string("4096x128256 Q8_0, 1 tok"));
    // RMS norm of 4096: 4 flops/value = 16384; bytes 4*4096 in + 4*4096 out + 4*4096 weight = 49152.
    EXPECT_COST(r, "attn_norm", 0, 16384, 49152);
    // RoPE: 3 flops per rotated value: q 3*32*128 = 12288, k 3*8*128 = 3072; bytes read+write
    // f32: q 8*32*128 = 32768, k 8*8*128 = 8192.
    EXPECT_COST(r, "rope_q", 0, 12288, 32768);
    EXPECT_COST(r, "rope_k", 0, 3072, 8192);
    // KV write: 8 heads * (128+128) = 2048 values read as f32 and written as f16: 6*2048 = 12288.
    EXPECT_COST(r, "kv_write", 0, 0, 12288);
    // SwiGLU over 14336: 5*14336 = 71680 flops; gate + up + out, f32: 12*14336 = 172032 bytes.
    EXPECT_COST(r, "swiglu", 0, 71680, 172032);
    // Residual add over 4096: 4096 flops, 12*4096 = 49152 bytes.
    EXPECT_COST(r, "attn_residual", 0, 4096, 49152);
    // Embedding: one Q8_0 row 4352 + f32 output 4*4096 = 16384 + the token id 4 = 20740.
    EXPECT_COST(r, "token_embd", -1, 0, 20740);
    // Decode reads every weight matrix once (of the embedding table, one row) and every layer's
    // KV cache (32 * 4194304 bytes); activations add well under 1% to that.
    const StepCost total = total_cost(r);
    auto shape = model_shape_preset("llama-3-8b", GgmlType::Q8_0);
    const double weights_and_kv = double(shape->weight_bytes) - 128256.0 * 4352.0 + 32.0 * 4194304.0;
    QVERIFY(total.bytes > weights_and_kv && total.bytes < weights_and_kv * 1.005);
  }

  // The same shapes prefilling 512 tokens from an empty cache, in one batch.
  void llama3_8b_q8_0_prefill() {
    const auto r = predict("llama-3-8b", GgmlType::Q8_0, {Phase::Prefill, 512, 0, 0, true});
    QCOMPARE(r.size(), size_t(515));
    // attn_q: flops 2*512*4096*4096 = 17179869184; bytes 17825792 weights (read once for the
    // whole batch) + 4*512*(4096+4096) = 16777216 -> 34603008.
    EXPECT_COST(r, "attn_q", 0, 17179869184.0, 34603008);
    // attention: query p sees p+1 keys: sum over p = 0..511 of (p+1) = 512*513/2 = 131328
    // scores per head; flops 32 * 131328 * 517 = 2172690432. bytes: 512 K/V rows read once
    // per KV head: 2*512*8*256 = 2097152, + q and output 4*512*32*256 = 16777216 -> 18874368.
    EXPECT_COST(r, "attention", 0, 2172690432.0, 18874368);
    // The classifier runs for the last token only.
    EXPECT_COST(r, "output", -1, 1050673152, 558699520);
    for (const KernelRecord& k : r) QCOMPARE(k.phase, Phase::Prefill);
  }

  // Batches: 300 tokens in batches of 128 run as 128 + 128 + 44, each reading the weights.
  void prefillInBatches() {
    const auto r = predict("tinyllama-1.1b", GgmlType::F16, {Phase::Prefill, 300, 0, 128, true});
    // 3 batches * (1 + 22*16 - 6): the last layer's FFN (6 records) runs once, over the row
    // that samples, with the output norm and the classifier (+ 2).
    QCOMPARE(r.size(), size_t(3 * (1 + 22 * 16 - 6) + 6 + 2));
    auto shape = model_shape_preset("tinyllama-1.1b", GgmlType::F16);
    QCOMPARE(int64_t(r.size()), num_step_records(shape->config, 300, 128, true));
    std::vector<const KernelRecord*> attn0;
    for (const KernelRecord& k : r) {
      if (k.kind == OpKind::Attention && k.layer == 0) attn0.push_back(&k);
    }
    QCOMPARE(attn0.size(), size_t(3));
    // The third batch: queries at 256..299 over keys 0..299. Scores per head: sum of (p+1) for
    // p = 256..299 = (257+300)*44/2 = 12254; flops 32 heads * 12254 * (2*64 + 2*64 + 5 = 261)
    // = 102345408. Bytes: 300 K/V rows * 4 KV heads * (64+64) * 2 = 307200, + q and output
    // 4*44*32*128 = 720896 -> 1028096.
    QCOMPARE(attn0[2]->shape.num_tokens, int64_t(44));
    QCOMPARE(attn0[2]->shape.num_kv, int64_t(300));
    QCOMPARE(attn0[2]->flops, 102345408.0);
    QCOMPARE(attn0[2]->bytes, 1028096.0);
    // The last layer's FFN: once, over the row that samples (llama.cpp's inp_out_ids); every
    // other layer's runs in each batch.
    const KernelRecord* last_down = find(r, "ffn_down", 21);
    QVERIFY(last_down != nullptr);
    QCOMPARE(last_down->shape.num_tokens, int64_t(1));
    QCOMPARE(last_down->flops, 2.0 * 5632 * 2048);
    QCOMPARE(std::count_if(r.begin(), r.end(),
                           [](const KernelRecord& k) { return std::strcmp(k.name, "ffn_down") == 0 && k.layer == 20; }),
             std::ptrdiff_t(3));
  }

  // qwen2.5-1.5b in Q4_0 (18-byte blocks of 32): the q/k/v projections carry biases.
  void qwen_bias() {
    const auto r = predict("qwen2.5-1.5b", GgmlType::Q4_0, {Phase::Decode, 1, 99, 0, true});
    // attn_q 1536 -> 1536 + bias: flops 2*1536*1536 = 4718592 + 1536 bias adds = 4720128;
    // bytes 1536 rows * 48 blocks * 18 = 1327104 + 4*1536 in + 4*1536 out + 4*1536 bias = 1345536.
    EXPECT_COST(r, "attn_q", 0, 4720128, 1345536);
    // attn_output has no bias: 2*1536*1536 = 4718592; 1327104 + 12288 = 1339392.
    EXPECT_COST(r, "attn_output", 0, 4718592, 1339392);
    // attention at context 100, 12 heads / 2 KV heads of 128: flops 12*100*517 = 620400;
    // bytes 2*100*2*256 = 102400 + 4*12*256 = 12288 -> 114688.
    EXPECT_COST(r, "attention", 27, 620400, 114688);
  }

  // gemma-3-270m in F16: sliding layers see 512 keys at most; q/k norms, post-norms, GeGLU,
  // scaled embeddings.
  void gemmaSlidingWindow() {
    const auto r = predict("gemma-3-270m", GgmlType::F16, {Phase::Decode, 1, 1023, 0, true});
    // 1 + 18 layers * (16 + 2 q/k norms + 2 post-norms) + 2.
    QCOMPARE(r.size(), size_t(1 + 18 * 20 + 2));
    // Layer 0 slides (window 512): 4 heads * 512 keys * (2*256 + 2*256 + 5 = 1029) = 2107392
    // flops; bytes 2 * 512 rows * 1 KV head * 512 = 524288 + 4*4*512 = 8192 -> 532480.
    EXPECT_COST(r, "attention", 0, 2107392, 532480);
    QCOMPARE(find(r, "attention", 0)->shape.window, 512);
    // Layer 5 is global: 1024 keys: 4*1024*1029 = 4214784; 2*1024*512 = 1048576 + 8192 = 1056768.
    EXPECT_COST(r, "attention", 5, 4214784, 1056768);
    // q norm: 4 heads of 256 as rows: 4*1024 = 4096 flops; 8*1024 + 4*256 = 9216 bytes.
    EXPECT_COST(r, "q_norm", 3, 4096, 9216);
    // GeGLU over 2048: 9*2048 = 18432 flops, 12*2048 = 24576 bytes.
    EXPECT_COST(r, "geglu", 3, 18432, 24576);
    // Scaled embedding: 640 multiplies; F16 row 1280 + 4*640 + 4 = 3844 bytes.
    EXPECT_COST(r, "token_embd", -1, 640, 3844);
    QVERIFY(find(r, "post_ffw_norm", 17) != nullptr);
  }

  void presetErrors() {
    auto unknown = model_shape_preset("llama-9", GgmlType::F16);
    QVERIFY(!unknown);
    QVERIFY(unknown.error_message().find("llama-3-8b") != std::string::npos);
    // 896 is not a multiple of 256: no Q4_K for qwen2.5-0.5b.
    auto bad = model_shape_preset("qwen2.5-0.5b", GgmlType::Q4_K);
    QVERIFY(!bad);
    QVERIFY2(bad.error_message().find("896") != std::string::npos, bad.error_message().c_str());
    QCOMPARE(model_shape_preset_names().size(), size_t(23));  // every real synth preset
    for (const std::string& name : model_shape_preset_names())
      QVERIFY(model_shape_preset(name, GgmlType::Q8_0).is_ok());
    // gpt-oss-20b: experts MXFP4 whatever the type (as its files hold them), the rest Q8_0.
    auto oss = model_shape_preset("gpt-oss-20b", GgmlType::Q8_0);
    QVERIFY(oss.is_ok());
    QCOMPARE(oss->layers[0].ffn_down_exps, GgmlType::MXFP4);
    QCOMPARE(oss->layers[0].wq, GgmlType::Q8_0);
    QVERIFY(oss->layers[0].has_router_bias && oss->layers[0].has_expert_biases);
    auto shape = model_shape_preset("llama-3.2-1b", GgmlType::F16);
    QVERIFY(!predict_step(*shape, {Phase::Decode, 0, 0, 0, true}));
    QVERIFY(!predict_step(*shape, {Phase::Decode, 1, -1, 0, true}));
  }

  // qwen3-30b-a3b in Q4_K (144-byte blocks of 256 values): every expert matrix is 768 rows of
  // 2048 (gate, up: 8 blocks = 1152 bytes a row) or 2048 rows of 768 (down: 3 blocks = 432
  // bytes), 884736 bytes either way. A decode token reads its 8 routed experts' matrices, not
  // all 128; the F32 router reads all of its 128 rows.
  void moeCountsRoutedExperts() {
    const std::vector<KernelRecord> decode = predict("qwen3-30b-a3b", GgmlType::Q4_K, {Phase::Decode, 1, 100, 0, true});
    // 8 experts x 884736 + activations: 8 rows in of 2048 and out of 768 (f32).
    for (const char* name : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      EXPECT_COST(decode, name, 7, 2.0 * 8 * 2048 * 768, 8 * 884736 + 4 * 8 * (2048 + 768));
      QCOMPARE(find(decode, name, 7)->kind, OpKind::ExpertMatmul);
      QCOMPARE(find(decode, name, 7)->shape.num_experts, 8);
    }
    EXPECT_COST(decode, "ffn_gate_inp", 7, 2.0 * 2048 * 128, 2048 * 128 * 4 + 4 * (2048 + 128));
    QCOMPARE(find(decode, "ffn_gate_inp", 7)->kind, OpKind::Matmul);
    // No dense FFN in a mixture-of-experts layer.
    QVERIFY(find(decode, "ffn_gate", 7) == nullptr);

    // Four prompt tokens touch 128 x (1 - (120/128)^4) = 29.123046875 experts on average.
    const std::vector<KernelRecord> prefill = predict("qwen3-30b-a3b", GgmlType::Q4_K, {Phase::Prefill, 4, 0, 0, true});
    EXPECT_COST(prefill, "ffn_down_exps", 0, 2.0 * 4 * 8 * 768 * 2048,
                29.123046875 * 884736 + 4 * 4 * 8 * (768 + 2048));
    QCOMPARE(find(prefill, "ffn_down_exps", 0)->shape.num_experts, 29);

    // The model's weights hold every expert: 48 layers x 3 x 128 x 884736 bytes of experts.
    auto shape = model_shape_preset("qwen3-30b-a3b", GgmlType::Q4_K);
    QVERIFY(shape.is_ok());
    const double all_experts = 48.0 * 3 * 128 * 884736;
    double routed = 0;
    for (const KernelRecord& r : decode) {
      if (r.kind == OpKind::ExpertMatmul) routed += r.bytes - 4.0 * 8 * (2048 + 768);
    }
    QCOMPARE(routed, all_experts / 16);  // 8 of 128
    QVERIFY(double(shape->weight_bytes) > all_experts);
    // Memory: experts 16.3 GB of a ~17 GB Q4_K file; a decode step reads ~1/16 of them.
    QVERIFY(total_cost(decode).bytes < 0.2 * double(shape->weight_bytes));
  }

  // qwen3.5-9b in Q8_0 (34-byte blocks of 32): layer 0 is recurrent (attn_qkv 4096 -> 2*16*128
  // + 32*128 = 8192 channels, the convolution of 4 taps, the delta rule over 32 value heads of
  // 128), layer 3 attends with its queries' gates (attn_q 4096 -> 2 * 16 * 256 = 8192).
  void qwen35RecurrentAndGatedLayers() {
    const std::vector<KernelRecord> decode = predict("qwen3.5-9b", GgmlType::Q8_0, {Phase::Decode, 1, 100, 0, true});
    const double row = 4096 / 32 * 34.0;  // a Q8_0 row of 4096
    EXPECT_COST(decode, "attn_qkv", 0, 2.0 * 4096 * 8192, 8192 * row + 4 * (4096 + 8192));
    // One token, one sequence: 8192 x (2 x 4 + 4) FLOPs; its row in and out, the state (3 x
    // 8192) read and written, the taps.
    EXPECT_COST(decode, "ssm_conv", 0, 8192.0 * 12, 8.0 * 8192 + 8.0 * 3 * 8192 + 4.0 * 8192 * 4);
    EXPECT_COST(decode, "delta_net", 0, 7.0 * 32 * 128 * 128, 8.0 * 32 * 128 * 128 + 4.0 * (8192 + 2 * 32 + 32 * 128));
    QCOMPARE(find(decode, "delta_net", 0)->kind, OpKind::Recurrent);
    QVERIFY(find(decode, "attention", 0) == nullptr && find(decode, "attn_q", 0) == nullptr);
    EXPECT_COST(decode, "attn_q", 3, 2.0 * 4096 * 8192, 8192 * row + 4 * (4096 + 8192));
    EXPECT_COST(decode, "attn_output_gate", 3, 5.0 * 4096, 12.0 * 4096);
    QVERIFY(find(decode, "attention", 3) != nullptr && find(decode, "delta_net", 3) == nullptr);
  }

  // glm-4.5-air in Q8_0 (34-byte blocks of 32): layer 0 is dense (4096 -> 10944 gate/up), the
  // others route 8 of 128 experts of 1408 and run the shared expert (one more 1408-wide FFN)
  // for every token; the prediction layer is not in the pass.
  void glmSharedExpertAndDenseLayer() {
    const std::vector<KernelRecord> decode = predict("glm-4.5-air", GgmlType::Q8_0, {Phase::Decode, 1, 100, 0, true});
    const double gate_row = 4096 / 32 * 34.0;  // a Q8_0 row of 4096
    EXPECT_COST(decode, "ffn_gate", 0, 2.0 * 4096 * 10944, 10944 * gate_row + 4 * (4096 + 10944));
    QVERIFY(find(decode, "ffn_gate_exps", 0) == nullptr && find(decode, "ffn_gate_shexp", 0) == nullptr);
    EXPECT_COST(decode, "ffn_gate_shexp", 1, 2.0 * 4096 * 1408, 1408 * gate_row + 4 * (4096 + 1408));
    EXPECT_COST(decode, "ffn_gate_exps", 1, 2.0 * 8 * 4096 * 1408, 8 * 1408 * gate_row + 4 * 8 * (4096 + 1408));
    QVERIFY(find(decode, "ffn_gate", 1) == nullptr);
    QVERIFY(find(decode, "attn_q", 45) != nullptr && find(decode, "attn_q", 46) == nullptr);
  }

  // deepseek2: the query straight from the input (V2-Lite has no query latent) and the key/value
  // latent, the latent's norm, every head's attn_k_b and attn_v_b (a matmul each over its heads'
  // rows, all heads' matrices read), attention as one KV head of 576 / 512, the output from 16 x
  // 128; layer 0's dense FFN, the others' routed and shared experts.
  void deepseekLatentAttention() {
    const std::vector<KernelRecord> decode =
        predict("deepseek-v2-lite", GgmlType::Q8_0, {Phase::Decode, 1, 100, 0, true});
    const double row2048 = 2048 / 32 * 34.0, row128 = 128 / 32 * 34.0, row512 = 512 / 32 * 34.0;
    EXPECT_COST(decode, "attn_q", 0, 2.0 * 2048 * 3072, 3072 * row2048 + 4 * (2048 + 3072));
    EXPECT_COST(decode, "attn_kv_a_mqa", 0, 2.0 * 2048 * 576, 576 * row2048 + 4 * (2048 + 576));
    EXPECT_COST(decode, "attn_k_b", 3, 2.0 * 16 * 128 * 512, 16 * 512 * row128 + 4 * 16 * (128 + 512));
    EXPECT_COST(decode, "attn_v_b", 3, 2.0 * 16 * 512 * 128, 16 * 128 * row512 + 4 * 16 * (512 + 128));
    EXPECT_COST(decode, "attn_output", 3, 2.0 * 2048 * 2048, 2048 * row2048 + 4 * (2048 + 2048));
    const KernelRecord* k_b = find(decode, "attn_k_b", 3);
    QVERIFY(k_b != nullptr);
    QCOMPARE(k_b->kind, OpKind::Matmul);
    QCOMPARE(k_b->shape.num_heads, 16);
    const KernelRecord* norm = find(decode, "attn_kv_a_norm", 3);
    QVERIFY(norm != nullptr && norm->kind == OpKind::RmsNorm && norm->shape.cols == 512);
    const KernelRecord* attention = find(decode, "attention", 3);
    QVERIFY(attention != nullptr);
    QCOMPARE(attention->shape.num_kv_heads, 1);
    QCOMPARE(attention->shape.head_dim, 576);
    QCOMPARE(attention->shape.head_dim_v, 512);
    // The values are read with the keys (the cache holds 576 f16 values per position): 101
    // positions of keys, the 16 heads' query and output in f32. The flops count both products.
    QCOMPARE(attention->bytes, 2.0 * 101 * 576 + 4.0 * 16 * (576 + 512));
    QCOMPARE(attention->flops, 16.0 * 101 * (2.0 * (576 + 512) + 5.0));
    EXPECT_COST(decode, "kv_write", 3, 0, (4.0 + 2.0) * 576);
    QVERIFY(find(decode, "attn_k", 3) == nullptr && find(decode, "attn_q_a", 3) == nullptr);
    QVERIFY(find(decode, "ffn_gate", 0) != nullptr && find(decode, "ffn_gate_exps", 0) == nullptr);
    QVERIFY(find(decode, "ffn_gate_exps", 1) != nullptr && find(decode, "ffn_gate_shexp", 1) != nullptr);
    // DeepSeek-V3 has a query latent of 1536 (normed) before attn_q_b.
    const std::vector<KernelRecord> v3 = predict("deepseek-v3", GgmlType::Q8_0, {Phase::Decode, 1, 100, 0, true});
    QVERIFY(find(v3, "attn_q_a", 0) != nullptr && find(v3, "attn_q_a_norm", 0) != nullptr &&
            find(v3, "attn_q_b", 0) != nullptr && find(v3, "attn_q", 0) == nullptr);
  }

  // A request's cost: its prefill, then one decode step per generated token after the first.
  void generationCost() {
    auto shape = model_shape_preset("tinyllama-1.1b", GgmlType::F16);
    auto g = predict_generation(*shape, 4, 3);
    QVERIFY(g.is_ok());
    QCOMPARE(g->num_decode_steps, int64_t(2));
    const StepCost prefill = total_cost(*predict_step(*shape, {Phase::Prefill, 4, 0, 0, true}));
    const StepCost d1 = total_cost(*predict_step(*shape, {Phase::Decode, 1, 4, 0, true}));
    const StepCost d2 = total_cost(*predict_step(*shape, {Phase::Decode, 1, 5, 0, true}));
    QCOMPARE(g->prefill.flops, prefill.flops);
    QCOMPARE(g->prefill.bytes, prefill.bytes);
    QVERIFY(qAbs(g->decode.flops - (d1.flops + d2.flops)) <= 1e-9 * g->decode.flops);
    QVERIFY(qAbs(g->decode.bytes - (d1.bytes + d2.bytes)) <= 1e-9 * g->decode.bytes);
    QVERIFY(d2.flops > d1.flops);  // one more key per head
    // Float weights multiply in floating point; quantized ones as int8 dot products on a CPU.
    QVERIFY(!g->int8_dot_products);
    auto quantized = model_shape_preset("tinyllama-1.1b", GgmlType::Q4_0);
    QVERIFY(predict_generation(*quantized, 4, 3)->int8_dot_products);
  }

  // Where the kernels count the same traffic, their helpers and these formulas agree.
  void formulasMatchKernelHelpers() {
    std::vector<uint8_t> weight(*ggml_row_bytes(GgmlType::Q4_K, 512) * 96);
    std::vector<float> x(5 * 512), y(5 * 512), bias(96);
    MatmulArgs mm{GgmlType::Q4_K, weight.data(), 512, 96, x.data(), 5, bias.data(), y.data(), 1};
    const OpCost mc = matmul_cost(mm);
    const KernelRecord mr = op_costs::matmul(OpKind::Matmul, "m", 0, GgmlType::Q4_K, 512, 96, 5, true);
    QCOMPARE(mr.flops, mc.flops);
    QCOMPARE(mr.bytes, mc.bytes);

    std::vector<float> w(512);
    const OpCost nc = rmsnorm_cost({x.data(), w.data(), y.data(), 5, 512, 1e-6f});
    const KernelRecord nr = op_costs::rmsnorm("n", 0, 5, 512, 5, true);
    QCOMPARE(nr.flops, nc.flops);
    QCOMPARE(nr.bytes, nc.bytes);

    std::vector<int32_t> positions = {3, 4, 5, 6, 7};
    RopeArgs ra{x.data(), 5, 4, 128, 64, positions.data(), RopeLayout::NeoX, 10000.0f, 1.0f, nullptr};
    const OpCost rc = rope_cost(ra);
    const KernelRecord rr = op_costs::rope("r", 0, 5, 4, 128, 64);
    QCOMPARE(rr.flops, rc.flops);
    QCOMPARE(rr.bytes, rc.bytes);

    for (const GatedActivation kind : {GatedActivation::SiLU, GatedActivation::GeluTanh}) {
      const OpCost ac = gated_activation_cost({x.data(), y.data(), x.data(), 5 * 512, kind, 1});
      const KernelRecord ar = op_costs::activation(0, 5, 512, kind);
      QCOMPARE(ar.flops, ac.flops);
      QCOMPARE(ar.bytes, ac.bytes);
    }

    std::vector<uint8_t> table(*ggml_row_bytes(GgmlType::Q8_0, 512) * 10);
    std::vector<int32_t> tokens = {1, 2, 3};
    const OpCost ec = embedding_cost({GgmlType::Q8_0, table.data(), 10, 512, tokens.data(), 3, 2.0f, y.data()});
    const KernelRecord er = op_costs::embedding(GgmlType::Q8_0, 3, 512, true);
    QCOMPARE(er.flops, ec.flops);
    QCOMPARE(er.bytes, ec.bytes);
  }

  // An engine step over several sequences: attention sums the sequences' costs (the paged
  // kernel counts the same FLOPs), one span is plain attention, and the classifier and its
  // soft-cap run once per sampling row.
  void batchedStep() {
    const op_costs::AttentionSpan one[] = {{5, 30}};
    const KernelRecord single = op_costs::batched_attention(2, one, 8, 2, 64, 64, 16);
    const KernelRecord plain = op_costs::attention(2, 5, 30, 8, 2, 64, 64, 16);
    QCOMPARE(single.shape, plain.shape);
    QCOMPARE(single.flops, plain.flops);
    QCOMPARE(single.bytes, plain.bytes);

    const op_costs::AttentionSpan spans[] = {{1, 6}, {1, 20}, {9, 0}};
    const KernelRecord batched = op_costs::batched_attention(0, spans, 8, 2, 64, 64, 0);
    double flops = 0, bytes = 0;
    for (const auto& s : spans) {
      const KernelRecord r = op_costs::attention(0, s.num_tokens, s.first_position, 8, 2, 64, 64, 0);
      flops += r.flops;
      bytes += r.bytes;
    }
    QCOMPARE(batched.flops, flops);
    QCOMPARE(batched.bytes, bytes);
    QCOMPARE(batched.shape.num_tokens, int64_t(11));
    QCOMPARE(batched.shape.num_kv, int64_t(21));  // the longest context

    // The paged kernel's own count: the same FLOPs (its bytes add block-table reads).
    std::vector<float> q(11 * 8 * 64), out(11 * 8 * 64);
    std::vector<uint16_t> cache(4 * 8 * 2 * 64);
    const std::vector<int32_t> tables = {0, -1, -1, 1, 2, 3, 0, 1, -1};  // [3 x 3]
    const std::vector<int32_t> lengths = {7, 21, 9};
    std::vector<int32_t> token_sequences = {0, 1}, positions = {6, 20};
    for (int p = 0; p < 9; ++p) {
      token_sequences.push_back(2);
      positions.push_back(p);
    }
    PagedAttentionArgs pa;
    pa.q = q.data();
    pa.k_cache = pa.v_cache = cache.data();
    pa.num_blocks = 4;
    pa.block_size = 8;
    pa.block_tables = tables.data();
    pa.max_blocks_per_sequence = 3;
    pa.sequence_lengths = lengths.data();
    pa.num_sequences = 3;
    pa.token_sequences = token_sequences.data();
    pa.positions = positions.data();
    pa.num_tokens = 11;
    pa.num_heads = 8;
    pa.num_kv_heads = 2;
    pa.head_dim = pa.head_dim_v = 64;
    pa.output = out.data();
    QCOMPARE(paged_attention_cost(pa).flops, batched.flops);

    auto shape = model_shape_preset("qwen2.5-0.5b", GgmlType::Q8_0);
    QVERIFY(shape.is_ok());
    const auto r = predict("qwen2.5-0.5b", GgmlType::Q8_0, {Phase::Prefill, 11, 0, 0, true, 3});
    QCOMPARE(int64_t(r.size()), num_step_records(shape->config, 11, 0, true));
    const KernelRecord& logits = r[r.size() - 1];
    QCOMPARE(logits.kind, OpKind::Logits);
    QCOMPARE(logits.shape.num_tokens, int64_t(3));
    QCOMPARE(r[r.size() - 2].shape.rows, int64_t(3));  // the output norm
    QCOMPARE(op_costs::softcap(1000, 3).flops, 3 * op_costs::softcap(1000).flops);
    QVERIFY(!predict_step(*shape, {Phase::Prefill, 2, 0, 0, true, 3}).is_ok());  // more rows than tokens
  }

  void shapeTexts() {
    const KernelRecord m = op_costs::matmul(OpKind::Matmul, "ffn_up", 3, GgmlType::Q4_K, 1536, 8960, 22, false);
    QCOMPARE(m.shape_text(), std::string("1536x8960 Q4_K, 22 tok"));
    QCOMPARE(op_costs::rmsnorm("q_norm", 0, 22 * 12, 128, 22, true).shape_text(), std::string("264x128, 22 tok"));
    QCOMPARE(op_costs::kv_write(0, 1, 2, 128, 128).shape_text(), std::string("2x(128+128) F16, 1 tok"));
    QCOMPARE(op_costs::attention(0, 1, 1023, 4, 1, 256, 256, 512).shape_text(),
             std::string("4/1 heads x 256, ctx 1024, window 512, 1 tok"));
    QCOMPARE(std::string(op_kind_name(OpKind::KvWrite)), std::string("kv_write"));
    QCOMPARE(std::string(phase_name(Phase::Prefill)), std::string("prefill"));
    const DeviceRef gpu{ComputeDeviceKind::Cuda, 1};
    QCOMPARE(gpu.id(), std::string("cuda:1"));
  }
};

QTEST_GUILESS_MAIN(TestCostModel)
#include "test_cost_model.moc"
