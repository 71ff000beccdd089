// Flash-attention style paged attention for prefill tiles, on mma.sync tensor-core products
// (mma_m16n8k16.cuh) with the scores, the online softmax and the output accumulators all in
// registers. Same work split, inputs and outputs as attention_tc_kernel (paged_attention_tc.cu):
// block = query tile x KV head x key split, 4 warps of 16 (token, head) rows, 64 keys per
// shared-memory tile; Q and P rounded to f16, f32 accumulation, the sum counting the f16 weights.
//
// Why it replaced the WMMA kernel for the common head sizes: WMMA's fragments are opaque, so that
// kernel stored every score tile to shared memory, ran the softmax one row at a time with two
// 32-lane reductions each, and kept the output in shared memory, rescaling and reloading it for
// every key tile. On an H100 it ran a 2,048-token causal prefill of one llama-3-8b layer in
// 2.7 ms (12.7 TFLOP/s), more than half of the whole prefill. Here a row's softmax needs two quad
// shuffles, P goes from the score registers straight into the next product's A operand, and
// shared memory holds only K and V.
//
// Head sizes: kD = head_dim = head_dim_v, a multiple of 16 up to 128 (registers: Q 2kD/8, the
// output kD/2 and the scores 32 floats a thread). Others keep the WMMA kernel.
#include "cp_async.cuh"
#include "mma_m16n8k16.cuh"
#include "paged_attention_common.cuh"

