// OpenMP helpers shared by the kernels (private to kernels/src).
#pragma once

#include <omp.h>

#include <cstdint>

namespace iwb::detail {

// The thread count a kernel runs with: the caller's request, or OpenMP's default.
inline int resolve_threads(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

// Below this much work (multiply-adds or elements) a parallel region costs more than it saves.
inline constexpr int64_t kMinParallelWork = 1 << 15;

}  // namespace iwb::detail
