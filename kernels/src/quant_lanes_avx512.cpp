// AVX-512 VNNI products of K-quant weight rows with a few tokens (decoding several sequences),
// tokens in lanes: the 8-bit activations of 8 tokens are packed so that lanes 2t and 2t+1 hold
// 8 consecutive bytes of token t; each weight row is unpacked once into bytes, and 8 of them at
// a time (one broadcast load) meet all 8 tokens in one vpdpbusd (4 rows x 8 tokens, or 2 rows x
// 16). Every lane keeps its token's sum from the first super-block to the last, so no block ends
// in a horizontal reduction (the 4x4 tiles reduce 16 vectors per super-block and unpack each
// row once per 4 tokens). Up to 4 tokens take 4 lanes each (16 bytes of a token a lane group,
// 16 weight bytes a broadcast), so no vpdpbusd spends half its lanes on padding.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant_avx512_common.h"

#include <algorithm>

namespace iwb::detail {
namespace {

using namespace avx512;

// Packed activations, L lanes per token (2: groups of 8 tokens; 4: one group of up to 4), per
// group and super-block (Layout<L>::kSuperBytes):
//   256 / 4L quant vectors: vector g, lanes Lt .. Lt+L-1 = elements 4Lg .. 4Lg+4L-1 of token t
//   1 scale vector:   lanes Lt .. Lt+L-1 = d of token t
//   8 / L sum vectors: vector k, lane Lt+h = the int16 sums 2(Lk+h) and 2(Lk+h)+1 of token t
//                     (Q6_K: the 16 bsums; Q4_K/Q5_K: the 8 sums of 32, in the first half)
// The lanes of padding tokens (past num_tokens) are zeros.
template <int L>
struct Layout {
  static constexpr int kTokens = 16 / L;               // tokens per group
  static constexpr int kGroupBytes = 4 * L;            // weights broadcast per vpdpbusd
  static constexpr int kGroups = kQK_K / kGroupBytes;  // quant vectors per super-block
  static constexpr int64_t kScaleOffset = kGroups * 64;
  static constexpr int64_t kSumOffset = kScaleOffset + 64;
  static constexpr int64_t kSuperBytes = kSumOffset + 8 / L * 64;
};
static_assert(Layout<2>::kTokens == kLaneTokens);
// Up to this many tokens take 4 lanes each.
constexpr int kWideLaneTokens = Layout<4>::kTokens;

IWB_AVX512 inline uint64_t load_u64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The 4L bytes at p in every 4L bytes of a vector.
template <int L>
IWB_AVX512 inline __m512i broadcast_group(const void* p) {
  if constexpr (L == 4) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  } else {
    return _mm512_set1_epi64(static_cast<long long>(load_u64(p)));
  }
}

// x[t] 128-bit lane i becomes x[i] lane t.
IWB_AVX512 inline void transpose_4x4_epi128(__m512i x[4]) {
  const __m512i a0 = _mm512_shuffle_i64x2(x[0], x[1], 0x44), a1 = _mm512_shuffle_i64x2(x[0], x[1], 0xEE);
  const __m512i b0 = _mm512_shuffle_i64x2(x[2], x[3], 0x44), b1 = _mm512_shuffle_i64x2(x[2], x[3], 0xEE);
  x[0] = _mm512_shuffle_i64x2(a0, b0, 0x88);
  x[1] = _mm512_shuffle_i64x2(a0, b0, 0xDD);
  x[2] = _mm512_shuffle_i64x2(a1, b1, 0x88);
  x[3] = _mm512_shuffle_i64x2(a1, b1, 0xDD);
}

// x[t] qword i becomes x[i] qword t.
IWB_AVX512 inline void transpose_8x8_epi64(__m512i x[8]) {
  const __m512i pair_lo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
                pair_hi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  const __m512i quad_lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11),
                quad_hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  const __m512i oct_lo = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11),
                oct_hi = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
  __m512i p[8], q[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // p[2i]: qwords 0..3 of tokens 2i, 2i+1 interleaved; p[2i+1]: qwords 4..7
    p[2 * i] = _mm512_permutex2var_epi64(x[2 * i], pair_lo, x[2 * i + 1]);
    p[2 * i + 1] = _mm512_permutex2var_epi64(x[2 * i], pair_hi, x[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // tokens 4h .. 4h+3: q[4h + j] = qwords 2j, 2j+1
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
      q[4 * h + 2 * s] = _mm512_permutex2var_epi64(p[4 * h + s], quad_lo, p[4 * h + 2 + s]);
      q[4 * h + 2 * s + 1] = _mm512_permutex2var_epi64(p[4 * h + s], quad_hi, p[4 * h + 2 + s]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    x[2 * j] = _mm512_permutex2var_epi64(q[j], oct_lo, q[4 + j]);
    x[2 * j + 1] = _mm512_permutex2var_epi64(q[j], oct_hi, q[4 + j]);
  }
}

template <bool kSumsOf32, int L>
IWB_AVX512 void pack_tokens_layout(const uint8_t* activation, size_t activation_stride, int num_tokens, int64_t n,
                                   uint8_t* packed) {
  using Lay = Layout<L>;
  constexpr int P = Lay::kTokens;
  const int64_t nb = n / kQK_K;
  for (int t0 = 0; t0 < num_tokens; t0 += P) {
    const int group_tokens = std::min(P, num_tokens - t0);
    const BlockQ8_K* a[P];
    for (int t = 0; t < P; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_K*>(activation + (t0 + std::min(t, group_tokens - 1)) * activation_stride);
    }
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = packed + (t0 / P * nb + b) * Lay::kSuperBytes;
      for (int c = 0; c < 4; ++c) {  // 64 bytes (64 / 4L groups) of every token
        __m512i x[P];
#pragma GCC unroll 8
        for (int t = 0; t < P; ++t)
          x[t] = t < group_tokens ? _mm512_loadu_si512(a[t][b].qs + 64 * c) : _mm512_setzero_si512();
        if constexpr (L == 4) {
          transpose_4x4_epi128(x);
        } else {
          transpose_8x8_epi64(x);
        }
#pragma GCC unroll 8
        for (int i = 0; i < P; ++i) _mm512_store_si512(out + 64 * (P * c + i), x[i]);
      }
      auto* d = reinterpret_cast<float*>(out + Lay::kScaleOffset);
      uint8_t* sums = out + Lay::kSumOffset;
      for (int t = 0; t < P; ++t) {
        const bool is_real = t < group_tokens;
        for (int h = 0; h < L; ++h) d[L * t + h] = is_real ? a[t][b].d : 0.0f;
        int16_t s[16] = {};
        for (int j = 0; j < 16 && is_real; ++j) {
          if constexpr (kSumsOf32) {
            if (j < 8) s[j] = static_cast<int16_t>(a[t][b].bsums[2 * j] + a[t][b].bsums[2 * j + 1]);
          } else {
            s[j] = a[t][b].bsums[j];
          }
        }
        for (int k = 0; k < 8 / L; ++k) std::memcpy(sums + 64 * k + 4 * L * t, s + 2 * L * k, 4 * L);
      }
    }
  }
}

// One row's super-block unpacked: 256 unsigned weights in element order; the scale of each
// group as the dword vpdpwssd multiplies a lane with (Q4_K/Q5_K: the int16 scale in the low
// half, 0 in the high, so that a vpdpbusd sum below 2^15 becomes sum * scale; Q6_K: the scale
// in both halves, for vpmaddubsw's pairs); the int16 factors of the activation sums (Q4_K/Q5_K:
// the mins; Q6_K: the scales, for the offset of 32 its stored quants carry).
struct RowBlock {
  alignas(64) uint8_t q[256];
  alignas(64) int32_t scale[16];  // Q4_K/Q5_K: 8 sub-blocks of 32; Q6_K: 16 groups of 16
  alignas(32) int16_t sum_factor[16];
  float d, dmin;
};

// Super-block b of R rows.
template <typename Block, int R>
IWB_AVX512 inline void unpack_weights(const Block* const* w, int64_t b, RowBlock* rb) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) _mm512_store_si512(rb[r].q + 64 * c, unpack_chunk(w[r][b], c));
    if constexpr (std::is_same_v<Block, BlockQ6_K>) {
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[r][b].scales));
      const __m512i sc32 = _mm512_and_si512(_mm512_cvtepi8_epi32(sc), _mm512_set1_epi32(0xFFFF));
      _mm512_store_si512(rb[r].scale, _mm512_or_si512(sc32, _mm512_slli_epi32(sc32, 16)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(rb[r].sum_factor), _mm256_cvtepi8_epi16(sc));
      rb[r].d = half(w[r][b].d);
    } else {
      // (Scalar on purpose: a vector version for 4 rows measured no faster; the integer pipes
      // are otherwise idle.)
      uint64_t sc, m;
      unpack_k4_scales(w[r][b].scales, &sc, &m);
      _mm256_store_si256(reinterpret_cast<__m256i*>(rb[r].scale),
                         _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc))));
      _mm_store_si128(reinterpret_cast<__m128i*>(rb[r].sum_factor),
                      _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m))));
      rb[r].d = half(w[r][b].d);
      rb[r].dmin = half(w[r][b].dmin);
    }
  }
}

