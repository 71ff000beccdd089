// The drafters of speculative decoding behind one small interface: given each speculating
// sequence's tokens so far, guess the next K. A draft model (another GGUF with the target's
// vocabulary), prompt lookup (copying what followed an earlier occurrence of the last n-gram)
// and self-drafting (the target's own weights requantized to fewer bits) are built in; tests
// and tools may bring their own.
#pragma once

#include "iwb/engine/sampling/sampler.h"
#include "iwb/engine/spec/spec_config.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace iwb {
namespace tokenizer {
class Tokenizer;
}
namespace gguf {
class GgufFile;
}
struct ModelConfig;
struct ModelWeights;
}  // namespace iwb

namespace iwb::spec {

struct DraftRequest {
  uint64_t key = 0;                 // stable while the sequence lives (its sequence id)
  std::span<const int32_t> tokens;  // prompt and generated tokens; the last is the next the target runs
  int32_t num_draft_tokens = 0;     // K wanted (a drafter may return fewer, or none)
  SamplingParams sampling;          // the request's; greedy requests get argmax drafts
  // A model drafter stops at the first guess whose probability among its 10 most likely tokens
  // is below this (llama.cpp's --spec-draft-p-min, its draft sampler's top-k 10); 0: never.
  float min_probability = 0.0f;
};

struct Draft {
  std::vector<int32_t> tokens;  // [<= K] guessed continuation
  // The distribution each token was drawn from, per position (what the rejection rule divides
  // by). Empty: every token was chosen deterministically (a one-hot distribution).
  std::vector<std::vector<TokenProb>> probabilities;
};

// Multi-token prediction: the target's hidden states of one sequence's tokens it computed (and
// kept) in a step, handed to a drafter that reads them.
struct HiddenStates {
  uint64_t key = 0;                 // the DraftRequest key of the sequence
  int64_t first_position = 0;       // position of rows' first row
  std::span<const int32_t> tokens;  // the sequence's tokens from position 0 (at least to the rows' end)
  std::span<const float> rows;      // [count x n_embd] the output norm's rows of positions first..
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // One draft per request, in order. An error stops speculation for the step (the engine
  // decodes without drafts and reports it); a drafter with no guess returns an empty draft.
  virtual Result<std::vector<Draft>> draft(std::span<const DraftRequest> requests) = 0;
  // The sequence ended: whatever the drafter keeps for it (a KV cache) can go.
  virtual void release(uint64_t key) { (void)key; }
  // Bytes the drafter holds (draft weights, its KV cache), for the memory report.
  virtual uint64_t num_bytes() const { return 0; }
  // An MTP head reads the target's hidden states: the engine then has its backend keep them and
  // hands over, after each step, those of the tokens the step kept (observe_hidden_states).
  virtual bool reads_hidden_states() const { return false; }
  virtual Status observe_hidden_states(std::span<const HiddenStates> states) {
    (void)states;
    return {};
  }
};

// Prompt lookup: the longest suffix n-gram (max_ngram down to min_ngram tokens) that occurred
// earlier in the sequence; the tokens that followed its latest earlier occurrence are the draft.
std::unique_ptr<Drafter> make_prompt_lookup_drafter(int32_t max_ngram = 3, int32_t min_ngram = 1);

// The first token whose text differs between the two vocabularies (or that only one has) gives
// an error naming its id and both texts; identical vocabularies give Ok.
Status check_vocabulary_match(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft);

// Where a model drafter runs: the target's device ("cpu" or "cuda:N"), so drafting never waits
// on a slower one; its own KV cache of num_kv_positions positions in blocks of kv_block_size.
struct DraftPlacement {
  std::string device = "cpu";
  int num_threads = 1;  // host threads (the CPU backend computes with them)
  int64_t num_kv_positions = 0;
  int32_t kv_block_size = 16;
};

// A draft model from a GGUF file: its vocabulary is checked against the target's.
Result<std::unique_ptr<Drafter>> open_draft_model(const std::string& path, const tokenizer::Tokenizer& target,
                                                  const DraftPlacement& placement);

// The target itself with every matrix requantized to `type` in memory (matrices whose rows do
// not divide into the type's blocks stay as they are). The target's file, config and weights
// must outlive the drafter.
Result<std::unique_ptr<Drafter>> make_self_drafter(const gguf::GgufFile& target_file, const ModelConfig& config,
                                                   const ModelWeights& weights, GgmlType type,
                                                   const DraftPlacement& placement);

// The target's own multi-token-prediction head (nextn_predict_layers: GLM-4.5 and later,
// DeepSeek V3, as llama.cpp's --spec-type draft-mtp runs it): one layer after the trunk that
// reads the token and the target's hidden state of the token before, with a KV cache of its
// own. Guesses after the first read the head's own hidden state. head_path: the head's own
// file instead (llama.cpp's convert --mtp writes "mtp-" files: the head with the model's keys,
// embedding table and classifier, no trunk; the model then converted with --no-mtp), checked
// against the target's keys. The target's file, config and weights must outlive the drafter;
// the CPU backend only.
Result<std::unique_ptr<Drafter>> make_mtp_drafter(const gguf::GgufFile& target_file, const ModelConfig& config,
                                                  const ModelWeights& weights, const DraftPlacement& placement,
                                                  const std::string& head_path = {});

}  // namespace iwb::spec
