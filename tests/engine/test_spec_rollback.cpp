// Speculative decoding's bookkeeping: rolling the KV cache back past rejected draft tokens in
// the block manager (shared prefix blocks untouched, a copied-on-write partial block still
// right, freed blocks back in the pool), the scheduler's draft protocol (slots for the guesses,
// logits rows for each, truncation to the accepted ones, an unreported plan taken back), the
// vocabulary check's message, and the statistics and best-K arithmetic.
#include "iwb/engine/paged/block_manager.h"
#include "iwb/engine/paged/scheduler.h"
#include "iwb/engine/spec/drafter.h"
#include "iwb/engine/spec/spec_stats.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "iwb/engine/tokenizer/vocab.h"

#include <QtTest>

#include <cmath>
#include <numeric>

using namespace iwb;

namespace {

std::vector<int32_t> iota_tokens(int n, int first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

BlockManager make(int64_t num_blocks, int32_t block_size) {
  Result<BlockManager> m = BlockManager::create({num_blocks, block_size, true, {}, {}});
  if (!m) qFatal("%s", m.error_message().c_str());
  return std::move(m).value();
}

tokenizer::Tokenizer vocab_tokenizer(std::vector<std::string> pieces) {
  tokenizer::Vocab v;
  v.kind = tokenizer::VocabKind::Spm;
  v.model = "llama";
  for (size_t i = 0; i < pieces.size(); ++i) {
    v.tokens.push_back(pieces[i]);
    v.scores.push_back(-static_cast<float>(i));
    v.types.push_back(i == 0 ? tokenizer::TokenType::Unknown : tokenizer::TokenType::Normal);
  }
  v.special.unk = 0;
  Result<tokenizer::Tokenizer> t = tokenizer::Tokenizer::create(std::move(v));
  if (!t) qFatal("%s", t.error_message().c_str());
  return std::move(t).value();
}

}  // namespace

class TestSpecRollback : public QObject {
  Q_OBJECT

 private slots:
  // Guesses appended into fresh blocks are released again; the sequence continues from the
  // accepted position, reusing the same slots.
  void truncateReleasesDraftBlocks() {
    BlockManager m = make(8, 4);
    QVERIFY(m.allocate(1, iota_tokens(6, 10)));  // blocks 0,1 (2 slots of the second used)
    QVERIFY(m.mark_computed(1, 6));
    const int64_t free_before = m.num_available_blocks();
    for (int32_t t : {100, 101, 102, 103, 104}) QVERIFY(m.append_slot(1, t));  // 11 tokens: 3 blocks
    QCOMPARE(m.num_tokens(1), int64_t{11});
    QCOMPARE(m.num_available_blocks(), free_before - 1);
    QVERIFY(m.truncate(1, 7));  // one guess accepted
    QCOMPARE(m.num_tokens(1), int64_t{7});
    QCOMPARE(m.block_table(1).size(), size_t{2});
    QCOMPARE(m.num_available_blocks(), free_before);
    Result<AppendedSlot> next = m.append_slot(1, 200);
    QVERIFY(next);
    QCOMPARE(next->slot, int64_t{m.block_table(1)[1]} * 4 + 3);  // the rejected guess's slot again
    QVERIFY(!next->copy);
    QVERIFY(m.check_consistency());
  }

  // Two sequences share a cached prompt prefix; rolling one back past its own guesses leaves
  // the shared blocks' reference counts and cache entries exactly as they were.
  void sharedPrefixBlocksAreUntouched() {
    BlockManager m = make(16, 4);
    const std::vector<int32_t> prompt = iota_tokens(9, 1);  // two full blocks + 1
    QVERIFY(m.allocate(1, prompt));
    QVERIFY(m.mark_computed(1, 9));
    Result<int64_t> hit = m.allocate(2, prompt);
    QVERIFY(hit);
    QCOMPARE(*hit, int64_t{8});
    QVERIFY(m.mark_computed(2, 9));
    const std::vector<BlockId> shared(m.block_table(2).begin(), m.block_table(2).begin() + 2);
    QCOMPARE(m.ref_count(shared[0]), 2);
    for (int32_t t : {50, 51, 52, 53, 54, 55}) QVERIFY(m.append_slot(2, t));
    QVERIFY(m.truncate(2, 10));
    QCOMPARE(m.ref_count(shared[0]), 2);
    QCOMPARE(m.ref_count(shared[1]), 2);
    QCOMPARE(std::vector<BlockId>(m.block_table(2).begin(), m.block_table(2).begin() + 2), shared);
    // Sequence 1's view is unchanged and a third prompt still hits both cached blocks.
    QVERIFY(m.truncate(2, 8));  // even back to the block boundary: the shared blocks stay
    QCOMPARE(m.ref_count(shared[1]), 2);
    Result<int64_t> hit3 = m.allocate(3, prompt);
    QVERIFY(hit3);
    QCOMPARE(*hit3, int64_t{8});
    QVERIFY(m.check_consistency());
  }

