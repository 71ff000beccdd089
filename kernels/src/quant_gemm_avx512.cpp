// AVX-512 VNNI prefill GEMM for the 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4), for calls
// with many tokens. A tile of 16 weight rows is repacked once per call so that 32-bit lane i of
// a vector holds 4 consecutive unsigned weights of row i: one vpdpbusd against 4 broadcast
// activation bytes then advances all 16 rows' dot products, and each block's scales apply as
// one vector of 16 row scales. No horizontal sums: lane i is output row i. The repacking (an
// 8x8 transpose per half) is paid once per 16 rows and reused by every token of the call.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant_avx512_common.h"

#include <algorithm>

namespace iwb::detail {
namespace {

using namespace avx512;

// The packed form of 16 rows: per block, 8 vectors of weights then 16 scales (and 16 "+ m").
struct Packed {
  const uint8_t* weights;  // [blocks x 8 x 64 bytes]
  const float* d;          // [blocks x 16]
  const float* m;          // [blocks x 16] (Q4_1/Q5_1)
};

template <typename Block>
IWB_AVX512 void pack_rows(const uint8_t* weight, size_t stride, int num_rows, int64_t nb, uint8_t* buffer, Packed* p) {
  const Block* rows[16];
  for (int i = 0; i < 16; ++i) rows[i] = reinterpret_cast<const Block*>(weight + std::min(i, num_rows - 1) * stride);
  auto* w = buffer;
  auto* d = reinterpret_cast<float*>(buffer + nb * 512);
  auto* m = d + nb * 16;
  for (int64_t b = 0; b < nb; ++b) {
    __m512i z[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(unpack_one(rows[i][b])), unpack_one(rows[i + 8][b]), 1);
    transpose_dword_halves(z);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) _mm512_store_si512(w + (b * 8 + k) * 64, z[k]);
    // One by one, not block_scales' gathers (faster on Intel, but AMD Zen 4's gathers are slow
    // and this is Zen 4/5's prompt GEMM; unmeasured there).
    for (int i = 0; i < 16; ++i) d[b * 16 + i] = block_scale(rows[i][b]);
    if constexpr (Legacy<Block>::kHasMin) {
      for (int i = 0; i < 16; ++i) m[b * 16 + i] = half(rows[i][b].m);
    }
  }
  *p = {w, d, m};
}

// acc[t] (lane i = row i) += dot(row i, token t) for T tokens.
template <typename Block, int T>
IWB_AVX512 void gemm_tokens(const Packed& p, int64_t nb, const BlockQ8A* const* a, __m512* acc) {
  using L = Legacy<Block>;
  for (int64_t b = 0; b < nb; ++b) {
    __m512i w[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) w[k] = _mm512_load_si512(p.weights + (b * 8 + k) * 64);
    const __m512 d = _mm512_load_ps(p.d + b * 16);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& x = a[t][b];
      // Two chains of four: vpdpbusd's latency would otherwise bound the loop.
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 8; k += 2) {
        s0 = _mm512_dpbusd_epi32(
            s0, w[k], _mm512_set1_epi32(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(x.qs) + 4 * k))));
        s1 = _mm512_dpbusd_epi32(
            s1, w[k + 1],
            _mm512_set1_epi32(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(x.qs) + 4 * k + 4))));
      }
      acc[t] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), _mm512_mul_ps(d, _mm512_set1_ps(x.d)), acc[t]);
      if constexpr (L::kOffset != 0)
        acc[t] = _mm512_fmadd_ps(d, _mm512_set1_ps(-static_cast<float>(L::kOffset) * x.s), acc[t]);
      if constexpr (L::kHasMin) acc[t] = _mm512_fmadd_ps(_mm512_load_ps(p.m + b * 16), _mm512_set1_ps(x.s), acc[t]);
    }
  }
}

// T tokens from t0 on: acc starts at the bias, lanes past num_rows are not stored.
template <typename Block, int T>
IWB_AVX512 void gemm_group(const Packed& p, int64_t nb, const uint8_t* activation, size_t activation_stride, int64_t t0,
                           __m512 bias, __mmask16 rows_mask, float* out, int64_t out_stride) {
  const BlockQ8A* a[T];
  __m512 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    a[t] = reinterpret_cast<const BlockQ8A*>(activation + (t0 + t) * activation_stride);
    acc[t] = bias;
  }
  gemm_tokens<Block, T>(p, nb, a, acc);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(out + (t0 + t) * out_stride, rows_mask, acc[t]);
}

template <typename Block>
IWB_AVX512 void gemm_legacy(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                            size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                            int64_t out_stride, uint8_t* buffer) {
  const int64_t nb = n / kQK8_0;
  Packed p;
  pack_rows<Block>(weight, weight_stride, num_rows, nb, buffer, &p);
  const __mmask16 rows_mask = static_cast<__mmask16>((1u << num_rows) - 1);
  const __m512 b = bias ? _mm512_maskz_loadu_ps(rows_mask, bias) : _mm512_setzero_ps();
  int64_t t0 = 0;
  for (; t0 + 4 <= num_tokens; t0 += 4)
    gemm_group<Block, 4>(p, nb, activation, activation_stride, t0, b, rows_mask, out, out_stride);
  for (; t0 < num_tokens; ++t0)
    gemm_group<Block, 1>(p, nb, activation, activation_stride, t0, b, rows_mask, out, out_stride);
}

}  // namespace

// The largest of the AVX-512, AMX and AVX2 kernels' buffers (the type's DotKernels use one of them).
size_t quant_gemm_buffer_bytes(GgmlType type, int64_t n) {
  if (!ggml_type_traits(type).is_quantized) {
    return std::max({float_gemm_buffer_bytes(n), float_gemm_amx_buffer_bytes(n), float_gemm_avx2_buffer_bytes(n)});
  }
  const size_t avx2 = quant_gemm_avx2_buffer_bytes(type, n);
  if (ggml_type_traits(type).block_size == kQK_K) {
    return std::max({quant_gemm_kquant_buffer_bytes(n), quant_gemm_kquant_amx_buffer_bytes(n), avx2});
  }
  return std::max(
      {static_cast<size_t>(n / kQK8_0) * (512 + 2 * 16 * sizeof(float)), quant_gemm_amx_buffer_bytes(n), avx2});
}

QuantGemmFn select_quant_gemm_avx512(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return gemm_legacy<BlockQ4_0>;
    case GgmlType::Q4_1: return gemm_legacy<BlockQ4_1>;
    case GgmlType::Q5_0: return gemm_legacy<BlockQ5_0>;
    case GgmlType::Q5_1: return gemm_legacy<BlockQ5_1>;
    case GgmlType::Q8_0: return gemm_legacy<BlockQ8_0>;
    case GgmlType::MXFP4: return gemm_legacy<BlockMxfp4>;
    default: return nullptr;
  }
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
size_t quant_gemm_buffer_bytes(GgmlType, int64_t) { return 0; }
QuantGemmFn select_quant_gemm_avx512(GgmlType) { return nullptr; }
}  // namespace iwb::detail

#endif
