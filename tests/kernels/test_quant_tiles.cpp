// White-box tests of the integer products of many tokens on every CPU path this machine runs:
// the AVX-512 prefill tiles, token-lane kernels and GEMM (and the AVX2 GEMM of float weights)
// against the row dot products (test_quant_dot.cpp checks those against the dequantized rows)
// for every shape they take.
#include "quant_dot.h"
#include "quant_dot_test_support.h"
#include "random_tensors.h"

#include "iwb/kernels/dequantize.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace iwb;
using namespace iwb::detail;
using namespace iwb::test;

namespace {

// The first 64-byte boundary in a buffer of 63 bytes more than needed (the kernels' alignment).
uint8_t* align64(uint8_t* p) { return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64; }

// The message of a GEMM output off its row dot.
QString mismatch(int64_t tokens, int num_rows, int row, int64_t token, float got, double expected) {
  return QString("%1 tokens, %2 rows, row %3 token %4: %5 vs %6")
      .arg(tokens)
      .arg(num_rows)
      .arg(row)
      .arg(token)
      .arg(got)
      .arg(expected);
}

}  // namespace

class TestQuantTiles : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    qInfo("widest path: %s%s", path_name(cpu_path()), has_avx512_vbmi() ? " with AVX512-VBMI" : "");
  }

  void tilesMatchVecDot_data() {
    QTest::addColumn<GgmlType>("type");
    for (GgmlType t : kIntegerTypes) QTest::newRow(std::string(ggml_type_name(t)).c_str()) << t;
  }
  void tilesMatchVecDot() {
    QFETCH(GgmlType, type);
    if (cpu_path() != CpuPath::Avx512) QSKIP("the prefill tiles are AVX-512 kernels and this run has no AVX-512");
    DotKernels k;
    QVERIFY(select_quant_dot_avx512(type, &k));
    QVERIFY(k.tile != nullptr);
    std::mt19937 rng(41 + static_cast<int>(type));
    const int64_t n = columns(type);
    const size_t stride = *ggml_row_bytes(type, n);
    const std::vector<uint8_t> w = random_tensor_bytes(type, kTileRows, n, rng, 0.05f);
    const size_t act_stride = activation_row_bytes(k.format, n) + 8;  // rows need not be packed
    std::vector<uint8_t> act(act_stride * kTileTokens);
    for (int t = 0; t < kTileTokens; ++t) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 1.0f, 0.1f * t);
      k.quantize(x.data(), act.data() + t * act_stride, n);
    }
    std::vector<float> wf(static_cast<size_t>(n));
    for (int num_rows = 1; num_rows <= kTileRows; ++num_rows) {
      for (int num_tokens = 1; num_tokens <= kTileTokens; ++num_tokens) {
        float out[kTileRows * kTileTokens];
        k.tile(w.data(), stride, num_rows, act.data(), act_stride, num_tokens, n, out);
        for (int r = 0; r < num_rows; ++r) {
          QVERIFY(dequantize_row_ref(type, w.data() + r * stride, wf.data(), n));
          for (int t = 0; t < num_tokens; ++t) {
            const double expected = k.vec_dot(w.data() + r * stride, act.data() + t * act_stride, n);
            const double bound = 1e-5 * abs_dot(wf, dequantized_activation(k.format, act.data() + t * act_stride, n));
            QVERIFY2(std::fabs(out[r * kTileTokens + t] - expected) <= bound,
                     qPrintable(QString("%1x%2 tile, row %3 token %4: %5 vs %6")
                                    .arg(num_rows)
                                    .arg(num_tokens)
                                    .arg(r)
                                    .arg(t)
                                    .arg(out[r * kTileTokens + t])
                                    .arg(expected)));
          }
        }
      }
    }
  }

  // The token-lane kernels (a few tokens, K-quants) for every token count they take (1..16:
  // lane widths of 4 and 2 lanes per token, one to four token vectors, padding lanes) and row
  // counts below, at and above their tiles' rows.
  void lanesMatchVecDot_data() {
    QTest::addColumn<GgmlType>("type");
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
      QTest::newRow(std::string(ggml_type_name(t)).c_str()) << t;
  }
  void lanesMatchVecDot() {
    QFETCH(GgmlType, type);
    if (cpu_path() != CpuPath::Avx512) QSKIP("the token-lane kernels are AVX-512 kernels and this run has no AVX-512");
    DotKernels k;
    QVERIFY(select_quant_dot_avx512(type, &k));
    QVERIFY(k.lanes != nullptr && k.pack_tokens != nullptr);
    std::mt19937 rng(61 + static_cast<int>(type));
    const int64_t n = columns(type), rows = 7;
    const size_t stride = *ggml_row_bytes(type, n);
    const std::vector<uint8_t> w = random_tensor_bytes(type, rows, n, rng, 0.05f);
    const size_t act_stride = activation_row_bytes(k.format, n) + 8;
    std::vector<uint8_t> act(act_stride * kLaneMaxTokens);
    for (int t = 0; t < kLaneMaxTokens; ++t) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 1.0f, 0.1f * static_cast<float>(t % 5));
      k.quantize(x.data(), act.data() + t * act_stride, n);
    }
    const std::vector<float> bias = random_floats(rows, rng, 0.1f);
    std::vector<uint8_t> storage(lanes_packed_bytes(n, kLaneMaxTokens) + 64);
    uint8_t* packed = align64(storage.data());
    std::vector<float> wf(static_cast<size_t>(n));
    for (int num_tokens = 1; num_tokens <= kLaneMaxTokens; ++num_tokens) {
      std::memset(packed, 0xA5, storage.size() - 64);  // stale bytes must not leak into padding lanes
      k.pack_tokens(act.data(), act_stride, num_tokens, n, packed);
      for (int num_rows : {1, 3, kLaneRows, static_cast<int>(rows)}) {
        const int64_t out_stride = num_rows + 2;
        std::vector<float> out(static_cast<size_t>(num_tokens * out_stride), NAN);
        k.lanes(w.data(), stride, num_rows, packed, num_tokens, n, bias.data(), out.data(), out_stride);
        for (int r = 0; r < num_rows; ++r) {
          QVERIFY(dequantize_row_ref(type, w.data() + r * stride, wf.data(), n));
          for (int t = 0; t < num_tokens; ++t) {
            const double expected = k.vec_dot(w.data() + r * stride, act.data() + t * act_stride, n) + bias[r];
            const double bound =
                1e-5 * (abs_dot(wf, dequantized_activation(k.format, act.data() + t * act_stride, n)) + 1);
            const float got = out[t * out_stride + r];
            QVERIFY2(std::fabs(got - expected) <= bound,
                     qPrintable(QString("%1 tokens, %2 rows, row %3 token %4: %5 vs %6")
                                    .arg(num_tokens)
                                    .arg(num_rows)
                                    .arg(r)
                                    .arg(t)
                                    .arg(got)
                                    .arg(expected)));
          }
        }
        for (int t = 0; t < num_tokens; ++t) {
          for (int64_t c = num_rows; c < out_stride; ++c) QVERIFY(std::isnan(out[t * out_stride + c]));  // untouched
        }
      }
    }
  }

  // The token lanes' integer sums at their extremes: every quant at its largest (Q4_K 15, Q5_K
  // 31, Q6_K 63) against activations all +127 or all -127. A lane's sum of a scale's groups goes
  // through vpdpwssd as an int16, so it must stay within [-2^15, 2^15): Q5_K's lanes once summed
  // 16 products of 31 x 127 (62,992) and wrapped.
  void lanesSumsStayInRange_data() { lanesMatchVecDot_data(); }
  void lanesSumsStayInRange() {
    QFETCH(GgmlType, type);
    if (cpu_path() != CpuPath::Avx512) QSKIP("the token-lane kernels are AVX-512 kernels and this run has no AVX-512");
    DotKernels k;
    QVERIFY(select_quant_dot_avx512(type, &k));
    std::mt19937 rng(67 + static_cast<int>(type));
    const int64_t n = 2 * kQK_K, rows = kLaneRows;
    const size_t stride = *ggml_row_bytes(type, n);
    std::vector<uint8_t> w = random_tensor_bytes(type, rows, n, rng, 0.05f);
    for (int64_t r = 0; r < rows; ++r) {  // the quants' bytes all ones: every quant its largest
      for (int64_t b = 0; b < n / kQK_K; ++b) {
        uint8_t* block = w.data() + r * stride + b * (stride / (n / kQK_K));
        if (type == GgmlType::Q4_K) {
          std::memset(reinterpret_cast<BlockQ4_K*>(block)->qs, 0xFF, sizeof(BlockQ4_K::qs));
        } else if (type == GgmlType::Q5_K) {
          std::memset(reinterpret_cast<BlockQ5_K*>(block)->qs, 0xFF, sizeof(BlockQ5_K::qs));
          std::memset(reinterpret_cast<BlockQ5_K*>(block)->qh, 0xFF, sizeof(BlockQ5_K::qh));
        } else {
          std::memset(reinterpret_cast<BlockQ6_K*>(block)->ql, 0xFF, sizeof(BlockQ6_K::ql));
          std::memset(reinterpret_cast<BlockQ6_K*>(block)->qh, 0xFF, sizeof(BlockQ6_K::qh));
        }
      }
    }
    const size_t act_stride = activation_row_bytes(k.format, n);
    std::vector<uint8_t> act(act_stride * kLaneMaxTokens);
    for (int t = 0; t < kLaneMaxTokens; ++t) {
      // One value throughout, so every quant is its block's largest: +127, or -127 (the 8-bit
      // activations keep to -127..127; quantize_activations.cpp).
      const std::vector<float> x(static_cast<size_t>(n), t % 2 == 0 ? 0.5f : -0.5f);
      k.quantize(x.data(), act.data() + t * act_stride, n);
    }
    std::vector<uint8_t> storage(lanes_packed_bytes(n, kLaneMaxTokens) + 64);
    uint8_t* packed = align64(storage.data());
    for (int num_tokens : {3, 4, 8, 16}) {
      k.pack_tokens(act.data(), act_stride, num_tokens, n, packed);
      std::vector<float> out(static_cast<size_t>(num_tokens * rows), NAN);
      k.lanes(w.data(), stride, static_cast<int>(rows), packed, num_tokens, n, nullptr, out.data(), rows);
      for (int64_t r = 0; r < rows; ++r) {
        for (int t = 0; t < num_tokens; ++t) {
          const double expected = k.vec_dot(w.data() + r * stride, act.data() + t * act_stride, n);
          const float got = out[t * rows + r];
          QVERIFY2(std::fabs(got - expected) <= 1e-5 * std::fabs(expected) + 1e-6,
                   qPrintable(QString("%1 tokens, row %2 token %3: %4 vs %5")
                                  .arg(num_tokens)
                                  .arg(r)
                                  .arg(t)
                                  .arg(got)
                                  .arg(expected)));
        }
      }
    }
  }

  // The prefill GEMMs (AVX-512: 16-row panels; AVX2 and AVX-VNNI: 8-row panels; tokens in
  // groups of 4, the last 1-3 in one group of their own) against the row dots, on seven token
  // counts from where matmul hands over to them (AVX2: 5-11; AVX-512 K-quants, after the token
  // lanes: 17-23), panels of one row, a short one and a whole one.
  void gemmMatchesVecDot_data() {
    QTest::addColumn<CpuPath>("path");
    QTest::addColumn<GgmlType>("type");
    for (CpuPath p : available_paths()) {
      if (p == CpuPath::Portable) continue;
      for (GgmlType t : kIntegerTypes)
        QTest::newRow((std::string(path_name(p)) + " " + std::string(ggml_type_name(t))).c_str()) << p << t;
    }
  }
  void gemmMatchesVecDot() {
    QFETCH(CpuPath, path);
    QFETCH(GgmlType, type);
    if (path == CpuPath::Portable) QSKIP("the portable loops have no GEMM, and this run has no SIMD path");
    DotKernels k;
    QVERIFY(select_on(path, type, &k));
    QVERIFY(k.gemm != nullptr);
    std::mt19937 rng(51 + static_cast<int>(type));
    const int64_t n = columns(type), rows = k.gemm_rows, max_tokens = k.gemm_min_tokens + 6;
    const size_t stride = *ggml_row_bytes(type, n);
    const std::vector<uint8_t> w = random_tensor_bytes(type, rows, n, rng, 0.05f);
    const size_t act_stride = activation_row_bytes(k.format, n) + 8;
    std::vector<uint8_t> act(act_stride * max_tokens);
    std::vector<float> x(static_cast<size_t>(n * max_tokens));
    for (int64_t t = 0; t < max_tokens; ++t) {
      const std::vector<float> xt = random_floats(static_cast<size_t>(n), rng, 1.0f, 0.1f * static_cast<float>(t));
      std::copy(xt.begin(), xt.end(), x.begin() + t * n);
      k.quantize(xt.data(), act.data() + t * act_stride, n);
    }
    // A GEMM with activations of its own layout (the K-quants' AMX tiles) reads them from
    // groups made by its gemm_prepare, as matmul makes them.
    std::vector<uint8_t> prepared_storage;
    const uint8_t* gemm_act = act.data();
    size_t gemm_act_stride = act_stride;
    if (k.gemm_prepare != nullptr) {
      gemm_act_stride = k.gemm_prepared_group_bytes(n);
      const int64_t groups = (max_tokens + kPreparedGroupTokens - 1) / kPreparedGroupTokens;
      prepared_storage.resize(gemm_act_stride * groups + 64);
      uint8_t* prepared = align64(prepared_storage.data());
      for (int64_t g = 0; g < groups; ++g) {
        const int tokens =
            static_cast<int>(std::min<int64_t>(kPreparedGroupTokens, max_tokens - g * kPreparedGroupTokens));
        k.gemm_prepare(x.data() + g * kPreparedGroupTokens * n, n, tokens, prepared + g * gemm_act_stride);
      }
      gemm_act = prepared;
    }
    const std::vector<float> bias = random_floats(rows, rng, 0.1f);
    std::vector<uint8_t> storage(quant_gemm_buffer_bytes(type, n) + 64);
    uint8_t* buffer = align64(storage.data());
    std::vector<float> wf(static_cast<size_t>(n));
    for (int num_rows : {1, static_cast<int>(rows) - 3, static_cast<int>(rows)}) {
      for (int64_t tokens = k.gemm_min_tokens; tokens <= max_tokens; ++tokens) {
        const int64_t out_stride = num_rows + 3;  // rows of the output need not be packed
        std::vector<float> out(static_cast<size_t>(tokens * out_stride), NAN);
        k.gemm(w.data(), stride, num_rows, gemm_act, gemm_act_stride, tokens, n, bias.data(), out.data(), out_stride,
               buffer);
        for (int r = 0; r < num_rows; ++r) {
          QVERIFY(dequantize_row_ref(type, w.data() + r * stride, wf.data(), n));
          for (int64_t t = 0; t < tokens; ++t) {
            const double expected = k.vec_dot(w.data() + r * stride, act.data() + t * act_stride, n) + bias[r];
            const double bound =
                1e-5 * (abs_dot(wf, dequantized_activation(k.format, act.data() + t * act_stride, n)) + 1);
            const float got = out[t * out_stride + r];
            QVERIFY2(std::fabs(got - expected) <= bound, qPrintable(mismatch(tokens, num_rows, r, t, got, expected)));
          }
        }
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t c = num_rows; c < out_stride; ++c) QVERIFY(std::isnan(out[t * out_stride + c]));  // untouched
        }
      }
    }
  }

  // The AVX2 GEMM of float weights (16-row panels; tokens in groups of 6, the last 1-5 in one
  // group of their own) against its row dot on every token count from 5 (where matmul hands
  // it over) to 13, panels of 1, 7 and 16 rows, 771 inputs (a short tail after 96 vectors of
  // 8). A token's outputs keep their bits whatever group it fell in: each is the same
  // sequence of FMAs.
  void floatGemmAvx2MatchesVecDot_data() {
    QTest::addColumn<GgmlType>("type");
    for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::F32})
      QTest::newRow(std::string(ggml_type_name(t)).c_str()) << t;
  }
  void floatGemmAvx2MatchesVecDot() {
    QFETCH(GgmlType, type);
    if (cpu_path() == CpuPath::Portable) QSKIP("the float GEMM is an AVX2 kernel and this run has no AVX2");
    DotKernels k;
    QVERIFY(select_float_dot_avx2(type, &k));
    QVERIFY(k.gemm != nullptr);
    QCOMPARE(k.gemm_rows, kFloatGemmAvx2Rows);
    std::mt19937 rng(77 + static_cast<int>(type));
    const int64_t n = 771, rows = kFloatGemmAvx2Rows, max_tokens = 13;
    const size_t stride = *ggml_row_bytes(type, n);
    const std::vector<uint8_t> w = random_tensor_bytes(type, rows, n, rng, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(max_tokens * n), rng, 1.0f, 0.1f);
    const size_t x_stride = n * sizeof(float);
    const std::vector<float> bias = random_floats(rows, rng, 0.1f);
    std::vector<uint8_t> storage(float_gemm_avx2_buffer_bytes(n) + 64);
    uint8_t* buffer = align64(storage.data());
    std::vector<float> wf(static_cast<size_t>(n));
    for (int num_rows : {1, 7, static_cast<int>(rows)}) {
      const int64_t out_stride = num_rows + 3;
      std::vector<float> first;  // every token's outputs from the call of all 13
      for (int64_t tokens = max_tokens; tokens >= k.gemm_min_tokens; --tokens) {
        std::vector<float> out(static_cast<size_t>(tokens * out_stride), NAN);
        k.gemm(w.data(), stride, num_rows, reinterpret_cast<const uint8_t*>(x.data()), x_stride, tokens, n, bias.data(),
               out.data(), out_stride, buffer);
        if (first.empty()) first = out;
        for (int r = 0; r < num_rows; ++r) {
          QVERIFY(dequantize_row_ref(type, w.data() + r * stride, wf.data(), n));
          for (int64_t t = 0; t < tokens; ++t) {
            const float* xt = x.data() + t * n;
            const double expected = k.vec_dot(w.data() + r * stride, xt, n) + bias[r];
            double magnitude = std::fabs(bias[r]);
            for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(static_cast<double>(wf[i]) * xt[i]);
            const float got = out[t * out_stride + r];
            QVERIFY2(std::fabs(got - expected) <= 1e-5 * magnitude,
                     qPrintable(mismatch(tokens, num_rows, r, t, got, expected)));
            QVERIFY2(std::memcmp(&got, &first[t * out_stride + r], sizeof got) == 0,
                     qPrintable(QString("%1 tokens, row %2 token %3: %4, in the call of %5 tokens %6")
                                    .arg(tokens)
                                    .arg(r)
                                    .arg(t)
                                    .arg(got)
                                    .arg(max_tokens)
                                    .arg(first[t * out_stride + r])));
          }
          for (int64_t t = 0; t < tokens; ++t) {
            for (int64_t c = num_rows; c < out_stride; ++c) QVERIFY(std::isnan(out[t * out_stride + c]));  // untouched
          }
        }
      }
    }
  }
};

QTEST_APPLESS_MAIN(TestQuantTiles)
#include "test_quant_tiles.moc"
