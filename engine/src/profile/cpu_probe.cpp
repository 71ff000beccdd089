// CPU ceilings: STREAM copy/triad and read-only bandwidth over buffers far larger than the
// caches (first-touch initialised by the same threads that later stream them) and f32 FMA peak
// with independent accumulator chains, so the measurement is limited by the FMA units rather
// than latency.
#include "iwb/engine/profile/machine_probe.h"

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/clock_text.h"
#include "iwb/kernels/cpu_features.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
// GCC 12 reports its own AVX-512 reductions (their undefined upper halves) as uninitialized
// once the unrolled loops inline them (GCC bug 105593); the code is fine.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <memory>
#include <new>

namespace iwb {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Each loop runs 16 independent FMA chains per iteration (more chains than the FMA latency
// times the number of FMA pipes), so throughput, not latency, limits it. The chains must be
// unrolled to stay in registers: GCC 12 at -O2 kept the 16 accumulators in memory, so every
// FMA waited on a store and a reload and the probe read 78 instead of 258 GFLOP/s per Zen 5
// core (MFU above 200% gave it away). Lambdas would not inherit the target attribute, hence
// one plain function per instruction set.
__attribute__((target("avx512f"))) double fma_avx512(int64_t iterations, float* sink) {
  __m512 acc[16];
  for (int k = 0; k < 16; ++k) acc[k] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  const __m512 mul = _mm512_set1_ps(0.999999f);
  const __m512 add = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) acc[k] = _mm512_fmadd_ps(acc[k], mul, add);
  }
  float total = 0;
  for (int k = 0; k < 16; ++k) total += _mm512_reduce_add_ps(acc[k]);
  *sink += total;
  return static_cast<double>(iterations) * 16 * 16 * 2;
}

// AVX2 has 16 vector registers: 16 chains and the two constants did not fit, GCC kept three
// accumulators in memory, and their store-to-load round trips held the probe at one FMA per
// cycle (3.6 instead of 6.3 G FMA/s per Zen 3 thread: every AVX2 host's f32 peak read 1.8x too
// low until 2026-12). 12 chains still cover the FMA latency (4-5 cycles) over two pipes.
constexpr int kAvx2Chains = 12;

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iterations, float* sink) {
  __m256 acc[kAvx2Chains];
  for (int k = 0; k < kAvx2Chains; ++k) acc[k] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  const __m256 mul = _mm256_set1_ps(0.999999f);
  const __m256 add = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAvx2Chains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], mul, add);
  }
  alignas(32) float lanes[8];
  float total = 0;
  for (int k = 0; k < kAvx2Chains; ++k) {
    _mm256_store_ps(lanes, acc[k]);
    for (float x : lanes) total += x;
  }
  *sink += total;
  return static_cast<double>(iterations) * kAvx2Chains * 8 * 2;
}

// VNNI: each dpbusd does 64 (u8 x s8) multiply-adds into 16 int32 lanes: 128 ops.
__attribute__((target("avx512f,avx512vnni"))) double dot_int8_vnni(int64_t iterations, float* sink) {
  __m512i acc[16];
  for (int k = 0; k < 16; ++k) acc[k] = _mm512_set1_epi32(k);
  const __m512i a = _mm512_set1_epi8(3);
  const __m512i b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
  }
  int64_t total = 0;
  for (int k = 0; k < 16; ++k) total += _mm512_reduce_add_epi32(acc[k]);
  *sink += static_cast<float>(total);
  return static_cast<double>(iterations) * 16 * 64 * 2;
}

// AVX2 has no int8 dot instruction into int32: its ceiling is maddubs, 32 u8 x s8 multiply-adds
// into 16 int16 pairs (64 ops). The kernels widen to int32 with madd only once per two or more
// maddubs where the sums fit in int16, so the widening is not the ceiling. Without an int8
// ceiling quantized MFU on AVX2 hosts was reported against the f32 FMA peak and read 250%.
// Each chain's product is its own next u8 operand (no product is loop-invariant; the values
// saturate, which costs nothing); 10 chains cover maddubs' latency (3-5 cycles) over two pipes.
__attribute__((target("avx2"))) double dot_int8_avx2(int64_t iterations, float* sink) {
  constexpr int kChains = 10;
  __m256i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_epi16(static_cast<short>(k + 1));
  const __m256i b = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 10
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_maddubs_epi16(acc[k], b);
  }
  int64_t total = 0;
  for (int k = 0; k < kChains; ++k) {
    alignas(32) int16_t lanes[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[k]);
    for (int16_t x : lanes) total += x;
  }
  *sink += static_cast<float>(total);
  return static_cast<double>(iterations) * kChains * 32 * 2;
}

