// Paged attention on the GPU (paged_attention_cuda.h). Three kernels:
//  1. plan_tiles_kernel (one block): splits the batch into query tiles, at most tile_tokens
//     consecutive tokens of one sequence each, from token_sequences on the device.
//  2. attention_kernel: block (tile, KV head, key split) holds the tile's (token, head) rows in
//     shared memory, walks the split's keys 32 at a time through the block table (lane = key
//     for scores and the softmax, lane = a pair of value columns for the weighted sum), online
//     softmax.
//  3. combine_kernel (only when the keys are split): merges the splits' (max, sum, acc).
// Batches with several queries per sequence take a tensor-core variant of kernel 2 instead
// (paged_attention_mma.cu for the common head sizes, paged_attention_tc.cu for the others),
// which writes the same outputs and partials.
#include "iwb/kernels/cuda/paged_attention_cuda.h"

#include "iwb/kernels/paged_attention.h"
#include "paged_attention_common.cuh"

#include <cuda_fp16.h>

#include <cmath>

namespace iwb {
namespace {

using namespace cuda_detail;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kKeyTile = static_cast<int>(kAttentionKeyTile);
static_assert(kKeyTile == 32, "one key per lane");
constexpr int kPlanThreads = 1024;

// ---- 1. Query tiles -------------------------------------------------------------------------

// tiles[i] = first token of tile i; a tile starts where a sequence's run of tokens starts and
// every tile_tokens tokens into it. Unused entries get -1 (their thread blocks exit at once).
__global__ void __launch_bounds__(kPlanThreads)
    plan_tiles_kernel(const int32_t* __restrict__ token_sequences, int num_tokens, int tile_tokens,
                      int32_t* __restrict__ tiles, int max_tiles) {
  cuda_detail::wait_for_prior_grids();
  __shared__ int warp_totals[32];
  __shared__ int carry_run_start, carry_count;
  if (threadIdx.x == 0) {
    carry_run_start = 0;
    carry_count = 0;
  }
  __syncthreads();
  for (int base = 0; base < num_tokens; base += kPlanThreads) {
    const int t = base + static_cast<int>(threadIdx.x);
    const bool is_token = t < num_tokens;
    const bool is_run_start = is_token && (t == 0 || token_sequences[t] != token_sequences[t - 1]);
    const int run_start = max(block_inclusive_scan<true>(is_run_start ? t : -1, warp_totals), carry_run_start);
    const int is_tile_start = is_token && (t - run_start) % tile_tokens == 0 ? 1 : 0;
    const int inclusive = block_inclusive_scan<false>(is_tile_start, warp_totals);
    const int index = carry_count + inclusive - is_tile_start;
    if (is_tile_start && index < max_tiles) tiles[index] = t;
    __syncthreads();  // every thread has read the carries
    if (threadIdx.x == kPlanThreads - 1) {
      carry_run_start = run_start;
      carry_count += inclusive;
    }
    __syncthreads();
  }
  for (int i = carry_count + static_cast<int>(threadIdx.x); i < max_tiles; i += kPlanThreads) tiles[i] = -1;
}

// ---- 2. Attention over one tile x KV head x key split --------------------------------------

// kCols: value columns per lane, even (head_dim_v <= 32 * kCols); kRowsPerWarp: rows each warp owns.
template <int kCols, int kRowsPerWarp, bool kIsF16>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionParams p) {
  cuda_detail::wait_for_prior_grids();
  constexpr int kRows = kWarps * kRowsPerWarp;
  static_assert(kCols % 2 == 0, "value columns go in pairs");
  const int64_t tile_first = first_token_of_tile(p);
  if (tile_first < 0) return;
  const int64_t g = blockIdx.y, split = blockIdx.z;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const TileKeys tk = tile_keys(p, tile_first, split);
  const int32_t seq = tk.seq;
  const bool is_seq_valid = tk.is_seq_valid;
  const int num_active_rows = tk.num_active_rows;
  const int64_t key_begin = tk.key_begin, key_end = tk.key_end;
  // Nobody reads a split that misses every row's keys (the combine recomputes which splits a
  // row has); unsplit, the rows still get their (zero) output below.
  if (p.num_splits > 1 && key_begin >= key_end) return;

  IWB_DYNAMIC_SHARED(unsigned char, shared_raw);
  float* q_s = reinterpret_cast<float*>(shared_raw);                     // [kRows x head_dim]
  __half* k_s = reinterpret_cast<__half*>(q_s + kRows * p.head_dim);     // [32 x k_stride]
  __half* v_s = k_s + kKeyTile * p.k_stride;                             // [32 x head_dim_v]
  float* p_s = reinterpret_cast<float*>(v_s + kKeyTile * p.head_dim_v);  // [kRows x 32]
  __shared__ int64_t row_pos[kRows], row_first[kRows];

  // Rows: r = token_in_tile * group + head_in_group, so a token's heads are adjacent in q.
  for (int r = threadIdx.x; r < kRows; r += kThreads) {
    if (r < num_active_rows) {
      const int64_t pos = p.positions[tile_first + r / p.group];
      row_pos[r] = pos;
      row_first[r] = first_visible(pos, p.sliding_window);
    } else {
      row_pos[r] = -1;
      row_first[r] = 0;
    }
  }
  const float q_factor = query_factor(p);
  for (int idx = threadIdx.x; idx < kRows * p.head_dim; idx += kThreads) {
    const int r = idx / p.head_dim, c = idx % p.head_dim;
    float value = 0.0f;
    if (r < num_active_rows) {
      const int64_t t = tile_first + r / p.group, h = g * p.group + r % p.group;
      value = p.q[(t * p.num_heads + h) * p.head_dim + c] * q_factor;
    }
    q_s[idx] = value;
  }

  // Rows go round-robin over the warps (row warp + kWarps * j), so the few rows of a decode
  // token (its group of query heads) spread over all warps instead of crowding the first.
  const int warp_rows = max(0, min(kRowsPerWarp, (num_active_rows - warp + kWarps - 1) / kWarps));
  float row_max[kRowsPerWarp], row_sum[kRowsPerWarp], acc[kRowsPerWarp][kCols];
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    row_max[j] = -INFINITY;
    row_sum[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < kCols; ++i) acc[j][i] = 0.0f;
  }

