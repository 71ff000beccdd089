// Reference quantizers of every block type: quantize -> dequantize error on Gaussian rows of an
// odd number of blocks against a per-type bound derived from the bit width, exactly
// representable blocks, constant / zero / huge / tiny blocks, the imatrix path's properties,
// and the 8-bit activation blocks (Q8_1, Q8_K). Byte equality with llama.cpp is checked by a
// separate program against libggml (see the quantizer notes); these tests need no llama.cpp.
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

std::vector<uint8_t> quantize(GgmlType type, const std::vector<float>& x, const float* imatrix = nullptr) {
  std::vector<uint8_t> bytes(*ggml_row_bytes(type, static_cast<int64_t>(x.size())));
  if (!quantize_row_ref(type, x.data(), bytes.data(), static_cast<int64_t>(x.size()), imatrix)) return {};
  return bytes;
}

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x, const float* imatrix = nullptr) {
  const std::vector<uint8_t> bytes = quantize(type, x, imatrix);
  if (bytes.empty()) return {};
  std::vector<float> y(x.size());
  if (!dequantize_row_ref(type, bytes.data(), y.data(), static_cast<int64_t>(x.size()))) return {};
  return y;
}

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

double relative_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
  double error = 0, signal = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    error += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    signal += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(error / signal);
}

int64_t block_size(GgmlType type) { return ggml_type_traits(type).block_size; }

// 37 blocks of 32 or 11 super-blocks of 256: odd, so no accidental pairing of blocks.
size_t odd_row_length(GgmlType type) { return block_size(type) == 32 ? 37 * 32 : 11 * 256; }

const GgmlType kStoredTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                 GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                                 GgmlType::Q5_K, GgmlType::Q6_K};

void add_stored_type_rows() {
  QTest::addColumn<int>("type");
  for (GgmlType t : kStoredTypes) QTest::newRow(ggml_type_name(t).data()) << static_cast<int>(t);
}

// Relative RMS error bounds on N(0, 1) data. A uniform quantizer with step D errs by D/sqrt(12)
// RMS; D is the block's span over its number of steps: symmetric types span the expected
// largest |x| of the block (about 2.4 sigma for 32 values, 2.0 for 16), min/scale types the
// expected range (4.1 sigma for 32 values, 3.5 for 16). Bounds are that figure plus ~25% for
// fp16 scales and the quantized sub-block scales of the K-quants (measured values in brackets).
double rms_error_bound(GgmlType type) {
  const double inv_sqrt12 = 1.0 / std::sqrt(12.0);
  switch (type) {
    case GgmlType::Q4_0: return 1.25 * (2.4 / 8) * inv_sqrt12;    // 0.108 [0.086]
    case GgmlType::Q5_0: return 1.25 * (2.4 / 16) * inv_sqrt12;   // 0.054 [0.042]
    case GgmlType::Q8_0: return 1.25 * (2.4 / 127) * inv_sqrt12;  // 0.0068 [0.0054]
    case GgmlType::Q4_1: return 1.25 * (4.1 / 15) * inv_sqrt12;   // 0.099 [0.078]
    case GgmlType::Q5_1: return 1.25 * (4.1 / 31) * inv_sqrt12;   // 0.048 [0.038]
    case GgmlType::Q2_K: return 1.25 * (3.5 / 3) * inv_sqrt12;    // 0.42 [0.30]
    case GgmlType::Q3_K: return 1.25 * (2.0 / 4) * inv_sqrt12;    // 0.18 [0.15]
    case GgmlType::Q4_K: return 1.25 * (4.1 / 15) * inv_sqrt12;   // 0.099 [0.071]
    case GgmlType::Q5_K: return 1.25 * (4.1 / 31) * inv_sqrt12;   // 0.048 [0.036]
    case GgmlType::Q6_K: return 1.25 * (2.0 / 32) * inv_sqrt12;   // 0.023 [0.018]
    default: return 0.0;
  }
}

}  // namespace

