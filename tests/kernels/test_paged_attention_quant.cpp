// The quantized paged KV cache (keys and values each f16, Q8_0, Q5_1, Q5_0, Q4_1 or Q4_0): the
// write stores exactly ggml's reference blocks of each slot's Hadamard-rotated row; the fast attention matches
// its double reference; the attention output stays within each type's error budget of attention
// in f32 over the unrounded keys and values (odd head counts and sizes, random data with a few
// large key channels as real models have); FP8 with vLLM's calculated scales keeps that error on
// data far too small or too large for unscaled E4M3; shapes and values it cannot hold are refused.
#include "cpu_features.h"

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/paged_attention.h"
#include "iwb/kernels/quant_blocks.h"
#include "iwb/kernels/quantize.h"
#include "random_tensors.h"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>

using namespace iwb;
using namespace iwb::test;

namespace {

// Odd group (3 query heads per KV head), head sizes multiples of 32 that are not powers of two;
// sequences of 37 and 45 positions over blocks of 16. Two shapes: keys 96 and values 160 (the
// per-pair kernel), keys 160 and values 128 (on AVX-512 the tiled kernel).
constexpr int64_t kHeads = 6, kKvHeads = 2, kBlock = 16, kPoolBlocks = 9;
int64_t kDim = 96, kDimV = 160, kRowK = kKvHeads * kDim, kRowV = kKvHeads * kDimV;
void set_shape(int64_t dim, int64_t dim_v) {
  kDim = dim;
  kDimV = dim_v;
  kRowK = kKvHeads * dim;
  kRowV = kKvHeads * dim_v;
}
const int64_t kShapes[2][2] = {{96, 160}, {160, 128}};
const std::vector<int32_t> kLengths = {37, 45};
const std::vector<int32_t> kTables = {4, 0, 7, 2, 8, 5};                    // [2 x 3]
const std::vector<float> kSinks = {-3.0f, 0.5f, 2.0f, 6.0f, -0.25f, 1.0f};  // [kHeads]

const GgmlType kTypes[] = {GgmlType::F16,  GgmlType::Q8_0, GgmlType::Q5_1,   GgmlType::Q5_0,
                           GgmlType::Q4_1, GgmlType::Q4_0, GgmlType::F8_E4M3};

const char* type_name(GgmlType t) { return t == GgmlType::F8_E4M3 ? "fp8_e4m3" : ggml_type_name(t).data(); }

struct Cache {
  std::vector<uint16_t> k, v;
};

struct Data {
  std::vector<int64_t> slot_ids;
  std::vector<float> k, v, q;  // f32 keys and values of every position, queries of the tokens below
  std::vector<int32_t> token_sequences, positions;
  int64_t num_tokens() const { return static_cast<int64_t>(positions.size()); }
};

Data make_data(uint32_t seed) {
  std::mt19937 rng(seed);
  Data d;
  for (int s = 0; s < 2; ++s) {
    for (int32_t p = 0; p < kLengths[static_cast<size_t>(s)]; ++p) {
      d.slot_ids.push_back(kTables[static_cast<size_t>(s * 3 + p / kBlock)] * kBlock + p % kBlock);
    }
  }
  const auto n = static_cast<int64_t>(d.slot_ids.size());
  d.k = random_floats(static_cast<size_t>(n * kRowK), rng);
  // A few key channels an order of magnitude larger (and offset), as a bias gives real keys:
  // they set their blocks' scales, so the small values beside them lose most to rounding.
  for (int64_t t = 0; t < n; ++t) {
    for (const int64_t c : {int64_t{5}, int64_t{70}, kDim + 33})
      d.k[static_cast<size_t>(t * kRowK + c)] = 12.0f + 3.0f * d.k[static_cast<size_t>(t * kRowK + c)];
  }
  d.v = random_floats(static_cast<size_t>(n * kRowV), rng);
  // Queries: the last 5 positions of sequence 0 and 9 of sequence 1 (odd counts, a prefill chunk).
  for (int32_t p = 32; p < 37; ++p) d.token_sequences.push_back(0), d.positions.push_back(p);
  for (int32_t p = 36; p < 45; ++p) d.token_sequences.push_back(1), d.positions.push_back(p);
  d.q = random_floats(static_cast<size_t>(d.num_tokens() * kHeads * kDim), rng);
  return d;
}

Cache write_cache(GgmlType k_type, GgmlType v_type, const Data& d, bool is_reference = false, float k_scale = 1.0f,
                  float v_scale = 1.0f) {
  Cache c;
  c.k.assign(static_cast<size_t>(kPoolBlocks * kBlock * kv_row_units(k_type, kRowK)), 0);
  c.v.assign(static_cast<size_t>(kPoolBlocks * kBlock * kv_row_units(v_type, kRowV)), 0);
  WriteKvPagedArgs w;
  w.k = d.k.data();
  w.v = d.v.data();
  w.slot_mapping = d.slot_ids.data();
  w.num_tokens = static_cast<int64_t>(d.slot_ids.size());
  w.k_cache = c.k.data();
  w.v_cache = c.v.data();
  w.num_slots = kPoolBlocks * kBlock;
  w.k_row = kRowK;
  w.v_row = kRowV;
  w.num_kv_heads = kKvHeads;
  w.k_type = k_type;
  w.v_type = v_type;
  w.k_scale = k_scale;
  w.v_scale = v_scale;
  if (!(is_reference ? write_kv_paged_ref(w) : write_kv_paged(w))) c.k.clear();
  return c;
}

std::vector<float> attend(const Cache& c, GgmlType k_type, GgmlType v_type, const Data& d, bool is_reference,
                          int64_t window, float k_scale = 1.0f, float v_scale = 1.0f, const float* sinks = nullptr) {
  std::vector<float> out(static_cast<size_t>(d.num_tokens() * kHeads * kDimV), -1.0f);
  PagedAttentionArgs a;
  a.q = d.q.data();
  a.k_cache = c.k.data();
  a.v_cache = c.v.data();
  a.num_blocks = kPoolBlocks;
  a.block_size = kBlock;
  a.block_tables = kTables.data();
  a.max_blocks_per_sequence = 3;
  a.sequence_lengths = kLengths.data();
  a.num_sequences = 2;
  a.token_sequences = d.token_sequences.data();
  a.positions = d.positions.data();
  a.num_tokens = d.num_tokens();
  a.num_heads = kHeads;
  a.num_kv_heads = kKvHeads;
  a.head_dim = kDim;
  a.head_dim_v = kDimV;
  a.scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  a.sliding_window = window;
  a.output = out.data();
  a.num_threads = 2;
  a.k_type = k_type;
  a.v_type = v_type;
  a.k_scale = k_scale;
  a.v_scale = v_scale;
  a.sinks = sinks;
  const bool ok = is_reference ? paged_attention_ref(a) : paged_attention(a);
  return ok ? out : std::vector<float>{};
}

// Attention in double over the f32 keys and values themselves (no cache, no rounding).
std::vector<float> attend_f32(const Data& d, int64_t window) {
  std::vector<float> out(static_cast<size_t>(d.num_tokens() * kHeads * kDimV));
  std::vector<int64_t> first_row = {0, kLengths[0]};  // row of position 0 of each sequence in k/v
  for (int64_t t = 0; t < d.num_tokens(); ++t) {
    const int64_t s = d.token_sequences[static_cast<size_t>(t)], pos = d.positions[static_cast<size_t>(t)];
    const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t g = h / (kHeads / kKvHeads);
      const float* q = d.q.data() + (t * kHeads + h) * kDim;
      std::vector<double> w;
      double max = -INFINITY;
      for (int64_t p = first; p <= pos; ++p) {
        const float* k = d.k.data() + (first_row[static_cast<size_t>(s)] + p) * kRowK + g * kDim;
        double x = 0;
        for (int64_t i = 0; i < kDim; ++i) x += static_cast<double>(q[i]) * k[i];
        w.push_back(x / std::sqrt(static_cast<double>(kDim)));
        max = std::max(max, w.back());
      }
      double sum = 0;
      for (double& x : w) sum += (x = std::exp(x - max));
      for (int64_t i = 0; i < kDimV; ++i) {
        double acc = 0;
        for (int64_t p = first; p <= pos; ++p) {
          acc += w[static_cast<size_t>(p - first)] / sum *
                 d.v[static_cast<size_t>((first_row[static_cast<size_t>(s)] + p) * kRowV + g * kDimV + i)];
        }
        out[static_cast<size_t>((t * kHeads + h) * kDimV + i)] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

// The fast kernels' agreement with the reference: the f32 kernels' ~1.4e-6 of the largest
// output, or, where prompts take AMX tiles (bf16 hi + lo splits of the queries and
// probabilities, 2^-17: paged_attention_amx.cpp), up to ~1.03e-5 measured.
double fast_tolerance() {
  return detail::has_amx_bf16() && qEnvironmentVariable("IWB_ATTENTION_AMX") != "0" ? 3e-5 : 1e-5;
}

double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return num / den;
}

// ||a - b|| / ||b||: the output's relative RMS error.
double rms_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// Budget of the output's relative RMS error against f32 attention, the same type on both sides:
// a quarter above the largest that the cache gave on this data (2026-11-27, 4 seeds x 2 windows
// x 2 shapes): f16 0.00044, q8_0 0.0090, q5_1 0.064, q5_0 0.074, q4_1 0.135, q4_0 0.141, fp8_e4m3
// 0.054 (3 mantissa bits everywhere: large channels cost their neighbours nothing). Before
// the cache rotated its rows (plain ggml blocks, as this kernel stored them until then) the large
// key channels set their blocks' scales and the errors were about twice that: q8_0 0.0157 to
// 0.0186, q5_1 0.097, q5_0 0.154, q4_1 0.213, q4_0 0.314 — over these budgets. A mixed pair
// gets the sum of its sides' budgets.
double error_budget(GgmlType type) {
  switch (type) {
    case GgmlType::F16: return 6e-4;
    case GgmlType::Q8_0: return 0.012;
    case GgmlType::Q5_1: return 0.08;
    case GgmlType::Q5_0: return 0.093;
    case GgmlType::Q4_1: return 0.17;
    case GgmlType::F8_E4M3: return 0.068;
    default: return 0.18;
  }
}

// The rotation the cache applies before quantizing, computed the slow way: pieces of `size`
// values times Sylvester's Hadamard matrix, H[i][j] = (-1)^popcount(i & j) / sqrt(size).
std::vector<float> rotated(const float* x, int64_t n, int64_t size) {
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t base = 0; base < n; base += size) {
    for (int64_t i = 0; i < size; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < size; ++j) acc += (__builtin_popcountll(i & j) % 2 ? -1.0 : 1.0) * x[base + j];
      y[static_cast<size_t>(base + i)] = static_cast<float>(acc / std::sqrt(static_cast<double>(size)));
    }
  }
  return y;
}

// Rotation sizes: keys the largest power of two dividing the head size, values 64 (32 when the
// head size is not a multiple of 64).
int64_t key_rotation(int64_t dim) {
  int64_t size = 32;
  while (dim % (size * 2) == 0) size *= 2;
  return size;
}

}  // namespace