  const int32_t* table = p.block_tables + (is_seq_valid ? seq : 0) * p.max_blocks_per_sequence;

  for (int64_t key0 = key_begin; key0 < key_end; key0 += kKeyTile) {
    __syncthreads();  // the previous tile's keys and values are no longer read (and q_s is written)
    load_kv_tile<kIsF16, kKeyTile>(p, table, g, key0, key_end, k_s, p.k_stride, v_s, p.head_dim_v);
    __syncthreads();
    if (warp_rows == 0) continue;

    // Scores: lane = key, one per row of this warp.
    float score[kRowsPerWarp];
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) score[j] = 0.0f;
    // Four dimensions per step: one 16-byte (broadcast) load of each row's queries, two 4-byte
    // loads of this lane's key.
    const __half2* k_lane = reinterpret_cast<const __half2*>(k_s + lane * p.k_stride);
    for (int c4 = 0; c4 < p.head_dim / 4; ++c4) {
      const float2 k01 = __half22float2(k_lane[2 * c4]);
      const float2 k23 = __half22float2(k_lane[2 * c4 + 1]);
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) {
        if (j < warp_rows) {
          const float4 qv = reinterpret_cast<const float4*>(q_s + (warp + kWarps * j) * p.head_dim)[c4];
          score[j] = fmaf(qv.x, k01.x, fmaf(qv.y, k01.y, fmaf(qv.z, k23.x, fmaf(qv.w, k23.y, score[j]))));
        }
      }
    }

    // Online softmax per row (warp-uniform branches: j and warp_rows are the same in all lanes).
    const int64_t key = key0 + lane;
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
      if (j < warp_rows) {
        const int r = warp + kWarps * j;
        const bool is_visible = key < key_end && key <= row_pos[r] && key >= row_first[r];
        float s = score[j];
        if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
        s = is_visible ? s : -INFINITY;
        const float new_max = fmaxf(row_max[j], warp_max(s));
        float weight = 0.0f, factor = 1.0f;
        if (new_max != -INFINITY) {  // some key of this row seen so far
          weight = is_visible ? expf(s - new_max) : 0.0f;
          factor = expf(row_max[j] - new_max);  // 0 when row_max is still -inf
        }
        row_sum[j] = row_sum[j] * factor + warp_sum(weight);
        row_max[j] = new_max;
#pragma unroll
        for (int i = 0; i < kCols; ++i) acc[j][i] *= factor;
        p_s[r * kKeyTile + lane] = weight;
      }
    }
    __syncwarp();

    // Weighted values, four keys per step: lane owns value columns 64 i + 2 lane + {0, 1}
    // (acc[j][2 i], acc[j][2 i + 1]); each row's four weights come in one broadcast load.
    for (int kk0 = 0; kk0 < kKeyTile; kk0 += 4) {
      float2 v[4][kCols / 2];
#pragma unroll
      for (int k4 = 0; k4 < 4; ++k4) {
#pragma unroll
        for (int i = 0; i < kCols / 2; ++i) {
          const int c = 64 * i + 2 * lane;
          v[k4][i] = c < p.head_dim_v
                         ? __half22float2(*reinterpret_cast<const __half2*>(v_s + (kk0 + k4) * p.head_dim_v + c))
                         : make_float2(0.0f, 0.0f);
        }
      }
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) {
        if (j < warp_rows) {
          const float4 w = *reinterpret_cast<const float4*>(p_s + (warp + kWarps * j) * kKeyTile + kk0);
#pragma unroll
          for (int i = 0; i < kCols / 2; ++i) {
            acc[j][2 * i] =
                fmaf(w.x, v[0][i].x, fmaf(w.y, v[1][i].x, fmaf(w.z, v[2][i].x, fmaf(w.w, v[3][i].x, acc[j][2 * i]))));
            acc[j][2 * i + 1] = fmaf(
                w.x, v[0][i].y, fmaf(w.y, v[1][i].y, fmaf(w.z, v[2][i].y, fmaf(w.w, v[3][i].y, acc[j][2 * i + 1]))));
          }
        }
      }
    }
    __syncwarp();  // p_s is rewritten by the next tile
  }

  const float out_factor = output_factor(p);
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    if (j < warp_rows) {
      const int r = warp + kWarps * j;
      const int64_t t = tile_first + r / p.group, h = g * p.group + r % p.group;
      const int64_t row = t * p.num_heads + h;
      if (p.num_splits == 1) {
        const float denominator = softmax_denominator(p, h, row_max[j], row_sum[j]);
        const float inv = denominator > 0.0f ? out_factor / denominator : 0.0f;
#pragma unroll
        for (int i = 0; i < kCols; ++i) {
          const int c = 64 * (i / 2) + 2 * lane + i % 2;
          if (c < p.head_dim_v) p.output[row * p.head_dim_v + c] = acc[j][i] * inv;
        }
      } else {
        const int64_t part = row * p.num_splits + split;
        if (lane == 0) {
          p.part_max[part] = row_max[j];
          p.part_sum[part] = row_sum[j];
        }
#pragma unroll
        for (int i = 0; i < kCols; ++i) {
          const int c = 64 * (i / 2) + 2 * lane + i % 2;
          if (c < p.head_dim_v) p.part_acc[part * p.head_dim_v + c] = acc[j][i] * out_factor;
        }
      }
    }
  }
}