// Lines of one block, for the prefetcher.
template <typename Block>
inline void prefetch_block(const Block* block) {
  const auto* p = reinterpret_cast<const char*>(block);
  for (size_t off = 0; off < sizeof(Block); off += 64) __builtin_prefetch(p + off);
  __builtin_prefetch(p + sizeof(Block) - 1);
}

// R rows times V groups of 8 tokens over nb super-blocks; writes the outputs of rows
// r < num_rows and tokens t < num_tokens. `ahead`: R rows to prefetch, or null.
template <typename Block, int R, int V, int L>
IWB_AVX512 void lanes_rows(const Block* const* w, const Block* const* ahead, int num_rows, int64_t nb,
                           const uint8_t* packed, int num_tokens, const float* bias, float* out, int64_t out_stride) {
  static_assert(R <= 4, "the output stores take up to 4 rows per token");
  static_assert(L == 2 || (L == 4 && V == 1));
  using Lay = Layout<L>;
  constexpr int kGroupBytes = Lay::kGroupBytes;
  constexpr bool kIsQ6 = std::is_same_v<Block, BlockQ6_K>;
  // The sums of a scale's groups, then one vpdpwssd applies the scale to each lane's sum, which
  // must stay below 2^15: Q4_K/Q5_K sum vpdpbusd (at most 16 products of 15, or 8 of 31, times
  // 127); Q6_K, whose 6-bit quants allow only 4 such products, adds the two groups' vpmaddubsw
  // pairs (each below 2^14) in int16.
  constexpr int kGroupsPerScale = (kIsQ6 ? 16 : 32) / kGroupBytes;
  // (A lane takes 4 of a group's products whatever the lanes per token: groups = products / 4.
  // This was products / L, which let Q5_K sum 16 products, up to 62,992, and wrap.)
  constexpr int kMaxGroupsPerSum = (std::is_same_v<Block, BlockQ4_K> ? 16 : 8) / 4;
  constexpr int kGroupsPerSum = kIsQ6 ? kGroupsPerScale : std::min(kGroupsPerScale, kMaxGroupsPerSum);
  constexpr int kSumVectors = (kIsQ6 ? 8 : 4) / L;
  __m512 f[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) f[r][v] = _mm512_setzero_ps();
  }
  RowBlock rb[R];
  for (int64_t b = 0; b < nb; ++b) {
    // R rows side by side are R streams the hardware prefetchers do not follow: fetch the same
    // block of a later tile's rows, a few lines per block rather than all at once.
    if (ahead != nullptr) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) prefetch_block(ahead[r] + b);
    }
    unpack_weights<Block, R>(w, b, rb);
    // The weights must reach memory: broadcast loads from there are cheaper than the shuffles
    // the compiler would otherwise spend forwarding them from registers.
    asm volatile("" : : "r"(rb) : "memory");
    const uint8_t* pb[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) pb[v] = packed + (v * nb + b) * Lay::kSuperBytes;
    __m512i total[R][V];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) total[r][v] = _mm512_setzero_si512();
    }