class TestQuantizeTypes : public QObject {
  Q_OBJECT

 private slots:
  void gaussian_round_trip_is_within_the_bit_width_bound_data() { add_stored_type_rows(); }
  void gaussian_round_trip_is_within_the_bit_width_bound() {
    QFETCH(int, type);
    const auto t = static_cast<GgmlType>(type);
    const std::vector<float> x = gaussian(odd_row_length(t), 100u + static_cast<uint32_t>(type));
    const std::vector<float> y = round_trip(t, x);
    QCOMPARE(y.size(), x.size());
    const double error = relative_rms_error(x, y);
    QVERIFY2(error < rms_error_bound(t), qPrintable(QStringLiteral("relative RMS error %1, bound %2")
                                                        .arg(error).arg(rms_error_bound(t))));
    // Not vacuous either: a quantizer that returned its input unchanged would be suspicious.
    QVERIFY(error > rms_error_bound(t) / 10);
  }

  void more_bits_mean_less_error() {
    const GgmlType ladder[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                               GgmlType::Q8_0, GgmlType::F16};
    const std::vector<float> x = gaussian(9 * 256, 7, 0.02f);  // the scale of real weights
    double previous = INFINITY;
    for (GgmlType t : ladder) {
      const double error = relative_rms_error(x, round_trip(t, x));
      QVERIFY2(error < previous, qPrintable(QStringLiteral("%1: %2 after %3").arg(ggml_type_name(t).data()).arg(error).arg(previous)));
      previous = error;
    }
  }

  void exactly_representable_blocks_come_back_exactly() {
    std::mt19937 rng(3);
    // Each block (sub-block for K-quants) holds its type's whole level range on a grid the
    // fp16 scale represents exactly, so the best fit has zero error.
    auto check = [&](GgmlType t, int group, std::vector<float> levels, float step) {
      std::vector<float> x;
      for (int64_t g = 0; g < static_cast<int64_t>(odd_row_length(t)) / group; ++g) {
        std::vector<float> block(static_cast<size_t>(group));
        for (int i = 0; i < group; ++i) block[static_cast<size_t>(i)] = levels[static_cast<size_t>(i) % levels.size()] * step;
        std::shuffle(block.begin(), block.end(), rng);
        x.insert(x.end(), block.begin(), block.end());
      }
      const std::vector<float> y = round_trip(t, x);
      QVERIFY2(y == x, ggml_type_name(t).data());
    };
    auto range = [](int lo, int hi) {
      std::vector<float> v;
      for (int i = lo; i <= hi; ++i) v.push_back(static_cast<float>(i));
      return v;
    };
    check(GgmlType::Q8_0, 32, range(-127, 127), 1.0f);  // only the first 32 levels per block: -127..-96
    check(GgmlType::Q4_0, 32, range(-8, 7), 0.25f);
    check(GgmlType::Q5_0, 32, range(-16, 15), 0.5f);
    check(GgmlType::Q4_1, 32, range(0, 15), 0.5f);
    check(GgmlType::Q5_1, 32, range(0, 31), 0.25f);
    check(GgmlType::Q2_K, 16, {0, 15, 30, 45}, 1.0f);      // sub-block scale 15: d = 15 / 15
    check(GgmlType::Q3_K, 16, range(-4, 3), 1.0f);         // scale 1 = (1 / -32) * -32
    check(GgmlType::Q4_K, 32, range(0, 15), 63.0f / 64);   // d = 2^-6, scale code 63
    check(GgmlType::Q5_K, 32, range(0, 31), 63.0f / 64);
    check(GgmlType::Q6_K, 16, range(-32, 31), 1.0f);       // scale 1 = (1 / -128) * -128
  }

