// Speculative decoding on a model with recurrent layers (Qwen 3.5, iwb synth's test-qwen35 on
// the CPU): a verification step saves the state after each guess and the sequence goes back to
// the state after the tokens it kept, so greedy speculation gives plain decoding's tokens
// whatever is accepted or rejected; the file's MTP block (an attention layer) drafts too;
// drafters that would run recurrent layers themselves are refused. Also run under ASan.
#include "../kernels/random_tensors.h"
#include "forward_checks.h"
#include "synthesized_engine.h"

#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/spec/drafter.h"

#include <QtTest>

using namespace iwb;

using test::engine_greedy;
using test::greedy_request;
using test::random_tokens;
using test::run_to_end;

namespace {

EngineOptions cpu_options() {
  EngineOptions o;
  o.device = "cpu";
  o.num_threads = 2;
  o.max_batch_tokens = 64;
  o.is_batch_invariant = true;      // a verification step computes K + 1 rows where plain decoding computes 1
  o.enable_prefix_caching = false;  // every state checkpoint then is a verification's
  return o;
}

// Guesses the continuation it was told (each prompt's plain greedy reply), except every third
// position of the sequence, where it guesses a wrong token: steps accept all, some or none.
class OracleDrafter final : public spec::Drafter {
 public:
  void expect(std::vector<int32_t> prompt, const std::vector<int32_t>& reply) {
    prompt.insert(prompt.end(), reply.begin(), reply.end());
    m_expected.push_back(std::move(prompt));
  }
  std::string name() const override { return "oracle"; }
  Result<std::vector<spec::Draft>> draft(std::span<const spec::DraftRequest> requests) override {
    int64_t asked = 0;
    for (const spec::DraftRequest& r : requests) asked += r.num_draft_tokens;
    m_most_asked = std::max(m_most_asked, asked);
    std::vector<spec::Draft> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::span<const int32_t> seen = requests[i].tokens;
      for (const std::vector<int32_t>& full : m_expected) {
        if (full.size() < seen.size() || !std::equal(seen.begin(), seen.end(), full.begin())) continue;
        for (size_t p = seen.size(); p < full.size() && out[i].tokens.size() < size_t(requests[i].num_draft_tokens);
             ++p) {
          out[i].tokens.push_back(p % 3 == 2 ? (full[p] + 1) % 64 + 1 : full[p]);
        }
        break;
      }
    }
    return out;
  }
  // The most guesses one step asked for, all sequences together.
  int64_t most_asked() const { return m_most_asked; }

 private:
  std::vector<std::vector<int32_t>> m_expected;
  int64_t m_most_asked = 0;
};

}  // namespace

class TestRecurrentSpeculation : public QObject {
  Q_OBJECT

  test::SynthesizedEngine m_model;

 private slots:
  void initTestCase() {
    const std::string error = m_model.synthesize("test-qwen35", "F32");
    QVERIFY2(error.empty(), error.c_str());
  }

