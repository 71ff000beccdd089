// The engine's own thread pool for the kernels' parallel regions. Workers that finish a region
// spin for a short while (the next region of a decode step follows within microseconds), then
// sleep on a futex: fast like a spinning OpenMP team when the engine runs alone, and without
// the collapse of spinning workers when the GUI or another process needs a core. The calling
// thread always takes part as thread 0.
#pragma once

#include <cstdint>

namespace iwb {

// Threads the engine uses when a caller asks for 0: OMP_NUM_THREADS when set (the habit of
// llama.cpp and PyTorch users), otherwise the CPUs this process may run on.
int default_num_threads();

// How long a worker (or the waiting caller) spins before it sleeps, in microseconds. The
// default comes from IWB_THREAD_SPIN_US, else 200 us: longer than the serial work between two
// regions of a decode step, far shorter than a person notices a core busy. 0 sleeps at once
// (the old OMP_WAIT_POLICY=passive).
int thread_pool_spin_us();
void set_thread_pool_spin_us(int microseconds);

// Whether regions run on fewer threads while the pool finds its workers held back by other
// work on the machine (its caller waiting for them longer than it worked itself, region after
// region; thread_pool.cpp has the rule). Default on; IWB_THREAD_ADAPT=0 turns it off. Results
// never change with it: kernels split their work by the threads they asked for.
bool thread_pool_adaptive();
void set_thread_pool_adaptive(bool adaptive);

// Counters of the pool since the process started, for tests and the profiler's overhead view.
struct ThreadPoolStats {
  int64_t regions = 0;            // parallel regions run with more than one thread
  int64_t serial_regions = 0;     // regions run by the caller alone (nested, or the pool busy)
  int64_t worker_sleeps = 0;      // times a worker gave up spinning and slept
  int64_t pooled_regions = 0;     // regions the pool took (more than one thread asked, not nested,
                                  // pool free), however many threads they then ran on
  int64_t contended_regions = 0;  // pooled regions run on fewer threads than asked, the machine being busy
  int64_t contention_events = 0;  // times the pool found its workers held back and cut a thread
  int num_workers = 0;            // worker threads started so far
};
ThreadPoolStats thread_pool_stats();

}  // namespace iwb
