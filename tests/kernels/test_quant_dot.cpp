// White-box tests of the integer dot products on every CPU path this machine runs (portable,
// AVX2, AVX-512 VNNI): the activation quantizers bit for bit against the reference quantizers
// (rounding ties included), each path's row dot product against a double-precision dot of the
// dequantized weight and activation rows (the exact value of the integer arithmetic, so only
// f32 accumulation may differ), the decode layouts' dots and the several-token dots (bit for
// bit against one token's). The many-token kernels (tiles, token lanes, GEMMs) are
// test_quant_tiles.cpp's.
#include "quant_dot.h"
#include "quant_dot_test_support.h"
#include "quant_unpack_common.h"
#include "random_tensors.h"

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/quantize.h"

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

// Activations with the cases rounding must get right: ties at .5 (x / d exact), a block
// whose largest magnitude is negative, a block where +a and -a tie for the largest.
std::vector<float> tricky_activations(int64_t n, int block, std::mt19937& rng) {
  std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 1.0f, 0.1f);
  // Block 0: amax 127 so d = 1 (Q8_1) and iscale = -1 (Q8_K, negative extreme): x / d = x.
  x[0] = -127.0f;
  for (int j = 1; j < block; ++j) x[j] = static_cast<float>(j % 9) - 4.5f;  // every value a tie
  // Block 1: +3 then -3 tie for the largest magnitude; the first one sets the sign.
  if (n >= 2 * block) {
    for (int j = 0; j < block; ++j) x[block + j] = 0.25f * static_cast<float>(j % 5);
    x[block + 3] = 3.0f;
    x[block + 7] = -3.0f;
  }
  return x;
}

// A several-token kernel (vec_dot_tokens, decode_dot_tokens) on 1..kMaxDecodeTokens tokens at
// once: each token's result the one-token kernel's, bit for bit, on every row. The tokens'
// activations (of uneven ranges and means) come from generators of their own, so the callers'
// later draws stay as they were.
void check_dot_tokens(VecDotTokensFn tokens, VecDotFn one, QuantizeActivationFn quantize, size_t activation_bytes,
                      const uint8_t* w, size_t stride, int64_t rows, int64_t n, const QString& where) {
  std::vector<std::vector<uint8_t>> acts(kMaxDecodeTokens, std::vector<uint8_t>(activation_bytes));
  const void* pointers[kMaxDecodeTokens];
  for (int t = 0; t < kMaxDecodeTokens; ++t) {
    std::mt19937 rng(static_cast<uint32_t>(131 + 7 * t + n));
    const std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 1.0f + 0.5f * t, 0.1f * (t % 3) - 0.1f);
    quantize(x.data(), acts[t].data(), n);
    pointers[t] = acts[t].data();
  }
  for (int count = 1; count <= kMaxDecodeTokens; ++count) {
    for (int64_t r = 0; r < rows; ++r) {
      float out[kMaxDecodeTokens];
      tokens(w + r * stride, pointers, count, n, out);
      for (int t = 0; t < count; ++t) {
        const float alone = one(w + r * stride, pointers[t], n);
        QVERIFY2(out[t] == alone, qPrintable(where + QString("%1 tokens, row %2, token %3: %4 vs one token's %5")
                                                         .arg(count)
                                                         .arg(r)
                                                         .arg(t)
                                                         .arg(out[t], 0, 'g', 9)
                                                         .arg(alone, 0, 'g', 9)));
      }
    }
  }
}

