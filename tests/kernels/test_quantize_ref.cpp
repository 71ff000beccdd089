// Reference quantizers: Q8_0 / Q4_0 on known blocks (ggml's rounding rules), quantize ->
// dequantize round trips on random rows of an odd number of blocks, and refused inputs.
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/quantize.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace iwb;

namespace {

constexpr int kNumBlocks = 37;  // odd, so no accidental pairing of blocks
constexpr int kNumElements = kNumBlocks * 32;

std::vector<float> random_row(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> magnitude(0.01f, 40.0f);
  std::vector<float> x(kNumElements);
  // Each block gets its own scale so blocks do not all look alike.
  for (int b = 0; b < kNumBlocks; ++b) {
    const float scale = magnitude(rng);
    for (int j = 0; j < 32; ++j) x[static_cast<size_t>(32 * b + j)] = normal(rng) * scale;
  }
  return x;
}

}  // namespace

class TestQuantizeRef : public QObject {
  Q_OBJECT

 private slots:
  void q8_0_known_block() {
    // amax = 127 makes d exactly 1, so the quants are x rounded half away from zero.
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;  x[1] = -127.0f; x[2] = 2.4f; x[3] = -2.6f;
    x[4] = 0.5f;    x[5] = -0.5f;   x[6] = 1.5f; x[7] = 100.49f;
    BlockQ8_0 block{};
    QVERIFY(quantize_row_q8_0_ref(x.data(), &block, 32));
    QCOMPARE(block.d, uint16_t{0x3C00});
    const int expected[8] = {127, -127, 2, -3, 1, -1, 2, 100};
    for (int j = 0; j < 8; ++j) QCOMPARE(static_cast<int>(block.qs[j]), expected[j]);
    for (int j = 8; j < 32; ++j) QCOMPARE(static_cast<int>(block.qs[j]), 0);
  }

  void q4_0_known_block() {
    // The extreme is -8, so d = -8 / -8 = 1 and q = min(15, trunc(x + 8.5)).
    std::vector<float> x(32, 0.0f);
    x[0] = -8.0f;  x[1] = 7.0f;   x[2] = 7.6f;  x[3] = 0.4f;
    x[4] = 0.5f;   x[5] = -0.5f;  x[16] = 3.2f; x[17] = -3.7f;
    BlockQ4_0 block{};
    QVERIFY(quantize_row_q4_0_ref(x.data(), &block, 32));
    QCOMPARE(block.d, uint16_t{0x3C00});
    // low nibble: elements 0..15; high nibble: elements 16..31 (zeros -> q = 8).
    const int low[6] = {0, 15, 15 /* 16 clamped */, 8, 9 /* tie goes up */, 8};
    const int high[2] = {11, 4};
    for (int j = 0; j < 6; ++j) QCOMPARE(block.qs[j] & 0x0F, low[j]);
    QCOMPARE(block.qs[0] >> 4, high[0]);
    QCOMPARE(block.qs[1] >> 4, high[1]);
    for (int j = 2; j < 16; ++j) QCOMPARE(block.qs[j] >> 4, 8);
  }

  void q4_0_positive_extreme_gives_negative_scale() {
    std::vector<float> x(32, 1.0f);
    x[9] = 4.0f;  // the extreme is positive: d = 4 / -8 = -0.5, and x = 4 maps to q = 0
    BlockQ4_0 block{};
    QVERIFY(quantize_row_q4_0_ref(x.data(), &block, 32));
    QCOMPARE(fp16_to_f32(block.d), -0.5f);
    std::vector<float> y(32);
    QVERIFY(dequantize_row_ref(GgmlType::Q4_0, &block, y.data(), 32));
    QCOMPARE(y[9], 4.0f);
    QCOMPARE(y[0], 1.0f);
  }

  void zero_blocks_stay_zero() {
    const std::vector<float> zeros(64, 0.0f);
    BlockQ8_0 q8[2];
    BlockQ4_0 q4[2];
    QVERIFY(quantize_row_q8_0_ref(zeros.data(), q8, 64));
    QVERIFY(quantize_row_q4_0_ref(zeros.data(), q4, 64));
    std::vector<float> y(64, 1.0f);
    QVERIFY(dequantize_row_ref(GgmlType::Q8_0, q8, y.data(), 64));
    for (float v : y) QCOMPARE(v, 0.0f);
    y.assign(64, 1.0f);
    QVERIFY(dequantize_row_ref(GgmlType::Q4_0, q4, y.data(), 64));
    for (float v : y) QCOMPARE(v, 0.0f);
  }

