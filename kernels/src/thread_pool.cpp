// The kernels' thread pool: persistent workers, one futex word each, that spin briefly after a
// region and then sleep. Why not OpenMP: libgomp offers only spinning (fast alone; with another
// process on one of two cores, spinning workers take the time slices the thread holding the
// work needs, and decode collapsed from ~40 to ~16 tokens/s) or passive waiting (every region a
// futex sleep and wake-up: 10-25% slower decode on an idle machine, some 200 regions per
// token). A bounded spin that yields the core keeps the first without the second's collapse.
//
// A bounded spin does not help when another process keeps a core busy: the OS then shares that
// core between it and one of our threads, and a region's caller, done with its part, waits for
// a worker the OS has set aside, for up to a time slice (milliseconds, against a decode
// region's ~100 us). Two threads then ran slower than one (Zen 3, default model tg64 beside
// `yes > /dev/null`: 11.7-12.3 tokens/s on two threads, 15.5 on one). So the pool watches its
// joins: where the caller waits longer for its workers than it worked itself, and over 200 us,
// in 4 of the last 32 regions of one kind (one region body: a decode step's matmuls, its norms,
// ...), that kind's next regions run on one thread fewer for a while (250 ms, doubling while it
// recurs, up to 4 s), then on all again. Per kind, because a prompt's matmuls, tens of
// milliseconds each, still gain from two threads on a busy machine (66.8 against 61.2 tokens/s
// on one, pp256 beside `yes`) while its short norms between them stall like decode's regions.
#include "parallel.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace iwb {
namespace {

using Clock = std::chrono::steady_clock;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

int spin_from_environment() {
  if (const char* v = std::getenv("IWB_THREAD_SPIN_US"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long us = std::strtol(v, &end, 10);
    if (end != v && us >= 0) return static_cast<int>(std::min<long>(us, 1'000'000));
  }
  return 200;
}

bool adaptive_from_environment() {
  const char* v = std::getenv("IWB_THREAD_ADAPT");
  return v == nullptr || std::string_view(v) != "0";
}

std::atomic<int> g_spin_us{spin_from_environment()};
std::atomic<bool> g_adaptive{adaptive_from_environment()};
std::atomic<int64_t> g_regions{0}, g_pooled_regions{0}, g_serial_regions{0}, g_worker_sleeps{0}, g_contended_regions{0},
    g_contention_events{0};
std::atomic<int> g_num_workers{0};

// The join watch (see the top of the file). Used only by the thread holding the pool.
class ContentionWatch {
 public:
  static constexpr auto kLateJoin = std::chrono::microseconds(200);
  static constexpr int kWindow = 32, kLateInWindow = 4;
  static constexpr auto kFirstBackoff = std::chrono::milliseconds(250), kMaxBackoff = std::chrono::milliseconds(4000);
  // Regions at full strength without a finding after which the backoff starts over.
  static constexpr int kCleanRegions = 1024;

  // The threads a region asking for `requested` gets now.
  int threads_for(int requested, Clock::time_point now) {
    if (m_cap == 0) return requested;
    if (now >= m_cap_until) {
      m_cap = 0;
      return requested;
    }
    return std::min(requested, m_cap);
  }

  // One region run on `threads` threads: the caller worked `work`, then waited `join`.
  void record(int threads, Clock::duration work, Clock::duration join, Clock::time_point now) {
    const bool late = join > kLateJoin && join > work;
    m_late = (m_late << 1 | (late ? 1u : 0u)) & ((1ull << kWindow) - 1);
    if (std::popcount(m_late) >= kLateInWindow) {
      m_cap = threads - 1;
      m_cap_until = now + m_backoff;
      m_backoff = std::min<Clock::duration>(2 * m_backoff, kMaxBackoff);
      m_late = 0;
      m_clean = 0;
      g_contention_events.fetch_add(1, std::memory_order_relaxed);
    } else if (++m_clean >= kCleanRegions) {
      m_backoff = kFirstBackoff;
      m_clean = 0;
    }
  }

  void reset() {
    m_late = 0;
    m_cap = 0;
    m_clean = 0;
    m_backoff = kFirstBackoff;
  }

 private:
  uint64_t m_late = 0;  // bit i: the i-th region back was late
  int m_cap = 0;        // threads at most until m_cap_until (0: no cap)
  Clock::time_point m_cap_until{};
  Clock::duration m_backoff = kFirstBackoff;
  int m_clean = 0;
};

// A word one side waits on and the other changes, with the flag that tells the changer whether
// the waiter went to sleep (so a spinning waiter costs the changer no system call). Both sides
// use sequentially consistent operations on the word and the flag: either the changer sees the
// flag, or the waiter sees the change before it sleeps (and futex_wait rechecks the word).
struct alignas(64) WaitWord {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> sleeping{0};

  // Returns once `done(value)` holds: spins with pause, then also yields the core (so a thread
  // the OS put on this core runs — the one holding the work, often), then sleeps.
  template <typename Done>
  bool wait(Done done) {
    uint32_t v = value.load(std::memory_order_acquire);
    if (done(v)) return false;
    const auto start = Clock::now();
    const auto spin = std::chrono::microseconds(g_spin_us.load(std::memory_order_relaxed));
    const auto pause_only = spin / 8;
    for (int k = 1;; ++k) {
      cpu_relax();
      if (done(v = value.load(std::memory_order_acquire))) return false;
      if (k % 32 != 0) continue;
      const auto waited = Clock::now() - start;
      if (waited >= spin) break;
      if (waited >= pause_only) sched_yield();
    }
    sleeping.store(1, std::memory_order_seq_cst);
    while (!done(v = value.load(std::memory_order_seq_cst))) futex_wait(&value, v);
    sleeping.store(0, std::memory_order_relaxed);
    return true;
  }

  void wake_if_sleeping() {
    if (sleeping.load(std::memory_order_seq_cst) != 0) futex_wake_all(&value);
  }
};

// True on pool workers and on a caller inside its region: a region opened there runs serially.
thread_local bool t_in_region = false;

class Pool {
 public:
  void run(int num_threads, detail::RegionFn fn, void* context) {
    if (num_threads <= 1 || t_in_region || !m_busy.try_lock()) {
      if (num_threads > 1) g_serial_regions.fetch_add(1, std::memory_order_relaxed);
      run_alone(fn, context);
      return;
    }
    std::lock_guard lock(m_busy, std::adopt_lock);
    g_pooled_regions.fetch_add(1, std::memory_order_relaxed);
    const bool adaptive = g_adaptive.load(std::memory_order_relaxed);
    if (adaptive != m_was_adaptive) {
      for (Kind& k : m_kinds) k.watch.reset();
      m_was_adaptive = adaptive;
    }
    // The clock is read only for a watch: two reads per region, whose decode ones last ~100 us.
    ContentionWatch* watch = adaptive ? &watch_of(fn) : nullptr;
    const auto start = watch != nullptr ? Clock::now() : Clock::time_point{};
    if (watch != nullptr) {
      const int allowed = watch->threads_for(num_threads, start);
      if (allowed < num_threads) g_contended_regions.fetch_add(1, std::memory_order_relaxed);
      num_threads = allowed;
      if (num_threads <= 1) {
        run_alone(fn, context);
        return;
      }
    }
    g_regions.fetch_add(1, std::memory_order_relaxed);
    grow(num_threads - 1);
    m_fn = fn;
    m_context = context;
    m_num_threads = num_threads;
    m_done.value.store(0, std::memory_order_relaxed);
    for (int i = 0; i + 1 < num_threads; ++i) {
      WaitWord& start = m_workers[static_cast<size_t>(i)]->start;
      start.value.fetch_add(1, std::memory_order_seq_cst);  // publishes the job (release)
      start.wake_if_sleeping();
    }
    t_in_region = true;
    fn(context, 0, num_threads);
    t_in_region = false;
    const auto worked = watch != nullptr ? Clock::now() : Clock::time_point{};
    const auto helpers = static_cast<uint32_t>(num_threads - 1);
    m_done.wait([helpers](uint32_t done) { return done == helpers; });
    if (watch != nullptr) {
      const auto joined = Clock::now();
      watch->record(num_threads, worked - start, joined - worked, joined);
    }
  }

 private:
  struct Worker {
    WaitWord start;  // bumped once per region the worker takes part in
    std::thread thread;
  };

  // Workers are started on first need and live as long as the process (detached: the pool is
  // never destroyed, so no exit-time join can hang behind a region).
  void grow(int count) {
    while (static_cast<int>(m_workers.size()) < count) {
      auto worker = std::make_unique<Worker>();
      const int index = static_cast<int>(m_workers.size());
      worker->thread = std::thread([this, index, w = worker.get()] { work(index, w); });
      worker->thread.detach();
      m_workers.push_back(std::move(worker));
      g_num_workers.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void work(int index, Worker* w) {
    t_in_region = true;
    uint32_t seen = 0;
    for (;;) {
      if (w->start.wait([seen](uint32_t v) { return v != seen; }))
        g_worker_sleeps.fetch_add(1, std::memory_order_relaxed);
      seen = w->start.value.load(std::memory_order_acquire);
      m_fn(m_context, index + 1, m_num_threads);
      const auto helpers = static_cast<uint32_t>(m_num_threads - 1);
      if (m_done.value.fetch_add(1, std::memory_order_seq_cst) + 1 == helpers) m_done.wake_if_sleeping();
    }
  }

  static void run_alone(detail::RegionFn fn, void* context) {
    const bool outer = t_in_region;
    t_in_region = true;
    fn(context, 0, 1);
    t_in_region = outer;
  }

  // The watch of one kind of region (its body's function), the least recently used replaced.
  ContentionWatch& watch_of(detail::RegionFn fn) {
    ++m_clock;
    Kind* oldest = &m_kinds[0];
    for (Kind& k : m_kinds) {
      if (k.fn == fn) {
        k.last_use = m_clock;
        return k.watch;
      }
      if (k.last_use < oldest->last_use) oldest = &k;
    }
    oldest->fn = fn;
    oldest->last_use = m_clock;
    oldest->watch.reset();
    return oldest->watch;
  }

  struct Kind {
    detail::RegionFn fn = nullptr;
    uint64_t last_use = 0;
    ContentionWatch watch;
  };

  std::mutex m_busy;  // one region at a time; held by the caller for the whole region
  std::array<Kind, 32> m_kinds;  // guarded by m_busy
  uint64_t m_clock = 0;
  bool m_was_adaptive = true;
  std::vector<std::unique_ptr<Worker>> m_workers;
  detail::RegionFn m_fn = nullptr;
  void* m_context = nullptr;
  int m_num_threads = 1;
  WaitWord m_done;  // workers finished in this region; the caller waits on it
};

Pool& pool() {
  static Pool* const kPool = new Pool;  // never destroyed (see Pool::grow)
  return *kPool;
}

}  // namespace

int default_num_threads() {
  static const int kThreads = [] {
    if (const char* v = std::getenv("OMP_NUM_THREADS"); v != nullptr) {
      const int n = std::atoi(v);  // "4" or "4,2": the outer level
      if (n > 0) return n;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }();
  return kThreads;
}

int thread_pool_spin_us() { return g_spin_us.load(std::memory_order_relaxed); }

void set_thread_pool_spin_us(int microseconds) {
  g_spin_us.store(std::max(0, microseconds), std::memory_order_relaxed);
}

bool thread_pool_adaptive() { return g_adaptive.load(std::memory_order_relaxed); }

void set_thread_pool_adaptive(bool adaptive) { g_adaptive.store(adaptive, std::memory_order_relaxed); }

ThreadPoolStats thread_pool_stats() {
  ThreadPoolStats s;
  s.contended_regions = g_contended_regions.load(std::memory_order_relaxed);
  s.pooled_regions = g_pooled_regions.load(std::memory_order_relaxed);
  s.contention_events = g_contention_events.load(std::memory_order_relaxed);
  s.regions = g_regions.load(std::memory_order_relaxed);
  s.serial_regions = g_serial_regions.load(std::memory_order_relaxed);
  s.worker_sleeps = g_worker_sleeps.load(std::memory_order_relaxed);
  s.num_workers = g_num_workers.load(std::memory_order_relaxed);
  return s;
}

namespace detail {
void SpinWait::operator()() {
  if (++m_count < 1024) {
    cpu_relax();
  } else {
    sched_yield();
  }
}

void run_region(int num_threads, RegionFn fn, void* context) { pool().run(num_threads, fn, context); }
}  // namespace detail

}  // namespace iwb