namespace iwb::cuda_detail {
namespace {

constexpr int kMmaWarps = 4;
constexpr int kMmaRows = kMmaWarps * 16;
constexpr int kMmaKeys = 64;  // keys per shared-memory tile: 8 score columns of 8 keys
constexpr int kMmaPad = 8;    // halfs of padding per K/V row: conflict-free fragment reads

// Quad (4-lane) reductions: the four lanes that share an accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}

// Bytes of dynamic shared memory: K and V tiles, twice for an f16 cache (the next tile loads
// while the current one is multiplied).
__host__ __device__ constexpr int mma_shared_bytes(int head_dim, bool is_f16) {
  return (is_f16 ? 2 : 1) * 2 * kMmaKeys * (head_dim + kMmaPad) * 2;
}

// Starts copying keys and values of positions key0 .. key0 + 63 of KV head g (f16 cache) into
// k_s / v_s with cp.async: 16-byte pieces, consecutive threads on consecutive pieces of a row (a
// warp reads whole 256-byte head rows), zeros past key_end or behind a block outside the pool.
template <int kD>
__device__ inline void start_f16_tile(const AttentionParams& p, const int32_t* table, int64_t g, int64_t key0,
                                      int64_t key_end, __half* k_s, __half* v_s) {
  constexpr int kPieces = kD / 8, kLd = kD + kMmaPad;
  for (int idx = static_cast<int>(threadIdx.x); idx < kMmaKeys * kPieces; idx += kMmaWarps * 32) {
    const int kk = idx / kPieces, piece = idx % kPieces;
    const int64_t slot = slot_of(p, table, key0 + kk, key_end);
    const bool is_valid = slot >= 0;
    const int64_t safe = is_valid ? slot : 0;
    cp_async_16(k_s + kk * kLd + piece * 8, p.k_cache + safe * p.k_row_units + g * kD + piece * 8, is_valid);
    cp_async_16(v_s + kk * kLd + piece * 8, p.v_cache + safe * p.v_row_units + g * kD + piece * 8, is_valid);
  }
  cp_async_commit();
}

// One accumulator row of this lane (row `group` or `group + 8` of the warp's 16): where its query
// sits and which keys it may see.
struct MmaRow {
  bool is_active = false;
  int64_t output_row = 0;  // token * num_heads + head
  int64_t pos = -1, first = 0;
  float max = -INFINITY, sum = 0.0f;
};

template <int kD, bool kIsF16>
__global__ void __launch_bounds__(kMmaWarps * 32) attention_mma_kernel(AttentionParams p) {
  cuda_detail::wait_for_prior_grids();
  static_assert(kD % 16 == 0 && kD <= 128, "head sizes that are multiples of 16, up to 128");
  constexpr int kChunks = kD / 16;   // 16-wide slices of the head for Q K^T
  constexpr int kDimTiles = kD / 8;  // 8-wide output column tiles for P V
  constexpr int kLd = kD + kMmaPad;
  // The most expensive tiles (the last query tokens see the most keys) are planned last: run
  // them first so they do not form the grid's tail.
  const int64_t tile_index = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  const int64_t tile_first = p.tiles != nullptr ? static_cast<int64_t>(p.tiles[tile_index]) : tile_index;
  if (tile_first < 0) return;
  const int64_t g = blockIdx.y, split = blockIdx.z;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int group = lane / 4, quad = lane % 4;
  const TileKeys tk = tile_keys(p, tile_first, split);
  const int32_t seq = tk.seq;
  const bool is_seq_valid = tk.is_seq_valid;
  const int num_active_rows = tk.num_active_rows;
  const int64_t key_begin = tk.key_begin, key_end = tk.key_end;
  if (p.num_splits > 1 && key_begin >= key_end) return;

  IWB_DYNAMIC_SHARED(__half, shared_halfs);
  constexpr int kTileHalfs = kMmaKeys * kLd;  // one K or V tile

  // This lane's two rows, and the Q fragments of the warp's 16 rows (scaled, rounded to f16).
  const int row0 = warp * 16;
  MmaRow rows[2];
  int64_t warp_last_pos = -1;  // the furthest key any row of this warp sees
  uint32_t qa[kChunks][4];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = row0 + group + 8 * half;
    MmaRow& row = rows[half];
    row.is_active = r < num_active_rows;
    if (row.is_active) {
      const int64_t t = tile_first + r / p.group, h = g * p.group + r % p.group;
      row.output_row = t * p.num_heads + h;
      row.pos = p.positions[t];
      row.first = first_visible(row.pos, p.sliding_window);
    }
  }
  {
    int64_t last = max(rows[0].pos, rows[1].pos);
    for (int offset = 16; offset > 0; offset >>= 1) last = max(last, __shfl_xor_sync(kFullMask, last, offset));
    warp_last_pos = last;
  }
  const float q_factor = query_factor(p);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const MmaRow& row = rows[reg & 1];
      const int col = 16 * c + 2 * quad + (reg >= 2 ? 8 : 0);
      float x0 = 0.0f, x1 = 0.0f;
      if (row.is_active) {
        const float* q = p.q + row.output_row * p.head_dim + col;
        x0 = q[0] * q_factor;
        x1 = q[1] * q_factor;
      }
      qa[c][reg] = pack_half2(x0, x1);
    }
  }

  float o[kDimTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  const int32_t* table = p.block_tables + (is_seq_valid ? seq : 0) * p.max_blocks_per_sequence;
  // An f16 cache: tile i + 1 is copied (cp.async) into the other buffer while tile i is
  // multiplied. A quantized one is expanded to f16 by the threads, one tile at a time.
  if constexpr (kIsF16) {
    if (key_begin < key_end)
      start_f16_tile<kD>(p, table, g, key_begin, key_end, shared_halfs, shared_halfs + kTileHalfs);
  }

  int buffer = 0;
  for (int64_t key0 = key_begin; key0 < key_end; key0 += kMmaKeys, buffer ^= 1) {
    __half* k_s = shared_halfs + (kIsF16 ? buffer * 2 * kTileHalfs : 0);
    __half* v_s = k_s + kTileHalfs;
    if constexpr (kIsF16) {
      if (key0 + kMmaKeys < key_end) {
        __half* next_k = shared_halfs + (buffer ^ 1) * 2 * kTileHalfs;
        start_f16_tile<kD>(p, table, g, key0 + kMmaKeys, key_end, next_k, next_k + kTileHalfs);
        cp_async_wait<1>();  // this tile's group has landed (the next one may still be in flight)
      } else {
        cp_async_wait<0>();
      }
    } else {
      load_kv_tile<false, kMmaKeys>(p, table, g, key0, key_end, k_s, kLd, v_s, kLd);
    }
    __syncthreads();  // every thread's part of this tile is in shared memory
    const uint32_t* k_words = reinterpret_cast<const uint32_t*>(k_s);
    const uint16_t* v_bits = reinterpret_cast<const uint16_t*>(v_s);
    // Warp-uniform: the products below need all 32 lanes. A warp whose rows end before this
    // tile (causal prefill) or that has no rows skips it.
    if (warp_last_pos >= key0) {
      // S = Q K^T: 16 rows x 64 keys as 8 column tiles of 8 keys. K row-major [key][dim] is the
      // B operand's column-major form: a register pair is two consecutive dims of one key.
      float s[8][4];
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        const uint32_t* key_row = k_words + (n * 8 + group) * (kLd / 2) + quad;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const uint32_t b[2] = {key_row[8 * c], key_row[8 * c + 4]};
          mma_m16n8k16(s[n], qa[c], b);
        }
      }

      // Online softmax of this lane's two rows (c[0..1]: row group, c[2..3]: row group + 8).
      float factor[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        MmaRow& row = rows[half];
        float tile_max = -INFINITY;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int64_t key = key0 + n * 8 + 2 * quad + e;
            const bool is_visible = row.is_active && key < key_end && key <= row.pos && key >= row.first;
            float x = s[n][2 * half + e];
            if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
            x = is_visible ? x : -INFINITY;
            s[n][2 * half + e] = x;
            tile_max = fmaxf(tile_max, x);
          }
        }
        const float new_max = fmaxf(row.max, quad_max(tile_max));
        float partial = 0.0f;
        factor[half] = 1.0f;
        if (new_max != -INFINITY) {
#pragma unroll
          for (int n = 0; n < 8; ++n) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float x = s[n][2 * half + e];
              // The sum counts the f16 weights the product uses.
              const float w = x == -INFINITY ? 0.0f : __half2float(__float2half_rn(expf(x - new_max)));
              s[n][2 * half + e] = w;
              partial += w;
            }
          }
          factor[half] = expf(row.max - new_max);
        } else {
#pragma unroll
          for (int n = 0; n < 8; ++n) s[n][2 * half] = s[n][2 * half + 1] = 0.0f;
        }
        row.sum = row.sum * factor[half] + quad_sum(partial);
        row.max = new_max;
      }
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        o[n][0] *= factor[0];
        o[n][1] *= factor[0];
        o[n][2] *= factor[1];
        o[n][3] *= factor[1];
      }

      // O += P V, 16 keys at a time: the score tiles 2j and 2j + 1 are exactly the A operand of keys
      // 16j .. 16j + 15. V row-major [key][dim]: a B register pair is one dim of two keys.
