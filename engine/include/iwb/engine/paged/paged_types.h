// Small value types shared by the paged KV cache, its block manager and the scheduler.
#pragma once

#include <cstdint>

namespace iwb {

// One sequence of tokens being generated (a request, or one of several samples of a request).
using SequenceId = uint64_t;
// Index of a block in the paged KV pool, 0..num_blocks-1.
using BlockId = int32_t;

inline constexpr int32_t kDefaultBlockSize = 16;  // tokens per block

// Copy-on-write order: before the forward pass writes into `dst`, the K/V storage copies the
// whole block `src` into it (every layer, K and V).
struct BlockCopy {
  BlockId src = -1;
  BlockId dst = -1;
  bool operator==(const BlockCopy&) const = default;
};

}  // namespace iwb
