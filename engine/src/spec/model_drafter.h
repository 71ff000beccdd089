// A drafter that runs a (small) model of its own: the draft model, or the target requantized
// to fewer bits. It keeps a paged KV cache per speculating sequence and, each step, first
// catches up on the tokens the target accepted since (rolling back its own rejected guesses
// by truncating the block table), then guesses K tokens one forward pass at a time, all
// sequences of the step batched together. It runs on a ForwardBackend of the target's device.
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/paged/block_manager.h"
#include "iwb/engine/spec/drafter.h"
#include "model/model_weights.h"
#include "backend/forward_backend.h"

#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

namespace iwb::spec {

// A model to draft with: its config and weights, and whatever their bytes live in.
struct DraftModel {
  std::unique_ptr<gguf::GgufFile> file;       // the draft model's file (null for a self-draft)
  ModelConfig config;
  ModelWeights weights;
  std::vector<std::vector<uint8_t>> buffers;  // requantized matrices (self-draft)
  uint64_t owned_bytes = 0;                   // bytes of the above
};

class ModelDrafter final : public Drafter {
 public:
  // The draft model's forward pass on placement.device (the CPU, or a CUDA device with the
  // weights uploaded there) with its own paged KV cache.
  static Result<std::unique_ptr<ModelDrafter>> create(std::unique_ptr<DraftModel> model, std::string name,
                                                       const DraftPlacement& placement);

  std::string name() const override { return m_name; }
  Result<std::vector<Draft>> draft(std::span<const DraftRequest> requests) override;
  void release(uint64_t key) override;
  uint64_t num_bytes() const override;

 private:
  struct SequenceState {
    SequenceId id = 0;
    std::vector<int32_t> computed;  // tokens whose K/V the draft cache holds, in order
    uint64_t last_used = 0;
    std::mt19937_64 rng;
  };
  // Tokens of one sequence for a forward pass, at positions first .. first + tokens.size() - 1.
  struct Chunk {
    SequenceId sequence = 0;
    int64_t first = 0;
    std::span<const int32_t> tokens;
    bool wants_logits = false;
  };

  ModelDrafter(std::unique_ptr<DraftModel> model, std::string name) : m_model(std::move(model)), m_name(std::move(name)) {}

  // Rolls the state back to its common prefix with `tokens` and reserves slots up to all of
  // them; frees least recently used other sequences when the cache is full. False: no room.
  bool reserve(SequenceState& state, std::span<const int32_t> tokens, uint64_t protect_from);
  // One forward pass; logits rows (in chunk order, for chunks that want them) go to m_logits.
  Status run(const std::vector<Chunk>& chunks);
  int32_t choose(SequenceState& state, std::span<const float> logits, std::span<const int32_t> history,
                 const SamplingParams& sampling, Draft* draft);

  std::unique_ptr<DraftModel> m_model;
  std::string m_name;
  std::unique_ptr<ForwardBackend> m_backend;  // owns the draft KV data and the scratch
  std::unique_ptr<BlockManager> m_blocks;
  std::vector<float> m_logits;
  std::unordered_map<uint64_t, SequenceState> m_sequences;
  SequenceId m_next_sequence = 1;
  uint64_t m_clock = 0;
};

}  // namespace iwb::spec