// ---- 3. Combining the splits ------------------------------------------------------------------

// One thread block per (token, head) row; it reads exactly the splits the attention kernel wrote
// for the row: those overlapping its visible keys, clamped as the attention kernel clamps them.
// A decode step of one sequence has few rows and many splits (32 keys each: 128 for 4,096 keys),
// so the splits are spread over the block's warps and each lane holds four value columns per
// 128: every split is one broadcast load of its maximum and sum and one 16-byte load per lane,
// independent of the others. (Until 2026-12-03 one warp per row walked its splits in turn, ~6
// loads a split for a 128-wide head; one sequence's decode attention on the H200 then grew with
// the keys, ~45 us at 1,024 and ~142 us at 4,096, as that walk would. Not yet run on a GPU.)
constexpr int kCombineMaxColsPerLane = 8;  // head_dim_v <= 256: two 16-byte pieces per lane

__global__ void __launch_bounds__(kThreads) combine_kernel(AttentionParams p) {
  cuda_detail::wait_for_prior_grids();
  __shared__ float warp_acc[kWarps][32 * kCombineMaxColsPerLane];
  __shared__ float warp_total[kWarps];
  const int64_t row = blockIdx.x;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t t = row / p.num_heads;
  const int32_t seq = p.token_sequences[t];
  int64_t first = 0, end = 0;
  if (seq >= 0 && seq < p.num_sequences) {
    const int64_t pos = p.positions[t];
    first = first_visible(pos, p.sliding_window);
    end = min(min(pos + 1, static_cast<int64_t>(p.sequence_lengths[seq])), p.max_blocks_per_sequence * p.block_size);
  }
  float* out = p.output + row * p.head_dim_v;
  if (first >= end) {
    for (int c = threadIdx.x; c < p.head_dim_v; c += blockDim.x) out[c] = 0.0f;
    return;
  }
  const int64_t split_first = first / p.split_size, split_last = (end - 1) / p.split_size;
  const float* row_max = p.part_max + row * p.num_splits;
  const float* row_sum = p.part_sum + row * p.num_splits;
  const float* row_acc = p.part_acc + row * p.num_splits * p.head_dim_v;

  float m = -INFINITY;
  for (int64_t s = split_first + threadIdx.x; s <= split_last; s += blockDim.x) m = fmaxf(m, row_max[s]);
  const float max_all = block_max(m);

  // Lane columns: 4 lane + 128 i + {0..3}, i < kCombineMaxColsPerLane / 4 (head_dim_v is a
  // multiple of 8, so a piece is wholly inside or outside; partials are 32-byte aligned rows).
  float total = 0.0f;
  float4 acc[kCombineMaxColsPerLane / 4];
#pragma unroll
  for (int i = 0; i < kCombineMaxColsPerLane / 4; ++i) acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int num_warps = static_cast<int>(blockDim.x / 32);
#pragma unroll 4
  for (int64_t s = split_first + warp; s <= split_last; s += num_warps) {
    const float ms = row_max[s];
    // A split without a visible key of this row (-inf) adds nothing; its partials are zeros.
    const float e = ms == -INFINITY ? 0.0f : expf(ms - max_all);
    total = fmaf(e, row_sum[s], total);
    const float4* src = reinterpret_cast<const float4*>(row_acc + s * p.head_dim_v);
#pragma unroll
    for (int i = 0; i < kCombineMaxColsPerLane / 4; ++i) {
      if (4 * (lane + 32 * i) < p.head_dim_v) {
        const float4 v = src[lane + 32 * i];
        acc[i] =
            make_float4(fmaf(e, v.x, acc[i].x), fmaf(e, v.y, acc[i].y), fmaf(e, v.z, acc[i].z), fmaf(e, v.w, acc[i].w));
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kCombineMaxColsPerLane / 4; ++i) {
    reinterpret_cast<float4*>(warp_acc[warp])[lane + 32 * i] = acc[i];
  }
  if (lane == 0) warp_total[warp] = total;  // every lane summed the same (broadcast) values
  __syncthreads();
  float all = 0.0f;
  for (int w = 0; w < num_warps; ++w) all += warp_total[w];
  all = softmax_denominator(p, row % p.num_heads, max_all, all);
  const float inv = all > 0.0f ? 1.0f / all : 0.0f;
  for (int c = threadIdx.x; c < p.head_dim_v; c += blockDim.x) {
    float value = 0.0f;
    for (int w = 0; w < num_warps; ++w) value += warp_acc[w][c];
    out[c] = value * inv;
  }
}

// ---- 4. The rotation of a rotated cache ---------------------------------------------------------

// out row = H (in row) in pieces of `size` (kv_quant.cuh's warp_hadamard), one warp per row;
// in == out is fine. Queries before the attention (keys stored rotated: (Hq).(Hk) = q.k), the
// output after it (values stored rotated: H sum w Hv = sum w v).
constexpr int kRotateWarps = 4;

__global__ void __launch_bounds__(kRotateWarps * 32)
    rotate_rows_kernel(const float* in, float* out, int64_t num_rows, int row_len, int size, float norm) {
  cuda_detail::wait_for_prior_grids();
  IWB_DYNAMIC_SHARED(float, rows_s);  // [kRotateWarps x row_len]
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  float* x = rows_s + warp * row_len;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRotateWarps + warp; r < num_rows;
       r += static_cast<int64_t>(gridDim.x) * kRotateWarps) {
    for (int i = lane; i < row_len; i += 32) x[i] = in[r * row_len + i];
    __syncwarp();
    warp_hadamard(x, row_len, size, norm, lane);
    for (int i = lane; i < row_len; i += 32) out[r * row_len + i] = x[i];
    __syncwarp();
  }
}

// ---- Host side --------------------------------------------------------------------------------

int64_t rotation_of(const PagedAttentionCudaArgs& a, bool is_key) {
  if (!a.is_rotated) return 0;
  return is_key ? kv_rotation_size(a.k_type, a.head_dim, true) : kv_rotation_size(a.v_type, a.head_dim_v, false);
}

cudaError_t launch_rotate(const float* in, float* out, int64_t num_rows, int64_t row_len, int64_t size,
                          cudaStream_t stream) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(size));  // as the CPU's hadamard_rotate
  const size_t shared = static_cast<size_t>(kRotateWarps * row_len) * sizeof(float);
  IWB_LAUNCH(rotate_rows_kernel, grid_for(num_rows, kRotateWarps, 4096), kRotateWarps * 32, shared, stream, in, out,
             num_rows, static_cast<int>(row_len), static_cast<int>(size), norm);
  return cudaGetLastError();
}

