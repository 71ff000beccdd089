// KernelRecorder: the per-step buffer and the tick-to-seconds conversion (the hot path is
// inline in the header).
#include "iwb/engine/profile/profiler.h"

#include <utility>

namespace iwb {

void KernelRecorder::begin(Phase phase, size_t capacity, DeviceRef device) {
  m_records.clear();
  m_records.reserve(capacity);
  m_phase = phase;
  m_device = device;
  m_num_dropped = 0;
  m_is_active = true;
  m_begin_time = Clock::now();
  m_begin_ticks = ticks();
  m_last = m_begin_ticks;
}

std::vector<KernelRecord> KernelRecorder::take() {
  m_is_active = false;
  const uint64_t end_ticks = ticks();
  const double seconds = std::chrono::duration<double>(Clock::now() - m_begin_time).count();
  // Seconds per tick over this step; 0 if the counter did not advance (it always does on a
  // CPU with an invariant TSC, which every x86-64 CPU of the last decade has).
  const double scale = end_ticks > m_begin_ticks ? seconds / static_cast<double>(end_ticks - m_begin_ticks) : 0.0;
  for (KernelRecord& r : m_records) {
    r.phase = m_phase;
    r.device = m_device;
    r.seconds *= scale;
  }
  return std::exchange(m_records, {});
}

}  // namespace iwb