// One row per weight row of a 7-row tensor whose last row ends its allocation (reads past a
// row show up under ASan), against the dequantized row dotted with the dequantized activations.
void check_vec_dot(const DotKernels& k, GgmlType type, int64_t n, std::mt19937& rng) {
  const int64_t rows = 7;
  const std::vector<uint8_t> w = random_tensor_bytes(type, rows, n, rng, 0.05f);
  const size_t stride = *ggml_row_bytes(type, n);
  const std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 1.0f, 0.2f);
  std::vector<uint8_t> act(activation_row_bytes(k.format, n));
  k.quantize(x.data(), act.data(), n);
  const std::vector<double> a = dequantized_activation(k.format, act.data(), n);
  std::vector<float> wf(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    QVERIFY(dequantize_row_ref(type, w.data() + r * stride, wf.data(), n));
    double expected = 0;
    for (int64_t i = 0; i < n; ++i) expected += wf[i] * a[i];
    const double got = k.vec_dot(w.data() + r * stride, act.data(), n);
    // The integer sums are exact; f32 accumulation across blocks (and fp16 -> f32 scales,
    // exact) leaves errors near 1e-7 of the sum of |products|.
    const double bound = 1e-5 * abs_dot(wf, a);
    QVERIFY2(std::fabs(got - expected) <= bound,
             qPrintable(QString("row %1: %2 vs %3 (bound %4)").arg(r).arg(got).arg(expected).arg(bound)));
  }
  if (k.vec_dot_tokens != nullptr) {
    check_dot_tokens(k.vec_dot_tokens, k.vec_dot, k.quantize, act.size(), w.data(), stride, rows, n,
                     QString("vec_dot_tokens, %1 values: ").arg(n));
    if (QTest::currentTestFailed()) return;
  }
  // Two tokens at once (vec_dot2, where a kernel has it): each token's result the one-token
  // kernel's, bit for bit. The second token's data come from a generator of their own, so the
  // first token's (and the callers' later draws) stay as they were.
  if (k.vec_dot2 == nullptr) return;
  std::mt19937 rng2(static_cast<uint32_t>(57 + n));
  const std::vector<float> x2 = random_floats(static_cast<size_t>(n), rng2, 1.0f, -0.1f);
  std::vector<uint8_t> act2(activation_row_bytes(k.format, n));
  k.quantize(x2.data(), act2.data(), n);
  for (int64_t r = 0; r < rows; ++r) {
    float two[2];
    k.vec_dot2(w.data() + r * stride, act.data(), act2.data(), n, two);
    const float first = k.vec_dot(w.data() + r * stride, act.data(), n);
    const float second = k.vec_dot(w.data() + r * stride, act2.data(), n);
    QVERIFY2(two[0] == first && two[1] == second, qPrintable(QString("row %1: vec_dot2 %2, %3 vs vec_dot %4, %5")
                                                                 .arg(r)
                                                                 .arg(two[0], 0, 'g', 9)
                                                                 .arg(two[1], 0, 'g', 9)
                                                                 .arg(first, 0, 'g', 9)
                                                                 .arg(second, 0, 'g', 9)));
  }
}

}  // namespace

