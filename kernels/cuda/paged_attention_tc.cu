// Tensor-core paged attention for tiles of many queries (prefill chunks): the same work split as
// attention_kernel in paged_attention.cu (block = query tile x KV head x key split, rows =
// token x query head of the group), with Q K^T and P V as 16x16x16 f16 WMMA products and f32
// accumulation. Each warp owns 16 rows: scores go to shared memory, the warp's online softmax
// turns them into f16 weights P, and the output rows live in shared memory (f32) so the softmax
// can rescale them between key tiles. Q and P are rounded to f16, as llama.cpp's flash attention
// does; keys and values are f16 already (or expanded to f16 from a quantized cache).
#include "paged_attention_common.cuh"

#include <mma.h>

namespace iwb::cuda_detail {
namespace {

using namespace nvcuda;

constexpr int kTcKeys = 64;   // keys per shared-memory tile: four 16-key fragments
constexpr int kHalfPad = 8;   // halfs of padding per f16 row: rows stay 16-byte aligned and shift banks
constexpr int kFloatPad = 4;  // floats of padding per f32 row

// Byte offsets of the dynamic shared memory regions (each 128-byte aligned; WMMA pointers must
// be 32-byte aligned, which 16-row steps of these strides keep) and the row strides.
struct TcLayout {
  int q_ld, k_ld, v_ld, s_ld, p_ld, o_ld;
  int q, k, v, s, p, o, factor, pos, first, total;
};

__host__ __device__ inline int align_128(int bytes) { return (bytes + 127) / 128 * 128; }

__host__ __device__ inline TcLayout tc_layout(int rows, int head_dim, int head_dim_v) {
  TcLayout l{};
  l.q_ld = head_dim + kHalfPad;
  l.k_ld = head_dim + kHalfPad;
  l.v_ld = head_dim_v + kHalfPad;
  l.s_ld = kTcKeys + kFloatPad;
  l.p_ld = kTcKeys + kHalfPad;
  l.o_ld = head_dim_v + kFloatPad;
  int offset = 0;
  l.q = offset;
  offset = align_128(offset + rows * l.q_ld * 2);
  l.k = offset;
  offset = align_128(offset + kTcKeys * l.k_ld * 2);
  l.v = offset;
  offset = align_128(offset + kTcKeys * l.v_ld * 2);
  l.s = offset;
  offset = align_128(offset + rows * l.s_ld * 4);
  l.p = offset;
  offset = align_128(offset + rows * l.p_ld * 2);
  l.o = offset;
  offset = align_128(offset + rows * l.o_ld * 4);
  l.factor = offset;
  offset = align_128(offset + rows * 4);
  l.pos = offset;
  offset = align_128(offset + rows * 8);
  l.first = offset;
  offset = align_128(offset + rows * 8);
  l.total = offset;
  return l;
}

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

template <int kWarpsTc, bool kIsF16>
__global__ void __launch_bounds__(kWarpsTc * 32) attention_tc_kernel(AttentionParams p) {
  cuda_detail::wait_for_prior_grids();
  constexpr int kRows = kWarpsTc * 16;
  const int64_t tile_first = first_token_of_tile(p);
  if (tile_first < 0) return;
  const int64_t g = blockIdx.y, split = blockIdx.z;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const TileKeys tk = tile_keys(p, tile_first, split);
  const int32_t seq = tk.seq;
  const bool is_seq_valid = tk.is_seq_valid;
  const int num_active_rows = tk.num_active_rows;
  const int64_t key_begin = tk.key_begin, key_end = tk.key_end;
  if (p.num_splits > 1 && key_begin >= key_end) return;

  IWB_DYNAMIC_SHARED(unsigned char, shared_dynamic);
  // WMMA pointers must be 32-byte aligned: do not rely on where the dynamic window starts (the
  // launch asks for 128 bytes of slack).
  unsigned char* shared_raw =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(shared_dynamic) + 127) & ~uintptr_t{127});
  const TcLayout L = tc_layout(kRows, p.head_dim, p.head_dim_v);
  __half* q_s = reinterpret_cast<__half*>(shared_raw + L.q);
  __half* k_s = reinterpret_cast<__half*>(shared_raw + L.k);
  __half* v_s = reinterpret_cast<__half*>(shared_raw + L.v);
  float* s_s = reinterpret_cast<float*>(shared_raw + L.s);
  __half* p_s = reinterpret_cast<__half*>(shared_raw + L.p);
  float* o_s = reinterpret_cast<float*>(shared_raw + L.o);
  float* factor_s = reinterpret_cast<float*>(shared_raw + L.factor);
  int64_t* row_pos = reinterpret_cast<int64_t*>(shared_raw + L.pos);
  int64_t* row_first = reinterpret_cast<int64_t*>(shared_raw + L.first);