  void q8_0_round_trip_error_is_within_half_a_step() {
    const std::vector<float> x = random_row(8);
    std::vector<BlockQ8_0> blocks(kNumBlocks);
    QVERIFY(quantize_row_q8_0_ref(x.data(), blocks.data(), kNumElements));
    std::vector<float> y(kNumElements);
    QVERIFY(dequantize_row_ref(GgmlType::Q8_0, blocks.data(), y.data(), kNumElements));
    for (int b = 0; b < kNumBlocks; ++b) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(32 * b + j)]));
      const float step = amax / 127.0f;
      // Half a step of rounding, plus |q| <= 127 times the fp16 rounding of d (2^-11 relative).
      const float bound = step * (0.5f + 127.0f * 0x1p-11f) * 1.0001f;
      for (int j = 0; j < 32; ++j) {
        const size_t i = static_cast<size_t>(32 * b + j);
        QVERIFY2(std::fabs(x[i] - y[i]) <= bound,
                 qPrintable(QStringLiteral("element %1: %2 -> %3, bound %4").arg(i).arg(x[i]).arg(y[i]).arg(bound)));
      }
    }
  }

  void q4_0_round_trip_error_is_within_one_step() {
    const std::vector<float> x = random_row(4);
    std::vector<BlockQ4_0> blocks(kNumBlocks);
    QVERIFY(quantize_row_q4_0_ref(x.data(), blocks.data(), kNumElements));
    std::vector<float> y(kNumElements);
    QVERIFY(dequantize_row_ref(GgmlType::Q4_0, blocks.data(), y.data(), kNumElements));
    double sum_sq_error = 0.0, sum_sq = 0.0;
    for (int b = 0; b < kNumBlocks; ++b) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(32 * b + j)]));
      const float step = amax / 8.0f;
      // Half a step everywhere except the far side of the range, where +8 steps clamps to
      // +7 (one step); plus 8 times the fp16 rounding of d.
      const float bound = step * (1.0f + 8.0f * 0x1p-11f) * 1.0001f;
      for (int j = 0; j < 32; ++j) {
        const size_t i = static_cast<size_t>(32 * b + j);
        const float error = std::fabs(x[i] - y[i]);
        QVERIFY2(error <= bound,
                 qPrintable(QStringLiteral("element %1: %2 -> %3, bound %4").arg(i).arg(x[i]).arg(y[i]).arg(bound)));
        sum_sq_error += static_cast<double>(error) * error;
        sum_sq += static_cast<double>(x[i]) * x[i];
      }
    }
    // 16 levels over a Gaussian block: the error energy is a few percent of the signal's.
    QVERIFY2(sum_sq_error / sum_sq < 0.02, qPrintable(QString::number(sum_sq_error / sum_sq)));
  }

  void dispatch_writes_half_types_and_quants() {
    const std::vector<float> x = random_row(16);
    std::vector<uint16_t> half(kNumElements);
    QVERIFY(quantize_row_ref(GgmlType::F16, x.data(), half.data(), kNumElements));
    QCOMPARE(half[5], f32_to_fp16(x[5]));
    QVERIFY(quantize_row_ref(GgmlType::BF16, x.data(), half.data(), kNumElements));
    QCOMPARE(half[7], f32_to_bf16(x[7]));
    std::vector<BlockQ8_0> direct(kNumBlocks), dispatched(kNumBlocks);
    QVERIFY(quantize_row_q8_0_ref(x.data(), direct.data(), kNumElements));
    QVERIFY(quantize_row_ref(GgmlType::Q8_0, x.data(), dispatched.data(), kNumElements));
    QCOMPARE(std::memcmp(direct.data(), dispatched.data(), sizeof(BlockQ8_0) * kNumBlocks), 0);
    std::vector<float> copy(kNumElements);
    QVERIFY(quantize_row_ref(GgmlType::F32, x.data(), copy.data(), kNumElements));
    QVERIFY(copy == x);
  }

  void rejects_bad_counts_non_finite_input_and_other_types() {
    std::vector<float> x(64, 1.0f);
    std::vector<BlockQ8_0> q8(2);
    std::vector<BlockQ4_0> q4(2);
    q8[0].d = 0x1234;
    q4[0].d = 0x1234;
    QVERIFY(!quantize_row_q8_0_ref(x.data(), q8.data(), 31));
    QVERIFY(!quantize_row_q4_0_ref(x.data(), q4.data(), 33));
    QVERIFY(!quantize_row_q8_0_ref(x.data(), q8.data(), -32));
    x[40] = std::numeric_limits<float>::quiet_NaN();
    QVERIFY(!quantize_row_q8_0_ref(x.data(), q8.data(), 64));
    x[40] = -std::numeric_limits<float>::infinity();
    QVERIFY(!quantize_row_q4_0_ref(x.data(), q4.data(), 64));
    QCOMPARE(q8[0].d, uint16_t{0x1234});  // nothing written, not even the first block
    QCOMPARE(q4[0].d, uint16_t{0x1234});
    QVERIFY(!can_quantize_row_ref(GgmlType::IQ2_XXS));  // no reference quantizer for i-quants
    QVERIFY(!quantize_row_ref(GgmlType::IQ2_XXS, x.data(), q8.data(), 256));
    QVERIFY(!quantize_row_ref(GgmlType::Q8_0, x.data(), reinterpret_cast<uint8_t*>(q8.data()) + 1, 32));
  }
};

QTEST_APPLESS_MAIN(TestQuantizeRef)
#include "test_quantize_ref.moc"
