// The read-only bandwidth sweep, repeatable on buffers kept between calls: the CPU probe's read
// figure, and each benchmark repetition's probe of the same minute (machine_probe.h).
#include "iwb/engine/profile/machine_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

namespace iwb {
namespace {

using Clock = std::chrono::steady_clock;

// [begin, end) of thread t's share of n values: the same split for first touch and for reading.
std::pair<size_t, size_t> share(size_t n, int t, int threads) {
  const size_t chunk = (n + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  const size_t begin = std::min(n, static_cast<size_t>(t) * chunk);
  return {begin, std::min(n, begin + chunk)};
}

// Runs body(t) on threads 1..threads-1 and the caller (t = 0), all released together, and
// returns the seconds from their release to the last one's finish (thread starts not counted).
template <typename F>
double on_threads(int threads, F&& body) {
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(t);
    });
  }
  const auto t0 = Clock::now();
  go.store(true, std::memory_order_release);
  body(0);
  for (std::thread& w : workers) w.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(int num_threads, HugePageRegion buffer, size_t count)
    : m_num_threads(num_threads), m_buffer(std::move(buffer)), m_count(count) {}

Result<std::unique_ptr<ReadBandwidthProbe>> ReadBandwidthProbe::create(int num_threads, uint64_t buffer_bytes) {
  if (buffer_bytes < (1u << 20)) return make_error(ErrorCode::InvalidArgument, "probe buffers must be at least 1 MiB");
  if (num_threads < 1) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const size_t count = static_cast<size_t>(buffer_bytes / sizeof(float));
  HugePageRegion values = HugePageRegion::allocate(count * sizeof(float));
  if (values.empty()) {
    return make_error(ErrorCode::OutOfMemory, "not enough memory for a read-only probe buffer of " +
                                                  std::to_string(buffer_bytes >> 20) + " MiB");
  }
  auto* v = static_cast<float*>(values.data());
  // First touch by the thread that reads the share later (its NUMA node's memory).
  on_threads(num_threads, [&](int t) {
    const auto [begin, end] = share(count, t, num_threads);
    std::fill(v + begin, v + end, 1.0f);
  });
  std::unique_ptr<ReadBandwidthProbe> probe(new ReadBandwidthProbe(num_threads, std::move(values), count));
  // One untimed sweep writes back the lines the fill left dirty: timed sweeps then write nothing.
  float sink = 0;
  probe->sweep_seconds(0, &sink);
  return probe;
}

double ReadBandwidthProbe::sweep_seconds(int layout, float* sink) {
  std::vector<float> totals(static_cast<size_t>(m_num_threads), 0.0f);
  const auto* v = static_cast<const float*>(m_buffer.data());
  const double seconds = on_threads(m_num_threads, [&](int t) {
    const auto [begin, end] = share(m_count, t, m_num_threads);
    totals[static_cast<size_t>(t)] = read_probe_sum(v + begin, end - begin, layout);
  });
  for (const float x : totals) *sink += x;
  return seconds;
}

double ReadBandwidthProbe::measure(int sweeps) {
  double best = 0;
  float sink = 0;
  // The layouts take turns, so a drift in the machine's bandwidth favours neither.
  for (int i = 0; i < std::max(1, sweeps); ++i) {
    for (int layout = 0; layout < kReadStreamLayouts; ++layout) {
      best = std::max(best, static_cast<double>(m_count * sizeof(float)) / sweep_seconds(layout, &sink));
    }
  }
  m_sink += sink;  // kept, so no compiler can drop the sums
  return best;
}

}  // namespace iwb
