// What the profiler records about one kernel call, and the per-step batch of those records that
// travels from the engine to the GUI. Backend-neutral plain values: the CPU fills them from a
// steady clock, a CUDA backend from events; the analytic cost model fills them with seconds = 0.
#pragma once

#include "iwb/engine/backend/device_info.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <string>
#include <vector>

namespace iwb {

// The kinds of kernel a forward pass runs. One roofline point per (kind, phase).
enum class OpKind : uint8_t {
  Embedding,     // token table row lookup
  RmsNorm,       // every RMS norm: block inputs, per-head q/k norms, post-norms, the output norm
  Matmul,        // weight matrix x activations inside the layers
  Rope,          // rotary position embedding of queries or keys
  KvWrite,       // new keys and values converted to f16 into the cache
  Attention,     // scores, softmax and the weighted sum of values, over the cache
  Activation,    // gated FFN activation: SwiGLU or GeGLU
  Add,           // residual additions
  Logits,        // the classifier matmul (last token only)
  Softcap,       // final logit soft-capping (gemma)
  Softmax,       // a stand-alone softmax (backends whose attention runs it as its own kernel; MoE gating)
  ExpertMatmul,  // mixture of experts: the routed experts' matrices x the tokens routed to them
  Recurrent,     // a recurrent layer's token mixing (Qwen 3.5): its convolution, its state's update
};
inline constexpr int kNumOpKinds = 13;

enum class Phase : uint8_t { Prefill, Decode };

const char* op_kind_name(OpKind kind);  // "matmul", "rmsnorm", ...
const char* phase_name(Phase phase);    // "prefill", "decode"

// Which device ran a kernel: compact so records stay small; id() gives "cpu" or "cuda:0",
// the device_id the results store keys probes by.
struct DeviceRef {
  ComputeDeviceKind kind = ComputeDeviceKind::Cpu;
  int16_t index = 0;
  std::string id() const;
  bool operator==(const DeviceRef&) const = default;
};

// The numbers behind a record's shape text. Fields a kind does not use stay 0.
struct OpShape {
  int64_t num_tokens = 0;        // tokens of the step this call processes
  int64_t rows = 0;              // matmul/logits/expert_matmul: out_features; rmsnorm: rows normalised (tokens, or
                                 // tokens x heads); softmax: rows (tokens)
  int64_t cols = 0;              // matmul/logits/expert_matmul: in_features; rmsnorm/add/activation/embedding/softcap/
                                 // softmax: row width
  int64_t num_kv = 0;            // attention: KV positions the last token of the call attends over
  int32_t num_heads = 0;         // attention, rope
  int32_t num_kv_heads = 0;      // attention, kv_write
  int32_t head_dim = 0;          // attention: query/key width per head; rope: head width; kv_write: key width per head
  int32_t head_dim_v = 0;        // attention, kv_write: value width per head
  int32_t window = 0;            // attention: sliding window (0: the whole context)
  int32_t num_experts = 0;       // expert_matmul: experts whose matrices the call read (those routed to)
  int32_t num_experts_used = 0;  // expert_matmul: experts per token (k): the call multiplies num_tokens x k rows
  bool operator==(const OpShape&) const = default;
};

struct KernelRecord {
  OpKind kind = OpKind::Matmul;
  Phase phase = Phase::Decode;
  int16_t layer = -1;  // -1: outside the layers (embedding, output norm, logits)
  DeviceRef device;
  GgmlType data_type = GgmlType::F32;  // the stored operand: weight type for matmul/embedding/logits/expert_matmul,
                                       // F16 for the KV cache (attention, kv_write), F32 otherwise
  const char* name = "";               // which call: "attn_q", "ffn_down", "attn_norm", ... (static text)
  OpShape shape;
  double flops = 0;    // multiply-adds count two
  double bytes = 0;    // minimum traffic: inputs read once, outputs written once, weights as stored
  double seconds = 0;  // measured duration; 0 for a prediction

  double intensity() const { return bytes > 0 ? flops / bytes : 0; }        // FLOP/byte
  double flops_per_s() const { return seconds > 0 ? flops / seconds : 0; }  // achieved
  double bytes_per_s() const { return seconds > 0 ? bytes / seconds : 0; }
  // "1536x8960 Q4_K, 22 tok", "12/2 heads x 128, ctx 1024, 1 tok", ...: formatted on demand,
  // never on the token path.
  std::string shape_text() const;
};

// The records of one engine step, sent as one value. Empty `kernels` when profiling is off.
struct ProfileBatch {
  uint64_t step_index = 0;  // counts steps of this engine, profiled or not
  Phase phase = Phase::Decode;
  int32_t num_tokens = 0;    // tokens the step's forward pass ran
  int64_t num_kv = 0;        // context after the step, summed over the step's sequences
  double step_seconds = 0;   // the whole step (kernels + sampling + bookkeeping)
  uint32_t num_dropped = 0;  // records that did not fit the preallocated buffer (should be 0)
  std::vector<KernelRecord> kernels;

  bool is_empty() const { return kernels.empty(); }
  double kernel_seconds() const;  // sum over the records
};

}  // namespace iwb