  for (int r = threadIdx.x; r < kRows; r += blockDim.x) {
    const bool is_active = r < num_active_rows;
    const int64_t pos = is_active ? p.positions[tile_first + r / p.group] : -1;
    row_pos[r] = pos;
    row_first[r] = is_active ? first_visible(pos, p.sliding_window) : 0;
  }
  const float q_factor = query_factor(p);
  for (int idx = threadIdx.x; idx < kRows * p.head_dim; idx += blockDim.x) {
    const int r = idx / p.head_dim, c = idx % p.head_dim;
    float value = 0.0f;
    if (r < num_active_rows) {
      const int64_t t = tile_first + r / p.group, h = g * p.group + r % p.group;
      value = p.q[(t * p.num_heads + h) * p.head_dim + c] * q_factor;
    }
    q_s[r * L.q_ld + c] = __float2half(value);
  }
  for (int idx = threadIdx.x; idx < kRows * p.head_dim_v; idx += blockDim.x) {
    o_s[(idx / p.head_dim_v) * L.o_ld + idx % p.head_dim_v] = 0.0f;
  }
  // Output rows are read back at the end even when no key tile runs (an empty range): make the
  // zeros (and row data) visible to every warp first.
  __syncthreads();

  const int row0 = warp * 16;
  const int warp_rows = max(0, min(16, num_active_rows - row0));
  float row_max[16], row_sum[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    row_max[j] = -INFINITY;
    row_sum[j] = 0.0f;
  }
  const int32_t* table = p.block_tables + (is_seq_valid ? seq : 0) * p.max_blocks_per_sequence;

  for (int64_t key0 = key_begin; key0 < key_end; key0 += kTcKeys) {
    __syncthreads();  // the previous tile's keys and values are no longer read
    load_kv_tile<kIsF16, kTcKeys>(p, table, g, key0, key_end, k_s, L.k_ld, v_s, L.v_ld);
    __syncthreads();
    if (warp_rows == 0) continue;  // warp-uniform: WMMA below needs all 32 lanes

    // S = Q K^T for this warp's 16 rows and the 64 keys (K row-major is K^T column-major).
    for (int nb = 0; nb < kTcKeys / 16; ++nb) {
      FragAcc acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kb = 0; kb < p.head_dim / 16; ++kb) {
        FragA a;
        FragBCol b;
        wmma::load_matrix_sync(a, q_s + row0 * L.q_ld + kb * 16, L.q_ld);
        wmma::load_matrix_sync(b, k_s + nb * 16 * L.k_ld + kb * 16, L.k_ld);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(s_s + row0 * L.s_ld + nb * 16, acc, L.s_ld, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax, row by row: lane holds keys lane and lane + 32.
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int r = row0 + j;
      if (j >= warp_rows) {  // padding rows weigh nothing
        p_s[r * L.p_ld + lane] = __float2half(0.0f);
        p_s[r * L.p_ld + lane + 32] = __float2half(0.0f);
        continue;
      }
      float s[2];
      bool is_visible[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t key = key0 + lane + 32 * h;
        is_visible[h] = key < key_end && key <= row_pos[r] && key >= row_first[r];
        float x = s_s[r * L.s_ld + lane + 32 * h];
        if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
        s[h] = is_visible[h] ? x : -INFINITY;
      }
      const float new_max = fmaxf(row_max[j], warp_max(fmaxf(s[0], s[1])));
      float weight[2] = {0.0f, 0.0f}, factor = 1.0f;
      if (new_max != -INFINITY) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // The sum counts the f16 weights the product uses.
          weight[h] = is_visible[h] ? __half2float(__float2half(expf(s[h] - new_max))) : 0.0f;
        }
        factor = expf(row_max[j] - new_max);
      }
      row_sum[j] = row_sum[j] * factor + warp_sum(weight[0] + weight[1]);
      row_max[j] = new_max;
      p_s[r * L.p_ld + lane] = __float2half(weight[0]);
      p_s[r * L.p_ld + lane + 32] = __float2half(weight[1]);
      if (lane == 0) factor_s[r] = factor;
    }
    __syncwarp();
    for (int idx = lane; idx < warp_rows * p.head_dim_v; idx += 32) {
      const int rr = idx / p.head_dim_v;
      o_s[(row0 + rr) * L.o_ld + idx % p.head_dim_v] *= factor_s[row0 + rr];
    }
    __syncwarp();

