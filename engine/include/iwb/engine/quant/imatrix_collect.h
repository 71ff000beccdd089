// `iwb imatrix`: runs a model over calibration text in chunks (as llama-imatrix does) with an
// activation observer on the forward pass, accumulating each weight matmul's per-channel sum
// of squared inputs: the importance matrix quantize_model weights its rounding error with.
// The logits of the same run give the text's perplexity, as llama-imatrix prints it.
#pragma once

#include "iwb/engine/quant/imatrix.h"
#include "iwb/engine/status.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace iwb::quant {

struct ImatrixOptions {
  std::string model_path;
  std::string text;
  std::string text_name = "built-in";
  int64_t context = 512;
  int64_t num_chunks = 0;        // 0: all the text holds
  int num_threads = 0;
  bool include_output = false;   // llama-imatrix leaves output.weight out unless asked
  // llama-imatrix's default (its --no-ppl turns it off): the perplexity of each chunk's second
  // half, scored as `iwb eval` (llama-perplexity) scores it.
  bool compute_perplexity = true;
  std::function<void(int64_t chunk, int64_t num_chunks)> progress;
  // After each chunk, with compute_perplexity: the perplexity of the chunks so far (the [i]
  // values llama-imatrix prints).
  std::function<void(int64_t chunk, double perplexity)> chunk_perplexity;
  const std::atomic<bool>* cancel = nullptr;
};

// The calibration text's perplexity over the chunks (llama-perplexity's estimate and error).
struct ImatrixPerplexity {
  int64_t num_scored = 0;  // 0: not computed
  double perplexity = 0;
  double perplexity_error = 0;  // ppl times the standard error of the mean negative log-likelihood
};

// `perplexity`, where given, receives the text's perplexity when options.compute_perplexity.
Result<Imatrix> collect_imatrix(const ImatrixOptions& options, ImatrixPerplexity* perplexity = nullptr);

}  // namespace iwb::quant
