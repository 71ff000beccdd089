// `iwb batch-bench` on the aidreams model (converted here): the JSON of two parallelisms has
// every field with values the workload determines (tokens, blocks, the contiguous
// comparison), a shared prefix is served from the prefix cache, the table prints, and bad
// usage is refused with a reason.
#include "iwb_process.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

using iwb::test::run_iwb;
using iwb::test::shared_models_qdir;

class TestCliBatchBench : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  QString m_model;

  QJsonObject run_json(const QStringList& extra) {
    auto r = run_iwb(QStringList{"batch-bench", "-m", m_model, "-t", "1", "--json"} + extra, 120000);
    if (r.exit_code != 0) qWarning("%s", qPrintable(r.err));
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &error);
    if (error.error != QJsonParseError::NoError) qWarning("not JSON: %s", qPrintable(r.out));
    return doc.object();
  }

 private slots:
  void initTestCase() {
    const QString dir = shared_models_qdir() + "/llama2c/";
    if (!QFile::exists(dir + "aidreams260K.bin")) return;
    m_model = m_tmp.filePath("aidreams.gguf");
    auto r = run_iwb({"convert", "llama2c", "--checkpoint", dir + "aidreams260K.bin", "--tokenizer",
                      dir + "aidreams260K-tok512.bin", "-o", m_model});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  }

  void init() {
    if (m_model.isEmpty() && QString(QTest::currentTestFunction()) != "usageErrors")
      QSKIP("shared aidreams model absent");
  }

  void parallelRuns() {
    const QJsonObject doc = run_json({"-p", "16", "-n", "8", "--parallel", "1,4"});
    QCOMPARE(doc["context"].toInt(), 128);
    QCOMPARE(doc["block_size"].toInt(), 16);
    QVERIFY(doc["prefix_cache"].isString());
    // The default pool holds the largest parallelism whole: 4 x (2 + 1 spare) blocks.
    QCOMPARE(doc["num_blocks"].toInt(), 12);
    const QJsonArray runs = doc["runs"].toArray();
    QCOMPARE(runs.size(), 2);
    const int parallel[] = {1, 4};
    for (int i = 0; i < 2; ++i) {
      const QJsonObject r = runs[i].toObject();
      const int p = parallel[i];
      QCOMPARE(r["parallel"].toInt(), p);
      QCOMPARE(r["generated_tokens"].toInt(), 8 * p);
      // 16 + 8 - 1 = 23 positions each: two blocks per sequence at the end.
      QCOMPARE(r["peak_blocks"].toInt(), 2 * p);
      QCOMPARE(r["preemptions"].toInt(), 0);
      for (const char* key : {"seconds", "aggregate_tokens_per_s", "decode_tokens_per_s", "per_sequence_tokens_per_s",
                              "mean_ttft_s", "max_ttft_s"}) {
        QVERIFY2(r[key].toDouble() > 0, key);
      }
      QVERIFY(r["mean_ttft_s"].toDouble() <= r["max_ttft_s"].toDouble());
      QVERIFY(r["waste"].toDouble() > 0 && r["waste"].toDouble() < 0.5);
      // The peak is first reached by the first decode, whose token opens each sequence's second
      // block: 17 of 32 slots used.
      QCOMPARE(r["waste_at_peak"].toDouble(), 15.0 / 32.0);
      const QJsonObject c = r["contiguous"].toObject();
      QCOMPARE(c["max_context"].toInt(), 128);
      QCOMPARE(c["waste"].toDouble(), (128.0 - 23.0) / 128.0);
      QCOMPARE(c["fit_in_pool"].toInt(), 1);  // 12 blocks = 192 positions: one 128-position slab
      QCOMPARE(c["fit_in_peak_memory"].toInt(), p == 1 ? 0 : 1);
    }
    QCOMPARE(runs[0].toObject()["steps"].toInt(), 8);  // one step per generated token
  }

  // A 32-token prefix: the second request finds its two blocks cached, and so does every
  // request of the parallel run.
  void sharedPrefix() {
    const QJsonObject doc = run_json({"-p", "8", "-n", "4", "--parallel", "2", "--shared-prefix", "32"});
    const QJsonObject prefix = doc["prefix_cache"].toObject();
    QCOMPARE(prefix["prefix_tokens"].toInt(), 32);
    QCOMPARE(prefix["prompt_tokens"].toInt(), 40);
    QCOMPARE(prefix["reused_tokens"].toInt(), 32);
    QVERIFY(prefix["cold_ttft_s"].toDouble() > 0 && prefix["warm_ttft_s"].toDouble() > 0);
    const QJsonObject run = doc["runs"].toArray()[0].toObject();
    QCOMPARE(run["prefix_hit_rate"].toDouble(), 32.0 / 40.0);
    // Two shared prefix blocks, then a block of its own each: 4 (without sharing it would be 6).
    QCOMPARE(run["peak_blocks"].toInt(), 4);
  }

  void table() {
    auto r = run_iwb(
        {"batch-bench", "-m", m_model, "-t", "1", "-p", "8", "-n", "4", "--parallel", "1,2", "--shared-prefix", "16"},
        120000);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("prefix cache: TTFT"), qPrintable(r.out));
    QVERIFY(r.out.contains("agg tok/s"));
    QVERIFY(r.out.contains("\n   2 "));
  }

  void usageErrors() {
    auto r = run_iwb({"batch-bench"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY(r.err.contains("no model given"));
    r = run_iwb({"batch-bench", "-m", "x.gguf", "--parallel", "1,0"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY(r.err.contains("--parallel expects a comma-separated list of integers from 1 to 1024, got '1,0'"));
    r = run_iwb({"batch-bench", "-m", "x.gguf", "-n", "zero"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY(r.err.contains("-n expects an integer >= 1, got 'zero'"));
    if (m_model.isEmpty()) return;
    r = run_iwb({"batch-bench", "-m", m_model, "-c", "16", "-p", "16", "-n", "8", "--parallel", "1"});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("needs a context of 24; the engine holds 16"), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestCliBatchBench)
#include "test_cli_batch_bench.moc"
