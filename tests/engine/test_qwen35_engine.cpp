// The engine with recurrent state, on iwb synth's test-qwen35 (F32, the CPU backend): sequences
// batched together, arriving mid-way and preempted for lack of KV blocks give each the greedy
// tokens it gives alone; each running sequence holds exactly one state, released when it
// finishes or is aborted; a prompt comes from the prefix cache only as far as a checkpoint of
// its state (test_state_checkpoints has the rest) and never with checkpoints off; speculative
// decoding is refused; the CPU forward pass refuses a step that does not continue a sequence's state; and
// the profiler's records of the recurrent ops are priced. Also run under ASan.
#include "../kernels/random_tensors.h"
#include "backend/cpu/cpu_forward.h"
#include "flat_batches.h"
#include "forward_checks.h"
#include "model/model_weights.h"
#include "synthesized_engine.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/profile/op_costs.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/spec/drafter.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

using namespace iwb;

using test::greedy_request;
using test::join;
using test::max_relative_error;
using test::one_sequence;
using test::random_tokens;

namespace {

constexpr char kPreset[] = "test-qwen35";

// The CPU (the recurrent states under test live in its backend), two threads; batch-invariant
// matmuls, so that batched and lone runs must agree token for token (the fast kernels take other
// code for other token counts, which may flip a near-tie; the recurrent kernels run token by
// token either way).
EngineOptions cpu_options(int64_t max_batch_tokens = 32) {
  EngineOptions o;
  o.device = "cpu";
  o.num_threads = 2;
  o.max_batch_tokens = max_batch_tokens;
  o.is_batch_invariant = true;
  return o;
}

// What the steps showed while the engine ran.
struct RunLog {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, RequestFinished> finished;
  int max_sequences_in_step = 0;
  int64_t num_preemptions = 0;
  int64_t num_prompt_tokens = 0;  // prompt tokens computed, recomputation included
  bool has_mixed_step = false;    // prompt tokens and decodes in one forward pass
  int64_t max_states = 0;         // the most recurrent states held after a step
  std::string error;
};

bool run_step(Engine& engine, RunLog* log) {
  Result<StepResult> s = engine.step();
  if (!s) {
    log->error = s.error_message();
    return false;
  }
  for (const TokenEvent& e : s->tokens) log->tokens[e.request].push_back(e.token);
  for (const RequestFinished& f : s->finished) log->finished[f.request] = f;
  log->max_sequences_in_step = std::max(log->max_sequences_in_step, s->stats.num_sequences);
  log->num_preemptions += s->stats.num_preemptions;
  log->num_prompt_tokens += s->stats.num_prompt_tokens;
  log->has_mixed_step |= s->stats.num_prompt_tokens > 0 && s->stats.num_decode_tokens > 0;
  log->max_states = std::max(log->max_states, engine.memory_report().recurrent_num_sequences);
  return true;
}

void run_until_idle(Engine& engine, RunLog* log) {
  while (engine.has_unfinished_requests() && run_step(engine, log)) {
  }
}

// Prompts shorter and longer than a KV block (16) and than the step budget (32), each its own
// number of new tokens.
std::vector<GenerationRequest> mixed_requests(int64_t vocab) {
  const size_t lengths[] = {5, 17, 40, 3, 70};
  const int32_t generated[] = {24, 16, 20, 30, 12};
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < std::size(lengths); ++i) {
    requests.push_back(greedy_request(random_tokens(lengths[i], vocab, 100 + static_cast<uint32_t>(i)), generated[i]));
  }
  return requests;
}

// Each request alone, one after another on one engine: the tokens batching must reproduce.
std::vector<std::vector<int32_t>> one_at_a_time(Engine& engine, const std::vector<GenerationRequest>& requests) {
  std::vector<std::vector<int32_t>> out;
  for (const GenerationRequest& r : requests) {
    Result<RequestId> id = engine.add_request(r);
    if (!id) return {};
    RunLog log;
    run_until_idle(engine, &log);
    out.push_back(log.tokens[*id]);
  }
  return out;
}

}  // namespace

class TestQwen35Engine : public QObject {
  Q_OBJECT

  test::SynthesizedEngine m_model;

  std::unique_ptr<Engine> load(const EngineOptions& options) const { return m_model.load(options); }