#pragma GCC unroll 64
    for (int g0 = 0; g0 < Lay::kGroups; g0 += kGroupsPerSum) {
      __m512i acc[R][V];
#pragma GCC unroll 4
      for (int g = g0; g < g0 + kGroupsPerSum; ++g) {
        __m512i a[V];
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) a[v] = _mm512_load_si512(pb[v] + 64 * g);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i wb = broadcast_group<L>(rb[r].q + kGroupBytes * g);
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v) {
            if constexpr (kIsQ6) {
              const __m512i pairs = _mm512_maddubs_epi16(wb, a[v]);
              acc[r][v] = g == g0 ? pairs : _mm512_add_epi16(acc[r][v], pairs);
            } else {
              acc[r][v] = _mm512_dpbusd_epi32(g == g0 ? _mm512_setzero_si512() : acc[r][v], wb, a[v]);
            }
          }
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i sv = _mm512_set1_epi32(rb[r].scale[g0 / kGroupsPerScale]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) total[r][v] = _mm512_dpwssd_epi32(total[r][v], acc[r][v], sv);
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __m512 token_d = _mm512_load_ps(reinterpret_cast<const float*>(pb[v] + Lay::kScaleOffset));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m512i sums = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int k = 0; k < kSumVectors; ++k) {
          sums = _mm512_dpwssd_epi32(sums, _mm512_load_si512(pb[v] + Lay::kSumOffset + 64 * k),
                                     broadcast_group<L>(rb[r].sum_factor + 2 * L * k));
        }
        __m512i t = total[r][v];
        if constexpr (kIsQ6) {
          // The stored quants are q + 32: take 32 * sum(scale * bsum) off.
          t = _mm512_sub_epi32(t, _mm512_slli_epi32(sums, 5));
          f[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(_mm512_set1_ps(rb[r].d), token_d), f[r][v]);
        } else {
          __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(rb[r].d));
          x = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_set1_ps(rb[r].dmin), x);
          f[r][v] = _mm512_fmadd_ps(x, token_d, f[r][v]);
        }
      }
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << std::min(R, num_rows)) - 1);
  const __m128 add = bias ? _mm_maskz_loadu_ps(rows, bias) : _mm_setzero_ps();
  if constexpr (L == 4) {
    // Lanes 4t .. 4t+3 of row r's sums become token t's output (in all four), then lane 4t + r
    // takes row r's: 128-bit lane t holds rows 0..3 of token t.
    __m512 z[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512 x = f[std::min(r, R - 1)][0];
      const __m512 y = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)));
      z[r] = _mm512_add_ps(y, _mm512_permute_ps(y, _MM_SHUFFLE(2, 3, 0, 1)));
    }
    __m512 by_token = _mm512_mask_blend_ps(0x2222, z[0], z[1]);
    by_token = _mm512_mask_blend_ps(0x4444, by_token, z[2]);
    by_token = _mm512_mask_blend_ps(0x8888, by_token, z[3]);
    alignas(64) float values[16];
    _mm512_store_ps(values, by_token);
    for (int t = 0; t < Lay::kTokens && t < num_tokens; ++t) {
      _mm_mask_storeu_ps(out + t * out_stride, rows, _mm_add_ps(_mm_load_ps(values + 4 * t), add));
    }
    return;
  }
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) {
    // Lanes 2t and 2t+1 of row r's sums both become token t's output; then the rows of each
    // token side by side: 128-bit lane t of by_token[t / 4] holds rows 0..3 of token t.
    __m512 pair_sum[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512 x = f[std::min(r, R - 1)][v];
      pair_sum[r] = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));
    }
    const __m512 rows01 = _mm512_mask_blend_ps(0xAAAA, pair_sum[0], pair_sum[1]);
    const __m512 rows23 = _mm512_mask_blend_ps(0xAAAA, pair_sum[2], pair_sum[3]);
    const __m512 by_token[2] = {
        _mm512_permutex2var_ps(rows01, _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23),
                               rows23),
        _mm512_permutex2var_ps(rows01, _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31),
                               rows23)};
    alignas(64) float values[2][16];
    _mm512_store_ps(values[0], by_token[0]);
    _mm512_store_ps(values[1], by_token[1]);
    for (int t = 0; t < kLaneTokens && v * kLaneTokens + t < num_tokens; ++t) {
      _mm_mask_storeu_ps(out + (v * kLaneTokens + t) * out_stride, rows,
                         _mm_add_ps(_mm_load_ps(values[t / 4] + 4 * (t % 4)), add));
    }
  }
}

