// Scheduler: batched, chunked, preempted-and-recomputed and forked generation reproduces the
// tokens of one-at-a-time runs (the simulated model reads its history back from the paged
// cache); never vs later; the token budget; first-come-first-served admission without
// starvation; sequences that outgrow the cache fail instead of looping; aborts free blocks.
#include "scheduler_harness.h"

#include <QtTest>

#include <random>

using namespace iwb;
using namespace iwb::test;

namespace {

Scheduler make_scheduler(int64_t num_blocks, int32_t block_size, int64_t budget, bool prefix_caching = true,
                         int64_t max_running = 64) {
  BlockManagerConfig blocks{num_blocks, block_size, prefix_caching, {}, {}};
  SchedulerConfig config;
  config.max_batch_tokens = budget;
  config.max_running_sequences = max_running;
  Result<Scheduler> s = Scheduler::create(blocks, config);
  if (!s) qFatal("%s", s.error_message().c_str());
  return std::move(s).value();
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = std::uniform_int_distribution<int32_t>(1, 996)(rng);
  return t;
}

// Requests sharing a few "system prompts", with their own tails, arriving over time.
std::vector<TestRequest> workload(uint32_t seed, int count, int system_len, int max_tail, int max_new_hi,
                                  int arrival_span) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> systems;
  for (int i = 0; i < 3; ++i) systems.push_back(random_tokens(rng, system_len));
  std::vector<TestRequest> requests;
  for (int i = 0; i < count; ++i) {
    TestRequest r;
    r.prompt = systems[static_cast<size_t>(std::uniform_int_distribution<int>(0, 2)(rng))];
    const std::vector<int32_t> tail = random_tokens(rng, std::uniform_int_distribution<int>(1, max_tail)(rng));
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.max_new = std::uniform_int_distribution<int>(3, max_new_hi)(rng);
    r.arrival_step = std::uniform_int_distribution<int>(0, arrival_span)(rng);
    requests.push_back(std::move(r));
  }
  return requests;
}

void expect_reference_outputs(const std::vector<TestRequest>& requests, const DriveResult& result) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestRun& run = result.runs[i];
    QVERIFY2(run.error.empty(), run.error.c_str());
    QVERIFY2(run.is_finished, qPrintable(QString("request %1 did not finish").arg(i)));
    QCOMPARE(run.output, reference_output(requests[i].prompt, requests[i].max_new, requests[i].stop_at_eos));
  }
}

}  // namespace

class TestScheduler : public QObject {
  Q_OBJECT

 private slots:
  void batchedRunsEqualOneAtATime_data() {
    QTest::addColumn<int>("numBlocks");
    QTest::addColumn<int>("blockSize");
    QTest::addColumn<int>("budget");
    QTest::addColumn<bool>("prefixCaching");
    QTest::addColumn<bool>("expectPreemptions");
    QTest::newRow("roomy cache") << 400 << 16 << 64 << true << false;
    QTest::newRow("tiny cache, preemptions") << 18 << 4 << 32 << true << true;
    QTest::newRow("tiny cache, no prefix cache") << 18 << 4 << 32 << false << true;
    QTest::newRow("blocks of 1, budget 7") << 70 << 1 << 7 << true << true;
    QTest::newRow("blocks of 5, budget 300") << 15 << 5 << 300 << true << true;
  }
  void batchedRunsEqualOneAtATime() {
    QFETCH(int, numBlocks);
    QFETCH(int, blockSize);
    QFETCH(int, budget);
    QFETCH(bool, prefixCaching);
    QFETCH(bool, expectPreemptions);
    // Longest sequence: 20 + 10 prompt + 30 generated = 60 tokens, within every cache here.
    const std::vector<TestRequest> requests = workload(11, 40, 20, 10, 30, 25);
    Scheduler scheduler = make_scheduler(numBlocks, blockSize, budget, prefixCaching);
    const DriveResult result = drive(scheduler, requests, 5000);
    expect_reference_outputs(requests, result);
    qInfo("%d steps, %lld preemptions, prefix hit rate %.2f", result.num_steps,
          static_cast<long long>(result.num_preemptions), result.final_blocks.prefix_hit_rate);
    QCOMPARE(result.num_preemptions > 0, expectPreemptions);
    if (prefixCaching) QVERIFY(result.final_blocks.num_prefix_hit_tokens > 0);
    QCOMPARE(result.final_blocks.num_used_blocks, 0);  // everything finished, nothing held
    QVERIFY(!scheduler.has_unfinished());
    QCOMPARE(scheduler.stats().num_finished, int64_t(requests.size()));
  }

