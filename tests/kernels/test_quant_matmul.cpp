// matmul's integer path (8-bit activations, integer dot products) against matmul_ref on odd
// shapes and random data: 769 rows of 3 super-blocks (K-quants) or 37 blocks (32-element
// types), 1 (decode), 3 (tiles of 4 tokens with a short edge), 8 and 13 (K-quants: the
// token-lane kernels, one and two vectors of 8 tokens, the second part padding; 32-element
// types: the GEMM) and 17 tokens (the AVX-512 GEMM's 16-row tiles; the AVX2 GEMM's 8-row
// panels, 769 rows leaving one row in the last, and groups of 4 tokens then single ones; the
// portable loops hand more than 4 tokens to the dequantizing path),
// 1 and 2 threads, with and without bias and caller scratch. Run once per CPU path (see
// CMakeLists.txt).
//
// Tolerance: the activations are rounded to 8 bits per block (step h = amax / 127 of the block
// of 32 or 256), so output (t, o) differs from the f32 reference by sum_i W[o][i] * e[t][i]
// with e uniform in +-h/2: a zero-mean error of standard deviation
// sigma = sqrt(sum_i W[o][i]^2 * h[t][i]^2 / 12), near-Gaussian (a sum of ~1000 independent
// terms). No difference may exceed 6 sigma: the integer path adds no error beyond the rounding
// of its activations. (Sigma is about 1% of the output's size on this data, whose outliers
// stretch some blocks' steps 8-fold; a wrong scale, offset or nibble order misses by hundreds
// of sigma. The mean square is printed, near 1, but not asserted: one token's outputs share
// one rounding draw, so it swings with the weights' common mean.)
#include "random_tensors.h"

#include "iwb/kernels/cpu_amx.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/matmul.h"
#include "iwb/kernels/quant_blocks.h"

#include <QTest>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace iwb;
using iwb::test::max_relative_error;
using iwb::test::random_floats;
using iwb::test::random_tensor_bytes;

Q_DECLARE_METATYPE(iwb::GgmlType)

namespace {

// What CPUID says of AMX tiles, beside what the kernels chose (an AMD host has none).
bool cpu_has_amx_tiles() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (edx & (1u << 24)) != 0;
#else
  return false;
#endif
}

constexpr double kMaxSigmas = 6.0;

const GgmlType kIntegerTypes[] = {GgmlType::Q4_0,  GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                  GgmlType::MXFP4, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// sigma[t * out + o]: the standard deviation of output (t, o)'s error from rounding the
// activations to 8 bits in blocks of `block`.
std::vector<double> rounding_sigmas(GgmlType type, const std::vector<uint8_t>& w, const std::vector<float>& x,
                                    int64_t in, int64_t out, int64_t tokens) {
  const int64_t block = ggml_type_traits(type).block_size;
  const size_t stride = *ggml_row_bytes(type, in);
  std::vector<double> step_sq(static_cast<size_t>(tokens * in));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t b = 0; b < in; b += block) {
      double amax = 0;
      for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[t * in + i])));
      for (int64_t i = b; i < b + block; ++i) step_sq[t * in + i] = (amax / 127) * (amax / 127);
    }
  }
  std::vector<double> sigma(static_cast<size_t>(tokens * out));
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    dequantize_row_ref(type, w.data() + o * stride, row.data(), in);
    for (int64_t t = 0; t < tokens; ++t) {
      double var = 0;
      for (int64_t i = 0; i < in; ++i) var += static_cast<double>(row[i]) * row[i] * step_sq[t * in + i] / 12;
      sigma[t * out + o] = std::sqrt(var);
    }
  }
  return sigma;
}

struct SigmaError {
  double max = 0;          // largest |difference| / sigma
  double mean_square = 0;  // mean of (difference / sigma)^2
};

SigmaError sigma_error(const std::vector<float>& got, const std::vector<float>& ref, const std::vector<double>& sigma) {
  SigmaError e;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double z = (static_cast<double>(got[i]) - ref[i]) / sigma[i];
    e.max = std::max(e.max, std::isfinite(z) ? std::fabs(z) : INFINITY);
    e.mean_square += z * z / static_cast<double>(ref.size());
  }
  return e;
}

}  // namespace

class TestQuantMatmul : public QObject {
  Q_OBJECT

