// The seam between the engine and where its forward pass runs. Scheduling, sampling,
// speculation and the reports are the same for every backend; a ForwardBackend owns the KV
// data (host memory for the CPU, device memory for CUDA) and runs one step's tokens over it.
// The pool's geometry stays a host-side value, so the block manager sizes itself from it.
#pragma once

#include "iwb/engine/paged/forward_batch.h"
#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/engine/profile/kernel_record.h"
#include "iwb/engine/runtime/activation_observer.h"
#include "iwb/engine/runtime/engine_reports.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace iwb {

// The KV pool as the block manager and the reports see it, wherever its bytes live.
struct KvPoolGeometry {
  KvCacheShape shape;
  int32_t block_size = 0;
  int64_t num_blocks = 0;
  KvCacheTypes type;  // keys' and values' cache types

  int64_t num_slots() const { return num_blocks * block_size; }
  uint64_t bytes_per_block() const { return PagedKvStorage::bytes_per_block(shape, block_size, type); }
  uint64_t bytes_per_position() const { return PagedKvStorage::bytes_per_block(shape, 1, type); }
  uint64_t num_bytes() const { return bytes_per_block() * static_cast<uint64_t>(num_blocks); }
};

// One step's kernel records as the backend hands them over (seconds measured, phase and device set).
struct ProfiledKernels {
  std::vector<KernelRecord> kernels;
  uint32_t num_dropped = 0;
};

class ForwardBackend {
 public:
  virtual ~ForwardBackend() = default;

  // "cpu" or "cuda:N": the device the records and reports name.
  virtual DeviceRef device() const = 0;
  std::string device_id() const { return device().id(); }
  // A line for the load progress and ModelSummary: "cpu (8 threads)", "cuda:0 (NVIDIA H100 ...)".
  virtual std::string description() const = 0;

  virtual const KvPoolGeometry& kv_geometry() const = 0;
  virtual int64_t max_batch() const = 0;  // tokens per forward pass (the scratch's size)
  virtual int num_threads() const = 0;    // host threads the backend computes with

  // Copy-on-write block copies (every layer, keys and values), before the step writes any K/V.
  virtual Status copy_blocks(std::span<const BlockCopy> copies) = 0;
  // Runs the step's tokens, writes their keys and values to batch.slot_mapping's slots, and the
  // logits of batch.logits_rows to host memory `logits` [logits_rows.size() x vocab]. On return
  // the logits are there (a device backend has synchronised once).
  virtual Status forward(const FlatBatch& batch, float* logits) = 0;
  // Greedy steps on a device: the same pass, but only each logits row's argmax comes back
  // (`tokens` [logits_rows.size()]; lowest id on ties, NaN never wins: Sampler's greedy rule),
  // not vocab_size floats per row. The engine uses it when every row is greedy without
  // penalties and has_device_argmax() says the backend gains from it.
  virtual bool has_device_argmax() const { return false; }
  virtual Status forward_argmax(const FlatBatch& batch, int32_t* tokens) {
    return make_error(ErrorCode::Unsupported, "this backend picks greedy tokens on the host");
  }

  // Multi-token prediction, the target's side: while on, every forward() also keeps each token's
  // last hidden state (the output norm's rows, llama.cpp's embeddings_nextn) for
  // hidden_states(), [tokens x n_embd] of the last pass. A backend that cannot says why.
  virtual Status set_hidden_export(bool on) {
    if (!on) return {};
    return make_error(ErrorCode::Unsupported, "the " + device_id() +
                                                  " backend does not hand over hidden states (MTP drafting runs "
                                                  "on the CPU backend)");
  }
  virtual std::span<const float> hidden_states() const { return {}; }
  // The MTP head's side (a backend made for mtp_head_config with PlanOptions::is_mtp_head):
  // forward() with each token's input row of the target's hidden states, [tokens x n_embd].
  virtual Status forward_mtp(const FlatBatch& batch, const float* hidden_in, float* logits) {
    (void)batch, (void)hidden_in, (void)logits;
    return make_error(ErrorCode::Unsupported, "the " + device_id() + " backend does not run MTP heads");
  }

  // Sequences that have ended (finished, aborted, failed): a backend that keeps state per
  // sequence (recurrent layers) frees theirs.
  virtual void release_sequences(std::span<const SequenceId> sequences) { (void)sequences; }
  // Recurrent states kept by FlatBatch::state_saves (checkpoint ids are the engine's): one put
  // in place as `sequence`'s state before its step at position num_tokens (a prefix-cache hit
  // that long), and ones no longer wanted.
  virtual Status restore_state(SequenceId sequence, int64_t checkpoint, int64_t num_tokens) {
    (void)sequence, (void)checkpoint, (void)num_tokens;
    return make_error(ErrorCode::Unsupported, "the " + device_id() + " backend keeps no recurrent states");
  }
  virtual void drop_state_checkpoints(std::span<const int64_t> checkpoints) { (void)checkpoints; }

  // Profiling of the next forward(): begin before it, take after it (even when it failed: the
  // records show how far it got). `capacity` records are reserved up front.
  virtual void begin_profile(Phase phase, size_t capacity) = 0;
  virtual ProfiledKernels take_profile() = 0;

  virtual bool is_batch_invariant() const = 0;
  virtual void set_batch_invariant(bool is_batch_invariant) = 0;
  // Shown every weight matmul's input (host f32) while set; null: off.
  virtual void set_activation_observer(ActivationObserver* observer) = 0;

  // The backend's share of MemoryReport: scratch, and for a device its allocations and the
  // device's free/total memory (the caller fills weights-as-stored, the pool's use, drafter).
  virtual void fill_memory_report(MemoryReport* report) const = 0;

  // Mixture of experts: tokens each layer routed to each expert in the last forward(),
  // [num_layers x num_experts] row-major; empty for a dense model (or a backend that does not
  // run experts).
  virtual std::span<const int32_t> expert_counts() const { return {}; }
};

}  // namespace iwb