// Tiles of R rows this many tiles ahead are prefetched.
constexpr int kPrefetchTiles = 2;

template <typename Block, int R, int V, int L>
IWB_AVX512 void lanes_tile(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* packed,
                           int num_tokens, int64_t n, const float* bias, float* out, int64_t out_stride) {
  auto row = [&](int r) { return reinterpret_cast<const Block*>(weight + std::min(r, num_rows - 1) * weight_stride); };
  for (int r0 = 0; r0 < num_rows; r0 += R) {
    const Block* w[R];
    const Block* ahead[R];
    const bool is_ahead = r0 + (kPrefetchTiles + 1) * R <= num_rows;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      w[r] = row(r0 + r);
      ahead[r] = row(r0 + kPrefetchTiles * R + r);
    }
    lanes_rows<Block, R, V, L>(w, is_ahead ? ahead : nullptr, num_rows - r0, n / kQK_K, packed, num_tokens,
                               bias ? bias + r0 : nullptr, out + r0, out_stride);
  }
}

template <typename Block>
void lanes_kquant(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* packed, int num_tokens,
                  int64_t n, const float* bias, float* out, int64_t out_stride) {
  if (num_tokens <= kWideLaneTokens) {
    lanes_tile<Block, 4, 1, 4>(weight, weight_stride, num_rows, packed, num_tokens, n, bias, out, out_stride);
  } else if (num_tokens <= kLaneTokens) {
    lanes_tile<Block, 4, 1, 2>(weight, weight_stride, num_rows, packed, num_tokens, n, bias, out, out_stride);
  } else {
    lanes_tile<Block, 2, 2, 2>(weight, weight_stride, num_rows, packed, num_tokens, n, bias, out, out_stride);
  }
}

