// Mixture-of-experts on the GPU: the router's top-k gating, the experts' products for each
// routed row, and the weighted sum of the experts' outputs. Everything stays on the device (the
// choice of experts is never copied to the host), so a decode step with experts is captured
// into a CUDA graph like a dense one. The CPU twins are CpuExperts (engine) and matmul_ref.
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

// How a router's logits become the weights of the chosen experts (llama.cpp's build_moe_ffn).
enum class ExpertGating {
  Softmax,         // softmax over all experts; the k most probable, weighted by their probability
  Sigmoid,         // sigmoid of each logit (glm4moe); chosen by sigmoid + selection bias
  SoftmaxOverTopK  // gpt-oss: the k largest logits, softmax over those k
};

// Most experts a router may have, and most it may choose per token.
inline constexpr int64_t kCudaMaxExperts = 512;
inline constexpr int64_t kCudaMaxExpertsUsed = 32;

struct RouteExpertsCudaArgs {
  const float* logits = nullptr;          // device: [num_tokens x num_experts]
  const float* selection_bias = nullptr;  // device: [num_experts] added for the choice only, or null
  int64_t num_tokens = 0;
  int64_t num_experts = 0;  // 1..kCudaMaxExperts
  int64_t num_used = 0;     // k: 1..min(num_experts, kCudaMaxExpertsUsed)
  ExpertGating gating = ExpertGating::Softmax;
  bool is_normalized = false;  // the k weights divided by their sum (at least 2^-14, f16's smallest normal)
  float weights_scale = 1.0f;  // then multiplied by this
  int32_t* choice = nullptr;   // device: [num_tokens x num_used], the experts in order of score
  float* weight = nullptr;     // device: [num_tokens x num_used], their weights
  int32_t* counts = nullptr;   // device: [num_experts], each choice added (atomically), or null
};

// Per token: the k best experts by score (plus the selection bias), ties to the lower id, in
// descending order, and their weights, in the CPU's order of operations where it is serial.
// A token whose logits are not all finite gets NaN weights (its output becomes NaN, as a dense
// layer's overflow would). One warp per token; graph-capturable.
cudaError_t route_experts_cuda_check(const RouteExpertsCudaArgs& args);
cudaError_t route_experts_cuda(const RouteExpertsCudaArgs& args, cudaStream_t stream);

// ---- Routed rows grouped by expert (steps of several tokens)
//
// One token's k rows each go to their own expert; with several tokens, rows that chose the same
// expert share its weights. group_expert_rows_cuda orders the routed rows as the CPU does
// (experts ascending, tokens in order within an expert) and cuts each expert's rows into groups
// of up to kCudaExpertGroupRows, so that the grouped products read an expert's matrix once per
// group, not once per row.
inline constexpr int64_t kCudaExpertGroupRows = 8;

// Most groups num_routed rows over num_experts experts can make (the size of the group table).
inline int64_t cuda_expert_max_groups(int64_t num_routed, int64_t num_experts) {
  return (num_routed + kCudaExpertGroupRows - 1) / kCudaExpertGroupRows +
         (num_experts < num_routed ? num_experts : num_routed);
}

struct ExpertGroupsCudaArgs {
  const int32_t* choice = nullptr;  // device: [num_routed], route_experts_cuda's
  int64_t num_routed = 0;
  int64_t num_experts = 0;        // 1..kCudaMaxExperts
  int64_t x_row_divisor = 1;      // routed row r's input is row r / x_row_divisor (k for a token's row)
  int32_t* position = nullptr;    // device: [num_routed], routed row r's row in the grouped order
  int32_t* source_row = nullptr;  // device: [num_routed], grouped row p's input row (r / x_row_divisor)
  int32_t* groups = nullptr;      // device: [3 x max_groups], each group's expert, first row and rows
  int32_t* num_groups = nullptr;  // device: [1], how many of them the step has
  int64_t max_groups = 0;         // at least cuda_expert_max_groups(num_routed, num_experts)
};

// The grouping above, in one thread block (deterministic: no order depends on timing).
cudaError_t group_expert_rows_cuda_check(const ExpertGroupsCudaArgs& args);
cudaError_t group_expert_rows_cuda(const ExpertGroupsCudaArgs& args, cudaStream_t stream);

struct ExpertMatvecCudaArgs {
  GgmlType type = GgmlType::F32;  // cuda_expert_matvec_supports
  const void* weights = nullptr;  // device: expert e's out_features rows at weights + e * expert_stride
  uint64_t expert_stride = 0;     // bytes from one expert's matrix to the next (at least its size)
  int64_t num_experts = 0;
  int64_t in_features = 0;  // a multiple of the type's block size, and of 8
  int64_t out_features = 0;
  const int32_t* choice = nullptr;  // device: [num_routed], each routed row's expert (0..num_experts-1)
  int64_t num_routed = 0;           // rows to compute: routed row r = y row r
  const float* x = nullptr;         // device: routed row r reads x row r / x_row_divisor (16-byte aligned rows)
  int64_t x_row_divisor = 1;        // k when x holds one row per token (gate/up), 1 when one per routed row (down)
  float* y = nullptr;               // device: [num_routed x out_features]; must not alias x
  const float* bias = nullptr;      // device: [num_experts x out_features] (expert e's at e * out), or null
  // Grouped rows (group_expert_rows_cuda's table; choice is then not read): x and y hold the
  // rows in the grouped order, x_row_divisor is 1, and each thread block takes up to
  // kCudaExpertGroupRows rows of one expert (matvec_cuda's several-token kernel body).
  const int32_t* groups = nullptr;
  const int32_t* num_groups = nullptr;
  int64_t max_groups = 0;
};

// Types the expert products read as stored: those of matvec_cuda (cuda_matvec_supports) and
// MXFP4 (gpt-oss's experts).
bool cuda_expert_matvec_supports(GgmlType type);
cudaError_t expert_matvec_cuda_check(const ExpertMatvecCudaArgs& args);
// y[r] = W[choice[r]] x[r / x_row_divisor] (+ bias[choice[r]]), each routed row one token of
// matvec_cuda's kernel body (the same decode and the same order of sums whatever the rows
// beside it: for the quantized types a row's result is matvec_cuda's for that expert and input
// bit for bit, grouped or not). Graph-capturable.
cudaError_t expert_matvec_cuda(const ExpertMatvecCudaArgs& args, cudaStream_t stream);

struct CombineExpertsCudaArgs {
  const float* expert_out = nullptr;     // device: [num_tokens x num_used x width], routed row r's at row r
  const int32_t* expert_rows = nullptr;  // device: or at row expert_rows[r] (grouped rows' positions); or null
  const int32_t* choice = nullptr;       // device: [num_tokens x num_used]
  const float* weight = nullptr;         // device: [num_tokens x num_used]
  const float* expert_scales = nullptr;  // device: [num_experts] per-expert output scales, or null
  int64_t num_tokens = 0;
  int64_t num_used = 0;
  int64_t width = 0;
  float* y = nullptr;            // device: [num_tokens x width]
  bool is_accumulating = false;  // add to y (shared experts wrote it) rather than overwrite
};

// y[t] (+)= sum over j in order of weight[t][j] * scale[choice] * expert_out[t][j]. Graph-capturable.
cudaError_t combine_experts_cuda_check(const CombineExpertsCudaArgs& args);
cudaError_t combine_experts_cuda(const CombineExpertsCudaArgs& args, cudaStream_t stream);

}  // namespace iwb