  // A forked sequence continues in a partly filled shared block: its first write copies it; a
  // rollback inside the private copy keeps the copied slots, and the other owner's block is
  // never written.
  void copiedOnWriteBlockStaysRight() {
    BlockManager m = make(8, 4);
    QVERIFY(m.allocate(1, iota_tokens(6, 1)));
    QVERIFY(m.mark_computed(1, 6));
    QVERIFY(m.fork(1, 2));
    const BlockId shared_last = m.block_table(1)[1];
    QCOMPARE(m.ref_count(shared_last), 2);
    Result<AppendedSlot> first = m.append_slot(2, 70);  // copy-on-write
    QVERIFY(first && first->copy);
    QCOMPARE(first->copy->src, shared_last);
    const BlockId mine = m.block_table(2)[1];
    QVERIFY(mine != shared_last);
    for (int32_t t : {71, 72, 73}) QVERIFY(m.append_slot(2, t));  // spills into a third block
    QVERIFY(m.truncate(2, 7));                                    // keep the decode token only
    QCOMPARE(m.block_table(2).size(), size_t{2});
    QCOMPARE(m.block_table(2)[1], mine);
    QCOMPARE(m.ref_count(shared_last), 1);
    QCOMPARE(m.block_table(1)[1], shared_last);
    Result<AppendedSlot> again = m.append_slot(2, 80);
    QVERIFY(again && !again->copy);
    QCOMPARE(again->slot, int64_t{mine} * 4 + 3);
    QVERIFY(m.check_consistency());
  }

  // The scheduler runs the guesses after the decode token with a logits row for each, then keeps
  // the accepted ones and the target's token.
  void schedulerRunsAndRollsBackDrafts() {
    Result<Scheduler> made = Scheduler::create({32, 4, true, {}, {}}, {64, 8, 1});
    QVERIFY(made);
    Scheduler s = std::move(made).value();
    Result<SequenceId> id = s.add_sequence(7, iota_tokens(5, 1));
    QVERIFY(id);
    ScheduledStep prefill = s.schedule();
    QCOMPARE(prefill.batch.num_tokens, int64_t{5});
    const SequenceOutput first{*id, 40, false};
    QVERIFY(s.on_step_done(std::span(&first, 1)));
    QVERIFY(s.is_waiting_to_decode(*id));
    QVERIFY(s.set_draft(*id, {41, 42, 43}));

    ScheduledStep step = s.schedule();
    QCOMPARE(step.batch.sequences.size(), size_t{1});
    const ScheduledSequence& e = step.batch.sequences[0];
    QCOMPARE(e.num_draft_tokens, int64_t{3});
    QCOMPARE(e.tokens, (std::vector<int32_t>{40, 41, 42, 43}));
    QCOMPARE(e.positions, (std::vector<int32_t>{5, 6, 7, 8}));
    const FlatBatch flat = flatten(step.batch);
    QCOMPARE(flat.logits_rows, (std::vector<int32_t>{0, 1, 2, 3}));
    QCOMPARE(flat.logits_sequences, (std::vector<int32_t>{0, 0, 0, 0}));
    QCOMPARE(s.block_manager().num_tokens(*id), int64_t{9});

    // 41 accepted, 42 rejected: the target's own token there is 99.
    const SequenceOutput verdict{*id, 99, false, 1};
    QVERIFY(s.on_step_done(std::span(&verdict, 1)));
    const Sequence* seq = s.find(*id);
    QCOMPARE(seq->tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, 40, 41, 99}));
    QCOMPARE(seq->num_computed_tokens, int64_t{7});
    QCOMPARE(s.block_manager().num_tokens(*id), int64_t{7});
    QVERIFY(s.block_manager().check_consistency());