  // Two sequences decoding together with drafts of 4 that are right, partly right or wrong: each
  // reply is plain decoding's, guesses were both accepted and rejected, and no state saved for a
  // verification outlives it.
  void greedySpeculationKeepsPlainDecodingsTokens() {
    std::unique_ptr<Engine> plain = m_model.load(cpu_options());
    std::unique_ptr<Engine> engine = m_model.load(cpu_options());
    QVERIFY(plain && engine);
    const int64_t vocab = engine->config().vocab_size;
    const std::vector<int32_t> a = random_tokens(21, vocab, 91), b = random_tokens(9, vocab, 92);
    const int n = 24;
    auto drafter = std::make_unique<OracleDrafter>();
    drafter->expect(a, engine_greedy(*plain, a, n));
    drafter->expect(b, engine_greedy(*plain, b, n));
    spec::SpeculativeConfig config;
    config.kind = spec::DrafterKind::PromptLookup;  // the kind a caller's drafter is reported as
    config.num_draft_tokens = 4;
    const Status set = engine->set_drafter(std::move(drafter), config);
    QVERIFY2(set.is_ok(), set.message().c_str());

    const test::EngineRun got = run_to_end(*engine, {greedy_request(a, n), greedy_request(b, n)});
    const std::vector<RequestId>& ids = got.ids;
    QVERIFY2(got.error.empty(), got.error.c_str());
    QCOMPARE(got.tokens.at(ids[0]), engine_greedy(*plain, a, n));
    QCOMPARE(got.tokens.at(ids[1]), engine_greedy(*plain, b, n));
    int64_t drafted = 0, accepted = 0;
    for (const RequestId id : ids) {
      drafted += got.finished.at(id).speculation.num_drafted;
      accepted += got.finished.at(id).speculation.num_accepted;
    }
    QVERIFY2(accepted > 0 && accepted < drafted,
             qPrintable(QString("%1 of %2 guesses accepted: both outcomes are to be seen").arg(accepted).arg(drafted)));
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(0));
    QCOMPARE(engine->memory_report().recurrent_state_bytes, uint64_t(0));
  }

  // With prefix caching, a verification step that fills a block keeps the state after it as
  // the sequence's decode checkpoint when verification keeps the guesses up to the block's end
  // (a draft save, or one more where the step's last token ends the block): a 50-token reply
  // keeps the state after 64, as plain decoding does, and the next turn resumes there with
  // plain decoding's tokens.
  void verificationStepsKeepTheReplysLastBlock() {
    EngineOptions cached = cpu_options();
    cached.enable_prefix_caching = true;
    std::unique_ptr<Engine> plain = m_model.load(cpu_options());
    std::unique_ptr<Engine> engine = m_model.load(cached);
    QVERIFY(plain && engine);
    const int64_t vocab = engine->config().vocab_size;
    const std::vector<int32_t> prompt = random_tokens(20, vocab, 96);
    const std::vector<int32_t> reply = engine_greedy(*plain, prompt, 50);  // 69 tokens computed: blocks to 64
    auto drafter = std::make_unique<OracleDrafter>();
    drafter->expect(prompt, reply);
    spec::SpeculativeConfig config;
    config.kind = spec::DrafterKind::PromptLookup;
    config.num_draft_tokens = 4;
    const Status set = engine->set_drafter(std::move(drafter), config);
    QVERIFY2(set.is_ok(), set.message().c_str());

    const test::EngineRun got = run_to_end(*engine, {greedy_request(prompt, 50)});
    QVERIFY2(got.error.empty(), got.error.c_str());
    QCOMPARE(got.tokens.at(got.ids[0]), reply);
    const spec::SpeculationStats& stats = got.finished.at(got.ids[0]).speculation;
    QVERIFY2(stats.num_accepted > 0 && stats.num_accepted < stats.num_drafted,
             qPrintable(QString("%1 of %2 guesses accepted").arg(stats.num_accepted).arg(stats.num_drafted)));
    QCOMPARE(engine->memory_report().recurrent_num_checkpoints, int64_t(2));  // after 16 and 64

    std::vector<int32_t> next = prompt;
    next.insert(next.end(), reply.begin(), reply.end());
    const std::vector<int32_t> message = random_tokens(5, vocab, 97);
    next.insert(next.end(), message.begin(), message.end());
    const test::EngineRun answer = run_to_end(*engine, {greedy_request(next, 6)});
    QVERIFY2(answer.error.empty(), answer.error.c_str());
    QCOMPARE(answer.finished.at(answer.ids[0]).num_reused_prompt_tokens, 64);
    QCOMPARE(answer.tokens.at(answer.ids[0]), engine_greedy(*plain, next, 6));
  }

  // A step's guesses in all are held to the sequences that may run at once (each guess saves a
  // state): two sequences asking for 4 each, with room for two, are asked for 2 in all, and
  // still decode as plainly.
  void stepGuessesAreHeldToRunningSequences() {
    EngineOptions two = cpu_options();
    two.max_running_sequences = 2;
    std::unique_ptr<Engine> plain = m_model.load(cpu_options());
    std::unique_ptr<Engine> engine = m_model.load(two);
    QVERIFY(plain && engine);
    const int64_t vocab = engine->config().vocab_size;
    const std::vector<int32_t> a = random_tokens(13, vocab, 94), b = random_tokens(17, vocab, 95);
    const int n = 16;
    auto owned = std::make_unique<OracleDrafter>();
    OracleDrafter* drafter = owned.get();
    drafter->expect(a, engine_greedy(*plain, a, n));
    drafter->expect(b, engine_greedy(*plain, b, n));
    spec::SpeculativeConfig config;
    config.kind = spec::DrafterKind::PromptLookup;
    config.num_draft_tokens = 4;
    const Status set = engine->set_drafter(std::move(owned), config);
    QVERIFY2(set.is_ok(), set.message().c_str());

    const test::EngineRun got = run_to_end(*engine, {greedy_request(a, n), greedy_request(b, n)});
    QVERIFY2(got.error.empty(), got.error.c_str());
    QCOMPARE(got.tokens.at(got.ids[0]), engine_greedy(*plain, a, n));
    QCOMPARE(got.tokens.at(got.ids[1]), engine_greedy(*plain, b, n));
    QCOMPARE(drafter->most_asked(), int64_t(2));
    for (const RequestId id : got.ids) QVERIFY(got.finished.at(id).speculation.num_drafted > 0);
  }

  // Prompt lookup (set at load) and a draft model without recurrent layers (test-qwen2 shares
  // test-qwen35's synthetic vocabulary) draft for the recurrent target: plain decoding's tokens.
  void promptLookupAndDraftModelWork_data() {
    QTest::addColumn<int>("kind");
    QTest::newRow("prompt lookup") << static_cast<int>(spec::DrafterKind::PromptLookup);
    QTest::newRow("draft model") << static_cast<int>(spec::DrafterKind::DraftModel);
  }
  void promptLookupAndDraftModelWork() {
    QFETCH(int, kind);
    spec::SpeculativeConfig config;
    config.kind = static_cast<spec::DrafterKind>(kind);
    config.num_draft_tokens = 3;
    if (config.kind == spec::DrafterKind::DraftModel) {
      config.draft_model_path = m_model.file_path("test-qwen2.gguf");
      const std::string error = test::synthesize_preset("test-qwen2", "F32", 0, config.draft_model_path);
      QVERIFY2(error.empty(), error.c_str());
    }
    EngineOptions with = cpu_options();
    with.speculation = config;
    std::unique_ptr<Engine> engine = m_model.load(with);
    std::unique_ptr<Engine> plain = m_model.load(cpu_options());
    QVERIFY(engine && plain);
    // A prompt that repeats itself, and 40 tokens: the random model's reply repeats enough for
    // prompt lookup to draft (its guesses are then rejected, each one taken back).
    std::vector<int32_t> prompt = random_tokens(8, engine->config().vocab_size, 93);
    for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + 8);
    const test::EngineRun got = run_to_end(*engine, {greedy_request(prompt, 40)});
    const std::vector<RequestId>& ids = got.ids;
    QVERIFY2(got.error.empty(), got.error.c_str());
    QCOMPARE(got.tokens.at(ids[0]), engine_greedy(*plain, prompt, 40));
    QVERIFY(got.finished.at(ids[0]).speculation.num_drafted > 0);
  }

  // The file's MTP block (an attention layer, mtp_head_config) drafts for the recurrent
  // target: its guesses, verified, leave plain decoding's tokens (two sequences together); a
  // file without the block is refused with the reason.
  void mtpHeadDrafts() {
    const std::string path = m_model.file_path("test-qwen35-mtp.gguf");
    const std::string error = test::synthesize_preset("test-qwen35", "F32", 0, path, /*nextn_layers=*/1);
    QVERIFY2(error.empty(), error.c_str());
    EngineOptions with = cpu_options();
    with.speculation.kind = spec::DrafterKind::Mtp;
    with.speculation.num_draft_tokens = 3;
    auto engine = Engine::load(path, with);
    auto plain = Engine::load(path, cpu_options());
    QVERIFY2(engine.is_ok() && plain.is_ok(), (engine.error_message() + plain.error_message()).c_str());
    const int64_t vocab = (*engine)->config().vocab_size;
    const std::vector<int32_t> a = random_tokens(15, vocab, 98), b = random_tokens(6, vocab, 99);
    const test::EngineRun got = run_to_end(**engine, {greedy_request(a, 20), greedy_request(b, 20)});
    QVERIFY2(got.error.empty(), got.error.c_str());
    QCOMPARE(got.tokens.at(got.ids[0]), engine_greedy(**plain, a, 20));
    QCOMPARE(got.tokens.at(got.ids[1]), engine_greedy(**plain, b, 20));
    for (const RequestId id : got.ids) QVERIFY(got.finished.at(id).speculation.num_drafted > 0);
    QVERIFY((*engine)->memory_report().drafter_bytes > 0);

    std::unique_ptr<Engine> without = m_model.load(cpu_options());
    QVERIFY(without);
    const Status s = without->set_speculation(with.speculation);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("multi-token-prediction") != std::string::npos, s.message().c_str());
  }

  // Drafters that would run the recurrent layers themselves cannot take their guesses back:
  // the model as its own draft model, its requantized copy. Refused with the reason, at load
  // and later; the engine then decodes as before.
  void drafterWithRecurrentLayersIsRefused_data() {
    QTest::addColumn<int>("kind");
    QTest::newRow("draft model") << static_cast<int>(spec::DrafterKind::DraftModel);
    QTest::newRow("self draft") << static_cast<int>(spec::DrafterKind::SelfDraft);
  }
  void drafterWithRecurrentLayersIsRefused() {
    QFETCH(int, kind);
    spec::SpeculativeConfig config;
    config.kind = static_cast<spec::DrafterKind>(kind);
    config.num_draft_tokens = 3;
    if (config.kind == spec::DrafterKind::DraftModel) config.draft_model_path = m_model.path();
    EngineOptions with = cpu_options();
    with.speculation = config;
    auto refused = Engine::load(m_model.path(), with);
    QVERIFY(!refused.is_ok());
    QVERIFY2(refused.error_message().find("recurrent layers") != std::string::npos, refused.error_message().c_str());

    std::unique_ptr<Engine> engine = m_model.load(cpu_options());
    QVERIFY(engine);
    const Status s = engine->set_speculation(config);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("recurrent layers") != std::string::npos, s.message().c_str());
    QVERIFY(!engine->speculation().is_enabled());
    GenerationRequest r = greedy_request(random_tokens(12, engine->config().vocab_size, 71), 8);
    r.num_draft_tokens = 3;  // asks for drafts: there is no drafter to give any
    const test::EngineRun got = run_to_end(*engine, {r});
    const std::vector<RequestId>& ids = got.ids;
    QVERIFY2(got.error.empty(), got.error.c_str());
    QCOMPARE(got.finished.at(ids[0]).reason, FinishReason::MaxTokens);
    QCOMPARE(got.finished.at(ids[0]).speculation.num_drafted, int64_t(0));
  }
};

QTEST_GUILESS_MAIN(TestRecurrentSpeculation)
#include "test_recurrent_speculation.moc"
