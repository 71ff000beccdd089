// Speculative decoding end to end on the engine: greedy output with every drafter (prompt
// lookup, a draft model, a self-draft requantized on load) is token for token the output of
// plain greedy decoding, one request at a time and several batched in one step, also when a
// tiny KV pool forces preemptions; drafts are accepted and rejected (the stats say so), and the
// rejected positions' blocks go back to the pool.
#include "tiny_models.h"

#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/spec/drafter.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <map>
#include "test_paths.h"

using namespace iwb;

namespace {

struct Run {
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, RequestFinished> finished;
  spec::SpeculationStats speculation;  // summed over the steps
  int max_sequences_in_step = 0;
  int64_t num_preemptions = 0;
  int64_t num_draft_events = 0;  // tokens marked as accepted drafts
  std::string error;
};

Run run_all(Engine& engine, const std::vector<GenerationRequest>& requests, bool is_batched) {
  Run run;
  std::vector<RequestId> ids;
  auto drain = [&] {
    while (engine.has_unfinished_requests()) {
      Result<StepResult> s = engine.step();
      if (!s) {
        run.error = s.error_message();
        return;
      }
      if (!s->stats.speculation_error.empty()) run.error = s->stats.speculation_error;
      for (const TokenEvent& e : s->tokens) {
        run.tokens[e.request].push_back(e.token);
        run.num_draft_events += e.is_draft ? 1 : 0;
      }
      for (const RequestFinished& f : s->finished) run.finished[f.request] = f;
      run.speculation.add(s->stats.speculation);
      run.max_sequences_in_step = std::max(run.max_sequences_in_step, s->stats.num_sequences);
      run.num_preemptions += s->stats.num_preemptions;
    }
  };
  for (const GenerationRequest& r : requests) {
    Result<RequestId> id = engine.add_request(r);
    if (!id) {
      run.error = id.error_message();
      return run;
    }
    ids.push_back(*id);
    if (!is_batched) drain();
  }
  drain();
  // Renumber by submission order so runs on different engines compare.
  Run ordered = run;
  ordered.tokens.clear();
  ordered.finished.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    ordered.tokens[i] = run.tokens[ids[i]];
    ordered.finished[i] = run.finished[ids[i]];
  }
  return ordered;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_new) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0.0f;  // the default repeat penalty stays on: verification must apply it too
  r.stop_at_end_of_generation = false;
  return r;
}

}  // namespace

