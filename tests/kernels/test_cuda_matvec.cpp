// matvec_cuda and dequantize_rows_f16_cuda against the CPU reference (dequantize_row_ref and
// double-precision dots) for every supported type, odd row counts, row lengths that take each
// load width and several tiles, 1..8 tokens, with and without bias. Skips without a CUDA device.
#include "iwb/engine/backend/device_info.h"
#include "iwb/kernels/cuda/dequantize_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/cuda/split_blocks_cuda.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/quantize.h"
#include "q8_input_reference.h"
#include "random_tensors.h"

#include <QTest>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace iwb;

namespace {

constexpr int64_t kGuardFloats = 64;  // past the end of y: must stay untouched

#define CUDA_VERIFY(call)                                                                                         \
  do {                                                                                                            \
    const cudaError_t error_ = (call);                                                                            \
    QVERIFY2(error_ == cudaSuccess, qPrintable(QStringLiteral("%1: %2").arg(#call, cudaGetErrorString(error_)))); \
  } while (0)

QString type_name(GgmlType type) {
  const std::string_view name = ggml_type_name(type);
  return QString::fromUtf8(name.data(), static_cast<int>(name.size()));
}

std::vector<GgmlType> matvec_types() {
  return {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
          GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
}

// Row lengths per block size: small ones (2-byte loads for 18/34/210-byte rows), aligned ones
// (16-byte loads), 1536 (Q6_K: 1260-byte rows, 4-byte loads) and ones spanning several tiles;
// 37 sends the float types to their scalar kernel.
std::vector<int64_t> row_lengths(GgmlType type) {
  switch (ggml_type_traits(type).block_size) {
    case 1: return {32, 37, 96, 256, 768, 2816, 8224};
    case 32: return {32, 96, 256, 768, 2816, 8224};
    default: return {256, 768, 1536, 2816, 4352};
  }
}

// out_features x in_features weights: quantized by the CPU reference quantizer from random
// values (realistic blocks) for some shapes, random block bytes (every bit pattern) for others.
std::vector<uint8_t> make_weights(GgmlType type, int64_t out_features, int64_t in_features, bool use_quantizer,
                                  std::mt19937& rng) {
  if (!use_quantizer) return test::random_tensor_bytes(type, out_features, in_features, rng, 0.05f);
  const size_t row_bytes = *ggml_row_bytes(type, in_features);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(out_features));
  for (int64_t r = 0; r < out_features; ++r) {
    const std::vector<float> values = test::random_floats(static_cast<size_t>(in_features), rng, 0.05f);
    if (!quantize_row_ref(type, values.data(), bytes.data() + r * row_bytes, in_features)) return {};
  }
  return bytes;
}

}  // namespace

class TestCudaMatvec : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    const auto devices = list_cuda_devices();
    if (!devices.is_ok()) {
      QSKIP(qPrintable(
          QStringLiteral("CUDA matvec not tested: %1").arg(QString::fromStdString(devices.error_message()))));
    }
    qInfo("testing on %s (%s)", devices->front().id.c_str(), devices->front().name.c_str());
  }

  void matches_reference_data() {
    QTest::addColumn<int>("type_id");
    for (GgmlType type : matvec_types())
      QTest::newRow(std::string(ggml_type_name(type)).c_str()) << static_cast<int>(type);
  }

  void matches_reference() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    QVERIFY(cuda_matvec_supports(type));
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 7919u + 3u);
    for (int64_t in_features : row_lengths(type)) {
      const std::vector<float> x = test::random_floats(static_cast<size_t>(kCudaMatvecMaxTokens * in_features), rng);
      float* d_x = nullptr;
      CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_x), x.size() * sizeof(float)));
      CUDA_VERIFY(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
      for (int64_t out_features : {1, 7, 33, 257}) {
        const bool use_quantizer = out_features == 1 || out_features == 33;
        const std::vector<uint8_t> bytes = make_weights(type, out_features, in_features, use_quantizer, rng);
        QVERIFY(!bytes.empty());
        std::vector<float> w(static_cast<size_t>(out_features * in_features));
        const size_t row_bytes = bytes.size() / static_cast<size_t>(out_features);
        for (int64_t r = 0; r < out_features; ++r) {
          QVERIFY(dequantize_row_ref(type, bytes.data() + r * row_bytes, w.data() + r * in_features, in_features));
        }
        const std::vector<float> bias = test::random_floats(static_cast<size_t>(out_features), rng);

        // The weights at base offsets 0, 2 and 4 bytes (16-, 2- and 4-byte loads); F32 needs 4.
        uint8_t* d_weight = nullptr;
        float* d_bias = nullptr;
        float* d_y = nullptr;
        const size_t y_floats = static_cast<size_t>(kCudaMatvecMaxTokens * out_features + kGuardFloats);
        CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_weight), bytes.size() + 16));
        CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_bias), bias.size() * sizeof(float)));
        CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_y), y_floats * sizeof(float)));
        CUDA_VERIFY(cudaMemcpy(d_bias, bias.data(), bias.size() * sizeof(float), cudaMemcpyHostToDevice));
        std::vector<float> y_one_token;  // outputs of the 1-token run at offset 0
        for (int offset : {0, 2, 4}) {
          if (type == GgmlType::F32 && offset == 2) continue;
          CUDA_VERIFY(cudaMemcpy(d_weight + offset, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
          for (int64_t num_tokens = 1; num_tokens <= kCudaMatvecMaxTokens; ++num_tokens) {
            if (offset != 0 && num_tokens != 1 && num_tokens != 5) continue;  // misaligned bases: fewer runs
            const bool with_bias = (num_tokens + out_features) % 2 == 0;
            MatvecCudaArgs args;
            args.type = type;
            args.weight = d_weight + offset;
            args.in_features = in_features;
            args.out_features = out_features;
            args.x = d_x;
            args.num_tokens = num_tokens;
            args.y = d_y;
            args.bias = with_bias ? d_bias : nullptr;
            CUDA_VERIFY(cudaMemset(d_y, 0xFF, y_floats * sizeof(float)));  // NaN where unwritten
            CUDA_VERIFY(matvec_cuda(args, nullptr));
            CUDA_VERIFY(cudaDeviceSynchronize());
            std::vector<float> y(y_floats);
            CUDA_VERIFY(cudaMemcpy(y.data(), d_y, y_floats * sizeof(float), cudaMemcpyDeviceToHost));

            for (int64_t t = 0; t < num_tokens; ++t) {
              const float* xt = x.data() + t * in_features;
              for (int64_t o = 0; o < out_features; ++o) {
                const float* wo = w.data() + o * in_features;
                double expected = with_bias ? bias[static_cast<size_t>(o)] : 0.0;
                double max_w = 0, sum_abs_x = 0;
                for (int64_t i = 0; i < in_features; ++i) {
                  expected += static_cast<double>(wo[i]) * xt[i];
                  max_w = std::max(max_w, std::fabs(static_cast<double>(wo[i])));
                  sum_abs_x += std::fabs(static_cast<double>(xt[i]));
                }
                // f32 sums of at most a few hundred terms per thread plus a tree reduction,
                // and decoded weights that may differ from the CPU's by an FMA rounding.
                const double tolerance = 1e-5 * max_w * sum_abs_x + 1e-6 * std::fabs(expected);
                const float got = y[static_cast<size_t>(t * out_features + o)];
                if (!(std::fabs(got - expected) <= tolerance)) {
                  QFAIL(qPrintable(
                      QStringLiteral("%1 in=%2 out=%3 tokens=%4 offset=%5 bias=%6: y[%7][%8] GPU %9, reference %10")
                          .arg(type_name(type))
                          .arg(in_features)
                          .arg(out_features)
                          .arg(num_tokens)
                          .arg(offset)
                          .arg(with_bias)
                          .arg(t)
                          .arg(o)
                          .arg(got, 0, 'g', 9)
                          .arg(expected, 0, 'g', 9)));
                }
              }
            }
            // Batch invariance: token 0's outputs are bit for bit those of a 1-token call (same
            // bias setting: odd token counts).
            if (offset == 0 && num_tokens == 1) y_one_token.assign(y.begin(), y.begin() + out_features);
            if (offset == 0 && num_tokens % 2 == 1 && num_tokens > 1) {
              QVERIFY2(
                  std::memcmp(y.data(), y_one_token.data(), sizeof(float) * static_cast<size_t>(out_features)) == 0,
                  qPrintable(QStringLiteral("%1 in=%2 out=%3: token 0 differs between 1 and %4 tokens")
                                 .arg(type_name(type))
                                 .arg(in_features)
                                 .arg(out_features)
                                 .arg(num_tokens)));
            }
            // Nothing written past the outputs of the tokens asked for.
            for (size_t i = static_cast<size_t>(num_tokens * out_features); i < y_floats; ++i) {
              QVERIFY2(
                  std::isnan(y[i]),
                  qPrintable(QStringLiteral("%1: y written at float %2 past the outputs").arg(type_name(type)).arg(i)));
            }
          }
        }
        cudaFree(d_weight);
        cudaFree(d_bias);
        cudaFree(d_y);
      }
      cudaFree(d_x);
    }
  }

  void dequantizes_to_f16_data() { matches_reference_data(); }

  void dequantizes_to_f16() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    QVERIFY(cuda_can_dequantize_f16(type));
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 104729u + 5u);
    const int64_t block_size = ggml_type_traits(type).block_size;
    // 37 values per row (float types) makes a total that is not a multiple of 8.
    const int64_t row_length = block_size == 1 ? 37 : 3 * block_size;
    for (int64_t num_rows : {int64_t{1}, int64_t{3}, int64_t{17}}) {
      const std::vector<uint8_t> bytes = make_weights(type, num_rows, row_length, num_rows != 17, rng);
      QVERIFY(!bytes.empty());
      const size_t num_values = static_cast<size_t>(num_rows * row_length);
      std::vector<float> reference(num_values);
      QVERIFY(dequantize_row_ref(type, bytes.data(), reference.data(), static_cast<int64_t>(num_values)));
      uint8_t* d_src = nullptr;
      uint16_t* d_dst = nullptr;
      CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_src), bytes.size()));
      CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_dst), (num_values + 8) * sizeof(uint16_t)));
      CUDA_VERIFY(cudaMemcpy(d_src, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
      for (int dst_offset : {0, 1}) {  // 16-byte stores, and the scalar stores of a 2-byte aligned dst
        CUDA_VERIFY(cudaMemset(d_dst, 0xFF, (num_values + 8) * sizeof(uint16_t)));
        CUDA_VERIFY(dequantize_rows_f16_cuda(type, d_src, d_dst + dst_offset, num_rows, row_length, nullptr));
        CUDA_VERIFY(cudaDeviceSynchronize());
        std::vector<uint16_t> got(num_values + 8);
        CUDA_VERIFY(cudaMemcpy(got.data(), d_dst, got.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < num_values; ++i) {
          const uint16_t expected = f32_to_fp16(reference[i]);
          const uint16_t value = got[i + static_cast<size_t>(dst_offset)];
          // One f16 step of slack: the GPU's decoded f32 may differ from the CPU's by an FMA
          // rounding, which can move a value across an f16 rounding boundary.
          const float step = std::fabs(fp16_to_f32(static_cast<uint16_t>(expected + 1)) - fp16_to_f32(expected));
          if (value != expected && !(std::fabs(fp16_to_f32(value) - fp16_to_f32(expected)) <= step)) {
            QFAIL(qPrintable(QStringLiteral("%1 rows=%2 value %3: GPU f16 %4, reference %5")
                                 .arg(type_name(type))
                                 .arg(num_rows)
                                 .arg(i)
                                 .arg(fp16_to_f32(value))
                                 .arg(fp16_to_f32(expected))));
          }
        }
        for (size_t i = 0; i < got.size(); ++i) {
          if (i >= static_cast<size_t>(dst_offset) && i < num_values + static_cast<size_t>(dst_offset)) continue;
          QCOMPARE(got[i], uint16_t{0xFFFF});  // nothing written outside the destination
        }
      }
      cudaFree(d_src);
      cudaFree(d_dst);
    }
  }

  // One token of Q4_0 / Q8_0 / Q4_K / Q6_K against int8 activations on the GPU: the quantized input bit for bit
  // as quantize_x_q8_block_ref, the products against the same integer sums in double.
  void q8_input_matches_reference_data() {
    QTest::addColumn<int>("type_id");
    QTest::newRow("Q4_0") << static_cast<int>(GgmlType::Q4_0);
    QTest::newRow("Q8_0") << static_cast<int>(GgmlType::Q8_0);
    QTest::newRow("Q4_K") << static_cast<int>(GgmlType::Q4_K);
    QTest::newRow("Q6_K") << static_cast<int>(GgmlType::Q6_K);
  }

  void q8_input_matches_reference() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 7u + 1u);
    // K-quants' 256-value blocks: one block; 6 (the default model's 1536: a warp a row for Q4_K,
    // each lane more than one piece); 17 (a thread block a row, each thread more than one piece); a
    // real row. The 32-value types: 2-byte loads (96), 4-byte loads over several tiles (4160),
    // 16-byte. Q4_K also takes 5 tokens a launch (each weight load shared by the tokens).
    const bool is_k = type == GgmlType::Q4_K || type == GgmlType::Q6_K;
    const std::vector<int64_t> k_inputs = {256, 1536, 4352, 4096}, legacy_inputs = {96, 4160, 4096};
    for (const int64_t tokens : {int64_t{1}, type == GgmlType::Q4_K ? int64_t{5} : int64_t{0}}) {
      if (tokens == 0) continue;
      for (const int64_t in_features : (is_k ? k_inputs : legacy_inputs)) {
        const int64_t out_features = in_features == 4096 ? 4099 : 5;
        const int64_t num_blocks = in_features / 32;
        const std::vector<uint8_t> bytes = test::random_tensor_bytes(type, out_features, in_features, rng, 0.05f);
        const std::vector<float> x = test::random_floats(static_cast<size_t>(tokens * in_features), rng, 2.0f);
        uint8_t* d_weight = nullptr;
        float *d_x = nullptr, *d_y = nullptr, *d_scale = nullptr;
        int8_t* d_q = nullptr;
        QCOMPARE(cudaMalloc(&d_weight, bytes.size()), cudaSuccess);
        QCOMPARE(cudaMalloc(&d_x, x.size() * sizeof(float)), cudaSuccess);
        QCOMPARE(cudaMalloc(&d_y, static_cast<size_t>(tokens * out_features) * sizeof(float)), cudaSuccess);
        QCOMPARE(cudaMalloc(&d_scale, static_cast<size_t>(tokens * num_blocks) * sizeof(float)), cudaSuccess);
        QCOMPARE(cudaMalloc(&d_q, static_cast<size_t>(tokens * in_features)), cudaSuccess);
        QCOMPARE(cudaMemcpy(d_weight, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
        QCOMPARE(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        QCOMPARE(quantize_x_q8_cuda(d_x, tokens * in_features, d_q, d_scale, nullptr), cudaSuccess);
        MatvecCudaArgs args;
        args.type = type;
        args.weight = d_weight;
        args.in_features = in_features;
        args.out_features = out_features;
        args.x = d_x;
        args.num_tokens = tokens;
        args.y = d_y;
        args.x_q8 = d_q;
        args.x_q8_scale = d_scale;
        QCOMPARE(matvec_cuda(args, nullptr), cudaSuccess);
        QCOMPARE(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<int8_t> q(static_cast<size_t>(tokens * in_features));
        std::vector<float> scale(static_cast<size_t>(tokens * num_blocks)),
            y(static_cast<size_t>(tokens * out_features));
        QCOMPARE(cudaMemcpy(q.data(), d_q, q.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        QCOMPARE(cudaMemcpy(scale.data(), d_scale, scale.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        QCOMPARE(cudaMemcpy(y.data(), d_y, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        for (const void* p :
             {static_cast<const void*>(d_weight), static_cast<const void*>(d_x), static_cast<const void*>(d_y),
              static_cast<const void*>(d_scale), static_cast<const void*>(d_q)}) {
          cudaFree(const_cast<void*>(p));
        }
        for (int64_t b = 0; b < tokens * num_blocks; ++b) {
          int8_t ref_q[32];
          float ref_d = 0;
          quantize_x_q8_block_ref(x.data() + 32 * b, ref_q, &ref_d);
          QCOMPARE(scale[static_cast<size_t>(b)], ref_d);
          QVERIFY2(std::memcmp(q.data() + 32 * b, ref_q, 32) == 0, qPrintable(QStringLiteral("block %1").arg(b)));
        }
        const QString mismatch = test::q8_product_mismatch(type, bytes.data(), in_features, out_features, q.data(),
                                                           scale.data(), tokens, y.data(), nullptr, 1, type_name(type));
        QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
      }
    }
  }

  // Q4_0, Q8_0 and Q6_K in the split layout on the device: 1, 3 and 8 tokens of int8 activations
  // against the double sum over the GGUF blocks (llama-3 widths and an odd one, 96 or for Q6_K
  // 1280; 4099 rows: a partial thread block), each token independent of its batch, and the f16
  // dequantization bit for bit. (Q6_K has no tensor-core product.)
  void split_blocks_match_reference_data() {
    QTest::addColumn<int>("type_id");
    QTest::newRow("Q4_0") << static_cast<int>(GgmlType::Q4_0);
    QTest::newRow("Q8_0") << static_cast<int>(GgmlType::Q8_0);
    QTest::newRow("Q6_K") << static_cast<int>(GgmlType::Q6_K);
  }

  void split_blocks_match_reference() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    const bool is_q6_k = type == GgmlType::Q6_K;
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 3u + 29u);
    const int64_t odd_width = is_q6_k ? 1280 : 96;
    for (const int64_t in_features : {odd_width, int64_t{4096}, int64_t{14336}}) {
      const int64_t out_features = in_features == odd_width ? 7 : 4099, blocks = in_features / 32;
      const int64_t tokens = kSplitMmaMaxTokens;  // the matvec takes the first kSplitMaxTokens
      const std::vector<uint8_t> gguf = test::random_tensor_bytes(type, out_features, in_features, rng, 0.05f);
      std::vector<uint8_t> split(gguf.size());
      QVERIFY(repack_split_blocks(type, gguf.data(), out_features, in_features, split.data()));
      const std::vector<float> x = test::random_floats(static_cast<size_t>(tokens * in_features), rng, 2.0f);
      uint8_t* d_weight = nullptr;
      float *d_x = nullptr, *d_y = nullptr, *d_y1 = nullptr, *d_scale = nullptr;
      int8_t* d_q = nullptr;
      uint16_t* d_f16 = nullptr;
      const size_t num_values = static_cast<size_t>(out_features * in_features);
      QCOMPARE(cudaMalloc(&d_weight, split.size()), cudaSuccess);
      QCOMPARE(cudaMalloc(&d_x, x.size() * sizeof(float)), cudaSuccess);
      QCOMPARE(cudaMalloc(&d_y, static_cast<size_t>(tokens * out_features) * sizeof(float)), cudaSuccess);
      QCOMPARE(cudaMalloc(&d_y1, static_cast<size_t>(out_features) * sizeof(float)), cudaSuccess);
      QCOMPARE(cudaMalloc(&d_scale, static_cast<size_t>(tokens * blocks) * sizeof(float)), cudaSuccess);
      QCOMPARE(cudaMalloc(&d_q, static_cast<size_t>(tokens * in_features)), cudaSuccess);
      QCOMPARE(cudaMalloc(&d_f16, num_values * 2), cudaSuccess);
      QCOMPARE(cudaMemcpy(d_weight, split.data(), split.size(), cudaMemcpyHostToDevice), cudaSuccess);
      QCOMPARE(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      int32_t* d_sums = nullptr;
      QCOMPARE(cudaMalloc(&d_sums, static_cast<size_t>(tokens * blocks) * sizeof(int32_t)), cudaSuccess);
      QCOMPARE(quantize_x_q8_cuda(d_x, tokens * in_features, d_q, d_scale, nullptr, d_sums), cudaSuccess);
      std::vector<int32_t> sums(static_cast<size_t>(tokens * blocks));
      QCOMPARE(cudaMemcpy(sums.data(), d_sums, sums.size() * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
      std::vector<int8_t> q(static_cast<size_t>(tokens * in_features));
      std::vector<float> scale(static_cast<size_t>(tokens * blocks));
      QCOMPARE(cudaMemcpy(q.data(), d_q, q.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      QCOMPARE(cudaMemcpy(scale.data(), d_scale, scale.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      for (int64_t b = 0; b < tokens * blocks; ++b) {
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += q[static_cast<size_t>(b * 32 + j)];
        QCOMPARE(sums[static_cast<size_t>(b)], sum);
      }
      // The matvec with 1, 3 and 8 tokens (each token's result also computed alone: batch
      // invariance), the tensor-core kernel with 64, 9 and 3. Past 8 tokens every 13th row of
      // the large shapes is checked: the double reference over 64 tokens would take minutes.
      struct Run {
        bool is_mma;
        int64_t n;
      };
      for (const Run run :
           {Run{false, 1}, Run{false, 3}, Run{false, kSplitMaxTokens}, Run{true, tokens}, Run{true, 9}, Run{true, 3}}) {
        if (run.is_mma && is_q6_k) continue;
        const int64_t n = run.n;
        SplitMatvecArgs a;
        a.type = type;
        a.weight = d_weight;
        a.in_features = in_features;
        a.out_features = out_features;
        a.x_q8 = d_q;
        a.x_q8_scale = d_scale;
        a.num_tokens = n;
        a.y = d_y;
        // The matvec's Q4_0 offset from the given sums, or summed in the kernel (n = 3).
        a.x_q8_sum = run.is_mma || n != 3 ? d_sums : nullptr;
        QCOMPARE(run.is_mma ? matmul_split_mma_cuda(a, nullptr) : matvec_split_cuda(a, nullptr), cudaSuccess);
        std::vector<float> y(static_cast<size_t>(n * out_features));
        QCOMPARE(cudaMemcpy(y.data(), d_y, y.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        if (!run.is_mma) {
          a.num_tokens = 1;
          a.y = d_y1;
          QCOMPARE(matvec_split_cuda(a, nullptr), cudaSuccess);
          std::vector<float> y1(static_cast<size_t>(out_features));
          QCOMPARE(cudaMemcpy(y1.data(), d_y1, y1.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
          QVERIFY2(std::memcmp(y.data(), y1.data(), y1.size() * sizeof(float)) == 0, "token 0 depends on its batch");
        }
        const int64_t row_step = n > kSplitMaxTokens && out_features > 100 ? 13 : 1;
        const QString mismatch =
            test::q8_product_mismatch(type, gguf.data(), in_features, out_features, q.data(), scale.data(), n, y.data(),
                                      nullptr, row_step, run.is_mma ? "tensor cores" : "matvec");
        QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
      }
      // One launch for three matrices (matvec_split_group_cuda, as the engine runs q, k and v):
      // the first rows repacked as a matrix of their own, the whole matrix, and those rows again
      // with a bias; each part's output bit for bit what its own launch gives.
      {
        const int64_t head_rows = out_features == 7 ? 3 : 1030;
        std::vector<uint8_t> head(gguf.size() / static_cast<size_t>(out_features) * static_cast<size_t>(head_rows));
        QVERIFY(repack_split_blocks(type, gguf.data(), head_rows, in_features, head.data()));
        const std::vector<float> bias = test::random_floats(static_cast<size_t>(head_rows), rng);
        const size_t floats = static_cast<size_t>(kSplitMaxTokens * (out_features + 2 * head_rows));
        uint8_t* d_head = nullptr;
        float *d_bias = nullptr, *d_alone = nullptr, *d_grouped = nullptr;
        QCOMPARE(cudaMalloc(&d_head, head.size()), cudaSuccess);
        QCOMPARE(cudaMalloc(&d_bias, bias.size() * sizeof(float)), cudaSuccess);
        QCOMPARE(cudaMalloc(&d_alone, floats * sizeof(float)), cudaSuccess);
        QCOMPARE(cudaMalloc(&d_grouped, floats * sizeof(float)), cudaSuccess);
        QCOMPARE(cudaMemcpy(d_head, head.data(), head.size(), cudaMemcpyHostToDevice), cudaSuccess);
        QCOMPARE(cudaMemcpy(d_bias, bias.data(), bias.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        for (const int64_t n : {int64_t{1}, kSplitMaxTokens}) {
          SplitMatvecArgs parts[3];
          const void* weights[3] = {d_head, d_weight, d_head};
          const int64_t rows[3] = {head_rows, out_features, head_rows};
          int64_t offset = 0;
          for (int p = 0; p < 3; ++p) {
            parts[p].type = type;
            parts[p].weight = weights[p];
            parts[p].in_features = in_features;
            parts[p].out_features = rows[p];
            parts[p].x_q8 = d_q;
            parts[p].x_q8_scale = d_scale;
            parts[p].num_tokens = n;
            parts[p].bias = p == 2 ? d_bias : nullptr;
            parts[p].y = d_alone + offset;
            QCOMPARE(matvec_split_cuda(parts[p], nullptr), cudaSuccess);
            parts[p].y = d_grouped + offset;
            offset += n * rows[p];
          }
          QCOMPARE(matvec_split_group_cuda(parts, 3, nullptr), cudaSuccess);
          std::vector<float> alone(static_cast<size_t>(offset)), grouped(static_cast<size_t>(offset));
          QCOMPARE(cudaMemcpy(alone.data(), d_alone, alone.size() * sizeof(float), cudaMemcpyDeviceToHost),
                   cudaSuccess);
          QCOMPARE(cudaMemcpy(grouped.data(), d_grouped, grouped.size() * sizeof(float), cudaMemcpyDeviceToHost),
                   cudaSuccess);
          QVERIFY2(std::memcmp(alone.data(), grouped.data(), alone.size() * sizeof(float)) == 0,
                   qPrintable(QStringLiteral("%1 tokens: the grouped launch differs from the parts' own").arg(n)));
          parts[1].num_tokens = n == 1 ? 2 : 1;  // parts must agree
          QCOMPARE(matvec_split_group_cuda(parts, 3, nullptr), cudaErrorInvalidValue);
        }
        for (void* p : {static_cast<void*>(d_head), static_cast<void*>(d_bias), static_cast<void*>(d_alone),
                        static_cast<void*>(d_grouped)}) {
          cudaFree(p);
        }
      }
      QCOMPARE(dequantize_split_f16_cuda(type, d_weight, d_f16, out_features, in_features, nullptr), cudaSuccess);
      std::vector<uint16_t> f16(num_values);
      QCOMPARE(cudaMemcpy(f16.data(), d_f16, num_values * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (const void* p :
           {static_cast<const void*>(d_weight), static_cast<const void*>(d_x), static_cast<const void*>(d_y),
            static_cast<const void*>(d_y1), static_cast<const void*>(d_scale), static_cast<const void*>(d_q),
            static_cast<const void*>(d_f16), static_cast<const void*>(d_sums)}) {
        cudaFree(const_cast<void*>(p));
      }
      std::vector<float> reference(num_values);
      QVERIFY(dequantize_row_ref(type, gguf.data(), reference.data(), static_cast<int64_t>(num_values)));
      for (size_t i = 0; i < num_values; ++i) {
        QVERIFY2(f16[i] == f32_to_fp16(reference[i]), qPrintable(QStringLiteral("f16 value %1").arg(i)));
      }
    }
  }

  // One launch for three F16 / BF16 / F32 matrices, or Q4_K on int8 activations, on the same x
  // (matvec_group_cuda, as the engine runs q, k and v), llama-3-8b's q, k and v shapes: each
  // part's output bit for bit what its own matvec_cuda gives, with a bias on one part.
  void group_matches_single_launches_data() {
    QTest::addColumn<int>("type_id");
    QTest::newRow("F16") << static_cast<int>(GgmlType::F16);
    QTest::newRow("BF16") << static_cast<int>(GgmlType::BF16);
    QTest::newRow("F32") << static_cast<int>(GgmlType::F32);
    QTest::newRow("Q4_K") << static_cast<int>(GgmlType::Q4_K);  // on int8 activations
  }
  void group_matches_single_launches() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    const bool is_q8 = type == GgmlType::Q4_K;
    std::mt19937 rng(static_cast<uint32_t>(type_id) + 91u);
    const int64_t in_features = 4096, rows[3] = {4096, 1024, 1023};
    const std::vector<float> x =
        test::random_floats(static_cast<size_t>(kCudaMatvecMaxTokens * in_features), rng, 1.0f);
    const std::vector<float> bias = test::random_floats(static_cast<size_t>(rows[2]), rng);
    std::vector<void*> allocations;
    auto upload = [&](const void* data, size_t bytes) -> void* {
      void* d = nullptr;
      if (cudaMalloc(&d, bytes) != cudaSuccess) return nullptr;
      allocations.push_back(d);
      if (data != nullptr && cudaMemcpy(d, data, bytes, cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
      return d;
    };
    auto* d_x = static_cast<float*>(upload(x.data(), x.size() * sizeof(float)));
    auto* d_bias = static_cast<float*>(upload(bias.data(), bias.size() * sizeof(float)));
    auto* d_xq = static_cast<int8_t*>(upload(nullptr, x.size()));
    auto* d_xd = static_cast<float*>(upload(nullptr, x.size() / 32 * sizeof(float)));
    QVERIFY(d_x && d_xq && d_xd);
    QCOMPARE(quantize_x_q8_cuda(d_x, static_cast<int64_t>(x.size()), d_xq, d_xd, nullptr), cudaSuccess);
    const void* d_weights[3] = {};
    for (int p = 0; p < 3; ++p) {
      const std::vector<uint8_t> bytes = test::random_tensor_bytes(type, rows[p], in_features, rng, 0.05f);
      d_weights[p] = upload(bytes.data(), bytes.size());
      QVERIFY(d_weights[p] != nullptr);
    }
    const size_t floats = static_cast<size_t>(kCudaMatvecMaxTokens * (rows[0] + rows[1] + rows[2]));
    auto* d_alone = static_cast<float*>(upload(nullptr, floats * sizeof(float)));
    auto* d_grouped = static_cast<float*>(upload(nullptr, floats * sizeof(float)));
    QVERIFY(d_x && d_bias && d_alone && d_grouped);
    for (const int64_t n : {int64_t{1}, int64_t{3}, kCudaMatvecMaxTokens}) {
      MatvecCudaArgs parts[3];
      int64_t offset = 0;
      for (int p = 0; p < 3; ++p) {
        parts[p].type = type;
        parts[p].weight = d_weights[p];
        parts[p].in_features = in_features;
        parts[p].out_features = rows[p];
        parts[p].x = d_x;
        parts[p].num_tokens = n;
        parts[p].bias = p == 2 ? d_bias : nullptr;
        if (is_q8) {
          parts[p].x_q8 = d_xq;
          parts[p].x_q8_scale = d_xd;
        }
        parts[p].y = d_alone + offset;
        QCOMPARE(matvec_cuda(parts[p], nullptr), cudaSuccess);
        parts[p].y = d_grouped + offset;
        offset += n * rows[p];
      }
      QCOMPARE(matvec_group_cuda(parts, 3, nullptr), cudaSuccess);
      std::vector<float> alone(static_cast<size_t>(offset)), grouped(static_cast<size_t>(offset));
      QCOMPARE(cudaMemcpy(alone.data(), d_alone, alone.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      QCOMPARE(cudaMemcpy(grouped.data(), d_grouped, grouped.size() * sizeof(float), cudaMemcpyDeviceToHost),
               cudaSuccess);
      QVERIFY2(std::memcmp(alone.data(), grouped.data(), alone.size() * sizeof(float)) == 0,
               qPrintable(QStringLiteral("%1 tokens: the grouped launch differs from the parts' own").arg(n)));
    }
    for (void* d : allocations) cudaFree(d);
  }

  void rejects_bad_arguments_on_the_device() {
    uint8_t* d_weight = nullptr;
    float* d_io = nullptr;
    CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_weight), 4096));
    CUDA_VERIFY(cudaMalloc(reinterpret_cast<void**>(&d_io), 4096 * sizeof(float)));
    MatvecCudaArgs args;
    args.type = GgmlType::Q4_0;
    args.weight = d_weight;
    args.in_features = 64;
    args.out_features = 16;
    args.x = d_io;
    args.num_tokens = 1;
    args.y = d_io + 1024;
    QCOMPARE(matvec_cuda(args, nullptr), cudaSuccess);
    CUDA_VERIFY(cudaDeviceSynchronize());
    MatvecCudaArgs bad = args;
    bad.x = d_io + 1;  // not 16-byte aligned
    QCOMPARE(matvec_cuda(bad, nullptr), cudaErrorInvalidValue);
    bad = args;
    bad.in_features = 48;
    QCOMPARE(matvec_cuda(bad, nullptr), cudaErrorInvalidValue);
    bad = args;
    bad.num_tokens = 9;
    QCOMPARE(matvec_cuda(bad, nullptr), cudaErrorInvalidValue);
    bad = args;
    bad.type = GgmlType::Q3_K;
    bad.in_features = 256;
    QCOMPARE(matvec_cuda(bad, nullptr), cudaErrorInvalidValue);
    QCOMPARE(dequantize_rows_f16_cuda(GgmlType::Q4_0, d_weight, nullptr, 2, 32, nullptr), cudaErrorInvalidValue);
    QCOMPARE(cudaGetLastError(), cudaSuccess);  // refusals launch nothing and leave no error
    cudaFree(d_weight);
    cudaFree(d_io);
  }
};

QTEST_APPLESS_MAIN(TestCudaMatvec)
#include "test_cuda_matvec.moc"
