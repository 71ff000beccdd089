#include "iwb/kernels/q4_0_split.h"

#include "iwb/kernels/quant_blocks.h"

#include <cstring>

namespace iwb {

namespace {
bool sizes_ok(const void* src, int64_t rows, int64_t in_features, const void* dst) {
  return src != nullptr && dst != nullptr && rows > 0 && in_features > 0 && in_features % kQK4_0 == 0;
}
}  // namespace

bool repack_q4_0_split(const void* src, int64_t rows, int64_t in_features, void* dst) {
  if (!sizes_ok(src, rows, in_features, dst)) return false;
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  auto* nibbles = static_cast<uint8_t*>(dst);
  auto* scales = reinterpret_cast<uint16_t*>(nibbles + q4_0_split_scales_offset(rows, in_features));
  const int64_t n = rows * (in_features / kQK4_0);
  for (int64_t b = 0; b < n; ++b) {
    std::memcpy(nibbles + b * (kQK4_0 / 2), blocks[b].qs, kQK4_0 / 2);
    std::memcpy(scales + b, &blocks[b].d, sizeof(uint16_t));
  }
  return true;
}

bool unpack_q4_0_split(const void* src, int64_t rows, int64_t in_features, void* dst) {
  if (!sizes_ok(src, rows, in_features, dst)) return false;
  const auto* nibbles = static_cast<const uint8_t*>(src);
  const auto* scales = reinterpret_cast<const uint16_t*>(nibbles + q4_0_split_scales_offset(rows, in_features));
  auto* blocks = static_cast<BlockQ4_0*>(dst);
  const int64_t n = rows * (in_features / kQK4_0);
  for (int64_t b = 0; b < n; ++b) {
    std::memcpy(blocks[b].qs, nibbles + b * (kQK4_0 / 2), kQK4_0 / 2);
    std::memcpy(&blocks[b].d, scales + b, sizeof(uint16_t));
  }
  return true;
}

}  // namespace iwb
