// AVX-512 VNNI register-blocked tiles for prefill: 4 weight rows x up to 4 tokens. Each weight
// block is unpacked into registers once and multiplied with every token of the tile, so the
// unpacking (the dominant cost of a matrix-vector product) is shared by four tokens.
// K-quants keep 16 integer accumulators per super-block and fold them, with the scales, into
// one vector of 16 (row, token) sums; the 32-element types accumulate in f32 per block pair.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant_avx512_common.h"

#include <algorithm>

namespace iwb::detail {
namespace {

using namespace avx512;

// Lane i of the result is the sum of the 16 lanes of v[i] (i = row * 4 + token).
IWB_AVX512 inline __m512i reduce_16_epi32(const __m512i v[16]) {
  __m512i s[8];
  #pragma GCC unroll 16
  for (int k = 0; k < 8; ++k) {
    s[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  }
  __m512i u[4];
  #pragma GCC unroll 16
  for (int m = 0; m < 4; ++m) {
    u[m] = _mm512_add_epi32(_mm512_unpacklo_epi64(s[2 * m], s[2 * m + 1]), _mm512_unpackhi_epi64(s[2 * m], s[2 * m + 1]));
  }
  // u[m] holds, per 128-bit lane, partial sums of v[4m..4m+3]; add the four lanes up.
  const __m512i y01 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                       _mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512i y23 = _mm512_add_epi32(_mm512_shuffle_i32x4(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                       _mm512_shuffle_i32x4(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(y01, y23, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i32x4(y01, y23, _MM_SHUFFLE(3, 1, 3, 1)));
}

IWB_AVX512 inline __m512 reduce_16_ps(const __m512 v[16]) {
  __m512 s[8];
  #pragma GCC unroll 16
  for (int k = 0; k < 8; ++k) s[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
  __m512 u[4];
  #pragma GCC unroll 16
  for (int m = 0; m < 4; ++m) {
    const __m512d a = _mm512_castps_pd(s[2 * m]), b = _mm512_castps_pd(s[2 * m + 1]);
    u[m] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 y01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 y23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y01, y23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(y01, y23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane r * 4 + t of the product of the per-row values (lanes 0..3 of rows) and the per-token
// values (lanes 0..3 of tokens): the scale of every (row, token) pair of a tile.
IWB_AVX512 inline __m512 outer_4x4(__m128 rows, __m128 tokens) {
  const __m512 r = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                         _mm512_castps128_ps512(rows));
  return _mm512_mul_ps(r, _mm512_broadcast_f32x4(tokens));
}

// Per-token sums of the 8 sub-blocks of 32 (bsums pairs) as 16-bit values, transposed so
// that x[i] holds pair i (sub-blocks 2i and 2i+1) of tokens 0..3 in its four 32-bit lanes.
template <int T>
IWB_AVX512 inline void token_subblock_sums(const BlockQ8_K* const* a, int64_t b, __m512i x[4]) {
  __m128i s[4];
  #pragma GCC unroll 16
  for (int t = 0; t < 4; ++t) {
    s[t] = t < T ? _mm256_cvtepi32_epi16(_mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums)),
                                                           _mm256_set1_epi16(1)))
                 : _mm_setzero_si128();
  }
  const __m128i t01lo = _mm_unpacklo_epi32(s[0], s[1]), t01hi = _mm_unpackhi_epi32(s[0], s[1]);
  const __m128i t23lo = _mm_unpacklo_epi32(s[2], s[3]), t23hi = _mm_unpackhi_epi32(s[2], s[3]);
  x[0] = _mm512_broadcast_i32x4(_mm_unpacklo_epi64(t01lo, t23lo));
  x[1] = _mm512_broadcast_i32x4(_mm_unpackhi_epi64(t01lo, t23lo));
  x[2] = _mm512_broadcast_i32x4(_mm_unpacklo_epi64(t01hi, t23hi));
  x[3] = _mm512_broadcast_i32x4(_mm_unpackhi_epi64(t01hi, t23hi));
}

template <int T>
IWB_AVX512 inline __m128 token_scales(const BlockQ8_K* const* a, int64_t b) {
  alignas(16) float d[4] = {0, 0, 0, 0};
  #pragma GCC unroll 16
  for (int t = 0; t < T; ++t) d[t] = a[t][b].d;
  return _mm_load_ps(d);
}

// ---- Q4_K / Q5_K ----

template <typename Block, int T>
IWB_AVX512 void tile_k4(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                        size_t activation_stride, int64_t n, float* out) {
  constexpr bool kHasHigh = std::is_same_v<Block, BlockQ5_K>;
  const Block* w[4];
  #pragma GCC unroll 16
  for (int r = 0; r < 4; ++r) w[r] = reinterpret_cast<const Block*>(weight + std::min(r, num_rows - 1) * weight_stride);
  const BlockQ8_K* a[4];
  #pragma GCC unroll 16
  for (int t = 0; t < 4; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(activation + std::min(t, T - 1) * activation_stride);
  const __m512i nibble = _mm512_set1_epi8(0x0F), shift = halves_epi16(0, 4);
  __m512 result = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    alignas(64) int16_t scales[4][32];
    __m128i mins[4];
    #pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      uint64_t sc, m;
      unpack_k4_scales(w[r][b].scales, &sc, &m);
      _mm512_store_si512(scales[r], _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc)))));
      mins[r] = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m)));
    }
    __m512i acc[16];
    #pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_si512();
    #pragma GCC unroll 16
    for (int c = 0; c < 4; ++c) {
      __m512i av[T];
      #pragma GCC unroll 16
      for (int t = 0; t < T; ++t) av[t] = _mm512_loadu_si512(a[t][b].qs + 64 * c);
      const __m512i scale_index = halves_epi16(2 * c, 2 * c + 1);
      #pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) {
        __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][b].qs + 32 * c)));
        q = _mm512_and_si512(_mm512_srlv_epi16(q, shift), nibble);
        if constexpr (kHasHigh) {
          const __m512i high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][b].qh)));
          const __m512i bit = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(1 << (2 * c)))),
                                                 _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1))), 1);
          q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(high, bit), q, _mm512_set1_epi8(0x10));
        }
        const __m512i sv = _mm512_permutexvar_epi16(scale_index, _mm512_load_si512(scales[r]));
        #pragma GCC unroll 16
        for (int t = 0; t < T; ++t) acc[4 * r + t] = _mm512_dpwssd_epi32(acc[4 * r + t], _mm512_maddubs_epi16(q, av[t]), sv);
      }
    }
    const __m512i sums = reduce_16_epi32(acc);
    // Mins: lane (r, t) = sum_j m_rj * (sub-block j sum of token t), two j per vpdpwssd.
    __m512i pairs[4];
    token_subblock_sums<T>(a, b, pairs);
    const __m512i row_mins = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set_m128i(mins[1], mins[0])), _mm256_set_m128i(mins[3], mins[2]), 1);
    __m512i min_sums = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi32(row_mins, _MM_PERM_AAAA), pairs[0]);
    min_sums = _mm512_dpwssd_epi32(min_sums, _mm512_shuffle_epi32(row_mins, _MM_PERM_BBBB), pairs[1]);
    min_sums = _mm512_dpwssd_epi32(min_sums, _mm512_shuffle_epi32(row_mins, _MM_PERM_CCCC), pairs[2]);
    min_sums = _mm512_dpwssd_epi32(min_sums, _mm512_shuffle_epi32(row_mins, _MM_PERM_DDDD), pairs[3]);
    // d of each row in lanes 0..3, dmin in 4..7.
    const __m256 row_dd = _mm256_cvtph_ps(_mm_setr_epi16(
        static_cast<short>(w[0][b].d), static_cast<short>(w[1][b].d), static_cast<short>(w[2][b].d), static_cast<short>(w[3][b].d),
        static_cast<short>(w[0][b].dmin), static_cast<short>(w[1][b].dmin), static_cast<short>(w[2][b].dmin),
        static_cast<short>(w[3][b].dmin)));
    const __m128 tokens = token_scales<T>(a, b);
    result = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), outer_4x4(_mm256_castps256_ps128(row_dd), tokens), result);
    result = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_sums), outer_4x4(_mm256_extractf128_ps(row_dd, 1), tokens), result);
  }
  _mm512_storeu_ps(out, result);
}

