// Parallel regions of the kernels (private to kernels/src), run by the engine's thread pool
// (thread_pool.cpp; public settings in iwb/kernels/thread_pool.h).
#pragma once

#include "iwb/kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

namespace iwb::detail {

// The thread count a kernel runs with: the caller's request, or the engine's default.
inline int resolve_threads(int requested) { return requested > 0 ? requested : default_num_threads(); }

// Below this much work (multiply-adds or elements) a parallel region costs more than it saves.
inline constexpr int64_t kMinParallelWork = 1 << 15;

// A wait inside a region for other threads' work: pauses, then yields the core (on a busy
// machine the thread being waited for may be the one the OS put beside this one).
class SpinWait {
 public:
  void operator()();

 private:
  int m_count = 0;
};

// Runs fn(context, thread, num_threads) on up to `num_threads` threads, the caller being thread
// 0, and returns when all have finished. A region opened inside another (or while another
// thread's region holds the pool) runs on the caller alone with num_threads 1, so bodies must
// split their work by the num_threads they are given, never by the one they asked for.
using RegionFn = void (*)(void* context, int thread, int num_threads);
void run_region(int num_threads, RegionFn fn, void* context);

template <typename F>
void parallel_region(int num_threads, F&& body) {
  using Body = std::remove_reference_t<F>;
  run_region(
      num_threads, [](void* c, int thread, int n) { (*static_cast<Body*>(c))(thread, n); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

// body(i) for i in [0, n): contiguous ranges, one per thread (OpenMP's schedule(static)).
template <typename F>
void parallel_for_static(int num_threads, int64_t n, F&& body) {
  parallel_region(num_threads, [&](int thread, int threads) {
    const int64_t per = n / threads, extra = n % threads;
    const int64_t begin = thread * per + std::min<int64_t>(thread, extra);
    const int64_t end = begin + per + (thread < extra ? 1 : 0);
    for (int64_t i = begin; i < end; ++i) body(i);
  });
}

// body(i) for i in [0, n), claimed one at a time from a shared counter (schedule(dynamic, 1)):
// for items of uneven cost, and so a thread the OS holds back leaves its share to the others.
template <typename F>
void parallel_for_dynamic(int num_threads, int64_t n, F&& body) {
  std::atomic<int64_t> next{0};
  parallel_region(num_threads, [&](int, int) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      body(i);
    }
  });
}

}  // namespace iwb::detail
