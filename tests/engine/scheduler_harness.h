// Test harness for the scheduler: a simulated model whose "attention" reads every earlier token
// back from a real PagedKvStorage through the batch's block tables (K holds the token id, V the
// position), so a wrong slot, table, prefix hit or copy-on-write changes its output; and a
// driver that feeds requests in at given steps and runs the scheduler until all finish.
#pragma once

#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/engine/paged/scheduler.h"
#include "iwb/kernels/dequantize.h"

#include <QtTest>

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace iwb::test {

inline constexpr int32_t kEos = 0;

// The deterministic "model": the next token as a function of the whole sequence so far.
inline int32_t next_token(std::span<const int32_t> history) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : history) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  const int32_t token = static_cast<int32_t>(h % 997);
  return token < 15 ? kEos : token;  // about 1.5% of steps end the sequence
}

// One-at-a-time generation: the output every batched run must reproduce.
inline std::vector<int32_t> reference_output(std::vector<int32_t> tokens, int max_new, bool stop_at_eos = true) {
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < max_new) {
    const int32_t t = next_token(tokens);
    out.push_back(t);
    tokens.push_back(t);
    if (stop_at_eos && t == kEos) break;
  }
  return out;
}

struct TestRequest {
  std::vector<int32_t> prompt;
  int max_new = 16;
  int arrival_step = 0;
  bool stop_at_eos = true;
};

struct RequestRun {
  SequenceId sequence = 0;
  std::vector<int32_t> output;
  bool is_finished = false;
  std::string error;          // add_sequence refusal or scheduler failure
  int first_scheduled_step = -1;
  int64_t arrival_order = 0;
  int max_new = 16;
  bool stop_at_eos = true;
};

class SimModel {
 public:
  SimModel(int32_t block_size, int64_t num_blocks) {
    Result<std::unique_ptr<PagedKvStorage>> s = PagedKvStorage::create({1, 1, 1, 1}, block_size, num_blocks);
    if (!s) qFatal("%s", s.error_message().c_str());
    m_storage = std::move(s).value();
  }

  // Runs one batch: copy-on-write copies, K/V writes of every scheduled token, then for each
  // sequence that needs logits the next token from the history read back from the cache.
  // Returns (sequence, token) pairs; an empty message, or what went wrong.
  std::string run(const ForwardBatch& batch, std::map<SequenceId, int32_t>& sampled) {
    if (!m_storage->copy_blocks(batch.block_copies)) return "bad block copy";
    const int64_t bs = batch.block_size;
    for (const ScheduledSequence& s : batch.sequences) {
      for (size_t i = 0; i < s.tokens.size(); ++i) {
        const int64_t p = s.positions[i];
        if (p != s.num_context_tokens + static_cast<int64_t>(i)) return "positions are not consecutive";
        if (s.slot_mapping[i] != static_cast<int64_t>(s.block_table[static_cast<size_t>(p / bs)]) * bs + p % bs) {
          return "slot mapping disagrees with the block table";
        }
        const float k = static_cast<float>(s.tokens[i]), v = static_cast<float>(p);
        const int64_t slot[1] = {s.slot_mapping[i]};
        if (!m_storage->write(0, slot, &k, &v)) return "write refused";
      }
    }
    for (const ScheduledSequence& s : batch.sequences) {
      if (!s.needs_logits) continue;
      std::vector<int32_t> history;
      for (int64_t p = 0; p < s.sequence_length; ++p) {
        const BlockId block = s.block_table[static_cast<size_t>(p / bs)];
        if (fp16_to_f32(*m_storage->v_slot(0, block, p % bs)) != static_cast<float>(p)) {
          return "sequence " + std::to_string(s.sequence) + " reads position " + std::to_string(p) + " from a slot holding another";
        }
        history.push_back(static_cast<int32_t>(fp16_to_f32(*m_storage->k_slot(0, block, p % bs))));
      }
      sampled[s.sequence] = next_token(history);
    }
    return {};
  }

 private:
  std::unique_ptr<PagedKvStorage> m_storage;
};

