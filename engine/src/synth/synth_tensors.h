// The tensors of a synthetic model (private to engine/src/synth): names and shapes as llama.cpp
// expects them per architecture, each tensor's type from the quantization rules, the scale of
// its random values, and the parallel generate-and-quantize filler the GGUF writer streams.
#pragma once

#include "iwb/engine/status.h"
#include "iwb/engine/synth/quant_mix.h"
#include "iwb/engine/synth/synth_preset.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace iwb::synth::detail {

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;   // ggml order: shape[0] is the row length
  TensorRole role = TensorRole::Norm;
  TensorTypeChoice type;
  float mean = 0.0f;            // values are mean + stddev * N(0, 1) ...
  float stddev = 0.0f;
  std::vector<float> fixed_values;  // ... unless given here (RoPE factors)

  int64_t row_length() const { return shape[0]; }
  int64_t num_rows() const;
  uint64_t num_bytes() const;
};

// Every tensor of the shape in file order (embedding, layers, final norm, classifier).
std::vector<TensorPlan> plan_tensors(const SynthShape& shape, const WeightTypePlan& types);

// Generates the tensor's rows (deterministic per seed, name and row) and converts them to its
// type into dst (exactly num_bytes()), rows split across num_threads (0: OpenMP's default).
// distinct_rows > 0 (SynthOptions::distinct_rows): a tensor of any type but F32 converts only
// that many rows and fills the rest with copies of them.
Status fill_tensor(const TensorPlan& tensor, uint64_t seed, int64_t distinct_rows, int num_threads,
                   std::span<uint8_t> dst);

}  // namespace iwb::synth::detail
