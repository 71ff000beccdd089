// Decode rows and the sharing of their ends (see matmul_decode.h).
#include "matmul_decode.h"

#include "matmul_paths.h"
#include "parallel.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace iwb::detail {
namespace {

// Decode rows per stream below which one stream does (a chunk of a few rows gains nothing).
constexpr int64_t kMinStreamRows = 16;

std::atomic<int64_t> g_decode_steps_stolen{0};
std::atomic<int> g_slow_owner_thread{-1}, g_slow_owner_us{0};

// Every token's dot of one row (or row segment) of n inputs: the two-token or several-token
// kernel where the kernel has one, else one call per token.
inline void dot_tokens_of(const DecodeSteps& d, const uint8_t* w, const void* const* acts, int64_t n, float* dots) {
  if (d.num_tokens == 1) {
    dots[0] = d.dot(w, acts[0], n);
  } else if (d.dot2 != nullptr && d.num_tokens == 2) {
    d.dot2(w, acts[0], acts[1], n, dots);
  } else if (d.dot_tokens != nullptr) {
    d.dot_tokens(w, acts, static_cast<int>(d.num_tokens), n, dots);
  } else {
    for (int64_t t = 0; t < d.num_tokens; ++t) dots[t] = d.dot(w, acts[t], n);
  }
}

}  // namespace

DecodeSteps decode_steps_of(const MatmulArgs& a, const Plan& p, int64_t row_begin, int64_t row_end) {
  const int64_t in = a.in_features;
  // Float rows too (F16: 3 KiB a row of 1536): whole rows prefetched at once gained them
  // nothing, in segments they gain 14% (Xeon, default model F16 tg32 with 2 threads: 7.3-7.4
  // tokens/s in two plain streams, 8.4-8.5 with four prefetched in segments of 768 bytes).
  const DecodeStreaming& streaming = decode_streaming();
  const bool is_single_stream = streaming.single_stream_row_bytes > 0 &&
                                p.weight_stride >= static_cast<size_t>(streaming.single_stream_row_bytes);
  DecodeSteps d;
  d.row_begin = row_begin;
  d.row_end = row_end;
  d.streams = is_single_stream ? 1 : std::clamp<int64_t>((row_end - row_begin) / kMinStreamRows, 1, streaming.streams);
  d.per_stream = (row_end - row_begin + d.streams - 1) / d.streams;
  d.ahead = static_cast<size_t>(streaming.prefetch_bytes);
  // Segments: whole weight blocks (and so whole activation blocks, or groups of them on a
  // decode kernel's own layout), as equal as they come.
  const GgmlTypeTraits& traits = ggml_type_traits(a.weight_type);
  const int64_t num_blocks = in / traits.block_size;
  const int64_t row_bytes = static_cast<int64_t>(p.weight_stride);
  const int64_t num_segments =
      streaming.segment_bytes > 0
          ? std::max<int64_t>(1, (row_bytes + streaming.segment_bytes - 1) / streaming.segment_bytes)
          : 1;
  const int64_t group = p.use_decode ? p.k->decode_group_blocks : 1;
  const int64_t segment_blocks = ((num_blocks + num_segments - 1) / num_segments + group - 1) / group * group;
  d.segment_elements = segment_blocks * traits.block_size;
  d.segment_weight_bytes = static_cast<size_t>(segment_blocks) * traits.bytes_per_block;
  d.segment_act_bytes = p.use_decode ? p.k->decode_activation_bytes(d.segment_elements)
                        : p.k->format == ActivationFormat::None
                            ? static_cast<size_t>(d.segment_elements) * sizeof(float)
                            : activation_row_bytes(p.k->format, d.segment_elements);
  d.dot = p.use_decode ? p.k->decode_dot : p.k->vec_dot;
  d.dot2 = p.use_decode ? p.k->decode_dot2 : p.k->vec_dot2;
  d.dot_tokens = p.use_decode ? p.k->decode_dot_tokens : p.k->vec_dot_tokens;
  d.num_tokens = a.num_tokens;
  d.act_stride = p.act_stride;
  return d;
}

