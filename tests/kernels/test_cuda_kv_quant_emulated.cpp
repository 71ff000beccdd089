// The quantized KV cache on the GPU (kernels/cuda/kv_cache.cu, paged_attention*.cu), run on CPU
// fibers through cuda_emulation_warps/: the write stores the CPU writer's rotated blocks and FP8
// bytes bit for bit (keys and values of different types, FP8 scales given or calibrated on the
// device); both attention kernels read every cache type within f16 rounding of the CPU
// reference over the same cache and within the type's error budget of f32 attention over the
// unrounded data; a cache with one wrong level in one block is caught.
#include "random_tensors.h"

#include "iwb/kernels/cuda/kv_cache_cuda.h"
#include "iwb/kernels/cuda/paged_attention_cuda.h"
#include "iwb/kernels/paged_attention.h"

#include <QTest>

#include <cmath>
#include <random>
#include <vector>

using namespace iwb;

namespace {

// Group of 3 query heads per KV head; blocks of 16; sequences of 37 and 45 positions in
// scattered blocks. Tables have room for 320 positions, so a decode splits the keys.
constexpr int64_t kHeads = 6, kKvHeads = 2, kBlock = 16, kPoolBlocks = 9, kMaxBlocks = 20;
const std::vector<int32_t> kLengths = {37, 45};

const char* type_name(GgmlType t) { return t == GgmlType::F8_E4M3 ? "fp8_e4m3" : ggml_type_name(t).data(); }

struct Shape {
  int64_t dim, dim_v;
  int64_t row_k() const { return kKvHeads * dim; }
  int64_t row_v() const { return kKvHeads * dim_v; }
};

struct Data {
  Shape shape;
  std::vector<int32_t> tables;  // [2 x kMaxBlocks], -1 past the used blocks
  std::vector<int64_t> slot_ids;
  std::vector<float> k, v, q;
  std::vector<int32_t> token_sequences, positions;
  int64_t num_tokens() const { return static_cast<int64_t>(positions.size()); }
};

// Keys with a few large channels (a bias, as real keys have); `is_prefill`: runs of 5 and 9
// queries (tensor-core kernel), else one query per sequence (f32 kernel, split keys).
Data make_data(Shape shape, bool is_prefill, uint32_t seed) {
  std::mt19937 rng(seed);
  Data d;
  d.shape = shape;
  d.tables.assign(2 * kMaxBlocks, -1);
  const int32_t used[2][3] = {{4, 0, 7}, {2, 8, 5}};
  for (int s = 0; s < 2; ++s) {
    for (int b = 0; b < 3; ++b) d.tables[static_cast<size_t>(s * kMaxBlocks + b)] = used[s][b];
    for (int32_t p = 0; p < kLengths[static_cast<size_t>(s)]; ++p)
      d.slot_ids.push_back(used[s][p / kBlock] * kBlock + p % kBlock);
  }
  const auto n = static_cast<int64_t>(d.slot_ids.size());
  d.k = iwb::test::random_floats(static_cast<size_t>(n * shape.row_k()), rng);
  for (int64_t t = 0; t < n; ++t) {
    for (const int64_t c : {int64_t{5}, int64_t{70}, shape.dim + 33}) {
      float& x = d.k[static_cast<size_t>(t * shape.row_k() + c)];
      x = 12.0f + 3.0f * x;
    }
  }
  d.v = iwb::test::random_floats(static_cast<size_t>(n * shape.row_v()), rng);
  const int32_t first[2] = {is_prefill ? 32 : 36, is_prefill ? 36 : 44};
  for (int s = 0; s < 2; ++s) {
    for (int32_t p = first[s]; p < kLengths[static_cast<size_t>(s)]; ++p)
      d.token_sequences.push_back(s), d.positions.push_back(p);
  }
  d.q = iwb::test::random_floats(static_cast<size_t>(d.num_tokens() * kHeads * shape.dim), rng);
  return d;
}

struct Cache {
  std::vector<uint16_t> k, v;
};

Cache empty_cache(const Data& d, GgmlType k_type, GgmlType v_type) {
  Cache c;
  c.k.assign(static_cast<size_t>(kPoolBlocks * kBlock * kv_row_units(k_type, d.shape.row_k())), 0x5A5A);
  c.v.assign(static_cast<size_t>(kPoolBlocks * kBlock * kv_row_units(v_type, d.shape.row_v())), 0x5A5A);
  return c;
}

Cache write_cpu(const Data& d, GgmlType k_type, GgmlType v_type, float k_scale, float v_scale) {
  Cache c = empty_cache(d, k_type, v_type);
  WriteKvPagedArgs w;
  w.k = d.k.data();
  w.v = d.v.data();
  w.slot_mapping = d.slot_ids.data();
  w.num_tokens = static_cast<int64_t>(d.slot_ids.size());
  w.k_cache = c.k.data();
  w.v_cache = c.v.data();
  w.num_slots = kPoolBlocks * kBlock;
  w.k_row = d.shape.row_k();
  w.v_row = d.shape.row_v();
  w.num_kv_heads = kKvHeads;
  w.k_type = k_type;
  w.v_type = v_type;
  w.k_scale = k_scale;
  w.v_scale = v_scale;
  if (!write_kv_paged(w)) c.k.clear();
  return c;
}

PagedAttentionArgs cpu_args(const Data& d, const Cache& c, GgmlType k_type, GgmlType v_type, float k_scale,
                            float v_scale, float* out) {
  PagedAttentionArgs a;
  a.q = d.q.data();
  a.k_cache = c.k.data();
  a.v_cache = c.v.data();
  a.num_blocks = kPoolBlocks;
  a.block_size = kBlock;
  a.block_tables = d.tables.data();
  a.max_blocks_per_sequence = kMaxBlocks;
  a.sequence_lengths = kLengths.data();
  a.num_sequences = 2;
  a.token_sequences = d.token_sequences.data();
  a.positions = d.positions.data();
  a.num_tokens = d.num_tokens();
  a.num_heads = kHeads;
  a.num_kv_heads = kKvHeads;
  a.head_dim = d.shape.dim;
  a.head_dim_v = d.shape.dim_v;
  a.scale = 1.0f / std::sqrt(static_cast<float>(d.shape.dim));
  a.output = out;
  a.num_threads = 1;
  a.k_type = k_type;
  a.v_type = v_type;
  a.k_scale = k_scale;
  a.v_scale = v_scale;
  return a;
}

// Attention in double over the unrounded f32 keys and values.
std::vector<float> attend_f32(const Data& d) {
  const Shape& sh = d.shape;
  std::vector<float> out(static_cast<size_t>(d.num_tokens() * kHeads * sh.dim_v));
  const int64_t first_row[2] = {0, kLengths[0]};
  for (int64_t t = 0; t < d.num_tokens(); ++t) {
    const int64_t s = d.token_sequences[static_cast<size_t>(t)], pos = d.positions[static_cast<size_t>(t)];
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t g = h / (kHeads / kKvHeads);
      std::vector<double> w;
      double max = -INFINITY, sum = 0;
      for (int64_t p = 0; p <= pos; ++p) {
        double x = 0;
        for (int64_t i = 0; i < sh.dim; ++i) {
          x += static_cast<double>(d.q[static_cast<size_t>((t * kHeads + h) * sh.dim + i)]) *
               d.k[static_cast<size_t>((first_row[s] + p) * sh.row_k() + g * sh.dim + i)];
        }
        w.push_back(x / std::sqrt(static_cast<double>(sh.dim)));
        max = std::max(max, w.back());
      }
      for (double& x : w) sum += (x = std::exp(x - max));
      for (int64_t i = 0; i < sh.dim_v; ++i) {
        double acc = 0;
        for (int64_t p = 0; p <= pos; ++p) {
          acc +=
              w[static_cast<size_t>(p)] * d.v[static_cast<size_t>((first_row[s] + p) * sh.row_v() + g * sh.dim_v + i)];
        }
        out[static_cast<size_t>((t * kHeads + h) * sh.dim_v + i)] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

double rms_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// The CPU test's budgets (test_paged_attention_quant.cpp) for the output's relative RMS error
// against f32 attention on this kind of data; a mixed pair gets the sum of its sides'.
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

// The first element beyond abs_tol + rel_tol * |expected| as a message; empty if none.
QString compare(const std::vector<float>& got, const std::vector<float>& expected, float tol) {
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!(std::fabs(got[i] - expected[i]) <= tol + tol * std::fabs(expected[i]))) {
      return QStringLiteral("element %1 of %2: emulated GPU %3, CPU %4")
          .arg(i)
          .arg(expected.size())
          .arg(got[i], 0, 'g', 9)
          .arg(expected[i], 0, 'g', 9);
    }
  }
  return {};
}

struct AlignedBuffer {
  std::vector<unsigned char> bytes;
  explicit AlignedBuffer(size_t n) : bytes(n + 256) {}
  void* data() { return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(bytes.data()) + 255) & ~uintptr_t{255}); }
};

