#include "iwb/kernels/split_blocks.h"

#include "iwb/kernels/quant_blocks.h"

#include <cstring>

namespace iwb {

namespace {

// GGUF block size in bytes: the f16 scale first, then the quants.
int64_t gguf_block_bytes(GgmlType type) {
  return type == GgmlType::Q4_0 ? static_cast<int64_t>(sizeof(BlockQ4_0)) : static_cast<int64_t>(sizeof(BlockQ8_0));
}

bool sizes_ok(GgmlType type, const void* src, int64_t rows, int64_t in_features, const void* dst) {
  return has_split_blocks(type) && src != nullptr && dst != nullptr && rows > 0 && in_features > 0 &&
         in_features % 32 == 0;
}

}  // namespace

bool has_split_blocks(GgmlType type) { return type == GgmlType::Q4_0 || type == GgmlType::Q8_0; }

int64_t split_quant_bytes(GgmlType type) {
  return type == GgmlType::Q4_0 ? kQK4_0 / 2 : type == GgmlType::Q8_0 ? kQK8_0 : 0;
}

bool repack_split_blocks(GgmlType type, const void* src, int64_t rows, int64_t in_features, void* dst) {
  if (!sizes_ok(type, src, rows, in_features, dst)) return false;
  static_assert(offsetof(BlockQ4_0, d) == 0 && offsetof(BlockQ8_0, d) == 0, "the scale leads a block");
  const int64_t block_bytes = gguf_block_bytes(type), quant_bytes = split_quant_bytes(type);
  const auto* blocks = static_cast<const uint8_t*>(src);
  auto* quants = static_cast<uint8_t*>(dst);
  auto* scales = quants + split_scales_offset(type, rows, in_features);
  const int64_t n = rows * (in_features / 32);
  for (int64_t b = 0; b < n; ++b) {
    std::memcpy(quants + b * quant_bytes, blocks + b * block_bytes + 2, static_cast<size_t>(quant_bytes));
    std::memcpy(scales + 2 * b, blocks + b * block_bytes, 2);
  }
  return true;
}

bool unpack_split_blocks(GgmlType type, const void* src, int64_t rows, int64_t in_features, void* dst) {
  if (!sizes_ok(type, src, rows, in_features, dst)) return false;
  const int64_t block_bytes = gguf_block_bytes(type), quant_bytes = split_quant_bytes(type);
  const auto* quants = static_cast<const uint8_t*>(src);
  const auto* scales = quants + split_scales_offset(type, rows, in_features);
  auto* blocks = static_cast<uint8_t*>(dst);
  const int64_t n = rows * (in_features / 32);
  for (int64_t b = 0; b < n; ++b) {
    std::memcpy(blocks + b * block_bytes + 2, quants + b * quant_bytes, static_cast<size_t>(quant_bytes));
    std::memcpy(blocks + b * block_bytes, scales + 2 * b, 2);
  }
  return true;
}

}  // namespace iwb
