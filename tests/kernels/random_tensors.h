// Test helpers: random f32 data and random tensor bytes of any dequantizable GGUF type whose
// dequantized values have a chosen RMS (random quants, positive random scales), so kernels and
// generated models are tested on realistic, never-zero data.
#pragma once

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/quant_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

namespace iwb::test {

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float stddev = 1.0f, float mean = 0.0f) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Byte offsets of the fp16 scale fields inside one block of `type`.
inline std::vector<size_t> fp16_field_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return {offsetof(BlockQ4_0, d)};
    case GgmlType::Q4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case GgmlType::Q5_0: return {offsetof(BlockQ5_0, d)};
    case GgmlType::Q5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case GgmlType::Q8_0: return {offsetof(BlockQ8_0, d)};
    case GgmlType::Q2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case GgmlType::Q3_K: return {offsetof(BlockQ3_K, d)};
    case GgmlType::Q4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case GgmlType::Q5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case GgmlType::Q6_K: return {offsetof(BlockQ6_K, d)};
    default: return {};
  }
}

inline uint16_t read_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline void write_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// MXFP4 blocks (random codes already in `bytes`) with exponents spread over 2^-2..2^2 around a
// common one chosen so that the RMS is within a factor sqrt(2) of target_rms (a power-of-two
// scale cannot hit it exactly).
inline std::vector<uint8_t> random_mxfp4_bytes(std::vector<uint8_t> bytes, int64_t rows, int64_t cols,
                                               std::mt19937& rng, float target_rms) {
  std::uniform_int_distribution<int> spread(-2, 2);
  const size_t num_blocks = bytes.size() / sizeof(BlockMxfp4);
  for (size_t b = 0; b < num_blocks; ++b) bytes[b * sizeof(BlockMxfp4)] = static_cast<uint8_t>(127 + spread(rng));
  const size_t row_bytes = *ggml_row_bytes(GgmlType::MXFP4, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  double sum_sq = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_ref(GgmlType::MXFP4, bytes.data() + r * row_bytes, row.data(), cols);
    for (float x : row) sum_sq += static_cast<double>(x) * x;
  }
  const double rms = std::sqrt(sum_sq / static_cast<double>(rows * cols));
  const int shift = rms > 0 ? static_cast<int>(std::lround(std::log2(target_rms / rms))) : 0;
  for (size_t b = 0; b < num_blocks; ++b)
    bytes[b * sizeof(BlockMxfp4)] = static_cast<uint8_t>(bytes[b * sizeof(BlockMxfp4)] + shift);
  return bytes;
}

// rows x cols values of `type` (cols a multiple of its block size) with dequantized RMS close
// to target_rms. Quantized types get random quant bytes and scales rescaled to the target.
inline std::vector<uint8_t> random_tensor_bytes(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng,
                                                float target_rms) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const size_t row_bytes = *ggml_row_bytes(type, cols);
  std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(rows));
  if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16) {
    const std::vector<float> values = random_floats(static_cast<size_t>(rows * cols), rng, target_rms);
    for (size_t i = 0; i < values.size(); ++i) {
      if (type == GgmlType::F32) {
        std::memcpy(bytes.data() + 4 * i, &values[i], 4);
      } else {
        write_u16(bytes.data() + 2 * i, type == GgmlType::F16 ? f32_to_fp16(values[i]) : f32_to_bf16(values[i]));
      }
    }
    return bytes;
  }
  std::uniform_int_distribution<int> byte_dist(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte_dist(rng));
  if (type == GgmlType::MXFP4) return random_mxfp4_bytes(std::move(bytes), rows, cols, rng, target_rms);
  const std::vector<size_t> fields = fp16_field_offsets(type);
  const size_t num_blocks = bytes.size() / traits.bytes_per_block;
  std::uniform_real_distribution<float> scale_dist(0.5f, 1.0f);
  for (size_t b = 0; b < num_blocks; ++b) {
    for (size_t off : fields) write_u16(&bytes[b * traits.bytes_per_block + off], f32_to_fp16(scale_dist(rng) / 1024));
  }
  // Dequantized values are linear in the scale fields: one factor brings the RMS to target.
  std::vector<float> row(static_cast<size_t>(cols));
  double sum_sq = 0;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_ref(type, bytes.data() + r * row_bytes, row.data(), cols);
    for (float x : row) sum_sq += static_cast<double>(x) * x;
  }
  const double rms = std::sqrt(sum_sq / static_cast<double>(rows * cols));
  const float factor = rms > 0 ? static_cast<float>(target_rms / rms) : 1.0f;
  for (size_t b = 0; b < num_blocks; ++b) {
    for (size_t off : fields) {
      uint8_t* p = &bytes[b * traits.bytes_per_block + off];
      write_u16(p, f32_to_fp16(fp16_to_f32(read_u16(p)) * factor));
    }
  }
  return bytes;
}

// Largest |got - expected| relative to the largest |expected| (a norm-relative error that
// stays meaningful for values near zero). A NaN where the other side has none is an infinite
// error (std::max would pass over it: tests fill outputs with NaN to catch unwritten ones).
inline double max_relative_error(const float* got, const float* expected, size_t n) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(got[i]) != std::isnan(expected[i])) return INFINITY;
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - expected[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(expected[i])));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}
inline double max_relative_error(const std::vector<float>& got, const std::vector<float>& expected) {
  return got.size() == expected.size() ? max_relative_error(got.data(), expected.data(), got.size()) : INFINITY;
}

}  // namespace iwb::test
