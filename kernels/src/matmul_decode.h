// Decode rows of the dot-kernel matmul driver (private to kernels/src): one token, or two of
// quantized weights, dotted one row at a time from a few sequential row streams, and the end
// of each product shared out between the threads (DecodeSteal).
#pragma once

#include "matmul_plan.h"

#include <array>
#include <atomic>
#include <cstdint>

namespace iwb::detail {

// Decode: one row at a time, from several sequential streams in turn (the chunk's first,
// second, ... part), each row optionally prefetched a little ahead: a core keeps more misses
// in flight for a few streams than for one (decode_streaming() in cpu_features.h has the
// figures per CPU; Zen 5, two streams: Q6_K 1536 x 151936 6.5 -> 5.0 ms, Q8_0 8.8 -> 6.9).
//
// Rows of at least DecodeStreaming::single_stream_row_bytes (where set: AMD Zen 4) stream one
// at a time. (Float rows whose activations take DecodeStreaming::tile_activation_bytes or more
// do not come here: run_rows takes them four at a time in tiles.)
//
// Rows longer than DecodeStreaming::segment_bytes (where set: Intel) are dotted in segments of
// about that size, the streams taking turns per segment: a row's prefetches then go out a segment at a time between the
// products instead of all at once (a 5 KiB row is 80 lines, five times the core's line fill buffers, so a burst stalls
// the core until most have arrived), and every segment is prefetched the same distance ahead whatever the row length.

// A decode chunk's rows as `streams` sequential runs taken a row each in turn: step i dots row
// i of every run. Every row is dotted in the same segments wherever and by whichever thread it
// runs, so a row's sum never depends on the chunk or the thread (matmul_group gives matmul's bits).
struct DecodeSteps {
  int64_t row_begin = 0, row_end = 0;
  int64_t streams = 1, per_stream = 0;  // steps: per_stream
  int64_t segment_elements = 0;
  size_t segment_weight_bytes = 0, segment_act_bytes = 0;
  size_t ahead = 0;  // prefetch distance past each segment
  int64_t num_tokens = 1;
  size_t act_stride = 0;  // between the tokens' activations
  VecDotFn dot = nullptr;
  VecDot2Fn dot2 = nullptr;             // two tokens at once, where the kernel has it
  VecDotTokensFn dot_tokens = nullptr;  // several tokens at once, where the kernel has it
};

DecodeSteps decode_steps_of(const MatmulArgs& a, const Plan& p, int64_t row_begin, int64_t row_end);
// Steps [step_begin, step_end) of a decode chunk: each row segment dotted against every token
// while it is in L1.
void run_decode_steps(const MatmulArgs& a, const Plan& p, const DecodeSteps& d, int64_t step_begin, int64_t step_end);
// Rows [row_begin, row_end) of a product in decode steps.
void decode_rows(const MatmulArgs& a, const Plan& p, int64_t row_begin, int64_t row_end);

// Weight bytes a thread claims at a time from a decode chunk (its own or another's): a
// microsecond of streaming, so the claims' atomics cost nothing beside it, and the last claim
// left to wait for at the join is short.
inline constexpr size_t kStealBatchBytes = 16 * 1024;

// The end of a decode product (decode_rows) shared out step by step. With chunks alone (four a thread,
// claimed in turn) the first thread to run out waited at the join for the rest of the other's
// last chunk: half a chunk on average, a sixteenth of every product with two threads (perf,
// Q4_0 tg64: the caller waiting 1.8% and the worker 2.4% of all cycles). Finer chunks cost more
// than they saved (each restarts its streams; see the guided schedule in docs/benchmarks.md).
// Now each thread takes one chunk (chunks_per_thread), and a thread with none left asks one
// still running its chunk for part of it: that thread, between two batches of its steps, hands
// over the back half of what it has left, until what is left is under two batches.
//
// The owner only loads the request word between batches and stores its answers: claiming each
// batch with a compare-and-swap instead (a locked instruction, which waits for every load in
// flight) cost the streaming more than the sharing saved (Xeon model 207, Q4_0 decode: the
// swaps took 1.3% of all cycles).
class DecodeSteal {
 public:
  static constexpr int64_t kMaxChunks = (int64_t{1} << 16) - 1;
  static constexpr int64_t kMaxSteps = int64_t{1} << 24;

  DecodeSteal(const Chunks& chunks, const Plan* plans, const MatmulArgs* args)
      : m_chunks(chunks), m_plans(plans), m_args(args) {}

  // Thread `thread`'s own chunk (of product a, p: steps d), in batches, answering requests
  // between them.
  void run_own(int thread, int64_t chunk, const MatmulArgs& a, const Plan& p, const DecodeSteps& d);

  // Parts of the other threads' chunks, asked for until none is running one.
  void help_others(int thread, int threads);

 private:
  struct alignas(64) Owner {  // written by its thread (and `grant` taken by the others)
    std::atomic<bool> busy{false};
    std::atomic<uint64_t> grant{0};  // pack(chunk, first step, end step), 0 when none
  };
  struct alignas(64) Request {  // written by the others
    std::atomic<int> thief{0};  // the asking thread plus one, 0 when none
  };
  static uint64_t pack(int64_t chunk, int64_t front, int64_t back) {
    return (static_cast<uint64_t>(chunk + 1) << 48) | (static_cast<uint64_t>(front) << 24) |
           static_cast<uint64_t>(back);
  }
  static int64_t chunk_of(uint64_t word) { return static_cast<int64_t>(word >> 48) - 1; }
  static int64_t front_of(uint64_t word) { return static_cast<int64_t>((word >> 24) & (kMaxSteps - 1)); }
  static int64_t back_of(uint64_t word) { return static_cast<int64_t>(word & (kMaxSteps - 1)); }

  static int64_t batch_steps(const DecodeSteps& d, const Plan& p) {
    const size_t step_bytes = static_cast<size_t>(d.streams) * p.weight_stride;
    return std::max<int64_t>(1, static_cast<int64_t>(kStealBatchBytes / step_bytes));
  }

  uint64_t take_grant(int t);
  void run_granted(uint64_t granted, bool is_stolen = true);

  const Chunks& m_chunks;
  const Plan* m_plans;
  const MatmulArgs* m_args;
  std::array<Owner, kMaxStealThreads> m_owners{};
  std::array<Request, kMaxStealThreads> m_requests{};
};

}  // namespace iwb::detail
