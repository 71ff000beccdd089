// The CPU ForwardBackend: CpuForward over a PagedKvStorage in host memory, timed by the
// KernelRecorder's clock.
#pragma once

#include "backend/cpu/cpu_forward.h"
#include "backend/forward_backend.h"
#include "model/model_weights.h"

#include <memory>

namespace iwb {

class CpuForwardBackend final : public ForwardBackend {
 public:
  // Allocates the pool (geometry.num_blocks blocks) and the forward pass's scratch.
  static Result<std::unique_ptr<CpuForwardBackend>> create(const ModelConfig& config, const ModelWeights& weights,
                                                           const KvPoolGeometry& geometry, int num_threads,
                                                           int64_t max_batch, const PlanOptions& options = {});

  DeviceRef device() const override { return {}; }
  std::string description() const override;
  const KvPoolGeometry& kv_geometry() const override { return m_geometry; }
  int64_t max_batch() const override { return m_forward->max_batch(); }
  int num_threads() const override { return m_forward->num_threads(); }

  Status copy_blocks(std::span<const BlockCopy> copies) override { return m_kv->copy_blocks(copies); }
  Status forward(const FlatBatch& batch, float* logits) override { return m_forward->forward(batch, *m_kv, logits); }
  Status set_hidden_export(bool on) override {
    m_forward->set_exports_hidden(on);
    return {};
  }
  std::span<const float> hidden_states() const override { return m_forward->hidden_states(); }
  Status forward_mtp(const FlatBatch& batch, const float* hidden_in, float* logits) override {
    return m_forward->forward(batch, *m_kv, logits, hidden_in);
  }

  void release_sequences(std::span<const SequenceId> sequences) override { m_forward->release_sequences(sequences); }
  Status restore_state(SequenceId sequence, int64_t checkpoint, int64_t num_tokens) override {
    return m_forward->restore_state(sequence, checkpoint, num_tokens);
  }
  void drop_state_checkpoints(std::span<const int64_t> checkpoints) override {
    m_forward->drop_state_checkpoints(checkpoints);
  }

  void begin_profile(Phase phase, size_t capacity) override { m_forward->recorder().begin(phase, capacity); }
  ProfiledKernels take_profile() override;

  bool is_batch_invariant() const override { return m_forward->is_batch_invariant(); }
  void set_batch_invariant(bool is_batch_invariant) override { m_forward->set_batch_invariant(is_batch_invariant); }
  void set_activation_observer(ActivationObserver* observer) override { m_forward->set_activation_observer(observer); }
  void fill_memory_report(MemoryReport* report) const override;
  std::span<const int32_t> expert_counts() const override { return m_forward->expert_counts(); }

 private:
  CpuForwardBackend() = default;

  KvPoolGeometry m_geometry;
  std::unique_ptr<PagedKvStorage> m_kv;
  uint64_t m_kv_huge_page_bytes = 0;  // counted once after creation (the pool is touched then)
  std::unique_ptr<CpuForward> m_forward;
};

}  // namespace iwb
