// The CUDA ForwardBackend's factory, declared for the engine in every build: backend/cuda/
// defines it over the CUDA runtime, backend/no_cuda/ as an error saying the build lacks CUDA.
#pragma once

#include "iwb/engine/runtime/engine.h"
#include "model/model_weights.h"
#include "backend/forward_backend.h"

#include <memory>

namespace iwb {

// Uploads the weights to cuda:`device_index`, allocates the step's scratch, then the KV pool
// (options.kv_block_size blocks, the budget from options and the device's free memory, see
// kv_budget.h) and makes the stream, cuBLAS handle and graph cache. Errors say what failed
// (OutOfMemory with what was being allocated and how much; DeviceError with the CUDA call).
Result<std::unique_ptr<ForwardBackend>> make_cuda_forward_backend(const ModelConfig& config,
                                                                  const ModelWeights& weights,
                                                                  const EngineOptions& options, int device_index,
                                                                  int64_t context_length,
                                                                  const LoadProgress& progress);

}  // namespace iwb
