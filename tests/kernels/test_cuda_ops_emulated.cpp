// The forward-pass GPU kernels' real code (launchers and device code of paged attention on both
// kernels, sampling, KV cache writes and copies, RMSNorm, RoPE, embedding, activations and the
// element-wise kernels) run on CPU fibers through
// cuda_emulation_warps/ against the CPU references, on small odd sizes. Runs on any machine; it
// checks indexing, tiling, splits, barriers and warp exchanges, not GPU timing or memory
// ordering (test_cuda_ops, test_cuda_paged_attention, ... do that on a device).
#include "paged_attention_batch.h"
#include "random_tensors.h"

#include "iwb/engine/sampling/sampler.h"
#include "iwb/kernels/activations.h"
#include "iwb/kernels/cuda/activations_cuda.h"
#include "iwb/kernels/cuda/elementwise_cuda.h"
#include "iwb/kernels/cuda/embedding_cuda.h"
#include "iwb/kernels/cuda/kv_cache_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"  // quantize_x_q8_block_ref
#include "iwb/kernels/cuda/norm_cuda.h"
#include "iwb/kernels/cuda/paged_attention_cuda.h"
#include "iwb/kernels/cuda/rope_cuda.h"
#include "iwb/kernels/cuda/sampling_cuda.h"
#include "iwb/kernels/embedding.h"
#include "iwb/kernels/paged_attention.h"
#include "iwb/kernels/rmsnorm.h"
#include "iwb/kernels/rope.h"
#include "iwb/kernels/split_blocks.h"

#include <QTest>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace iwb;
using iwb::test::Batch;
using iwb::test::SequenceSpec;

namespace {

// The first mismatch beyond abs_tol + rel_tol * |expected| (NaN fails), as a message; empty if none.
QString compare(const std::vector<float>& got, const std::vector<float>& expected, float abs_tol, float rel_tol) {
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!(std::fabs(got[i] - expected[i]) <= abs_tol + rel_tol * std::fabs(expected[i]))) {
      return QStringLiteral("element %1 of %2: emulated GPU %3, CPU %4")
          .arg(i)
          .arg(expected.size())
          .arg(got[i], 0, 'g', 9)
          .arg(expected[i], 0, 'g', 9);
    }
  }
  return {};
}

// 256-byte aligned scratch, as the attention workspace requires.
struct AlignedBuffer {
  std::vector<unsigned char> bytes;
  explicit AlignedBuffer(size_t n) : bytes(n + 256) {}
  void* data() {
    const auto base = reinterpret_cast<uintptr_t>(bytes.data());
    return reinterpret_cast<void*>((base + 255) & ~uintptr_t{255});
  }
};

}  // namespace

class TestCudaOpsEmulated : public QObject {
  Q_OBJECT

 private slots:
  void attention_matches_reference_data() {
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("kv_heads");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("block_size");
    QTest::addColumn<int>("window");
    QTest::addColumn<float>("softcap");
    QTest::addColumn<bool>("is_prefill");
    QTest::addColumn<bool>("is_q8");
    QTest::newRow("decode d32 g2 bs16 (split keys)") << 4 << 2 << 32 << 16 << 0 << 0.0f << false << false;
    QTest::newRow("decode d64 g4 bs32 window softcap") << 4 << 1 << 64 << 32 << 20 << 30.0f << false << false;
    QTest::newRow("decode d144 g2 bs16 (wide values)") << 2 << 1 << 144 << 16 << 0 << 0.0f << false << false;
    QTest::newRow("mixed d32 g2 bs16") << 4 << 2 << 32 << 16 << 0 << 0.0f << true << false;
    QTest::newRow("mixed d80 g4 bs16 window softcap") << 4 << 1 << 80 << 16 << 24 << 20.0f << true << false;
    QTest::newRow("mixed d144 g2 bs32") << 2 << 1 << 144 << 32 << 0 << 0.0f << true << false;
    QTest::newRow("mixed d64 g1 bs16 q8") << 2 << 2 << 64 << 16 << 0 << 0.0f << true << true;
    QTest::newRow("decode d64 g2 bs16 q8") << 4 << 2 << 64 << 16 << 0 << 0.0f << false << true;
    // Decode blocks sized for the group: 2 and 4 rows per warp, and a group past them (the
    // 64-row prefill tiles' kernel).
    QTest::newRow("decode d128 g8 bs16") << 16 << 2 << 128 << 16 << 0 << 0.0f << false << false;
    QTest::newRow("decode d64 g16 bs16 q8") << 16 << 1 << 64 << 16 << 0 << 0.0f << false << true;
    QTest::newRow("decode d32 g32 bs16") << 32 << 1 << 32 << 16 << 0 << 0.0f << false << false;
    // Long decode: a row's 32-key splits spread over the combine's warps several times each
    // (a 1,000-key row has 32 of them), with and without a window, and wide values.
    QTest::newRow("long decode d128 g4 bs16") << 8 << 2 << 128 << 16 << 0 << 0.0f << false << false;
    QTest::newRow("long decode d64 g2 bs32 window") << 4 << 2 << 64 << 32 << 300 << 0.0f << false << false;
    QTest::newRow("long decode d256 g1 bs16 q8") << 2 << 2 << 256 << 16 << 0 << 0.0f << false << true;
    // Longer prompts: several query tiles per sequence, windows cutting through tiles.
    QTest::newRow("long prefill d64 g1 bs32 window") << 2 << 2 << 64 << 32 << 50 << 0.0f << true << false;
    // The register-resident kernel (paged_attention_mma.cu) on llama-3's heads (128, group 4)
    // and on 96 with a Q8_0 cache; the first also walks two key splits.
    QTest::newRow("long prefill d128 g4 bs16") << 8 << 2 << 128 << 16 << 0 << 0.0f << true << false;
    QTest::newRow("mixed d96 g2 bs16 q8") << 4 << 2 << 96 << 16 << 0 << 0.0f << true << true;
    // gpt-oss's attention sinks (a logit per head with no value) on each kernel: the f32 one
    // through the split combine, the tensor-core tiles, and the register-resident kernel.
    QTest::newRow("decode d64 g4 bs32 window sinks") << 8 << 2 << 64 << 32 << 20 << 0.0f << false << false;
    QTest::newRow("mixed d64 g2 bs16 sinks") << 4 << 2 << 64 << 16 << 8 << 0.0f << true << false;
    QTest::newRow("long prefill d128 g4 bs16 sinks") << 8 << 2 << 128 << 16 << 0 << 0.0f << true << false;
  }