struct DriveResult {
  std::vector<RequestRun> runs;  // per request
  int num_steps = 0;
  int64_t num_preemptions = 0;
  int64_t num_copies = 0;
  BlockManagerStats final_blocks;
};

// Hook after each on_step_done, e.g. to fork sequences: (scheduler, runs, step).
using StepHook = std::function<void(Scheduler&, std::vector<RequestRun>&, int)>;
// Extra check of each planned step.
using PlanHook = std::function<void(const Scheduler&, const ScheduledStep&, int)>;

inline DriveResult drive(Scheduler& scheduler, const std::vector<TestRequest>& requests, int max_steps,
                         const StepHook& after_step = {}, const PlanHook& on_plan = {}) {
  DriveResult result;
  result.runs.resize(requests.size());
  std::map<SequenceId, size_t> request_of;
  SimModel model(scheduler.block_manager().block_size(), scheduler.block_manager().num_blocks());
  int last_arrival = 0;
  for (const TestRequest& r : requests) last_arrival = std::max(last_arrival, r.arrival_step);
  for (size_t i = 0; i < requests.size(); ++i) {
    result.runs[i].max_new = requests[i].max_new;
    result.runs[i].stop_at_eos = requests[i].stop_at_eos;
  }
  for (int step = 0; step < max_steps; ++step) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].arrival_step != step) continue;
      Result<SequenceId> id = scheduler.add_sequence(static_cast<RequestId>(i), requests[i].prompt);
      if (!id) {
        result.runs[i].error = id.error_message();
        continue;
      }
      result.runs[i].sequence = *id;
      result.runs[i].arrival_order = scheduler.find(*id)->arrival;
      request_of[*id] = i;
    }
    // Forked children join the map as the hook creates them.
    for (size_t i = requests.size(); i < result.runs.size(); ++i) request_of[result.runs[i].sequence] = i;
    const ScheduledStep plan = scheduler.schedule();
    if (on_plan) on_plan(scheduler, plan, step);
    for (const FailedSequence& f : plan.failed) result.runs[request_of.at(f.sequence)].error = f.message;
    result.num_copies += static_cast<int64_t>(plan.batch.block_copies.size());
    if (plan.batch.num_tokens > scheduler.config().max_batch_tokens) {
      QTest::qFail("a step exceeded the token budget", __FILE__, __LINE__);
      return result;
    }
    for (const ScheduledSequence& s : plan.batch.sequences) {
      RequestRun& run = result.runs[request_of.at(s.sequence)];
      if (run.first_scheduled_step < 0) run.first_scheduled_step = step;
    }
    if (plan.batch.empty() && !scheduler.has_unfinished() && step >= last_arrival) {
      result.num_steps = step;
      break;
    }
    std::map<SequenceId, int32_t> sampled;
    const std::string problem = model.run(plan.batch, sampled);
    if (!problem.empty()) {
      QTest::qFail(("step " + std::to_string(step) + ": " + problem).c_str(), __FILE__, __LINE__);
      return result;
    }
    std::vector<SequenceOutput> outputs;
    for (const auto& [seq, token] : sampled) {
      const size_t i = request_of.at(seq);
      RequestRun& run = result.runs[i];
      run.output.push_back(token);
      run.is_finished = (run.stop_at_eos && token == kEos) || static_cast<int>(run.output.size()) >= run.max_new;
      outputs.push_back({seq, token, run.is_finished});
    }
    const Status done = scheduler.on_step_done(outputs);
    if (!done) {
      QTest::qFail(done.message().c_str(), __FILE__, __LINE__);
      return result;
    }
    const Status consistent = scheduler.block_manager().check_consistency();
    if (!consistent) {
      QTest::qFail(consistent.message().c_str(), __FILE__, __LINE__);
      return result;
    }
    if (after_step) after_step(scheduler, result.runs, step);
    result.num_steps = step + 1;
  }
  result.num_preemptions = scheduler.stats().num_preemptions;
  result.final_blocks = scheduler.block_manager().stats();
  return result;
}

}  // namespace iwb::test