class TestQuantDot : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    qInfo("widest path: %s%s", path_name(cpu_path()), has_avx512_vbmi() ? " with AVX512-VBMI" : "");
    if (qEnvironmentVariable("IWB_CPU_NO_VBMI") == "1") QVERIFY(!has_avx512_vbmi());
    if (qEnvironmentVariable("IWB_CPU_PORTABLE") == "1") QCOMPARE(cpu_path(), CpuPath::Portable);
    if (qEnvironmentVariable("IWB_CPU_AVX2") == "1") QVERIFY(cpu_path() != CpuPath::Avx512);
    if (qEnvironmentVariable("IWB_CPU_AVX_VNNI") == "1") {
      if (has_avx_vnni()) {
        QCOMPARE(cpu_path(), CpuPath::AvxVnni);
      } else {
        qInfo("IWB_CPU_AVX_VNNI=1 but this CPU has no AVX-VNNI: the widest path it has instead");
      }
    }
  }

  void quantizersMatchReference_data() {
    QTest::addColumn<CpuPath>("path");
    for (CpuPath p : available_paths()) QTest::newRow(path_name(p)) << p;
  }
  void quantizersMatchReference() {
    QFETCH(CpuPath, path);
    std::mt19937 rng(21);
    // Q8_1 (f32 fields): qs exactly as quantize_row_q8_1_ref, d and s its values before fp16.
    {
      const int64_t n = 37 * 32;
      std::vector<float> x = tricky_activations(n, 32, rng);
      for (int j = 64; j < 96; ++j) x[j] = 0.0f;  // an all-zero block
      std::vector<BlockQ8A> fast(n / 32);
      std::vector<BlockQ8_1> ref(n / 32);
      select_activation_quantizer(ActivationFormat::Q8_1, path)(x.data(), fast.data(), n);
      QVERIFY(quantize_row_q8_1_ref(x.data(), ref.data(), n));
      for (size_t b = 0; b < ref.size(); ++b) {
        QVERIFY2(std::memcmp(fast[b].qs, ref[b].qs, 32) == 0, qPrintable(QString("block %1").arg(b)));
        QCOMPARE(f32_to_fp16(fast[b].d), ref[b].d);
        int sum = 0;
        for (int8_t q : fast[b].qs) sum += q;
        QCOMPARE(fast[b].s, fast[b].d * static_cast<float>(sum));
      }
      QCOMPARE(int(fast[0].qs[5]), 1);  // 0.5 rounds away from zero
      QCOMPARE(int(fast[0].qs[7]), 3);  // 2.5 too
    }
    // Q8_K: every byte as quantize_row_q8_k_ref (it rounds ties to even).
    {
      const int64_t n = 4 * kQK_K;
      std::vector<float> x = tricky_activations(n, kQK_K, rng);
      for (int j = 2 * kQK_K; j < 3 * kQK_K; ++j) x[j] = 0.0f;
      std::vector<BlockQ8_K> fast(n / kQK_K), ref(n / kQK_K);
      select_activation_quantizer(ActivationFormat::Q8_K, path)(x.data(), fast.data(), n);
      QVERIFY(quantize_row_q8_k_ref(x.data(), ref.data(), n));
      for (size_t b = 0; b < ref.size(); ++b) {
        QVERIFY2(std::memcmp(&fast[b], &ref[b], sizeof(BlockQ8_K)) == 0, qPrintable(QString("block %1").arg(b)));
      }
      QCOMPARE(int(fast[0].qs[5]), 0);  // 0.5 rounds to even
      QCOMPARE(int(fast[0].qs[7]), 2);  // 2.5 too
      QVERIFY(fast[1].d < 0.0f);        // +3 came before -3: iscale = -127 / 3
    }
  }

  void vecDotMatchesDequantizedDot_data() {
    QTest::addColumn<CpuPath>("path");
    QTest::addColumn<GgmlType>("type");
    for (CpuPath p : available_paths()) {
      for (GgmlType t : kIntegerTypes) {
        QTest::newRow((std::string(path_name(p)) + " " + std::string(ggml_type_name(t))).c_str()) << p << t;
      }
    }
  }
  void vecDotMatchesDequantizedDot() {
    QFETCH(CpuPath, path);
    QFETCH(GgmlType, type);
    DotKernels k;
    QVERIFY(select_on(path, type, &k));
    QVERIFY(k.quantize != nullptr && k.vec_dot != nullptr);
    std::mt19937 rng(31 + static_cast<int>(type));
    // Block counts of every remainder the AVX-512 four-block loop leaves (36..39 blocks of 32).
    const bool is_k = ggml_type_traits(type).block_size == kQK_K;
    for (int64_t extra = 0; extra < (is_k ? 1 : 4); ++extra) {
      const int64_t n = columns(type) + (is_k ? 0 : (extra - 1) * kQK8_0);
      check_vec_dot(k, type, n, rng);
      if (QTest::currentTestFailed()) return;
    }
  }
  // One token on a kernel's own decode layout (Q4_0 pairs or groups, the K-quants' super-block
  // layouts; and two at once where a kernel has decode_dot2, each equal to the one-token dot),
  // on block counts of every remainder (1..37 blocks, odd lengths): against the f32
  // dot within the worst case of rounding each activation to 8 bits (half a step of its block's
  // scale), and for the K-quants, whose layouts hold the Q8_K quantizer's own values, against
  // vec_dot on Q8_K within f32 summation order.
  void decodeLayoutMatchesVecDot_data() {
    QTest::addColumn<CpuPath>("path");
    QTest::addColumn<GgmlType>("type");
    int num_rows = 0;
    for (CpuPath p : available_paths()) {
      for (GgmlType t : kIntegerTypes) {
        DotKernels k;
        if (!select_on(p, t, &k) || k.decode_quantize == nullptr) continue;
        QTest::newRow((std::string(path_name(p)) + " " + std::string(ggml_type_name(t))).c_str()) << p << t;
        ++num_rows;
      }
    }
    if (num_rows == 0) QTest::newRow("none") << CpuPath::Portable << GgmlType::F32;
  }
  void decodeLayoutMatchesVecDot() {
    QFETCH(CpuPath, path);
    QFETCH(GgmlType, type);
    DotKernels k;
    if (!select_on(path, type, &k) || k.decode_quantize == nullptr) QSKIP("no path of this CPU has a decode layout");
    const int64_t block = ggml_type_traits(type).block_size;
    const bool is_k = block == kQK_K;
    std::mt19937 rng(57 + static_cast<int>(type));
    for (const int64_t blocks : {1, 2, 3, 5, 6, 7, 35, 37}) {
      const int64_t n = blocks * block, rows = 5;
      const std::vector<uint8_t> w = random_tensor_bytes(type, rows, n, rng, 0.05f);
      const size_t stride = *ggml_row_bytes(type, n);
      std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 1.0f, 0.2f);
      for (size_t i = 0; i < x.size(); i += 61) x[i] *= 6.0f;  // blocks of uneven range
      std::vector<uint8_t> layout(k.decode_activation_bytes(n)), act(activation_row_bytes(k.format, n));
      k.decode_quantize(x.data(), layout.data(), n);
      k.quantize(x.data(), act.data(), n);
      // A second token, for the kernels that dot two at once (decode_dot2), from a generator of
      // its own so the first token's data stay as they were.
      std::mt19937 rng2(static_cast<uint32_t>(91 + blocks));
      const std::vector<float> x2 = random_floats(static_cast<size_t>(n), rng2, 1.0f, -0.1f);
      std::vector<uint8_t> layout2(k.decode_activation_bytes(n));
      k.decode_quantize(x2.data(), layout2.data(), n);
      std::vector<float> wf(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        QVERIFY(dequantize_row_ref(type, w.data() + r * stride, wf.data(), n));
        double exact = 0, rounding = 0;
        for (int64_t b0 = 0; b0 < n; b0 += kQK8_0) {  // 32-value blocks: the finest activation scale
          double amax = 0;
          for (int64_t i = b0; i < b0 + kQK8_0; ++i) amax = std::max(amax, std::fabs(double(x[i])));
          for (int64_t i = b0; i < b0 + kQK8_0; ++i) {
            exact += double(wf[i]) * x[i];
            rounding += std::fabs(double(wf[i])) * (is_k ? 0.0 : amax / 254.0);
          }
        }
        if (is_k) {  // Q8_K's scale covers 256 values
          rounding = 0;
          for (int64_t b0 = 0; b0 < n; b0 += kQK_K) {
            double amax = 0;
            for (int64_t i = b0; i < b0 + kQK_K; ++i) amax = std::max(amax, std::fabs(double(x[i])));
            for (int64_t i = b0; i < b0 + kQK_K; ++i) rounding += std::fabs(double(wf[i])) * amax / 254.0;
          }
        }
        const double got = k.decode_dot(w.data() + r * stride, layout.data(), n);
        const QString where = QString("%1 blocks, row %2: ").arg(blocks).arg(r);
        if (k.decode_dot2 != nullptr) {  // each token's result the one-token kernel's, bit for bit
          float two[2];
          k.decode_dot2(w.data() + r * stride, layout.data(), layout2.data(), n, two);
          const float second = k.decode_dot(w.data() + r * stride, layout2.data(), n);
          QVERIFY2(two[0] == static_cast<float>(got) && two[1] == second,
                   qPrintable(where + QString("decode_dot2 %1, %2 vs decode_dot %3, %4")
                                          .arg(two[0], 0, 'g', 9)
                                          .arg(two[1], 0, 'g', 9)
                                          .arg(got, 0, 'g', 9)
                                          .arg(second, 0, 'g', 9)));
        }
        QVERIFY2(std::fabs(got - exact) <= rounding * 1.01 + 1e-6,
                 qPrintable(where + QString("%1 vs f32 %2 (bound %3)").arg(got).arg(exact).arg(rounding)));
        if (is_k) {
          const double general = k.vec_dot(w.data() + r * stride, act.data(), n);
          double abs_sum = 0;
          for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs(double(wf[i]) * x[i]);
          QVERIFY2(std::fabs(got - general) <= 1e-5 * abs_sum,
                   qPrintable(where + QString("%1 vs vec_dot %2").arg(got).arg(general)));
        }
      }
      if (k.decode_dot_tokens != nullptr) {
        check_dot_tokens(k.decode_dot_tokens, k.decode_dot, k.decode_quantize, layout.size(), w.data(), stride, rows, n,
                         QString("decode_dot_tokens, %1 blocks: ").arg(blocks));
        if (QTest::currentTestFailed()) return;
      }
    }
  }
  // Q4_K/Q5_K scales and mins unpacked in a vector (the AVX-512 decode kernel's) against the
  // scalar unpack, on random scale bytes (every bit pattern of the 6-bit fields) and the extremes.
  void k4ScaleUnpackVectorMatchesScalar() {
#if defined(__x86_64__) || defined(__i386__)
    std::mt19937 rng(12);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int trial = 0; trial < 20000; ++trial) {
      uint8_t packed[16];
      for (uint8_t& b : packed) b = static_cast<uint8_t>(trial == 0 ? 0 : trial == 1 ? 255 : byte(rng));
      uint64_t sc = 0, m = 0;
      unpack_k4_scales(packed, &sc, &m);
      uint8_t got[16];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(got), unpack_k4_scales_vector(packed));
      for (int j = 0; j < 8; ++j) {
        QCOMPARE(int(got[j]), k4_byte(sc, j));
        QCOMPARE(int(got[8 + j]), k4_byte(m, j));
      }
    }
