// Which tensor type each weight gets in a file "of type T": llama.cpp's llama-quantize rules
// (src/llama-quant.cpp) for the single types and the Q4_K_M / Q5_K_M mixes. Norms, biases,
// RoPE factors and experts' routers stay F32; the classifier gets Q6_K unless the file is Q8_0
// (or MXFP4: Q8_0); attn_v and ffn_down
// of the first and last eighth of the layers, and of every third layer between, get Q6_K in the
// _M mixes; rows that are not a whole number of blocks fall back to a type that fits.
#pragma once

#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::synth {

struct WeightTypePlan {
  std::string name;                  // "Q4_K_M", as llama.cpp prints it
  GgmlType base_type = GgmlType::F16;
  bool is_medium_mix = false;        // Q4_K_M, Q5_K_M: more bits for attn_v and ffn_down
  uint32_t file_type = 1;            // llama_ftype, written as general.file_type
};

// "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K" ... "Q6_K", "Q4_K_M",
// "Q5_K_M", "MXFP4" (any case). A K type alone (e.g. Q4_K) means every weight in it (llama.cpp's
// "mostly" types: Q3_K_S, Q4_K_S and Q5_K_S are the nearest file_type labels). MXFP4 puts every
// weight but the classifier (Q8_0, as llama.cpp's MXFP4_MOE files) in MXFP4.
Result<WeightTypePlan> parse_weight_type(std::string_view name);
const std::vector<std::string>& weight_type_names();

// Expert tensors take the role of the dense matrix they replace (ffn_down_exps is FfnDown, as
// llama.cpp's rules match them by name); Router is a mixture of experts' ffn_gate_inp.
enum class TensorRole {
  TokenEmbedding,
  Output,
  AttnQ,
  AttnK,
  AttnV,
  AttnOutput,
  FfnGate,
  FfnUp,
  FfnDown,
  Norm,
  Bias,
  RopeFactors,
  Router,
};

struct TensorTypeQuery {
  TensorRole role = TensorRole::Norm;
  int64_t row_length = 0;      // shape[0]
  int64_t layer = 0;           // for per-layer rules
  int64_t num_layers = 1;
  bool is_classifier = false;  // output.weight, or token_embd when the embeddings are tied
  bool has_imatrix = false;    // quantizing with an importance matrix (one more rule, below)
};

struct TensorTypeChoice {
  GgmlType type = GgmlType::F32;
  bool is_fallback = false;    // the rule's type did not fit the row length
  GgmlType wanted = GgmlType::F32;  // the type the rules asked for (== type unless a fallback)
};

TensorTypeChoice choose_tensor_type(const WeightTypePlan& plan, const TensorTypeQuery& query);

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool uses_more_bits(int64_t layer, int64_t num_layers);

}  // namespace iwb::synth