// ---- Q6_K ----

template <int T>
IWB_AVX512 void tile_q6_k(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                          size_t activation_stride, int64_t n, float* out) {
  const BlockQ6_K* w[4];
  #pragma GCC unroll 16
  for (int r = 0; r < 4; ++r) w[r] = reinterpret_cast<const BlockQ6_K*>(weight + std::min(r, num_rows - 1) * weight_stride);
  const BlockQ8_K* a[4];
  #pragma GCC unroll 16
  for (int t = 0; t < 4; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(activation + std::min(t, T - 1) * activation_stride);
  const __m512i nibble = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  __m512 result = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    alignas(64) int16_t scales[4][32];
    __m512i acc[16];
    #pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[r][b].scales)));
      _mm512_store_si512(scales[r], _mm512_castsi256_si512(sc16));
      // The stored quants are q + 32: start each sum at -32 * sum(scale * bsum).
      const __m256i neg = _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32));
      #pragma GCC unroll 16
      for (int t = 0; t < 4; ++t) {
        acc[4 * r + t] = _mm512_zextsi256_si512(
            _mm256_madd_epi16(neg, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums))));
      }
    }
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      #pragma GCC unroll 16
      for (int half_run = 0; half_run < 2; ++half_run) {  // runs 0|1 (low nibbles), then 2|3 (high)
        __m512i av[T];
        #pragma GCC unroll 16
        for (int t = 0; t < T; ++t) av[t] = _mm512_loadu_si512(a[t][b].qs + 128 * h + 64 * half_run);
        const __m512i index = quarter_indices(8 * h + 4 * half_run);
        #pragma GCC unroll 16
        for (int r = 0; r < 4; ++r) {
          const __m512i ql = _mm512_loadu_si512(w[r][b].ql + 64 * h);
          const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][b].qh + 32 * h)));
          const __m512i run = half_run == 0
              ? _mm512_or_si512(_mm512_and_si512(ql, nibble), _mm512_and_si512(_mm512_sllv_epi16(qh, halves_epi16(4, 2)), top))
              : _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nibble),
                                _mm512_and_si512(_mm512_srlv_epi16(qh, halves_epi16(0, 2)), top));
          const __m512i sv = _mm512_permutexvar_epi16(index, _mm512_load_si512(scales[r]));
          #pragma GCC unroll 16
          for (int t = 0; t < T; ++t) acc[4 * r + t] = _mm512_dpwssd_epi32(acc[4 * r + t], _mm512_maddubs_epi16(run, av[t]), sv);
        }
      }
    }
    const __m512i sums = reduce_16_epi32(acc);
    const __m128 row_d = _mm_cvtph_ps(_mm_setr_epi16(static_cast<short>(w[0][b].d), static_cast<short>(w[1][b].d),
                                                     static_cast<short>(w[2][b].d), static_cast<short>(w[3][b].d), 0, 0, 0, 0));
    result = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), outer_4x4(row_d, token_scales<T>(a, b)), result);
  }
  _mm512_storeu_ps(out, result);
}