class TestSpeculative : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  std::string m_aidreams, m_aidreams_f16, m_qwen;
  std::map<std::string, Run> m_plain;  // plain greedy decoding of requests_for(model, 4), per model

  // The reference every speculative run must reproduce (computed once per model).
  const Run& plain_run(const std::string& path, const std::vector<GenerationRequest>& requests) {
    auto it = m_plain.find(path);
    if (it == m_plain.end()) {
      EngineOptions options;
      options.num_threads = 2;
      auto engine = Engine::load(path, options);
      Run run;
      if (!engine)
        run.error = engine.error_message();
      else
        run = run_all(**engine, requests, false);
      it = m_plain.emplace(path, std::move(run)).first;
    }
    return it->second;
  }

  std::string model(const QString& name) const { return name == "aidreams" ? m_aidreams : m_qwen; }

  std::vector<GenerationRequest> requests_for(const std::string& path, int count) {
    auto engine = Engine::load(path, {});
    if (!engine) return {};
    const tokenizer::Tokenizer& tok = (*engine)->tokenizer();
    const char* texts[] = {"Once upon a time, there was a little girl named Lily. Lily liked to play.",
                           "The cat sat on the mat. The dog sat on the log. The cat",
                           "One day, a boy went to the park. He saw a big tree.",
                           "I dreamed of a blue sea and a blue sky and a"};
    std::vector<GenerationRequest> out;
    for (int i = 0; i < count; ++i) {
      std::vector<int32_t> prompt = tok.encode(texts[i % 4]);
      if (prompt.size() > 40) prompt.resize(40);
      out.push_back(greedy(prompt, 28 + 6 * i));
    }
    return out;
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    const std::string dir = iwb::test::shared_models_dir() + "/llama2c/";
    if (QFile::exists(QString::fromStdString(dir + "aidreams260K.bin"))) {
      m_aidreams = m_tmp.filePath("aidreams.gguf").toStdString();
      auto converted =
          convert::convert_llama2c_to_gguf(dir + "aidreams260K.bin", dir + "aidreams260K-tok512.bin", m_aidreams, {});
      QVERIFY2(converted.is_ok(), converted.error_message().c_str());
      // A draft model that differs slightly from the target: the same weights in f16.
      m_aidreams_f16 = m_tmp.filePath("aidreams-f16.gguf").toStdString();
      convert::Llama2cConvertOptions f16;
      f16.weight_type = GgmlType::F16;
      converted = convert::convert_llama2c_to_gguf(dir + "aidreams260K.bin", dir + "aidreams260K-tok512.bin",
                                                   m_aidreams_f16, f16);
      QVERIFY2(converted.is_ok(), converted.error_message().c_str());
    }
    test::TinyModelSpec qwen;
    qwen.arch = "qwen2";
    qwen.has_qkv_bias = true;
    qwen.preset = test::WeightPreset::MixedK;
    m_qwen = m_tmp.filePath("qwen2.gguf").toStdString();
    const Status s = test::write_tiny_model(qwen, m_qwen);
    QVERIFY2(s.is_ok(), s.message().c_str());
  }

  void greedyMatchesPlainDecoding_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("drafter");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("batched");
    for (const bool batched : {false, true}) {
      const char* mode = batched ? "batched" : "one-at-a-time";
      QTest::newRow(qPrintable(QString("aidreams lookup K=4 %1").arg(mode))) << "aidreams"
                                                                             << "lookup" << 4 << batched;
      QTest::newRow(qPrintable(QString("aidreams draft f16 K=3 %1").arg(mode))) << "aidreams"
                                                                                << "draft" << 3 << batched;
      QTest::newRow(qPrintable(QString("aidreams self Q4_0 K=5 %1").arg(mode))) << "aidreams"
                                                                                << "self" << 5 << batched;
      QTest::newRow(qPrintable(QString("qwen2 self Q4_0 K=2 %1").arg(mode))) << "qwen2"
                                                                             << "self" << 2 << batched;
    }
  }

  void greedyMatchesPlainDecoding() {
    QFETCH(QString, model);
    QFETCH(QString, drafter);
    QFETCH(int, k);
    QFETCH(bool, batched);
    const std::string path = this->model(model);
    if (path.empty()) QSKIP("shared aidreams model absent");
    const std::vector<GenerationRequest> requests = requests_for(path, 4);
    QCOMPARE(requests.size(), size_t{4});

    const Run& expected = plain_run(path, requests);
    QVERIFY2(expected.error.empty(), expected.error.c_str());

    EngineOptions options;
    options.num_threads = 2;
    Result<spec::DrafterKind> kind = spec::parse_drafter_kind(drafter.toStdString());
    QVERIFY(kind.is_ok());
    options.speculation.kind = *kind;
    options.speculation.num_draft_tokens = k;
    options.speculation.draft_model_path = m_aidreams_f16;
    auto engine = Engine::load(path, options);
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    QCOMPARE((*engine)->speculation().kind, *kind);
    // A model drafter's weights (its own file, or the requantized copy) and KV cache are counted.
    QCOMPARE((*engine)->memory_report().drafter_bytes > 0, drafter != "lookup");
    const Run got = run_all(**engine, requests, batched);
    QVERIFY2(got.error.empty(), got.error.c_str());

    for (size_t i = 0; i < requests.size(); ++i) {
      QCOMPARE(got.tokens.at(i), expected.tokens.at(i));
      QCOMPARE(got.finished.at(i).reason, FinishReason::MaxTokens);
    }
    if (batched) QVERIFY(got.max_sequences_in_step > 1);
    // Speculation really happened, with guesses both kept and thrown away.
    const spec::SpeculationStats& s = got.speculation;
    QVERIFY(s.num_verify_steps > 0);
    QVERIFY(s.num_accepted > 0);
    QVERIFY(s.num_accepted < s.num_drafted || drafter == "draft");
    QCOMPARE(s.num_emitted, s.num_accepted + s.num_verify_steps);  // nobody finished inside a verification
    QCOMPARE(got.num_draft_events, s.num_accepted);
    QVERIFY(s.draft_seconds >= 0 && s.verify_seconds > 0);
    QCOMPARE(static_cast<int>(s.drafted_per_position.size()), k);
    QCOMPARE(s.drafted_per_position.front(), s.num_verify_steps);
    int64_t histogram_total = 0;
    for (const int64_t n : s.accepted_length_histogram) histogram_total += n;
    QCOMPARE(histogram_total, s.num_verify_steps);
    // Per request: the same numbers, split.
    int64_t accepted = 0;
    for (const auto& [i, f] : got.finished) accepted += f.speculation.num_accepted;
    QCOMPARE(accepted, s.num_accepted);
    // Every block went back (finished sequences keep only cached prompt blocks).
    QCOMPARE((*engine)->kv_snapshot().cache.stats.num_used_blocks, int64_t{0});
  }

  // A KV pool of a few blocks: sequences are preempted and recomputed while speculating; the
  // rolled-back guesses never corrupt what is recomputed.
  void greedyWithPreemptionMatches() {
    if (m_aidreams.empty()) QSKIP("shared aidreams model absent");
    const std::vector<GenerationRequest> requests = requests_for(m_aidreams, 4);
    EngineOptions options;
    options.num_threads = 2;
    const Run& expected = plain_run(m_aidreams, requests);

    auto probe = Engine::load(m_aidreams, options);
    QVERIFY(probe.is_ok());
    options.kv_block_size = 8;
    options.kv_cache_bytes = (*probe)->memory_report().kv_bytes_per_position * 8 * 22;  // 22 blocks of 8
    options.speculation.kind = spec::DrafterKind::PromptLookup;
    options.speculation.num_draft_tokens = 6;
    auto engine = Engine::load(m_aidreams, options);
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    const Run got = run_all(**engine, requests, true);
    QVERIFY2(got.error.empty(), got.error.c_str());
    QVERIFY(got.num_preemptions > 0);
    QVERIFY(got.speculation.num_accepted > 0);
    for (size_t i = 0; i < requests.size(); ++i) QCOMPARE(got.tokens.at(i), expected.tokens.at(i));
  }

  // A request can opt out (the GUI's baseline); adaptive K stays within 1..K and still matches.
  void perRequestOffAndAdaptive() {
    if (m_aidreams.empty()) QSKIP("shared aidreams model absent");
    std::vector<GenerationRequest> requests = requests_for(m_aidreams, 2);  // the first two of the four
    EngineOptions options;
    options.num_threads = 2;
    const Run& expected = plain_run(m_aidreams, requests_for(m_aidreams, 4));

    options.speculation.kind = spec::DrafterKind::PromptLookup;
    options.speculation.num_draft_tokens = 8;
    options.speculation.is_adaptive = true;
    auto engine = Engine::load(m_aidreams, options);
    QVERIFY(engine.is_ok());
    requests[0].num_draft_tokens = 0;  // no speculation for this one
    const Run got = run_all(**engine, requests, true);
    QVERIFY2(got.error.empty(), got.error.c_str());
    QCOMPARE(got.tokens.at(0), expected.tokens.at(0));
    QCOMPARE(got.tokens.at(1), expected.tokens.at(1));
    QVERIFY(got.finished.at(0).speculation.empty());
    QVERIFY(!got.finished.at(1).speculation.empty());
    QVERIFY(got.finished.at(1).speculation.drafted_per_position.size() <= 8);

    // Turning it off at run time: no more drafts.
    QVERIFY((*engine)->set_speculation({}).is_ok());
    const Run off = run_all(**engine, {requests[1]}, false);
    QVERIFY(off.speculation.empty());
    QCOMPARE(off.tokens.at(0), expected.tokens.at(1));
  }

  void badSettingsAreRefused() {
    if (m_aidreams.empty()) QSKIP("shared aidreams model absent");
    auto engine = Engine::load(m_aidreams, {});
    QVERIFY(engine.is_ok());
    spec::SpeculativeConfig c;
    c.kind = spec::DrafterKind::PromptLookup;
    c.num_draft_tokens = 0;
    Status s = (*engine)->set_speculation(c);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("draft tokens") != std::string::npos, s.message().c_str());
    c.num_draft_tokens = 4;
    c.kind = spec::DrafterKind::DraftModel;
    s = (*engine)->set_speculation(c);
    QVERIFY2(s.message().find("draft model file") != std::string::npos, s.message().c_str());
    c.draft_model_path = m_tmp.filePath("missing.gguf").toStdString();
    s = (*engine)->set_speculation(c);
    QVERIFY(!s.is_ok());
    QCOMPARE((*engine)->speculation().kind, spec::DrafterKind::None);
    QVERIFY(!spec::parse_drafter_kind("banana").is_ok());
  }
};

QTEST_GUILESS_MAIN(TestSpeculative)
#include "test_speculative.moc"