bool is_quantized(GgmlType type) { return type != GgmlType::F16; }

AttentionPlanInputs plan_inputs(const PagedAttentionCudaArgs& a) {
  return AttentionPlanInputs{a.num_tokens,   a.num_sequences, a.num_heads,
                             a.num_kv_heads, a.head_dim_v,    a.max_blocks_per_sequence * a.block_size};
}

// Halfs per key row in shared memory: lanes read rows at the same column, so a row of an odd
// number of 4-byte words puts the 32 lanes in 32 different banks.
int key_stride(int64_t head_dim) { return static_cast<int>((head_dim / 2) % 2 == 0 ? head_dim + 2 : head_dim); }

size_t shared_bytes(const PagedAttentionCudaArgs& a, int64_t rows) {
  return static_cast<size_t>(rows * a.head_dim) * sizeof(float) +
         static_cast<size_t>(kKeyTile * key_stride(a.head_dim)) * sizeof(__half) +
         static_cast<size_t>(kKeyTile * a.head_dim_v) * sizeof(__half) +
         static_cast<size_t>(rows * kKeyTile) * sizeof(float);
}

template <int kCols, int kRowsPerWarp, bool kIsF16>
cudaError_t launch_attention(const AttentionParams& params, const AttentionLaunchPlan& plan, size_t shared,
                             cudaStream_t stream) {
  // 64 or 32 rows: the plan's query tiles; fewer: a decode step's one token per sequence.
  static_assert(kWarps * kRowsPerWarp <= 64, "rows per block");
  auto* kernel = attention_kernel<kCols, kRowsPerWarp, kIsF16>;
  // Past 48 KiB (static row data included) the kernel must opt in to more shared memory.
  if (shared + 2 * 64 * sizeof(int64_t) > 48 * 1024) {
    if (const cudaError_t e =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
        e != cudaSuccess) {
      return e;
    }
  }
  const dim3 grid(static_cast<unsigned>(plan.max_tiles), static_cast<unsigned>(params.num_kv_heads),
                  static_cast<unsigned>(plan.num_splits));
  IWB_LAUNCH(kernel, grid, kThreads, shared, stream, params);
  return cudaGetLastError();
}

