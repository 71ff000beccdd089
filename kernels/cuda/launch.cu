// The process's programmatic-launch setting (iwb/kernels/cuda/launch_cuda.h).
#include "iwb/kernels/cuda/launch_cuda.h"

#include <atomic>

namespace iwb {
namespace {
std::atomic<bool> g_programmatic_launch{false};
}  // namespace

void set_cuda_programmatic_launch(bool enabled) { g_programmatic_launch.store(enabled, std::memory_order_relaxed); }
bool cuda_programmatic_launch() { return g_programmatic_launch.load(std::memory_order_relaxed); }

}  // namespace iwb