// AVX-VNNI (Intel client cores, Zen 5): each 256-bit vpdpbusd does 32 multiply-adds: 64 ops.
__attribute__((target("avx2,avxvnni"))) double dot_int8_avx_vnni(int64_t iterations, float* sink) {
  __m256i acc[kAvx2Chains];
  for (int k = 0; k < kAvx2Chains; ++k) acc[k] = _mm256_set1_epi32(k);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAvx2Chains; ++k) acc[k] = _mm256_dpbusd_avx_epi32(acc[k], a, b);
  }
  int64_t total = 0;
  for (int k = 0; k < kAvx2Chains; ++k) {
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[k]);
    for (int32_t x : lanes) total += x;
  }
  *sink += static_cast<float>(total);
  return static_cast<double>(iterations) * kAvx2Chains * 32 * 2;
}

double fma_portable(int64_t iterations, float* sink) {
  float acc[16][8];
  for (int k = 0; k < 16; ++k) std::fill(std::begin(acc[k]), std::end(acc[k]), 1.0f + 0.001f * static_cast<float>(k));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) {
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) acc[k][l] = acc[k][l] * 0.999999f + 1e-7f;
    }
  }
  float total = 0;
  for (int k = 0; k < 16; ++k) {
    for (float x : acc[k]) total += x;
  }
  *sink += total;
  return static_cast<double>(iterations) * 16 * 8 * 2;
}

// All threads run the FMA loop at once; flops over the slowest thread's time.
double measure_fma(double (*loop)(int64_t, float*), int num_threads, double target_seconds) {
  // Calibrate iterations so one run takes about target_seconds on one thread.
  float sink = 0;
  int64_t iterations = 1 << 16;
  for (;;) {
    const auto t0 = Clock::now();
    loop(iterations, &sink);
    const double s = seconds_since(t0);
    if (s > target_seconds / 4 || iterations > (int64_t{1} << 34)) {
      iterations = static_cast<int64_t>(static_cast<double>(iterations) * target_seconds / std::max(s, 1e-6));
      break;
    }
    iterations *= 4;
  }
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    double flops = 0;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(num_threads) reduction(+ : flops)
    {
      float local_sink = 0;
      flops += loop(iterations, &local_sink);
#pragma omp atomic
      sink += local_sink;
    }
    best = std::max(best, flops / seconds_since(t0));
  }
  return sink == 12345.678f ? 0 : best;  // sink compared so the compiler cannot drop the work
}

// Read-only bandwidth: each thread sums its share of the arrays with two independent
// accumulators per stream (the adds never wait on each other, so the loads, not the adds, set
// the pace) and writes nothing. This is what a decode step does with its weights; a copy also
// writes, and on most CPUs a write costs a read for ownership and a write-back besides, so a
// copy's figure is a low roof for decoding (MBU above 100% gave that away). The share is read as
// several sequential streams in lockstep (its equal parts): a core keeps more misses in flight
// for several streams than for one, and the decode kernels read their rows in streams too. How
// many suits a CPU differs, so the probe tries each layout of kReadStreamLayouts and keeps the
// best: on a 2-vCPU Xeon model 207 guest 4 streams read 31.5 GB/s against one's 29.7, and 8 were
// within 1% of 4; on an Ice Lake (model 106) guest 8 streams read 29.0-31.0 GB/s against 4's
// 26.1-29.2 (12 and 16 no better), and the decode's own streams read faster than a 4-stream
// probe (Q8_0 at 105-109% of it). Software prefetches did not help the sweep on either.
template <int kStreams>
__attribute__((target("avx512f"))) float sum_avx512(const float* p, size_t n) {
  __m512 acc[2 * kStreams];
  for (int k = 0; k < 2 * kStreams; ++k) acc[k] = _mm512_setzero_ps();
  const size_t part = n / kStreams;
  const size_t steps = part / 32;  // 32 floats (two vectors) of each stream per step
  for (size_t i = 0; i < steps * 32; i += 32) {
#pragma GCC unroll 8
    for (int s = 0; s < kStreams; ++s) {
      const float* q = p + static_cast<size_t>(s) * part + i;
      acc[2 * s] = _mm512_add_ps(acc[2 * s], _mm512_loadu_ps(q));
      acc[2 * s + 1] = _mm512_add_ps(acc[2 * s + 1], _mm512_loadu_ps(q + 16));
    }
  }
  float total = 0;
  for (int k = 0; k < 2 * kStreams; ++k) total += _mm512_reduce_add_ps(acc[k]);
  // Each stream's last partial step and the floats past the streams' equal parts.
  for (int s = 0; s < kStreams; ++s) {
    for (size_t i = static_cast<size_t>(s) * part + steps * 32; i < static_cast<size_t>(s + 1) * part; ++i)
      total += p[i];
  }
  for (size_t i = kStreams * part; i < n; ++i) total += p[i];
  return total;
}

