// CudaForwardBackend's profiler: a CUDA event pair around each recorded operation, resolved into
// the KernelRecords' seconds after the step's synchronisation (the CPU clock would only time
// the launches). The events are created once and reused, so a profiled step allocates nothing
// on the device after the first.
#include "backend/cuda/cuda_forward_backend.h"

#include "backend/cuda/cuda_status.h"

namespace iwb::cuda {

void CudaForwardBackend::begin_profile(Phase phase, size_t capacity) {
  m_recorder.begin(phase, capacity, device());
  m_num_events = 0;
  // Events for every record the step may make; creating them here keeps it off the step.
  while (m_event_starts.size() < capacity) {
    cudaEvent_t start = nullptr, end = nullptr;
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&end) != cudaSuccess) {
      if (start != nullptr) cudaEventDestroy(start);
      cudaGetLastError();
      break;  // fewer timed records; the rest keep their host-side launch times
    }
    m_event_starts.push_back(start);
    m_event_ends.push_back(end);
  }
}

Status CudaForwardBackend::op_begin() {
  if (!is_recording() || m_num_events >= m_event_starts.size()) return {};
  return fail(cudaEventRecord(m_event_starts[m_num_events], m_stream.get()), "recording a profiling event");
}

Status CudaForwardBackend::op_end(const KernelRecord& record) {
  if (m_num_events < m_event_ends.size()) {
    IWB_RETURN_IF_ERROR(fail(cudaEventRecord(m_event_ends[m_num_events], m_stream.get()), "recording a profiling event"));
    ++m_num_events;
  }
  m_recorder.add(record);
  return {};
}

ProfiledKernels CudaForwardBackend::take_profile() {
  ProfiledKernels out;
  out.kernels = m_recorder.take();
  out.num_dropped = static_cast<uint32_t>(m_recorder.num_dropped());
  // forward() synchronised the stream, so every recorded event has completed (after a failed
  // step the ones that ran still resolve; the others keep seconds 0).
  const size_t timed = std::min(out.kernels.size(), m_num_events);
  for (size_t i = 0; i < out.kernels.size(); ++i) {
    float ms = 0.0f;
    if (i < timed && cudaEventElapsedTime(&ms, m_event_starts[i], m_event_ends[i]) == cudaSuccess) {
      out.kernels[i].seconds = static_cast<double>(ms) * 1e-3;
    } else {
      cudaGetLastError();
      out.kernels[i].seconds = 0.0;
    }
  }
  m_num_events = 0;
  return out;
}

void CudaForwardBackend::destroy_events() {
  for (cudaEvent_t e : m_event_starts) cudaEventDestroy(e);
  for (cudaEvent_t e : m_event_ends) cudaEventDestroy(e);
  m_event_starts.clear();
  m_event_ends.clear();
}

}  // namespace iwb::cuda
