// Content keys of full KV blocks for prefix caching: a chained hash where block i's key covers
// its own token ids and, through its parent's key, every token before it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

namespace iwb {

using BlockHash = uint64_t;

// The parent key of a sequence's first block.
inline constexpr BlockHash kRootBlockHash = 0x6a09e667f3bcc908ull;

// XXH3-64 of the block's token ids, seeded with the parent's key.
BlockHash hash_block_tokens(BlockHash parent, std::span<const int32_t> tokens);

// The hash the block manager uses; tests substitute a deliberately weak one to show that
// collisions never produce a wrong cache hit.
using BlockHashFunction = std::function<BlockHash(BlockHash parent, std::span<const int32_t> tokens)>;

}  // namespace iwb
