// Iteration-level (continuous) batching over the paged KV cache. Each schedule() plans one
// forward pass: first one decode token for every running sequence (so they keep streaming),
// then prompt chunks of sequences still prefilling, then new sequences admitted first come,
// first served while blocks and the per-step token budget allow. When a decode finds no block,
// the most recently admitted sequence is preempted: its blocks are freed and it goes back to
// the front of the waiting queue to be recomputed (prompt and generated tokens), so it later
// continues exactly where it stopped.
//
// Protocol per step: schedule() -> perform batch.block_copies, run the forward pass over
// batch.sequences -> on_step_done() with a token for every sequence that needed logits.
// Speculative decoding: set_draft() before schedule() gives a decoding sequence K guessed
// tokens, run (and scored) after its last token in the same pass; on_step_done() keeps the
// accepted ones and rolls the rest back (slots released, the block table truncated).
#pragma once

#include "iwb/engine/paged/block_manager.h"
#include "iwb/engine/paged/forward_batch.h"
#include "iwb/engine/paged/sequence.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace iwb {

struct SchedulerConfig {
  int64_t max_batch_tokens = 256;      // tokens per forward pass (decodes + prefill chunks)
  int64_t max_running_sequences = 64;  // capped at max_batch_tokens, so every decode fits each step
  // Admission leaves this many blocks per running sequence available, so admitting a newcomer
  // does not force a preemption at the very next decode.
  int64_t reserved_blocks_per_running = 1;
};

// A sequence the scheduler gave up on, with a message for the user: its prompt can never fit
// the cache, or it grew past the whole cache.
struct FailedSequence {
  SequenceId sequence = 0;
  RequestId request = 0;
  std::string message;
};

struct ScheduledStep {
  ForwardBatch batch;
  std::vector<SequenceId> preempted;   // preempted during this schedule() call
  std::vector<FailedSequence> failed;  // removed (blocks freed) during this call
};

// What the forward pass produced for one sequence of the batch.
struct SequenceOutput {
  SequenceId sequence = 0;
  int32_t token = -1;        // the sampled token, for sequences whose needs_logits was set
  bool is_finished = false;  // end of generation, stop string, token limit: free it now
  // Speculation: how many leading draft tokens were accepted (`token` follows them); the
  // K/V of the rejected ones is dropped.
  int32_t num_accepted_draft_tokens = 0;
};

struct SchedulerStats {
  int64_t num_waiting = 0;
  int64_t num_running = 0;
  int64_t num_preemptions = 0;  // since the start
  int64_t num_failed = 0;
  int64_t num_finished = 0;
  int64_t num_steps = 0;
};

class Scheduler {
 public:
  static Result<Scheduler> create(const BlockManagerConfig& blocks, const SchedulerConfig& config);

  // Queues a sequence. A prompt that can never fit the cache is refused here, with the reason.
  Result<SequenceId> add_sequence(RequestId request, std::vector<int32_t> prompt_tokens);
  // A new sequence sharing all of `parent`'s blocks (several samples of one prompt). Only for a
  // running parent between steps whose last token is sampled but not yet run: the child's last
  // token is replaced by `last_token` (its own sample). Writing the shared last block later
  // copies it (copy-on-write).
  Result<SequenceId> fork(SequenceId parent, RequestId child_request, int32_t last_token);

  ScheduledStep schedule();
  // Applies the forward pass's results to the sequences of the last schedule(). Every
  // sequence whose needs_logits was set must have a token (or be finished); finished ones
  // are freed. Sequences finished or aborted since schedule() are skipped.
  Status on_step_done(std::span<const SequenceOutput> outputs);
  // Removes a sequence at once, waiting or running, freeing its blocks (abort, or a finish
  // decided outside a step).
  Status abort(SequenceId sequence);

  // Whether the sequence decodes next step (running, its last sampled token not yet run):
  // the sequences a drafter can guess for.
  bool is_waiting_to_decode(SequenceId sequence) const;
  // Draft tokens to run after the sequence's last token in the next schedule() only (then
  // forgotten). The plan may carry fewer (token budget, free blocks): batch entries say how
  // many in num_draft_tokens.
  Status set_draft(SequenceId sequence, std::vector<int32_t> draft_tokens);

  // The sequences removed (finished, aborted, failed) since the last call: a backend's state
  // per sequence (recurrent layers) can go with them.
  std::vector<SequenceId> take_removed() { return std::exchange(m_removed, {}); }

  bool has_unfinished() const { return !m_waiting.empty() || !m_running.empty(); }
  const Sequence* find(SequenceId sequence) const;
  std::vector<SequenceId> waiting() const { return {m_waiting.begin(), m_waiting.end()}; }
  const std::vector<SequenceId>& running() const { return m_running; }
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return m_config; }
  const BlockManager& block_manager() const { return m_blocks; }

 private:
  struct Planned {
    SequenceId sequence;
    int64_t num_tokens;            // tokens run this step
    int64_t num_draft_tokens = 0;  // of them, trailing draft tokens (speculation)
  };

  Scheduler(BlockManager blocks, const SchedulerConfig& config) : m_blocks(std::move(blocks)), m_config(config) {}

  Sequence* get(SequenceId sequence);
  bool is_decoding(const Sequence& seq) const;
  void preempt(SequenceId sequence, ScheduledStep& step);
  void fail(SequenceId sequence, std::string message, ScheduledStep& step);
  void remove(SequenceId sequence);
  ScheduledSequence plan_entry(const Sequence& seq, int64_t num_tokens) const;
  // Appends up to the draft's tokens after a planned decode (spec_scheduling.cpp); returns
  // how many. Blocks stay for the decodes of the `num_later_decodes` sequences after it.
  int64_t plan_draft(Sequence& seq, int64_t budget, int64_t num_later_decodes);
  // Takes back the draft tokens of a plan that was never reported (the forward pass failed).
  void roll_back_unreported_drafts();

  BlockManager m_blocks;
  SchedulerConfig m_config;
  std::unordered_map<SequenceId, Sequence> m_sequences;
  std::deque<SequenceId> m_waiting;                               // front is admitted next
  std::vector<SequenceId> m_running;                              // admission order, oldest first
  std::vector<Planned> m_in_flight;                               // the last schedule()'s plan, until on_step_done
  std::unordered_map<SequenceId, std::vector<int32_t>> m_drafts;  // for the next schedule()
  SequenceId m_next_id = 1;
  int64_t m_next_arrival = 0;
  int64_t m_num_preemptions = 0;
  int64_t m_num_failed = 0;
  int64_t m_num_finished = 0;
  int64_t m_num_steps = 0;
  std::vector<SequenceId> m_removed;  // since take_removed()
};

}  // namespace iwb
