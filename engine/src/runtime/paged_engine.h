// The Engine: continuous batching over a paged KV cache, whatever device runs the forward pass.
// Requests queue from any thread; each step() asks the scheduler for a batch (decodes first, then
// prompt chunks, under the token budget; preemption by recomputation when blocks run out), runs
// one forward pass over all of its tokens on the ForwardBackend (CPU or CUDA), and samples one
// token per sequence that needs one. Prefix caching shares the KV blocks of prompts (and chat
// turns) that start alike.
#pragma once

#include "backend/forward_backend.h"
#include "iwb/engine/backend/device_selection.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/paged/scheduler.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/spec/drafter.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "model/model_weights.h"
#include "runtime/request_inbox.h"
#include "runtime/request_state.h"
#include "runtime/speculation_control.h"
#include "runtime/state_checkpoints.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

namespace iwb {

class PagedEngine final : public Engine {
 public:
  // Loads the model and its forward pass on the device `choice` names. A CUDA choice made by
  // "auto" falls back to the CPU when the device cannot take the model (ModelSummary says why).
  static Result<std::unique_ptr<Engine>> load(const std::string& path, const EngineOptions& options,
                                              const DeviceChoice& choice, const LoadProgress& progress);

  const ModelSummary& model() const override { return m_summary; }
  const ModelConfig& config() const override { return m_config; }
  const tokenizer::Tokenizer& tokenizer() const override { return m_tokenizer; }
  int64_t context_length() const override { return m_context_length; }
  const std::string& chat_template() const override { return m_chat_template; }
  const std::string& chat_template_tool_use() const override { return m_chat_template_tool_use; }
  int num_threads() const override { return m_backend->num_threads(); }
  int64_t max_batch_tokens() const override { return m_backend->max_batch(); }

  Result<RequestId> add_request(GenerationRequest request) override;
  void abort_request(RequestId id) override;
  bool has_unfinished_requests() const override;
  Result<StepResult> step() override;
  void set_profiling(bool is_enabled) override { m_is_profiling = is_enabled; }
  bool is_profiling() const override { return m_is_profiling; }
  EngineKvSnapshot kv_snapshot() const override;
  MemoryReport memory_report() const override;
  ExpertLoadSnapshot expert_load() const override { return m_expert_load.snapshot(); }
  Result<std::vector<float>> logits_for(const std::vector<int32_t>& tokens) override;
  // paged_engine_spec.cpp
  Status set_speculation(const spec::SpeculativeConfig& config) override;
  Status set_drafter(std::unique_ptr<spec::Drafter> drafter, const spec::SpeculativeConfig& config) override;
  const spec::SpeculativeConfig& speculation() const override { return m_speculation.config(); }
  // paged_engine_logits.cpp
  Status logits_for_positions(const std::vector<int32_t>& tokens, int64_t first_position,
                              const LogitsSink& sink) override;
  Status mtp_logits_for_positions(const std::vector<int32_t>& tokens, const LogitsSink& sink) override;
  void set_activation_observer(ActivationObserver* observer) override;

 private:
  // At the end of the scope, however it ends: the sequences the scheduler removed (finished,
  // aborted, failed) give back the state the backend keeps for them (recurrent layers).
  struct ReleaseRemovedOnExit {
    PagedEngine& engine;
    ~ReleaseRemovedOnExit() { engine.m_backend->release_sequences(engine.m_scheduler->take_removed()); }
  };

  using Clock = std::chrono::steady_clock;

  PagedEngine(std::unique_ptr<gguf::GgufFile> file, tokenizer::Tokenizer tokenizer);
  // The backend on the chosen device, its KV pool sized by the options, and the scheduler over it.
  Status set_up_backend(const EngineOptions& options, const DeviceChoice& choice, const LoadProgress& progress);
  Status set_up_scheduler(const EngineOptions& options);

