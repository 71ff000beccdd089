// The CUDA ForwardBackend: the weights on the device (cuda_weights.h), the KV pool in device
// memory in the vLLM layout the kernels read, and per step the same walk over operations as
// the CPU backend, the model's ForwardPlan walked with the launchers of kernels/cuda (matvec for a
// few tokens, cuBLAS for more).
// One stream; the step's metadata goes up in one copy from page-locked memory; decode steps
// replay CUDA graphs captured per (tokens, sequences); one synchronisation per step hands the
// logits to the sampler. Profiling records every kernel with a CUDA event pair.
#pragma once

#include "backend/cuda/cuda_buffers.h"
#include "backend/cuda/cuda_weights.h"
#include "backend/forward_backend.h"
#include "iwb/engine/backend/cuda_step_plan.h"
#include "iwb/engine/plan/forward_plan.h"
#include "iwb/engine/profile/op_costs.h"
#include "iwb/engine/profile/profiler.h"
#include "iwb/engine/runtime/engine.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::cuda {

// Device addresses of one step's metadata (fixed for the backend's life, so graphs stay valid).
struct StepMetadata {
  int32_t* tokens = nullptr;            // [max_tokens]
  int32_t* positions = nullptr;         // [max_tokens]
  int64_t* slot_mapping = nullptr;      // [max_tokens]
  int32_t* token_sequences = nullptr;   // [max_tokens]
  int32_t* block_tables = nullptr;      // [max_sequences x max_blocks_per_sequence]
  int32_t* sequence_lengths = nullptr;  // [max_sequences]
  int32_t* logits_rows = nullptr;       // [max_tokens]
  int32_t* block_copies = nullptr;      // [max_copies x 2]
  int32_t* argmax_tokens = nullptr;     // [max_tokens]: greedy tokens coming back (not copied up)
};

// Byte offsets of the arrays above inside the metadata buffer (the same in the pinned staging).
struct MetadataLayout {
  size_t tokens = 0, positions = 0, slot_mapping = 0, token_sequences = 0, block_tables = 0, sequence_lengths = 0,
         logits_rows = 0, block_copies = 0, argmax_tokens = 0, total = 0;
  int64_t max_copies = 0;
};

// The sizes one step's operations are launched with.
struct StepShape {
  int64_t num_tokens = 0;
  int64_t num_sequences = 0;
  int64_t num_logits_rows = 0;
  const FlatBatch* batch = nullptr;  // host copy, for the attention record's spans (eager steps)
};

class CudaForwardBackend final : public ForwardBackend {
 public:
  static Result<std::unique_ptr<CudaForwardBackend>> create(const ModelConfig& config, const ModelWeights& weights,
                                                            const EngineOptions& options, int device_index,
                                                            int64_t context_length, const LoadProgress& progress);
  ~CudaForwardBackend() override;

  DeviceRef device() const override { return {ComputeDeviceKind::Cuda, static_cast<int16_t>(m_device)}; }
  std::string description() const override { return m_description; }
  const KvPoolGeometry& kv_geometry() const override { return m_kv; }
  int64_t max_batch() const override { return m_capacity.max_tokens; }
  // Host threads for what stays on the CPU (a speculative drafter); one thread drives the stream.
  int num_threads() const override { return m_num_threads; }

  Status copy_blocks(std::span<const BlockCopy> copies) override;
  Status forward(const FlatBatch& batch, float* logits) override { return run_step(batch, logits, nullptr); }
  bool has_device_argmax() const override { return true; }
  Status forward_argmax(const FlatBatch& batch, int32_t* tokens) override { return run_step(batch, nullptr, tokens); }

  void begin_profile(Phase phase, size_t capacity) override;
  ProfiledKernels take_profile() override;