#else
    QSKIP("x86 only");
#endif
  }
  // MXFP4's exponents 0 and 1 are f32 subnormals (2^-128, 2^-127), which the SIMD kernels build
  // in their own code: blocks of exponents 0..3 against activations of about 2^100 (so that
  // d_w * d_a is a normal float) on every path.
  void mxfp4SubnormalScales_data() {
    QTest::addColumn<CpuPath>("path");
    for (CpuPath p : available_paths()) QTest::newRow(path_name(p)) << p;
  }
  void mxfp4SubnormalScales() {
    QFETCH(CpuPath, path);
    DotKernels k;
    QVERIFY(select_on(path, GgmlType::MXFP4, &k));
    std::mt19937 rng(45);
    const int64_t n = 39 * kQKMxfp4;
    std::vector<uint8_t> w = random_tensor_bytes(GgmlType::MXFP4, 1, n, rng, 1.0f);
    for (int64_t b = 0; b < n / kQKMxfp4; ++b) w[b * sizeof(BlockMxfp4)] = static_cast<uint8_t>(b % 4);
    std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 1.0f, 0.2f);
    for (float& v : x) v = std::ldexp(v, 100);
    std::vector<uint8_t> act(activation_row_bytes(k.format, n));
    k.quantize(x.data(), act.data(), n);
    const std::vector<double> a = dequantized_activation(k.format, act.data(), n);
    std::vector<float> wf(static_cast<size_t>(n));
    QVERIFY(dequantize_row_ref(GgmlType::MXFP4, w.data(), wf.data(), n));
    QVERIFY(std::any_of(wf.begin(), wf.end(), [](float v) { return std::fpclassify(v) == FP_SUBNORMAL; }));
    double expected = 0;
    for (int64_t i = 0; i < n; ++i) expected += wf[i] * a[i];
    const double got = k.vec_dot(w.data(), act.data(), n);
    const double bound = 1e-5 * abs_dot(wf, a);
    QVERIFY2(std::fabs(got - expected) <= bound, qPrintable(QString("%1 vs %2").arg(got).arg(expected)));
  }
};

QTEST_APPLESS_MAIN(TestQuantDot)
#include "test_quant_dot.moc"
