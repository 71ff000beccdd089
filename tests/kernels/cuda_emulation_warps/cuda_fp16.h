// Host stand-in for <cuda_fp16.h> (see cuda_runtime.h here): __half as its bit pattern, with the
// CPU reference's conversions (round to nearest even, as __float2half_rn).
#pragma once

#include "cuda_runtime.h"
#include "iwb/kernels/dequantize.h"

struct __half {
  unsigned short bits;
};
struct __half2 {
  __half x, y;
};
inline __half __ushort_as_half(unsigned short bits) { return {bits}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
inline float __half2float(__half h) { return iwb::fp16_to_f32(h.bits); }
inline __half __float2half_rn(float f) { return {iwb::f32_to_fp16(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }
inline __half2 __floats2half2_rn(float a, float b) { return {__float2half_rn(a), __float2half_rn(b)}; }