  void neverIsRefusedLaterWaits() {
    Scheduler scheduler = make_scheduler(8, 4, 64);
    Result<SequenceId> too_big = scheduler.add_sequence(1, std::vector<int32_t>(33, 5));
    QVERIFY(!too_big);
    QVERIFY2(too_big.error_message().find("prompt needs 9 blocks but the cache holds 8") != std::string::npos,
             too_big.error_message().c_str());
    QVERIFY(!scheduler.add_sequence(1, {}));

    std::mt19937 rng(3);
    std::vector<TestRequest> requests(2);
    requests[0].prompt = random_tokens(rng, 20);
    requests[1].prompt = random_tokens(rng, 20);
    requests[0].max_new = requests[1].max_new = 10;
    requests[0].stop_at_eos = requests[1].stop_at_eos = false;
    int waiting_steps = 0;
    const DriveResult result =
        drive(scheduler, requests, 200, {}, [&](const Scheduler& s, const ScheduledStep& plan, int) {
          QVERIFY(plan.failed.empty());
          if (s.stats().num_waiting == 1 && s.stats().num_running == 1) ++waiting_steps;
        });
    expect_reference_outputs(requests, result);
    QVERIFY(waiting_steps >= 5);  // the second prompt waited (Later) for the first to finish
    QCOMPARE(result.runs[1].first_scheduled_step >= 10, true);
  }

  void chunkedPrefillKeepsDecodesStreaming() {
    Scheduler scheduler = make_scheduler(64, 4, 16);
    std::mt19937 rng(5);
    std::vector<TestRequest> requests(2);
    requests[0].prompt = random_tokens(rng, 4);
    requests[0].max_new = 40;
    requests[0].stop_at_eos = false;
    requests[1].prompt = random_tokens(rng, 100);
    requests[1].max_new = 5;
    requests[1].arrival_step = 3;
    int num_chunks = 0;
    const DriveResult result =
        drive(scheduler, requests, 200, {}, [&](const Scheduler&, const ScheduledStep& plan, int) {
          QVERIFY(plan.batch.num_tokens <= 16);
          bool long_prefill = false, decode_of_first = false;
          for (const ScheduledSequence& s : plan.batch.sequences) {
            if (s.request == 1 && s.is_prefill) {
              long_prefill = true;
              ++num_chunks;
              QCOMPARE(s.needs_logits, s.sequence_length == 100);  // logits only after the last chunk
            }
            if (s.request == 0 && !s.is_prefill) decode_of_first = true;
          }
          if (long_prefill) QVERIFY(decode_of_first);  // the running sequence kept streaming
        });
    expect_reference_outputs(requests, result);
    QCOMPARE(num_chunks, 7);  // 100 prompt tokens at 15 per step (one budget token goes to the decode)
  }

