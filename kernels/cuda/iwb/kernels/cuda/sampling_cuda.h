// Token selection on the GPU, one logits row per sequence: argmax (greedy) and temperature
// sampling with top-k / top-p / min-p from a uniform number the caller supplies per row (so it
// is deterministic and testable). Sampler::candidates (engine/sampling) is the CPU twin: the
// same filter order (top-k on logits, top-p and min-p on temperature-1 probabilities, then the
// temperature), the same tie order (higher logit first, then lower id) and the same draw (the
// first candidate whose cumulative probability exceeds u). Non-finite logits never win.
// Not done here: repetition/frequency/presence penalties (apply them first, or sample on the CPU).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

// Most candidates the device keeps: top_k <= 0 (off) or above this is treated as this, which
// matches the CPU only when the top-p / min-p cut leaves fewer than this many tokens anyway.
inline constexpr int32_t kCudaSamplingMaxTopK = 128;

struct SamplingRowParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax)
  int32_t top_k = 40;
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
};

// True when the device draw follows exactly the CPU rule for these settings: greedy, or top_k
// in 1..kCudaSamplingMaxTopK (and no penalties, which the caller knows about).
inline bool cuda_sampling_matches_cpu(const SamplingRowParams& p) {
  return p.temperature <= 0.0f || (p.top_k >= 1 && p.top_k <= kCudaSamplingMaxTopK);
}

// tokens[r] = index of the largest logit of row r (lowest index on ties; NaN never wins; -1 when the
// row is all NaN; infinities compare as values, as std::max_element does on the CPU).
// cudaErrorInvalidValue for null pointers or sizes <= 0 (num_rows 0 is fine)
// or a row longer than 2^31 - 1.
cudaError_t argmax_rows_cuda(const float* logits, int64_t num_rows, int64_t row_length, int32_t* tokens,
                             cudaStream_t stream);

struct SampleCudaArgs {
  const float* logits = nullptr;             // device [num_rows x vocab_size]; not modified
  int64_t num_rows = 0;
  int64_t vocab_size = 0;
  const SamplingRowParams* params = nullptr;  // device [num_rows]
  const float* uniforms = nullptr;            // device [num_rows], each in [0, 1)
  int32_t* tokens = nullptr;                  // device [num_rows]: the drawn ids (-1: no finite logit)
};

cudaError_t sample_rows_cuda_check(const SampleCudaArgs& args);
// One thread block per row: a radix select finds the top-k threshold, the <= 128 candidates are
// sorted in shared memory and one thread applies top-p / min-p / temperature and the draw.
cudaError_t sample_rows_cuda(const SampleCudaArgs& args, cudaStream_t stream);

}  // namespace iwb
