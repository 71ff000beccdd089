// The dot-kernel matmul driver: activations quantized to 8-bit blocks once per call (by all
// threads, one token each; F16/BF16/F32 weights read the f32 activations as they are), then
// threads claim chunks of the weight rows (of several matrices, for products of one input)
// from a shared counter. Decode (one token, or two of quantized weights) dots one row at a time
// from a few row streams, one chunk a thread, the chunks' ends shared out between the threads
// (DecodeSteal); a few tokens run tiles of 4 rows x 4 tokens over token blocks small enough to
// stay in L2, or (K-quants, 5..16 tokens, from 3 on Intel) token-lane kernels on activations
// each thread packs for them; many tokens repack 16- or 32-row panels for the GEMM kernels.
#include "matmul_decode.h"
#include "matmul_paths.h"
#include "matmul_plan.h"
#include "parallel.h"
#include "quant_dot.h"
#include "thread_buffer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

namespace iwb::detail {
namespace {

constexpr size_t kAlign = 64;
// Quantized activations of one token block: kept under ~half of a 1 MiB L2.
constexpr size_t kTokenBlockBytes = 512 * 1024;
// Tiles ahead whose weight rows the tile loop prefetches.
constexpr int64_t kPrefetchTiles = 2;

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

// The repacking buffer of the GEMM kernel (or the token lanes' packed activations).
struct GemmBufferTag;
uint8_t* gemm_buffer(size_t bytes) { return thread_buffer<GemmBufferTag>(bytes); }

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
      // Not past 1 MiB (F16's 128-row calls over 8960 columns are 2.2 MiB, more than L2), and
      // not for kernels that fetch their rows themselves (gemm_fetches_rows: the AMX GEMMs,
      // which finish a panel quicker than this loop's prefetches, issued all at once before the
      // call, could complete: the core stalled in it for 12% of a pp32 on Xeon model 167).
      if (!p.k->gemm_fetches_rows && r0 + 2 * p.k->gemm_rows <= row_end &&
          p.k->gemm_rows * p.weight_stride <= (size_t{1} << 20)) {
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

// Tokens up to which a quantized product runs in decode steps (matmul_plan.h): two, or more
// where the layout it takes has a several-token kernel (DotKernels::decode_max_tokens,
// vec_max_tokens).
int64_t decode_token_limit(const DotKernels& k, int64_t in_features) {
  const int limit = takes_decode_layout(k, in_features) ? (k.decode_dot_tokens != nullptr ? k.decode_max_tokens : 2)
                                                        : (k.vec_dot_tokens != nullptr ? k.vec_max_tokens : 2);
  return std::min(limit, kMaxDecodeTokens);
}

}  // namespace

bool has_dot_kernels(GgmlType type) { return kernels_for(type) != nullptr; }

int64_t decode_steps_max_tokens(GgmlType type, int64_t in_features) {
  const DotKernels* k = kernels_for(type);
  if (k == nullptr) return 0;
  return k->quantize != nullptr ? decode_token_limit(*k, in_features) : 1;
}

size_t dot_kernels_scratch_bytes(GgmlType type, int64_t in_features, int64_t num_tokens) {
  const DotKernels* k = kernels_for(type);
  if (k == nullptr || in_features <= 0 || num_tokens <= 0) return 0;
  if (k->gemm_prepare != nullptr && k->gemm != nullptr && num_tokens >= k->gemm_min_tokens) {
    const int64_t groups = (num_tokens + kPreparedGroupTokens - 1) / kPreparedGroupTokens;
    return k->gemm_prepared_group_bytes(in_features) * static_cast<size_t>(groups) + kAlign;
  }
  if (k->quantize == nullptr) return 0;
  if (num_tokens <= decode_token_limit(*k, in_features) && takes_decode_layout(*k, in_features)) {
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
  // Quantized products of up to decode_token_limit tokens take decode steps, ahead of the GEMM
  // and the token lanes (whose thresholds then apply above that limit).
  const bool is_decode_few = is_quantized && a.num_tokens <= decode_token_limit(*k, a.in_features);
  p->use_gemm = !is_decode_few && k->gemm != nullptr && a.num_tokens >= k->gemm_min_tokens;
  p->use_lanes = !is_decode_few && !p->use_gemm && k->lanes != nullptr && a.num_tokens >= k->lanes_min_tokens;
  p->is_rows_decode = !p->use_gemm && !p->use_lanes && !p->is_one_token_tiled && (a.num_tokens == 1 || is_decode_few);
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
    if (plans[i].is_prepared != is_prepared || (is_prepared && plans[i].k->gemm_prepare != k0.gemm_prepare))
      return false;
  }
  // One token (decode), or a few where some product takes decode steps: the caller quantizes
  // them once in each layout the products read (a decode kernel's own, or the format's: Q4_K_M's
  // Q4_K queries beside a Q6_K value matrix, or a few tokens' Q8_0 decode steps beside Q4_1's
  // tiles), a microsecond or a few each, before the region. Each product so takes the path it
  // takes alone, and gives the bits it gives alone.
  bool any_rows_decode = false;
  for (size_t i = 0; i < group.size(); ++i) any_rows_decode = any_rows_decode || plans[i].is_rows_decode;
  const bool is_decode_token = is_quantized && !is_prepared && (first.num_tokens == 1 || any_rows_decode);
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
  const bool can_steal = first.num_tokens <= int64_t{kMaxDecodeTokens} && num_threads <= kMaxStealThreads &&
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
      const Chunks::Rows r = chunks.rows_of(c, plans.data(), group.data());
      const MatmulArgs& a = group[r.product];
      const Plan& p = plans[r.product];
      if (steal != nullptr && p.is_rows_decode) {
        steal->run_own(thread, c, a, p, decode_steps_of(a, p, r.begin, r.end));
      } else {
        run_rows(a, p, r.begin, r.end);
      }
    }
    if (steal != nullptr) steal->help_others(thread, threads);
  });
  return true;
}

bool matmul_with_dot_kernels(const MatmulArgs& a) { return matmul_group_with_dot_kernels({&a, 1}); }

}  // namespace iwb::detail
