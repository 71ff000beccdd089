// probe_cuda_devices for builds without CUDA (engine/src/backend/cuda/ holds the real one).
#include "iwb/engine/profile/machine_probe.h"

namespace iwb {

Result<std::vector<ProbeResult>> probe_cuda_devices() {
  return make_error(ErrorCode::Unsupported,
                    "built without CUDA support (reconfigure with -DIWB_CUDA=ON and a CUDA toolkit)");
}

}  // namespace iwb
