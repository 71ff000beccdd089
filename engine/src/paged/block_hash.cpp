// Chained XXH3 hashing of KV blocks (see block_hash.h).
#include "iwb/engine/paged/block_hash.h"

#include <xxhash.h>

namespace iwb {

BlockHash hash_block_tokens(BlockHash parent, std::span<const int32_t> tokens) {
  // Seeding with the parent's key chains the blocks: equal keys mean (with 2^-64 odds of a
  // collision, which the block manager checks anyway) the same tokens from position 0 on.
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

}  // namespace iwb
