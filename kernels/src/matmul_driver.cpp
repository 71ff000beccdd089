// The dot-kernel matmul driver: activations quantized to 8-bit blocks once per call (by all
// threads, one token each; F16/BF16/F32 weights read the f32 activations as they are), then
// threads claim chunks of the weight rows (of several matrices, for products of one input)
// from a shared counter. Decode (one token, or two of quantized weights) dots one row at a time
// from a few row streams, one chunk a thread, the chunks' ends shared out between the threads
// (DecodeSteal); a few tokens run tiles of 4 rows x 4 tokens over token blocks small enough to
// stay in L2, or (K-quants, 5..16 tokens, from 3 on Intel) token-lane kernels on activations
// each thread packs for them; many tokens repack 16- or 32-row panels for the GEMM kernels.
#include "matmul_paths.h"
#include "parallel.h"
#include "quant_dot.h"
#include "thread_buffer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

namespace iwb::detail {
namespace {

constexpr size_t kAlign = 64;
// Quantized activations of one token block: kept under ~half of a 1 MiB L2.
constexpr size_t kTokenBlockBytes = 512 * 1024;
// Tiles ahead whose weight rows the tile loop prefetches.
constexpr int64_t kPrefetchTiles = 2;
// Decode rows per stream below which one stream does (a chunk of a few rows gains nothing).
constexpr int64_t kMinStreamRows = 16;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Rows padded to cache lines so threads quantizing neighbouring tokens never share a line.
size_t activation_stride(const DotKernels& k, int64_t in_features) {
  return round_up(activation_row_bytes(k.format, in_features), kAlign);
}

// The kernels of every type on this CPU, looked up once.
const DotKernels* kernels_for(GgmlType type) {
  static const auto kTable = [] {
    std::array<DotKernels, 64> table{};
    for (uint32_t id = 0; id < table.size(); ++id) {
      if (ggml_type_traits(id).has_value()) select_dot_kernels(static_cast<GgmlType>(id), cpu_path(), &table[id]);
    }
    return table;
  }();
  const auto id = static_cast<uint32_t>(type);
  if (id >= kTable.size() || kTable[id].vec_dot == nullptr) return nullptr;
  return &kTable[id];
}

// Scratch owned by the calling thread when the caller passes none (quantized activations).
struct ScratchTag;
uint8_t* thread_scratch(size_t bytes) { return thread_buffer<ScratchTag>(bytes); }

// Without tile or GEMM kernels (the portable loops) the row dot products unpack every weight
// block once per token; past this many tokens the dequantizing path, which unpacks once per
// call, is faster (AVX2 row dots on Zen 5, 64 tokens: 34-42 against 52 GMAC/s per core). The
// AVX2 GEMM takes over from the next token count (quant_dot_avx2_kernels.inc).
constexpr int64_t kMaxRowDotTokens = 4;

// Quantized products of up to this many tokens (two sequences decoding together, one draft
// token verified) run as decode does, each weight row streamed once and dotted against every
// token while it is in L1, instead of in 4 x 4 tiles, whose four interleaved rows defeat the
// prefetchers (see decode_rows). A token's result is then the same as when it runs alone.
// Xeon model 207, 2 threads, `iwb bench -p N -n 0` tokens/s, tiles -> decode steps: Q4_0 pp2
// 27.6 -> 39.2, pp3 35.3 -> 44.0, pp4 41.3 -> 47.3; Q4_K_M pp2 36.2 -> 39.4, pp3 45.2 -> 40.9,
// pp4 54.7 -> 42.5; Q8_0 pp2 21.3 -> 23.7, pp3 28.9 -> 27.6, pp4 34.4 -> 28.8. Past two
// tokens the decode kernels' work per token (each unpacks the row again) outweighs the streaming.
constexpr int64_t kMaxDecodeTokens = 2;

struct Plan {
  const DotKernels* k;
  bool use_gemm;
  bool use_lanes;
  bool is_prepared;  // the GEMM reads activation groups made by k->gemm_prepare
  bool use_decode;   // decode rows on the kernel's own activation layout (k->decode_dot)
  bool is_rows_decode;      // rows in decode steps (decode_rows): one token, or a few quantized
  bool is_one_token_tiled;  // one token in 4-row tiles (DecodeStreaming::tile_activation_bytes)
  const uint8_t* weight;
  size_t weight_stride;
  const uint8_t* act;
  size_t act_stride;
  int64_t token_block;
};

// The repacking buffer of the GEMM kernel (or the token lanes' packed activations).
struct GemmBufferTag;
uint8_t* gemm_buffer(size_t bytes) { return thread_buffer<GemmBufferTag>(bytes); }

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
  VecDot2Fn dot2 = nullptr;  // two tokens at once, where the kernel has it
};

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
  d.dot2 = p.use_decode ? p.k->decode_dot2 : nullptr;
  d.num_tokens = a.num_tokens;
  d.act_stride = p.act_stride;
  return d;
}