 private slots:
  void matchesReference_data() {
    QTest::addColumn<GgmlType>("type");
    QTest::addColumn<int>("numTokens");
    QTest::addColumn<int>("inFeatures");
    for (GgmlType t : kIntegerTypes) {
      const bool is_k = ggml_type_traits(t).block_size == 256;
      for (int tokens : {1, 2, 3, 5, 8, 13, 17, 29}) {
        QTest::newRow((std::string(ggml_type_name(t)) + " x" + std::to_string(tokens)).c_str())
            << t << tokens << (is_k ? 3 * 256 : 37 * 32);
      }
      // Rows of several KiB: decode dots them in segments (Intel), the last one short.
      QTest::newRow((std::string(ggml_type_name(t)) + " x1 long rows").c_str())
          << t << 1 << (is_k ? 37 * 256 : 283 * 32);
    }
  }
  void matchesReference() {
    QFETCH(GgmlType, type);
    QFETCH(int, numTokens);
    QFETCH(int, inFeatures);
    std::mt19937 rng(static_cast<uint32_t>(100 + static_cast<int>(type) * 7 + numTokens + inFeatures));
    const int64_t in = inFeatures, out = 769;
    const std::vector<uint8_t> w = random_tensor_bytes(type, out, in, rng, 0.05f);
    // Activations with an offset and uneven spread, as a normalised hidden state has.
    std::vector<float> x = random_floats(static_cast<size_t>(numTokens * in), rng, 1.0f, 0.1f);
    for (size_t i = 0; i < x.size(); i += 97) x[i] *= 8.0f;  // outliers stretch some blocks' scale
    const std::vector<float> bias = random_floats(static_cast<size_t>(out), rng, 0.1f);
    const std::vector<double> sigma = rounding_sigmas(type, w, x, in, out, numTokens);
    for (const bool has_bias : {false, true}) {
      std::vector<float> ref(static_cast<size_t>(numTokens * out));
      MatmulArgs args{type, w.data(), in, out, x.data(), numTokens, has_bias ? bias.data() : nullptr, ref.data(), 1};
      QVERIFY(matmul_ref(args));
      const size_t scratch_bytes = matmul_scratch_bytes(type, in, numTokens);
      QVERIFY(scratch_bytes >= static_cast<size_t>(numTokens * in));
      std::vector<uint8_t> scratch(scratch_bytes);
      for (int threads : {1, 2}) {
        for (const bool has_scratch : {false, true}) {
          std::vector<float> fast(ref.size(), NAN);
          args.output = fast.data();
          args.num_threads = threads;
          args.scratch = has_scratch ? scratch.data() : nullptr;
          args.scratch_bytes = has_scratch ? scratch.size() : 0;
          QVERIFY(matmul(args));
          const SigmaError e = sigma_error(fast, ref, sigma);
          const QString what = QString(
                                   "threads %1, bias %2, scratch %3: max %4 sigma, mean square %5 sigma^2, "
                                   "max error %6 of max |output|")
                                   .arg(threads)
                                   .arg(has_bias)
                                   .arg(has_scratch)
                                   .arg(e.max)
                                   .arg(e.mean_square)
                                   .arg(max_relative_error(fast, ref));
          QVERIFY2(e.max < kMaxSigmas, qPrintable(what));
          if (threads == 2 && has_scratch && has_bias) qInfo("%s", qPrintable(what));
        }
      }
    }
  }

  // Every kernel matmul picks (decode rows, tiles, token lanes, GEMMs, AMX tiles: 1 to 40
  // tokens; rows of 512, and long rows, dotted in segments, for 1-3 tokens) at the integers'
  // extremes: each block's bytes but its scales one pattern (0x00,
  // 0xFF, 0x80, 0x7F, 0x88, 0x77: quants at either end of their range, K-quant sub-block
  // scales at theirs, Q8_0's -128 and 127), against activations whose blocks are one value, so
  // every 8-bit activation is +-127 and rounds exactly. An intermediate sum that wraps (the
  // token lanes' Q5_K sums did: 16 products of 31 x 127) misses by several percent; the
  // tolerance is 0.1% of the sum of |products| (8-bit activation scales are stored as fp16 for
  // the 32-element types).
  void extremesMatchReference_data() {
    QTest::addColumn<GgmlType>("type");
    QTest::addColumn<int>("fill");
    for (GgmlType t : kIntegerTypes) {
      for (int fill : {0x00, 0xFF, 0x80, 0x7F, 0x88, 0x77}) {
        QTest::newRow((std::string(ggml_type_name(t)) + " bytes " + std::to_string(fill)).c_str()) << t << fill;
      }
    }
  }
  void extremesMatchReference() {
    QFETCH(GgmlType, type);
    QFETCH(int, fill);
    // Rows of 512, and long rows (decode dots them in segments on Intel) for a few tokens.
    const int64_t long_row = ggml_type_traits(type).block_size == kQK_K ? 37 * kQK_K : 283 * 32;
    check_extremes(type, fill, 512, {1, 2, 3, 4, 5, 8, 9, 16, 17, 20, 31, 32, 33, 40});
    check_extremes(type, fill, long_row, {1, 2, 3});
  }

