// Flattening a ForwardBatch into the token-major arrays the paged kernels take.
#include "iwb/engine/paged/forward_batch.h"

#include <algorithm>
#include <cstddef>

namespace iwb {

FlatBatch flatten(const ForwardBatch& batch) {
  FlatBatch flat;
  for (const ScheduledSequence& s : batch.sequences) {
    flat.max_blocks_per_sequence =
        std::max<int64_t>(flat.max_blocks_per_sequence, static_cast<int64_t>(s.block_table.size()));
  }
  const size_t num_sequences = batch.sequences.size();
  flat.block_tables.assign(num_sequences * static_cast<size_t>(flat.max_blocks_per_sequence), -1);
  flat.sequence_lengths.reserve(num_sequences);
  for (size_t i = 0; i < num_sequences; ++i) {
    const ScheduledSequence& s = batch.sequences[i];
    std::copy(
        s.block_table.begin(), s.block_table.end(),
        flat.block_tables.begin() + static_cast<ptrdiff_t>(i * static_cast<size_t>(flat.max_blocks_per_sequence)));
    flat.sequence_lengths.push_back(static_cast<int32_t>(s.sequence_length));
    flat.sequence_ids.push_back(s.sequence);
    flat.tokens.insert(flat.tokens.end(), s.tokens.begin(), s.tokens.end());
    flat.positions.insert(flat.positions.end(), s.positions.begin(), s.positions.end());
    flat.slot_mapping.insert(flat.slot_mapping.end(), s.slot_mapping.begin(), s.slot_mapping.end());
    flat.token_sequences.insert(flat.token_sequences.end(), s.tokens.size(), static_cast<int32_t>(i));
    if (s.needs_logits && !s.tokens.empty()) {
      const int64_t num_rows = 1 + std::min<int64_t>(s.num_draft_tokens, static_cast<int64_t>(s.tokens.size()) - 1);
      for (int64_t r = num_rows; r >= 1; --r) {
        flat.logits_rows.push_back(static_cast<int32_t>(static_cast<int64_t>(flat.tokens.size()) - r));
        flat.logits_sequences.push_back(static_cast<int32_t>(i));
      }
    }
  }
  return flat;
}

}  // namespace iwb
