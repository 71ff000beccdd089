// Hand-made steps for CpuForward in the recurrent-state tests (test_qwen35_engine,
// test_state_checkpoints): one sequence's tokens with its own blocks, and two such steps as one.
#pragma once

#include "iwb/engine/paged/forward_batch.h"

#include <cstdint>
#include <vector>

namespace iwb::test {

// One sequence's step for CpuForward: `tokens` at positions first.., its cache in blocks
// 2 * slot and 2 * slot + 1 of 16 positions (room for 32), logits for its last token.
inline FlatBatch one_sequence(SequenceId id, int32_t slot, const std::vector<int32_t>& tokens, int32_t first) {
  FlatBatch b;
  b.max_blocks_per_sequence = 2;
  b.block_tables = {2 * slot, 2 * slot + 1};
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t p = first + static_cast<int32_t>(i);
    b.tokens.push_back(tokens[i]);
    b.positions.push_back(p);
    b.slot_mapping.push_back(static_cast<int64_t>(b.block_tables[static_cast<size_t>(p / 16)]) * 16 + p % 16);
    b.token_sequences.push_back(0);
  }
  b.sequence_lengths = {first + static_cast<int32_t>(tokens.size())};
  b.sequence_ids = {id};
  b.logits_rows = {static_cast<int32_t>(tokens.size()) - 1};
  b.logits_sequences = {0};
  return b;
}

// Two single-sequence steps as one batch (flatten()'s layout: rows sequence by sequence).
inline FlatBatch join(const FlatBatch& a, const FlatBatch& b) {
  FlatBatch j = a;
  j.tokens.insert(j.tokens.end(), b.tokens.begin(), b.tokens.end());
  j.positions.insert(j.positions.end(), b.positions.begin(), b.positions.end());
  j.slot_mapping.insert(j.slot_mapping.end(), b.slot_mapping.begin(), b.slot_mapping.end());
  for (size_t i = 0; i < b.tokens.size(); ++i) j.token_sequences.push_back(1);
  j.block_tables.insert(j.block_tables.end(), b.block_tables.begin(), b.block_tables.end());
  j.sequence_lengths.push_back(b.sequence_lengths[0]);
  j.sequence_ids.push_back(b.sequence_ids[0]);
  j.logits_rows.push_back(static_cast<int32_t>(a.tokens.size()) + b.logits_rows[0]);
  j.logits_sequences.push_back(1);
  return j;
}

}  // namespace iwb::test
