// make_cuda_forward_backend for builds without CUDA (engine/src/backend/cuda/ holds the real one).
#include "backend/cuda_forward_factory.h"

namespace iwb {

Result<std::unique_ptr<ForwardBackend>> make_cuda_forward_backend(const ModelConfig&, const ModelWeights&,
                                                                  const EngineOptions&, int device_index, int64_t,
                                                                  const LoadProgress&) {
  return make_error(ErrorCode::Unsupported, "cuda:" + std::to_string(device_index) +
                                                " cannot be used: built without CUDA support (reconfigure with "
                                                "-DIWB_CUDA=ON and a CUDA toolkit)");
}

}  // namespace iwb
