// Measured ceilings of a device — memory bandwidth and peak arithmetic — that the roofline and
// the MBU/MFU metrics divide by. Measured, not taken from a datasheet.
#pragma once

#include "iwb/engine/runtime/huge_page_region.h"
#include "iwb/engine/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace iwb {

struct ProbeResult {
  std::string device_id;  // "cpu", "cuda:0"
  std::string device_name;
  std::string date;              // ISO 8601 UTC, when measured
  int num_threads = 0;           // CPU threads used
  double copy_bytes_per_s = 0;   // STREAM copy: c = a (2 arrays counted)
  double triad_bytes_per_s = 0;  // STREAM triad: a = b + s*c (3 arrays counted)
  // Read-only: the three arrays summed in one sweep, nothing written (each counted once). A
  // decode step only reads its weights and KV cache, so this, not a copy, is its memory roof.
  // 0: not measured (probes stored before it existed, and GPUs).
  double read_bytes_per_s = 0;
  double peak_flops = 0;        // best of the compute measurements
  std::string peak_flops_kind;  // "f32 FMA avx512", "bf16 GEMM cuBLAS", ...
  // Integer dot products (u8 x s8 multiply-adds counted as two ops), the ceiling of quantized
  // kernels: AVX-512 VNNI, AVX-VNNI or AVX2's maddubs + madd; 0 when the CPU has none of them
  // or the device was not measured for it.
  double peak_int8_ops = 0;
  std::string peak_int8_kind;
  double buffer_bytes = 0;  // size of each bandwidth buffer
  // The better of copy and triad: the roof of code that writes as much as it reads.
  double stream_bytes_per_s() const {
    return copy_bytes_per_s > triad_bytes_per_s ? copy_bytes_per_s : triad_bytes_per_s;
  }
  bool has_read_bandwidth() const { return read_bytes_per_s > 0; }
  // The memory roof MBU and the roofline divide by: the read-only bandwidth when it was
  // measured, else (an older probe) the better of copy and triad.
  double bandwidth_bytes_per_s() const { return has_read_bandwidth() ? read_bytes_per_s : stream_bytes_per_s(); }
  double ridge_point() const { return bandwidth_bytes_per_s() > 0 ? peak_flops / bandwidth_bytes_per_s() : 0; }
};

struct ProbeOptions {
  int num_threads = 0;                   // 0: all cores
  uint64_t buffer_bytes = 512ull << 20;  // per array; far larger than any CPU cache
  int repetitions = 5;                   // best of
  double compute_seconds = 0.3;          // per compute measurement (best of 5)
};

// STREAM-style copy and triad and a read-only sum over all threads, and f32 FMA throughput with
// the widest SIMD the CPU has (AVX-512, AVX2+FMA, or portable code).
Result<ProbeResult> probe_cpu(const ProbeOptions& options);

// Device-to-device copy bandwidth and cuBLAS f16/bf16 GEMM throughput; an error (never an
// abort) when the build has no CUDA or there is no device.
Result<std::vector<ProbeResult>> probe_cuda_devices();

// The sum the read-only bandwidth times, with the widest SIMD this CPU has, in one of
// kReadStreamLayouts ways (0: four streams in lockstep, 1: eight; the probe keeps the faster, as
// CPUs differ in which reads faster): exposed so tests can check that each reads every float (a
// sum that skipped some would inflate the bandwidth).
inline constexpr int kReadStreamLayouts = 2;
float read_probe_sum(const float* values, size_t count, int layout = 0);

// The read-only sweep, on buffers kept between measurements: probe_cpu's read figure, and
// `iwb bench --paired-probe`, which measures it right before each repetition, so each repetition's MBU divides by
// the bandwidth of its own minute. On a shared host the memory bandwidth drifts by a third
// within minutes (a 2-vCPU Xeon guest read 15.7 and then 30.3 GB/s a minute apart), so a probe
// stored earlier can put one run's MBU anywhere from 70% to over 100%.
class ReadBandwidthProbe {
 public:
  // `buffer_bytes` in all, first touched by the threads that later read them; refused below
  // 1 MiB, an error when it cannot be allocated.
  static Result<std::unique_ptr<ReadBandwidthProbe>> create(int num_threads, uint64_t buffer_bytes = 1536ull << 20);
  // Bytes per second: the best of `sweeps` timed sweeps in each of read_probe_sum's layouts,
  // each thread summing its share. Threads are started for each call and gone when it returns, so
  // nothing of the probe spins beside the run that follows it.
  double measure(int sweeps = 3);
  int num_threads() const { return m_num_threads; }
  uint64_t buffer_bytes() const { return m_count * sizeof(float); }

 private:
  ReadBandwidthProbe(int num_threads, HugePageRegion buffer, size_t count);
  // Every thread sums its share at once; the seconds from the first start to the last finish.
  double sweep_seconds(int layout, float* sink);

  int m_num_threads;
  // count floats in 2 MiB pages, as the CPU engine's weights are by default
  // (EngineOptions::load_mode): the roof is read through the page size of the decode it is the
  // roof of. (On a Xeon model 207 guest the sweep read the same through either page size,
  // 29-32 GB/s; a decode through 2 MiB pages read 10% more than through 4 KiB ones.)
  HugePageRegion m_buffer;
  size_t m_count;
  float m_sink = 0;
};

std::string current_utc_iso8601();

}  // namespace iwb