    // A draft is for one step: the next plan is a plain decode.
    ScheduledStep plain = s.schedule();
    QCOMPARE(plain.batch.sequences[0].num_draft_tokens, int64_t{0});
    QCOMPARE(plain.batch.sequences[0].tokens, (std::vector<int32_t>{99}));
    // More accepted than drafted is refused.
    const SequenceOutput bad{*id, 5, false, 2};
    QVERIFY(!s.on_step_done(std::span(&bad, 1)));
  }

  // A plan whose pass failed is never reported: the next schedule() takes its guesses back.
  void unreportedDraftIsTakenBack() {
    Result<Scheduler> made = Scheduler::create({32, 4, true, {}, {}}, {64, 8, 1});
    QVERIFY(made);
    Scheduler s = std::move(made).value();
    Result<SequenceId> id = s.add_sequence(1, iota_tokens(3, 1));
    QVERIFY(id);
    (void)s.schedule();
    const SequenceOutput first{*id, 30, false};
    QVERIFY(s.on_step_done(std::span(&first, 1)));
    QVERIFY(s.set_draft(*id, {31, 32, 33, 34, 35, 36}));
    ScheduledStep lost = s.schedule();
    QCOMPARE(lost.batch.sequences[0].num_draft_tokens, int64_t{6});
    ScheduledStep again = s.schedule();
    QCOMPARE(again.batch.sequences[0].tokens, (std::vector<int32_t>{30}));
    QCOMPARE(s.find(*id)->tokens.size(), size_t{4});
    QCOMPARE(s.block_manager().num_tokens(*id), int64_t{4});
    QVERIFY(s.block_manager().check_consistency());
    QVERIFY(!s.set_draft(12345, {1}));  // unknown sequence
  }

  // The token budget keeps a decode for every running sequence before any guess.
  void budgetKeepsOtherDecodes() {
    Result<Scheduler> made = Scheduler::create({64, 4, true, {}, {}}, {4, 8, 1});
    QVERIFY(made);
    Scheduler s = std::move(made).value();
    std::vector<SequenceId> ids;
    for (int i = 0; i < 3; ++i) ids.push_back(*s.add_sequence(static_cast<RequestId>(i), iota_tokens(2, 10 * i + 1)));
    while (!s.is_waiting_to_decode(ids[2])) {
      ScheduledStep st = s.schedule();
      std::vector<SequenceOutput> out;
      for (const ScheduledSequence& e : st.batch.sequences) {
        if (e.needs_logits) out.push_back({e.sequence, 77, false});
      }
      QVERIFY(s.on_step_done(out));
    }
    QVERIFY(s.set_draft(ids[0], {1, 2, 3, 4, 5}));
    ScheduledStep st = s.schedule();
    QCOMPARE(st.batch.sequences.size(), size_t{3});
    QCOMPARE(st.batch.sequences[0].num_draft_tokens, int64_t{1});  // 4 tokens: 3 decodes + 1 guess
    QCOMPARE(st.batch.num_tokens, int64_t{4});
  }

  void vocabularyMismatchNamesTheToken() {
    const tokenizer::Tokenizer a = vocab_tokenizer({"<unk>", "a", "b", "c", "d"});
    const tokenizer::Tokenizer same = vocab_tokenizer({"<unk>", "a", "b", "c", "d"});
    const tokenizer::Tokenizer other = vocab_tokenizer({"<unk>", "a", "b", "x\n", "d"});
    const tokenizer::Tokenizer shorter = vocab_tokenizer({"<unk>", "a", "b"});
    QVERIFY(spec::check_vocabulary_match(a, same).is_ok());
    Status s = spec::check_vocabulary_match(a, other);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("at token 3") != std::string::npos, s.message().c_str());
    QVERIFY2(s.message().find("'c'") != std::string::npos, s.message().c_str());
    QVERIFY2(s.message().find("'x\\x0a'") != std::string::npos, s.message().c_str());
    s = spec::check_vocabulary_match(a, shorter);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("at token 3") != std::string::npos, s.message().c_str());
    QVERIFY2(s.message().find("5 against 3") != std::string::npos, s.message().c_str());
  }

  void statsAndSuggestion() {
    QCOMPARE(spec::expected_tokens_per_step(0.0, 4), 1.0);
    QCOMPARE(spec::expected_tokens_per_step(1.0, 4), 5.0);
    QVERIFY(std::abs(spec::expected_tokens_per_step(0.5, 3) - 1.875) < 1e-12);

    spec::SpeculationStats st;
    st.record(4, 4, 5);
    st.record(4, 1, 2);
    st.record(2, 0, 1);
    QCOMPARE(st.num_verify_steps, int64_t{3});
    QCOMPARE(st.drafted_per_position, (std::vector<int64_t>{3, 3, 2, 2}));
    QCOMPARE(st.accepted_per_position, (std::vector<int64_t>{2, 1, 1, 1}));
    QCOMPARE(st.accepted_length_histogram, (std::vector<int64_t>{1, 1, 0, 0, 1}));
    QVERIFY(std::abs(st.acceptance_rate() - 0.5) < 1e-12);
    QVERIFY(std::abs(st.mean_accepted_length() - 5.0 / 3.0) < 1e-12);
    spec::SpeculationStats sum;
    sum.add(st);
    sum.add(st);
    QCOMPARE(sum.num_accepted, int64_t{10});
    QCOMPARE(sum.accepted_length_histogram[4], int64_t{2});

    // Free drafts and free verification: the longest K wins; costly drafts: none.
    spec::SpeculationCosts cheap{0.0, 0.05, 0.0};
    QCOMPARE(spec::suggest_draft_length(0.8, cheap, 8).num_draft_tokens, 8);
    spec::SpeculationCosts dear{0.05, 0.05, 0.01};
    QCOMPARE(spec::suggest_draft_length(0.3, dear, 8).num_draft_tokens, 0);
    // A middle case has an interior optimum: E/(base + K c) peaks before the cap.
    spec::SpeculationCosts mid{0.004, 0.04, 0.004};
    const spec::DraftLengthSuggestion m = spec::suggest_draft_length(0.7, mid, 16);
    QVERIFY(m.num_draft_tokens > 1 && m.num_draft_tokens < 16);
    QVERIFY(m.tokens_per_second > m.baseline_tokens_per_second);
    QVERIFY(std::abs(m.baseline_tokens_per_second - 25.0) < 1e-9);
  }
};

QTEST_GUILESS_MAIN(TestSpecRollback)
#include "test_spec_rollback.moc"