// The decode-sized blocks: kWarps * rows_per_warp rows (1, 2 or 4 per warp).
template <int kCols>
cudaError_t launch_decode_attention(const AttentionParams& params, const AttentionLaunchPlan& plan, size_t shared,
                                    int rows_per_warp, bool is_f16, cudaStream_t stream) {
  switch (rows_per_warp) {
    case 1:
      return is_f16 ? launch_attention<kCols, 1, true>(params, plan, shared, stream)
                    : launch_attention<kCols, 1, false>(params, plan, shared, stream);
    case 2:
      return is_f16 ? launch_attention<kCols, 2, true>(params, plan, shared, stream)
                    : launch_attention<kCols, 2, false>(params, plan, shared, stream);
    default:
      return is_f16 ? launch_attention<kCols, 4, true>(params, plan, shared, stream)
                    : launch_attention<kCols, 4, false>(params, plan, shared, stream);
  }
}

}  // namespace

AttentionLaunchPlan paged_attention_cuda_plan(const PagedAttentionCudaArgs& a) {
  return plan_paged_attention(plan_inputs(a));
}

size_t paged_attention_cuda_workspace_bytes(const PagedAttentionCudaArgs& a) {
  const size_t plan_bytes = paged_attention_cuda_plan(a).workspace_bytes;
  if (plan_bytes == 0 || rotation_of(a, true) == 0) return plan_bytes;
  // The rotated queries after the plan's regions (plan_bytes is a multiple of 256).
  return plan_bytes + attention_align_256(static_cast<size_t>(a.num_tokens * a.num_heads * a.head_dim) * sizeof(float));
}

