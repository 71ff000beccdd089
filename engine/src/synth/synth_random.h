// Deterministic pseudo-random weights for `iwb synth` (private to engine/src/synth). Every row
// of every tensor has its own stream, derived from the seed, the tensor's name and the row, so
// rows can be generated in parallel and the file is the same whatever the thread count.
#pragma once

#include <cstdint>
#include <string_view>

namespace iwb::synth::detail {

// splitmix64: a 64-bit state stepped by the golden ratio and finalised by two multiply-xorshift
// rounds; statistically good enough for weights and very cheap.
inline uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a of the tensor name: a stable tensor identity for the stream seeds.
inline uint64_t name_hash(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

inline uint64_t row_stream_seed(uint64_t seed, uint64_t tensor_hash, int64_t row) {
  uint64_t state = seed ^ (tensor_hash * 0xD6E8FEB86659FD93ull) ^ (static_cast<uint64_t>(row) * 0x9E3779B97F4A7C15ull);
  return splitmix64(&state);
}

// n values of mean + stddev * g, g approximately N(0, 1): the Irwin-Hall sum of twelve 16-bit
// uniforms (variance 1, tails cut at 6 sigma). Integer arithmetic up to one exact scaling, so
// the values do not depend on the machine's libm.
inline void fill_gaussian(uint64_t stream_seed, float mean, float stddev, float* out, int64_t n) {
  uint64_t state = stream_seed;
  for (int64_t i = 0; i < n; ++i) {
    int64_t sum = 0;
    for (int draw = 0; draw < 3; ++draw) {
      const uint64_t r = splitmix64(&state);
      sum += static_cast<int64_t>(r & 0xFFFF) + static_cast<int64_t>((r >> 16) & 0xFFFF) +
             static_cast<int64_t>((r >> 32) & 0xFFFF) + static_cast<int64_t>(r >> 48);
    }
    // (sum + 12 * 0.5) / 65536 - 6, written over the common denominator 131072.
    const float g = static_cast<float>(2 * sum + 12 - 12 * 65536) * (1.0f / 131072.0f);
    out[i] = mean + stddev * g;
  }
}

}  // namespace iwb::synth::detail