// 16 accumulators at most with AVX2's 16 registers (the loads fold into the adds).
template <int kStreams>
__attribute__((target("avx2"))) float sum_avx2(const float* p, size_t n) {
  constexpr int kPerStream = kStreams <= 4 ? 2 : 1;
  constexpr int kStep = 8 * kPerStream;  // floats of each stream per step
  __m256 acc[kPerStream * kStreams];
  for (int k = 0; k < kPerStream * kStreams; ++k) acc[k] = _mm256_setzero_ps();
  const size_t part = n / kStreams;
  const size_t steps = part / kStep;
  for (size_t i = 0; i < steps * kStep; i += kStep) {
#pragma GCC unroll 8
    for (int s = 0; s < kStreams; ++s) {
      const float* q = p + static_cast<size_t>(s) * part + i;
      for (int v = 0; v < kPerStream; ++v)
        acc[kPerStream * s + v] = _mm256_add_ps(acc[kPerStream * s + v], _mm256_loadu_ps(q + 8 * v));
    }
  }
  alignas(32) float lanes[8];
  float total = 0;
  for (int k = 0; k < kPerStream * kStreams; ++k) {
    _mm256_store_ps(lanes, acc[k]);
    for (float x : lanes) total += x;
  }
  for (int s = 0; s < kStreams; ++s) {
    for (size_t i = static_cast<size_t>(s) * part + steps * kStep; i < static_cast<size_t>(s + 1) * part; ++i)
      total += p[i];
  }
  for (size_t i = kStreams * part; i < n; ++i) total += p[i];
  return total;
}

// Without AVX2: eight scalar chains (at 8 bytes a cycle still near a core's share of memory).
float sum_portable(const float* p, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) acc[k] += p[i + static_cast<size_t>(k)];
  }
  float total = 0;
  for (float a : acc) total += a;
  for (; i < n; ++i) total += p[i];
  return total;
}

using SumLoop = float (*)(const float*, size_t);

SumLoop best_sum_loop(int layout) {
  __builtin_cpu_init();
  const bool wide = layout == 1;
  if (__builtin_cpu_supports("avx512f")) return wide ? sum_avx512<8> : sum_avx512<4>;
  if (__builtin_cpu_supports("avx2")) return wide ? sum_avx2<8> : sum_avx2<4>;
  return sum_portable;
}

struct Stream {
  double copy = 0;
  double triad = 0;
  double read = 0;
};