// The emulated GPU attention over `c` (the CPU arguments' batch), tensor cores allowed or not.
std::vector<float> attend_gpu(const PagedAttentionArgs& cpu, const Cache& c, bool allow_tensor_cores,
                              cudaError_t* status, int64_t* num_splits) {
  std::vector<float> out(static_cast<size_t>(cpu.num_tokens * cpu.num_heads * cpu.head_dim_v), NAN);
  PagedAttentionCudaArgs a;
  a.q = cpu.q;
  a.k_cache = c.k.data();
  a.v_cache = c.v.data();
  a.num_blocks = cpu.num_blocks;
  a.block_size = cpu.block_size;
  a.block_tables = cpu.block_tables;
  a.max_blocks_per_sequence = cpu.max_blocks_per_sequence;
  a.sequence_lengths = cpu.sequence_lengths;
  a.num_sequences = cpu.num_sequences;
  a.token_sequences = cpu.token_sequences;
  a.positions = cpu.positions;
  a.num_tokens = cpu.num_tokens;
  a.num_heads = cpu.num_heads;
  a.num_kv_heads = cpu.num_kv_heads;
  a.head_dim = cpu.head_dim;
  a.head_dim_v = cpu.head_dim_v;
  a.scale = cpu.scale;
  a.output = out.data();
  a.k_type = cpu.k_type;
  a.v_type = cpu.v_type;
  a.k_scale = &cpu.k_scale;  // "device" memory: the emulation reads host memory
  a.v_scale = &cpu.v_scale;
  a.allow_tensor_cores = allow_tensor_cores;
  AlignedBuffer workspace(paged_attention_cuda_workspace_bytes(a));
  a.workspace = workspace.data();
  a.workspace_bytes = paged_attention_cuda_workspace_bytes(a);
  *num_splits = paged_attention_cuda_plan(a).num_splits;
  *status = paged_attention_cuda(a, nullptr);
  return out;
}

}  // namespace