// The layout lanes_kquant reads for this many tokens.
template <bool kSumsOf32>
void pack_tokens_q8k(const uint8_t* activation, size_t activation_stride, int num_tokens, int64_t n, uint8_t* packed) {
  if (num_tokens <= kWideLaneTokens) {
    pack_tokens_layout<kSumsOf32, 4>(activation, activation_stride, num_tokens, n, packed);
  } else {
    pack_tokens_layout<kSumsOf32, 2>(activation, activation_stride, num_tokens, n, packed);
  }
}

}  // namespace

size_t lanes_packed_bytes(int64_t num_elements, int num_tokens) {
  // Layout<4>'s one group is smaller than a group of Layout<2>.
  static_assert(Layout<4>::kSuperBytes <= Layout<2>::kSuperBytes);
  return static_cast<size_t>((num_tokens + kLaneTokens - 1) / kLaneTokens * (num_elements / kQK_K) *
                             Layout<2>::kSuperBytes);
}

bool select_quant_lanes_avx512(GgmlType type, DotKernels* out) {
  switch (type) {
    case GgmlType::Q4_K:
      out->pack_tokens = pack_tokens_q8k<true>;
      out->lanes = lanes_kquant<BlockQ4_K>;
      return true;
    case GgmlType::Q5_K:
      out->pack_tokens = pack_tokens_q8k<true>;
      out->lanes = lanes_kquant<BlockQ5_K>;
      return true;
    case GgmlType::Q6_K:
      out->pack_tokens = pack_tokens_q8k<false>;
      out->lanes = lanes_kquant<BlockQ6_K>;
      return true;
    default: return false;
  }
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
size_t lanes_packed_bytes(int64_t, int) { return 0; }
bool select_quant_lanes_avx512(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
