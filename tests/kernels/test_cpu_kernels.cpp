// The fast CPU kernels against their reference twins on odd sizes and random data: fast
// dequantization, matmul of every dequantizable type, RMS norm, RoPE (both layouts), softmax,
// gated activations, embedding lookup, attention (GQA, sliding window, soft-capping) and the
// row reductions of sampling (argmax, sum of exponentials, the scan of top-k).
#include "random_tensors.h"

#include "iwb/kernels/activations.h"
#include "iwb/kernels/attention.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/dequantize_fast.h"
#include "iwb/kernels/embedding.h"
#include "iwb/kernels/matmul.h"
#include "iwb/kernels/reduce.h"
#include "iwb/kernels/rmsnorm.h"
#include "iwb/kernels/rope.h"
#include "iwb/kernels/softmax.h"

#include <QTest>

#include <cmath>
#include <random>
#include <vector>

using namespace iwb;
using iwb::test::max_relative_error;
using iwb::test::random_floats;
using iwb::test::random_tensor_bytes;

Q_DECLARE_METATYPE(iwb::GgmlType)

namespace {

const GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                              GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                              GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4};

// An odd number of columns the type's block size allows, past one 1024-column chunk when
// `is_long` so chunk boundaries are crossed.
int64_t odd_columns(GgmlType type, bool is_long) {
  const int64_t block = ggml_type_traits(type).block_size;
  if (block == 1) return is_long ? 2049 : 769;
  if (block == 32) return is_long ? 41 * 32 : 23 * 32;
  return is_long ? 5 * 256 : 3 * 256;
}

std::vector<uint16_t> random_f16(size_t n, std::mt19937& rng, float stddev) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_fp16(random_floats(1, rng, stddev)[0]);
  return out;
}

}  // namespace