class TestPagedAttentionQuant : public QObject {
  Q_OBJECT

 private slots:
  void writesReferenceBlocks() {
    for (const auto& shape : kShapes) {
      set_shape(shape[0], shape[1]);
      const Data d = make_data(23);
      for (const GgmlType type : kTypes) {
        const Cache c = write_cache(type, type, d);
        const Cache ref = write_cache(type, type, d, true);
        QVERIFY(!c.k.empty() && !ref.k.empty());
        QVERIFY(c.k == ref.k && c.v == ref.v);
        if (type == GgmlType::F16 || type == GgmlType::F8_E4M3) continue;
        // Every written slot holds ggml's reference blocks of its row, rotated head by head.
        const int64_t units_k = kv_row_units(type, kRowK), units_v = kv_row_units(type, kRowV);
        std::vector<uint16_t> expected(static_cast<size_t>(std::max(units_k, units_v)));
        for (size_t t = 0; t < d.slot_ids.size(); t += 7) {
          const std::vector<float> k = rotated(d.k.data() + static_cast<int64_t>(t) * kRowK, kRowK, key_rotation(kDim));
          QVERIFY(quantize_row_ref(type, k.data(), expected.data(), kRowK, nullptr));
          QCOMPARE(std::memcmp(c.k.data() + d.slot_ids[t] * units_k, expected.data(), static_cast<size_t>(units_k) * 2),
                   0);
          const std::vector<float> v =
              rotated(d.v.data() + static_cast<int64_t>(t) * kRowV, kRowV, kDimV % 64 == 0 ? 64 : 32);
          QVERIFY(quantize_row_ref(type, v.data(), expected.data(), kRowV, nullptr));
          QCOMPARE(std::memcmp(c.v.data() + d.slot_ids[t] * units_v, expected.data(), static_cast<size_t>(units_v) * 2),
                   0);
        }
      }
    }
  }

