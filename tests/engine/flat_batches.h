// Hand-made steps for CpuForward in the recurrent-state tests (test_qwen35_engine,
// test_state_checkpoints): the pass over a file with a KV pool of 16 blocks of 16, one
// sequence's tokens with its own blocks, and two such steps as one.
#pragma once

#include "backend/cpu/cpu_forward.h"
#include "model/model_weights.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/paged/forward_batch.h"
#include "iwb/engine/paged/paged_kv_storage.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace iwb::test {

// The file's CPU forward pass (two threads, steps of up to 32 tokens) and its KV pool.
struct CpuPass {
  std::unique_ptr<gguf::GgufFile> file;
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<PagedKvStorage> kv;
  std::unique_ptr<CpuForward> forward;
};

// Empty on success, else what failed.
inline std::string open_cpu_pass(const std::string& path, CpuPass* pass) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.error_message();
  pass->file = std::move(*file);
  Result<ModelConfig> config = model_config_from_gguf(*pass->file);
  if (!config) return config.error_message();
  pass->config = std::move(*config);
  Result<ModelWeights> weights = bind_model_weights(*pass->file, pass->config);
  if (!weights) return weights.error_message();
  pass->weights = std::move(*weights);
  auto kv = PagedKvStorage::create(kv_cache_shape(pass->config), 16, 8);
  if (!kv) return kv.error_message();
  pass->kv = std::move(*kv);
  pass->forward = std::make_unique<CpuForward>(pass->config, pass->weights, 2, 32);
  return {};
}

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