// Steps [step_begin, step_end) of a decode chunk: each row segment dotted against every token
// while it is in L1.
void run_decode_steps(const MatmulArgs& a, const Plan& p, const DecodeSteps& d, int64_t step_begin, int64_t step_end) {
  const int64_t in = a.in_features;
  constexpr int64_t kMaxStreams = 8;
  for (int64_t i = step_begin; i < step_end; ++i) {
    float sums[kMaxStreams][kMaxDecodeTokens] = {};
    for (int64_t e0 = 0, j = 0; e0 < in; e0 += d.segment_elements, ++j) {
      const int64_t n = std::min(d.segment_elements, in - e0);
      const size_t bytes = std::min(d.segment_weight_bytes, p.weight_stride - j * d.segment_weight_bytes);
      for (int64_t s = 0; s < d.streams; ++s) {
        const int64_t r = d.row_begin + s * d.per_stream + i;
        if (r >= d.row_end) break;
        const uint8_t* w = p.weight + r * p.weight_stride + j * d.segment_weight_bytes;
        if (d.ahead > 0) {
          // (a prefetch past the last row is harmless: prefetches never fault)
          for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(w + d.ahead + off);
        }
        const uint8_t* act = p.act + j * d.segment_act_bytes;
        if (d.dot2 != nullptr && d.num_tokens == 2) {
          float two[2];
          d.dot2(w, act, act + d.act_stride, n, two);
          sums[s][0] += two[0];
          sums[s][1] += two[1];
        } else {
          for (int64_t t = 0; t < d.num_tokens; ++t) sums[s][t] += d.dot(w, act + t * d.act_stride, n);
        }
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

void run_rows(const MatmulArgs& a, const Plan& p, int64_t row_begin, int64_t row_end) {
  const int64_t in = a.in_features, out_features = a.out_features;
  if (p.use_gemm) {
    uint8_t* buffer = gemm_buffer(quant_gemm_buffer_bytes(a.weight_type, in));
    for (int64_t r0 = row_begin; r0 < row_end; r0 += p.k->gemm_rows) {
      const int num_rows = static_cast<int>(std::min<int64_t>(p.k->gemm_rows, row_end - r0));
      // The panel repacks 16 or 32 rows side by side, streams the hardware prefetchers do not
      // follow: fetch the next panel's rows meanwhile (Zen 5, one thread, 1536 x 151936 from
      // DRAM: Q4_0 8 tokens 17-20 ms against 27, Q4_K 32 tokens 37 against 42; rows already in
      // L3 pay up to 5% for the extra instructions).
      if (r0 + 2 * p.k->gemm_rows <= row_end) {
        const uint8_t* ahead = p.weight + (r0 + p.k->gemm_rows) * p.weight_stride;
        for (size_t off = 0; off < p.k->gemm_rows * p.weight_stride; off += 64) __builtin_prefetch(ahead + off);
      }
      p.k->gemm(p.weight + r0 * p.weight_stride, p.weight_stride, num_rows, p.act, p.act_stride, a.num_tokens, in,
                a.bias ? a.bias + r0 : nullptr, a.output + r0, out_features, buffer);
    }
    return;
  }
  if (p.use_lanes) {
    // Tokens in lanes: their activations packed once per chunk of rows (a few microseconds),
    // then every row unpacked once for all of them.
    const int64_t num_tokens = std::min<int64_t>(a.num_tokens, kLaneMaxTokens);
    uint8_t* packed = gemm_buffer(lanes_packed_bytes(in, static_cast<int>(num_tokens)));
    for (int64_t t0 = 0; t0 < a.num_tokens; t0 += kLaneMaxTokens) {
      const int nt = static_cast<int>(std::min<int64_t>(kLaneMaxTokens, a.num_tokens - t0));
      p.k->pack_tokens(p.act + t0 * p.act_stride, p.act_stride, nt, in, packed);
      p.k->lanes(p.weight + row_begin * p.weight_stride, p.weight_stride, static_cast<int>(row_end - row_begin), packed,
                 nt, in, a.bias ? a.bias + row_begin : nullptr, a.output + t0 * out_features + row_begin, out_features);
    }
    return;
  }
  // One token: rows in streams (the 4-row tile with one token is 16-26% faster on rows in L2
  // but 2.5x slower streaming from DRAM: four interleaved row streams defeat the prefetchers).
  // Every chunk of rows, however short, goes this way, so a row's segmented sum never depends
  // on the chunk it fell in (matmul_group gives matmul's bits). Float rows tiled by
  // DecodeStreaming::tile_activation_bytes take the tiles in every chunk alike (chunks are whole
  // tiles, so a row's place in its tile never changes).
  if (p.is_rows_decode) {
    decode_rows(a, p, row_begin, row_end);
    return;
  }
  // A few tokens without tiles: one row at a time.
  if (p.k->tile == nullptr) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* w = p.weight + r * p.weight_stride;
      const float bias = a.bias ? a.bias[r] : 0.0f;
      for (int64_t t = 0; t < a.num_tokens; ++t) {
        a.output[t * out_features + r] = p.k->vec_dot(w, p.act + t * p.act_stride, in) + bias;
      }
    }
    return;
  }
  float tile[kTileRows * kTileTokens];
  for (int64_t t_block = 0; t_block < a.num_tokens; t_block += p.token_block) {
    const int64_t t_end = std::min(a.num_tokens, t_block + p.token_block);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileRows) {
      const int num_rows = static_cast<int>(std::min<int64_t>(kTileRows, row_end - r0));
      const uint8_t* w = p.weight + r0 * p.weight_stride;
      // The tile reads four rows side by side, which the hardware prefetchers do not follow
      // (Q4_0, 4 tokens: 7.4 GB/s from DRAM without this, 11.8 with): fetch a later tile's rows.
      if (r0 + (kPrefetchTiles + 1) * kTileRows <= row_end && !p.is_one_token_tiled) {
        const uint8_t* ahead = w + kPrefetchTiles * kTileRows * p.weight_stride;
        for (size_t off = 0; off < kTileRows * p.weight_stride; off += 64) __builtin_prefetch(ahead + off);
      }
      for (int64_t t0 = t_block; t0 < t_end; t0 += kTileTokens) {
        const int num_tokens = static_cast<int>(std::min<int64_t>(kTileTokens, t_end - t0));
        p.k->tile(w, p.weight_stride, num_rows, p.act + t0 * p.act_stride, p.act_stride, num_tokens, in, tile);
        for (int t = 0; t < num_tokens; ++t) {
          float* y = a.output + (t0 + t) * out_features + r0;
          for (int r = 0; r < num_rows; ++r) y[r] = tile[r * kTileTokens + t] + (a.bias ? a.bias[r0 + r] : 0.0f);
        }
      }
    }
  }
}

// One token on the kernel's own decode layout: where the kernel has one and the CPU's rule
// (DotKernels::decode_layout_max_bytes) does not keep rows this long on the general dot.
bool takes_decode_layout(const DotKernels& k, int64_t in_features) {
  if (k.decode_quantize == nullptr) return false;
  return k.decode_layout_max_bytes == 0 || k.decode_activation_bytes(in_features) < k.decode_layout_max_bytes;
}

}  // namespace