  void fastMatchesReference() {
    for (const auto& shape : kShapes) {
      set_shape(shape[0], shape[1]);
      const Data d = make_data(29);
      for (const GgmlType k_type : kTypes) {
        for (const GgmlType v_type : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
          const Cache c = write_cache(k_type, v_type, d);
          QVERIFY(!c.k.empty());
          for (const int64_t window : {int64_t{0}, int64_t{11}, int64_t{-11}}) {
            // Window -11: window 11 with gpt-oss's per-head sink logits.
            const float* sinks = window < 0 ? kSinks.data() : nullptr;
            const std::vector<float> ref = attend(c, k_type, v_type, d, true, std::abs(window), 1.0f, 1.0f, sinks);
            const std::vector<float> fast = attend(c, k_type, v_type, d, false, std::abs(window), 1.0f, 1.0f, sinks);
            QVERIFY(!ref.empty() && !fast.empty());
            const double e = max_relative(fast, ref);
            QVERIFY2(e < fast_tolerance(),
                     qPrintable(QStringLiteral("%1/%2: %3").arg(type_name(k_type), type_name(v_type)).arg(e)));
          }
        }
      }
    }
  }

  // The attention output of each cache type against attention in f32 over the same keys and
  // values, within the type's budget; K and V types may differ (the error of a pair is at most
  // about the sum of each side's).
  void outputErrorAgainstF32_data() {
    QTest::addColumn<int>("k_type");
    QTest::addColumn<int>("v_type");
    for (const GgmlType t : kTypes) {
      QTest::newRow(type_name(t)) << static_cast<int>(t) << static_cast<int>(t);
    }
    QTest::newRow("q8_0/q4_0") << static_cast<int>(GgmlType::Q8_0) << static_cast<int>(GgmlType::Q4_0);
    QTest::newRow("q4_0/f16") << static_cast<int>(GgmlType::Q4_0) << static_cast<int>(GgmlType::F16);
  }
  void outputErrorAgainstF32() {
    QFETCH(int, k_type);
    QFETCH(int, v_type);
    const auto k = static_cast<GgmlType>(k_type), v = static_cast<GgmlType>(v_type);
    const double budget = k == v ? error_budget(k) : error_budget(k) + error_budget(v);
    for (const uint32_t seed : {31u, 36u, 41u, 46u}) {
      set_shape(kShapes[seed % 2][0], kShapes[seed % 2][1]);
      const Data d = make_data(seed);
      const Cache c = write_cache(k, v, d);
      QVERIFY(!c.k.empty());
      for (const int64_t window : {int64_t{0}, int64_t{11}}) {
        const std::vector<float> out = attend(c, k, v, d, false, window);
        QVERIFY(!out.empty());
        const double e = rms_relative(out, attend_f32(d, window));
        qInfo("%s/%s seed %u dims %lld/%lld window %lld: relative RMS error %.5f (budget %.5f)", type_name(k),
              type_name(v), seed, static_cast<long long>(kDim), static_cast<long long>(kDimV),
              static_cast<long long>(window), e, budget);
        QVERIFY2(e > 0 && e < budget, qPrintable(QString::number(e)));
      }
    }
  }