  void attention_matches_reference() {
    QFETCH(int, heads);
    QFETCH(int, kv_heads);
    QFETCH(int, head_dim);
    QFETCH(int, block_size);
    QFETCH(int, window);
    QFETCH(float, softcap);
    QFETCH(bool, is_prefill);
    QFETCH(bool, is_q8);
    std::vector<SequenceSpec> specs = is_prefill
                                          ? std::vector<SequenceSpec>{{40, 40}, {17, 7}, {100, 1}, {1, 1}}
                                          : std::vector<SequenceSpec>{{1, 1}, {15, 1}, {16, 1}, {17, 1}, {70, 1}};
    int64_t max_context = 256;
    if (QByteArray(QTest::currentDataTag()).startsWith("long")) {
      specs = is_prefill ? std::vector<SequenceSpec>{{3, 3}, {128, 128}, {90, 89}, {2, 1}}
                         : std::vector<SequenceSpec>{{1000, 1}, {333, 1}, {40, 1}};
      if (!is_prefill) max_context = 1024;
    }
    std::mt19937 rng(static_cast<uint32_t>(heads * 100 + head_dim + block_size + window));
    const Batch b = iwb::test::make_batch(specs, heads, kv_heads, head_dim, block_size, max_context, rng,
                                          is_q8 ? GgmlType::Q8_0 : GgmlType::F16);
    std::vector<float> expected(b.q.size());
    const std::vector<float> sinks =
        QByteArray(QTest::currentDataTag()).endsWith("sinks") ? iwb::test::test_sinks(heads) : std::vector<float>{};
    PagedAttentionArgs reference = iwb::test::cpu_args(b, window, softcap, expected.data());
    reference.sinks = sinks.empty() ? nullptr : sinks.data();
    QVERIFY(paged_attention_ref(reference));

    const PagedAttentionArgs c = iwb::test::cpu_args(b, window, softcap, nullptr);
    PagedAttentionCudaArgs a;
    a.q = c.q;
    a.k_cache = c.k_cache;
    a.v_cache = c.v_cache;
    a.num_blocks = c.num_blocks;
    a.block_size = c.block_size;
    a.block_tables = c.block_tables;
    a.max_blocks_per_sequence = c.max_blocks_per_sequence;
    a.sequence_lengths = c.sequence_lengths;
    a.num_sequences = c.num_sequences;
    a.token_sequences = c.token_sequences;
    a.positions = c.positions;
    a.num_tokens = c.num_tokens;
    a.num_heads = c.num_heads;
    a.num_kv_heads = c.num_kv_heads;
    a.head_dim = a.head_dim_v = c.head_dim;
    a.scale = c.scale;
    a.sliding_window = window;
    a.softcap = softcap;
    a.sinks = reference.sinks;
    a.k_type = c.k_type;
    a.v_type = c.v_type;
    a.is_rotated = c.is_rotated;  // random blocks: nothing rotated
    AlignedBuffer workspace(paged_attention_cuda_workspace_bytes(a));
    a.workspace = workspace.data();
    a.workspace_bytes = paged_attention_cuda_workspace_bytes(a);
    const AttentionLaunchPlan plan = paged_attention_cuda_plan(a);
    if (!is_prefill) QVERIFY(plan.num_splits > 1);  // the combine kernel runs too
    // The k/v caches are host vectors: 16-byte alignment comes from the allocator (glibc: 16).
    QVERIFY(reinterpret_cast<uintptr_t>(a.k_cache) % 16 == 0 && reinterpret_cast<uintptr_t>(a.v_cache) % 16 == 0);

    for (const bool allow_tensor_cores : {true, false}) {
      std::vector<float> got(expected.size(), NAN);
      a.output = got.data();
      a.allow_tensor_cores = allow_tensor_cores;
      QCOMPARE(paged_attention_cuda(a, nullptr), cudaSuccess);
      // f16 rounding of Q and the weights (tensor cores) or of the expanded Q8_0 values costs
      // ~1e-3; otherwise the f32 kernel is within float rounding of the double reference.
      const float tolerance = (allow_tensor_cores && is_prefill) || is_q8 ? 3e-3f : 1e-4f;
      const QString mismatch = compare(got, expected, tolerance, tolerance);
      QVERIFY2(mismatch.isEmpty(), qPrintable((allow_tensor_cores ? "tensor cores allowed: " : "f32: ") + mismatch));
    }
  }