bool has_dot_kernels(GgmlType type) { return kernels_for(type) != nullptr; }

size_t dot_kernels_scratch_bytes(GgmlType type, int64_t in_features, int64_t num_tokens) {
  const DotKernels* k = kernels_for(type);
  if (k == nullptr || in_features <= 0 || num_tokens <= 0) return 0;
  if (k->gemm_prepare != nullptr && k->gemm != nullptr && num_tokens >= k->gemm_min_tokens) {
    const int64_t groups = (num_tokens + kPreparedGroupTokens - 1) / kPreparedGroupTokens;
    return k->gemm_prepared_group_bytes(in_features) * static_cast<size_t>(groups) + kAlign;
  }
  if (k->quantize == nullptr) return 0;
  if (num_tokens <= kMaxDecodeTokens && takes_decode_layout(*k, in_features)) {
    const size_t stride =
        std::max(round_up(k->decode_activation_bytes(in_features), kAlign), activation_stride(*k, in_features));
    return stride * static_cast<size_t>(num_tokens) + kAlign;
  }
  return activation_stride(*k, in_features) * static_cast<size_t>(num_tokens) + kAlign;
}

namespace {

// The plan of one product: false when the dot kernels cannot take it (see matmul_paths.h).
bool make_plan(const MatmulArgs& a, Plan* p) {
  const DotKernels* k = kernels_for(a.weight_type);
  if (k == nullptr || !matmul_args_valid(a)) return false;
  const bool is_quantized = k->quantize != nullptr;
  // f32 activations, or batch invariance, wanted: the dequantizing path gives both (for float
  // weights too, whose dot kernels differ between one token, tiles and GEMM).
  if (a.is_exact || is_matmul_exact_forced()) return false;
  if (k->tile == nullptr && k->gemm == nullptr && a.num_tokens > kMaxRowDotTokens) return false;
  if (a.in_features % ggml_type_traits(a.weight_type).block_size != 0) return false;
  const size_t alignment = a.weight_type == GgmlType::F32 ? 4 : ggml_data_alignment(a.weight_type);
  if (reinterpret_cast<uintptr_t>(a.weight) % alignment != 0) return false;
  p->k = k;
  p->weight = static_cast<const uint8_t*>(a.weight);
  p->weight_stride = *ggml_row_bytes(a.weight_type, a.in_features);
  if (is_quantized) {
    p->act = nullptr;  // the shared scratch, set by the caller
    p->act_stride = activation_stride(*k, a.in_features);
  } else {
    p->act = reinterpret_cast<const uint8_t*>(a.input);
    p->act_stride = static_cast<size_t>(a.in_features) * sizeof(float);
  }
  // Float weights only: the quantized tiles (on Q8_1 activations) measured slower than the
  // decode kernels there (Zen 4, 8960x1536 from memory: Q6_K 14 against 22-31 GB/s).
  const int tile_activation_bytes = decode_streaming().tile_activation_bytes;
  p->is_one_token_tiled = !is_quantized && a.num_tokens == 1 && k->tile != nullptr && tile_activation_bytes > 0 &&
                          p->act_stride >= static_cast<size_t>(tile_activation_bytes);
  p->use_gemm = k->gemm != nullptr && a.num_tokens >= k->gemm_min_tokens;
  p->use_lanes = !p->use_gemm && k->lanes != nullptr && a.num_tokens >= k->lanes_min_tokens;
  p->is_rows_decode = !p->use_gemm && !p->use_lanes && !p->is_one_token_tiled &&
                      (a.num_tokens == 1 || (is_quantized && a.num_tokens <= kMaxDecodeTokens));
  p->use_decode = is_quantized && p->is_rows_decode && takes_decode_layout(*k, a.in_features);
  if (p->use_decode) p->act_stride = round_up(k->decode_activation_bytes(a.in_features), kAlign);
  p->is_prepared = p->use_gemm && k->gemm_prepare != nullptr;
  if (p->is_prepared) {
    p->act = nullptr;  // the prepared groups in the shared scratch, set by the caller
    p->act_stride = k->gemm_prepared_group_bytes(a.in_features);
  }
  p->token_block = std::max<int64_t>(
      kTileTokens, static_cast<int64_t>(kTokenBlockBytes / p->act_stride) / kTileTokens * kTileTokens);
  return true;
}

int64_t tile_rows_of(const Plan& p) { return p.use_gemm ? p.k->gemm_rows : p.use_lanes ? kLaneRows : kTileRows; }

// The products' tiles cut into chunks of about equal weight bytes, several per thread, that
// threads claim in turn from a shared counter: a thread the OS holds back (a busy machine, or
// a pool worker that was asleep) leaves its chunks to the others instead
// of making them wait at the join. Chunks are whole tiles, so results never depend on who ran
// what.
constexpr int kChunksPerThread = 4;
constexpr size_t kMaxGroup = 8;
// Threads up to which decode products share their ends step by step (DecodeSteal).
constexpr int kMaxStealThreads = 16;

// A prompt's GEMM spends milliseconds on every panel, so its chunks can be much finer at no
// cost: one every 8 tokens' worth, up to 64 a thread. With 4 a thread, one chunk of a 512-token
// product is a quarter of a thread's share, and a thread held back near the end (a shared
// machine's other guests) left the other waiting for it (Zen 3, 2 threads, pp512 three runs
// each, alternating: F16 55-62 -> 62-63 tokens/s, Q4_K_M 88-104 -> 101-108).
//
// Decode rows: one chunk a thread, its end shared out by DecodeSteal, which balances the threads
// to a batch of steps. Every chunk restarts its streams, so fewer is faster (Xeon model 207, 2
// threads, paired MBU, 2-3 alternated rounds of `iwb bench -p 0 -n 64 -r 6`, 4 -> 2 -> 1 chunks
// a thread: Q4_K_M 87.0 / 86.2 -> 87.5 / 87.5 -> 88.7 / 88.8%, Q4_0 84.5 / 84.3 -> 86.2 / 85.6 ->
// 86.7 / 87.2%).
int chunks_per_thread(const Plan& p, const MatmulArgs& a, int num_threads) {
  if (p.is_rows_decode && num_threads <= kMaxStealThreads) return 1;
  if (!p.use_gemm) return kChunksPerThread;
  return static_cast<int>(std::clamp<int64_t>(a.num_tokens / 8, kChunksPerThread, 64));
}

struct Chunks {
  std::array<int64_t, kMaxGroup> num_tiles{}, tiles_per_chunk{};
  std::array<int64_t, kMaxGroup + 1> first{};  // first[i]: the first chunk of product i; first[count]: all
  size_t count = 0;