  void admissionIsFirstComeFirstServed() {
    // A stream of requests on a small cache, one of them nearly as large as the cache: later,
    // smaller requests must not overtake it, and every request starts within a bounded wait.
    std::mt19937 rng(9);
    std::vector<TestRequest> requests;
    for (int i = 0; i < 60; ++i) {
      TestRequest r;
      r.prompt = random_tokens(rng, i == 3 ? 80 : std::uniform_int_distribution<int>(4, 30)(rng));
      r.max_new = std::uniform_int_distribution<int>(4, 20)(rng);
      r.stop_at_eos = false;
      r.arrival_step = i;
      requests.push_back(std::move(r));
    }
    Scheduler scheduler = make_scheduler(26, 4, 32);
    const DriveResult result = drive(scheduler, requests, 5000, {}, [&](const Scheduler& s, const ScheduledStep&, int) {
      int64_t last = -1;
      for (SequenceId id : s.waiting()) {  // the waiting queue is always in arrival order
        QVERIFY(s.find(id)->arrival > last);
        last = s.find(id)->arrival;
      }
    });
    expect_reference_outputs(requests, result);
    QVERIFY(result.num_preemptions > 0);
    double serial_steps = 0;  // the work of everything that arrived before: a starvation-free bound
    for (size_t i = 0; i < requests.size(); ++i) {
      if (i > 0) QVERIFY(result.runs[i].first_scheduled_step >= result.runs[i - 1].first_scheduled_step);
      const int wait = result.runs[i].first_scheduled_step - requests[i].arrival_step;
      QVERIFY2(wait <= 2 * serial_steps + 10, qPrintable(QString("request %1 waited %2 steps").arg(i).arg(wait)));
      serial_steps += std::ceil(requests[i].prompt.size() / 32.0) + requests[i].max_new;
    }
  }

  void forkedSamplesShareThePromptAndCopyOnWrite() {
    Scheduler scheduler = make_scheduler(64, 4, 64);
    std::mt19937 rng(13);
    std::vector<TestRequest> requests(1);
    requests[0].prompt = random_tokens(rng, 10);  // last block holds 2 of 4: shared, then copied
    requests[0].max_new = 20;
    requests[0].stop_at_eos = false;
    const std::vector<int32_t> first_tokens = {101, 202, 303};
    const DriveResult result =
        drive(scheduler, requests, 200, [&](Scheduler& s, std::vector<RequestRun>& runs, int step) {
          if (step != 0) return;
          QCOMPARE(runs[0].output.size(), size_t(1));
          for (size_t i = 0; i < first_tokens.size(); ++i) {
            Result<SequenceId> child = s.fork(runs[0].sequence, 100 + i, first_tokens[i]);
            QVERIFY2(child, child.error_message().c_str());
            RequestRun run;
            run.sequence = *child;
            run.output = {first_tokens[i]};
            run.max_new = 20;
            run.stop_at_eos = false;
            runs.push_back(run);
          }
          QCOMPARE(s.block_manager().stats().num_shared_blocks, 3);
        });
    expect_reference_outputs(requests, result);
    QCOMPARE(result.runs.size(), size_t(4));
    for (size_t i = 0; i < first_tokens.size(); ++i) {
      std::vector<int32_t> expected = {first_tokens[i]};
      std::vector<int32_t> history = requests[0].prompt;
      history.push_back(first_tokens[i]);
      const std::vector<int32_t> rest = reference_output(history, 19, false);
      expected.insert(expected.end(), rest.begin(), rest.end());
      QCOMPARE(result.runs[1 + i].output, expected);
    }
    QCOMPARE(result.num_copies, int64_t(3));  // three of the four owners of the shared last block copied it
    QVERIFY(!scheduler.fork(999, 1, 1));
  }

  void sequenceOutgrowingTheCacheFails() {
    Scheduler scheduler = make_scheduler(4, 4, 64);
    std::vector<TestRequest> requests(1);
    std::mt19937 rng(17);
    requests[0].prompt = random_tokens(rng, 10);
    requests[0].max_new = 100;
    requests[0].stop_at_eos = false;
    const DriveResult result = drive(scheduler, requests, 100);
    QVERIFY2(result.runs[0].error.find("outgrew the KV cache") != std::string::npos, result.runs[0].error.c_str());
    // Slots for positions 0..15: the 6th generated token runs and gives the 7th, which has no slot.
    QCOMPARE(result.runs[0].output, reference_output(requests[0].prompt, 7, false));
    QVERIFY(result.num_steps < 20);
    QVERIFY(!scheduler.has_unfinished());
    QCOMPARE(scheduler.stats().num_failed, int64_t(1));
  }