  void sampling_matches_cpu() {
    const int64_t vocab = 3001;
    const std::vector<SamplingRowParams> settings = {{0.8f, 40, 0.95f, 0.05f}, {1.0f, 128, 1.0f, 0.0f},
                                                     {0.7f, 1, 0.9f, 0.0f},    {1.3f, 7, 0.5f, 0.1f},
                                                     {0.0f, 40, 0.95f, 0.05f}, {2.0f, 100, 0.99f, 0.0f}};
    const auto rows = static_cast<int64_t>(settings.size());
    std::mt19937 rng(21);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    for (float& l : logits) l = normal(rng);
    for (int i = 0; i < 60; ++i) logits[static_cast<size_t>(vocab + i * 37)] = 8.0f;  // ties past top-k 128
    logits[static_cast<size_t>(3 * vocab + 5)] = NAN;
    logits[static_cast<size_t>(3 * vocab + 6)] = -INFINITY;
    logits[static_cast<size_t>(4 * vocab + 2000)] = logits[static_cast<size_t>(4 * vocab + 1000)] =
        50.0f;  // greedy tie
    std::vector<float> uniforms(static_cast<size_t>(rows));
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (float& u : uniforms) u = uniform(rng);
    uniforms[1] = 0.3f;  // inside the tied tokens, whose order (lower id first) then decides
    std::vector<int32_t> got(static_cast<size_t>(rows), -7);
    QCOMPARE(sample_rows_cuda({logits.data(), rows, vocab, settings.data(), uniforms.data(), got.data()}, nullptr),
             cudaSuccess);
    for (int64_t r = 0; r < rows; ++r) {
      const SamplingRowParams& p = settings[static_cast<size_t>(r)];
      SamplingParams params;
      params.temperature = p.temperature;
      params.top_k = p.top_k;
      params.top_p = p.top_p;
      params.min_p = p.min_p;
      params.repeat_penalty = 1.0f;
      const std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
      const std::vector<TokenProb> candidates = Sampler(params).candidates(row, {});
      double cumulative = 0;
      int32_t expected = candidates.back().id;
      for (const TokenProb& t : candidates) {
        cumulative += t.prob;
        if (static_cast<double>(uniforms[static_cast<size_t>(r)]) < cumulative) {
          expected = t.id;
          break;
        }
      }
      QVERIFY2(
          got[static_cast<size_t>(r)] == expected,
          qPrintable(
              QStringLiteral("row %1: emulated GPU %2, CPU %3").arg(r).arg(got[static_cast<size_t>(r)]).arg(expected)));
    }
    QCOMPARE(got[4], 1000);

    std::vector<int32_t> greedy(static_cast<size_t>(rows), -7);
    QCOMPARE(argmax_rows_cuda(logits.data(), rows, vocab, greedy.data(), nullptr), cudaSuccess);
    for (int64_t r = 0; r < rows; ++r) {
      if (r == 3) continue;  // a NaN: the CPU's max_element is undefined there
      QCOMPARE(greedy[static_cast<size_t>(r)],
               argmax(std::span<const float>(logits.data() + r * vocab, static_cast<size_t>(vocab))));
    }
    QCOMPARE(greedy[2], got[2]);  // top_k = 1 is the argmax

    // Fewer finite logits than k: every finite one is a candidate (no radix select).
    const int64_t small_vocab = 50;
    std::vector<float> small(static_cast<size_t>(small_vocab));
    for (float& l : small) l = normal(rng);
    small[10] = -INFINITY;
    const SamplingRowParams wide{1.0f, 128, 0.9f, 0.02f};
    const float u = 0.37f;
    int32_t token = -7;
    QCOMPARE(sample_rows_cuda({small.data(), 1, small_vocab, &wide, &u, &token}, nullptr), cudaSuccess);
    SamplingParams params;
    params.temperature = wide.temperature;
    params.top_k = wide.top_k;
    params.top_p = wide.top_p;
    params.min_p = wide.min_p;
    params.repeat_penalty = 1.0f;
    double cumulative = 0;
    int32_t expected = -1;
    for (const TokenProb& t : Sampler(params).candidates(small, {})) {
      cumulative += t.prob;
      expected = t.id;
      if (static_cast<double>(u) < cumulative) break;
    }
    QCOMPARE(token, expected);
  }

