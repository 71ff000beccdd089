// The quantization lab's queue as the engine runs it (run_quant_lab) on the real aidreams model:
// two types quantized, evaluated and recorded; progress reported in order and never backwards;
// the reference row and the base's distributions reused by a second queue; cancelling part-way
// leaves no run "running"; and RunRecorder never leaves a row running either. On a synthetic
// llama with 64-wide heads: KV cache types (one for both, and keys/values apart) as runs of
// their own, measured against the base's f16 cache, with their KV bytes per position, the
// sequences that fit a memory budget and generation tokens/s at a context depth.
#include "aidreams_gguf.h"
#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/quant/quant_lab.h"
#include "iwb/engine/quant/run_recorder.h"
#include "iwb/engine/store/results_store.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <cmath>
#include <tuple>

using namespace iwb;
using quant::LabStage;
using quant::RunStatus;

namespace {

// Where a report falls in the queue: the stages before the items, then each item's stages,
// then the end. A queue that reports in order gives non-decreasing keys.
std::tuple<int, int, int> order_key(const quant::LabProgress& p) {
  if (p.stage == LabStage::Finished) return {2, 0, 0};
  if (p.item < 0) return {0, static_cast<int>(p.stage), 0};
  return {1, p.item, static_cast<int>(p.stage)};
}

struct Recorded {
  std::vector<quant::LabProgress> progress;
  std::vector<int64_t> run_ids;
  std::vector<quant::LabItemOutcome> finished;
  quant::LabObserver observer() {
    quant::LabObserver o;
    o.progress = [this](const quant::LabProgress& p) { progress.push_back(p); };
    o.run_recorded = [this](int64_t id) { run_ids.push_back(id); };
    o.item_finished = [this](const quant::LabItemOutcome& i) { finished.push_back(i); };
    return o;
  }
};

}  // namespace