  bool is_batch_invariant() const override { return m_is_batch_invariant; }
  void set_batch_invariant(bool is_batch_invariant) override;
  void set_activation_observer(ActivationObserver* observer) override { m_observer = observer; }
  void fill_memory_report(MemoryReport* report) const override;
  std::span<const int32_t> expert_counts() const override {
    return {m_expert_counts_host.as<int32_t>(), m_expert_counts_host.bytes() / sizeof(int32_t)};
  }

 private:
  CudaForwardBackend(const ModelConfig& config, int device) : m_config(config), m_device(device) {}
  // cuda_forward_backend.cpp: the allocations after the weights.
  Status allocate_scratch(const EngineOptions& options, int64_t context_length);
  Status allocate_kv_pool(const EngineOptions& options, int64_t context_length);
  Status warm_up_gemms();
  void destroy_graphs();

  // cuda_forward_step.cpp: one step, eager or through a graph; its logits rows (or with
  // `tokens`, only their argmax) to the host.
  Status run_step(const FlatBatch& batch, float* logits, int32_t* tokens);
  Status stage_metadata(const FlatBatch& batch);
  // The classifier over logits rows [first, first + count); with is_argmax, their argmax too.
  Status finish_rows(const StepShape& shape, int64_t first, int64_t count, bool is_argmax);
  Status copy_tokens_out(int64_t num_rows, int32_t* tokens);
  Status run_decode_graph(const DecodeGraphKey& key, const StepShape& shape);
  Status copy_logits_out(int64_t num_rows, float* logits);
  // A failed call: the error as a Status; a fault that poisons the context marks the backend
  // unusable (later steps say it must be reloaded).
  Status fail(cudaError_t error, std::string_view what);  // `what` becomes text only on failure
  Status launched(cudaError_t error, const char* what, int64_t layer);

  // cuda_forward_layers.cpp: the plan's ops on the device. run_layers walks the body over the
  // step's tokens, compute_logits the logits ops over rows [first_row, first_row + num_rows).
  Status run_layers(const StepShape& shape);
  Status compute_logits(const StepShape& shape, int64_t first_row, int64_t num_rows);
  Status run_op(const PlanOp& op, const StepShape& shape, int64_t num_rows, int64_t first_row);
  // RoPE on the step's queries and keys; with `with_kv_write`, the next op's KV write in the same
  // launch (f16 caches on both sides, not while recording: rope_cuda's k_cache).
  Status run_rope(const PlanOp& op, int64_t num_rows, bool with_kv_write = false);
  Status run_attention(const PlanOp& op, const StepShape& shape);
  float* buffer(PlanBuffer b) const;
  const float* norm_weight(const PlanOp& op) const;
  // Ends the event pair of part `part` of `op` with its plan record (while recording).
  Status op_end(const PlanOp& op, int part, int64_t num_rows) {
    return is_recording() ? op_end(op_record(m_plan, op, part, num_rows, m_spans)) : Status{};
  }
  // cuda_matmul.cpp: y[n x out] = x[n x in] W^T (+ bias).
  Status matmul(const PlanOp& op, int part, const float* x, int64_t n, float* y);
  Status gemm(const DeviceMatrix& w, const float* x, int64_t n, float* y);
  // The weight and bias of an op's product `part`.
  const DeviceMatrix& product_matrix(const PlanOp& op, int part, const float** bias) const;
  // Whether all of an op's products (two or three: q, k, v; gate, up) go out in one launch per
  // chunk of tokens: every one in the split layout of one type (matvec_split_group_cuda), or
  // every one F16 / BF16 / F32 of one type, or Q4_K on int8 activations, on the matvec path
  // (matvec_group_cuda; Q4_K_M's Q6_K v of some layers keeps q, k and v apart there); and no
  // per-product record or observer (profiled steps keep one record per weight, so they launch
  // each product alone, bit for bit the same results).
  bool can_group_products(const PlanOp& op, int64_t n) const;
  // Whether some product of `op` will read int8 activations of all n tokens of its input at once
  // (matmul()'s and matmul_group()'s choice of path): then the kernel before it writes them
  // beside its f32 output (add_rmsnorm_q8_cuda, the activation's q8 outputs) and the products
  // skip their quantize launch, three launches a layer of a quantized model's decode.
  bool products_take_q8(const PlanOp& op, int64_t n) const;
  // How many tokens each int8-activation launch of w takes for an n-token input (matmul()'s choice
  // of path: the split layout, or the matvec path's int8 kernels), or 0 when w multiplies f32
  // (or f16 through cuBLAS) activations.
  int64_t int8_launch_tokens(const DeviceMatrix& w, int64_t n) const;
  // Records that m_x_q8 now holds x's n tokens as int8 activations, for the next Matmuls op.
  void prepared_q8(const float* x, int64_t n);
  Status matmul_group(const PlanOp& op, const float* x, int64_t n);
  // cuda_experts.cpp: the expert ops (routing, the experts' products, their weighted sum).
  Status run_expert_routing(const PlanOp& op, int64_t n);
  Status run_expert_matmuls(const PlanOp& op, int64_t n);
  Status run_expert_combine(const PlanOp& op, int64_t n);
  Status observe_expert_inputs(const PlanOp& op, const PlanProduct& p, const DeviceExperts& w, int64_t n);