  void kv_cache_write_and_copy_match_cpu() {
    const int64_t num_tokens = 9, num_slots = 3 * 16, k_row = 64, v_row = 96;
    std::mt19937 rng(5);
    const std::vector<float> k = iwb::test::random_floats(static_cast<size_t>(num_tokens * k_row), rng, 2.0f);
    const std::vector<float> v = iwb::test::random_floats(static_cast<size_t>(num_tokens * v_row), rng, 0.5f);
    const std::vector<int64_t> slot_ids = {3, 47, -1, 0, 16, 17, 100, 31, 5};  // 100: outside the pool, skipped
    std::vector<int64_t> cpu_slots = slot_ids;
    cpu_slots[6] = -1;  // the CPU refuses a slot outside the pool instead
    for (GgmlType type : {GgmlType::F16, GgmlType::Q8_0}) {
      const int64_t k_units = kv_row_units(type, k_row), v_units = kv_row_units(type, v_row);
      std::vector<uint16_t> k_cache(static_cast<size_t>(num_slots * k_units), 0x3C00),
          v_cache(static_cast<size_t>(num_slots * v_units), 7);
      std::vector<uint16_t> k_expected = k_cache, v_expected = v_cache;
      QCOMPARE(write_kv_paged_cuda({k.data(), v.data(), slot_ids.data(), num_tokens, k_cache.data(), v_cache.data(),
                                    num_slots, k_row, v_row, type, type},
                                   nullptr),
               cudaSuccess);
      // Rotated like the CPU's (one head per row here; test_cuda_kv_quant_emulated has more).
      QVERIFY(write_kv_paged_ref({.k = k.data(),
                                  .v = v.data(),
                                  .slot_mapping = cpu_slots.data(),
                                  .num_tokens = num_tokens,
                                  .k_cache = k_expected.data(),
                                  .v_cache = v_expected.data(),
                                  .num_slots = num_slots,
                                  .k_row = k_row,
                                  .v_row = v_row,
                                  .k_type = type,
                                  .v_type = type}));
      QVERIFY(k_cache == k_expected);
      QVERIFY(v_cache == v_expected);

      // Copy-on-write over "both pools" at once: keys and values laid out one after the other.
      const int64_t block_units = 16 * k_units;
      std::vector<uint16_t> pools(static_cast<size_t>(2 * 3 * block_units));
      for (size_t i = 0; i < pools.size(); ++i) pools[i] = static_cast<uint16_t>(i * 2654435761u >> 7);
      std::vector<uint16_t> pools_expected = pools;
      const std::vector<int32_t> copies = {2, 0, 1, 1};  // the second pair copies a block onto itself: skipped
      QCOMPARE(copy_kv_blocks_cuda({pools.data(), 2, 3 * block_units, block_units, 3, copies.data(), 2}, nullptr),
               cudaSuccess);
      for (int64_t p = 0; p < 2; ++p) {
        std::copy_n(pools_expected.begin() + p * 3 * block_units + 2 * block_units, block_units,
                    pools_expected.begin() + p * 3 * block_units);
      }
      QVERIFY(pools == pools_expected);
    }
  }

  // int8 activations written beside an f32 output: bit for bit quantize_x_q8_block_ref of it.
  static QString q8_mismatch(const std::vector<float>& f32, const std::vector<int8_t>& q, const std::vector<float>& d) {
    for (size_t b = 0; b < f32.size() / 32; ++b) {
      int8_t ref_q[32];
      float ref_d = 0;
      quantize_x_q8_block_ref(f32.data() + 32 * b, ref_q, &ref_d);
      if (d[b] != ref_d || std::memcmp(q.data() + 32 * b, ref_q, 32) != 0) return QStringLiteral("block %1").arg(b);
    }
    return {};
  }