  Chunks(const Plan* plans, const MatmulArgs* args, size_t n, int num_threads) : count(n) {
    double total = 0;
    for (size_t i = 0; i < n; ++i)
      total += static_cast<double>(plans[i].weight_stride) * static_cast<double>(args[i].out_features);
    const double target = total / (num_threads * chunks_per_thread(plans[0], args[0], num_threads));
    for (size_t i = 0; i < n; ++i) {
      const int64_t rows = tile_rows_of(plans[i]);
      num_tiles[i] = (args[i].out_features + rows - 1) / rows;
      const double tile_bytes = static_cast<double>(plans[i].weight_stride) * static_cast<double>(rows);
      tiles_per_chunk[i] = std::max<int64_t>(1, static_cast<int64_t>(target / tile_bytes));
      first[i + 1] = first[i] + (num_tiles[i] + tiles_per_chunk[i] - 1) / tiles_per_chunk[i];
    }
  }
  int64_t size() const { return first[count]; }
  // Chunk c as product *product's tiles [*tile_begin, *tile_end).
  void locate(int64_t c, size_t* product, int64_t* tile_begin, int64_t* tile_end) const {
    size_t i = 0;
    while (c >= first[i + 1]) ++i;
    *product = i;
    *tile_begin = (c - first[i]) * tiles_per_chunk[i];
    *tile_end = std::min(num_tiles[i], *tile_begin + tiles_per_chunk[i]);
  }
};

// Weight bytes a thread claims at a time from a decode chunk (its own or another's): a
// microsecond of streaming, so the claims' atomics cost nothing beside it, and the last claim
// left to wait for at the join is short.
constexpr size_t kStealBatchBytes = 16 * 1024;

std::atomic<int64_t> g_decode_steps_stolen{0};
std::atomic<int> g_slow_owner_thread{-1}, g_slow_owner_us{0};

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

