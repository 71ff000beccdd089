// The matmul strategies behind iwb::matmul (private to kernels/src): integer dot products over
// 8-bit activations where the weight type has them, the dequantizing path otherwise.
#pragma once

#include "iwb/kernels/matmul.h"

#include <cstddef>
#include <span>

namespace iwb::detail {

// Dot-kernel path: quantizes the activations once per call (integer types), then splits the
// rows across threads in contiguous ranges. False (writing nothing) when this CPU has no dot
// kernels for the type, when is_exact asks f32 activations and batch invariance (the
// dequantizing path), or when many tokens meet a CPU path without tile kernels (the dequantizing path
// unpacks each weight once per call); the caller then takes another path. Scratch smaller than needed is ignored for
// the thread's own.
bool matmul_with_dot_kernels(const MatmulArgs& args);
// The same for products of one input (matmul_group): false when one of them cannot take the
// dot-kernel path or their activation formats differ (nothing is written then either).
bool matmul_group_with_dot_kernels(std::span<const MatmulArgs> group);
bool has_dot_kernels(GgmlType type);
// Tokens up to which a product of this type and row length runs in decode steps on this CPU
// (each token's result then the one it gets alone); 0 without dot kernels.
int64_t decode_steps_max_tokens(GgmlType type, int64_t in_features);

// Decode steps (one row of each of a chunk's streams) run by a thread other than the one whose
// chunk they were, since the process started: the end of a decode product shared out.
int64_t decode_steps_stolen();
// Tests: thread `thread` of every decode product sleeps `microseconds` after each batch of its
// own steps, so that the others take some (thread -1: none).
void set_slow_decode_owner_for_testing(int thread, int microseconds);

// Scratch the dot-kernel path needs for num_tokens activation rows (0 when it quantizes none).
size_t dot_kernels_scratch_bytes(GgmlType type, int64_t in_features, int64_t num_tokens);

// Dequantizing path: each weight tile to f32 once, dotted against every token.
bool matmul_dequantized(const MatmulArgs& args);

}  // namespace iwb::detail
