// The model's weights on a CUDA device: matrices in their stored GGUF type (the matvec kernels
// and the f16 dequantization for cuBLAS read them as stored), norms, biases and rope factors as
// f32. A matrix type the GPU kernels do not handle is converted to F16 on upload, and said so.
// One device allocation holds everything (one clear out-of-memory error with the total).
#pragma once

#include "backend/cuda/cuda_buffers.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/status.h"
#include "model/model_weights.h"

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

namespace iwb::cuda {

struct DeviceMatrix {
  GgmlType type = GgmlType::F32;  // as uploaded: the stored type, or F16 when converted
  const void* data = nullptr;     // device: out_features rows of in_features values
  int64_t in_features = 0;
  int64_t out_features = 0;
  uint64_t num_bytes = 0;
  // Q4_0 / Q8_0 / Q6_K repacked to the split layout (iwb/kernels/split_blocks.h) for the int8 product
  // (the token table too: the gather reads it), unless int8 activations are off.
  bool is_split = false;
};

// A mixture-of-experts layer's expert tensor on the device: every expert's matrix as stored
// (never the split layout: expert_matvec_cuda reads GGUF rows), expert e's at data + e * stride.
struct DeviceExperts {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t in_features = 0;
  int64_t out_features = 0;
  int64_t num_experts = 0;
  uint64_t stride = 0;  // bytes of one expert's matrix
};

struct DeviceLayer {
  const float* attn_norm = nullptr;
  DeviceMatrix wq, wk, wv, wo;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;  // null: no bias
  const float *q_norm = nullptr, *k_norm = nullptr;                        // gemma3
  const float* post_attention_norm = nullptr;                              // gemma3
  const float* attn_sinks = nullptr;                                       // gpt-oss: [num_heads], or null
  const float* ffn_norm = nullptr;
  DeviceMatrix ffn_gate, ffn_up, ffn_down;
  const float* post_ffw_norm = nullptr;  // gemma3
  // Expert layers: the router (its bias, glm4moe's selection bias), the experts (gpt-oss's
  // per-expert down biases, per-expert output scales) and the shared experts (glm4moe's).
  DeviceMatrix ffn_gate_inp;
  const float* ffn_gate_inp_b = nullptr;
  const float* exp_probs_b = nullptr;
  DeviceExperts ffn_gate_exps, ffn_up_exps, ffn_down_exps;
  const float *ffn_gate_exps_b = nullptr, *ffn_up_exps_b = nullptr, *ffn_down_exps_b = nullptr;
  const float* ffn_down_exps_scale = nullptr;
  DeviceMatrix ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp;
};

struct DeviceWeights {
  DeviceMatrix token_embd;
  const float* output_norm = nullptr;
  DeviceMatrix output;                // token_embd's bytes when tied
  const float* rope_freqs = nullptr;  // null when the model has none
  std::vector<DeviceLayer> layers;
  DeviceBuffer buffer;                   // everything above points into it
  uint64_t num_bytes = 0;                // bytes used in the buffer
  std::vector<std::string> conversions;  // "blk.3.ffn_down: Q3_K -> F16 (no GPU kernel)" (one line per type)
  int64_t largest_matrix_elements = 0;   // for the f16 staging of the cuBLAS path
  int64_t widest_input = 0;              // largest in_features of any matrix
};

// Whether matrices of `type` can be used as stored (matvec and f16 dequantization both handle it).
bool is_stored_type_usable(GgmlType type);

// Uploads with blocking copies (load time); fraction 0..1 through `progress`.
// use_split: Q4_0 / Q8_0 / Q6_K matrices in the split layout (DeviceMatrix::is_split).
Result<DeviceWeights> upload_weights(const ModelConfig& config, const ModelWeights& weights, int device, bool use_split,
                                     const std::function<void(double)>& progress);

}  // namespace iwb::cuda
