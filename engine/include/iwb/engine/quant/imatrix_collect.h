// `iwb imatrix`: runs a model over calibration text in chunks (as llama-imatrix does) with an
// activation observer on the forward pass, accumulating each weight matmul's per-channel sum
// of squared inputs: the importance matrix quantize_model weights its rounding error with.
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
  std::function<void(int64_t chunk, int64_t num_chunks)> progress;
  const std::atomic<bool>* cancel = nullptr;
};

Result<Imatrix> collect_imatrix(const ImatrixOptions& options);

}  // namespace iwb::quant