  void constant_blocks_keep_their_value_data() { add_stored_type_rows(); }
  void constant_blocks_keep_their_value() {
    QFETCH(int, type);
    const auto t = static_cast<GgmlType>(type);
    for (float c : {0.37f, -0.37f, 1000.0f, -1000.0f}) {
      const std::vector<float> x(odd_row_length(t), c);
      const std::vector<float> y = round_trip(t, x);
      QCOMPARE(y.size(), x.size());
      // Error comes only from rounding the scale (fp16: 2^-11 relative) and, for the K-quants,
      // its 4/6-bit code against a super-block maximum that is the value itself.
      for (float v : y) QVERIFY2(std::fabs(v - c) <= 2e-3f * std::fabs(c), qPrintable(QStringLiteral("%1 -> %2").arg(c).arg(v)));
    }
  }

  void zero_blocks_decode_to_zero_data() { add_stored_type_rows(); }
  void zero_blocks_decode_to_zero() {
    QFETCH(int, type);
    const auto t = static_cast<GgmlType>(type);
    std::vector<float> x(odd_row_length(t), 0.0f);
    const std::vector<float> y = round_trip(t, x);
    QCOMPARE(y.size(), x.size());
    for (float v : y) QCOMPARE(v, 0.0f);  // also: no NaN from a 0 / 0 scale
    // A zero block between busy ones stays zero and does not disturb its neighbours.
    x = gaussian(x.size(), 5);
    std::fill(x.begin() + block_size(t), x.begin() + 2 * block_size(t), 0.0f);
    const std::vector<float> z = round_trip(t, x);
    for (int64_t i = block_size(t); i < 2 * block_size(t); ++i) QCOMPARE(z[static_cast<size_t>(i)], 0.0f);
    QVERIFY(relative_rms_error(x, z) < rms_error_bound(t));
  }