  // cuda_profiling.cpp: an event pair around each recorded operation.
  bool is_recording() const { return m_recorder.is_active(); }
  Status op_begin();
  Status op_end(const KernelRecord& record);
  void destroy_events();

  const ModelConfig& m_config;
  int m_device = 0;
  std::string m_name;  // the GPU's product name
  std::string m_description;
  DeviceWeights m_weights;
  ForwardPlan m_plan;
  KvPoolGeometry m_kv;
  CudaStepCapacity m_capacity;
  bool m_is_batch_invariant = false;
  bool m_group_products = true;  // can_group_products; IWB_CUDA_GROUP=0 turns it off
  // Programmatic dependent launch (launch_cuda.h) for this device's steps: compute capability
  // 9.0 or more, unless IWB_CUDA_PDL=0; never while recording a profile.
  bool m_programmatic_launch = false;
  int m_num_threads = 1;
  ActivationObserver* m_observer = nullptr;
  std::string m_broken;  // set when the context is unusable: why

  Stream m_stream;
  cublasHandle_t m_cublas = nullptr;

  // Device memory.
  DeviceBuffer m_kv_pool;  // per layer: keys [num_slots x k_row], then values [num_slots x v_row], f16
  std::vector<uint16_t*> m_k_pools, m_v_pools;
  // FP8 scales, stored with the cache: [2 x num_layers] floats (keys', then values'), 1 until
  // calibrated; a layer's are calibrated by its first KV write when kv_cache_type.calculate_scales.
  DeviceBuffer m_kv_scales;
  std::vector<bool> m_is_scale_calibrated;  // [layer]
  DeviceBuffer m_activations;               // the f32 activations below
  float *m_x = nullptr, *m_xn = nullptr, *m_q = nullptr, *m_k = nullptr, *m_v = nullptr, *m_attn = nullptr,
        *m_proj = nullptr, *m_gate = nullptr, *m_up = nullptr, *m_final = nullptr, *m_logits = nullptr;
  int64_t m_logits_chunk_rows = 0;  // rows m_final / m_logits hold
  // Expert layers (none elsewhere): the router's logits [max_tokens x num_experts], each routed
  // row's (token t's j-th expert: row t * k + j) gate, up and output, the shared experts' gate
  // and up, and the routing's choice and weights [max_tokens x k] (int32 / f32).
  float *m_router_logits = nullptr, *m_expert_gate = nullptr, *m_expert_up = nullptr, *m_expert_out = nullptr,
        *m_shared_gate = nullptr, *m_shared_up = nullptr, *m_expert_weight = nullptr;
  int32_t* m_expert_choice = nullptr;
  // Steps of several tokens group the routed rows by expert (group_expert_rows_cuda): each
  // routed row's place in that order, each place's token row, the group table and its length,
  // and the tokens' normed rows copied into that order. m_experts_grouped: this layer's are.
  float* m_expert_in = nullptr;
  int32_t *m_expert_position = nullptr, *m_expert_source = nullptr, *m_expert_groups = nullptr,
          *m_expert_group_count = nullptr;
  bool m_experts_grouped = false;
  // Tokens each layer routed to each expert in the step [num_layers x num_experts]: counted by
  // the routing kernel, cleared as the body starts, copied to the pinned host buffer once the
  // step's last kernel is queued (the step's wait covers the copy); what expert_counts() gives
  // the Experts tab.
  // copy_expert_counts queues that copy, after the logits section (whose last layer routes too).
  Status copy_expert_counts();
  DeviceBuffer m_expert_counts;
  PinnedBuffer m_expert_counts_host;
  DeviceBuffer m_x16;  // f16 activations for cuBLAS [max_tokens x widest input]
  // What m_x16 holds: the f32 input it was converted from and how many values, within the
  // current Matmuls op (null: none), so q, k and v (gate and up) convert their input once.
  const float* m_x16_source = nullptr;
  int64_t m_x16_values = 0;
  // Up to kSplitMaxTokens tokens of input quantized to int8 (quantize_x_q8_cuda) for the
  // products of Q4_0, Q8_0 and Q6_K (split layout: 1..8 tokens a launch; GGUF layout: one token) and Q4_K:
  // values, then the 32-value blocks' scales at m_x_q8_scale. m_q8_source / m_q8_tokens: the
  // input they hold, within the current op (null: none). The CPU's fast path quantizes the same
  // way (BlockQ8A); IWB_CUDA_Q8_INPUT=0 keeps the GGUF-layout products on f32 activations. (The
  // ninth session's "0.018 against the CPU" was against the CPU's exact f32-activation mode.)
  DeviceBuffer m_x_q8;
  float* m_x_q8_scale = nullptr;
  int64_t m_q8_capacity = 0;  // the widest input one token needs
  const float* m_q8_source = nullptr;
  int64_t m_q8_tokens = 0;
  bool m_use_q8_input = true;
  // m_x_q8 holds m_q8_source's int8 copy, written by the op just before the next Matmuls op (which
  // then keeps it instead of starting afresh); m_activation_q8: the next activation writes one.
  bool m_q8_prepared = false;
  bool m_activation_q8 = false;
  bool m_fuse_q8 = true;  // products_take_q8 may say yes; IWB_CUDA_FUSED_Q8=0 turns it off
  // Quantizes n tokens of x (unless this op already did) into m_x_q8.
  Status quantize_input_q8(const float* x, int64_t n, int64_t in_features, const char* name, int64_t layer);
  DeviceBuffer m_w16;  // f16 weights for cuBLAS [largest matrix]
  DeviceBuffer m_attention_workspace;
  DeviceBuffer m_cublas_workspace;
  DeviceBuffer m_metadata;
  MetadataLayout m_layout;
  StepMetadata m_meta;

  // Page-locked host memory: the metadata going up, the logits coming down.
  PinnedBuffer m_staging;
  PinnedBuffer m_logits_host;

  std::map<DecodeGraphKey, cudaGraphExec_t> m_graphs;
  // Failed captures per shape: the step runs eagerly instead (the first failure may be a
  // library's one-time setup, which the eager run gets done); after two, the shape stays eager.
  std::map<DecodeGraphKey, int> m_capture_failures;

  KernelRecorder m_recorder;
  std::vector<cudaEvent_t> m_event_starts, m_event_ends;
  size_t m_num_events = 0;  // pairs recorded this step
  std::vector<op_costs::AttentionSpan> m_spans;
  std::vector<float> m_observed;  // host copy of a matmul input for the activation observer
};

}  // namespace iwb::cuda
