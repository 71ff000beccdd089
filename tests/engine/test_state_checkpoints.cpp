// Prefix caching for a model with recurrent layers (Qwen 3.5, iwb synth's test-qwen35 on the
// CPU): states kept at prompts' and replies' last block boundaries (StateCheckpoints), the block manager
// offering a cached prefix only as far as such a state, the CPU forward pass saving states part
// way through a step's tokens and starting sequences from them, and the engine's chat turns,
// regenerated replies and `iwb bench -d` resuming from them with the tokens and logits of a run
// that computes everything. Also run under ASan.
#include "../kernels/random_tensors.h"
#include "backend/cpu/cpu_forward.h"
#include "flat_batches.h"
#include "forward_checks.h"
#include "model/model_weights.h"
#include "runtime/state_checkpoints.h"
#include "synthesized_engine.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/paged/block_manager.h"
#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/engine/profile/bench.h"
#include "iwb/engine/runtime/engine.h"

#include <QtTest>

#include <map>

using namespace iwb;

using test::engine_greedy;
using test::greedy_request;
using test::max_relative_error;
using test::one_sequence;
using test::random_tokens;

namespace {

// Batch-invariant matmuls: a prompt resumed from a checkpoint computes fewer rows than one
// computed whole, and must still give the same tokens (see test_qwen35_engine).
EngineOptions cpu_options(int32_t max_checkpoints) {
  EngineOptions o;
  o.device = "cpu";
  o.num_threads = 2;
  o.max_batch_tokens = 64;
  o.is_batch_invariant = true;
  o.max_state_checkpoints = max_checkpoints;
  return o;
}

struct Finished {
  std::vector<int32_t> tokens;
  int32_t num_reused = 0;
  std::string error;
};

// Runs one greedy request to its end.
Finished generate(Engine& engine, const std::vector<int32_t>& prompt, int n) {
  test::EngineRun run = test::run_to_end(engine, {greedy_request(prompt, n)});
  if (run.ids.empty()) return {{}, 0, run.error};
  const RequestId id = run.ids[0];
  return {std::move(run.tokens[id]), run.finished.count(id) ? run.finished[id].num_reused_prompt_tokens : 0, run.error};
}

std::vector<int32_t> concatenated(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

class TestStateCheckpoints : public QObject {
  Q_OBJECT

  test::SynthesizedEngine m_model;

 private slots:
  void initTestCase() {
    const std::string error = m_model.synthesize("test-qwen35", "F32");
    QVERIFY2(error.empty(), error.c_str());
  }

  // After the last full block (a continuation's longest reuse) and after the last block a
  // repeat can take (its last token is computed again); nothing inside the first block.
  void positionsAreThePromptsLastBlockBoundaries() {
    using V = std::vector<int64_t>;
    QCOMPARE(StateCheckpoints::positions(40, 16), V({32}));
    QCOMPARE(StateCheckpoints::positions(32, 16), V({16, 32}));
    QCOMPARE(StateCheckpoints::positions(16, 16), V({16}));
    QCOMPARE(StateCheckpoints::positions(17, 16), V({16}));
    QCOMPARE(StateCheckpoints::positions(15, 16), V());
    QCOMPARE(StateCheckpoints::positions(1, 16), V());
    QCOMPARE(StateCheckpoints::positions(9, 8), V({8}));
    // With a minimum step, also every step (whole blocks, at least one) before those.
    QCOMPARE(StateCheckpoints::positions(100, 16, 32), V({32, 64, 96}));
    QCOMPARE(StateCheckpoints::positions(100, 16, 40), V({32, 64, 96}));
    QCOMPARE(StateCheckpoints::positions(100, 16, 8), V({16, 32, 48, 64, 80, 96}));
    QCOMPARE(StateCheckpoints::positions(97, 16, 48), V({48, 96}));
    QCOMPARE(StateCheckpoints::positions(96, 16, 48), V({48, 80, 96}));
    QCOMPARE(StateCheckpoints::positions(20, 16, 16), V({16}));
    QCOMPARE(StateCheckpoints(4, 32).positions_of(100, 16), V({32, 64, 96}));
  }

  // --checkpoint-min-step: a long prompt keeps its state part way too, so a prompt that shares
  // only its beginning resumes there (with the tokens of an engine that computes it whole);
  // with the default step (8,192) the same prompts share nothing usable.
  void longPromptsKeepStatesPartWay() {
    EngineOptions stepped = cpu_options(32);
    stepped.checkpoint_min_step = 32;
    std::unique_ptr<Engine> engine = m_model.load(stepped);
    std::unique_ptr<Engine> plain = m_model.load(cpu_options(32));
    std::unique_ptr<Engine> whole = m_model.load(cpu_options(0));
    QVERIFY(engine && plain && whole);
    const int64_t vocab = engine->config().vocab_size;
    const std::vector<int32_t> document = random_tokens(100, vocab, 51);
    QVERIFY(generate(*engine, document, 2).error.empty());
    QVERIFY(generate(*plain, document, 2).error.empty());
    // After 32, 64 and 96 (the prompt's), and the reply's block (none: it ends inside 96..112).
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(3));
    QCOMPARE(plain->memory_report().recurrent_num_checkpoints, int64_t(1));

    std::vector<int32_t> other(document.begin(), document.begin() + 70);
    const std::vector<int32_t> question = random_tokens(9, vocab, 52);
    other.insert(other.end(), question.begin(), question.end());
    const Finished resumed = generate(*engine, other, 5);
    QVERIFY2(resumed.error.empty(), resumed.error.c_str());
    QCOMPARE(resumed.num_reused, 64);
    QCOMPARE(resumed.tokens, engine_greedy(*whole, other, 5));
    QCOMPARE(generate(*plain, other, 5).num_reused, 0);
  }

  // A checkpoint is found by its key and its exact tokens (another prefix under the same key is
  // a miss); the least recently used goes first; a key saved again replaces its older state.
  void indexKeepsTheRecentlyUsedWithinCapacity() {
    StateCheckpoints index(2);
    QVERIFY(index.is_enabled());
    QVERIFY(!StateCheckpoints(0).is_enabled());
    const std::vector<int32_t> a = {1, 2, 3}, b = {4, 5, 6}, c = {7, 8, 9};
    const int64_t ia = index.next_id(), ib = index.next_id(), ic = index.next_id();
    QVERIFY(index.add(10, a, ia).empty());
    QVERIFY(index.add(20, b, ib).empty());
    QVERIFY(index.has(10, a));
    QVERIFY(!index.has(10, b));  // a collision of keys is a miss
    QVERIFY(!index.has(30, a));
    QCOMPARE(index.use(10, a), std::optional<int64_t>(ia));  // a is now newer than b
    QCOMPARE(index.add(30, c, ic), std::vector<int64_t>({ib}));
    QVERIFY(!index.has(20, b));
    QCOMPARE(index.size(), size_t(2));
    const int64_t again = index.next_id();
    QCOMPARE(index.add(10, a, again), std::vector<int64_t>({ia}));
    QCOMPARE(index.use(10, a), std::optional<int64_t>(again));
    QCOMPARE(index.use(20, b), std::optional<int64_t>());
    // With no room, a new state is given straight back.
    StateCheckpoints none(0);
    QCOMPARE(none.add(10, a, 7), std::vector<int64_t>({7}));
  }

  // The block manager cuts a cached prefix back to the longest one the model can resume, in
  // can_allocate's count and in allocate's hit alike.
  void blockManagerOffersOnlyUsablePrefixes() {
    std::vector<int64_t> usable = {16};
    BlockManagerConfig config;
    config.num_blocks = 16;
    config.block_size = 8;
    config.is_usable_prefix = [&](BlockHash, std::span<const int32_t> prefix) {
      return std::find(usable.begin(), usable.end(), static_cast<int64_t>(prefix.size())) != usable.end();
    };
    Result<BlockManager> made = BlockManager::create(config);
    QVERIFY2(made.is_ok(), made.error_message().c_str());
    BlockManager& blocks = *made;
    const std::vector<int32_t> tokens = random_tokens(41, 1000, 5);
    QCOMPARE(*blocks.allocate(1, tokens), int64_t(0));
    QVERIFY(blocks.mark_computed(1, 41).is_ok());
    QVERIFY(blocks.prefix_key(1, 16).has_value());
    QVERIFY(!blocks.prefix_key(1, 12).has_value());
    QVERIFY(!blocks.prefix_key(1, 48).has_value());
    // Five full blocks in use by sequence 1; only the prefix of 16 is usable: two shared, four new.
    QCOMPARE(blocks.can_allocate(tokens).num_new_blocks, int64_t(6 - 2));
    QCOMPARE(*blocks.allocate(2, tokens), int64_t(16));
    QCOMPARE(blocks.block_table(2)[1], blocks.block_table(1)[1]);
    QVERIFY(blocks.block_table(2)[2] != blocks.block_table(1)[2]);
    // Sequence 2 computes its blocks 2 to 4 again (duplicates of 1's) and goes on to a sixth
    // full block of its own: it is registered after 1's chain, so a later prompt reaches it.
    std::vector<int32_t> longer = tokens;
    for (int i = 0; i < 7; ++i) {
      longer.push_back(100 + i);
      QVERIFY(blocks.append_slot(2, longer.back()).is_ok());
    }
    QVERIFY(blocks.mark_computed(2, 48).is_ok());
    QVERIFY(blocks.free(1).is_ok());
    QVERIFY(blocks.free(2).is_ok());
    usable = {16, 32, 48};
    longer.push_back(1);
    QCOMPARE(*blocks.allocate(3, longer), int64_t(48));
    QVERIFY(blocks.free(3).is_ok());
    usable.clear();
    QCOMPARE(*blocks.allocate(4, tokens), int64_t(0));
    QVERIFY(blocks.check_consistency().is_ok());
  }

  // The CPU pass saves a state part way through a step (after 16 of 30 tokens) and at its end;
  // another sequence started from either continues exactly as the whole run: the same logits.
  // A save outside the step's tokens, or naming a sequence without tokens, is refused; a
  // checkpoint never saved cannot be restored.
  void forwardSavesPartWayAndRestores() {
    test::CpuPass pass;
    const std::string error = test::open_cpu_pass(m_model.path(), &pass);
    QVERIFY2(error.empty(), error.c_str());
    CpuForward& forward = *pass.forward;
    const auto vocab = static_cast<size_t>(pass.config.vocab_size);
    std::vector<float> logits(vocab);
    const std::vector<int32_t> tokens = random_tokens(30, pass.config.vocab_size, 7);
    const std::vector<int32_t> tail(tokens.begin() + 16, tokens.end());

    FlatBatch whole = one_sequence(1, 0, tokens, 0);
    whole.state_saves = {{0, 16, 100}, {0, 30, 101}};
    QVERIFY(forward.forward(whole, *pass.kv, logits.data()).is_ok());
    const std::vector<float> expected = logits;
    QCOMPARE(forward.recurrent_num_checkpoints(), size_t(2));
    QCOMPARE(forward.recurrent_checkpoint_bytes(), 2 * pass.config.recurrent_state_bytes());

    // Sequence 2 shares sequence 1's blocks (the prefix cache's part) and starts after 16 tokens.
    QVERIFY(forward.restore_state(2, 100, 16).is_ok());
    QVERIFY(forward.forward(one_sequence(2, 0, tail, 16), *pass.kv, logits.data()).is_ok());
    const double resumed = max_relative_error(logits, expected);
    QVERIFY2(resumed < 1e-6, qPrintable(QString("resumed after 16: relative error %1").arg(resumed)));
    // From the end of the step: one more token continues as sequence 1 does.
    QVERIFY(forward.restore_state(3, 101, 30).is_ok());
    FlatBatch next = one_sequence(3, 0, {tokens[0]}, 30);
    next.block_tables = {0, 1};
    QVERIFY(forward.forward(next, *pass.kv, logits.data()).is_ok());
    const std::vector<float> from_checkpoint = logits;
    next.sequence_ids = {1};
    QVERIFY(forward.forward(next, *pass.kv, logits.data()).is_ok());
    QVERIFY(max_relative_error(from_checkpoint, logits) < 1e-6);

    auto refused = [&](FlatBatch b, const std::string& words) {
      const Status s = forward.forward(b, *pass.kv, logits.data());
      if (s.is_ok()) return std::string("accepted a step that should say: ") + words;
      return s.message().find(words) == std::string::npos ? s.message() : std::string();
    };
    FlatBatch early = one_sequence(4, 1, tokens, 0);
    early.state_saves = {{0, 0, 102}};
    QCOMPARE(refused(early, "lies outside this step's 1..30"), std::string());
    FlatBatch late = one_sequence(4, 1, tail, 16);
    QVERIFY(forward.restore_state(4, 100, 16).is_ok());
    late.state_saves = {{0, 31, 102}};
    QCOMPARE(refused(late, "lies outside this step's 17..30"), std::string());
    FlatBatch stranger = one_sequence(4, 1, tokens, 0);
    stranger.state_saves = {{1, 8, 102}};
    QCOMPARE(refused(stranger, "names batch sequence 1, which has no tokens"), std::string());
    QCOMPARE(forward.recurrent_num_checkpoints(), size_t(2));  // nothing kept from refused steps

    const Status missing = forward.restore_state(5, 999, 16);
    QVERIFY(!missing.is_ok());
    QVERIFY2(missing.message().find("checkpoint 999, which is not kept") != std::string::npos,
             missing.message().c_str());
    const int64_t dropped[] = {100, 101};
    forward.drop_state_checkpoints(dropped);
    QCOMPARE(forward.recurrent_num_checkpoints(), size_t(0));
    QVERIFY(!forward.restore_state(2, 100, 16).is_ok());
  }

  // A chat's next turn (the last prompt, the reply, a new message) resumes after the reply's last
  // full block (kept by the decode step that filled it), and a regenerated reply after the block
  // before its last token; each gives the tokens of an engine that computes every prompt whole.
  void chatTurnsResumeFromCheckpoints() {
    std::unique_ptr<Engine> engine = m_model.load(cpu_options(32));
    std::unique_ptr<Engine> whole = m_model.load(cpu_options(0));
    QVERIFY(engine && whole);
    const int64_t vocab = engine->config().vocab_size;
    const std::vector<int32_t> turn1 = random_tokens(40, vocab, 11);
    const Finished reply1 = generate(*engine, turn1, 10);
    QVERIFY2(reply1.error.empty(), reply1.error.c_str());
    QCOMPARE(reply1.num_reused, 0);
    // After 32 (the prompt's last full block) and 48 (the reply's: 49 tokens computed).
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(2));
    QCOMPARE(engine_greedy(*whole, turn1, 10), reply1.tokens);

    const std::vector<int32_t> turn2 = concatenated(concatenated(turn1, reply1.tokens), random_tokens(23, vocab, 12));
    const Finished reply2 = generate(*engine, turn2, 12);
    QVERIFY2(reply2.error.empty(), reply2.error.c_str());
    QCOMPARE(reply2.num_reused, 48);
    QCOMPARE(reply2.tokens, engine_greedy(*whole, turn2, 12));
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(4));  // after 64 and 80 too

