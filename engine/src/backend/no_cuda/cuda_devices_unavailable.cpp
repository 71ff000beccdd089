// list_cuda_devices for builds without CUDA (compiled only when IWB_CUDA_ENABLED is off;
// engine/src/backend/cuda/ holds the real one).
#include "iwb/engine/backend/device_info.h"

namespace iwb {

Result<std::vector<ComputeDeviceInfo>> list_cuda_devices() {
  return make_error(ErrorCode::Unsupported,
                    "built without CUDA support (reconfigure with -DIWB_CUDA=ON and a CUDA toolkit)");
}

}  // namespace iwb
