// Tensor element types as numbered in GGUF files (ggml's enum), with their block layouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace iwb {

// Values are the on-disk ids; gaps are ids ggml retired and must be rejected.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
  // Not a GGUF tensor type (no traits, never read from a file): the KV cache's FP8 E4M3 (vLLM's
  // fp8 cache, one byte per value: sign, 4 exponent bits of bias 7, 3 mantissa bits, max 448).
  F8_E4M3 = 0x10000,
};

struct GgmlTypeTraits {
  std::string_view name;   // "Q4_K", as llama.cpp prints it
  int64_t block_size;      // elements per block
  size_t bytes_per_block;  // bytes of one block
  bool is_quantized;
};

// Traits of a known type id; nullopt for ids that are not (or no longer) valid.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id);
const GgmlTypeTraits& ggml_type_traits(GgmlType type);  // type must be valid
std::string_view ggml_type_name(GgmlType type);
std::optional<GgmlType> ggml_type_from_name(std::string_view name);  // case-insensitive

// Bytes of a row of num_elements; nullopt when num_elements is not a multiple of the block size.
std::optional<size_t> ggml_row_bytes(GgmlType type, int64_t num_elements);

// True when kernels/ can dequantize this type to f32.
bool ggml_can_dequantize(GgmlType type);

// The address alignment the dequantizers and matmul need for data of this type: 2 for the
// layouts with 16-bit fields (f16, bf16, every block with an fp16 scale), 1 for MXFP4 (bytes
// only: its 17-byte blocks leave rows of an odd block count at odd addresses) and F32 (which
// the dequantizers copy byte-wise; matmul's dot kernels want 4 of F32 and check that).
size_t ggml_data_alignment(GgmlType type);

}  // namespace iwb
