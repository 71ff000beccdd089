// The CPU side of the profiler: a recorder the forward pass hands one KernelRecord per kernel
// call. Costs nothing when inactive (callers test is_active() before building a record: one
// predictable branch, no clock read, no allocation). When active it reads a clock once per
// kernel and writes into a buffer reserved before the step starts; it never allocates or
// locks on the token path.
#pragma once

#include "iwb/engine/profile/kernel_record.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace iwb {

class KernelRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts recording one step's kernels, all in `phase` on `device`, with room for `capacity`
  // records (the one allocation, before any kernel runs). Records past the capacity are
  // counted as dropped rather than grow the buffer mid-step.
  void begin(Phase phase, size_t capacity, DeviceRef device = {});
  bool is_active() const { return m_is_active; }

  // Starts the clock for the next kernel: call where a run of kernels begins (the start of a
  // forward batch). Within a run, each record's time runs from the previous record's end, so
  // a kernel costs one clock read; the only work between kernels is filling argument structs.
  void mark() {
    if (m_is_active) m_last = ticks();
  }

  // Appends `record` timed from the last mark() or add() to now. Call only when is_active().
  void add(const KernelRecord& record) {
    const uint64_t now = ticks();
    if (m_records.size() < m_records.capacity()) {
      m_records.push_back(record);
      // Ticks for now; take() converts the step's records to seconds in one pass.
      m_records.back().seconds = static_cast<double>(now - m_last);
    } else {
      ++m_num_dropped;
    }
    m_last = now;
  }

  // Ends the step: hands over its records (phase, device and seconds filled in) and becomes
  // inactive.
  std::vector<KernelRecord> take();
  size_t num_dropped() const { return m_num_dropped; }
  Phase phase() const { return m_phase; }

  // The kernel clock. On x86 the time-stamp counter: about 9 ns to read where
  // steady_clock::now() takes about 21 ns (measured on the project's Zen 4 machines), which
  // is a third of the profiler's cost on a small model. begin() and take() read both clocks,
  // so each step converts ticks to seconds by the steady clock's own measure of that step:
  // no calibration constant, nothing to drift. Elsewhere: steady-clock nanoseconds.
  static uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
#endif
  }

 private:
  bool m_is_active = false;
  Phase m_phase = Phase::Decode;
  DeviceRef m_device;
  uint64_t m_last = 0;
  uint64_t m_begin_ticks = 0;
  Clock::time_point m_begin_time{};
  size_t m_num_dropped = 0;
  std::vector<KernelRecord> m_records;
};

}  // namespace iwb