class TestCudaKvQuantEmulated : public QObject {
  Q_OBJECT

 private slots:
  // Every type on both sides, and pairs of different types: the GPU's blocks and bytes are the
  // CPU writer's, whatever the slot order, with padding and an out-of-pool slot skipped.
  void write_matches_cpu_blocks() {
    const GgmlType pairs[][2] = {
        {GgmlType::Q8_0, GgmlType::Q8_0}, {GgmlType::Q5_1, GgmlType::Q5_1}, {GgmlType::Q5_0, GgmlType::Q5_0},
        {GgmlType::Q4_1, GgmlType::Q4_1}, {GgmlType::Q4_0, GgmlType::Q4_0}, {GgmlType::F8_E4M3, GgmlType::F8_E4M3},
        {GgmlType::Q8_0, GgmlType::Q4_0}, {GgmlType::F16, GgmlType::Q5_1},  {GgmlType::F8_E4M3, GgmlType::Q8_0}};
    for (const Shape shape : {Shape{96, 160}, Shape{128, 64}}) {
      Data d = make_data(shape, false, 7);
      d.slot_ids[3] = -1;  // padding
      std::vector<int64_t> gpu_slots = d.slot_ids;
      gpu_slots[10] = 1000;  // outside the pool: the GPU skips it, the CPU would refuse it
      d.slot_ids[10] = -1;
      for (const auto& pair : pairs) {
        const GgmlType k_type = pair[0], v_type = pair[1];
        const float k_scale = k_type == GgmlType::F8_E4M3 ? 0.37f : 1.0f, v_scale = 2.5f;  // v_scale: FP8 only
        const Cache expected = write_cpu(d, k_type, v_type, k_scale, v_type == GgmlType::F8_E4M3 ? v_scale : 1.0f);
        QVERIFY(!expected.k.empty());
        Cache got = empty_cache(d, k_type, v_type);
        float scales[2] = {k_scale, v_scale};
        WriteKvCudaArgs w{d.k.data(),
                          d.v.data(),
                          gpu_slots.data(),
                          static_cast<int64_t>(gpu_slots.size()),
                          got.k.data(),
                          got.v.data(),
                          kPoolBlocks * kBlock,
                          shape.row_k(),
                          shape.row_v(),
                          k_type,
                          v_type,
                          kKvHeads};
        w.k_scale = &scales[0];
        w.v_scale = &scales[1];
        QCOMPARE(write_kv_paged_cuda(w, nullptr), cudaSuccess);
        const QString what = QStringLiteral("%1/%2 dims %3/%4")
                                 .arg(type_name(k_type), type_name(v_type))
                                 .arg(shape.dim)
                                 .arg(shape.dim_v);
        QVERIFY2(got.k == expected.k, qPrintable("keys differ: " + what));
        QVERIFY2(got.v == expected.v, qPrintable("values differ: " + what));
      }
    }
  }