void run_decode_steps(const MatmulArgs& a, const Plan& p, const DecodeSteps& d, int64_t step_begin, int64_t step_end) {
  const int64_t in = a.in_features;
  // Whole rows without software prefetches (the AMD settings): a plain loop, one call and one
  // store per row and token. The general one below spent 15-21% of a one-token product of
  // 1,536 inputs (six Q4_K blocks a row) on its bookkeeping on a Zen 3 core (perf), and 7-11%
  // of a two- or four-token one.
  if (d.segment_elements >= in && d.ahead == 0) {
    const void* acts[kMaxDecodeTokens];
    for (int64_t t = 0; t < d.num_tokens; ++t) acts[t] = p.act + t * d.act_stride;
    for (int64_t i = step_begin; i < step_end; ++i) {
      for (int64_t s = 0; s < d.streams; ++s) {
        const int64_t r = d.row_begin + s * d.per_stream + i;
        if (r >= d.row_end) break;
        float dots[kMaxDecodeTokens];
        dot_tokens_of(d, p.weight + r * p.weight_stride, acts, in, dots);
        // (0 + dot) + bias, as the general loop sums: the same bits either way.
        const float bias = a.bias ? a.bias[r] : 0.0f;
        for (int64_t t = 0; t < d.num_tokens; ++t) a.output[t * a.out_features + r] = (0.0f + dots[t]) + bias;
      }
    }
    return;
  }
  constexpr int64_t kMaxStreams = 8;
  for (int64_t i = step_begin; i < step_end; ++i) {
    // Only the sums this step adds to are zeroed: `= {}` on all 8 x 8 compiled to a 256-byte
    // rep stos per step, about 9% of a one-token Q4_K product of 1,536 inputs (six blocks a
    // row) on a Zen 3 core (perf).
    float sums[kMaxStreams][kMaxDecodeTokens];
    for (int64_t s = 0; s < d.streams; ++s) std::fill_n(sums[s], d.num_tokens, 0.0f);
    for (int64_t e0 = 0, j = 0; e0 < in; e0 += d.segment_elements, ++j) {
      const int64_t n = std::min(d.segment_elements, in - e0);
      const size_t bytes = std::min(d.segment_weight_bytes, p.weight_stride - j * d.segment_weight_bytes);
      const void* acts[kMaxDecodeTokens];
      for (int64_t t = 0; t < d.num_tokens; ++t) acts[t] = p.act + j * d.segment_act_bytes + t * d.act_stride;
      for (int64_t s = 0; s < d.streams; ++s) {
        const int64_t r = d.row_begin + s * d.per_stream + i;
        if (r >= d.row_end) break;
        const uint8_t* w = p.weight + r * p.weight_stride + j * d.segment_weight_bytes;
        if (d.ahead > 0) {
          // (a prefetch past the last row is harmless: prefetches never fault)
          for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(w + d.ahead + off);
        }
        float dots[kMaxDecodeTokens];
        dot_tokens_of(d, w, acts, n, dots);
        for (int64_t t = 0; t < d.num_tokens; ++t) sums[s][t] += dots[t];
      }
    }
    for (int64_t s = 0; s < d.streams; ++s) {
      const int64_t r = d.row_begin + s * d.per_stream + i;
      if (r >= d.row_end) continue;
      const float bias = a.bias ? a.bias[r] : 0.0f;
      for (int64_t t = 0; t < d.num_tokens; ++t) a.output[t * a.out_features + r] = sums[s][t] + bias;
    }
  }
}

void decode_rows(const MatmulArgs& a, const Plan& p, int64_t row_begin, int64_t row_end) {
  const DecodeSteps d = decode_steps_of(a, p, row_begin, row_end);
  run_decode_steps(a, p, d, 0, d.per_stream);
}

