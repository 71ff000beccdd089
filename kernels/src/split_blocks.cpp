#include "iwb/kernels/split_blocks.h"

#include "iwb/kernels/quant_blocks.h"

#include <cstddef>
#include <cstring>

namespace iwb {

namespace {

// GGUF block size in bytes: the f16 scale first, then the quants.
int64_t gguf_block_bytes(GgmlType type) {
  return type == GgmlType::Q4_0 ? static_cast<int64_t>(sizeof(BlockQ4_0)) : static_cast<int64_t>(sizeof(BlockQ8_0));
}

bool sizes_ok(GgmlType type, const void* src, int64_t rows, int64_t in_features, const void* dst) {
  const int64_t block_values = type == GgmlType::Q6_K ? kQK_K : 32;
  return has_split_blocks(type) && src != nullptr && dst != nullptr && rows > 0 && in_features > 0 &&
         in_features % block_values == 0;
}

// The 6-bit values (stored + 32, 0..63) of a Q6_K super-block in order, as dequantize_row_ref
// reads them: half h, l < 32: ql[64h + l] low / ql[64h + 32 + l] low / ql[64h + l] high /
// ql[64h + 32 + l] high nibble for values 128h + l, + 32, + 64, + 96, with qh[32h + l]'s bit pairs
// 0-1, 2-3, 4-5, 6-7.
void q6_k_values(const BlockQ6_K& b, uint8_t (&q)[kQK_K]) {
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo = b.ql[64 * h + l], lo2 = b.ql[64 * h + 32 + l], hi = b.qh[32 * h + l];
      q[128 * h + l] = static_cast<uint8_t>((lo & 15) | ((hi & 3) << 4));
      q[128 * h + 32 + l] = static_cast<uint8_t>((lo2 & 15) | (((hi >> 2) & 3) << 4));
      q[128 * h + 64 + l] = static_cast<uint8_t>((lo >> 4) | (((hi >> 4) & 3) << 4));
      q[128 * h + 96 + l] = static_cast<uint8_t>((lo2 >> 4) | (((hi >> 6) & 3) << 4));
    }
  }
}

void set_q6_k_values(const uint8_t (&q)[kQK_K], BlockQ6_K* b) {
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t v0 = q[128 * h + l], v1 = q[128 * h + 32 + l], v2 = q[128 * h + 64 + l], v3 = q[128 * h + 96 + l];
      b->ql[64 * h + l] = static_cast<uint8_t>((v0 & 15) | ((v2 & 15) << 4));
      b->ql[64 * h + 32 + l] = static_cast<uint8_t>((v1 & 15) | ((v3 & 15) << 4));
      b->qh[32 * h + l] = static_cast<uint8_t>((v0 >> 4) | ((v1 >> 4) << 2) | ((v2 >> 4) << 4) | ((v3 >> 4) << 6));
    }
  }
}

// Unit u (values 32u..32u+31) of the split layout: low nibbles as Q4_0's bytes (byte j: value j
// low, value j + 16 high), and the high bit pairs in two words, value 4k + b of word k % 4 of the
// pair at bits 8b + 2 (k % 4) of word k / 4 (q6_k_split_word on the GPU).
void put_unit(const uint8_t* q, uint8_t* low, uint8_t* high) {
  for (int j = 0; j < 16; ++j) low[j] = static_cast<uint8_t>((q[j] & 15) | ((q[j + 16] & 15) << 4));
  uint32_t words[2] = {0, 0};
  for (int v = 0; v < 32; ++v) {
    const int k = v / 4, b = v % 4;
    words[k / 4] |= static_cast<uint32_t>(q[v] >> 4) << (8 * b + 2 * (k % 4));
  }
  std::memcpy(high, words, 8);
}

void get_unit(const uint8_t* low, const uint8_t* high, uint8_t* q) {
  uint32_t words[2];
  std::memcpy(words, high, 8);
  for (int v = 0; v < 32; ++v) {
    const int k = v / 4, b = v % 4;
    const int nibble = v < 16 ? low[v] & 15 : low[v - 16] >> 4;
    q[v] = static_cast<uint8_t>(nibble | (((words[k / 4] >> (8 * b + 2 * (k % 4))) & 3) << 4));
  }
}

bool repack_q6_k(const void* src, int64_t rows, int64_t in_features, void* dst) {
  const Q6KSplitOffsets at = q6_k_split_offsets(rows, in_features);
  const auto* blocks = static_cast<const BlockQ6_K*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t n = rows * (in_features / kQK_K);  // super-blocks, row after row
  for (int64_t s = 0; s < n; ++s) {
    uint8_t q[kQK_K];
    q6_k_values(blocks[s], q);
    for (int u = 0; u < 8; ++u) {
      const int64_t unit = 8 * s + u;
      put_unit(q + 32 * u, out + 16 * unit, out + at.highs + 8 * unit);
    }
    std::memcpy(out + at.scales + 16 * s, blocks[s].scales, 16);
    std::memcpy(out + at.d + 2 * s, &blocks[s].d, 2);
  }
  return true;
}

bool unpack_q6_k(const void* src, int64_t rows, int64_t in_features, void* dst) {
  const Q6KSplitOffsets at = q6_k_split_offsets(rows, in_features);
  const auto* in = static_cast<const uint8_t*>(src);
  auto* blocks = static_cast<BlockQ6_K*>(dst);
  const int64_t n = rows * (in_features / kQK_K);
  for (int64_t s = 0; s < n; ++s) {
    uint8_t q[kQK_K];
    for (int u = 0; u < 8; ++u) {
      const int64_t unit = 8 * s + u;
      get_unit(in + 16 * unit, in + at.highs + 8 * unit, q + 32 * u);
    }
    set_q6_k_values(q, &blocks[s]);
    std::memcpy(blocks[s].scales, in + at.scales + 16 * s, 16);
    std::memcpy(&blocks[s].d, in + at.d + 2 * s, 2);
  }
  return true;
}

}  // namespace

bool has_split_blocks(GgmlType type) {
  return type == GgmlType::Q4_0 || type == GgmlType::Q8_0 || type == GgmlType::Q6_K;
}

int64_t split_quant_bytes(GgmlType type) {
  return type == GgmlType::Q4_0 ? kQK4_0 / 2 : type == GgmlType::Q8_0 ? kQK8_0 : 0;
}

bool repack_split_blocks(GgmlType type, const void* src, int64_t rows, int64_t in_features, void* dst) {
  if (!sizes_ok(type, src, rows, in_features, dst)) return false;
  if (type == GgmlType::Q6_K) return repack_q6_k(src, rows, in_features, dst);
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
  if (type == GgmlType::Q6_K) return unpack_q6_k(src, rows, in_features, dst);
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
