// matvec_cuda and dequantize_rows_f16_cuda, launchers and device code, run on CPU fibers
// (cuda_emulation_warps/, sources built by cuda_emulated_matvec.cpp) against the CPU reference:
// every type, each load width, several tiles, 1..8 tokens, bias, odd row counts, batch
// invariance. Runs on any machine; the GPU itself is tested by test_cuda_matvec.
#include "iwb/kernels/cuda/dequantize_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/cuda/matvec_plan.h"
#include "iwb/kernels/cuda/split_blocks_cuda.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/quantize.h"
#include "q8_input_reference.h"
#include "random_tensors.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace iwb;

namespace {

std::vector<GgmlType> all_types() {
  return {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
          GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
}

QString type_name(GgmlType type) {
  const std::string_view name = ggml_type_name(type);
  return QString::fromUtf8(name.data(), static_cast<int>(name.size()));
}

// A buffer whose data() is 16-byte aligned (what cudaMalloc guarantees and the kernels assume).
template <typename T>
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n, T fill = T{}) : storage(n + 64 / sizeof(T), fill) {}
  T* data() {
    const auto p = reinterpret_cast<uintptr_t>(storage.data() + 16 / sizeof(T));  // room before, too
    return reinterpret_cast<T*>((p + 15) & ~uintptr_t{15});
  }
  std::vector<T> storage;
};

// Weights from the reference quantizer (realistic blocks) or random block bytes (every bit pattern).
std::vector<uint8_t> make_weights(GgmlType type, int64_t rows, int64_t cols, bool use_quantizer, std::mt19937& rng) {
  if (!use_quantizer) return test::random_tensor_bytes(type, rows, cols, rng, 0.05f);
  const size_t row_bytes = *ggml_row_bytes(type, cols);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> values = test::random_floats(static_cast<size_t>(cols), rng, 0.05f);
    if (!quantize_row_ref(type, values.data(), bytes.data() + r * row_bytes, cols)) return {};
  }
  return bytes;
}

}  // namespace

class TestCudaMatvecEmulated : public QObject {
  Q_OBJECT

 private slots:
  void matvec_matches_reference_data() {
    QTest::addColumn<int>("type_id");
    for (GgmlType type : all_types())
      QTest::newRow(std::string(ggml_type_name(type)).c_str()) << static_cast<int>(type);
  }