// ---- 32-element types ----

template <typename Block, int T>
IWB_AVX512 void tile_legacy(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                            size_t activation_stride, int64_t n, float* out) {
  using L = Legacy<Block>;
  const Block* w[4];
  #pragma GCC unroll 16
  for (int r = 0; r < 4; ++r) w[r] = reinterpret_cast<const Block*>(weight + std::min(r, num_rows - 1) * weight_stride);
  const BlockQ8A* a[4];
  #pragma GCC unroll 16
  for (int t = 0; t < 4; ++t) a[t] = reinterpret_cast<const BlockQ8A*>(activation + std::min(t, T - 1) * activation_stride);
  const int64_t nb = n / kQK8_0;
  __m512 acc[16];
  #pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    // A lone last block rides in the low half; the high half multiplies zeros.
    const bool is_pair = b + 1 < nb;
    __m512i av[T], start[T];
    __m512 token_d[T], token_s[T];
    #pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs));
      const __m256i hi = is_pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b + 1].qs)) : _mm256_setzero_si256();
      av[t] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      const float d1 = is_pair ? a[t][b + 1].d : 0.0f;
      token_d[t] = _mm512_insertf32x8(_mm512_set1_ps(a[t][b].d), _mm256_set1_ps(d1), 1);
      // The weights' offset in integers: every row's sum starts at -offset * sum(a).
      if constexpr (L::kOffset != 0) {
        start[t] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(L::kOffset)), av[t]));
      } else {
        start[t] = _mm512_setzero_si512();
      }
      if constexpr (L::kHasMin) {
        const float s1 = is_pair ? a[t][b + 1].s : 0.0f;
        token_s[t] = _mm512_insertf32x8(_mm512_set1_ps(a[t][b].s), _mm256_set1_ps(s1), 1);
      }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < 4; ++r) {
      const __m512i wq = is_pair ? unpack_two(w[r] + b) : _mm512_zextsi256_si512(unpack_one(w[r][b]));
      const float d1 = is_pair ? block_scale(w[r][b + 1]) : 0.0f;
      const __m512 row_d = _mm512_insertf32x8(_mm512_set1_ps(block_scale(w[r][b])), _mm256_set1_ps(d1), 1);
      __m512 row_m;
      if constexpr (L::kHasMin) {
        // One lane per block: m * s is added once, not once per lane.
        const float m1 = is_pair ? half(w[r][b + 1].m) : 0.0f;
        row_m = _mm512_maskz_mov_ps(0x0101, _mm512_insertf32x8(_mm512_set1_ps(half(w[r][b].m)), _mm256_set1_ps(m1), 1));
      }
      #pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512i p = _mm512_dpbusd_epi32(start[t], wq, av[t]);
        acc[4 * r + t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(row_d, token_d[t]), acc[4 * r + t]);
        if constexpr (L::kHasMin) acc[4 * r + t] = _mm512_fmadd_ps(row_m, token_s[t], acc[4 * r + t]);
      }
    }
  }
  _mm512_storeu_ps(out, reduce_16_ps(acc));
}

