// Host stand-in for <mma.h>'s WMMA API (see cuda_runtime.h here), for 16x16x16 half products with
// float accumulation. Every lane holds the whole fragment and computes the whole product; each
// operation starts and ends at a warp barrier, so all lanes load before any lane stores, as the
// warp-synchronous hardware operations behave.
#pragma once

#include "cuda_fp16.h"
#include "cuda_runtime.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "only 16x16x16 fragments are emulated");
  float x[256];  // row-major values
};

namespace detail {
struct WarpOperation {  // brackets an operation by warp barriers
  WarpOperation() { __syncwarp(); }
  ~WarpOperation() { __syncwarp(); }
};
// The hardware's requirements: 256-bit aligned pointers, ldm a multiple of 16 bytes.
template <typename T>
void check_matrix(const T* p, unsigned ldm) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0 || (ldm * sizeof(T)) % 16 != 0) {
    throw std::logic_error("wmma emulation: pointer not 32-byte aligned or ldm not a multiple of 16 bytes");
  }
}
}  // namespace detail

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float value) {
  for (float& v : f.x) v = value;
}

template <typename Use, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, __half, Layout>& f, const __half* p, unsigned ldm) {
  detail::WarpOperation op;
  detail::check_matrix(p, ldm);
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) {
      const __half h = std::is_same_v<Layout, col_major> ? p[c * ldm + r] : p[r * ldm + c];
      f.x[r * 16 + c] = __half2float(h);
    }
  }
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t layout) {
  detail::WarpOperation op;
  detail::check_matrix(p, ldm);
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
  }
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t layout) {
  detail::WarpOperation op;
  detail::check_matrix(p, ldm);
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * 16 + c];
  }
}

template <typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, __half, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, __half, LayoutB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  detail::WarpOperation op;
  float out[256];
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      float sum = c.x[i * 16 + j];
      for (int k = 0; k < 16; ++k) sum += a.x[i * 16 + k] * b.x[k * 16 + j];
      out[i * 16 + j] = sum;
    }
  }
  std::memcpy(d.x, out, sizeof(out));
}

}  // namespace nvcuda::wmma