    // Regenerating turn 2's reply: 73 tokens, resumed after 64.
    const Finished again = generate(*engine, turn2, 12);
    QCOMPARE(again.num_reused, 64);
    QCOMPARE(again.tokens, reply2.tokens);
    // A prompt of whole blocks (turn 2 and 7 more: 80 tokens): resumed after 64, it keeps its
    // state after 80 too; its repeat resumes after 64, a continuation after 80.
    const std::vector<int32_t> even = concatenated(turn2, random_tokens(7, vocab, 13));
    const Finished first = generate(*engine, even, 4);
    QCOMPARE(first.num_reused, 64);
    QCOMPARE(generate(*engine, even, 4).num_reused, 64);
    const std::vector<int32_t> longer = concatenated(even, {5, 6, 7});
    const Finished continued = generate(*engine, longer, 6);
    QCOMPARE(continued.num_reused, 80);
    QCOMPARE(continued.tokens, engine_greedy(*whole, longer, 6));

    // Logits too: the checkpointed engine's last row against the whole computation's.
    Result<std::vector<float>> resumed = engine->logits_for(longer);
    Result<std::vector<float>> computed = whole->logits_for(longer);
    QVERIFY2(resumed.is_ok() && computed.is_ok(), (resumed.error_message() + computed.error_message()).c_str());
    QVERIFY(max_relative_error(*resumed, *computed) < 1e-5);
    QCOMPARE(engine->memory_report().recurrent_state_bytes, uint64_t(0));  // no live sequence
    QCOMPARE(whole->kv_snapshot().cache.stats.num_prefix_hit_tokens, int64_t(0));
  }

  // A long reply keeps one state, after the last block it filled (each decode step that fills a
  // block replaces the sequence's previous one), and the next turn resumes there with the tokens
  // of an engine that computes it whole. Without prefix caching nothing is kept.
  void aReplyKeepsOnlyItsLatestState() {
    std::unique_ptr<Engine> engine = m_model.load(cpu_options(32));
    std::unique_ptr<Engine> whole = m_model.load(cpu_options(0));
    QVERIFY(engine && whole);
    const int64_t vocab = engine->config().vocab_size;
    const std::vector<int32_t> prompt = random_tokens(20, vocab, 41);
    const Finished reply = generate(*engine, prompt, 50);  // 69 tokens computed: blocks to 64
    QVERIFY2(reply.error.empty(), reply.error.c_str());
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(2));  // after 16 and 64
    const std::vector<int32_t> next = concatenated(concatenated(prompt, reply.tokens), random_tokens(5, vocab, 42));
    const Finished answer = generate(*engine, next, 6);
    QVERIFY2(answer.error.empty(), answer.error.c_str());
    QCOMPARE(answer.num_reused, 64);
    QCOMPARE(answer.tokens, engine_greedy(*whole, next, 6));
    // A prompt that stops inside the reply's blocks finds no state there (48 was replaced by
    // 64): it resumes after the prompt's 16.
    const std::vector<int32_t> partway(next.begin(), next.begin() + 50);
    QCOMPARE(generate(*engine, partway, 2).num_reused, 16);

    EngineOptions uncached = cpu_options(32);
    uncached.enable_prefix_caching = false;
    std::unique_ptr<Engine> plain = m_model.load(uncached);
    QVERIFY(plain);
    QVERIFY(generate(*plain, prompt, 50).error.empty());
    QCOMPARE(plain->memory_report().recurrent_num_checkpoints, int64_t(0));
  }

  // At most max_state_checkpoints are kept, the least recently used dropped first (their
  // prompts are computed whole again), and the memory report counts them.
  void checkpointsStayWithinTheirNumber() {
    std::unique_ptr<Engine> engine = m_model.load(cpu_options(2));
    QVERIFY(engine);
    const int64_t vocab = engine->config().vocab_size;
    std::vector<std::vector<int32_t>> prompts;
    for (uint32_t i = 0; i < 3; ++i) prompts.push_back(random_tokens(20, vocab, 20 + i));
    for (const auto& p : prompts) QVERIFY(generate(*engine, p, 2).error.empty());
    const MemoryReport m = engine->memory_report();
    QCOMPARE(m.recurrent_num_checkpoints, int64_t(2));
    QCOMPARE(m.recurrent_checkpoint_bytes, 2 * engine->config().recurrent_state_bytes());
    QCOMPARE(generate(*engine, prompts[0], 2).num_reused, 0);   // dropped; now kept again
    QCOMPARE(generate(*engine, prompts[2], 2).num_reused, 16);  // kept
    QCOMPARE(generate(*engine, prompts[1], 2).num_reused, 0);   // dropped when prompt 0 came back
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(2));
  }

  // Two prompts in one step each save their own state; two requests resuming from the same
  // checkpoint in one step each get a copy (neither changes the other's or the kept one).
  void sequencesInOneStepSaveAndResumeTheirOwn() {
    std::unique_ptr<Engine> engine = m_model.load(cpu_options(8));
    std::unique_ptr<Engine> whole = m_model.load(cpu_options(0));
    QVERIFY(engine && whole);
    const int64_t vocab = engine->config().vocab_size;
    const std::vector<int32_t> a = random_tokens(20, vocab, 31), b = random_tokens(26, vocab, 32);
    QVERIFY(engine->add_request(greedy_request(a, 3)).is_ok());
    QVERIFY(engine->add_request(greedy_request(b, 3)).is_ok());
    Result<StepResult> first = engine->step();
    QVERIFY2(first.is_ok(), first.error_message().c_str());
    QCOMPARE(first->stats.num_sequences, 2);
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(2));
    while (engine->has_unfinished_requests()) QVERIFY(engine->step().is_ok());

    const std::vector<int32_t> a2 = concatenated(a, {1, 2, 3, 4}), b2 = concatenated(b, {9});
    std::map<RequestId, std::vector<int32_t>> got;
    std::map<RequestId, int32_t> reused;
    const RequestId ra = *engine->add_request(greedy_request(a2, 8));
    const RequestId ra2 = *engine->add_request(greedy_request(a2, 8));
    const RequestId rb = *engine->add_request(greedy_request(b2, 8));
    while (engine->has_unfinished_requests()) {
      Result<StepResult> s = engine->step();
      QVERIFY2(s.is_ok(), s.error_message().c_str());
      for (const TokenEvent& e : s->tokens) got[e.request].push_back(e.token);
      for (const RequestFinished& f : s->finished) reused[f.request] = f.num_reused_prompt_tokens;
    }
    QCOMPARE(reused[ra], 16);
    QCOMPARE(reused[ra2], 16);
    QCOMPARE(reused[rb], 16);
    const std::vector<int32_t> expect_a = engine_greedy(*whole, a2, 8);
    QCOMPARE(got[ra], expect_a);
    QCOMPARE(got[ra2], expect_a);
    QCOMPARE(got[rb], engine_greedy(*whole, b2, 8));
  }

  // `iwb bench -d` on a recurrent model: the depth's state is resumed for every test at depth.
  void benchAtDepthResumesTheDepth() {
    std::unique_ptr<Engine> engine = m_model.load(cpu_options(8));
    QVERIFY(engine);
    BenchOptions o;
    o.num_prompt_tokens = 16;
    o.num_generated_tokens = 4;
    o.depths = {0, 40};
    o.num_repetitions = 2;
    o.is_warmup = false;
    Result<std::vector<BenchResult>> results = run_bench(*engine, o, std::nullopt);
    QVERIFY2(results.is_ok(), results.error_message().c_str());
    QCOMPARE(results->size(), size_t(4));
    QCOMPARE((*results)[2].test, std::string("pp16 @ d40"));
    QCOMPARE((*results)[3].test, std::string("tg4 @ d40"));
    QVERIFY(engine->kv_snapshot().cache.stats.num_prefix_hit_tokens >= 4 * 32);
    // Without checkpoints the depth cannot be kept, and the test says why.
    std::unique_ptr<Engine> plain = m_model.load(cpu_options(0));
    QVERIFY(plain);
    o.depths = {40};
    Result<std::vector<BenchResult>> refused = run_bench(*plain, o, std::nullopt);
    QVERIFY(!refused.is_ok());
    QVERIFY2(refused.error_message().find("state checkpoints off") != std::string::npos,
             refused.error_message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestStateCheckpoints)
#include "test_state_checkpoints.moc"