 private:
  static void check_extremes(GgmlType type, int fill, int64_t in, std::initializer_list<int> token_counts) {
    const GgmlTypeTraits& traits = ggml_type_traits(type);
    const int64_t out = 80, max_tokens = std::max(token_counts);
    const size_t stride = *ggml_row_bytes(type, in);
    std::vector<uint8_t> w(static_cast<size_t>(out) * stride, static_cast<uint8_t>(fill));
    // The scales: fp16 d (and m or dmin) near 0.01, MXFP4's exponent 2^0; the rest keep `fill`.
    std::vector<size_t> half_fields = {0};
    if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1 || type == GgmlType::Q4_K || type == GgmlType::Q5_K)
      half_fields.push_back(2);
    if (type == GgmlType::Q6_K) half_fields = {offsetof(BlockQ6_K, d)};
    for (size_t b = 0; b < w.size(); b += traits.bytes_per_block) {
      if (type == GgmlType::MXFP4) {
        w[b] = 127;
        continue;
      }
      for (size_t f : half_fields) {
        const uint16_t h = 0x2120;  // 0.0102
        std::memcpy(&w[b + f], &h, sizeof h);
      }
    }
    std::vector<float> x(static_cast<size_t>(max_tokens * in));
    for (int64_t t = 0; t < max_tokens; ++t) {
      for (int64_t i = 0; i < in; ++i) {  // each token one sign, or (every third) a sign per block of 32
        const bool negative = t % 3 == 2 ? (i / 32) % 2 == 1 : t % 2 == 1;
        x[t * in + i] = negative ? -0.75f : 0.75f;
      }
    }
    std::vector<float> row(static_cast<size_t>(in));
    std::vector<double> abs_sum(static_cast<size_t>(out), 0.0);  // sum of |w| (|x| is 0.75 throughout)
    for (int64_t o = 0; o < out; ++o) {
      QVERIFY(dequantize_row_ref(type, w.data() + o * stride, row.data(), in));
      for (float v : row) abs_sum[o] += std::fabs(v) * 0.75;
    }
    // The integer sums are exact, but the 32-element kernels' offsets are not (Q8_0's unsigned
    // view adds 128 x d_w x each block's activation sum in f32 and takes it off again): where a
    // row's true sum is 0 (bytes 0), f32 rounding of those terms is left, 1e-8 of their size.
    const double offset_rounding = 1e-8 * 128 * 0.0102 * 0.75 * static_cast<double>(in);
    for (int tokens : token_counts) {
      std::vector<float> ref(static_cast<size_t>(tokens * out)), fast(ref.size(), NAN);
      MatmulArgs args{type, w.data(), in, out, x.data(), tokens, nullptr, ref.data(), 2};
      QVERIFY(matmul_ref(args));
      args.output = fast.data();
      QVERIFY(matmul(args));
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t o = 0; o < out; ++o) {
          const double got = fast[t * out + o], expected = ref[t * out + o];
          QVERIFY2(std::fabs(got - expected) <= 1e-3 * abs_sum[o] + offset_rounding,
                   qPrintable(QString("rows of %1, %2 tokens, token %3 row %4: %5 against %6 (sum of |products| %7)")
                                  .arg(in)
                                  .arg(tokens)
                                  .arg(t)
                                  .arg(o)
                                  .arg(got)
                                  .arg(expected)
                                  .arg(abs_sum[o])));
        }
      }
    }
  }

 private slots:
  // F16/BF16/F32 keep f32 activations (AVX-512 rows, tiles and, from 64 tokens, the 32-row
  // GEMM; elsewhere the dequantizing path): 1e-5.
  void floatTypesMatchReference_data() {
    QTest::addColumn<GgmlType>("type");
    QTest::addColumn<int>("numTokens");
    for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
      for (int tokens : {1, 3, 9, 17, 23, 70}) {
        QTest::newRow((std::string(ggml_type_name(t)) + " x" + std::to_string(tokens)).c_str()) << t << tokens;
      }
    }
  }
  void floatTypesMatchReference() {
    QFETCH(GgmlType, type);
    QFETCH(int, numTokens);
    std::mt19937 rng(static_cast<uint32_t>(200 + static_cast<int>(type) * 7 + numTokens));
    const int64_t in = 769, out = 769;  // 769 columns: a masked tail after 48 vectors of 16
    const std::vector<uint8_t> w = random_tensor_bytes(type, out, in, rng, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(numTokens * in), rng, 1.0f, 0.1f);
    const std::vector<float> bias = random_floats(static_cast<size_t>(out), rng, 0.1f);
    std::vector<float> ref(static_cast<size_t>(numTokens * out));
    MatmulArgs args{type, w.data(), in, out, x.data(), numTokens, bias.data(), ref.data(), 1};
    QVERIFY(matmul_ref(args));
    // Float weights read f32 activations, except AMX's bf16 GEMM (F16 from 8 tokens, BF16
    // from 4), which splits them into bf16 tiles once per call, in the scratch.
    const int amx_from = type == GgmlType::BF16 ? 4 : 8;
    if (numTokens < amx_from || type == GgmlType::F32 || cpu_amx_status().find("bf16") == std::string::npos) {
      QCOMPARE(matmul_scratch_bytes(type, in, numTokens), size_t(0));
    } else {
      QVERIFY(matmul_scratch_bytes(type, in, numTokens) >= size_t(numTokens) * in * 4);
    }
    std::vector<float> one_thread;
    for (int threads : {1, 2}) {
      std::vector<float> fast(ref.size(), NAN);
      args.output = fast.data();
      args.num_threads = threads;
      QVERIFY(matmul(args));
      QVERIFY2(max_relative_error(fast, ref) < 1e-5, qPrintable(QString::number(max_relative_error(fast, ref))));
      // One token: a row's sum never depends on the chunk of rows it fell in (two threads cut
      // the rows otherwise than one), whether rows go one at a time or in tiles.
      if (threads == 1)
        one_thread = fast;
      else if (numTokens == 1)
        QVERIFY(std::memcmp(fast.data(), one_thread.data(), sizeof(float) * fast.size()) == 0);
    }
  }

  // Threads and tiles never change a result: every output is one kernel's work.
  void resultsDoNotDependOnThreads() {
    std::mt19937 rng(7);
    const int64_t in = 2 * 256, out = 131, tokens = 9;
    const std::vector<uint8_t> w = random_tensor_bytes(GgmlType::Q4_K, out, in, rng, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(tokens * in), rng);
    std::vector<float> one(static_cast<size_t>(tokens * out)), two(one.size());
    MatmulArgs args{GgmlType::Q4_K, w.data(), in, out, x.data(), tokens, nullptr, one.data(), 1};
    QVERIFY(matmul(args));
    args.output = two.data();
    args.num_threads = 2;
    QVERIFY(matmul(args));
    QCOMPARE(two, one);
  }

  // is_exact keeps f32 activations: the dequantizing path's 1e-5 agreement.
  void exactArgumentKeepsF32Activations() {
    std::mt19937 rng(8);
    const int64_t in = 256, out = 37;
    const std::vector<uint8_t> w = random_tensor_bytes(GgmlType::Q6_K, out, in, rng, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(in), rng);
    std::vector<float> ref(out), exact(out), fast(out);
    MatmulArgs args{GgmlType::Q6_K, w.data(), in, out, x.data(), 1, nullptr, ref.data(), 1};
    QVERIFY(matmul_ref(args));
    args.output = fast.data();
    QVERIFY(matmul(args));
    args.output = exact.data();
    args.is_exact = true;
    QVERIFY(matmul(args));
    QVERIFY(max_relative_error(exact, ref) < 1e-5);
    QVERIFY(max_relative_error(fast, ref) > 1e-5);  // the 8-bit path really ran
  }

  // The AMX prefill GEMMs (int8 tiles for the quantized types, bf16 tiles for F16/BF16), where
  // the CPU and the kernel allow them: token counts around and past the 16-token tiles (17, 33,
  // 49, 100: short last groups; the K-quants take the tiles from 17 tokens), 200 rows (three 64-row panels and a short
  // one, a short 16-row tile), in_features of one, several and many blocks (F16/BF16: 769, a short 32-element step).
  // Quantized types: the 6-sigma bound above; F16/BF16: the float test's 1e-5.
  void amxPrefillMatchesReference_data() {
    QTest::addColumn<GgmlType>("type");
    QTest::addColumn<int>("numTokens");
    QTest::addColumn<int>("inFeatures");
    for (GgmlType t : kIntegerTypes) {
      const bool is_k = ggml_type_traits(t).block_size == 256;
      const std::vector<int> ins =
          is_k ? std::vector<int>{256, 3 * 256, 7 * 256} : std::vector<int>{32, 5 * 32, 37 * 32};
      for (int in : ins) {
        for (int tokens : {17, 33, 49, 100}) {
          QTest::newRow(
              (std::string(ggml_type_name(t)) + " x" + std::to_string(tokens) + " in " + std::to_string(in)).c_str())
              << t << tokens << in;
        }
      }
    }
    for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
      for (int in : {32, 769, 2048}) {
        for (int tokens : {17, 33, 49, 100}) {
          QTest::newRow(
              (std::string(ggml_type_name(t)) + " x" + std::to_string(tokens) + " in " + std::to_string(in)).c_str())
              << t << tokens << in;
        }
      }
      // K in several blocks (the outputs pass through the accumulator between them): 300 tokens
      // take blocks of 13 steps (25 here), 100 tokens blocks of 36 (129 here, the last short).
      for (auto [tokens, in] : {std::pair{300, 769}, std::pair{100, 4127}}) {
        QTest::newRow(
            (std::string(ggml_type_name(t)) + " x" + std::to_string(tokens) + " in " + std::to_string(in)).c_str())
            << t << tokens << in;
      }
    }
  }
  void amxPrefillMatchesReference() {
    const std::string status = cpu_amx_status();
    if (qEnvironmentVariable("IWB_CPU_NO_AMX") == "1") {
      // The CTest variant runs on every host: on a CPU without AMX that is the reason given.
      QVERIFY2(status.find(cpu_has_amx_tiles() ? "IWB_CPU_NO_AMX" : "has no AMX") != std::string::npos, status.c_str());
    }
    if (status.rfind("used", 0) != 0) QSKIP(("AMX " + status).c_str());
    QFETCH(GgmlType, type);
    QFETCH(int, numTokens);
    QFETCH(int, inFeatures);
    const bool is_float = !ggml_type_traits(type).is_quantized;
    if (is_float && status.find("bf16") == std::string::npos) QSKIP("no AMX-BF16");
    if (!is_float && status.find("int8") == std::string::npos) QSKIP("no AMX-INT8");
    std::mt19937 rng(static_cast<uint32_t>(300 + static_cast<int>(type) * 11 + numTokens + inFeatures));
    const int64_t in = inFeatures, out = 200;
    const std::vector<uint8_t> w = random_tensor_bytes(type, out, in, rng, 0.05f);
    std::vector<float> x = random_floats(static_cast<size_t>(numTokens * in), rng, 1.0f, 0.1f);
    for (size_t i = 0; i < x.size(); i += 97) x[i] *= 8.0f;
    const std::vector<float> bias = random_floats(static_cast<size_t>(out), rng, 0.1f);
    std::vector<float> ref(static_cast<size_t>(numTokens * out));
    MatmulArgs args{type, w.data(), in, out, x.data(), numTokens, bias.data(), ref.data(), 1};
    QVERIFY(matmul_ref(args));
    const std::vector<double> sigma =
        is_float ? std::vector<double>() : rounding_sigmas(type, w, x, in, out, numTokens);
    for (int threads : {1, 2}) {
      std::vector<float> fast(ref.size(), NAN);
      args.output = fast.data();
      args.num_threads = threads;
      QVERIFY(matmul(args));
      if (is_float) {
        const double e = max_relative_error(fast, ref);
        QVERIFY2(e < 1e-5, qPrintable(QString("max error %1 of max |output|").arg(e)));
        if (threads == 2) qInfo("max error %g of max |output|", e);
      } else {
        const SigmaError e = sigma_error(fast, ref, sigma);
        const QString what =
            QString("threads %1: max %2 sigma, mean square %3 sigma^2").arg(threads).arg(e.max).arg(e.mean_square);
        QVERIFY2(e.max < kMaxSigmas, qPrintable(what));
        if (threads == 2) qInfo("%s", qPrintable(what));
      }
    }
  }

  // F16 reads its f32 activations in place below the AMX GEMM's 8 tokens (floatTypesMatchReference
  // checks the scratch where the GEMM takes over); Q3_K has no dot kernels.
  void scratchBytesForOtherTypes() {
    QCOMPARE(matmul_scratch_bytes(GgmlType::F16, 4096, 7), size_t(0));
    QCOMPARE(matmul_scratch_bytes(GgmlType::Q3_K, 4096, 8), size_t(0));
    QVERIFY(matmul_scratch_bytes(GgmlType::Q8_0, 4096, 8) >= 8 * 4096);
  }
};

QTEST_APPLESS_MAIN(TestQuantMatmul)
#include "test_quant_matmul.moc"