 private slots:
  void initTestCase() {
    const std::string error = m_model.synthesize(kPreset, "F32");
    QVERIFY2(error.empty(), error.c_str());
  }

  // Five requests, three at first and two arriving after three steps, under a 32-token budget
  // (long prompts prefill in chunks beside the others' decodes): each keeps its own state, so
  // each gets the tokens it gets alone.
  void batchedGreedyMatchesOneAtATime() {
    std::unique_ptr<Engine> alone = load(cpu_options());
    std::unique_ptr<Engine> engine = load(cpu_options());
    QVERIFY(alone && engine);
    const std::vector<GenerationRequest> requests = mixed_requests(engine->config().vocab_size);
    const auto expected = one_at_a_time(*alone, requests);
    QCOMPARE(expected.size(), requests.size());

    std::vector<RequestId> ids;
    RunLog log;
    for (size_t i = 0; i < 3; ++i) ids.push_back(*engine->add_request(requests[i]));
    for (int s = 0; s < 3; ++s) QVERIFY2(run_step(*engine, &log), log.error.c_str());
    for (size_t i = 3; i < requests.size(); ++i) ids.push_back(*engine->add_request(requests[i]));
    run_until_idle(*engine, &log);
    QVERIFY2(log.error.empty(), log.error.c_str());
    QVERIFY2(log.max_sequences_in_step >= 4, "the requests were not served together");
    QVERIFY2(log.has_mixed_step, "no step prefilled beside decodes");
    QCOMPARE(log.num_preemptions, int64_t(0));
    QVERIFY(log.max_states >= 4);
    for (size_t i = 0; i < ids.size(); ++i) {
      QCOMPARE(log.finished[ids[i]].reason, FinishReason::MaxTokens);
      QCOMPARE(log.tokens[ids[i]], expected[i]);
    }
    QCOMPARE(engine->memory_report().recurrent_state_bytes, uint64_t(0));
  }