  void matvec_matches_reference() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 31u + 7u);
    // Per block size: a short row (2- or 4-byte loads, or the scalar float kernel) and a long
    // one (16-byte loads over several tiles / unrolled steps).
    const int64_t block_size = ggml_type_traits(type).block_size;
    const std::vector<int64_t> lengths = block_size == 1    ? std::vector<int64_t>{37, 4104}
                                         : block_size == 32 ? std::vector<int64_t>{96, 4160}
                                                            : std::vector<int64_t>{1536, 4352};
    for (int64_t in_features : lengths) {
      const int64_t out_features = 5;  // three thread blocks, the last with one row
      const std::vector<uint8_t> bytes = make_weights(type, out_features, in_features, in_features == lengths[0], rng);
      QVERIFY(!bytes.empty());
      std::vector<float> w(static_cast<size_t>(out_features * in_features));
      QVERIFY(dequantize_row_ref(type, bytes.data(), w.data(), out_features * in_features));
      const std::vector<float> bias = test::random_floats(static_cast<size_t>(out_features), rng);
      AlignedBuffer<float> x(static_cast<size_t>(kCudaMatvecMaxTokens * in_features));
      const std::vector<float> x_values = test::random_floats(x.storage.size(), rng);
      std::memcpy(x.data(), x_values.data(), sizeof(float) * static_cast<size_t>(kCudaMatvecMaxTokens * in_features));
      AlignedBuffer<uint8_t> weight(bytes.size() + 4);
      // (weight base offset, tokens): 16-byte-aligned base with 1, 2 and 8 tokens, then 2- and
      // 4-byte aligned bases (F32 needs 4).
      const std::pair<int, int64_t> runs[] = {{0, 1}, {0, 2}, {0, 8}, {type == GgmlType::F32 ? 4 : 2, 3}, {4, 1}};
      std::vector<float> y_one_token;  // token 0 of the first (1-token) run
      for (const auto& [offset, num_tokens] : runs) {
        std::memcpy(weight.data() + offset, bytes.data(), bytes.size());
        const bool with_bias = num_tokens != 2;
        AlignedBuffer<float> y(static_cast<size_t>(kCudaMatvecMaxTokens * out_features + 8), NAN);
        MatvecCudaArgs args;
        args.type = type;
        args.weight = weight.data() + offset;
        args.in_features = in_features;
        args.out_features = out_features;
        args.x = x.data();
        args.num_tokens = num_tokens;
        args.y = y.data();
        args.bias = with_bias ? bias.data() : nullptr;
        QCOMPARE(matvec_cuda(args, nullptr), cudaSuccess);
        for (int64_t t = 0; t < num_tokens; ++t) {
          const float* xt = x.data() + t * in_features;
          for (int64_t o = 0; o < out_features; ++o) {
            double expected = with_bias ? bias[static_cast<size_t>(o)] : 0.0, max_w = 0, sum_abs_x = 0;
            for (int64_t i = 0; i < in_features; ++i) {
              expected += static_cast<double>(w[static_cast<size_t>(o * in_features + i)]) * xt[i];
              max_w = std::max(max_w, std::fabs(static_cast<double>(w[static_cast<size_t>(o * in_features + i)])));
              sum_abs_x += std::fabs(static_cast<double>(xt[i]));
            }
            const double tolerance = 1e-5 * max_w * sum_abs_x + 1e-6 * std::fabs(expected);
            const float got = y.data()[t * out_features + o];
            if (!(std::fabs(got - expected) <= tolerance)) {
              QFAIL(qPrintable(QStringLiteral("%1 in=%2 offset=%3 tokens=%4: y[%5][%6] = %7, reference %8")
                                   .arg(type_name(type))
                                   .arg(in_features)
                                   .arg(offset)
                                   .arg(num_tokens)
                                   .arg(t)
                                   .arg(o)
                                   .arg(got, 0, 'g', 9)
                                   .arg(expected, 0, 'g', 9)));
            }
          }
        }
        // Batch invariance: with the same bias, token 0 comes out bit for bit as in a 1-token call.
        if (offset == 0 && num_tokens == 1) y_one_token.assign(y.data(), y.data() + out_features);
        if (offset == 0 && num_tokens == 8) {
          QVERIFY(std::memcmp(y.data(), y_one_token.data(), sizeof(float) * static_cast<size_t>(out_features)) == 0);
        }
        for (int64_t i = num_tokens * out_features; i < kCudaMatvecMaxTokens * out_features + 8; ++i) {
          QVERIFY2(std::isnan(y.data()[i]), "written past the outputs");
        }
      }
    }
  }

  // Large quantized matrices with several tokens take the wide blocks (plan: 4 rows, one token
  // keeps 2): rows past the last full block, 1 and 3 tokens, against the reference and bit for
  // bit between the two widths (token 0 of 3 tokens equals the 1-token call: each row's sums
  // run alike).
  void wide_blocks_match_reference_data() {
    QTest::addColumn<int>("type_id");
    for (GgmlType type : all_types()) {
      if (ggml_type_traits(type).block_size > 1)
        QTest::newRow(std::string(ggml_type_name(type)).c_str()) << static_cast<int>(type);
    }
  }

  void wide_blocks_match_reference() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 17u + 3u);
    const int64_t in_features = 4096, out_features = kMatvecQuantWideMinRows + 5;
    const std::vector<uint8_t> bytes = test::random_tensor_bytes(type, out_features, in_features, rng, 0.05f);
    std::vector<float> w(static_cast<size_t>(out_features * in_features));
    QVERIFY(dequantize_row_ref(type, bytes.data(), w.data(), out_features * in_features));
    AlignedBuffer<uint8_t> weight(bytes.size());
    std::memcpy(weight.data(), bytes.data(), bytes.size());
    AlignedBuffer<float> x(static_cast<size_t>(3 * in_features));
    const std::vector<float> x_values = test::random_floats(static_cast<size_t>(3 * in_features), rng);
    std::memcpy(x.data(), x_values.data(), sizeof(float) * x_values.size());
    std::vector<float> y_one_token;
    for (int64_t num_tokens : {int64_t{1}, int64_t{3}}) {
      MatvecCudaArgs args;
      args.type = type;
      args.weight = weight.data();
      args.in_features = in_features;
      args.out_features = out_features;
      args.x = x.data();
      args.num_tokens = num_tokens;
      AlignedBuffer<float> y(static_cast<size_t>(num_tokens * out_features), NAN);
      args.y = y.data();
      QCOMPARE(plan_matvec_cuda(args).rows_per_block,
               num_tokens == 1 ? kMatvecRowsPerBlock : kMatvecQuantWideRowsManyTokens);
      QCOMPARE(matvec_cuda(args, nullptr), cudaSuccess);
      for (int64_t t = 0; t < num_tokens; ++t) {
        const float* xt = x.data() + t * in_features;
        for (int64_t o = 0; o < out_features; ++o) {
          double expected = 0, max_w = 0, sum_abs_x = 0;
          for (int64_t i = 0; i < in_features; ++i) {
            const double wi = w[static_cast<size_t>(o * in_features + i)];
            expected += wi * xt[i];
            max_w = std::max(max_w, std::fabs(wi));
            sum_abs_x += std::fabs(static_cast<double>(xt[i]));
          }
          const double tolerance = 1e-5 * max_w * sum_abs_x + 1e-6 * std::fabs(expected);
          const float got = y.data()[t * out_features + o];
          if (!(std::fabs(got - expected) <= tolerance)) {
            QFAIL(qPrintable(QStringLiteral("%1 tokens=%2: y[%3][%4] = %5, reference %6")
                                 .arg(type_name(type))
                                 .arg(num_tokens)
                                 .arg(t)
                                 .arg(o)
                                 .arg(got, 0, 'g', 9)
                                 .arg(expected, 0, 'g', 9)));
          }
        }
      }
      if (num_tokens == 1)
        y_one_token.assign(y.data(), y.data() + out_features);
      else
        QVERIFY(std::memcmp(y.data(), y_one_token.data(), sizeof(float) * static_cast<size_t>(out_features)) == 0);
    }
  }

  // One token of Q4_0 / Q8_0 / Q4_K / Q6_K against int8 activations: quantize_x_q8_cuda bit for bit as
  // quantize_x_q8_block_ref, then the integer products against the same sum in double over the
  // blocks' integers; each load width (96: 2-byte, 4160: 4-byte and several tiles, 4096:
  // 16-byte), odd row counts, a bias; arguments it must refuse.
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
    QVERIFY(cuda_matvec_takes_q8_input(type));
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 13u + 5u);
    // K-quants' 256-value blocks: one block; 6 (the default model's 1536: a warp a row for Q4_K,
    // each lane more than one piece); 17 (a thread block a row, each thread more than one piece); a
    // real row. The 32-value types: 2-byte loads (96), 4-byte loads over several tiles (4160), 16-byte.
    const bool is_k = type == GgmlType::Q4_K || type == GgmlType::Q6_K;
    const std::vector<int64_t> k_inputs = {256, 1536, 4352, 4096}, legacy_inputs = {96, 4160, 4096};
    for (const int64_t in_features : (is_k ? k_inputs : legacy_inputs)) {
      const int64_t out_features = in_features == 4096 ? 37 : 5;
      const std::vector<uint8_t> bytes = test::random_tensor_bytes(type, out_features, in_features, rng, 0.05f);
      AlignedBuffer<uint8_t> weight(bytes.size());
      std::memcpy(weight.data(), bytes.data(), bytes.size());
      AlignedBuffer<float> x(static_cast<size_t>(in_features));
      const std::vector<float> x_values = test::random_floats(static_cast<size_t>(in_features), rng, 2.0f);
      std::memcpy(x.data(), x_values.data(), sizeof(float) * x_values.size());
      x.data()[3] = 0.0f;
      for (int j = 32; j < 64 && j < in_features; ++j) x.data()[j] = 0.0f;  // a block of zeros: d = 0

      const int64_t num_blocks = in_features / 32;
      AlignedBuffer<int8_t> q(static_cast<size_t>(in_features), 99);
      AlignedBuffer<float> d(static_cast<size_t>(num_blocks), NAN);
      QCOMPARE(quantize_x_q8_cuda(x.data(), in_features, q.data(), d.data(), nullptr), cudaSuccess);
      for (int64_t b = 0; b < num_blocks; ++b) {
        int8_t ref_q[32];
        float ref_d = 0;
        quantize_x_q8_block_ref(x.data() + 32 * b, ref_q, &ref_d);
        QCOMPARE(d.data()[b], ref_d);
        QVERIFY(std::memcmp(q.data() + 32 * b, ref_q, 32) == 0);
      }

      const std::vector<float> bias = test::random_floats(static_cast<size_t>(out_features), rng);
      AlignedBuffer<float> y(static_cast<size_t>(out_features + 8), NAN);
      MatvecCudaArgs args;
      args.type = type;
      args.weight = weight.data();
      args.in_features = in_features;
      args.out_features = out_features;
      args.x = x.data();
      args.num_tokens = 1;
      args.y = y.data();
      args.bias = bias.data();
      args.x_q8 = q.data();
      args.x_q8_scale = d.data();
      QVERIFY(plan_matvec_cuda(args).uses_q8_input);
      QCOMPARE(matvec_cuda(args, nullptr), cudaSuccess);
      const size_t row_bytes = *ggml_row_bytes(type, in_features);
      for (int64_t o = 0; o < out_features; ++o) {
        const test::Q8InputReference ref = test::q8_input_reference(
            type, bytes.data() + static_cast<size_t>(o) * row_bytes, q.data(), d.data(), num_blocks);
        const double expected = bias[static_cast<size_t>(o)] + ref.value, magnitude = ref.magnitude;
        const float got = y.data()[o];
        QVERIFY2(std::fabs(got - expected) <= 1e-5 * magnitude + 1e-6 * std::fabs(expected),
                 qPrintable(QStringLiteral("%1 in=%2: y[%3] = %4, reference %5")
                                .arg(type_name(type))
                                .arg(in_features)
                                .arg(o)
                                .arg(got, 0, 'g', 9)
                                .arg(expected, 0, 'g', 9)));
      }
      for (int64_t i = out_features; i < out_features + 8; ++i)
        QVERIFY2(std::isnan(y.data()[i]), "written past the outputs");

      // Refused: several tokens (but Q4_K), one array missing, a misaligned q.
      MatvecCudaArgs bad = args;
      bad.num_tokens = 2;
      if (type != GgmlType::Q4_K) QCOMPARE(matvec_cuda(bad, nullptr), cudaErrorInvalidValue);
      bad = args;
      bad.x_q8_scale = nullptr;
      QCOMPARE(matvec_cuda(bad, nullptr), cudaErrorInvalidValue);
      bad = args;
      bad.x_q8 = q.data() + 4;
      QCOMPARE(matvec_cuda(bad, nullptr), cudaErrorInvalidValue);
      if (type == GgmlType::Q4_K) {
        // Several tokens (3 and 8) sharing each weight load, each against its own reference.
        for (const int64_t n : {int64_t{3}, int64_t{8}}) {
          AlignedBuffer<float> xs(static_cast<size_t>(n * in_features));
          const std::vector<float> values = test::random_floats(static_cast<size_t>(n * in_features), rng, 2.0f);
          std::memcpy(xs.data(), values.data(), sizeof(float) * values.size());
          AlignedBuffer<int8_t> qs(static_cast<size_t>(n * in_features));
          AlignedBuffer<float> ds(static_cast<size_t>(n * num_blocks));
          QCOMPARE(quantize_x_q8_cuda(xs.data(), n * in_features, qs.data(), ds.data(), nullptr), cudaSuccess);
          AlignedBuffer<float> ys(static_cast<size_t>(n * out_features + 8), NAN);
          MatvecCudaArgs many = args;
          many.x = xs.data();
          many.num_tokens = n;
          many.y = ys.data();
          many.x_q8 = qs.data();
          many.x_q8_scale = ds.data();
          QVERIFY(plan_matvec_cuda(many).uses_q8_input);
          QCOMPARE(matvec_cuda(many, nullptr), cudaSuccess);
          const QString mismatch = test::q8_product_mismatch(type, bytes.data(), in_features, out_features, qs.data(),
                                                             ds.data(), n, ys.data(), bias.data(), 1, "Q4_K");
          QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
          for (int64_t i = n * out_features; i < n * out_features + 8; ++i)
            QVERIFY2(std::isnan(ys.data()[i]), "written past the outputs");
        }
        bad = args;
        bad.num_tokens = kCudaMatvecMaxTokens + 1;
        QCOMPARE(matvec_cuda(bad, nullptr), cudaErrorInvalidValue);
        // Q4_K rows that cannot take 16-byte loads decode to f32 as without x_q8 (same result
        // up to the activations' rounding, which the f32 path does not have).
        AlignedBuffer<uint8_t> shifted(bytes.size() + 4);
        std::memcpy(shifted.data() + 4, bytes.data(), bytes.size());
        MatvecCudaArgs narrow = args;
        narrow.weight = shifted.data() + 4;
        narrow.bias = nullptr;
        QVERIFY(!plan_matvec_cuda(narrow).uses_q8_input);
        QCOMPARE(matvec_cuda(narrow, nullptr), cudaSuccess);
        std::vector<float> row(static_cast<size_t>(in_features));
        for (int64_t o = 0; o < out_features; ++o) {
          dequantize_row_ref(type, bytes.data() + static_cast<size_t>(o) * row_bytes, row.data(), in_features);
          double expected = 0, magnitude = 0;
          for (int64_t i = 0; i < in_features; ++i) {
            expected += static_cast<double>(row[static_cast<size_t>(i)]) * x.data()[i];
            magnitude += std::fabs(static_cast<double>(row[static_cast<size_t>(i)]) * x.data()[i]);
          }
          QVERIFY2(std::fabs(y.data()[o] - expected) <= 1e-5 * magnitude,
                   qPrintable(QStringLiteral("Q4_K in=%1 on 4-byte loads: y[%2] = %3, reference %4")
                                  .arg(in_features)
                                  .arg(o)
                                  .arg(y.data()[o], 0, 'g', 9)
                                  .arg(expected, 0, 'g', 9)));
        }
      }
    }
    QVERIFY(!cuda_matvec_takes_q8_input(GgmlType::Q5_K));
    QCOMPARE(quantize_x_q8_cuda(nullptr, 32, nullptr, nullptr, nullptr), cudaErrorInvalidValue);
  }

  // Q4_0, Q8_0 and Q6_K in the GPU's split layout: the repacking round trip, the product of 1..8
  // tokens of int8 activations against the same double sum over the GGUF blocks (rows of one and
  // of several lane strides, odd row counts, a bias; each token's result independent of the
  // batch) and the f16 dequantization against the reference decoder. (Q6_K has no tensor-core
  // product: its rows of 256-value blocks here, 256 to 4096 values.)
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
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 3u + 41u);
    // Q6_K: one super-block (fewer units than lanes), five (160 units: lanes with 5 and 4), 4096.
    const std::vector<int64_t> widths =
        is_q6_k ? std::vector<int64_t>{256, 1280, 4096} : std::vector<int64_t>{64, 1056, 4096};
    for (const int64_t in_features : widths) {
      const int64_t out_features = in_features == widths[0]   ? 9
                                   : in_features == widths[1] ? 37
                                                              : 6,
                    blocks = in_features / 32;
      const std::vector<uint8_t> gguf = test::random_tensor_bytes(type, out_features, in_features, rng, 0.05f);
      AlignedBuffer<uint8_t> split(gguf.size(), 0xEE);
      QVERIFY(repack_split_blocks(type, gguf.data(), out_features, in_features, split.data()));
      std::vector<uint8_t> back(gguf.size());
      QVERIFY(unpack_split_blocks(type, split.data(), out_features, in_features, back.data()));
      QVERIFY(back == gguf);
      QVERIFY(!repack_split_blocks(type, gguf.data(), out_features, 48, split.data()));
      if (is_q6_k) QVERIFY(!repack_split_blocks(type, gguf.data(), out_features, 288, split.data()));

      // Activations for the tensor-core kernel's 64 tokens; the matvec takes the first 8.
      const int64_t tokens = kSplitMaxTokens, all_tokens = kSplitMmaMaxTokens;
      AlignedBuffer<float> x(static_cast<size_t>(all_tokens * in_features));
      const std::vector<float> x_values = test::random_floats(static_cast<size_t>(all_tokens * in_features), rng, 2.0f);
      std::memcpy(x.data(), x_values.data(), sizeof(float) * x_values.size());
      AlignedBuffer<int8_t> q(static_cast<size_t>(all_tokens * in_features), 99);
      AlignedBuffer<float> d(static_cast<size_t>(all_tokens * blocks), NAN);
      AlignedBuffer<int32_t> sums(static_cast<size_t>(all_tokens * blocks), -1);
      QCOMPARE(quantize_x_q8_cuda(x.data(), all_tokens * in_features, q.data(), d.data(), nullptr, sums.data()),
               cudaSuccess);
      for (int64_t b = 0; b < all_tokens * blocks; ++b) {
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += q.data()[b * 32 + j];
        QCOMPARE(sums.data()[b], sum);
      }
      const std::vector<float> bias = test::random_floats(static_cast<size_t>(out_features), rng);
      // The matvec with 1, 3 and 8 tokens; the tensor-core kernel with 64 (every column tile), 9
      // (a tile of 1) and 3, on rows past the last 16-row tile (37) and blocks that do not split
      // evenly over its 4 warps (33). Without a bias or the sums once each.
      struct Run {
        bool is_mma;
        int64_t n;
      };
      for (const Run run :
           {Run{false, 1}, Run{false, 3}, Run{false, tokens}, Run{true, all_tokens}, Run{true, 9}, Run{true, 3}}) {
        if (run.is_mma && is_q6_k) {
          SplitMatvecArgs refused;
          refused.type = type;
          QCOMPARE(matmul_split_mma_cuda(refused, nullptr), cudaErrorInvalidValue);
          continue;
        }
        const int64_t n = run.n;
        AlignedBuffer<float> y(static_cast<size_t>(n * out_features + 8), NAN);
        SplitMatvecArgs a;
        a.type = type;
        a.weight = split.data();
        a.in_features = in_features;
        a.out_features = out_features;
        a.x_q8 = q.data();
        a.x_q8_scale = d.data();
        a.num_tokens = n;
        a.y = y.data();
        a.bias = n == (run.is_mma ? 9 : 3) ? nullptr : bias.data();
        // The matvec's Q4_0 offset from the given sums, or summed in the kernel (n = 3).
        a.x_q8_sum = run.is_mma || n != 3 ? sums.data() : nullptr;
        QCOMPARE(run.is_mma ? matmul_split_mma_cuda(a, nullptr) : matvec_split_cuda(a, nullptr), cudaSuccess);
        const QString mismatch =
            test::q8_product_mismatch(type, gguf.data(), in_features, out_features, q.data(), d.data(), n, y.data(),
                                      a.bias, 1, run.is_mma ? "tensor cores" : "matvec");
        QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
        for (int64_t i = n * out_features; i < n * out_features + 8; ++i)
          QVERIFY2(std::isnan(y.data()[i]), "written past the outputs");
        if (!run.is_mma && n == tokens) {
          // Batch invariance: token 0 alone gave the same bits (same bias in both runs).
          AlignedBuffer<float> y1(static_cast<size_t>(out_features), NAN);
          a.num_tokens = 1;
          a.y = y1.data();
          QCOMPARE(matvec_split_cuda(a, nullptr), cudaSuccess);
          QVERIFY(std::memcmp(y1.data(), y.data(), sizeof(float) * static_cast<size_t>(out_features)) == 0);
        }
      }

      // One launch for three matrices (matvec_split_group_cuda, as the engine runs q, k and v):
      // the first rows repacked as a matrix of their own, the whole matrix, and those rows again
      // with a bias; each part's output bit for bit what its own launch gives.
      {
        const int64_t head_rows = (out_features + 1) / 2;
        AlignedBuffer<uint8_t> head(gguf.size() / static_cast<size_t>(out_features) * static_cast<size_t>(head_rows));
        QVERIFY(repack_split_blocks(type, gguf.data(), head_rows, in_features, head.data()));
        const size_t floats = static_cast<size_t>(tokens * (out_features + 2 * head_rows));
        AlignedBuffer<float> alone(floats, NAN), grouped(floats, NAN);
        for (const int64_t n : {int64_t{1}, int64_t{3}, tokens}) {
          SplitMatvecArgs parts[3];
          const void* weights[3] = {head.data(), split.data(), head.data()};
          const int64_t rows[3] = {head_rows, out_features, head_rows};
          int64_t offset = 0;
          for (int p = 0; p < 3; ++p) {
            parts[p].type = type;
            parts[p].weight = weights[p];
            parts[p].in_features = in_features;
            parts[p].out_features = rows[p];
            parts[p].x_q8 = q.data();
            parts[p].x_q8_scale = d.data();
            parts[p].x_q8_sum = n == 3 ? nullptr : sums.data();
            parts[p].num_tokens = n;
            parts[p].bias = p == 2 ? bias.data() : nullptr;
            parts[p].y = alone.data() + offset;
            QCOMPARE(matvec_split_cuda(parts[p], nullptr), cudaSuccess);
            parts[p].y = grouped.data() + offset;
            offset += n * rows[p];
          }
          QCOMPARE(matvec_split_group_cuda(parts, 3, nullptr), cudaSuccess);
          QVERIFY2(std::memcmp(alone.data(), grouped.data(), sizeof(float) * static_cast<size_t>(offset)) == 0,
                   qPrintable(QStringLiteral("%1 tokens: the grouped launch differs from the parts' own").arg(n)));
          QCOMPARE(matvec_split_group_cuda(parts, 2, nullptr), cudaSuccess);  // two parts: q and k alone
          parts[1].num_tokens = n == 1 ? 2 : 1;                               // the parts must agree
          QCOMPARE(matvec_split_group_cuda(parts, 3, nullptr), cudaErrorInvalidValue);
          QCOMPARE(matvec_split_group_cuda(parts, 0, nullptr), cudaErrorInvalidValue);
        }
      }

      SplitMatvecArgs bad;
      bad.type = type;
      bad.weight = split.data();
      bad.in_features = in_features;
      bad.out_features = out_features;
      bad.x_q8 = q.data();
      bad.x_q8_scale = d.data();
      bad.y = x.data();
      bad.num_tokens = tokens + 1;
      QCOMPARE(matvec_split_cuda(bad, nullptr), cudaErrorInvalidValue);
      bad.num_tokens = 1;
      bad.x_q8 = q.data() + 4;
      QCOMPARE(matvec_split_cuda(bad, nullptr), cudaErrorInvalidValue);
      if (is_q6_k) {  // rows that are not whole super-blocks
        bad.x_q8 = q.data();
        bad.in_features = in_features - 32;
        QCOMPARE(matvec_split_cuda(bad, nullptr), cudaErrorInvalidValue);
      }

      const size_t num_values = static_cast<size_t>(out_features * in_features);
      std::vector<float> reference(num_values);
      QVERIFY(dequantize_row_ref(type, gguf.data(), reference.data(), static_cast<int64_t>(num_values)));
      AlignedBuffer<uint16_t> f16(num_values + 8, 0xFFFF);
      QCOMPARE(dequantize_split_f16_cuda(type, split.data(), f16.data(), out_features, in_features, nullptr),
               cudaSuccess);
      for (size_t i = 0; i < num_values; ++i) {
        QVERIFY2(
            f16.data()[i] == f32_to_fp16(reference[i]),
            qPrintable(
                QStringLiteral("value %1: %2, reference %3").arg(i).arg(fp16_to_f32(f16.data()[i])).arg(reference[i])));
      }
      QCOMPARE(f16.data()[num_values], uint16_t{0xFFFF});
    }
  }

  // One launch for up to three F32 / F16 / BF16 matrices, or Q4_K matrices on int8 activations, on
  // the same x (matvec_group_cuda, as the engine runs q, k and v): each part's output bit for bit
  // what its own matvec_cuda gives, with parts of different heights (odd, one block's rows split
  // across a part's end) and a bias. Q4_K at 1536 inputs (a warp a row) and 4352 (a block a row).
  void group_matches_single_launches_data() {
    QTest::addColumn<int>("type_id");
    QTest::newRow("F16") << static_cast<int>(GgmlType::F16);
    QTest::newRow("BF16") << static_cast<int>(GgmlType::BF16);
    QTest::newRow("F32") << static_cast<int>(GgmlType::F32);
    QTest::newRow("Q4_K") << static_cast<int>(GgmlType::Q4_K);
  }
  void group_matches_single_launches() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    const bool is_q8 = type == GgmlType::Q4_K;
    std::mt19937 rng(static_cast<uint32_t>(type_id) + 77u);
    for (const int64_t in_features : is_q8 ? std::vector<int64_t>{1536, 4352} : std::vector<int64_t>{1056}) {
      const int64_t rows[3] = {7, 20, 3};
      const std::vector<float> x_values =
          test::random_floats(static_cast<size_t>(kCudaMatvecMaxTokens * in_features), rng, 1.0f);
      AlignedBuffer<float> x(x_values.size());
      std::memcpy(x.data(), x_values.data(), sizeof(float) * x_values.size());
      AlignedBuffer<int8_t> xq(x_values.size());
      AlignedBuffer<float> xd(x_values.size() / 32);
      if (is_q8)
        QCOMPARE(quantize_x_q8_cuda(x.data(), kCudaMatvecMaxTokens * in_features, xq.data(), xd.data(), nullptr),
                 cudaSuccess);
      std::vector<AlignedBuffer<uint8_t>> weights;
      for (const int64_t r : rows) {
        const std::vector<uint8_t> bytes = test::random_tensor_bytes(type, r, in_features, rng, 0.05f);
        weights.emplace_back(bytes.size());
        std::memcpy(weights.back().data(), bytes.data(), bytes.size());
      }
      const std::vector<float> bias = test::random_floats(static_cast<size_t>(rows[1]), rng);
      const size_t floats = static_cast<size_t>(kCudaMatvecMaxTokens * (rows[0] + rows[1] + rows[2]));
      AlignedBuffer<float> alone(floats, NAN), grouped(floats, NAN);
      for (const int64_t n : {int64_t{1}, int64_t{3}, kCudaMatvecMaxTokens}) {
        MatvecCudaArgs parts[3];
        int64_t offset = 0;
        for (int p = 0; p < 3; ++p) {
          parts[p].type = type;
          parts[p].weight = weights[static_cast<size_t>(p)].data();
          parts[p].in_features = in_features;
          parts[p].out_features = rows[p];
          parts[p].x = x.data();
          parts[p].num_tokens = n;
          parts[p].bias = p == 1 ? bias.data() : nullptr;
          if (is_q8) {
            parts[p].x_q8 = xq.data();
            parts[p].x_q8_scale = xd.data();
            QVERIFY(plan_matvec_cuda(parts[p]).uses_q8_input);
          }
          parts[p].y = alone.data() + offset;
          QCOMPARE(matvec_cuda(parts[p], nullptr), cudaSuccess);
          parts[p].y = grouped.data() + offset;
          offset += n * rows[p];
        }
        QCOMPARE(matvec_group_cuda(parts, 3, nullptr), cudaSuccess);
        QVERIFY2(std::memcmp(alone.data(), grouped.data(), sizeof(float) * static_cast<size_t>(offset)) == 0,
                 qPrintable(QStringLiteral("%1 in=%2, %3 tokens: the grouped launch differs from the parts' own")
                                .arg(type_name(type))
                                .arg(in_features)
                                .arg(n)));
        // Refused, launching nothing: parts that disagree, a part off the vectorised (or int8)
        // kernel, another type, no parts or too many.
        MatvecCudaArgs bad[3] = {parts[0], parts[1], parts[2]};
        bad[2].num_tokens = n == 1 ? 2 : 1;
        QCOMPARE(matvec_group_cuda_check(bad, 3), cudaErrorInvalidValue);
        bad[2] = parts[2];
        bad[2].weight = weights[2].data() + (type == GgmlType::F32 || is_q8 ? 4 : 2);  // not 16-byte aligned
        QCOMPARE(matvec_group_cuda(bad, 3, nullptr), cudaErrorInvalidValue);
        bad[2] = parts[2];
        bad[2].type = GgmlType::Q8_0;
        QCOMPARE(matvec_group_cuda_check(bad, 3), cudaErrorInvalidValue);
        if (is_q8) {  // another input, or none: not one op's products
          bad[2] = parts[2];
          bad[2].x_q8_scale = nullptr;
          bad[2].x_q8 = nullptr;
          QCOMPARE(matvec_group_cuda_check(bad, 3), cudaErrorInvalidValue);
          bad[2] = parts[2];
          bad[2].x_q8 = xq.data() + 16;
          QCOMPARE(matvec_group_cuda_check(bad, 3), cudaErrorInvalidValue);
        }
        QCOMPARE(matvec_group_cuda_check(parts, 0), cudaErrorInvalidValue);
        QCOMPARE(matvec_group_cuda_check(parts, kMatvecMaxParts + 1), cudaErrorInvalidValue);
        QCOMPARE(matvec_group_cuda_check(parts, 2), cudaSuccess);
      }
    }
  }

  void dequantize_f16_matches_reference_data() { matvec_matches_reference_data(); }

  void dequantize_f16_matches_reference() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    std::mt19937 rng(static_cast<uint32_t>(type_id) * 17u + 1u);
    const int64_t block_size = ggml_type_traits(type).block_size;
    const int64_t num_rows = 3, row_length = block_size == 1 ? 37 : 2 * block_size;  // 111 values: a partial group
    const std::vector<uint8_t> bytes = make_weights(type, num_rows, row_length, false, rng);
    const size_t num_values = static_cast<size_t>(num_rows * row_length);
    std::vector<float> reference(num_values);
    QVERIFY(dequantize_row_ref(type, bytes.data(), reference.data(), static_cast<int64_t>(num_values)));
    AlignedBuffer<uint8_t> src(bytes.size());
    std::memcpy(src.data(), bytes.data(), bytes.size());
    for (int dst_offset : {0, 1}) {  // 16-byte stores, then the scalar stores of a 2-byte aligned dst
      AlignedBuffer<uint16_t> dst(num_values + 8, 0xFFFF);
      uint16_t* out = dst.data() + dst_offset;
      QCOMPARE(dequantize_rows_f16_cuda(type, src.data(), out, num_rows, row_length, nullptr), cudaSuccess);
      for (size_t i = 0; i < num_values; ++i) {
        // One f16 step of slack where a contracted multiply-add moves a value across a rounding
        // boundary (as on the GPU); otherwise the reference value rounded to f16.
        const uint16_t expected = f32_to_fp16(reference[i]);
        const float step = std::fabs(fp16_to_f32(static_cast<uint16_t>(expected + 1)) - fp16_to_f32(expected));
        QVERIFY2(out[i] == expected || std::fabs(fp16_to_f32(out[i]) - fp16_to_f32(expected)) <= step,
                 qPrintable(QStringLiteral("%1 value %2: %3, reference %4")
                                .arg(type_name(type))
                                .arg(i)
                                .arg(fp16_to_f32(out[i]))
                                .arg(fp16_to_f32(expected))));
      }
      QCOMPARE(out[num_values], uint16_t{0xFFFF});
      QCOMPARE(out[-1], uint16_t{0xFFFF});
    }
  }
};

QTEST_APPLESS_MAIN(TestCudaMatvecEmulated)
#include "test_cuda_matvec_emulated.moc"