  // vLLM's calculated FP8 scales (--calculate-kv-scales): on keys and values far from E4M3's
  // comfortable range — a layer whose keys are small (most of them in the subnormals below
  // 2^-6, where 3 mantissa bits become a fixed step of 2^-9) or large (past 448, saturated) —
  // the calibrated cache keeps the error of unit-sized data, the unscaled one does not. The
  // queries are scaled inversely, so the scores (and the f32 reference's softmax) stay the same.
  void fp8CalibratedScales() {
    set_shape(96, 160);
    for (const float magnitude : {1.0f / 512.0f, 64.0f}) {
      Data d = make_data(53);
      for (float& x : d.k) x *= magnitude;
      for (float& x : d.v) x *= magnitude;
      for (float& x : d.q) x /= magnitude;
      const float k_scale = kv_calibrated_scale(d.k.data(), static_cast<int64_t>(d.k.size()), kKScaleConstant);
      const float v_scale = kv_calibrated_scale(d.v.data(), static_cast<int64_t>(d.v.size()), kVScaleConstant);
      float k_max = 0.0f;
      for (const float x : d.k) k_max = std::max(k_max, std::fabs(x));
      QCOMPARE(k_scale, k_max / 200.0f);  // vLLM's K_SCALE_CONSTANT
      const Cache plain = write_cache(GgmlType::F8_E4M3, GgmlType::F8_E4M3, d);
      const Cache scaled = write_cache(GgmlType::F8_E4M3, GgmlType::F8_E4M3, d, false, k_scale, v_scale);
      QVERIFY(scaled.k == write_cache(GgmlType::F8_E4M3, GgmlType::F8_E4M3, d, true, k_scale, v_scale).k);
      const std::vector<float> f32 = attend_f32(d, 0);
      const std::vector<float> out_plain = attend(plain, GgmlType::F8_E4M3, GgmlType::F8_E4M3, d, false, 0);
      const std::vector<float> out_scaled =
          attend(scaled, GgmlType::F8_E4M3, GgmlType::F8_E4M3, d, false, 0, k_scale, v_scale);
      const std::vector<float> ref_scaled =
          attend(scaled, GgmlType::F8_E4M3, GgmlType::F8_E4M3, d, true, 0, k_scale, v_scale);
      QVERIFY(max_relative(out_scaled, ref_scaled) < fast_tolerance());
      const double e_plain = rms_relative(out_plain, f32), e_scaled = rms_relative(out_scaled, f32);
      qInfo("fp8 x%g: relative RMS error unscaled %.4f, calibrated (k_scale %.4g, v_scale %.4g) %.4f", magnitude,
            e_plain, k_scale, v_scale, e_scaled);
      QVERIFY2(e_scaled < error_budget(GgmlType::F8_E4M3), qPrintable(QString::number(e_scaled)));
      QVERIFY2(e_plain > 3 * e_scaled, qPrintable(QStringLiteral("%1 vs %2").arg(e_plain).arg(e_scaled)));
    }
    // Nothing to measure (all zeros, or no finite value): vLLM's default scale.
    const std::vector<float> zeros(64, 0.0f);
    QCOMPARE(kv_calibrated_scale(zeros.data(), 64, kKScaleConstant), 1.0f);
    // A scale the kernels cannot use is refused.
    const Data d = make_data(53);
    QVERIFY(write_cache(GgmlType::F8_E4M3, GgmlType::F8_E4M3, d, false, 0.0f, 1.0f).k.empty());
  }

