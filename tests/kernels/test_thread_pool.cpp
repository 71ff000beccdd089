// The kernels' thread pool (kernels/src/thread_pool.cpp): every thread index of a region runs
// once, every item of a loop once, regions nested or opened by two threads at once run
// correctly (on the caller alone), workers that went to sleep wake for the next region, and
// thousands of back-to-back regions (a decode step's pattern) neither hang nor lose work, and
// workers held back region after region cost that kind of region a thread for a while.
// White-box: includes kernels/src/parallel.h.
#include "parallel.h"

#include "iwb/kernels/thread_pool.h"

#include <QTest>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using namespace iwb;

namespace {

// A region whose worker (thread 1) sleeps `worker_us` while the caller returns at once: the
// pattern of a worker the OS set aside on a busy core. Returns the threads the region ran on.
// (One lambda type, so every call is the same kind of region to the pool.)
int held_back_region(int worker_us) {
  std::atomic<int> threads{0};
  detail::parallel_region(2, [&](int thread, int n) {
    threads.store(n);
    if (thread == 1) std::this_thread::sleep_for(std::chrono::microseconds(worker_us));
  });
  return threads.load();
}

int other_region() {
  std::atomic<int> threads{0};
  detail::parallel_region(2, [&](int, int n) { threads.store(n); });
  return threads.load();
}

}  // namespace

class TestThreadPool : public QObject {
  Q_OBJECT

 private slots:
  // The other cases count threads, which a busy test machine must not change.
  void initTestCase() { set_thread_pool_adaptive(false); }
  void cleanup() {
    set_thread_pool_spin_us(200);
    set_thread_pool_adaptive(false);
  }

  void defaultThreadsPositive() { QVERIFY(default_num_threads() >= 1); }

  void everyThreadIndexOnce() {
    for (int n : {1, 2, 3, 5}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::atomic<int> reported{0};
      std::atomic<bool> bad_index{false};  // (Qt Test's checks belong on the test's own thread)
      detail::parallel_region(n, [&](int thread, int threads) {
        if (thread < 0 || thread >= threads) {
          bad_index = true;
          return;
        }
        seen[static_cast<size_t>(thread)].fetch_add(1);
        reported.store(threads);
      });
      QVERIFY(!bad_index);
      // Run by the pool: n threads; each index exactly once.
      QCOMPARE(reported.load(), n);
      for (int i = 0; i < n; ++i) QCOMPARE(seen[static_cast<size_t>(i)].load(), 1);
    }
  }

  void loopsCoverEveryItemOnce() {
    for (int threads : {1, 2, 4}) {
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1001}}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        detail::parallel_for_static(threads, n, [&](int64_t i) { hits[static_cast<size_t>(i)].fetch_add(1); });
        for (auto& h : hits) QCOMPARE(h.load(), 1);
        std::vector<std::atomic<int>> hits2(static_cast<size_t>(n));
        detail::parallel_for_dynamic(threads, n, [&](int64_t i) { hits2[static_cast<size_t>(i)].fetch_add(1); });
        for (auto& h : hits2) QCOMPARE(h.load(), 1);
      }
    }
  }

  void nestedRegionRunsOnTheCaller() {
    std::atomic<int> inner_threads{0}, inner_runs{0}, inner_max_index{0};
    detail::parallel_region(2, [&](int, int) {
      detail::parallel_region(2, [&](int thread, int threads) {
        inner_max_index.fetch_or(thread);
        inner_threads.store(threads);
        inner_runs.fetch_add(1);
      });
    });
    QCOMPARE(inner_threads.load(), 1);
    QCOMPARE(inner_max_index.load(), 0);
    QCOMPARE(inner_runs.load(), 2);  // once per outer thread
  }

  void twoCallersAtOnce() {
    // Two threads (an engine worker and a server loop, say) open regions at the same time: one
    // gets the pool, the other runs alone; both compute everything.
    constexpr int kRounds = 2000;
    std::atomic<int64_t> sums[2] = {0, 0};
    auto caller = [&](int who) {
      for (int r = 0; r < kRounds; ++r) {
        detail::parallel_for_dynamic(2, 10, [&](int64_t i) { sums[who].fetch_add(i + 1); });
      }
    };
    std::thread a(caller, 0), b(caller, 1);
    a.join();
    b.join();
    QCOMPARE(sums[0].load(), int64_t{55} * kRounds);
    QCOMPARE(sums[1].load(), int64_t{55} * kRounds);
  }

  void sleepingWorkersWake() {
    set_thread_pool_spin_us(0);  // sleep at once, like OMP_WAIT_POLICY=passive
    const int64_t sleeps_before = thread_pool_stats().worker_sleeps;
    for (int r = 0; r < 50; ++r) {
      std::atomic<int> ran{0};
      detail::parallel_region(3, [&](int, int) { ran.fetch_add(1); });
      QCOMPARE(ran.load(), 3);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    QVERIFY(thread_pool_stats().worker_sleeps > sleeps_before);
  }

  void manyShortRegions() {
    // A decode step opens some 200 regions with microseconds between them; with a spin long
    // enough the workers should (almost) never sleep between them. Only correctness is checked.
    set_thread_pool_spin_us(2000);
    int64_t total = 0;
    for (int r = 0; r < 20000; ++r) {
      std::atomic<int64_t> sum{0};
      detail::parallel_for_static(2, 64, [&](int64_t i) { sum.fetch_add(i); });
      total += sum.load();
    }
    QCOMPARE(total, int64_t{2016} * 20000);
    QVERIFY(thread_pool_stats().regions > 0);
  }

  // Workers held back region after region (the caller waits for them longer than it worked,
  // and over 200 us) cost that kind of region a thread for a while: 4 such regions in a window
  // of 32, then the same region body runs on the caller alone, another body still on two, and
  // after the first cap (250 ms) the body gets its two threads back. Off, nothing changes.
  void heldBackWorkersCostAThread() {
    set_thread_pool_adaptive(false);
    for (int r = 0; r < 8; ++r) QCOMPARE(held_back_region(1000), 2);
    QCOMPARE(thread_pool_stats().contended_regions, int64_t{0});

    set_thread_pool_adaptive(true);  // switching starts every watch afresh
    const ThreadPoolStats before = thread_pool_stats();
    for (int r = 0; r < 4; ++r) QCOMPARE(held_back_region(1000), 2);
    QCOMPARE(thread_pool_stats().contention_events, before.contention_events + 1);
    const auto capped_at = std::chrono::steady_clock::now();
    const ThreadPoolStats at_cap = thread_pool_stats();
    QCOMPARE(held_back_region(0), 1);
    // The pool took the region (the Metrics tab's share counts it) but ran no helper for it.
    QCOMPARE(thread_pool_stats().pooled_regions, at_cap.pooled_regions + 1);
    QCOMPARE(thread_pool_stats().regions, at_cap.regions);
    QCOMPARE(other_region(), 2);
    QVERIFY(thread_pool_stats().contended_regions > before.contended_regions);
    std::this_thread::sleep_until(capped_at + std::chrono::milliseconds(300));
    QCOMPARE(held_back_region(0), 2);
  }

  void spinWaitYields() {
    // SpinWait must return control (pausing, later yielding) without blocking forever.
    detail::SpinWait wait;
    for (int i = 0; i < 5000; ++i) wait();
  }
};

QTEST_GUILESS_MAIN(TestThreadPool)
#include "test_thread_pool.moc"