    // O += P V, the accumulators passing through shared memory (rescaled above).
    for (int nb = 0; nb < p.head_dim_v / 16; ++nb) {
      FragAcc acc;
      wmma::load_matrix_sync(acc, o_s + row0 * L.o_ld + nb * 16, L.o_ld, wmma::mem_row_major);
      for (int kb = 0; kb < kTcKeys / 16; ++kb) {
        FragA a;
        FragBRow b;
        wmma::load_matrix_sync(a, p_s + row0 * L.p_ld + kb * 16, L.p_ld);
        wmma::load_matrix_sync(b, v_s + kb * 16 * L.v_ld + nb * 16, L.v_ld);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(o_s + row0 * L.o_ld + nb * 16, acc, L.o_ld, wmma::mem_row_major);
    }
    __syncwarp();
  }

  const float out_factor = output_factor(p);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    if (j < warp_rows) {
      const int r = row0 + j;
      const int64_t t = tile_first + r / p.group, h = g * p.group + r % p.group;
      const int64_t row = t * p.num_heads + h;
      if (p.num_splits == 1) {
        const float denominator = softmax_denominator(p, h, row_max[j], row_sum[j]);
        const float inv = denominator > 0.0f ? out_factor / denominator : 0.0f;
        for (int c = lane; c < p.head_dim_v; c += 32) p.output[row * p.head_dim_v + c] = o_s[r * L.o_ld + c] * inv;
      } else {
        const int64_t part = row * p.num_splits + split;
        if (lane == 0) {
          p.part_max[part] = row_max[j];
          p.part_sum[part] = row_sum[j];
        }
        for (int c = lane; c < p.head_dim_v; c += 32) {
          p.part_acc[part * p.head_dim_v + c] = o_s[r * L.o_ld + c] * out_factor;
        }
      }
    }
  }
}

template <int kWarpsTc, bool kIsF16>
cudaError_t launch_tc(const AttentionParams& params, const AttentionLaunchPlan& plan, cudaStream_t stream) {
  const int shared = tc_layout(kWarpsTc * 16, params.head_dim, params.head_dim_v).total + 128;  // + alignment slack
  auto* kernel = attention_tc_kernel<kWarpsTc, kIsF16>;
  if (shared > 48 * 1024) {
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
        e != cudaSuccess) {
      return e;
    }
  }
  const dim3 grid(static_cast<unsigned>(plan.max_tiles), static_cast<unsigned>(params.num_kv_heads),
                  static_cast<unsigned>(plan.num_splits));
  IWB_LAUNCH(kernel, grid, kWarpsTc * 32, static_cast<size_t>(shared), stream, params);
  return cudaGetLastError();
}

}  // namespace

bool attention_tc_supports(int64_t head_dim, int64_t head_dim_v) {
  return head_dim % 16 == 0 && head_dim_v % 16 == 0 && head_dim <= 256 && head_dim_v <= 256;
}

cudaError_t launch_attention_tc(const AttentionParams& params, const AttentionLaunchPlan& plan, bool is_f16,
                                cudaStream_t stream) {
  // The plan's tile size assumes rows_per_block rows: 64 (4 warps) or 32 (2 warps).
  if (plan.rows_per_block == 64)
    return is_f16 ? launch_tc<4, true>(params, plan, stream) : launch_tc<4, false>(params, plan, stream);
  if (plan.rows_per_block == 32)
    return is_f16 ? launch_tc<2, true>(params, plan, stream) : launch_tc<2, false>(params, plan, stream);
  return cudaErrorInvalidValue;
}

}  // namespace iwb::cuda_detail