  void fp8E4m3Codes() {
    QCOMPARE(int(f32_to_e4m3(1.0f)), 0x38);
    QCOMPARE(int(f32_to_e4m3(-2.0f)), 0xC0);
    QCOMPARE(int(f32_to_e4m3(448.0f)), 0x7E);
    QCOMPARE(int(f32_to_e4m3(1e6f)), 0x7E);  // saturates, no infinity
    QCOMPARE(int(f32_to_e4m3(-1e6f)), 0xFE);
    QCOMPARE(int(f32_to_e4m3(0.001953125f)), 0x01);  // 2^-9, the smallest subnormal
    QCOMPARE(int(f32_to_e4m3(1.0625f)), 0x38);       // halfway between 1 and 1.125: to even
    QCOMPARE(int(f32_to_e4m3(1.1875f)), 0x3A);       // halfway between 1.125 and 1.25: to even
    QCOMPARE(int(f32_to_e4m3(0.0f)), 0x00);
    // Every code but NaN reads back to a value that encodes to the same code.
    for (int b = 0; b < 256; ++b) {
      if ((b & 0x7F) == 0x7F || b == 0x80) continue;
      QCOMPARE(int(f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(b)))), b);
    }
    QCOMPARE(e4m3_to_f32(0x7E), 448.0f);
    QCOMPARE(e4m3_to_f32(0x08), 0.015625f);
  }

  void refusesWhatItCannotHold() {
    set_shape(96, 160);
    QCOMPARE(kv_row_units(GgmlType::Q8_0, 64), int64_t{34});
    QCOMPARE(kv_row_units(GgmlType::Q4_0, 64), int64_t{18});
    QCOMPARE(kv_row_units(GgmlType::Q5_1, 64), int64_t{24});
    QCOMPARE(kv_row_units(GgmlType::Q8_0, 48), int64_t{0});
    QCOMPARE(kv_row_units(GgmlType::F16, 48), int64_t{48});
    QCOMPARE(kv_row_units(GgmlType::Q4_K, 256), int64_t{0});
    QVERIFY(!is_kv_cache_type(GgmlType::Q6_K));
    // A key with no quantized form is refused before anything is written.
    Data d = make_data(43);
    for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_1}) {
      Data bad = d;
      bad.k[5] = INFINITY;
      QVERIFY(write_cache(type, GgmlType::F16, bad).k.empty());
      bad = d;
      bad.v[7] = NAN;
      QVERIFY(write_cache(GgmlType::F16, type, bad).k.empty());
    }
  }
};

QTEST_GUILESS_MAIN(TestPagedAttentionQuant)
#include "test_paged_attention_quant.moc"