class TestQuantLabQueue : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  QString m_model;  // aidreams as an F32 GGUF

  quant::LabSettings settings(const QString& out) const {
    quant::LabSettings s;
    s.source_path = m_model.toStdString();
    s.output_dir = m_tmp.filePath(out).toStdString();
    s.context = 64;
    s.num_chunks = 3;
    s.num_gen_tokens = 0;
    s.num_threads = 2;
    return s;
  }

  std::unique_ptr<ResultsStore> open_store(const QString& name) {
    auto store = ResultsStore::open(m_tmp.filePath(name).toStdString());
    if (!store) qFatal("%s", store.error_message().c_str());
    return std::move(*store);
  }

 private slots:
  void initTestCase() {
    qputenv("IWB_LOGITS_CACHE", m_tmp.filePath("logits").toUtf8());
    m_model = test::convert_aidreams_gguf(m_tmp.path());
  }

  void quantizesTwoTypesThenReusesTheReference() {
    if (m_model.isEmpty()) QSKIP("shared models folder absent: no aidreams model");
    auto store = open_store("two-types.sqlite");
    Recorded first;
    auto report = quant::run_quant_lab(settings("out"), {{"Q8_0"}, {"Q4_0"}}, *store, first.observer());
    QVERIFY2(report.is_ok(), report.error_message().c_str());
    QVERIFY(!report->was_cancelled && !report->was_reference_reused);
    QCOMPARE(report->reference.status, RunStatus::Done);
    QCOMPARE(report->items.size(), size_t{2});
    QCOMPARE(report->summary(), std::string("2 runs done, 0 failed"));
    QCOMPARE(first.finished.size(), size_t{2});
    QCOMPARE(first.finished[1].label, std::string("Q4_0"));

    auto runs = store->list_quant_runs();
    QVERIFY(runs.is_ok());
    QCOMPARE(runs->size(), size_t{3});  // the reference, then the two items
    for (const quant::QuantRun& r : *runs) {
      QCOMPARE(r.status, RunStatus::Done);
      QCOMPARE(r.kind, std::string("lab"));
    }
    QVERIFY(runs->at(0).is_reference && runs->at(0).id == report->reference.run_id);
    QCOMPARE(runs->at(1).weight_type, std::string("Q8_0"));
    QCOMPARE(runs->at(1).id, report->items[0].run_id);
    QVERIFY(runs->at(1).kl_mean.value_or(1) < runs->at(2).kl_mean.value_or(0));  // 8 bits diverge less than 4
    auto errors = store->quant_tensor_errors(report->items[1].run_id);
    QVERIFY(errors.is_ok() && !errors->empty());
    QVERIFY(QFile::exists(m_tmp.filePath("out/aidreams-Q4_0.gguf")));
    // Every row was announced when added and when finished.
    for (const quant::QuantRun& r : *runs) QCOMPARE(std::count(first.run_ids.begin(), first.run_ids.end(), r.id), 2L);

    // Progress: in queue order, never backwards, ending at 1.
    QVERIFY(first.progress.size() > 6);
    for (size_t i = 1; i < first.progress.size(); ++i) {
      const quant::LabProgress& a = first.progress[i - 1];
      const quant::LabProgress& b = first.progress[i];
      QVERIFY2(order_key(a) <= order_key(b), (b.message + " came after " + a.message).c_str());
      QVERIFY2(a.fraction <= b.fraction, b.message.c_str());
    }
    QCOMPARE(first.progress.front().stage, LabStage::Base);
    QCOMPARE(first.progress.back().stage, LabStage::Finished);
    QCOMPARE(first.progress.back().fraction, 1.0);
    auto saw = [&](LabStage stage, int item) {
      return std::any_of(first.progress.begin(), first.progress.end(),
                         [&](const quant::LabProgress& p) { return p.stage == stage && p.item == item; });
    };
    QVERIFY(saw(LabStage::Reference, -1) && saw(LabStage::Quantize, 0) && saw(LabStage::Evaluate, 1));

    // A second queue on the same base, text and context: the reference row is reused, and the
    // base's distributions come from the logits cache (the base is not run again).
    Recorded second;
    auto again = quant::run_quant_lab(settings("out"), {{"Q5_0"}}, *store, second.observer());
    QVERIFY2(again.is_ok(), again.error_message().c_str());
    QVERIFY(again->was_reference_reused);
    QCOMPARE(again->reference.run_id, report->reference.run_id);
    QCOMPARE(again->items[0].status, RunStatus::Done);
    QVERIFY(again->items[0].was_base_cached);
    QCOMPARE(store->list_quant_runs()->size(), size_t{4});  // no second reference row
  }

  void kvCacheTypesAreRunsAgainstTheF16Base() {
    // A small llama with two KV heads of 64 (the block types need multiples of 32), trained
    // context 512, F16 weights; runs on the byte-level tokenizer.
    const std::string model = m_tmp.filePath("test-llama.gguf").toStdString();
    synth::SynthOptions so;
    so.shape = *synth::find_synth_preset("test-llama");
    so.weight_type = "F16";
    so.seed = 7;
    so.num_threads = 2;
    so.output_path = model;
    auto made = synth::synthesize_model(so);
    QVERIFY2(made.is_ok(), made.error_message().c_str());
    auto store = open_store("kv.sqlite");
    quant::LabSettings s = settings("kv-out");
    s.source_path = model;
    s.num_gen_tokens = 4;
    s.gen_depth = 4096;  // past the trained context: cut to 512 - (4 prompt + 4 generated + 1)
    s.fit_context = 1000;
    s.fit_memory_bytes = 64.0 * 1024 * 1024;
    auto report = quant::run_quant_lab(
        s, {{"", false, "q8_0"}, {"", false, "q4_0/q8_0"}, {"Q4_0"}, {"Q4_0", false, "q4_0"}}, *store);
    QVERIFY2(report.is_ok(), report.error_message().c_str());
    QCOMPARE(report->summary(), std::string("4 runs done, 0 failed"));
    QCOMPARE(report->items[1].label, std::string("base, KV q4_0/q8_0"));
    QCOMPARE(report->items[3].label, std::string("Q4_0, KV q4_0"));
    auto runs = store->list_quant_runs();
    QVERIFY(runs.is_ok());
    QCOMPARE(runs->size(), size_t{5});
    const quant::QuantRun& base = runs->at(0);
    QVERIFY(base.is_reference);
    QCOMPARE(base.kv_cache_type, std::string("f16"));
    // 2 layers x (K + V) x 2 heads x 64 values: f16 2 bytes a value; Q8_0 34 bytes and Q4_0
    // 18 bytes per 32 values.
    const double f16 = 2 * 2 * 2 * 64 * 2, q8 = 2 * 2 * 2 * 2 * 34, q4q8 = 2 * 2 * 2 * (18 + 34),
                 q4 = 2 * 2 * 2 * 2 * 18;
    QCOMPARE(base.kv_bytes_per_token.value_or(0), f16);
    QCOMPARE(runs->at(1).kv_bytes_per_token.value_or(0), q8);
    QCOMPARE(runs->at(2).kv_bytes_per_token.value_or(0), q4q8);
    QCOMPARE(runs->at(3).kv_bytes_per_token.value_or(0), f16);
    QCOMPARE(runs->at(4).kv_bytes_per_token.value_or(0), q4);
    for (const quant::QuantRun& r : *runs) {
      QCOMPARE(r.status, RunStatus::Done);
      // Every run is measured against the base's weights with the f16 cache.
      QCOMPARE(r.source_identity, base.model_identity);
      QVERIFY(r.kl_mean.has_value() && r.top1_agreement.has_value() && r.perplexity.has_value());
      QCOMPARE(r.gen_depth, int64_t{512 - 9});
      QVERIFY(r.depth_gen_tokens_per_s.value_or(0) > 0);
      QVERIFY(r.weights_bytes.value_or(0) > 0 && r.kv_block_size > 0);
      QCOMPARE(r.fit_context, int64_t{1000});
      QCOMPARE(r.fit_memory_bytes.value_or(0), s.fit_memory_bytes);
      const double pool = quant::kv_pool_bytes_for(*r.kv_bytes_per_token, r.kv_block_size, 1000, 1);
      QCOMPARE(r.fit_sequences.value_or(-1), std::floor((s.fit_memory_bytes - *r.weights_bytes) / pool));
    }
    QCOMPARE(runs->at(1).weights_bytes, base.weights_bytes);        // the base's weights, another cache
    QVERIFY(*runs->at(3).weights_bytes < *base.weights_bytes / 2);  // Q4_0 weights
    QVERIFY(*runs->at(1).fit_sequences > *base.fit_sequences);      // a smaller cache fits more
    for (size_t i = 1; i < runs->size(); ++i) {
      // PPL(Q)/PPL(base): the quotient of the two perplexities, with a per-token error.
      const quant::QuantRun& r = runs->at(i);
      QVERIFY2(r.ppl_ratio && std::abs(*r.ppl_ratio - *r.perplexity / *base.perplexity) < 1e-3 * *r.ppl_ratio,
               qPrintable(QString::number(r.ppl_ratio.value_or(0))));
      QVERIFY(r.ppl_ratio_error.value_or(0) > 0);
    }
    QVERIFY(*runs->at(4).fit_sequences > *runs->at(3).fit_sequences);
    QVERIFY(runs->at(1).kl_mean.value_or(0) > 0);                                // the cache's rounding costs something
    QVERIFY(runs->at(1).kl_mean.value_or(1) < runs->at(4).kl_mean.value_or(0));  // 8-bit cache < Q4_0 + 4-bit cache
    QCOMPARE(runs->at(1).model_identity, base.model_identity);                   // the same file, not a copy
  }

  void cancellingMidQueueLeavesNoRunningRows() {
    if (m_model.isEmpty()) QSKIP("shared models folder absent: no aidreams model");
    auto store = open_store("cancel.sqlite");
    std::atomic<bool> cancel{false};
    Recorded seen;
    quant::LabObserver observer = seen.observer();
    // Cancel as the second item starts quantizing: the first is done, the second stopped.
    observer.progress = [&](const quant::LabProgress& p) {
      seen.progress.push_back(p);
      if (p.stage == LabStage::Quantize && p.item == 1) cancel = true;
    };
    auto report =
        quant::run_quant_lab(settings("cancel-out"), {{"Q8_0"}, {"Q4_0"}, {"Q5_0"}}, *store, observer, &cancel);
    QVERIFY2(report.is_ok(), report.error_message().c_str());
    QVERIFY(report->was_cancelled);
    QCOMPARE(report->items[0].status, RunStatus::Done);
    QCOMPARE(report->items[1].status, RunStatus::Cancelled);
    QVERIFY(report->items[1].run_id > 0);
    QCOMPARE(report->items[2].status, RunStatus::Cancelled);
    QCOMPARE(report->items[2].run_id, int64_t{0});  // never reached: no row
    QCOMPARE(seen.progress.back().stage, LabStage::Finished);

    auto runs = store->list_quant_runs();
    QVERIFY(runs.is_ok());
    QCOMPARE(runs->size(), size_t{3});  // reference, Q8_0, the cancelled Q4_0
    for (const quant::QuantRun& r : *runs) QVERIFY(r.status != RunStatus::Running);
    QCOMPARE(runs->back().status, RunStatus::Cancelled);
    QCOMPARE(runs->back().weight_type, std::string("Q4_0"));
    QVERIFY(!QFile::exists(m_tmp.filePath("cancel-out/aidreams-Q4_0.gguf")));  // nothing half-written
  }

  void queueErrorsAreValues() {
    auto store = open_store("errors.sqlite");
    quant::LabSettings s;
    s.source_path = m_tmp.filePath("absent.gguf").toStdString();
    s.output_dir = m_tmp.filePath("never").toStdString();
    auto report = quant::run_quant_lab(s, {{"Q8_0"}}, *store);
    QVERIFY(!report.is_ok());
    QVERIFY2(report.error_message().find("absent.gguf") != std::string::npos, report.error_message().c_str());
    s.eval_text_path = m_tmp.filePath("no-such-text.txt").toStdString();
    report = quant::run_quant_lab(s, {{"Q8_0"}}, *store);
    QVERIFY2(report.error_message().find("cannot read the text") != std::string::npos, report.error_message().c_str());
    QCOMPARE(store->list_quant_runs()->size(), size_t{0});
  }

  void recorderNeverLeavesARunRunning() {
    auto store = open_store("recorder.sqlite");
    quant::QuantRun run;
    run.kind = "eval";
    run.date = quant::utc_now();
    int64_t abandoned = 0;
    {
      auto recorder = quant::RunRecorder::start(store.get(), run);
      QVERIFY(recorder.is_ok());
      abandoned = recorder->id();
      QCOMPARE(store->list_quant_runs()->front().status, RunStatus::Running);
    }  // dropped without a finish
    auto cancelled = quant::RunRecorder::start(store.get(), run);
    QVERIFY(cancelled.is_ok());
    cancelled->run().perplexity = 42.0;
    QVERIFY(cancelled->finish_failed("evaluation cancelled", true).is_ok());
    auto runs = store->list_quant_runs();
    QCOMPARE(runs->size(), size_t{2});
    QCOMPARE(runs->at(0).id, abandoned);
    QCOMPARE(runs->at(0).status, RunStatus::Failed);
    QVERIFY(runs->at(0).error.find("interrupted") != std::string::npos);
    QCOMPARE(runs->at(1).status, RunStatus::Cancelled);
    QCOMPARE(runs->at(1).perplexity.value_or(0), 42.0);  // the figures so far are kept
    // Without a store the same calls succeed and record nothing.
    auto unrecorded = quant::RunRecorder::start(nullptr, run);
    QVERIFY(unrecorded.is_ok() && unrecorded->finish_done().is_ok());
    QCOMPARE(store->list_quant_runs()->size(), size_t{2});
  }
};

QTEST_GUILESS_MAIN(TestQuantLabQueue)
#include "test_quant_lab_queue.moc"