  void huge_and_tiny_magnitudes_stay_finite_data() { add_stored_type_rows(); }
  void huge_and_tiny_magnitudes_stay_finite() {
    QFETCH(int, type);
    const auto t = static_cast<GgmlType>(type);
    const size_t n = odd_row_length(t);
    // Huge, just inside the type's range: scales near the top of fp16, error as on N(0, 1).
    const float limit = quantize_max_abs_input(t);
    std::vector<float> x = gaussian(n, 11);
    const float amax = std::fabs(*std::max_element(x.begin(), x.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
    for (float& v : x) v *= 0.99f * limit / amax;
    std::vector<float> y = round_trip(t, x);
    QCOMPARE(y.size(), n);
    for (float v : y) QVERIFY(std::isfinite(v));
    QVERIFY2(relative_rms_error(x, y) < rms_error_bound(t), qPrintable(QString::number(relative_rms_error(x, y))));
    // Beyond the range the fp16 scale would overflow: refused rather than written as inf.
    x[3] = 1.01f * limit;
    QVERIFY(quantize(t, x).empty());

    // Tiny: scales underflow fp16 towards zero; values may flush to 0 but never blow up.
    for (float sigma : {1e-6f, 1e-20f, 1e-40f /* f32 subnormal */}) {
      x = gaussian(n, 12, 1.0f);
      for (float& v : x) v *= sigma;
      y = round_trip(t, x);
      QCOMPARE(y.size(), n);
      for (size_t i = 0; i < n; ++i) {
        QVERIFY(std::isfinite(y[i]));
        QVERIFY2(std::fabs(y[i] - x[i]) <= 8 * sigma + 1e-7f, qPrintable(QStringLiteral("%1 -> %2").arg(x[i]).arg(y[i])));
      }
    }
  }

  void imatrix_scaled_by_a_power_of_two_gives_identical_bytes_data() { add_stored_type_rows(); }
  void imatrix_scaled_by_a_power_of_two_gives_identical_bytes() {
    QFETCH(int, type);
    const auto t = static_cast<GgmlType>(type);
    const size_t n = odd_row_length(t);
    const std::vector<float> x = gaussian(n, 21);
    std::mt19937 rng(22);
    std::lognormal_distribution<float> importance(0.0f, 1.0f);
    std::vector<float> w(n), w4(n);
    for (size_t i = 0; i < n; ++i) {
      w[i] = importance(rng);
      w4[i] = 4.0f * w[i];
    }
    const std::vector<uint8_t> a = quantize(t, x, w.data()), b = quantize(t, x, w4.data());
    QVERIFY(!a.empty());
    QVERIFY(a == b);  // only the relative importance of columns matters
    if (!quantize_uses_imatrix(t)) {
      QVERIFY(a == quantize(t, x));  // Q8_0 has nothing to weight
    }
  }

  void imatrix_lowers_the_error_where_it_says_it_matters_data() { add_stored_type_rows(); }
  void imatrix_lowers_the_error_where_it_says_it_matters() {
    QFETCH(int, type);
    const auto t = static_cast<GgmlType>(type);
    if (!quantize_uses_imatrix(t)) QSKIP("this type has no importance-weighted search");
    // One row of 4096 columns (imatrix paths take sigma^2 per row); every fourth column is
    // 100 times as important, as a few outlier channels in real activations are.
    const size_t n = 4096;
    const std::vector<float> x = gaussian(n, 31);
    std::vector<float> w(n, 1.0f), ones(n, 1.0f);
    for (size_t i = 0; i < n; i += 4) w[i] = 100.0f;
    auto weighted_error = [&](const std::vector<float>& y) {
      double e = 0;
      for (size_t i = 0; i < n; ++i) e += w[i] * (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
      return e;
    };
    const double with_imatrix = weighted_error(round_trip(t, x, w.data()));
    const double uniform = weighted_error(round_trip(t, x, ones.data()));
    const double without = weighted_error(round_trip(t, x));
    QVERIFY2(with_imatrix < 0.95 * uniform && with_imatrix < 0.95 * without,
             qPrintable(QStringLiteral("weighted error %1 with the imatrix, %2 all-ones, %3 none")
                            .arg(with_imatrix).arg(uniform).arg(without)));
  }

  void bad_imatrix_and_bad_counts_are_refused() {
    std::vector<float> x = gaussian(256, 41), w(256, 1.0f);
    std::vector<BlockQ4_K> q(1);
    q[0].d = 0x1234;
    w[7] = -1.0f;
    QVERIFY(!quantize_row_q4_k_ref(x.data(), q.data(), 256, w.data()));
    w[7] = std::numeric_limits<float>::quiet_NaN();
    QVERIFY(!quantize_row_q4_k_ref(x.data(), q.data(), 256, w.data()));
    QVERIFY(!quantize_row_q4_k_ref(x.data(), q.data(), 255));
    QVERIFY(!quantize_row_q4_k_ref(x.data(), q.data(), 128));  // half a super-block
    x[9] = std::numeric_limits<float>::infinity();
    QVERIFY(!quantize_row_q4_k_ref(x.data(), q.data(), 256));
    QCOMPARE(q[0].d, uint16_t{0x1234});  // nothing written
    QVERIFY(quantize_row_q4_k_ref(x.data(), q.data(), 0));  // empty is fine
    // The dispatcher checks alignment: Q8_K's f32 scale needs 4 bytes.
    std::vector<BlockQ8_K> q8k(2);
    x[9] = 0.5f;
    QVERIFY(!quantize_row_ref(GgmlType::Q8_K, x.data(), reinterpret_cast<uint8_t*>(q8k.data()) + 2, 256));
    QVERIFY(quantize_row_ref(GgmlType::Q8_K, x.data(), q8k.data(), 256));
  }

  void dispatch_matches_the_typed_functions() {
    const std::vector<float> x = gaussian(3 * 256, 51);
    std::vector<BlockQ5_K> direct(3), dispatched(3);
    QVERIFY(quantize_row_q5_k_ref(x.data(), direct.data(), 768));
    QVERIFY(quantize_row_ref(GgmlType::Q5_K, x.data(), dispatched.data(), 768));
    QCOMPARE(std::memcmp(direct.data(), dispatched.data(), sizeof(BlockQ5_K) * 3), 0);
    for (GgmlType t : kStoredTypes) QVERIFY(can_quantize_row_ref(t));
    QVERIFY(can_quantize_row_ref(GgmlType::Q8_1));
    QVERIFY(can_quantize_row_ref(GgmlType::Q8_K));
  }

  void q8_k_levels_sums_and_scale_agree() {
    const std::vector<float> x = gaussian(5 * 256, 61, 3.0f);
    std::vector<BlockQ8_K> q(5);
    QVERIFY(quantize_row_q8_k_ref(x.data(), q.data(), 5 * 256));
    double error = 0, signal = 0;
    for (int b = 0; b < 5; ++b) {
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += q[b].qs[16 * g + i];
        QCOMPARE(static_cast<int>(q[b].bsums[g]), sum);
      }
      for (int i = 0; i < 256; ++i) {
        const double v = x[static_cast<size_t>(256 * b + i)], y = q[b].d * q[b].qs[i];
        error += (v - y) * (v - y);
        signal += v * v;
      }
    }
    // 256 values: the largest |x| is about 3 sigma, step 3 / 127 -> 0.0068 relative RMS.
    QVERIFY2(std::sqrt(error / signal) < 1.25 * (3.0 / 127) / std::sqrt(12.0), qPrintable(QString::number(std::sqrt(error / signal))));
    // The signed extreme of a block maps to -127 exactly, whichever its sign.
    std::vector<float> outlier = gaussian(256, 62);
    outlier[44] = 40.0f;
    QVERIFY(quantize_row_q8_k_ref(outlier.data(), q.data(), 256));
    QCOMPARE(static_cast<int>(q[0].qs[44]), -127);
    QVERIFY(q[0].d < 0.0f);
    // Integer levels with the extreme at -127 come back exactly, d = 1.
    std::vector<float> grid(256);
    for (int i = 0; i < 256; ++i) grid[static_cast<size_t>(i)] = static_cast<float>(i % 255 - 127);
    QVERIFY(quantize_row_q8_k_ref(grid.data(), q.data(), 256));
    QCOMPARE(q[0].d, 1.0f);
    for (int i = 0; i < 256; ++i) QCOMPARE(static_cast<float>(q[0].qs[i]), grid[static_cast<size_t>(i)]);
    const std::vector<float> zeros(256, 0.0f);
    QVERIFY(quantize_row_q8_k_ref(zeros.data(), q.data(), 256));
    QCOMPARE(q[0].d, 0.0f);
    for (int16_t s : q[0].bsums) QCOMPARE(static_cast<int>(s), 0);
  }

  void q8_1_carries_the_scaled_sum() {
    const std::vector<float> x = gaussian(37 * 32, 71, 2.0f);
    std::vector<BlockQ8_1> q(37);
    std::vector<BlockQ8_0> q8(37);
    QVERIFY(quantize_row_q8_1_ref(x.data(), q.data(), 37 * 32));
    QVERIFY(quantize_row_q8_0_ref(x.data(), q8.data(), 37 * 32));
    for (int b = 0; b < 37; ++b) {
      // Same levels and d as Q8_0; s is d * sum(levels) with the unrounded d.
      QCOMPARE(q[b].d, q8[b].d);
      QCOMPARE(std::memcmp(q[b].qs, q8[b].qs, 32), 0);
      int sum = 0;
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) {
        sum += q[b].qs[j];
        amax = std::max(amax, std::fabs(x[static_cast<size_t>(32 * b + j)]));
      }
      QCOMPARE(q[b].s, f32_to_fp16(static_cast<float>(sum) * (amax / 127.0f)));
    }
    std::vector<float> big(32, 3000.0f);  // s = 32 * 3000 would overflow fp16
    QVERIFY(!quantize_row_q8_1_ref(big.data(), q.data(), 32));
  }
};

QTEST_APPLESS_MAIN(TestQuantizeTypes)
#include "test_quantize_types.moc"