  void norm_and_rope_match_reference() {
    std::mt19937 rng(8);
    const int64_t rows = 5, dim = 333;
    const std::vector<float> x = iwb::test::random_floats(static_cast<size_t>(rows * dim), rng, 2.0f);
    const std::vector<float> w = iwb::test::random_floats(static_cast<size_t>(dim), rng, 0.5f, 1.0f);
    std::vector<float> got(x.size()), expected(x.size());
    QCOMPARE(rmsnorm_cuda({x.data(), w.data(), got.data(), rows, dim, 1e-6f}, nullptr), cudaSuccess);
    QVERIFY(rmsnorm_ref({x.data(), w.data(), expected.data(), rows, dim, 1e-6f}));
    QString mismatch = compare(got, expected, 1e-5f, 1e-5f);
    QVERIFY2(mismatch.isEmpty(), qPrintable("rmsnorm: " + mismatch));
    {  // the residual add fused in: the same bits as add_cuda then rmsnorm_cuda
      const std::vector<float> addend = iwb::test::random_floats(x.size(), rng, 1.0f);
      std::vector<float> separate = x, fused = x, separate_out(x.size()), fused_out(x.size());
      QCOMPARE(add_cuda(separate.data(), addend.data(), rows * dim, nullptr), cudaSuccess);
      QCOMPARE(rmsnorm_cuda({separate.data(), w.data(), separate_out.data(), rows, dim, 1e-6f}, nullptr), cudaSuccess);
      QCOMPARE(add_rmsnorm_cuda(fused.data(), addend.data(),
                                {fused.data(), w.data(), fused_out.data(), rows, dim, 1e-6f}, nullptr),
               cudaSuccess);
      QVERIFY(fused == separate);
      QVERIFY(fused_out == separate_out);
      QCOMPARE(add_rmsnorm_cuda(fused.data(), addend.data(), {x.data(), w.data(), fused_out.data(), rows, dim, 1e-6f},
                                nullptr),
               cudaErrorInvalidValue);  // the norm must read the sum
    }
    {  // a scaled addend (Granite's residual_scale): x + 0.22 a, the fused form the same bits
      const float scale = 0.22f;
      const std::vector<float> addend = iwb::test::random_floats(x.size(), rng, 1.0f);
      std::vector<float> separate = x, fused = x, separate_out(x.size()), fused_out(x.size());
      QCOMPARE(add_cuda(separate.data(), addend.data(), rows * dim, nullptr, scale), cudaSuccess);
      for (size_t i = 0; i < x.size(); ++i) QCOMPARE(separate[i], x[i] + scale * addend[i]);
      QCOMPARE(rmsnorm_cuda({separate.data(), w.data(), separate_out.data(), rows, dim, 1e-6f}, nullptr), cudaSuccess);
      QCOMPARE(add_rmsnorm_cuda(fused.data(), addend.data(),
                                {fused.data(), w.data(), fused_out.data(), rows, dim, 1e-6f}, nullptr, scale),
               cudaSuccess);
      QVERIFY(fused == separate);
      QVERIFY(fused_out == separate_out);
      std::vector<float> fused_q8 = x, q8_out(x.size());
      std::vector<int8_t> q(x.size() + 32);
      std::vector<float> d(x.size() / 32 + 1);
      const int64_t width = 320;  // a multiple of 32, as the int8 output needs
      QCOMPARE(add_rmsnorm_q8_cuda(fused_q8.data(), addend.data(),
                                   {fused_q8.data(), w.data(), q8_out.data(), 1, width, 1e-6f}, q.data(), d.data(),
                                   nullptr, scale),
               cudaSuccess);
      for (int64_t i = 0; i < width; ++i) QCOMPARE(fused_q8[static_cast<size_t>(i)], separate[static_cast<size_t>(i)]);
    }
    {  // and its output as int8 activations too (add_rmsnorm_q8_cuda): the same f32 bits, then
       // quantize_x_q8's bytes of them; 320 values (256 threads: a second, partial pass of
       // whole warps) and 2048 (512 threads)
      for (const int64_t width : {int64_t{320}, int64_t{2048}}) {
        const std::vector<float> base = iwb::test::random_floats(static_cast<size_t>(3 * width), rng, 2.0f);
        const std::vector<float> addend = iwb::test::random_floats(base.size(), rng, 1.0f);
        const std::vector<float> weight = iwb::test::random_floats(static_cast<size_t>(width), rng, 0.5f, 1.0f);
        std::vector<float> plain = base, fused = base, plain_out(base.size()), fused_out(base.size(), NAN);
        std::vector<int8_t> q(base.size(), 99);
        std::vector<float> d(base.size() / 32, NAN);
        QCOMPARE(add_rmsnorm_cuda(plain.data(), addend.data(),
                                  {plain.data(), weight.data(), plain_out.data(), 3, width, 1e-6f}, nullptr),
                 cudaSuccess);
        const RmsNormCudaArgs args{fused.data(), weight.data(), fused_out.data(), 3, width, 1e-6f};
        QCOMPARE(add_rmsnorm_q8_cuda(fused.data(), addend.data(), args, q.data(), d.data(), nullptr), cudaSuccess);
        QVERIFY(fused == plain);
        QVERIFY(fused_out == plain_out);
        const QString bad_q8 = q8_mismatch(fused_out, q, d);
        QVERIFY2(bad_q8.isEmpty(), qPrintable(QStringLiteral("add_rmsnorm_q8 width %1: %2").arg(width).arg(bad_q8)));
      }
      std::vector<float> r(333, 1.0f), a(333, 1.0f), out(333);
      std::vector<int8_t> q(352);
      std::vector<float> d(11);
      QCOMPARE(add_rmsnorm_q8_cuda(r.data(), a.data(), {r.data(), nullptr, out.data(), 1, 333, 1e-6f}, q.data(),
                                   d.data(), nullptr),
               cudaErrorInvalidValue);  // not whole 32-value blocks
      QCOMPARE(add_rmsnorm_q8_cuda(r.data(), a.data(), {r.data(), nullptr, out.data(), 1, 320, 1e-6f}, nullptr,
                                   d.data(), nullptr),
               cudaErrorInvalidValue);
    }

    const int64_t tokens = 3, heads = 4, kv_heads = 2, head_dim = 40, rotated = 24;
    std::vector<float> q = iwb::test::random_floats(static_cast<size_t>(tokens * heads * head_dim), rng);
    std::vector<float> k = iwb::test::random_floats(static_cast<size_t>(tokens * kv_heads * head_dim), rng);
    const std::vector<int32_t> positions = {0, 7, 4097};
    const std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f, 1.5f, 3.0f, 1.0f, 6.0f, 2.5f, 1.0f, 1.0f, 9.0f};
    // The queries' rotation at these shapes and positions (base 10000).
    const auto rope_args = [&](float* queries, RopeLayout layout, float freq_scale) {
      RopeCudaArgs r;
      r.q = queries;
      r.num_heads = heads;
      r.num_tokens = tokens;
      r.head_dim = head_dim;
      r.num_rotated = rotated;
      r.positions = positions.data();
      r.layout = layout;
      r.freq_base = 10000.0f;
      r.freq_scale = freq_scale;
      return r;
    };
    {  // YaRN (gpt-oss, OLMo 3, long-context Qwen files): the ramp between the correction dims,
       // the mix with the unscaled angle and the magnitude scale, against rope_ref's
      std::vector<float> q_yarn = q, q_yarn_ref = q;
      RopeCudaArgs r = rope_args(q_yarn.data(), RopeLayout::NeoX, 0.25f);
      r.ext_factor = 1.0f;
      r.attn_factor = 0.9f;
      r.original_context = 4096;
      QCOMPARE(rope_cuda(r, nullptr), cudaSuccess);
      RopeArgs ref{q_yarn_ref.data(), tokens,           heads,    head_dim, rotated,
                   positions.data(),  RopeLayout::NeoX, 10000.0f, 0.25f,    nullptr};
      ref.ext_factor = 1.0f;
      ref.attn_factor = 0.9f;
      ref.original_context = 4096;
      QVERIFY(rope_ref(ref));
      float dims[2];
      rope_yarn_corr_dims(rotated, 4096, 10000.0f, 32.0f, 1.0f, dims);  // 3 and 9 of 12 pairs:
      QVERIFY(dims[0] > 0.0f && dims[1] < rotated / 2 - 1);             // every part of the ramp
      mismatch = compare(q_yarn, q_yarn_ref, 1e-5f, 1e-5f);
      QVERIFY2(mismatch.isEmpty(), qPrintable("rope with YaRN: " + mismatch));
      r.original_context = 0;
      QCOMPARE(rope_cuda(r, nullptr), cudaErrorInvalidValue);  // YaRN needs the original context
    }
    std::vector<float> q_ref = q, k_ref = k;
    for (const RopeLayout layout : {RopeLayout::Normal, RopeLayout::NeoX}) {
      RopeCudaArgs r = rope_args(q.data(), layout, 0.5f);
      r.k = k.data();
      r.num_kv_heads = kv_heads;
      r.freq_factors = factors.data();
      QCOMPARE(rope_cuda(r, nullptr), cudaSuccess);
      RopeArgs ref{q_ref.data(),     tokens, heads,    head_dim, rotated,
                   positions.data(), layout, 10000.0f, 0.5f,     factors.data()};
      QVERIFY(rope_ref(ref));
      ref.data = k_ref.data();
      ref.num_heads = kv_heads;
      QVERIFY(rope_ref(ref));
      mismatch = compare(q, q_ref, 1e-5f, 1e-5f) + compare(k, k_ref, 1e-5f, 1e-5f);
      QVERIFY2(mismatch.isEmpty(), qPrintable("rope: " + mismatch));

      // The KV write fused in (f16 caches): the same rotated q and k, and the caches bit for bit
      // what rope then write_kv_paged_cuda store; slot -1 and one past the pool are skipped.
      const int64_t v_row = 3 * 16, num_slots = 8, k_row = kv_heads * head_dim;
      const std::vector<float> v = iwb::test::random_floats(static_cast<size_t>(tokens * v_row), rng);
      const std::vector<int64_t> slot_ids = {5, -1, num_slots};
      std::vector<float> q_fused = q, k_fused = k, q_apart = q, k_apart = k;
      std::vector<uint16_t> k_cache(static_cast<size_t>(num_slots * k_row), 0x1234),
          v_cache(static_cast<size_t>(num_slots * v_row), 0x4321);
      std::vector<uint16_t> k_cache_apart = k_cache, v_cache_apart = v_cache;
      RopeCudaArgs fused = r;
      fused.q = q_fused.data();
      fused.k = k_fused.data();
      fused.v = v.data();
      fused.v_row = v_row;
      fused.k_cache = k_cache.data();
      fused.v_cache = v_cache.data();
      fused.slot_mapping = slot_ids.data();
      fused.num_slots = num_slots;
      QCOMPARE(rope_cuda(fused, nullptr), cudaSuccess);
      RopeCudaArgs apart = r;
      apart.q = q_apart.data();
      apart.k = k_apart.data();
      QCOMPARE(rope_cuda(apart, nullptr), cudaSuccess);
      QCOMPARE(write_kv_paged_cuda({k_apart.data(), v.data(), slot_ids.data(), tokens, k_cache_apart.data(),
                                    v_cache_apart.data(), num_slots, k_row, v_row, GgmlType::F16, GgmlType::F16},
                                   nullptr),
               cudaSuccess);
      QVERIFY(q_fused == q_apart && k_fused == k_apart);
      QVERIFY(k_cache == k_cache_apart && v_cache == v_cache_apart);
      QVERIFY(k_cache[5 * k_row] != 0x1234);  // written at all
      fused.slot_mapping = nullptr;
      QCOMPARE(rope_cuda(fused, nullptr), cudaErrorInvalidValue);
    }
  }

  void embedding_matches_reference() {
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,
                          GgmlType::Q6_K}) {
      const int64_t block = ggml_type_traits(type).block_size;
      const int64_t dim = block == 1 ? 77 : 2 * block, vocab = 11;
      std::mt19937 rng(static_cast<uint32_t>(type) + 40u);
      const std::vector<uint8_t> table = iwb::test::random_tensor_bytes(type, vocab, dim, rng, 0.7f);
      const std::vector<int32_t> tokens = {0, 10, 3, 3, 12};  // 12: outside the table
      const std::vector<int32_t> cpu_tokens = {0, 10, 3, 3};
      std::vector<float> expected(static_cast<size_t>(5 * dim), 0.0f);
      QVERIFY(embedding_lookup_ref({type, table.data(), vocab, dim, cpu_tokens.data(), 4, 2.0f, expected.data()}));
      std::vector<float> got(expected.size(), NAN);
      int32_t bad_token = 0;
      QCOMPARE(
          embedding_cuda({type, table.data(), vocab, dim, tokens.data(), 5, 2.0f, got.data(), &bad_token}, nullptr),
          cudaSuccess);
      const QString mismatch = compare(got, expected, 1e-5f, 1e-5f);  // the bad token's row: zeros
      const std::string_view name = ggml_type_name(type);
      QVERIFY2(mismatch.isEmpty(),
               qPrintable(QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size())) + ": " + mismatch));
      QCOMPARE(bad_token, 1);
      if (has_split_blocks(type)) {  // the same rows from the split layout the CUDA engine uploads
        std::vector<uint8_t> split(table.size());
        QVERIFY(repack_split_blocks(type, table.data(), vocab, dim, split.data()));
        std::vector<float> got_split(expected.size(), NAN);
        EmbeddingCudaArgs e{type, split.data(), vocab, dim, tokens.data(), 5, 2.0f, got_split.data(), nullptr};
        e.is_split = true;
        QCOMPARE(embedding_cuda(e, nullptr), cudaSuccess);
        QVERIFY(got_split == got);
      }
    }
  }

  void activations_and_elementwise_match_cpu() {
    std::mt19937 rng(13);
    const int64_t rows = 3;
    // Rows of 300: whole 16-byte words, the four-a-thread kernel; 299: one value a thread.
    for (const int64_t length : {int64_t{300}, int64_t{299}}) {
      const std::vector<float> fused = iwb::test::random_floats(static_cast<size_t>(rows * 2 * length), rng, 3.0f);
      // (gpt-oss's clamped SwiGLU: values of sd 3 reach its limit of 7 now and then.)
      for (const GatedActivation kind :
           {GatedActivation::SiLU, GatedActivation::GeluTanh, GatedActivation::SwigluOai}) {
        std::vector<float> gate, up;
        for (int64_t r = 0; r < rows; ++r) {
          gate.insert(gate.end(), fused.begin() + r * 2 * length, fused.begin() + r * 2 * length + length);
          up.insert(up.end(), fused.begin() + r * 2 * length + length, fused.begin() + (r + 1) * 2 * length);
        }
        std::vector<float> expected(gate.size()), got(gate.size(), NAN);
        QVERIFY(gated_activation_ref({gate.data(), up.data(), expected.data(), rows * length, kind}));
        GatedActivationCudaArgs a;
        a.gate = fused.data();
        a.up = fused.data() + length;
        a.output = got.data();
        a.num_rows = rows;
        a.row_length = length;
        a.gate_stride = a.up_stride = 2 * length;
        a.kind = kind;
        QCOMPARE(gated_activation_cuda(a, nullptr), cudaSuccess);
        const QString mismatch = compare(got, expected, 1e-5f, 1e-4f);
        QVERIFY2(mismatch.isEmpty(), qPrintable("activation: " + mismatch));
        // With q8 outputs (rows of a multiple of 32): the same f32 bits, then quantize_x_q8's bytes.
        if (length % 32 != 0) {
          a.q8 = reinterpret_cast<int8_t*>(got.data());
          a.q8_scale = got.data();
          QCOMPARE(gated_activation_cuda(a, nullptr), cudaErrorInvalidValue);
        }
        const int64_t width = 288;
        std::vector<float> g2 = iwb::test::random_floats(static_cast<size_t>(rows * width), rng, 3.0f);
        const std::vector<float> u2 = iwb::test::random_floats(g2.size(), rng, 3.0f);
        std::vector<float> plain(g2.size()), fused(g2.size(), NAN), d(g2.size() / 32, NAN);
        std::vector<int8_t> q(g2.size(), 99);
        GatedActivationCudaArgs b;
        b.gate = g2.data();
        b.up = u2.data();
        b.output = plain.data();
        b.num_rows = rows;
        b.row_length = width;
        b.kind = kind;
        QCOMPARE(gated_activation_cuda(b, nullptr), cudaSuccess);
        b.output = fused.data();
        b.q8 = q.data();
        b.q8_scale = d.data();
        QCOMPARE(gated_activation_cuda(b, nullptr), cudaSuccess);
        QVERIFY(fused == plain);
        const QString bad_q8 = q8_mismatch(fused, q, d);
        QVERIFY2(bad_q8.isEmpty(), qPrintable("activation q8: " + bad_q8));
      }
    }

    const int64_t length = 300;
    std::vector<float> x = iwb::test::random_floats(static_cast<size_t>(rows * length), rng, 5.0f);
    const std::vector<float> y = iwb::test::random_floats(x.size(), rng);
    const std::vector<float> bias = iwb::test::random_floats(static_cast<size_t>(length), rng);
    std::vector<float> expected(x.size());
    for (size_t i = 0; i < x.size(); ++i) expected[i] = 30.0f * std::tanh(((x[i] + y[i]) + bias[i % length]) / 30.0f);
    QCOMPARE(add_cuda(x.data(), y.data(), static_cast<int64_t>(x.size()), nullptr), cudaSuccess);
    QCOMPARE(add_bias_rows_cuda(x.data(), bias.data(), rows, length, nullptr), cudaSuccess);
    QCOMPARE(softcap_cuda(x.data(), static_cast<int64_t>(x.size()), 30.0f, nullptr), cudaSuccess);
    QString mismatch = compare(x, expected, 1e-5f, 1e-5f);
    QVERIFY2(mismatch.isEmpty(), qPrintable("add, bias, softcap: " + mismatch));

    const std::vector<int32_t> wanted = {2, 0};
    std::vector<float> gathered(2 * length, NAN), gathered_expected;
    for (int32_t r : wanted)
      gathered_expected.insert(gathered_expected.end(), x.begin() + r * length, x.begin() + (r + 1) * length);
    QCOMPARE(gather_rows_cuda(x.data(), length, wanted.data(), 2, gathered.data(), nullptr), cudaSuccess);
    QVERIFY(gathered == gathered_expected);

    std::vector<uint16_t> halves(x.size());
    std::vector<float> back(x.size());
    QCOMPARE(f32_to_f16_cuda(x.data(), halves.data(), static_cast<int64_t>(x.size()), nullptr), cudaSuccess);
    QCOMPARE(f16_to_f32_cuda(halves.data(), back.data(), static_cast<int64_t>(x.size()), nullptr), cudaSuccess);
    for (size_t i = 0; i < x.size(); ++i) {
      QCOMPARE(halves[i], f32_to_fp16(x[i]));
      QCOMPARE(back[i], fp16_to_f32(halves[i]));
    }
  }
};

QTEST_APPLESS_MAIN(TestCudaOpsEmulated)
#include "test_cuda_ops_emulated.moc"