  // vLLM's calculate_kv_scales on the device: the scales are the CPU's kv_calibrated_scale of
  // the tokens written, and the blocks are then those the CPU writes with them.
  void write_calibrates_fp8_scales() {
    Data d = make_data({96, 160}, false, 11);
    d.slot_ids[0] = -1;  // padding rows do not count
    d.k[5] = 900.0f;     // ... even when they hold the largest value
    float scales[2] = {1.0f, 1.0f};
    Cache got = empty_cache(d, GgmlType::F8_E4M3, GgmlType::F8_E4M3);
    WriteKvCudaArgs w{d.k.data(),      d.v.data(),        d.slot_ids.data(),    static_cast<int64_t>(d.slot_ids.size()),
                      got.k.data(),    got.v.data(),      kPoolBlocks * kBlock, d.shape.row_k(),
                      d.shape.row_v(), GgmlType::F8_E4M3, GgmlType::F8_E4M3,    kKvHeads};
    w.k_scale = &scales[0];
    w.v_scale = &scales[1];
    w.calculate_scales = true;
    QCOMPARE(write_kv_paged_cuda(w, nullptr), cudaSuccess);
    const int64_t rows = static_cast<int64_t>(d.slot_ids.size()) - 1;
    const float k_scale = kv_calibrated_scale(d.k.data() + d.shape.row_k(), rows * d.shape.row_k(), kKScaleConstant);
    const float v_scale = kv_calibrated_scale(d.v.data() + d.shape.row_v(), rows * d.shape.row_v(), kVScaleConstant);
    QCOMPARE(scales[0], k_scale);
    QCOMPARE(scales[1], v_scale);
    QVERIFY(k_scale < 900.0f / 200.0f && k_scale != 1.0f);
    const Cache expected = write_cpu(d, GgmlType::F8_E4M3, GgmlType::F8_E4M3, k_scale, v_scale);
    QVERIFY(got.k == expected.k && got.v == expected.v);
  }