#pragma unroll
      for (int j = 0; j < kMmaKeys / 16; ++j) {
        const uint32_t pa[4] = {pack_half2(s[2 * j][0], s[2 * j][1]), pack_half2(s[2 * j][2], s[2 * j][3]),
                                pack_half2(s[2 * j + 1][0], s[2 * j + 1][1]),
                                pack_half2(s[2 * j + 1][2], s[2 * j + 1][3])};
        const uint16_t* v_rows = v_bits + (16 * j + 2 * quad) * kLd + group;
#pragma unroll
        for (int n = 0; n < kDimTiles; ++n) {
          const uint16_t* v = v_rows + 8 * n;
          const uint32_t b[2] = {pair_of_bits(v[0], v[kLd]), pair_of_bits(v[8 * kLd], v[9 * kLd])};
          mma_m16n8k16(o[n], pa, b);
        }
      }
    }
    __syncthreads();  // nobody still reads this buffer when the next iteration refills it
  }

  const float out_factor = output_factor(p);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const MmaRow& row = rows[half];
    if (!row.is_active) continue;
    if (p.num_splits == 1) {
      const float denominator = softmax_denominator(p, row.output_row % p.num_heads, row.max, row.sum);
      const float inv = denominator > 0.0f ? out_factor / denominator : 0.0f;
      float* out = p.output + row.output_row * kD + 2 * quad;
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        out[8 * n] = o[n][2 * half] * inv;
        out[8 * n + 1] = o[n][2 * half + 1] * inv;
      }
    } else {
      const int64_t part = row.output_row * p.num_splits + split;
      if (quad == 0) {
        p.part_max[part] = row.max;
        p.part_sum[part] = row.sum;
      }
      float* acc = p.part_acc + part * kD + 2 * quad;
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        acc[8 * n] = o[n][2 * half] * out_factor;
        acc[8 * n + 1] = o[n][2 * half + 1] * out_factor;
      }
    }
  }
}

template <int kD, bool kIsF16>
cudaError_t launch_mma(const AttentionParams& params, const AttentionLaunchPlan& plan, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.max_tiles), static_cast<unsigned>(params.num_kv_heads),
                  static_cast<unsigned>(plan.num_splits));
  auto* kernel = attention_mma_kernel<kD, kIsF16>;
  constexpr int kShared = mma_shared_bytes(kD, kIsF16);
  if (kShared > 48 * 1024) {
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared);
        e != cudaSuccess) {
      return e;
    }
  }
  IWB_LAUNCH(kernel, grid, kMmaWarps * 32, static_cast<size_t>(kShared), stream, params);
  return cudaGetLastError();
}

template <bool kIsF16>
cudaError_t launch_mma_for_head(const AttentionParams& params, const AttentionLaunchPlan& plan, cudaStream_t stream) {
  switch (params.head_dim) {
    case 64: return launch_mma<64, kIsF16>(params, plan, stream);
    case 80: return launch_mma<80, kIsF16>(params, plan, stream);
    case 96: return launch_mma<96, kIsF16>(params, plan, stream);
    case 128: return launch_mma<128, kIsF16>(params, plan, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

bool attention_mma_supports(int64_t head_dim, int64_t head_dim_v, int64_t rows_per_block) {
  return head_dim == head_dim_v && rows_per_block == kMmaRows &&
         (head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128);
}

cudaError_t launch_attention_mma(const AttentionParams& params, const AttentionLaunchPlan& plan, bool is_f16,
                                 cudaStream_t stream) {
  if (!attention_mma_supports(params.head_dim, params.head_dim_v, plan.rows_per_block)) return cudaErrorInvalidValue;
  return is_f16 ? launch_mma_for_head<true>(params, plan, stream) : launch_mma_for_head<false>(params, plan, stream);
}

}  // namespace iwb::cuda_detail
