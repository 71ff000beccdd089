// White-box tests of the integer dot products on every CPU path this machine runs (portable,
// AVX2, AVX-512 VNNI): the activation quantizers bit for bit against the reference quantizers
// (rounding ties included), each path's row dot product against a double-precision dot of the
// dequantized weight and activation rows (the exact value of the integer arithmetic, so only
// f32 accumulation may differ), and the AVX-512 prefill tiles, token-lane kernels and GEMM
// (and the AVX2 GEMM of float weights) against the row dot products for every shape they take.
#include "quant_dot.h"
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
using iwb::test::random_floats;
using iwb::test::random_tensor_bytes;

Q_DECLARE_METATYPE(iwb::GgmlType)
Q_DECLARE_METATYPE(iwb::detail::CpuPath)

namespace {

const GgmlType kIntegerTypes[] = {GgmlType::Q4_0,  GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                  GgmlType::MXFP4, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

const char* path_name(CpuPath p) {
  switch (p) {
    case CpuPath::Portable: return "portable";
    case CpuPath::Avx2: return "avx2";
    case CpuPath::AvxVnni: return "avx-vnni";
    case CpuPath::Avx512: return "avx512";
  }
  return "?";
}

// The paths this process may run: everything up to cpu_path() (which honours IWB_CPU_AVX2,
// IWB_CPU_AVX_VNNI and IWB_CPU_PORTABLE) that this CPU has (an AVX-512 CPU may lack AVX-VNNI).
std::vector<CpuPath> available_paths() {
  std::vector<CpuPath> paths = {CpuPath::Portable};
  if (cpu_path() != CpuPath::Portable) paths.push_back(CpuPath::Avx2);
  if (cpu_path() != CpuPath::Avx2 && has_avx_vnni()) paths.push_back(CpuPath::AvxVnni);
  if (cpu_path() == CpuPath::Avx512) paths.push_back(CpuPath::Avx512);
  return paths;
}

bool select_on(CpuPath path, GgmlType type, DotKernels* k) {
  switch (path) {
    case CpuPath::Portable: return select_quant_dot_portable(type, k);
    case CpuPath::Avx2: return select_quant_dot_avx2(type, k);
    case CpuPath::AvxVnni: return select_quant_dot_avx_vnni(type, k);
    case CpuPath::Avx512: return select_quant_dot_avx512(type, k);
  }
  return false;
}

// Odd sizes: 37 blocks of 32 (an odd count leaves the AVX-512 pair loop a tail), 3 super-blocks.
int64_t columns(GgmlType type) { return ggml_type_traits(type).block_size == kQK_K ? 3 * kQK_K : 37 * kQK8_0; }

// The values a quantized activation row stands for.
std::vector<double> dequantized_activation(ActivationFormat format, const uint8_t* row, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  if (format == ActivationFormat::Q8_1) {
    const auto* b = reinterpret_cast<const BlockQ8A*>(row);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(b[i / 32].d) * b[i / 32].qs[i % 32];
  } else {
    const auto* b = reinterpret_cast<const BlockQ8_K*>(row);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(b[i / kQK_K].d) * b[i / kQK_K].qs[i % kQK_K];
  }
  return out;
}

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

double abs_dot(const std::vector<float>& w, const std::vector<double>& a) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += std::fabs(w[i] * a[i]);
  return s;
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
    uint8_t* packed = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
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
    uint8_t* packed = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
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
    for (int64_t t = 0; t < max_tokens; ++t) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 1.0f, 0.1f * static_cast<float>(t));
      k.quantize(x.data(), act.data() + t * act_stride, n);
    }
    const std::vector<float> bias = random_floats(rows, rng, 0.1f);
    std::vector<uint8_t> storage(quant_gemm_buffer_bytes(type, n) + 64);
    uint8_t* buffer = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
    std::vector<float> wf(static_cast<size_t>(n));
    for (int num_rows : {1, static_cast<int>(rows) - 3, static_cast<int>(rows)}) {
      for (int64_t tokens = k.gemm_min_tokens; tokens <= max_tokens; ++tokens) {
        const int64_t out_stride = num_rows + 3;  // rows of the output need not be packed
        std::vector<float> out(static_cast<size_t>(tokens * out_stride), NAN);
        k.gemm(w.data(), stride, num_rows, act.data(), act_stride, tokens, n, bias.data(), out.data(), out_stride,
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
    uint8_t* buffer = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
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

QTEST_APPLESS_MAIN(TestQuantDot)
#include "test_quant_dot.moc"