  // Thread `thread`'s own chunk, in batches, answering requests between them.
  void run_own(int thread, int64_t chunk, const DecodeSteps& d) {
    const Product product = product_of(chunk);
    const MatmulArgs& a = m_args[product.index];
    const Plan& p = m_plans[product.index];
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

  // Parts of the other threads' chunks, asked for until none is running one.
  void help_others(int thread, int threads) {
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

 private:
  struct alignas(64) Owner {  // written by its thread (and `grant` taken by the others)
    std::atomic<bool> busy{false};
    std::atomic<uint64_t> grant{0};  // pack(chunk, first step, end step), 0 when none
  };
  struct alignas(64) Request {  // written by the others
    std::atomic<int> thief{0};  // the asking thread plus one, 0 when none
  };
  struct Product {
    size_t index;
    int64_t row_begin, row_end;
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

  Product product_of(int64_t chunk) const {
    Product product;
    int64_t tile_begin, tile_end;
    m_chunks.locate(chunk, &product.index, &tile_begin, &tile_end);
    const int64_t rows = tile_rows_of(m_plans[product.index]), out = m_args[product.index].out_features;
    product.row_begin = std::min(out, tile_begin * rows);
    product.row_end = std::min(out, tile_end * rows);
    return product;
  }

  uint64_t take_grant(int t) {
    std::atomic<uint64_t>& grant = m_owners[t].grant;
    return grant.load(std::memory_order_acquire) != 0 ? grant.exchange(0, std::memory_order_acq_rel) : 0;
  }

  void run_granted(uint64_t granted, bool is_stolen = true) {
    const int64_t chunk = chunk_of(granted), begin = front_of(granted), end = back_of(granted);
    const Product product = product_of(chunk);
    const MatmulArgs& a = m_args[product.index];
    const Plan& p = m_plans[product.index];
    run_decode_steps(a, p, decode_steps_of(a, p, product.row_begin, product.row_end), begin, end);
    if (is_stolen) g_decode_steps_stolen.fetch_add(end - begin, std::memory_order_relaxed);
  }

  const Chunks& m_chunks;
  const Plan* m_plans;
  const MatmulArgs* m_args;
  std::array<Owner, kMaxStealThreads> m_owners{};
  std::array<Request, kMaxStealThreads> m_requests{};
};

// Below this many activation elements the calling thread quantizes them before the parallel
// region (a microsecond for a decode token), which then needs no barrier inside.
constexpr int64_t kSerialQuantizeElements = 1 << 14;

}  // namespace

bool matmul_group_with_dot_kernels(std::span<const MatmulArgs> group) {
  if (group.empty() || group.size() > kMaxGroup) return false;
  std::array<Plan, kMaxGroup> plans;
  const MatmulArgs& first = group[0];
  for (size_t i = 0; i < group.size(); ++i) {
    if (!make_plan(group[i], &plans[i])) return false;
    // One quantized input for all: the same input, shape and activation format.
    const MatmulArgs& a = group[i];
    if (a.input != first.input || a.in_features != first.in_features || a.num_tokens != first.num_tokens ||
        plans[i].k->format != plans[0].k->format) {
      return false;
    }
  }
  const DotKernels& k0 = *plans[0].k;
  const bool is_quantized = k0.quantize != nullptr;
  const bool is_prepared = plans[0].is_prepared;
  for (size_t i = 1; i < group.size(); ++i) {
    if (plans[i].is_prepared != is_prepared || (is_prepared && plans[i].k->gemm_prepare != k0.gemm_prepare)) return false;
  }
  // One token (decode): the caller quantizes it once in each layout the products read (a
  // decode kernel's own, or the format's: Q4_K_M's Q4_K queries beside a Q6_K value matrix),
  // a microsecond or a few each, before the region.
  // A few tokens take decode steps only when every product does (they then share the tokens'
  // layouts below); otherwise all take the tiles.
  bool all_rows_decode = true;
  for (size_t i = 0; i < group.size(); ++i) all_rows_decode = all_rows_decode && plans[i].is_rows_decode;
  if (first.num_tokens > 1 && !all_rows_decode) {
    for (size_t i = 0; i < group.size(); ++i) {
      if (!plans[i].is_rows_decode) continue;
      plans[i].is_rows_decode = plans[i].use_decode = false;
      plans[i].act_stride = activation_stride(*plans[i].k, group[i].in_features);
    }
  }
  const bool is_decode_token = is_quantized && !is_prepared && (first.num_tokens == 1 || all_rows_decode);
  // Otherwise what all threads make of the input first: each token's quantized blocks, or each
  // group of tokens prepared for the GEMM.
  const int64_t num_units = is_decode_token ? 0
                            : is_prepared   ? (first.num_tokens + kPreparedGroupTokens - 1) / kPreparedGroupTokens
                            : is_quantized  ? first.num_tokens
                                            : 0;
  const size_t act_stride = plans[0].act_stride;
  uint8_t* scratch = nullptr;
  if (is_decode_token) {
    std::array<QuantizeActivationFn, kMaxGroup> layouts{};
    std::array<size_t, kMaxGroup> offsets{}, strides{}, layout_of{};
    size_t num_layouts = 0, need = kAlign;
    for (size_t i = 0; i < group.size(); ++i) {
      const QuantizeActivationFn quantize = plans[i].use_decode ? plans[i].k->decode_quantize : plans[i].k->quantize;
      size_t j = 0;
      while (j < num_layouts && layouts[j] != quantize) ++j;
      if (j == num_layouts) {
        layouts[j] = quantize;
        offsets[j] = need - kAlign;
        strides[j] = plans[i].act_stride;
        need += plans[i].act_stride * static_cast<size_t>(first.num_tokens);  // a multiple of kAlign
        ++num_layouts;
      }
      layout_of[i] = j;
    }
    scratch = first.scratch != nullptr && first.scratch_bytes >= need
                  ? reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(first.scratch), kAlign))
                  : thread_scratch(need);
    for (size_t j = 0; j < num_layouts; ++j) {
      for (int64_t t = 0; t < first.num_tokens; ++t) {
        layouts[j](first.input + t * first.in_features, scratch + offsets[j] + t * strides[j], first.in_features);
      }
    }
    for (size_t i = 0; i < group.size(); ++i) plans[i].act = scratch + offsets[layout_of[i]];
  } else if (num_units > 0) {
    const size_t need = act_stride * static_cast<size_t>(num_units) + kAlign;
    // The caller's scratch when it is big enough, otherwise the calling thread's own.
    scratch = first.scratch != nullptr && first.scratch_bytes >= need
                  ? reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(first.scratch), kAlign))
                  : thread_scratch(need);
    for (size_t i = 0; i < group.size(); ++i) plans[i].act = scratch;
  }
  auto prepare = [&](int64_t u) {
    if (is_prepared) {
      const int64_t t0 = u * kPreparedGroupTokens;
      const int tokens = static_cast<int>(std::min<int64_t>(kPreparedGroupTokens, first.num_tokens - t0));
      k0.gemm_prepare(first.input + t0 * first.in_features, first.in_features, tokens, scratch + u * act_stride);
    } else {
      k0.quantize(first.input + u * first.in_features, scratch + u * act_stride, first.in_features);
    }
  };
  int64_t work = 0;
  for (const MatmulArgs& a : group) work += a.in_features * a.out_features * a.num_tokens;
  const int num_threads = work >= kMinParallelWork ? resolve_threads(first.num_threads) : 1;
  if (num_threads == 1) {
    for (int64_t u = 0; u < num_units; ++u) prepare(u);
    for (size_t i = 0; i < group.size(); ++i) run_rows(group[i], plans[i], 0, group[i].out_features);
    return true;
  }
  const Chunks chunks(plans.data(), group.data(), group.size(), num_threads);
  const bool is_serial_prepare = !is_prepared && first.num_tokens * first.in_features <= kSerialQuantizeElements;
  if (is_serial_prepare) {
    for (int64_t u = 0; u < num_units; ++u) prepare(u);
  }
  // Units made by all threads, one at a time; then every thread waits for the last one (a
  // prompt's few hundred tokens take tens of microseconds) before it reads any row.
  std::atomic<int64_t> next_unit{0}, units_done{0}, next_chunk{0};
  // Decode chunks are shared out step by step at the end (DecodeSteal).
  const bool can_steal = first.num_tokens <= kMaxDecodeTokens && num_threads <= kMaxStealThreads &&
                         chunks.size() < DecodeSteal::kMaxChunks;
  std::optional<DecodeSteal> steal_storage;
  if (can_steal) steal_storage.emplace(chunks, plans.data(), group.data());
  DecodeSteal* steal = can_steal ? &*steal_storage : nullptr;
  parallel_region(num_threads, [&](int thread, int threads) {
    if (num_units > 0 && !is_serial_prepare) {
      int64_t mine = 0;
      for (int64_t u = next_unit.fetch_add(1, std::memory_order_relaxed); u < num_units;
           u = next_unit.fetch_add(1, std::memory_order_relaxed)) {
        prepare(u);
        ++mine;
      }
      units_done.fetch_add(mine, std::memory_order_release);
      SpinWait wait;
      while (units_done.load(std::memory_order_acquire) < num_units) wait();
    }
    for (int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed); c < chunks.size();
         c = next_chunk.fetch_add(1, std::memory_order_relaxed)) {
      size_t i;
      int64_t tile_begin, tile_end;
      chunks.locate(c, &i, &tile_begin, &tile_end);
      const int64_t rows = tile_rows_of(plans[i]), out = group[i].out_features;
      const int64_t row_begin = std::min(out, tile_begin * rows), row_end = std::min(out, tile_end * rows);
      if (steal != nullptr && plans[i].is_rows_decode) {
        steal->run_own(thread, c, decode_steps_of(group[i], plans[i], row_begin, row_end));
      } else {
        run_rows(group[i], plans[i], row_begin, row_end);
      }
    }
    if (steal != nullptr) steal->help_others(thread, threads);
  });
  return true;
}

bool matmul_with_dot_kernels(const MatmulArgs& a) { return matmul_group_with_dot_kernels({&a, 1}); }

int64_t decode_steps_stolen() { return g_decode_steps_stolen.load(std::memory_order_relaxed); }

void set_slow_decode_owner_for_testing(int thread, int microseconds) {
  g_slow_owner_us.store(microseconds, std::memory_order_relaxed);
  g_slow_owner_thread.store(thread, std::memory_order_relaxed);
}

}  // namespace iwb::detail
