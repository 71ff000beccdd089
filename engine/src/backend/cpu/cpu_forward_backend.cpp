// CpuForwardBackend: the host KV pool and CpuForward behind the ForwardBackend interface.
#include "backend/cpu/cpu_forward_backend.h"

#include "iwb/engine/backend/device_info.h"

namespace iwb {

Result<std::unique_ptr<CpuForwardBackend>> CpuForwardBackend::create(const ModelConfig& config,
                                                                     const ModelWeights& weights,
                                                                     const KvPoolGeometry& geometry, int num_threads,
                                                                     int64_t max_batch, const PlanOptions& options) {
  Result<std::unique_ptr<PagedKvStorage>> storage =
      PagedKvStorage::create(geometry.shape, geometry.block_size, geometry.num_blocks, geometry.type);
  if (!storage) return storage.status();
  std::unique_ptr<CpuForwardBackend> backend(new CpuForwardBackend());
  backend->m_geometry = geometry;
  backend->m_kv = std::move(*storage);
  backend->m_kv_huge_page_bytes = backend->m_kv->huge_page_bytes();
  backend->m_forward = std::make_unique<CpuForward>(config, weights, num_threads, max_batch, options);
  IWB_RETURN_IF_ERROR(check_forward_plan(backend->m_forward->plan()));
  return backend;
}

std::string CpuForwardBackend::description() const {
  return "cpu (" + std::to_string(m_forward->num_threads()) + " threads)";
}

ProfiledKernels CpuForwardBackend::take_profile() {
  KernelRecorder& recorder = m_forward->recorder();
  ProfiledKernels out;
  out.kernels = recorder.take();
  out.num_dropped = static_cast<uint32_t>(recorder.num_dropped());
  return out;
}

void CpuForwardBackend::fill_memory_report(MemoryReport* report) const {
  report->device_id = "cpu";
  report->device_name = describe_cpu_device().name;
  report->scratch_bytes += m_forward->scratch_bytes();
  report->kv_huge_page_bytes = m_kv_huge_page_bytes;
  report->recurrent_state_bytes = m_forward->recurrent_state_bytes();
  report->recurrent_checkpoint_bytes = m_forward->recurrent_checkpoint_bytes();
  report->recurrent_num_checkpoints = static_cast<int64_t>(m_forward->recurrent_num_checkpoints());
}

}  // namespace iwb