  // Room for 14 blocks of 8 positions where the five sequences grow to 33 together: sequences
  // are preempted, recomputed from position 0 or from a checkpoint of their prompt's state
  // (never continued from what they had seen), and still produce exactly their tokens.
  void preemptedGenerationMatchesOneAtATime() {
    EngineOptions roomy = cpu_options();
    roomy.kv_block_size = 8;
    std::unique_ptr<Engine> alone = load(roomy);
    QVERIFY(alone);
    EngineOptions tiny = roomy;
    tiny.kv_cache_bytes = 14 * 8 * alone->memory_report().kv_bytes_per_position;
    std::unique_ptr<Engine> engine = load(tiny);
    QVERIFY(engine);
    QCOMPARE(engine->memory_report().kv_num_blocks, int64_t(14));
    const std::vector<GenerationRequest> requests = mixed_requests(engine->config().vocab_size);
    const auto expected = one_at_a_time(*alone, requests);
    QCOMPARE(expected.size(), requests.size());

    std::vector<RequestId> ids;
    for (const GenerationRequest& r : requests) ids.push_back(*engine->add_request(r));
    RunLog log;
    run_until_idle(*engine, &log);
    QVERIFY2(log.error.empty(), log.error.c_str());
    QVERIFY2(log.num_preemptions > 0, "the tiny KV budget forced no preemption");
    int64_t num_reported = 0, num_prompt_tokens = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const RequestFinished& f = log.finished[ids[i]];
      QCOMPARE(f.reason, FinishReason::MaxTokens);
      QCOMPARE(log.tokens[ids[i]], expected[i]);
      num_reported += f.num_preemptions;
      num_prompt_tokens += static_cast<int64_t>(requests[i].prompt_tokens.size());
    }
    QCOMPARE(num_reported, log.num_preemptions);
    // Recomputation runs the preempted sequences' tokens again, from their first.
    QVERIFY2(log.num_prompt_tokens > num_prompt_tokens, "nothing was recomputed");
    QCOMPARE(engine->memory_report().recurrent_state_bytes, uint64_t(0));
  }

  // One state per running sequence, of ModelConfig::recurrent_state_bytes() (counted here from
  // the shape: 6 recurrent layers of a 3-input convolution history over 512 channels and 4 value
  // heads of 64 x 64); a request aborted mid-generation gives its state back at once, the others
  // as they finish.
  void statesFollowTheRunningSequences() {
    std::unique_ptr<Engine> engine = load(cpu_options(64));
    QVERIFY(engine);
    const ModelConfig& c = engine->config();
    const auto recurrent = std::count(c.is_recurrent_layer.begin(), c.is_recurrent_layer.end(), true);
    const int64_t channels =
        2 * c.linear_num_key_heads * c.linear_head_dim + c.linear_num_value_heads * c.linear_head_dim;
    const auto per_sequence = static_cast<uint64_t>(
        recurrent *
        ((c.linear_conv_kernel - 1) * channels + c.linear_num_value_heads * c.linear_head_dim * c.linear_head_dim) * 4);
    QCOMPARE(per_sequence, uint64_t(6 * (3 * 512 + 4 * 64 * 64) * 4));
    QCOMPARE(c.recurrent_state_bytes(), per_sequence);
    MemoryReport m = engine->memory_report();
    QCOMPARE(m.recurrent_state_bytes_per_sequence, per_sequence);
    QCOMPARE(m.recurrent_state_bytes, uint64_t(0));

    std::vector<RequestId> ids;
    for (uint32_t i = 0; i < 3; ++i) {
      ids.push_back(*engine->add_request(greedy_request(random_tokens(5 + 4 * i, c.vocab_size, 30 + i), 12)));
    }
    RunLog log;
    QVERIFY2(run_step(*engine, &log), log.error.c_str());  // the three prompts in one pass
    m = engine->memory_report();
    QCOMPARE(m.recurrent_num_sequences, int64_t(3));
    QCOMPARE(m.recurrent_state_bytes, 3 * per_sequence);
    QVERIFY2(run_step(*engine, &log), log.error.c_str());
    engine->abort_request(ids[1]);
    QVERIFY2(run_step(*engine, &log), log.error.c_str());
    QCOMPARE(log.finished[ids[1]].reason, FinishReason::Aborted);
    QCOMPARE(engine->memory_report().recurrent_state_bytes, 2 * per_sequence);
    run_until_idle(*engine, &log);
    QVERIFY2(log.error.empty(), log.error.c_str());
    QCOMPARE(log.finished[ids[0]].reason, FinishReason::MaxTokens);
    m = engine->memory_report();
    QCOMPARE(m.recurrent_state_bytes, uint64_t(0));
    QCOMPARE(m.recurrent_num_sequences, int64_t(0));
  }

  // The last running request aborted: the step that ends it runs no forward pass, and its state
  // must still go (an idle engine holds none).
  void abortingTheLastRequestReleasesItsState() {
    std::unique_ptr<Engine> engine = load(cpu_options());
    QVERIFY(engine);
    const RequestId id = *engine->add_request(greedy_request(random_tokens(9, engine->config().vocab_size, 41), 20));
    RunLog log;
    for (int s = 0; s < 3; ++s) QVERIFY2(run_step(*engine, &log), log.error.c_str());
    QCOMPARE(engine->memory_report().recurrent_num_sequences, int64_t(1));
    engine->abort_request(id);
    QVERIFY2(run_step(*engine, &log), log.error.c_str());
    QCOMPARE(log.finished[id].reason, FinishReason::Aborted);
    QVERIFY(!engine->has_unfinished_requests());
    QCOMPARE(engine->memory_report().recurrent_state_bytes, uint64_t(0));
  }

  // logits_for's temporary sequence ends with the call: no state is left behind (but a
  // checkpoint of its state after 32 tokens), and the same tokens twice (with other tokens
  // between) give the same logits, bit for bit: a repeat resumes from the checkpoint, which holds
  // exactly the state the first run had there.
  void logitsForIsRepeatableAndLeavesNoState() {
    std::unique_ptr<Engine> engine = load(cpu_options());
    QVERIFY(engine);
    const std::vector<int32_t> tokens = random_tokens(40, engine->config().vocab_size, 51);
    Result<std::vector<float>> first = engine->logits_for(tokens);
    QVERIFY2(first.is_ok(), first.error_message().c_str());
    Result<std::vector<float>> again = engine->logits_for(tokens);
    QVERIFY2(again.is_ok(), again.error_message().c_str());
    QCOMPARE(*again, *first);
    std::vector<int32_t> other = tokens;
    other.back() = other.back() == 3 ? 4 : 3;
    Result<std::vector<float>> differs = engine->logits_for(other);
    QVERIFY2(differs.is_ok(), differs.error_message().c_str());
    QVERIFY(*differs != *first);
    Result<std::vector<float>> third = engine->logits_for(tokens);
    QVERIFY2(third.is_ok(), third.error_message().c_str());
    QCOMPARE(*third, *first);
    QCOMPARE(engine->kv_snapshot().cache.stats.num_prefix_hit_tokens, int64_t(3 * 32));
    QCOMPARE(engine->memory_report().recurrent_state_bytes, uint64_t(0));
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(1));
    // logits_for_positions (perplexity) the same: its last row is logits_for's.
    std::vector<float> last;
    const Status s = engine->logits_for_positions(tokens, 35, [&](int64_t, std::span<const float> row) {
      last.assign(row.begin(), row.end());
      return Status{};
    });
    QVERIFY2(s.is_ok(), s.message().c_str());
    QVERIFY(max_relative_error(last, *first) < 1e-5);
    QCOMPARE(engine->memory_report().recurrent_state_bytes, uint64_t(0));
  }

  // With state checkpoints off, prefix caching asked for (the default) is off too: a second
  // identical 40-token prompt (two whole blocks of 16 another model would reuse) is computed
  // from its first token, and no block is kept for later prompts.
  void identicalPromptIsComputedAgainWithoutCheckpoints() {
    EngineOptions options = cpu_options(64);
    QVERIFY(options.enable_prefix_caching);
    options.max_state_checkpoints = 0;
    std::unique_ptr<Engine> engine = load(options);
    QVERIFY(engine);
    const GenerationRequest r = greedy_request(random_tokens(40, engine->config().vocab_size, 61), 6);
    RunLog first, second;
    const RequestId a = *engine->add_request(r);
    run_until_idle(*engine, &first);
    QCOMPARE(engine->kv_snapshot().cache.stats.num_cached_blocks, int64_t(0));
    QCOMPARE(engine->memory_report().kv_positions_cached, int64_t(0));
    const RequestId b = *engine->add_request(r);
    run_until_idle(*engine, &second);
    QVERIFY2(first.error.empty() && second.error.empty(), (first.error + second.error).c_str());
    QCOMPARE(second.num_prompt_tokens, int64_t(40));
    QCOMPARE(second.finished[b].num_reused_prompt_tokens, 0);
    const BlockManagerStats stats = engine->kv_snapshot().cache.stats;
    QCOMPARE(stats.num_prefix_hit_tokens, int64_t(0));
    QCOMPARE(stats.num_cached_blocks, int64_t(0));
    QCOMPARE(second.tokens[b], first.tokens[a]);
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(0));
  }

  // Nor can a model with recurrent layers draft for another: its state would hold the guesses
  // the target rejects (test-qwen2 shares test-qwen35's synthetic vocabulary).
  void recurrentDraftModelIsRefused() {
    const std::string target_path = m_model.file_path("test-qwen2.gguf");
    const std::string error = test::synthesize_preset("test-qwen2", "F32", 0, target_path);
    QVERIFY2(error.empty(), error.c_str());
    auto target = Engine::load(target_path, cpu_options());
    QVERIFY2(target.is_ok(), target.error_message().c_str());
    spec::SpeculativeConfig config;
    config.kind = spec::DrafterKind::DraftModel;
    config.draft_model_path = m_model.path();
    const Status s = (*target)->set_speculation(config);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("cannot draft: its recurrent layers") != std::string::npos, s.message().c_str());
    QVERIFY(!(*target)->speculation().is_enabled());
  }

  // The CPU forward pass itself: a step of a model with recurrent layers must name its
  // sequences, run each sequence's tokens in order, and continue a state exactly where it ended
  // (or restart it at 0); a refused step changes no state, and a restart gives a fresh
  // sequence's logits.
  void forwardRefusesStepsThatDoNotContinueTheState() {
    test::CpuPass pass;
    const std::string error = test::open_cpu_pass(m_model.path(), &pass);
    QVERIFY2(error.empty(), error.c_str());
    CpuForward& forward = *pass.forward;
    const auto vocab = static_cast<size_t>(pass.config.vocab_size);
    std::vector<float> logits(2 * vocab);
    auto run = [&](const FlatBatch& b) { return forward.forward(b, *pass.kv, logits.data()); };
    auto row = [&](size_t i) {
      return std::vector<float>(logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
    };
    const std::vector<int32_t> tokens = random_tokens(6, pass.config.vocab_size, 81);
    const std::vector<int32_t> first5(tokens.begin(), tokens.begin() + 5);
    const std::vector<int32_t> last1(tokens.begin() + 5, tokens.end());
    auto expect_refused = [&](const FlatBatch& b, const std::string& words) {
      const Status s = run(b);
      QVERIFY2(!s.is_ok(), ("accepted a step that should say: " + words).c_str());
      QVERIFY2(s.message().find(words) != std::string::npos, s.message().c_str());
    };

    // The whole six tokens as sequence 1: what the others must reproduce.
    QVERIFY(run(one_sequence(1, 0, tokens, 0)).is_ok());
    const std::vector<float> whole = row(0);
    QCOMPARE(forward.recurrent_state_bytes(), pass.config.recurrent_state_bytes());

    FlatBatch unnamed = one_sequence(2, 1, first5, 0);
    unnamed.sequence_ids.clear();
    expect_refused(unnamed, "names no sequence ids");
    FlatBatch shuffled = one_sequence(2, 1, first5, 0);
    std::swap(shuffled.positions[1], shuffled.positions[2]);
    expect_refused(shuffled, "in order");
    QCOMPARE(forward.recurrent_state_bytes(), pass.config.recurrent_state_bytes());  // no state for 2 yet

    QVERIFY(run(one_sequence(2, 1, first5, 0)).is_ok());
    expect_refused(one_sequence(2, 1, last1, 6), "continues at position 6 but its recurrent state has seen 5 tokens");
    expect_refused(one_sequence(2, 1, last1, 3), "continues at position 3 but its recurrent state has seen 5 tokens");
    expect_refused(one_sequence(3, 2, last1, 5), "continues at position 5 but its recurrent state has seen nothing");
    // Sequence 2 continuing right beside a sequence that cannot: the whole step is refused before
    // any op runs, so 2's state is still at 5 tokens afterwards.
    expect_refused(join(one_sequence(2, 1, last1, 5), one_sequence(3, 2, last1, 4)), "has seen nothing");
    QVERIFY(run(one_sequence(2, 1, last1, 5)).is_ok());
    const double continued = max_relative_error(row(0), whole);
    QVERIFY2(continued < 1e-5, qPrintable(QString("continued 5 + 1: relative error %1").arg(continued)));

    // A restart at 0 forgets what the state had seen: the same logits as a fresh sequence.
    QVERIFY(run(one_sequence(2, 1, tokens, 0)).is_ok());
    const double restarted = max_relative_error(row(0), whole);
    QVERIFY2(restarted < 1e-6, qPrintable(QString("restarted: relative error %1").arg(restarted)));
    // Two sequences in one step, each from its own state.
    QVERIFY(run(join(one_sequence(4, 2, first5, 0), one_sequence(5, 3, tokens, 0))).is_ok());
    QVERIFY(max_relative_error(row(1), whole) < 1e-5);
    QVERIFY(run(join(one_sequence(5, 3, {tokens[0]}, 6), one_sequence(4, 2, last1, 5))).is_ok());
    QVERIFY(max_relative_error(row(1), whole) < 1e-5);
    QCOMPARE(forward.recurrent_state_bytes(), 4 * pass.config.recurrent_state_bytes());
    const SequenceId ended[] = {1, 2, 4, 5, 99};
    forward.release_sequences(ended);
    QCOMPARE(forward.recurrent_state_bytes(), uint64_t(0));
    // A released sequence cannot continue; it can start again.
    expect_refused(one_sequence(4, 2, last1, 6), "has seen nothing");
    QVERIFY(run(one_sequence(4, 2, tokens, 0)).is_ok());
  }

  // The profiler sees each recurrent layer's convolution and delta rule (OpKind::Recurrent,
  // priced for the step's tokens and sequences, each sequence reading and writing its state),
  // and no attention there; a one-sequence step's records are the cost model's, record by record.
  void profilerRecordsTheRecurrentOps() {
    std::unique_ptr<Engine> engine = load(cpu_options(64));
    QVERIFY(engine);
    const ModelConfig& c = engine->config();
    engine->set_profiling(true);
    QVERIFY(engine->add_request(greedy_request(random_tokens(6, c.vocab_size, 91), 3)).is_ok());
    QVERIFY(engine->add_request(greedy_request(random_tokens(11, c.vocab_size, 92), 3)).is_ok());
    for (const auto& [phase, num_tokens] : {std::pair{Phase::Prefill, 17}, std::pair{Phase::Decode, 2}}) {
      Result<StepResult> step = engine->step();
      QVERIFY2(step.is_ok(), step.error_message().c_str());
      const ProfileBatch& pb = step->profile;
      QCOMPARE(pb.phase, phase);
      QCOMPARE(pb.num_tokens, num_tokens);
      QCOMPARE(pb.num_dropped, 0u);
      for (int64_t il = 0; il < c.num_layers; ++il) {
        std::map<std::string, const KernelRecord*> in_layer;
        for (const KernelRecord& r : pb.kernels) {
          if (r.layer == il) in_layer[r.name] = &r;
        }
        const QByteArray where = "layer " + QByteArray::number(qlonglong(il));
        if (!c.is_recurrent(il)) {
          QVERIFY2(in_layer.count("ssm_conv") == 0 && in_layer.count("delta_net") == 0, where.constData());
          QVERIFY2(in_layer.count("attention") == 1, where.constData());
          continue;
        }
        QVERIFY2(in_layer.count("ssm_conv") == 1 && in_layer.count("delta_net") == 1, where.constData());
        QVERIFY2(in_layer.count("attention") == 0, where.constData());
        const KernelRecord want[] = {
            op_costs::short_conv(static_cast<int>(il), num_tokens, 2, c.linear_conv_channels(), c.linear_conv_kernel),
            op_costs::delta_net(static_cast<int>(il), num_tokens, 2, c.linear_num_key_heads, c.linear_num_value_heads,
                                c.linear_head_dim)};
        for (const KernelRecord& w : want) {
          const KernelRecord& r = *in_layer.at(w.name);
          QVERIFY2(r.kind == OpKind::Recurrent && r.phase == phase, (where + " " + r.name).constData());
          QCOMPARE(r.shape.num_tokens, int64_t(num_tokens));
          QVERIFY(r.flops > 0 && r.bytes > 0 && r.seconds >= 0);
          QCOMPARE(r.flops, w.flops);
          QCOMPARE(r.bytes, w.bytes);  // two sequences: two states read and written
        }
      }
    }
    // A lone sequence: the whole step's records against the cost model's prediction.
    engine->set_profiling(false);
    RunLog log;
    run_until_idle(*engine, &log);
    engine->set_profiling(true);
    QVERIFY(engine->add_request(greedy_request(random_tokens(10, c.vocab_size, 93), 2)).is_ok());
    Result<StepResult> step = engine->step();
    QVERIFY2(step.is_ok(), step.error_message().c_str());
    auto shape = model_shape_from_gguf(m_model.path());
    QVERIFY2(shape.is_ok(), shape.error_message().c_str());
    auto predicted = predict_step(*shape, {Phase::Prefill, 10, 0, 64, true});
    QVERIFY2(predicted.is_ok(), predicted.error_message().c_str());
    const std::vector<KernelRecord>& measured = step->profile.kernels;
    QCOMPARE(measured.size(), predicted->size());
    for (size_t i = 0; i < measured.size(); ++i) {
      const KernelRecord &m = measured[i], &p = (*predicted)[i];
      const QByteArray where = QByteArray::number(qulonglong(i)) + ": " + m.name + " vs " + p.name;
      QVERIFY2(std::string(m.name) == p.name && m.layer == p.layer && m.kind == p.kind, where.constData());
      QCOMPARE(m.flops, p.flops);
      QCOMPARE(m.bytes, p.bytes);
    }
  }
};

QTEST_GUILESS_MAIN(TestQwen35Engine)
#include "test_qwen35_engine.moc"
