// One step's plan, as plain values: for every sequence in the batch the tokens to run, their
// positions and cache slots, its block table and lengths. The forward pass reads attention
// metadata only from here (no globals). flatten() lays it out as the kernels want it.
#pragma once

#include "iwb/engine/paged/paged_types.h"
#include "iwb/engine/paged/sequence.h"

#include <cstdint>
#include <vector>

namespace iwb {

struct ScheduledSequence {
  SequenceId sequence = 0;
  RequestId request = 0;
  std::vector<int32_t> tokens;        // [n] token ids to run this step
  std::vector<int32_t> positions;     // [n] their positions: num_context_tokens .. sequence_length-1
  std::vector<int64_t> slot_mapping;  // [n] cache slot of each: block * block_size + offset
  std::vector<BlockId> block_table;   // blocks of positions 0..sequence_length-1
  int64_t num_context_tokens = 0;     // positions already in the cache before this step
  int64_t sequence_length = 0;        // positions in the cache after this step
  bool is_prefill = false;            // a prompt chunk (or a recomputation), not a decode token
  bool needs_logits = false;          // last chunk of the prompt, or a decode: sample a token
  // Speculation: the last num_draft_tokens of `tokens` are guesses; logits are needed for
  // each of the last num_draft_tokens + 1 rows (the target's choice after each prefix).
  int64_t num_draft_tokens = 0;
};

struct ForwardBatch {
  int32_t block_size = 0;
  std::vector<ScheduledSequence> sequences;
  // Copy-on-write block copies the storage must perform before this step writes any K/V.
  std::vector<BlockCopy> block_copies;
  int64_t num_tokens = 0;
  int64_t num_prefill_tokens = 0;
  int64_t num_decode_tokens = 0;

  bool empty() const { return sequences.empty(); }
};

// A recurrent state to keep (prefix caching of a model with recurrent layers): batch sequence
// `sequence`'s state once it has seen its first num_tokens tokens, which must lie within this
// step's tokens of it (after the first, up to the last), kept as checkpoint `checkpoint` (an id
// of the engine's) if the step succeeds.
struct StateSave {
  int32_t sequence = 0;
  int64_t num_tokens = 0;
  int64_t checkpoint = 0;
};

// The batch concatenated token-major (sequence by sequence, in batch order), matching
// PagedAttentionArgs and WriteKvPagedArgs.
struct FlatBatch {
  std::vector<int32_t> tokens;           // [num_tokens]
  std::vector<int32_t> positions;        // [num_tokens]
  std::vector<int64_t> slot_mapping;     // [num_tokens]
  std::vector<int32_t> token_sequences;  // [num_tokens]: index into the batch's sequences
  std::vector<int32_t> block_tables;     // [num_sequences x max_blocks_per_sequence], padded with -1
  int64_t max_blocks_per_sequence = 0;
  std::vector<int32_t> sequence_lengths;  // [num_sequences]
  // [num_sequences]: whose tokens they are (a recurrent layer's state is the sequence's own).
  std::vector<SequenceId> sequence_ids;
  // Token rows whose logits are needed: one per sequence that samples, 1 + K for a draft.
  std::vector<int32_t> logits_rows;
  std::vector<int32_t> logits_sequences;  // [logits_rows.size()]: which batch sequence each row belongs to
  std::vector<StateSave> state_saves;     // filled by the engine, not by flatten()
};

FlatBatch flatten(const ForwardBatch& batch);

}  // namespace iwb