  // Step pieces (paged_engine_step.cpp).
  // New requests go to the scheduler; requested aborts are carried out.
  void take_new_and_aborted(StepResult* result);
  // Copy-on-write copies, then the forward pass over the batch into m_logits; with a profile,
  // the step's kernel records go there.
  // With `greedy_tokens`, only each logits row's argmax comes back there (see
  // greedy_on_device), not m_logits.
  // Drafters that would themselves run the target's recurrent layers (its requantized copy, an
  // MTP head): refused, as they could not take their guesses back.
  Status refuse_recurrent_drafter(const char* what) const;
  Status run_forward(const ForwardBatch& batch, const FlatBatch& flat, ProfileBatch* profile,
                     int32_t* greedy_tokens = nullptr);
  // True when every row that samples is greedy without penalties or drafts and the backend
  // picks greedy tokens on its device: the step then copies one id per row, not the logits.
  bool greedy_on_device(const ForwardBatch& batch, const FlatBatch& flat) const;
  // One token per logits row, the stop rules, and the scheduler told what happened.
  // `greedy_tokens`: the rows' tokens already chosen on the device (null: sample from m_logits).
  // logits_for_positions' pass; `hidden` (when set) gets each chunk's hidden states with its
  // first position (the backend exports them then).
  using HiddenSink = std::function<void(int64_t first_position, std::span<const float> rows)>;
  Status run_positions(const std::vector<int32_t>& tokens, int64_t first_position, const LogitsSink& sink,
                       const HiddenSink& hidden);
  // An MTP drafter reads the target's hidden states of the tokens each sequence kept in the step
  // (after sampling and verification); its errors go to result->stats like drafting's.
  void hand_over_hidden_states(const ForwardBatch& batch, StepResult* result);
  Status sample_tokens(const ForwardBatch& batch, const FlatBatch& flat, StepResult* result,
                       const int32_t* greedy_tokens = nullptr);
  // Recurrent states kept for prefix caching (paged_engine_checkpoints.cpp). Before a pass: a
  // sequence starting from a cache hit gets the hit's state, and the pass is told to save the
  // states at StateCheckpoints::positions that fall in its tokens (into flat->state_saves), and
  // a decode step that fills a block to save the state after it. After a pass that succeeded,
  // the saved states join the index.
  Status prepare_state_checkpoints(const ForwardBatch& batch, FlatBatch* flat);
  void keep_state_checkpoints();
  // Speculation on recurrent layers: a verification step saves the state after each of a
  // sequence's drafted positions; once verified, the sequence goes back to the state after the
  // tokens it kept (its rejected guesses' KV slots go as for any model), and the saves go.
  // A block the step's tokens fill is kept as the sequence's decode checkpoint where the tokens
  // verification keeps reach it (the state after it is one of the saves, or one more).
  Status rewind_draft_states(SequenceId sequence, int32_t num_accepted);
  void drop_draft_states();
  // Reports the request finished and forgets it (its sequence must be gone from the scheduler,
  // or about to be, by on_step_done).
  void finish(RequestId id, FinishReason reason, std::string error, StepResult* result);

  std::unique_ptr<gguf::GgufFile> m_file;
  tokenizer::Tokenizer m_tokenizer;
  ModelSummary m_summary;
  ModelConfig m_config;
  ModelWeights m_weights;
  std::string m_chat_template;
  std::string m_chat_template_tool_use;
  int64_t m_context_length = 0;       // per sequence
  int64_t m_max_sequence_length = 0;  // the context, or the whole pool when that is smaller

  std::unique_ptr<ForwardBackend> m_backend;  // the forward pass and the KV data
  KvPoolGeometry m_kv;                        // the pool's shape, as the block manager counts it
  std::unique_ptr<Scheduler> m_scheduler;
  std::vector<float> m_logits;                                    // [rows x vocab] of the last forward pass
  std::shared_ptr<const TokenBytes> m_token_bytes;                // built for the first structured-output request
  std::shared_ptr<const TokenBytes> m_token_bytes_with_controls;  // ... that renders control tokens
  std::vector<int32_t> m_greedy_tokens;                           // [rows] of the last pass, when greedy_on_device
  StateCheckpoints m_checkpoints;  // disabled unless the model has recurrent layers and prefix caching is on
  struct PendingCheckpoint {
    BlockHash key = 0;
    std::vector<int32_t> prefix;
    int64_t id = 0;
    std::optional<SequenceId> decoding;  // a decode step's save, which replaces the sequence's last one
  };
  std::vector<PendingCheckpoint> m_pending_checkpoints;  // saves of the pass under way
  // Puts a saved state in the index (a decode step's in place of the sequence's last one) and
  // frees the states that leaves out.
  void keep_checkpoint(const PendingCheckpoint& checkpoint);
  struct DecodeCheckpoint {
    BlockHash key = 0;
    int64_t id = 0;
  };
  // Each decoding sequence's latest checkpoint (after the last block it filled); forgotten, not
  // dropped, when the sequence ends, so its reply's state stays for the next turn.
  std::unordered_map<SequenceId, DecodeCheckpoint> m_decode_checkpoints;
  struct DraftStates {
    int64_t first_tokens = 0;  // ids[j] holds the state after first_tokens + j tokens
    std::vector<int64_t> ids;  // backend checkpoints, outside m_checkpoints' index
    // The block the step's tokens fill, kept as a decode checkpoint if verification keeps the
    // tokens up to its end (its prefix): its id is one of ids, or (the step's last token ends
    // it) one more.
    std::optional<PendingCheckpoint> block_end;
    // Every state the step saved for the sequence: ids, and block_end's where it is not one of them.
    std::vector<int64_t> saved() const {
      std::vector<int64_t> all = ids;
      if (block_end && std::find(ids.begin(), ids.end(), block_end->id) == ids.end()) all.push_back(block_end->id);
      return all;
    }
  };
  std::unordered_map<SequenceId, DraftStates> m_draft_states;  // the verification step under way

  // Touched only by step() and logits_for() (one thread).
  RequestStates m_requests;
  SpeculationControl m_speculation{0, 0};  // limits set once the model and pool are known
  uint64_t m_num_steps = 0;
  ExpertLoadWindow m_expert_load;  // the last steps' routing counts (mixture of experts)
  std::atomic<bool> m_is_profiling{false};

  RequestInbox m_inbox{m_tokenizer};  // requests and aborts from any thread
};

}  // namespace iwb