  // Both kernels over caches the CPU wrote: within f16 rounding (the tiles hold d * q rounded to
  // f16; tensor cores round Q and P too) of the CPU reference on the same cache, and within the
  // type's budget of f32 attention. Odd head sizes (96: keys rotated in pieces of 32, values of
  // 160 in pieces of 32), a group of 3, keys and values of different types.
  void attention_matches_cpu_data() {
    QTest::addColumn<int>("k_type");
    QTest::addColumn<int>("v_type");
    QTest::addColumn<bool>("is_prefill");
    const GgmlType same[] = {GgmlType::Q8_0, GgmlType::Q5_1, GgmlType::Q5_0,
                             GgmlType::Q4_1, GgmlType::Q4_0, GgmlType::F8_E4M3};
    for (const GgmlType t : same) {
      for (const bool is_prefill : {true, false}) {
        QTest::addRow("%s %s", type_name(t), is_prefill ? "prefill" : "decode") << int(t) << int(t) << is_prefill;
      }
    }
    const GgmlType mixed[][2] = {{GgmlType::Q8_0, GgmlType::Q4_0},
                                 {GgmlType::Q4_0, GgmlType::F16},
                                 {GgmlType::F8_E4M3, GgmlType::Q8_0},
                                 {GgmlType::F16, GgmlType::F8_E4M3}};
    for (const auto& m : mixed) {
      QTest::addRow("%s/%s prefill", type_name(m[0]), type_name(m[1])) << int(m[0]) << int(m[1]) << true;
    }
  }
  void attention_matches_cpu() {
    QFETCH(int, k_type);
    QFETCH(int, v_type);
    QFETCH(bool, is_prefill);
    const auto k = static_cast<GgmlType>(k_type), v = static_cast<GgmlType>(v_type);
    const Shape shape = is_prefill ? Shape{96, 160} : Shape{160, 64};
    const Data d = make_data(shape, is_prefill, static_cast<uint32_t>(k_type * 10 + v_type));
    // FP8 with calibrated scales, as the engine runs it.
    const float k_scale = k == GgmlType::F8_E4M3
                              ? kv_calibrated_scale(d.k.data(), static_cast<int64_t>(d.k.size()), kKScaleConstant)
                              : 1.0f;
    const float v_scale = v == GgmlType::F8_E4M3
                              ? kv_calibrated_scale(d.v.data(), static_cast<int64_t>(d.v.size()), kVScaleConstant)
                              : 1.0f;
    const Cache c = write_cpu(d, k, v, k_scale, v_scale);
    QVERIFY(!c.k.empty());
    std::vector<float> expected(static_cast<size_t>(d.num_tokens() * kHeads * shape.dim_v));
    const PagedAttentionArgs cpu = cpu_args(d, c, k, v, k_scale, v_scale, expected.data());
    QVERIFY(paged_attention_ref(cpu));
    const std::vector<float> f32 = attend_f32(d);
    const double budget = k == v ? error_budget(k) : error_budget(k) + error_budget(v);
    for (const bool allow_tensor_cores : {true, false}) {
      if (!is_prefill && allow_tensor_cores) continue;  // a decode batch runs the f32 kernel either way
      cudaError_t status = cudaErrorInvalidValue;
      int64_t num_splits = 0;
      const std::vector<float> got = attend_gpu(cpu, c, allow_tensor_cores, &status, &num_splits);
      QCOMPARE(status, cudaSuccess);
      if (!is_prefill) QVERIFY(num_splits > 1);  // the split keys' combine runs too
      const QString mismatch = compare(got, expected, 3e-3f);
      QVERIFY2(mismatch.isEmpty(), qPrintable((allow_tensor_cores ? "tensor cores: " : "f32: ") + mismatch));
      const double e = rms_relative(got, f32);
      QVERIFY2(e < budget,
               qPrintable(QStringLiteral("relative RMS error against f32 %1, budget %2").arg(e).arg(budget)));
    }
  }

  // The comparison catches a decoding slip: one value one level off in one Q4_0 key block (a
  // nibble's lowest bit) moves the output past the tolerance.
  void one_wrong_level_is_caught() {
    const Data d = make_data({96, 160}, true, 17);
    const Cache c = write_cpu(d, GgmlType::Q4_0, GgmlType::Q4_0, 1.0f, 1.0f);
    std::vector<float> expected(static_cast<size_t>(d.num_tokens() * kHeads * d.shape.dim_v));
    const PagedAttentionArgs cpu = cpu_args(d, c, GgmlType::Q4_0, GgmlType::Q4_0, 1.0f, 1.0f, expected.data());
    QVERIFY(paged_attention_ref(cpu));
    Cache broken = c;
    // Slot of sequence 1's position 40 (block 5, offset 8), KV head 0, its first block's byte 3.
    const int64_t units = kv_row_units(GgmlType::Q4_0, d.shape.row_k());
    auto* bytes = reinterpret_cast<uint8_t*>(broken.k.data() + (5 * kBlock + 8) * units);
    bytes[2 + 3] ^= 0x01;
    cudaError_t status = cudaErrorInvalidValue;
    int64_t num_splits = 0;
    const std::vector<float> good = attend_gpu(cpu, c, false, &status, &num_splits);
    QVERIFY(compare(good, expected, 3e-3f).isEmpty());
    const std::vector<float> bad = attend_gpu(cpu, broken, false, &status, &num_splits);
    QCOMPARE(status, cudaSuccess);
    QVERIFY2(!compare(bad, expected, 3e-3f).isEmpty(), "a wrong level went unnoticed");
  }
};

QTEST_APPLESS_MAIN(TestCudaKvQuantEmulated)
#include "test_cuda_kv_quant_emulated.moc"
