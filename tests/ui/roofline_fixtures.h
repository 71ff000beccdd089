// Kernel records, profile batches and a probe with known figures, shared by the roofline tests.
#pragma once

#include "iwb/engine/profile/kernel_record.h"
#include "iwb/engine/profile/machine_probe.h"

#include <utility>
#include <vector>

namespace iwb::test {

inline KernelRecord record(OpKind kind, const char* name, double flops, double bytes, double seconds) {
  KernelRecord r;
  r.kind = kind;
  r.name = name;
  r.layer = 0;
  r.data_type = GgmlType::Q4_K;
  r.flops = flops;
  r.bytes = bytes;
  r.seconds = seconds;
  r.shape.num_tokens = 1;
  r.shape.rows = 1536;
  r.shape.cols = 256;
  return r;
}

inline ProfileBatch batch(uint64_t step, Phase phase, std::vector<KernelRecord> records) {
  ProfileBatch b;
  b.step_index = step;
  b.phase = phase;
  b.num_tokens = phase == Phase::Prefill ? 16 : 1;
  for (KernelRecord& r : records) {
    r.phase = phase;
    r.shape.num_tokens = b.num_tokens;
  }
  b.kernels = std::move(records);
  b.step_seconds = b.kernel_seconds();
  return b;
}

inline ProbeResult syntheticProbe() {
  ProbeResult p;
  p.device_id = "cpu";
  p.device_name = "Test CPU";
  p.date = "2025-01-02T03:04:05Z";
  p.copy_bytes_per_s = 40e9;
  p.triad_bytes_per_s = 50e9;
  p.peak_flops = 200e9;
  p.peak_flops_kind = "f32 FMA test";
  return p;
}

}  // namespace iwb::test
