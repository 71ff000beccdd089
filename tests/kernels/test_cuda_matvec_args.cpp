// Host-side parts of the CUDA matvec and f16 dequantization launchers: argument checks
// (refusals launch nothing) and launch planning. Built as host C++ against cuda_emulation_warps/
// (cuda_emulated_matvec.cpp), so it runs in every build, with or without CUDA.
#include "iwb/kernels/cuda/dequantize_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/cuda/matvec_plan.h"

#include <QTest>

#include <cstdint>
#include <vector>

using namespace iwb;

namespace {

// Fake device addresses: the checks only look at their values, nothing is dereferenced.
template <typename T = void>
T* address(uintptr_t value) {
  return reinterpret_cast<T*>(value);
}

MatvecCudaArgs valid_args(GgmlType type = GgmlType::Q4_0, int64_t in_features = 4096) {
  MatvecCudaArgs args;
  args.type = type;
  args.weight = address(0x10000000);
  args.in_features = in_features;
  args.out_features = 33;
  args.x = address<const float>(0x20000000);
  args.num_tokens = 3;
  args.y = address<float>(0x30000000);
  args.bias = address<const float>(0x40000000);
  return args;
}

}  // namespace

class TestCudaMatvecArgs : public QObject {
  Q_OBJECT

 private slots:
  void supported_types() {
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                          GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                          GgmlType::Q6_K}) {
      QVERIFY(cuda_matvec_supports(type));
      QVERIFY(cuda_can_dequantize_f16(type));
      QCOMPARE(matvec_cuda_check(valid_args(type, 768)), cudaSuccess);
    }
    for (GgmlType type : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q8_K, GgmlType::IQ4_NL, GgmlType::I32}) {
      QVERIFY(!cuda_matvec_supports(type));
      QVERIFY(!cuda_can_dequantize_f16(type));
      QCOMPARE(matvec_cuda_check(valid_args(type, 768)), cudaErrorInvalidValue);
    }
  }

  void rejects_bad_arguments() {
    QCOMPARE(matvec_cuda_check(valid_args()), cudaSuccess);
    auto rejected = [](auto&& change) {
      MatvecCudaArgs args = valid_args();
      change(args);
      // matvec_cuda refuses before touching the device, so this runs without a GPU too.
      return matvec_cuda_check(args) == cudaErrorInvalidValue && matvec_cuda(args, nullptr) == cudaErrorInvalidValue;
    };
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.in_features = 33; }));  // not whole Q4_0 blocks
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.in_features = 0; }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.in_features = -32; }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.out_features = 0; }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.num_tokens = 0; }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.num_tokens = kCudaMatvecMaxTokens + 1; }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.weight = nullptr; }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.x = nullptr; }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.y = nullptr; }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.weight = address(0x10000001); }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.x = address<const float>(0x20000004); }));  // float4 reads
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.y = address<float>(0x30000002); }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.bias = address<const float>(0x40000001); }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.y = const_cast<float*>(a.x) + 100; }));  // y overlaps x
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.bias = a.y + 32; }));
    QVERIFY(rejected([](MatvecCudaArgs& a) {
      a.type = GgmlType::F32;
      a.in_features = 8;
      a.weight = address(0x10000002);
    }));
    QVERIFY(rejected([](MatvecCudaArgs& a) {
      a.type = GgmlType::Q4_K;
      a.in_features = 128;  // half a super-block
    }));
    QVERIFY(rejected([](MatvecCudaArgs& a) { a.out_features = (int64_t{1} << 30) + 1; }));

    // Accepted edge cases: no bias, one token, the most tokens, x right after y.
    MatvecCudaArgs args = valid_args();
    args.bias = nullptr;
    QCOMPARE(matvec_cuda_check(args), cudaSuccess);
    args.num_tokens = 1;
    QCOMPARE(matvec_cuda_check(args), cudaSuccess);
    args.num_tokens = kCudaMatvecMaxTokens;
    QCOMPARE(matvec_cuda_check(args), cudaSuccess);
    args.x = address<const float>(0x30000000 + 16 * ((8 * 33 * 4 + 15) / 16));
    QCOMPARE(matvec_cuda_check(args), cudaSuccess);
  }

  void plans_load_width_and_grid() {
    // 4096 Q4_0 values are 2304 bytes: 16-byte loads from an aligned base.
    MatvecPlan plan = plan_matvec_cuda(valid_args(GgmlType::Q4_0, 4096));
    QCOMPARE(plan.load_bytes, 16);
    QCOMPARE(plan.row_bytes, int64_t{2304});
    QCOMPARE(plan.num_blocks, int64_t{17});  // ceil(33 / 2)
    QVERIFY(plan.is_many_tokens);
    // Large quantized matrices on 16-byte loads: 4 rows per block with several tokens.
    MatvecCudaArgs wide = valid_args(GgmlType::Q4_0, 4096);
    wide.out_features = 14336;
    QCOMPARE(plan_matvec_cuda(wide).rows_per_block, kMatvecQuantWideRowsManyTokens);
    QCOMPARE(plan_matvec_cuda(wide).num_blocks, int64_t{3584});
    wide.num_tokens = 1;
    QCOMPARE(plan_matvec_cuda(wide).rows_per_block, kMatvecRowsPerBlock);
    QCOMPARE(plan_matvec_cuda(wide).num_blocks, int64_t{7168});
    wide.num_tokens = 3;
    wide.out_features = kMatvecQuantWideMinRows - 1;  // too few rows: the 2-row blocks
    QCOMPARE(plan_matvec_cuda(wide).rows_per_block, kMatvecRowsPerBlock);
    wide.out_features = 14336;
    wide.type = GgmlType::F16;  // float types keep theirs
    wide.in_features = 4096;
    QCOMPARE(plan_matvec_cuda(wide).rows_per_block, kMatvecRowsPerBlock);
    // 96 Q4_0 values are 54 bytes: 2-byte loads. 1536 Q6_K values are 1260 bytes: 4-byte loads.
    QCOMPARE(plan_matvec_cuda(valid_args(GgmlType::Q4_0, 96)).load_bytes, 2);
    QCOMPARE(plan_matvec_cuda(valid_args(GgmlType::Q6_K, 1536)).load_bytes, 4);
    QCOMPARE(plan_matvec_cuda(valid_args(GgmlType::Q6_K, 4096)).load_bytes, 16);
    // A base only 2-byte aligned limits every type to 2-byte loads.
    MatvecCudaArgs args = valid_args(GgmlType::Q8_0, 4096);
    args.weight = address(0x10000002);
    QCOMPARE(plan_matvec_cuda(args).load_bytes, 2);
    args.weight = address(0x10000004);
    QCOMPARE(plan_matvec_cuda(args).load_bytes, 4);
    // Float types: the vector kernel needs 16-byte rows, else the scalar one runs.
    QVERIFY(plan_matvec_cuda(valid_args(GgmlType::F16, 4096)).is_vector_path);
    QVERIFY(!plan_matvec_cuda(valid_args(GgmlType::F16, 4092)).is_vector_path);  // 8184-byte rows
    QVERIFY(plan_matvec_cuda(valid_args(GgmlType::F32, 4092)).is_vector_path);   // 16368-byte rows
    QVERIFY(!plan_matvec_cuda(valid_args(GgmlType::BF16, 37)).is_vector_path);
    args = valid_args(GgmlType::F16, 37);
    args.num_tokens = 1;
    args.out_features = 1;
    plan = plan_matvec_cuda(args);
    QCOMPARE(plan.num_blocks, int64_t{1});
    QVERIFY(!plan.is_many_tokens);
    args.out_features = 128256;  // the llama-3 vocabulary
    QCOMPARE(plan_matvec_cuda(args).num_blocks, int64_t{64128});

    // Q4_K on int8 activations: a thread block a row (4096 inputs) or a warp a row (1536, 2048),
    // at every token count and row count (the wide blocks of several tokens must not apply: the
    // kernel refuses them), 16-byte loads only.
    for (const int64_t tokens : {int64_t{1}, int64_t{3}, kCudaMatvecMaxTokens}) {
      for (const int64_t rows : {int64_t{5}, kMatvecQuantWideMinRows, int64_t{14336}, int64_t{128256}}) {
        for (const int64_t inputs : {int64_t{1536}, kQ4KWarpRowMaxInputs, int64_t{4096}}) {
          MatvecCudaArgs k = valid_args(GgmlType::Q4_K, inputs);
          k.num_tokens = tokens;
          k.out_features = rows;
          k.x_q8 = address<const int8_t>(0x50000000);
          k.x_q8_scale = address<const float>(0x60000000);
          QCOMPARE(matvec_cuda_check(k), cudaSuccess);
          const MatvecPlan kp = plan_matvec_cuda(k);
          QVERIFY(kp.uses_q8_input);
          const int row_group = inputs <= 2048 ? 4 : 1;
          QCOMPARE(kp.rows_per_block, row_group);
          QCOMPARE(kp.num_blocks, (rows + row_group - 1) / row_group);
          QCOMPARE(kp.is_many_tokens, tokens > 1);
          k.weight = address(0x10000004);  // 4-byte loads: the f32 decode, as without x_q8
          QVERIFY(!plan_matvec_cuda(k).uses_q8_input);
        }
      }
    }
  }

  // Q4_K groups on int8 activations at the shapes the engine groups (llama-3-8b's and the default
  // model's q, k, v and gate, up; 1, 3 and 8 tokens): accepted, as their parts are one by one
  // (the single launches' plan once refused real shapes that the small test shapes passed).
  void plans_q4_k_groups_at_real_shapes() {
    struct Op {
      int64_t in_features;
      std::vector<int64_t> rows;
    };
    const Op ops[] = {
        {4096, {4096, 1024, 1024}}, {4096, {14336, 14336}}, {1536, {1536, 256, 256}}, {1536, {8960, 8960}}};
    for (const Op& op : ops) {
      for (const int64_t tokens : {int64_t{1}, int64_t{3}, kCudaMatvecMaxTokens}) {
        MatvecCudaArgs parts[kMatvecMaxParts];
        uintptr_t weight = 0x10000000, y = 0x80000000;
        for (size_t p = 0; p < op.rows.size(); ++p) {
          parts[p] = valid_args(GgmlType::Q4_K, op.in_features);
          parts[p].out_features = op.rows[p];
          parts[p].num_tokens = tokens;
          parts[p].weight = address(weight);
          parts[p].y = address<float>(y);
          parts[p].bias = nullptr;
          parts[p].x_q8 = address<const int8_t>(0x50000000);
          parts[p].x_q8_scale = address<const float>(0x60000000);
          weight += 0x10000000;
          y += 0x01000000;
          QCOMPARE(matvec_cuda_check(parts[p]), cudaSuccess);
          QVERIFY(plan_matvec_cuda(parts[p]).uses_q8_input);
        }
        QCOMPARE(matvec_group_cuda_check(parts, static_cast<int>(op.rows.size())), cudaSuccess);
      }
    }
  }

  void dequantize_f16_rejects_bad_arguments() {
    // Refusals return before any CUDA call, so they run without a GPU.
    void* src = address(0x10000000);
    auto* dst = address<uint16_t>(0x20000000);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q4_0, src, dst, 4, 33, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q4_K, src, dst, 4, 128, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q2_K, src, dst, 4, 256, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q4_0, src, dst, -1, 32, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q4_0, nullptr, dst, 4, 32, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q4_0, src, nullptr, 4, 32, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q4_0, address(0x10000001), dst, 4, 32, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::F32, address(0x10000002), dst, 4, 32, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::F16, src, address<uint16_t>(0x20000001), 4, 32, nullptr),
             cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q8_0, src, dst, int64_t{1} << 40, int64_t{1} << 40, nullptr),
             cudaErrorInvalidValue);  // the element count overflows
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q4_0, src, dst, 0, 32, nullptr), cudaSuccess);  // nothing to do
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q4_0, nullptr, nullptr, 4, 0, nullptr), cudaSuccess);
  }
};

QTEST_APPLESS_MAIN(TestCudaMatvecArgs)
#include "test_cuda_matvec_args.moc"