void DecodeSteal::run_own(int thread, int64_t chunk, const MatmulArgs& a, const Plan& p, const DecodeSteps& d) {
  if (d.per_stream >= kMaxSteps) {
    run_decode_steps(a, p, d, 0, d.per_stream);
    return;
  }
  Owner& owner = m_owners[thread];
  std::atomic<int>& request = m_requests[thread].thief;
  const int64_t batch = batch_steps(d, p);
  const int slow_us = g_slow_owner_thread.load(std::memory_order_relaxed) == thread
                          ? g_slow_owner_us.load(std::memory_order_relaxed)
                          : 0;
  owner.busy.store(true, std::memory_order_relaxed);
  for (int64_t front = 0, back = d.per_stream; front < back;) {
    if (request.load(std::memory_order_relaxed) != 0) {
      // Half of what is left, when that is worth a hand-over; the request is answered either
      // way (a thief that gets nothing waits for this chunk's end).
      const int64_t left = back - front;
      if (left >= 2 * batch && owner.grant.load(std::memory_order_relaxed) == 0) {
        const int64_t mid = front + (left + 1) / 2;
        owner.grant.store(pack(chunk, mid, back), std::memory_order_release);
        back = mid;
      }
      request.store(0, std::memory_order_relaxed);
    }
    const int64_t end = std::min(back, front + batch);
    run_decode_steps(a, p, d, front, end);
    front = end;
    if (slow_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(slow_us));
  }
  // A grant nobody took (it answered a request left from this thread's previous chunk by a
  // thief since gone) is this thread's to run: no step may be lost.
  if (const uint64_t untaken = take_grant(thread); untaken != 0) run_granted(untaken, false);
  owner.busy.store(false, std::memory_order_release);
}

void DecodeSteal::help_others(int thread, int threads) {
  for (bool any_busy = true; any_busy;) {
    any_busy = false;
    for (int t = 0; t < threads; ++t) {
      if (t == thread || !m_owners[t].busy.load(std::memory_order_acquire)) continue;
      any_busy = true;
      int none = 0;
      m_requests[t].thief.compare_exchange_strong(none, thread + 1, std::memory_order_relaxed);
      // The owner answers between two batches: a grant, or its chunk's end.
      for (SpinWait wait;; wait()) {
        const uint64_t granted = take_grant(t);
        if (granted != 0) {
          run_granted(granted);
          break;
        }
        if (!m_owners[t].busy.load(std::memory_order_acquire)) {
          if (const uint64_t last = take_grant(t); last != 0) run_granted(last);
          break;
        }
      }
    }
  }
}

uint64_t DecodeSteal::take_grant(int t) {
  std::atomic<uint64_t>& grant = m_owners[t].grant;
  return grant.load(std::memory_order_acquire) != 0 ? grant.exchange(0, std::memory_order_acq_rel) : 0;
}

void DecodeSteal::run_granted(uint64_t granted, bool is_stolen) {
  const int64_t chunk = chunk_of(granted), begin = front_of(granted), end = back_of(granted);
  const Chunks::Rows r = m_chunks.rows_of(chunk, m_plans, m_args);
  const MatmulArgs& a = m_args[r.product];
  const Plan& p = m_plans[r.product];
  run_decode_steps(a, p, decode_steps_of(a, p, r.begin, r.end), begin, end);
  if (is_stolen) g_decode_steps_stolen.fetch_add(end - begin, std::memory_order_relaxed);
}

int64_t decode_steps_stolen() { return g_decode_steps_stolen.load(std::memory_order_relaxed); }

void set_slow_decode_owner_for_testing(int thread, int microseconds) {
  g_slow_owner_us.store(microseconds, std::memory_order_relaxed);
  g_slow_owner_thread.store(thread, std::memory_order_relaxed);
}

}  // namespace iwb::detail