Stream measure_stream(uint64_t buffer_bytes, int num_threads, int repetitions) {
  Stream best;
  // Read-only first, with the paired probe's own sweep (ReadBandwidthProbe) over three arrays'
  // worth in one buffer (3 x 512 MiB by default: several times a large last-level cache, e.g.
  // the 480 MiB a Xeon 6 guest reports, so the sweep cannot be served from it); its buffer is
  // given back before the copy's arrays are taken.
  {
    auto read = ReadBandwidthProbe::create(num_threads, 3 * buffer_bytes);
    if (!read) return {};
    best.read = (*read)->measure(repetitions);
  }
  const size_t n = static_cast<size_t>(buffer_bytes / sizeof(float));
  // In 2 MiB pages, as the read sweep's (ReadBandwidthProbe) and the weights'.
  const HugePageRegion a = HugePageRegion::allocate(n * sizeof(float));
  const HugePageRegion b = HugePageRegion::allocate(n * sizeof(float));
  const HugePageRegion c = HugePageRegion::allocate(n * sizeof(float));
  if (a.empty() || b.empty() || c.empty()) return {};
  auto* pa = static_cast<float*>(a.data());
  auto* pb = static_cast<float*>(b.data());
  auto* pc = static_cast<float*>(c.data());
#pragma omp parallel for num_threads(num_threads) schedule(static)
  for (size_t i = 0; i < n; ++i) {
    pa[i] = 1.0f;
    pb[i] = 2.0f;
    pc[i] = 0.5f;
  }
  const float scalar = 3.0f;
  for (int rep = 0; rep < repetitions; ++rep) {
    auto t0 = Clock::now();
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (size_t i = 0; i < n; ++i) pc[i] = pa[i];
    best.copy = std::max(best.copy, 2.0 * static_cast<double>(buffer_bytes) / seconds_since(t0));
    t0 = Clock::now();
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (size_t i = 0; i < n; ++i) pa[i] = pb[i] + scalar * pc[i];
    best.triad = std::max(best.triad, 3.0 * static_cast<double>(buffer_bytes) / seconds_since(t0));
  }
  return best;
}

}  // namespace

float read_probe_sum(const float* values, size_t count, int layout) {
  return best_sum_loop(std::clamp(layout, 0, kReadStreamLayouts - 1))(values, count);
}

std::string current_utc_iso8601() { return now_as_text("%Y-%m-%dT%H:%M:%SZ", ClockZone::Utc); }

Result<ProbeResult> probe_cpu(const ProbeOptions& options) {
  if (options.buffer_bytes < (1u << 20) || options.repetitions < 1) {
    return make_error(ErrorCode::InvalidArgument, "probe buffers must be at least 1 MiB and repetitions at least 1");
  }
  const ComputeDeviceInfo cpu = describe_cpu_device();
  ProbeResult r;
  r.device_id = cpu.id;
  r.device_name = cpu.name;
  r.date = current_utc_iso8601();
  r.num_threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  r.buffer_bytes = static_cast<double>(options.buffer_bytes);

  const Stream s = measure_stream(options.buffer_bytes, r.num_threads, options.repetitions);
  if (s.copy == 0) {
    return make_error(ErrorCode::OutOfMemory, "not enough memory for three probe buffers of " +
                                                  std::to_string(options.buffer_bytes >> 20) + " MiB");
  }
  r.copy_bytes_per_s = s.copy;
  r.triad_bytes_per_s = s.triad;
  r.read_bytes_per_s = s.read;

  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    r.peak_flops = measure_fma(fma_avx512, r.num_threads, options.compute_seconds);
    r.peak_flops_kind = "f32 FMA, AVX-512";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    // On CPUs that split 512-bit operations (Zen 4), 256-bit code can be as fast: keep the best.
    const double avx2 = measure_fma(fma_avx2, r.num_threads, options.compute_seconds);
    if (avx2 > r.peak_flops) {
      r.peak_flops = avx2;
      r.peak_flops_kind = "f32 FMA, AVX2";
    }
  }
  if (r.peak_flops == 0) {
    r.peak_flops = measure_fma(fma_portable, r.num_threads, options.compute_seconds);
    r.peak_flops_kind = "f32 multiply-add, portable";
  }
  if (__builtin_cpu_supports("avx512vnni")) {
    r.peak_int8_ops = measure_fma(dot_int8_vnni, r.num_threads, options.compute_seconds);
    r.peak_int8_kind = "int8 dot products, AVX-512 VNNI";
  } else if (cpu_reports_avx_vnni()) {
    r.peak_int8_ops = measure_fma(dot_int8_avx_vnni, r.num_threads, options.compute_seconds);
    r.peak_int8_kind = "int8 dot products, AVX-VNNI";
  } else if (__builtin_cpu_supports("avx2")) {
    r.peak_int8_ops = measure_fma(dot_int8_avx2, r.num_threads, options.compute_seconds);
    r.peak_int8_kind = "int8 multiply-adds, AVX2 maddubs";
  }
  return r;
}

}  // namespace iwb