class TestCpuKernels : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    qInfo("fast paths: %s", cpu_has_avx2_fma() ? "AVX2/FMA/F16C" : "portable loops");
    if (qEnvironmentVariable("IWB_CPU_PORTABLE") == "1") QVERIFY(!cpu_has_avx2_fma());
  }

  void dequantizeFastMatchesReference_data() {
    QTest::addColumn<GgmlType>("type");
    for (GgmlType t : kAllTypes) QTest::newRow(std::string(ggml_type_name(t)).c_str()) << t;
  }
  void dequantizeFastMatchesReference() {
    QFETCH(GgmlType, type);
    std::mt19937 rng(7);
    const int64_t rows = 3, cols = odd_columns(type, true);
    const std::vector<uint8_t> bytes = random_tensor_bytes(type, rows, cols, rng, 0.5f);
    std::vector<float> fast(static_cast<size_t>(rows * cols)), ref(fast.size());
    QVERIFY(dequantize_row(type, bytes.data(), fast.data(), rows * cols));
    QVERIFY(dequantize_row_ref(type, bytes.data(), ref.data(), rows * cols));
    QVERIFY2(max_relative_error(fast, ref) < 1e-6, qPrintable(QString::number(max_relative_error(fast, ref))));
    // Not a multiple of the block size: refused like the reference.
    if (ggml_type_traits(type).block_size > 1) QVERIFY(!dequantize_row(type, bytes.data(), fast.data(), 17));
  }

  void matmulMatchesReference_data() {
    QTest::addColumn<GgmlType>("type");
    QTest::addColumn<bool>("isLong");
    QTest::addColumn<int>("numTokens");
    QTest::addColumn<bool>("hasBias");
    for (GgmlType t : kAllTypes) {
      const std::string name(ggml_type_name(t));
      QTest::newRow((name + " decode").c_str()) << t << false << 1 << false;
      QTest::newRow((name + " prefill, long rows, bias").c_str()) << t << true << 5 << true;
    }
  }
  void matmulMatchesReference() {
    QFETCH(GgmlType, type);
    QFETCH(bool, isLong);
    QFETCH(int, numTokens);
    QFETCH(bool, hasBias);
    std::mt19937 rng(11);
    const int64_t in = odd_columns(type, isLong), out = 37;  // 37 rows: a partial last tile
    const std::vector<uint8_t> w = random_tensor_bytes(type, out, in, rng, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(numTokens * in), rng);
    const std::vector<float> bias = random_floats(static_cast<size_t>(out), rng, 0.1f);
    std::vector<float> ref(static_cast<size_t>(numTokens * out), NAN);
    MatmulArgs args{type, w.data(), in, out, x.data(), numTokens, hasBias ? bias.data() : nullptr, ref.data(), 2};
    // f32 activations (the dequantizing path) agree to 1e-5; the 8-bit integer path has its
    // own tolerance in test_quant_matmul.
    args.is_exact = true;
    QVERIFY(matmul_ref(args));
    for (int threads : {1, 2}) {
      std::vector<float> fast(ref.size(), NAN);
      args.output = fast.data();
      args.num_threads = threads;
      QVERIFY(matmul(args));
      const double err = max_relative_error(fast, ref);
      QVERIFY2(err < 1e-5, qPrintable(QString("threads %1: relative error %2").arg(threads).arg(err)));
    }
    const OpCost cost = matmul_cost(args);
    QCOMPARE(cost.flops, 2.0 * numTokens * in * out + (hasBias ? numTokens * out : 0));
    QVERIFY(cost.bytes >= static_cast<double>(w.size()));
  }

  void matmulRefusesBadArguments() {
    std::vector<float> w(64 * 4, 1.0f), x(64, 1.0f), y(4);
    MatmulArgs args{GgmlType::Q8_0, w.data(), 48, 4, x.data(), 1, nullptr, y.data(), 0};  // 48 % 32 != 0
    QVERIFY(!matmul(args));
    QVERIFY(!matmul_ref(args));
    args.in_features = 64;
    args.weight_type = GgmlType::IQ2_XXS;  // no dequantizer
    QVERIFY(!matmul(args));
    args.weight_type = GgmlType::F32;
    args.input = nullptr;
    QVERIFY(!matmul(args));
  }

  void rmsnormMatchesReference() {
    std::mt19937 rng(3);
    const int64_t dim = 769;
    // 3 rows run on one thread; 67 (a prompt's worth of work) are split between two.
    for (const int64_t rows : {int64_t{3}, int64_t{67}}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(rows * dim), rng, 2.0f, 0.3f);
      const std::vector<float> w = random_floats(static_cast<size_t>(dim), rng, 0.2f, 1.0f);
      for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
        std::vector<float> ref(x.size()), fast = x;
        QVERIFY(rmsnorm_ref({x.data(), weight, ref.data(), rows, dim, 1e-5f}));
        QVERIFY(rmsnorm({fast.data(), weight, fast.data(), rows, dim, 1e-5f, 2}));  // in place
        QVERIFY2(max_relative_error(fast, ref) < 1e-5, qPrintable(QString("%1 rows").arg(rows)));
      }
    }
    const int64_t rows = 3;
    const std::vector<float> x = random_floats(static_cast<size_t>(rows * dim), rng, 2.0f, 0.3f);
    // Without a weight every row comes out with unit RMS.
    std::vector<float> y(x.size());
    QVERIFY(rmsnorm({x.data(), nullptr, y.data(), rows, dim, 0.0f}));
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += y[i] * y[i];
    QVERIFY(std::fabs(sum / dim - 1.0) < 1e-4);
  }

  void ropeMatchesReference_data() {
    QTest::addColumn<int>("layout");
    QTest::addColumn<int>("numRotated");
    QTest::addColumn<bool>("hasFactors");
    QTest::newRow("normal") << int(RopeLayout::Normal) << 64 << false;
    QTest::newRow("neox") << int(RopeLayout::NeoX) << 64 << false;
    QTest::newRow("normal, partial, factors") << int(RopeLayout::Normal) << 32 << true;
    QTest::newRow("neox, partial, factors") << int(RopeLayout::NeoX) << 48 << true;
  }
  void ropeMatchesReference() {
    QFETCH(int, layout);
    QFETCH(int, numRotated);
    QFETCH(bool, hasFactors);
    std::mt19937 rng(5);
    const int64_t head_dim = 64;
    std::vector<float> factors(static_cast<size_t>(numRotated / 2));
    for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + static_cast<float>(i % 5);
    // rope_ref into ref and rope into fast, both from x; false when either refuses.
    const auto rope_both = [&](const std::vector<float>& x, int64_t tokens, int64_t heads,
                               const std::vector<int32_t>& positions, int num_threads, std::vector<float>& ref,
                               std::vector<float>& fast) {
      ref = x;
      fast = x;
      RopeArgs args{ref.data(),
                    tokens,
                    heads,
                    head_dim,
                    numRotated,
                    positions.data(),
                    RopeLayout(layout),
                    500000.0f,
                    0.25f,
                    hasFactors ? factors.data() : nullptr};
      if (!rope_ref(args)) return false;
      args.data = fast.data();
      args.num_threads = num_threads;
      return rope(args);
    };
    // A prompt's worth of tokens, split between two threads (101: uneven shares).
    {
      const int64_t tokens = 101, heads = 12;
      const std::vector<float> x = random_floats(static_cast<size_t>(tokens * heads * head_dim), rng);
      std::vector<int32_t> positions(static_cast<size_t>(tokens));
      for (int32_t& p : positions) p = static_cast<int32_t>(rng() % 8192);
      std::vector<float> ref, fast;
      QVERIFY(rope_both(x, tokens, heads, positions, 2, ref, fast));
      QVERIFY2(max_relative_error(fast, ref) < 1e-5, qPrintable(QString::number(max_relative_error(fast, ref))));
    }
    const int64_t tokens = 5, heads = 3;
    const std::vector<float> x = random_floats(static_cast<size_t>(tokens * heads * head_dim), rng);
    const std::vector<int32_t> positions = {0, 1, 17, 913, 4095};
    std::vector<float> ref, fast;
    QVERIFY(rope_both(x, tokens, heads, positions, 0, ref, fast));
    QVERIFY2(max_relative_error(fast, ref) < 1e-5, qPrintable(QString::number(max_relative_error(fast, ref))));
    // Position 0 is the identity, and dimensions past num_rotated are never touched.
    for (int64_t i = 0; i < heads * head_dim; ++i) QCOMPARE(fast[i], x[i]);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = numRotated; i < head_dim; ++i)
        QCOMPARE(fast[t * heads * head_dim + i], x[t * heads * head_dim + i]);
    }
  }

  // rope keeps a position's table for the next call with the same settings: calls that change
  // the base, the scale or the frequency factors' values (in place, same address) at the same
  // position still match the reference.
  void ropeTablesFollowTheSettings() {
    std::mt19937 rng(74);
    const int64_t heads = 3, dim = 64;
    const int32_t position = 777;
    std::vector<float> factors(dim / 2, 1.0f);
    RopeArgs a;
    a.num_tokens = 1;
    a.num_heads = heads;
    a.head_dim = dim;
    a.num_rotated = dim;
    a.positions = &position;
    a.layout = RopeLayout::NeoX;
    a.num_threads = 1;
    // rope on random data against the reference, a's settings.
    const auto agrees = [&](const QString& what) {
      std::vector<float> x = random_floats(static_cast<size_t>(a.num_tokens * heads * dim), rng), ref = x;
      a.data = x.data();
      RopeArgs r = a;
      r.data = ref.data();
      const bool ok = rope(a) && rope_ref(r) && max_relative_error(x, ref) < 1e-5;
      if (!ok) qWarning("%s: max error %g", qPrintable(what), max_relative_error(x, ref));
      return ok;
    };
    for (int call = 0; call < 6; ++call) {
      a.freq_base = call % 2 == 0 ? 10000.0f : 1000000.0f;
      a.freq_scale = call == 4 ? 0.25f : 1.0f;
      a.freq_factors = call >= 2 ? factors.data() : nullptr;
      if (call == 3) std::fill(factors.begin(), factors.end(), 2.0f);  // same address, new values
      QVERIFY(agrees(QString("call %1").arg(call)));
    }
    // The rows are kept per position in 512 slots, for two settings a thread: positions that
    // share a slot (5, 517, 1029) and three bases in turn (each call evicts a kept table) must
    // still get their own angles.
    const std::vector<int32_t> positions = {5, 517, 1029, 5};
    a.num_tokens = static_cast<int64_t>(positions.size());
    a.positions = positions.data();
    a.freq_factors = nullptr;
    a.freq_scale = 1.0f;
    for (int call = 0; call < 9; ++call) {
      a.freq_base = std::array{10000.0f, 500000.0f, 1000000.0f}[static_cast<size_t>(call % 3)];
      QVERIFY(agrees(QString("shared slots, call %1").arg(call)));
    }
  }

  void ropeRotatesTheRightPairs() {
    // A unit vector in dimension 0 at position 1 with base 1 (every angle 1 radian) lands in
    // dimension 1 (normal: adjacent pair) or dimension n/2 (NeoX: halves).
    const int32_t pos = 1;
    for (RopeLayout layout : {RopeLayout::Normal, RopeLayout::NeoX}) {
      std::vector<float> v(8, 0.0f);
      v[0] = 1.0f;
      QVERIFY(rope({v.data(), 1, 1, 8, 8, &pos, layout, 1.0f, 1.0f, nullptr}));
      const int partner = layout == RopeLayout::Normal ? 1 : 4;
      QVERIFY(std::fabs(v[0] - std::cos(1.0f)) < 1e-6);
      QVERIFY(std::fabs(v[partner] - std::sin(1.0f)) < 1e-6);
    }
  }

  // YaRN (gpt-oss: factor 32 over 4096, base 150000, beta 32 / 1): fast against reference,
  // and pairs below the ramp keep the unscaled angle, pairs above it the interpolated one,
  // both times the magnitude 1 + 0.1 ln 32.
  void ropeYarnMatchesGgmlFormula() {
    std::mt19937 rng(21);
    const int64_t tokens = 4, heads = 3, head_dim = 64;
    const std::vector<float> x = random_floats(static_cast<size_t>(tokens * heads * head_dim), rng);
    const std::vector<int32_t> positions = {0, 3, 129, 5000};
    std::vector<float> ref = x, fast = x;
    RopeArgs args{ref.data(),       tokens,           heads,     head_dim,     head_dim,
                  positions.data(), RopeLayout::NeoX, 150000.0f, 1.0f / 32.0f, nullptr};
    args.ext_factor = 1.0f;
    args.original_context = 4096;
    QVERIFY(rope_ref(args));
    args.data = fast.data();
    QVERIFY(rope(args));
    QVERIFY2(max_relative_error(fast, ref) < 1e-5, qPrintable(QString::number(max_relative_error(fast, ref))));
    // ggml_rope_yarn_corr_dims for these: 64 * ln(4096 / (2 pi beta)) / (2 ln 150000), floored / ceiled.
    float dims[2];
    rope_yarn_corr_dims(head_dim, 4096, 150000.0f, 32.0f, 1.0f, dims);
    QCOMPARE(dims[0], std::floor(64.0f * std::log(4096.0f / (64.0f * 3.14159265f)) / (2.0f * std::log(150000.0f))));
    QCOMPARE(dims[1], std::ceil(64.0f * std::log(4096.0f / (2.0f * 3.14159265f)) / (2.0f * std::log(150000.0f))));
    QVERIFY(dims[0] > 0 && dims[1] < 31);
    const double mscale = 1.0 + 0.1 * std::log(32.0);
    const auto check_pair = [&](int64_t i, bool is_extrapolated) {
      const double freq = std::pow(150000.0, -2.0 * static_cast<double>(i) / 64.0) * (is_extrapolated ? 1.0 : 1.0 / 32);
      const int64_t t = 3;  // position 5000, head 0
      const double theta = 5000.0 * freq;
      const double x0 = x[t * heads * head_dim + i], x1 = x[t * heads * head_dim + i + 32];
      const double want = (x0 * std::cos(theta) - x1 * std::sin(theta)) * mscale;
      QVERIFY2(std::fabs(ref[t * heads * head_dim + i] - want) < 1e-5, qPrintable(QString::number(i)));
    };
    check_pair(0, true);
    check_pair(static_cast<int64_t>(dims[0]), true);
    check_pair(static_cast<int64_t>(dims[1]), false);
    check_pair(31, false);
    // attn_factor alone (no YaRN) scales the rotation: position 0 becomes x * attn_factor.
    std::vector<float> y = x;
    RopeArgs plain{y.data(),           1,        heads, head_dim, head_dim, positions.data(),
                   RopeLayout::Normal, 10000.0f, 1.0f,  nullptr};
    plain.attn_factor = 2.0f;
    QVERIFY(rope(plain));
    for (int64_t i = 0; i < heads * head_dim; ++i) QCOMPARE(y[i], 2.0f * x[i]);
    // YaRN without the original context is refused.
    plain.ext_factor = 1.0f;
    QVERIFY(!rope(plain) && !rope_ref(plain));
  }

  void softmaxMatchesReference() {
    std::mt19937 rng(9);
    const std::vector<float> x = random_floats(3 * 257, rng, 10.0f);
    std::vector<float> ref = x, fast = x;
    QVERIFY(softmax_ref({ref.data(), 3, 257}));
    QVERIFY(softmax({fast.data(), 3, 257}));
    QVERIFY(max_relative_error(fast, ref) < 1e-5);
    double sum = 0;
    for (int i = 0; i < 257; ++i) sum += fast[i];
    QVERIFY(std::fabs(sum - 1.0) < 1e-5);
  }

  // argmax_f32: the first of the largest values, on odd lengths (the vector loop's tails), with
  // the maximum repeated (the first one wins), at either end, among NaNs and -infs; and all
  // -inf (index 0), all NaN (0), nothing (-1).
  void argmaxMatchesReference() {
    std::mt19937 rng(71);
    for (const int64_t n : {1, 2, 7, 8, 9, 31, 32, 33, 255, 257, 1000, 151936}) {
      std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 3.0f);
      QCOMPARE(argmax_f32(x.data(), n), argmax_f32_ref(x.data(), n));
      const int64_t at = argmax_f32_ref(x.data(), n);
      x[static_cast<size_t>(n - 1)] = x[static_cast<size_t>(at)];  // a tie later on: the first stays
      QCOMPARE(argmax_f32(x.data(), n), at);
      x[static_cast<size_t>(n - 1)] = x[static_cast<size_t>(at)] + 1.0f;  // the last is the largest
      QCOMPARE(argmax_f32(x.data(), n), n - 1);
      x[0] = x[static_cast<size_t>(n - 1)] + 1.0f;  // the first
      QCOMPARE(argmax_f32(x.data(), n), 0);
      for (size_t i = 0; i < x.size(); i += 3) x[i] = NAN;  // NaNs passed over, -infs lose
      for (size_t i = 1; i < x.size(); i += 5) x[i] = -INFINITY;
      QCOMPARE(argmax_f32(x.data(), n), argmax_f32_ref(x.data(), n));
    }
    std::vector<float> low(37, -INFINITY), nan(37, NAN);
    QCOMPARE(argmax_f32(low.data(), 37), 0);
    QCOMPARE(argmax_f32(nan.data(), 37), 0);
    QCOMPARE(argmax_f32_ref(nan.data(), 37), 0);
    QCOMPARE(argmax_f32(low.data(), 0), -1);
  }

  // sum_exp_f32 against the double std::exp sum, relative 1e-6, on odd lengths and a
  // vocabulary's, with -inf terms (masked tokens) adding nothing.
  void sumExpMatchesReference() {
    std::mt19937 rng(72);
    for (const int64_t n : {1, 7, 8, 15, 16, 17, 255, 256, 257, 1001, 151936}) {
      std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 4.0f);
      for (size_t i = 2; i < x.size(); i += 11) x[i] = -INFINITY;
      const float shift = x[static_cast<size_t>(argmax_f32_ref(x.data(), n))];
      const double ref = sum_exp_f32_ref(x.data(), n, shift), got = sum_exp_f32(x.data(), n, shift);
      QVERIFY2(std::fabs(got - ref) <= 1e-6 * ref, qPrintable(QString("n %1: %2 vs %3").arg(n).arg(got).arg(ref)));
    }
    std::vector<float> low(9, -INFINITY);
    QVERIFY(sum_exp_f32(low.data(), 9, 0.0f) < 1e-30);
    QCOMPARE(sum_exp_f32(low.data(), 0, 0.0f), 0.0);
  }

  // find_at_least_f32: from every start, on odd lengths, with NaNs (never at the bar) and a bar
  // met exactly (>=).
  void findAtLeastMatchesReference() {
    std::mt19937 rng(73);
    for (const int64_t n : {1, 15, 16, 17, 40, 333}) {
      std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 1.0f);
      for (size_t i = 4; i < x.size(); i += 9) x[i] = NAN;
      for (const float bar : {-INFINITY, 0.5f, 1.5f, 2.5f, x[static_cast<size_t>(n / 2)], INFINITY}) {
        for (int64_t from = 0; from <= n; ++from) {
          QCOMPARE(find_at_least_f32(x.data(), from, n, bar), find_at_least_f32_ref(x.data(), from, n, bar));
        }
      }
    }
  }

  void gatedActivationsMatchReference() {
    std::mt19937 rng(13);
    const int64_t n = 70001;  // above the parallel threshold, odd
    const std::vector<float> gate = random_floats(static_cast<size_t>(n), rng, 3.0f);
    const std::vector<float> up = random_floats(static_cast<size_t>(n), rng);
    for (GatedActivation kind : {GatedActivation::SiLU, GatedActivation::GeluTanh, GatedActivation::SwigluOai}) {
      std::vector<float> ref(static_cast<size_t>(n)), fast = gate;
      QVERIFY(gated_activation_ref({gate.data(), up.data(), ref.data(), n, kind, 0}));
      QVERIFY(gated_activation({fast.data(), up.data(), fast.data(), n, kind, 2}));  // output over gate
      QVERIFY(max_relative_error(fast, ref) < 1e-5);
    }
    QCOMPARE(silu(0.0f), 0.0f);
    QVERIFY(std::fabs(silu(2.0f) - 2.0f / (1.0f + std::exp(-2.0f))) < 1e-6);
    QVERIFY(std::fabs(gelu_tanh(1.0f) - 0.8411920f) < 1e-5);  // tanh-approximate GELU(1)
    // gpt-oss's clamped SwiGLU: gate clamped above at 7, up to [-7, 7] then + 1.
    const auto oai = [](double g, double u) { return g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0); };
    QVERIFY(std::fabs(swiglu_oai(1.5f, 0.25f) - oai(1.5, 0.25)) < 1e-6);
    QVERIFY(std::fabs(swiglu_oai(12.0f, -9.0f) - oai(7.0, -7.0)) < 1e-5);
    QVERIFY(std::fabs(swiglu_oai(-12.0f, 9.0f) - oai(-12.0, 7.0)) < 1e-6);  // no lower clamp on the gate
  }

  void embeddingMatchesReference_data() {
    QTest::addColumn<GgmlType>("type");
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_0}) {
      QTest::newRow(std::string(ggml_type_name(t)).c_str()) << t;
    }
  }
  void embeddingMatchesReference() {
    QFETCH(GgmlType, type);
    std::mt19937 rng(17);
    const int64_t vocab = 29, dim = odd_columns(type, false);
    const std::vector<uint8_t> table = random_tensor_bytes(type, vocab, dim, rng, 0.3f);
    const std::vector<int32_t> tokens = {28, 0, 5, 5};
    std::vector<float> ref(tokens.size() * static_cast<size_t>(dim)), fast(ref.size());
    EmbeddingArgs args{type, table.data(), vocab, dim, tokens.data(), 4, 3.5f, ref.data()};
    QVERIFY(embedding_lookup_ref(args));
    args.output = fast.data();
    QVERIFY(embedding_lookup(args));
    QVERIFY(max_relative_error(fast, ref) < 1e-6);
    const int32_t bad = 29;
    args.tokens = &bad;
    args.num_tokens = 1;
    QVERIFY(!embedding_lookup(args));
  }

  void attentionMatchesReference_data() {
    QTest::addColumn<int>("window");
    QTest::addColumn<float>("softcap");
    QTest::addColumn<int>("numTokens");
    QTest::newRow("causal prefill") << 0 << 0.0f << 5;
    QTest::newRow("decode") << 0 << 0.0f << 1;
    QTest::newRow("sliding window 8") << 8 << 0.0f << 5;
    QTest::newRow("softcap 30") << 0 << 30.0f << 3;
  }
  void attentionMatchesReference() {
    QFETCH(int, window);
    QFETCH(float, softcap);
    QFETCH(int, numTokens);
    std::mt19937 rng(19);
    const int64_t heads = 6, kv_heads = 2, head_dim = 40, head_dim_v = 24, num_kv = 37;
    const int64_t k_stride = kv_heads * head_dim + 8, v_stride = kv_heads * head_dim_v + 4;  // padded rows
    const std::vector<uint16_t> k = random_f16(static_cast<size_t>(num_kv * k_stride), rng, 1.0f);
    const std::vector<uint16_t> v = random_f16(static_cast<size_t>(num_kv * v_stride), rng, 1.0f);
    const std::vector<float> q = random_floats(static_cast<size_t>(numTokens * heads * head_dim), rng, 1.5f);
    std::vector<int32_t> positions(static_cast<size_t>(numTokens));
    for (int t = 0; t < numTokens; ++t) positions[t] = static_cast<int32_t>(num_kv - numTokens + t);
    std::vector<float> ref(static_cast<size_t>(numTokens * heads * head_dim_v), NAN), fast(ref.size(), NAN);
    AttentionArgs args;
    args.q = q.data();
    args.k = k.data();
    args.v = v.data();
    args.k_row_stride = k_stride;
    args.v_row_stride = v_stride;
    args.num_kv = num_kv;
    args.positions = positions.data();
    args.num_tokens = numTokens;
    args.num_heads = heads;
    args.num_kv_heads = kv_heads;
    args.head_dim = head_dim;
    args.head_dim_v = head_dim_v;
    args.scale = 1.0f / std::sqrt(float(head_dim));
    args.sliding_window = window;
    args.softcap = softcap;
    args.output = ref.data();
    QVERIFY(attention_ref(args));
    args.output = fast.data();
    args.num_threads = 2;
    QVERIFY(attention(args));
    QVERIFY2(max_relative_error(fast, ref) < 1e-5, qPrintable(QString::number(max_relative_error(fast, ref))));
    QVERIFY(attention_cost(args).flops > 0);
  }

  void costsCountTheWork() {
    std::vector<float> x(3 * 100, 1.0f), w(100, 1.0f);
    const OpCost norm = rmsnorm_cost({x.data(), w.data(), x.data(), 3, 100, 1e-6f});
    QCOMPARE(norm.flops, 4.0 * 300);
    QCOMPARE(norm.bytes, 8.0 * 300 + 400);
    const int32_t pos[2] = {0, 1};
    const OpCost r = rope_cost({x.data(), 2, 3, 50, 32, pos, RopeLayout::NeoX, 10000.0f, 1.0f, nullptr});
    QCOMPARE(r.flops, 3.0 * 2 * 3 * 32);
    QCOMPARE(gated_activation_cost({x.data(), x.data(), x.data(), 300, GatedActivation::SiLU, 0}).bytes, 12.0 * 300);
    QCOMPARE(softmax_cost({x.data(), 3, 100}).flops, 5.0 * 300);
    // A Q8_0 table row of 64 values is 2 blocks of 34 bytes.
    std::vector<uint8_t> table(10 * 68, 0);
    const int32_t tokens[3] = {1, 2, 3};
    const OpCost e = embedding_cost({GgmlType::Q8_0, table.data(), 10, 64, tokens, 3, 1.0f, x.data()});
    QCOMPARE(e.bytes, 3.0 * 68 + 4.0 * 3 * 64 + 4.0 * 3);
    // Decode attention at position 9 with 2 KV heads: 10 keys and values of 2 x (8 + 8) bytes each.
    std::vector<uint16_t> kv(10 * 2 * 8, 0);
    const int32_t at = 9;
    AttentionArgs a;
    a.q = x.data();
    a.k = kv.data();
    a.v = kv.data();
    a.k_row_stride = a.v_row_stride = 16;
    a.num_kv = 10;
    a.positions = &at;
    a.num_tokens = 1;
    a.num_heads = 4;
    a.num_kv_heads = 2;
    a.head_dim = a.head_dim_v = 8;
    a.output = x.data();
    const OpCost c = attention_cost(a);
    QCOMPARE(c.flops, 4.0 * 10 * (2.0 * 16 + 5.0));
    QCOMPARE(c.bytes, 2.0 * 10 * 2.0 * 16 + 4.0 * 4 * 16);
    QVERIFY(c.arithmetic_intensity() > 0);
  }

  void attentionIsCausalAndWindowed() {
    // A query at position 0 sees only key 0: the output is value 0 of its KV head, whatever
    // the later keys hold. With window 1, every query sees only its own position.
    std::mt19937 rng(23);
    const int64_t heads = 4, kv_heads = 1, dim = 16, num_kv = 6;
    std::vector<uint16_t> k = random_f16(static_cast<size_t>(num_kv * dim), rng, 1.0f);
    const std::vector<uint16_t> v = random_f16(static_cast<size_t>(num_kv * dim), rng, 1.0f);
    const std::vector<float> q = random_floats(static_cast<size_t>(2 * heads * dim), rng);
    const std::vector<int32_t> positions = {0, 4};
    std::vector<float> out(static_cast<size_t>(2 * heads * dim));
    AttentionArgs args;
    args.q = q.data();
    args.k = k.data();
    args.v = v.data();
    args.k_row_stride = dim;
    args.v_row_stride = dim;
    args.num_kv = num_kv;
    args.positions = positions.data();
    args.num_tokens = 2;
    args.num_heads = heads;
    args.num_kv_heads = kv_heads;
    args.head_dim = dim;
    args.head_dim_v = dim;
    args.output = out.data();
    args.sliding_window = 1;
    QVERIFY(attention(args));
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < dim; ++i) {
        QVERIFY(std::fabs(out[h * dim + i] - fp16_to_f32(v[i])) < 1e-6);
        QVERIFY(std::fabs(out[(heads + h) * dim + i] - fp16_to_f32(v[4 * dim + i])) < 1e-6);
      }
    }
    // Without a window the second query mixes keys 0..4 and never key 5.
    args.sliding_window = 0;
    QVERIFY(attention(args));
    const std::vector<float> before = out;
    for (int64_t i = 0; i < dim; ++i) k[5 * dim + i] = f32_to_fp16(100.0f);
    QVERIFY(attention(args));
    QCOMPARE(out, before);
    // A query past the filled cache is refused.
    const std::vector<int32_t> too_far = {0, 6};
    args.positions = too_far.data();
    QVERIFY(!attention(args));
  }
};

QTEST_APPLESS_MAIN(TestCpuKernels)
#include "test_cpu_kernels.moc"