cudaError_t paged_attention_cuda_check(const PagedAttentionCudaArgs& a) {
  if (a.q == nullptr || a.k_cache == nullptr || a.v_cache == nullptr || a.block_tables == nullptr ||
      a.sequence_lengths == nullptr || a.token_sequences == nullptr || a.positions == nullptr || a.output == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (a.num_tokens < 0 || a.num_sequences <= 0 || a.num_heads <= 0 || a.num_kv_heads <= 0 || a.num_blocks <= 0 ||
      a.block_size <= 0 || a.max_blocks_per_sequence <= 0 || a.sliding_window < 0) {
    return cudaErrorInvalidValue;
  }
  if (a.num_heads % a.num_kv_heads != 0 || a.num_kv_heads > kMaxGridYZ) return cudaErrorInvalidValue;
  if (a.head_dim <= 0 || a.head_dim % 8 != 0 || a.head_dim > 256 || a.head_dim_v <= 0 || a.head_dim_v % 8 != 0 ||
      a.head_dim_v > 256) {
    return cudaErrorInvalidValue;
  }
  if (!is_kv_cache_type(a.k_type) || !is_kv_cache_type(a.v_type)) return cudaErrorInvalidValue;
  if (kv_row_units(a.k_type, a.head_dim) == 0 || kv_row_units(a.v_type, a.head_dim_v) == 0)
    return cudaErrorInvalidValue;
  // A quantized side loads 16 values per thread, on both sides.
  if ((is_quantized(a.k_type) || is_quantized(a.v_type)) && (a.head_dim % 16 != 0 || a.head_dim_v % 16 != 0)) {
    return cudaErrorInvalidValue;
  }
  if (!is_aligned(a.k_scale, 4) || !is_aligned(a.v_scale, 4) || !is_aligned(a.sinks, 4)) return cudaErrorInvalidValue;
  if (a.num_tokens > INT32_MAX / 2) return cudaErrorInvalidValue;            // the tile planner counts in int
  if (a.num_tokens * a.num_heads > kMaxGridX) return cudaErrorInvalidValue;  // the combine's grid: a block per row
  if (!is_aligned(a.k_cache, 16) || !is_aligned(a.v_cache, 16) || !is_aligned(a.q, 8) || !is_aligned(a.output, 4)) {
    return cudaErrorInvalidValue;
  }
  if (a.num_tokens == 0) return cudaSuccess;
  const AttentionLaunchPlan plan = paged_attention_cuda_plan(a);
  if (plan.workspace_bytes == 0 || plan.num_splits > kMaxGridYZ) return cudaErrorInvalidValue;  // group > 64, sizes
  if (a.workspace == nullptr || a.workspace_bytes < paged_attention_cuda_workspace_bytes(a) ||
      !is_aligned(a.workspace, 256)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t paged_attention_cuda(const PagedAttentionCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = paged_attention_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_tokens == 0) return cudaSuccess;
  const AttentionLaunchPlan plan = paged_attention_cuda_plan(a);
  auto* workspace = static_cast<unsigned char*>(a.workspace);
  AttentionParams params{};
  params.q = a.q;
  params.k_cache = a.k_cache;
  params.v_cache = a.v_cache;
  params.num_blocks = a.num_blocks;
  params.block_size = a.block_size;
  params.block_tables = a.block_tables;
  params.max_blocks_per_sequence = a.max_blocks_per_sequence;
  params.sequence_lengths = a.sequence_lengths;
  params.num_sequences = a.num_sequences;
  params.token_sequences = a.token_sequences;
  params.positions = a.positions;
  params.num_tokens = a.num_tokens;
  params.num_heads = a.num_heads;
  params.num_kv_heads = a.num_kv_heads;
  params.group = a.num_heads / a.num_kv_heads;
  params.head_dim = static_cast<int>(a.head_dim);
  params.head_dim_v = static_cast<int>(a.head_dim_v);
  params.k_stride = key_stride(a.head_dim);
  params.k_row_units = kv_row_units(a.k_type, a.num_kv_heads * a.head_dim);
  params.v_row_units = kv_row_units(a.v_type, a.num_kv_heads * a.head_dim_v);
  params.k_head_units = kv_row_units(a.k_type, a.head_dim);
  params.v_head_units = kv_row_units(a.v_type, a.head_dim_v);
  params.k_code = kv_code(a.k_type);
  params.v_code = kv_code(a.v_type);
  params.k_scale = a.k_type == GgmlType::F8_E4M3 ? a.k_scale : nullptr;
  params.v_scale = a.v_type == GgmlType::F8_E4M3 ? a.v_scale : nullptr;
  params.scale = a.scale;
  params.softcap = a.softcap;
  params.sinks = a.sinks;
  params.sliding_window = a.sliding_window;
  params.output = a.output;
  params.tiles = reinterpret_cast<const int32_t*>(workspace + plan.tiles_offset);
  params.tile_tokens = plan.tile_tokens;
  params.split_size = plan.split_size;
  params.num_splits = plan.num_splits;
  if (plan.num_splits > 1) {
    params.part_max = reinterpret_cast<float*>(workspace + plan.max_offset);
    params.part_sum = reinterpret_cast<float*>(workspace + plan.sum_offset);
    params.part_acc = reinterpret_cast<float*>(workspace + plan.acc_offset);
  }

  if (a.num_tokens == a.num_sequences) {
    // Every sequence has exactly one token (each has at least one): token i is tile i, and a
    // decode step saves the planning launch in every layer.
    params.tiles = nullptr;
  } else {
    IWB_LAUNCH(plan_tiles_kernel, 1, kPlanThreads, 0, stream, a.token_sequences, static_cast<int>(a.num_tokens),
               static_cast<int>(plan.tile_tokens), reinterpret_cast<int32_t*>(workspace + plan.tiles_offset),
               static_cast<int>(plan.max_tiles));
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }

  // Keys stored rotated: the attention reads rotated queries from the workspace.
  if (const int64_t rot_k = rotation_of(a, true); rot_k > 0) {
    auto* q_rotated = reinterpret_cast<float*>(workspace + plan.workspace_bytes);
    if (const cudaError_t e = launch_rotate(a.q, q_rotated, a.num_tokens * a.num_heads, a.head_dim, rot_k, stream);
        e != cudaSuccess) {
      return e;
    }
    params.q = q_rotated;
  }

  const size_t shared = shared_bytes(a, plan.rows_per_block);
  cudaError_t e;
  const bool is_f16 = !is_quantized(a.k_type) && !is_quantized(a.v_type);
  // A decode step (one token per sequence) has only its group of query heads per block: blocks
  // sized for them, not for the plan's 64-row prefill tiles, hold a few registers and a little
  // shared memory, so many more fit on each SM to keep the cache reads in flight.
  const int64_t group = a.num_heads / a.num_kv_heads;
  const bool is_decode = a.num_tokens == a.num_sequences;
  const int decode_rows_per_warp = group <= kWarps ? 1 : group <= 2 * kWarps ? 2 : group <= 4 * kWarps ? 4 : 0;
  // Tensor cores when some sequence brings several queries (a prefill chunk, draft tokens); a
  // pure decode batch is bound by reading the cache and keeps the f32 kernel.
  if (a.allow_tensor_cores && a.num_tokens > a.num_sequences && attention_tc_supports(a.head_dim, a.head_dim_v)) {
    e = attention_mma_supports(a.head_dim, a.head_dim_v, plan.rows_per_block)
            ? launch_attention_mma(params, plan, is_f16, stream)
            : launch_attention_tc(params, plan, is_f16, stream);
  } else if (is_decode && decode_rows_per_warp > 0 && a.head_dim_v <= 128) {
    const size_t decode_shared = shared_bytes(a, kWarps * decode_rows_per_warp);
    e = a.head_dim_v <= 64
            ? launch_decode_attention<2>(params, plan, decode_shared, decode_rows_per_warp, is_f16, stream)
            : launch_decode_attention<4>(params, plan, decode_shared, decode_rows_per_warp, is_f16, stream);
  } else if (a.head_dim_v <= 64) {
    e = is_f16 ? launch_attention<2, 16, true>(params, plan, shared, stream)
               : launch_attention<2, 16, false>(params, plan, shared, stream);
  } else if (a.head_dim_v <= 128) {
    e = is_f16 ? launch_attention<4, 16, true>(params, plan, shared, stream)
               : launch_attention<4, 16, false>(params, plan, shared, stream);
  } else {
    e = is_f16 ? launch_attention<8, 8, true>(params, plan, shared, stream)
               : launch_attention<8, 8, false>(params, plan, shared, stream);
  }
  if (e != cudaSuccess) return e;
  const int64_t rows = a.num_tokens * a.num_heads;
  if (plan.num_splits > 1) {
    IWB_LAUNCH(combine_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, params);
    if (const cudaError_t e2 = cudaGetLastError(); e2 != cudaSuccess) return e2;
  }
  // Values stored rotated: the weighted sum is rotated back.
  if (const int64_t rot_v = rotation_of(a, false); rot_v > 0)
    return launch_rotate(a.output, a.output, rows, a.head_dim_v, rot_v, stream);
  return cudaSuccess;
}

}  // namespace iwb