// num_tokens (1..4) picks the instantiation; the register blocking needs it at compile time.
template <template <int> class Kernel>
void tile_by_tokens(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                    size_t activation_stride, int num_tokens, int64_t n, float* out) {
  switch (num_tokens) {
    case 1: Kernel<1>::run(weight, weight_stride, num_rows, activation, activation_stride, n, out); break;
    case 2: Kernel<2>::run(weight, weight_stride, num_rows, activation, activation_stride, n, out); break;
    case 3: Kernel<3>::run(weight, weight_stride, num_rows, activation, activation_stride, n, out); break;
    default: Kernel<4>::run(weight, weight_stride, num_rows, activation, activation_stride, n, out); break;
  }
}

template <typename Block>
struct K4 {
  template <int T>
  struct Kernel {
    static void run(const uint8_t* w, size_t ws, int nr, const uint8_t* a, size_t as, int64_t n, float* out) {
      tile_k4<Block, T>(w, ws, nr, a, as, n, out);
    }
  };
};

template <int T>
struct Q6 {
  static void run(const uint8_t* w, size_t ws, int nr, const uint8_t* a, size_t as, int64_t n, float* out) {
    tile_q6_k<T>(w, ws, nr, a, as, n, out);
  }
};

template <typename Block>
struct Leg {
  template <int T>
  struct Kernel {
    static void run(const uint8_t* w, size_t ws, int nr, const uint8_t* a, size_t as, int64_t n, float* out) {
      tile_legacy<Block, T>(w, ws, nr, a, as, n, out);
    }
  };
};

}  // namespace

TileDotFn select_quant_tile_avx512(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return tile_by_tokens<Leg<BlockQ4_0>::Kernel>;
    case GgmlType::Q4_1: return tile_by_tokens<Leg<BlockQ4_1>::Kernel>;
    case GgmlType::Q5_0: return tile_by_tokens<Leg<BlockQ5_0>::Kernel>;
    case GgmlType::Q5_1: return tile_by_tokens<Leg<BlockQ5_1>::Kernel>;
    case GgmlType::Q8_0: return tile_by_tokens<Leg<BlockQ8_0>::Kernel>;
    case GgmlType::MXFP4: return tile_by_tokens<Leg<BlockMxfp4>::Kernel>;
    case GgmlType::Q4_K: return tile_by_tokens<K4<BlockQ4_K>::Kernel>;
    case GgmlType::Q5_K: return tile_by_tokens<K4<BlockQ5_K>::Kernel>;
    case GgmlType::Q6_K: return tile_by_tokens<Q6>;
    default: return nullptr;
  }
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
TileDotFn select_quant_tile_avx512(GgmlType) { return nullptr; }
}  // namespace iwb::detail

#endif