  void abortFreesBlocks() {
    Scheduler scheduler = make_scheduler(10, 4, 64);
    std::mt19937 rng(19);
    const SequenceId a = *scheduler.add_sequence(1, random_tokens(rng, 16));
    const SequenceId b = *scheduler.add_sequence(2, random_tokens(rng, 16));
    const SequenceId c = *scheduler.add_sequence(3, random_tokens(rng, 16));
    const ScheduledStep step = scheduler.schedule();
    QCOMPARE(step.batch.sequences.size(), size_t(2));  // the third waits for blocks
    QCOMPARE(scheduler.find(c)->status, SequenceStatus::Waiting);
    QVERIFY(scheduler.abort(b));  // aborted mid-step: its result is ignored
    QVERIFY(scheduler.abort(c));
    QVERIFY(!scheduler.abort(c));
    const std::vector<SequenceOutput> outputs = {{a, 7, false}, {b, 9, false}};
    QVERIFY(scheduler.on_step_done(outputs));
    QCOMPARE(scheduler.find(a)->tokens.back(), 7);
    QVERIFY(scheduler.abort(a));
    QVERIFY(!scheduler.has_unfinished());
    QCOMPARE(scheduler.block_manager().stats().num_used_blocks, 0);
    QVERIFY(scheduler.block_manager().check_consistency());
  }

  void stepResultsAreChecked() {
    Scheduler scheduler = make_scheduler(32, 4, 8);
    std::mt19937 rng(23);
    const SequenceId a = *scheduler.add_sequence(1, random_tokens(rng, 12));  // two chunks of 8 and 4
    ScheduledStep step = scheduler.schedule();
    QCOMPARE(step.batch.sequences[0].needs_logits, false);
    const std::vector<SequenceOutput> mid_prompt = {{a, 5, false}};
    QVERIFY(!scheduler.on_step_done(mid_prompt));  // no token in the middle of a prompt
    QVERIFY(scheduler.on_step_done({}));
    step = scheduler.schedule();
    QCOMPARE(step.batch.sequences[0].needs_logits, true);
    QCOMPARE(step.batch.sequences[0].num_context_tokens, 8);
    QVERIFY(!scheduler.on_step_done({}));  // logits computed, no token
    const std::vector<SequenceOutput> twice = {{a, 5, false}, {a, 6, false}};
    QVERIFY(!scheduler.on_step_done(twice));
    const std::vector<SequenceOutput> stranger = {{a, 5, false}, {a + 100, 6, false}};
    QVERIFY(scheduler.on_step_done(stranger));  // an unknown (gone) sequence is ignored
    QCOMPARE(scheduler.find(a)->num_computed_tokens, 12);
    QCOMPARE(scheduler.find(a)->tokens.size(), size_t(13));
    QVERIFY(!Scheduler::create({8, 4, true, {}, {}}, {0, 4, 1}));
  }

  void flattenLaysOutTheBatch() {
    Scheduler scheduler = make_scheduler(32, 4, 64);
    std::mt19937 rng(29);
    const SequenceId a = *scheduler.add_sequence(1, random_tokens(rng, 5));
    const SequenceId b = *scheduler.add_sequence(2, random_tokens(rng, 9));
    const ScheduledStep step = scheduler.schedule();
    const FlatBatch flat = flatten(step.batch);
    QCOMPARE(flat.tokens.size(), size_t(14));
    QCOMPARE(flat.max_blocks_per_sequence, 3);
    QCOMPARE(flat.block_tables.size(), size_t(6));
    QCOMPARE(flat.block_tables[2], -1);  // sequence a has two blocks: padding
    QCOMPARE(flat.sequence_lengths, (std::vector<int32_t>{5, 9}));
    QCOMPARE(flat.logits_rows, (std::vector<int32_t>{4, 13}));
    QCOMPARE(flat.token_sequences[4], 0);
    QCOMPARE(flat.token_sequences[5], 1);
    QCOMPARE(flat.positions[5], 0);
    QCOMPARE(flat.slot_mapping[13], *scheduler.block_manager().slot(b, 8));
    QCOMPARE(flat.slot_mapping[0], *scheduler.block_manager().slot(a, 0));
  }
};

QTEST_APPLESS_MAIN(TestScheduler)
#include "test_scheduler.moc"
