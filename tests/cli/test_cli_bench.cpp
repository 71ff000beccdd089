// `iwb bench`, `iwb profile-overhead` and `iwb run --profile` on the aidreams model (converted
// here): the JSON has every field, results land in the store (with MBU/MFU once the machine is
// probed, without before), --no-store records nothing, --list reads them back, `-d` runs each
// test at each context depth (llama-bench's names and n_depth) and refuses a depth beyond the
// model's context, `iwb probe` reports its read-only bandwidth, the profile table counts every
// kernel, and bad usage is refused.
#include "iwb_process.h"

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/store/results_store.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

using iwb::test::run_iwb;
using iwb::test::shared_models_qdir;

class TestCliBench : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  QString m_model;

  QJsonObject bench_json(const QString& db, const QStringList& extra = {}) {
    auto r = run_iwb(
        QStringList{"bench", "-m", m_model, "-p", "16", "-n", "8", "-r", "2", "-t", "2", "--json", "--db", db} + extra,
        120000);
    if (r.exit_code != 0) qWarning("%s", qPrintable(r.err));
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &error);
    if (error.error != QJsonParseError::NoError) qWarning("not JSON: %s", qPrintable(r.out));
    return doc.object();
  }

  size_t stored_rows(const QString& db) {
    auto store = iwb::ResultsStore::open(db.toStdString());
    if (!store) return size_t(-1);
    auto rows = (*store)->list_bench_results();
    return rows ? rows->size() : size_t(-1);
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

  void jsonFieldsAndStore() {
    const QString db = m_tmp.filePath("results.sqlite");
    // Before any probe: results, but no utilisation.
    QJsonObject first = bench_json(db);
    QVERIFY(first["probe"].isNull());
    QCOMPARE(first["stored"].toBool(), true);
    QCOMPARE(first["results"].toArray().size(), 2);
    QVERIFY(first["results"].toArray()[0].toObject()["mbu"].isNull());
    QCOMPARE(stored_rows(db), size_t(2));

    // A (small, quick) probe of this machine, then MFU for pp and MBU for tg.
    auto probe = run_iwb({"probe", "--size", "16", "--db", db, "-t", "2"}, 120000);
    QVERIFY2(probe.exit_code == 0, qPrintable(probe.err));
    const QJsonObject doc = bench_json(db);
    const QJsonArray results = doc["results"].toArray();
    QCOMPARE(results.size(), 2);
    QVERIFY(doc["probe"].isObject());
    QVERIFY(doc["probe"].toObject()["peak_flops"].toDouble() > 0);
    const QStringList tests = {"pp16", "tg8"};
    for (int i = 0; i < 2; ++i) {
      const QJsonObject r = results[i].toObject();
      QCOMPARE(r["test"].toString(), tests[i]);
      QVERIFY(r["id"].toInteger() > 2);
      QCOMPARE(r["architecture"].toString(), QString("llama"));
      QCOMPARE(r["file_type"].toString(), QString("F32"));
      QCOMPARE(r["num_threads"].toInt(), 2);
      QCOMPARE(r["num_repetitions"].toInt(), 2);
      QCOMPARE(r["model_size_bytes"].toInteger(), QFileInfo(m_model).size());
      QVERIFY(r["model_identity"].toString().startsWith(
          QString("size=%1;fnv1a64-first-MiB=").arg(QFileInfo(m_model).size())));
      QCOMPARE(r["tokens_per_s"].toArray().size(), 2);
      QVERIFY(r["tokens_per_s_mean"].toDouble() > 0);
      QVERIFY(r["tokens_per_s_sd"].toDouble() >= 0);
      QVERIFY(r["predicted_flops_per_token"].toDouble() > 0);
      QVERIFY(r["predicted_bytes_per_token"].toDouble() > 0);
      QVERIFY(r["mbu"].toDouble() > 0);
      QVERIFY(r["mfu"].toDouble() > 0);
      QVERIFY(!r["probe_date"].toString().isEmpty());
      QCOMPARE(r["device_id"].toString(), QString("cpu"));
    }
    QCOMPARE(results[0].toObject()["num_prompt_tokens"].toInt(), 16);
    QCOMPARE(results[1].toObject()["num_generated_tokens"].toInt(), 8);
    QCOMPARE(stored_rows(db), size_t(4));

    // --no-store leaves the store as it was; --list reads every row back.
    QJsonObject unstored = bench_json(db, {"--no-store"});
    QCOMPARE(unstored["stored"].toBool(), false);
    QCOMPARE(stored_rows(db), size_t(4));
    auto list = run_iwb({"bench", "--list", "--json", "--db", db, "-m", m_model});
    QVERIFY2(list.exit_code == 0, qPrintable(list.err));
    const QJsonArray rows = QJsonDocument::fromJson(list.out.toUtf8()).array();
    QCOMPARE(rows.size(), 4);
    QCOMPARE(rows[3].toObject()["test"].toString(), QString("tg8"));
  }

  void depthKeyedResults() {
    const QString db = m_tmp.filePath("depth.sqlite");
    // 40: a depth that ends inside a KV block (16 positions), so the pp test recomputes 8 tokens.
    const QJsonObject doc = bench_json(db, {"-d", "0,40"});
    const QJsonArray results = doc["results"].toArray();
    QCOMPARE(results.size(), 4);
    const QStringList tests = {"pp16", "tg8", "pp16 @ d40", "tg8 @ d40"};
    const int depths[] = {0, 0, 40, 40};
    for (int i = 0; i < 4; ++i) {
      const QJsonObject r = results[i].toObject();
      QCOMPARE(r["test"].toString(), tests[i]);
      QCOMPARE(r["n_depth"].toInt(), depths[i]);
      QVERIFY(r["tokens_per_s_mean"].toDouble() > 0);
      QVERIFY(r["predicted_bytes_per_token"].toDouble() > 0);
    }
    // Attention over the depth is in the prediction: more bytes per decoded token at depth 40.
    QVERIFY(results[3].toObject()["predicted_bytes_per_token"].toDouble() >
            results[1].toObject()["predicted_bytes_per_token"].toDouble());
    // Stored with the depth, and listed under llama-bench's name.
    auto store = iwb::ResultsStore::open(db.toStdString());
    QVERIFY(store.is_ok());
    auto rows = (*store)->list_bench_results();
    QVERIFY(rows.is_ok());
    QCOMPARE(rows->size(), size_t(4));
    QCOMPARE((*rows)[3].num_depth_tokens, int64_t(40));
    QCOMPARE((*rows)[3].test, std::string("tg8 @ d40"));

    auto text = run_iwb(
        {"bench", "-m", m_model, "-p", "0", "-n", "4", "--n-depth", "32", "-r", "1", "--no-store", "--db", db}, 120000);
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    QVERIFY2(text.out.contains("tg4 @ d32"), qPrintable(text.out));
  }

  void depthBeyondTheContextIsRefused() {
    auto r = run_iwb({"bench", "-m", m_model, "-p", "16", "-n", "8", "-d", "0,1000000", "--no-store"}, 120000);
    QCOMPARE(r.exit_code, 1);
    // aidreams was trained for a short context: the message names what is needed and what it has.
    QVERIFY2(r.err.contains("depth 1000000 plus the test needs a context of 1000016 tokens"), qPrintable(r.err));
    QVERIFY2(r.err.contains("trained for"), qPrintable(r.err));
    auto negative = run_iwb({"bench", "-m", m_model, "-d", "-5", "--no-store"});
    QCOMPARE(negative.exit_code, 2);
    QVERIFY2(negative.err.contains("-d expects"), qPrintable(negative.err));
  }

  void probeReportsReadOnlyBandwidth() {
    auto r = run_iwb({"probe", "--size", "8", "-t", "2", "--json", "--no-store"}, 120000);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject cpu = QJsonDocument::fromJson(r.out.toUtf8()).object()["devices"].toArray()[0].toObject();
    QCOMPARE(cpu["device_id"].toString(), QString("cpu"));
    QVERIFY(cpu["read_bytes_per_s"].toDouble() > 0);
    QVERIFY(cpu["copy_bytes_per_s"].toDouble() > 0);
    QCOMPARE(cpu["bandwidth_bytes_per_s"].toDouble(), cpu["read_bytes_per_s"].toDouble());  // the decode roof
    auto text = run_iwb({"probe", "--size", "8", "-t", "2", "--no-store"}, 120000);
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    QVERIFY2(text.out.contains("read-only") && text.out.contains("copy"), qPrintable(text.out));
  }

  void textTable() {
    const QString db = m_tmp.filePath("text.sqlite");
    auto r = run_iwb({"bench", "-m", m_model, "-p", "8", "-n", "4", "-r", "1", "--db", db}, 120000);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("| llama ?B all F32"), qPrintable(r.out));  // llama-bench's name for aidreams
    QVERIFY(r.out.contains("pp8") && r.out.contains("tg4"));
    QVERIFY2(r.out.contains("run `iwb probe`"), qPrintable(r.out));
  }

  // --paired-probe: a read-only probe before each generation repetition, one figure each in the
  // JSON, the median of the pairs' MBU, and a line in the table's output; prompts are unpaired.
  // The figures themselves are the machine's: only their presence and agreement are checked.
  void pairedProbe() {
    const QString db = m_tmp.filePath("paired.sqlite");
    QJsonObject o = bench_json(db, {"--paired-probe", "--no-store"});
    const QJsonArray results = o["results"].toArray();
    QCOMPARE(results.size(), 2);
    const QJsonObject pp = results[0].toObject(), tg = results[1].toObject();
    QVERIFY(!pp.contains("paired_read_bytes_per_s"));
    const QJsonArray probes = tg["paired_read_bytes_per_s"].toArray();
    QCOMPARE(probes.size(), 2);  // -r 2
    QVERIFY(probes[0].toDouble() > 0 && probes[1].toDouble() > 0);
    // The median of two pairs is their mean: recompute it from the repetitions' rates (the JSON
    // holds each figure to a few parts in a million).
    const QJsonArray rates = tg["tokens_per_s"].toArray();
    const double bytes = tg["predicted_bytes_per_token"].toDouble();
    const double expected =
        0.5 * (rates[0].toDouble() * bytes / probes[0].toDouble() + rates[1].toDouble() * bytes / probes[1].toDouble());
    QVERIFY2(std::abs(tg["mbu_paired"].toDouble() - expected) <= 1e-5 * expected,
             qPrintable(QString("%1 against %2").arg(tg["mbu_paired"].toDouble()).arg(expected)));
    auto text = run_iwb({"bench", "-m", m_model, "-p", "0", "-n", "4", "-r", "3", "-t", "2", "--paired-probe",
                         "--no-store", "--db", db},
                        120000);
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    QVERIFY2(text.out.contains("tg4: MBU against a read-only probe right before each repetition (p): median") &&
                 text.out.contains("of 3 pairs"),
             qPrintable(text.out));
    // The table's column says which MBU it shows.
    QVERIFY2(text.out.contains(QRegularExpression(QStringLiteral("MBU [0-9.]+% p +\\|"))), qPrintable(text.out));
    // llama-bench's JSON gets the field after iwb's others.
    auto llama = run_iwb({"bench", "-m", m_model, "-p", "0", "-n", "4", "-r", "2", "-t", "2", "--paired-probe",
                          "--no-store", "--db", db, "-o", "json"},
                         120000);
    QVERIFY2(llama.exit_code == 0, qPrintable(llama.err));
    const QJsonArray rows = QJsonDocument::fromJson(llama.out.toUtf8()).array();
    QVERIFY2(rows.size() == 1 && rows[0].toObject()["mbu_paired"].toDouble() > 0, qPrintable(llama.out));
  }

  // -lm (llama.cpp's --load-mode): the weights read into memory or mapped, and the run says
  // which; an unknown mode (llama.cpp's dio here) is a usage error.
  void loadModes() {
    for (const QString& mode : {QStringLiteral("none"), QStringLiteral("mmap"), QStringLiteral("mlock")}) {
      auto r = run_iwb({"bench", "-m", m_model, "-p", "0", "-n", "4", "-r", "1", "-t", "2", "--no-store", "-lm", mode},
                       120000);
      QVERIFY2(r.exit_code == 0, qPrintable(r.err));
      const QString expected = mode == "none"   ? "weights read into memory (load mode none)"
                               : mode == "mmap" ? "weights mapped from the file (load mode mmap)"
                                                : "weights mapped from the file (load mode mlock), ";
      QVERIFY2(r.err.contains(expected), qPrintable(r.err));
    }
    auto bad = run_iwb({"bench", "-m", m_model, "-lm", "dio"});
    QCOMPARE(bad.exit_code, 2);
    QVERIFY2(bad.err.contains("-lm expects one of auto, mmap, mlock, none"), qPrintable(bad.err));
  }

  // A probe stored at a slow moment (here a made-up 0.1 GB/s) gives generation an MBU above
  // 100%: the run says the probe is off when its bytes could not have come from the caches, and
  // keeps quiet for a model that fits in them (aidreams: 1 MB a token).
  void lowProbeIsPointedOut() {
    const QString db = m_tmp.filePath("low-probe.sqlite");
    {
      auto store = iwb::ResultsStore::open(db.toStdString());
      QVERIFY2(store, store.error_message().c_str());
      iwb::ProbeResult slow;
      slow.device_id = "cpu";
      slow.device_name = "the machine at a slow moment";
      slow.date = "2026-01-02T03:04:05Z";
      slow.read_bytes_per_s = slow.copy_bytes_per_s = slow.triad_bytes_per_s = 0.1e9;
      slow.peak_flops = 1e9;
      QVERIFY((*store)->add_probe(slow));
    }
    auto cached = run_iwb({"bench", "-m", m_model, "-p", "0", "-n", "4", "-r", "1", "-t", "2", "--db", db}, 120000);
    QVERIFY2(cached.exit_code == 0, qPrintable(cached.err));
    QVERIFY2(cached.out.contains("MBU") && !cached.out.contains("note:"), qPrintable(cached.out));

    // ~300 MB a token: the F16 output head of a 0.5B model with one layer.
    const iwb::ComputeDeviceInfo cpu = iwb::describe_cpu_device();
    if (cpu.cache_bytes > (120ull << 20)) QSKIP("this CPU's cache could hold half of the 300 MB model");
    const QString big = m_tmp.filePath("streams.gguf");
    auto synth = run_iwb({"synth", "--preset", "qwen2.5-0.5b", "--type", "F16", "--layers", "1", "--distinct-rows",
                          "16", "-t", "2", "-o", big},
                         120000);
    QVERIFY2(synth.exit_code == 0, qPrintable(synth.err));
    auto streamed = run_iwb({"bench", "-m", big, "-p", "0", "-n", "4", "-r", "1", "-t", "2", "--db", db}, 120000);
    // --json says it on stderr and keeps stdout JSON.
    auto json = run_iwb(
        {"bench", "-m", big, "-p", "0", "-n", "4", "-r", "1", "-t", "2", "--db", db, "--json", "--no-store"}, 120000);
    QFile::remove(big);
    QVERIFY2(streamed.exit_code == 0, qPrintable(streamed.err));
    QVERIFY2(streamed.out.contains("note: tg4 read") && streamed.out.contains("above the probe's 0.1 GB/s") &&
                 streamed.out.contains("2026-01-02T03:04:05Z") && streamed.out.contains("`iwb probe` measures again"),
             qPrintable(streamed.out));
    QVERIFY2(json.exit_code == 0 && json.err.contains("iwb bench: tg4 read"), qPrintable(json.err));
    QVERIFY(QJsonDocument::fromJson(json.out.toUtf8()).isObject());
  }

  void profileOverheadPrintsFigures() {
    auto r = run_iwb({"profile-overhead", "-m", m_model, "-n", "8", "-r", "2", "-p", "8", "-t", "1"}, 120000);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("decode ") && r.out.contains("prefill ") && r.out.contains("median step"),
             qPrintable(r.out));
    QVERIFY2(r.out.contains("67.0 per decode step, 0 dropped"), qPrintable(r.out));
  }

  // `iwb run --profile`: a table of kernel kinds per phase after the timings.
  void runProfileTable() {
    auto r =
        run_iwb({"run", "-m", m_model, "-p", "Once upon a time", "-n", "8", "--temp", "0", "-t", "1", "--profile"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("profile: 8 steps"), qPrintable(r.err));
    for (const char* row : {"prefill  matmul", "decode   matmul", "decode   attention", "decode   logits"}) {
      QVERIFY2(r.err.contains(row), row);
    }
    // 7 matmuls in each of 4 layers, times 7 decode steps.
    static const QRegularExpression decode_matmul("decode   matmul\\s+(\\d+)");
    QCOMPARE(decode_matmul.match(r.err).captured(1).toInt(), 7 * 4 * 7);
    // Then the weight products one by one: ffn_down once per layer and step, and all of them
    // adding up to the kind's count.
    static const QRegularExpression ffn_down("decode   ffn_down\\s+\\S+\\s+(\\d+)x(\\d+)\\s+(\\d+)");
    const QRegularExpressionMatch down = ffn_down.match(r.err);
    QVERIFY2(down.hasMatch(), qPrintable(r.err));
    QCOMPARE(down.captured(3).toInt(), 4 * 7);
    static const QRegularExpression weight_row("decode   (attn_\\w+|ffn_\\w+)\\s+\\S+\\s+\\d+x\\d+\\s+(\\d+)");
    int calls = 0;
    for (auto it = weight_row.globalMatch(r.err); it.hasNext();) calls += it.next().captured(2).toInt();
    QCOMPARE(calls, 7 * 4 * 7);
    // The last column, the slowest single call, lies between the mean call and the total.
    static const QRegularExpression with_max(
        "decode   (?:attn_\\w+|ffn_\\w+)\\s+\\S+\\s+\\d+x\\d+\\s+(\\d+)\\s+([\\d.]+)\\s+\\S+\\s+\\S+\\s+([\\d.]+)\\n");
    int rows = 0;
    for (auto it = with_max.globalMatch(r.err); it.hasNext(); ++rows) {
      const QRegularExpressionMatch m = it.next();
      const double total = m.captured(2).toDouble(), slowest = m.captured(3).toDouble();
      QVERIFY2(slowest <= total + 1e-3 && slowest + 1e-3 >= total / m.captured(1).toInt(), qPrintable(m.captured(0)));
    }
    QCOMPARE(rows, 7);  // q, k, v, output, gate, up, down
  }

  void usageErrors() {
    auto none = run_iwb({"bench"});
    QCOMPARE(none.exit_code, 2);
    QVERIFY(none.err.contains("no model given"));
    auto nothing = run_iwb({"bench", "-m", "x.gguf", "-p", "0", "-n", "0"});
    QCOMPARE(nothing.exit_code, 2);
    auto bad = run_iwb({"bench", "-m", "x.gguf", "-r", "zero"});
    QCOMPARE(bad.exit_code, 2);
    QVERIFY(bad.err.contains("-r expects an integer >= 1, got 'zero'"));
    auto missing = run_iwb({"bench", "-m", m_tmp.filePath("absent.gguf"), "--no-store"});
    QCOMPARE(missing.exit_code, 1);
    QVERIFY2(missing.err.contains("absent.gguf"), qPrintable(missing.err));
    auto xml = run_iwb({"bench", "-m", "x.gguf", "-o", "xml"});
    QCOMPARE(xml.exit_code, 2);
    QVERIFY2(xml.err.contains("md") && xml.err.contains("jsonl") && xml.err.contains("csv"), qPrintable(xml.err));
    auto both = run_iwb({"bench", "-m", "x.gguf", "-o", "json", "--json"});
    QCOMPARE(both.exit_code, 2);
    QVERIFY2(both.err.contains("-o json cannot go with --json"), qPrintable(both.err));
  }

  // -p, -n and -t take lists as llama-bench's do, and the tests come in its order: each thread
  // count, each depth, then each ppN, then each tgN.
  void sizeLists() {
    auto r = run_iwb({"bench", "-m", m_model, "-p", "8,16", "-n", "2,0,4", "-d", "0,32", "-r", "1", "-t", "1", "-o",
                      "json", "--no-store"},
                     120000);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonArray tests = QJsonDocument::fromJson(r.out.toUtf8()).array();
    QStringList order;
    for (const QJsonValue& t : tests) {
      const QJsonObject o = t.toObject();
      order << QString("%1/%2/%3").arg(o["n_depth"].toInt()).arg(o["n_prompt"].toInt()).arg(o["n_gen"].toInt());
      QVERIFY(o["avg_ts"].toDouble() > 0);
    }
    QCOMPARE(order, (QStringList{"0/8/0", "0/16/0", "0/0/2", "0/0/4", "32/8/0", "32/16/0", "32/0/2", "32/0/4"}));
    auto table = run_iwb({"bench", "-m", m_model, "-p", "0,8", "-n", "0", "-r", "1", "--no-store"}, 120000);
    QVERIFY2(table.exit_code == 0 && table.out.contains("pp8") && !table.out.contains("tg"), qPrintable(table.out));
    // -t 1,2: every test with each thread count, the model loaded again for each.
    auto threads = run_iwb(
        {"bench", "-m", m_model, "-p", "8", "-n", "2", "-t", "1,2", "-r", "1", "-o", "jsonl", "--no-store"}, 120000);
    QVERIFY2(threads.exit_code == 0, qPrintable(threads.err));
    QStringList counts;
    for (const QString& line : threads.out.trimmed().split('\n')) {
      counts << QString::number(QJsonDocument::fromJson(line.toUtf8()).object()["n_threads"].toInt());
    }
    QCOMPARE(counts, (QStringList{"1", "1", "2", "2"}));
    QCOMPARE(run_iwb({"bench", "-m", m_model, "-t", "0", "--no-store"}).exit_code, 2);
  }

  // -o json / jsonl / csv: llama-bench's fields, names and arithmetic (a sample's time covers
  // n_prompt + n_gen tokens; avg_ts is the mean of the samples' rates), only data on stdout.
  void llamaBenchFormats() {
    auto json = run_iwb({"bench", "-m", m_model, "-p", "8", "-n", "4", "-r", "2", "-t", "2", "-ctk", "fp8_e4m3", "-o",
                         "json", "--db", m_tmp.filePath("formats.sqlite")},
                        120000);
    QVERIFY2(json.exit_code == 0, qPrintable(json.err));
    QJsonParseError error;
    const QJsonArray tests = QJsonDocument::fromJson(json.out.toUtf8(), &error).array();
    QVERIFY2(error.error == QJsonParseError::NoError && tests.size() == 2, qPrintable(json.out));
    for (int i = 0; i < 2; ++i) {
      const QJsonObject t = tests[i].toObject();
      const bool is_pp = i == 0;
      QCOMPARE(t["n_prompt"].toInt(), is_pp ? 8 : 0);  // llama-bench's tg4 has no prompt
      QCOMPARE(t["n_gen"].toInt(), is_pp ? 0 : 4);
      QCOMPARE(t["n_depth"].toInt(), 0);
      QCOMPARE(t["n_threads"].toInt(), 2);
      QCOMPARE(t["n_batch"].toInt(), 512);
      QCOMPARE(t["type_k"].toString(), QString("fp8_e4m3"));
      QCOMPARE(t["type_v"].toString(), QString("f16"));
      QCOMPARE(t["backends"].toString(), QString("CPU"));
      QCOMPARE(t["n_gpu_layers"].toInt(), 0);
      QVERIFY(t["build_commit"].toString().startsWith("iwb-"));
      QVERIFY(t["model_filename"].toString().endsWith("aidreams.gguf"));
      QVERIFY(t["model_size"].toDouble() > 0 && t["model_n_params"].toDouble() > 0);
      QVERIFY(!t["test_time"].toString().isEmpty());
      QVERIFY(t["mbu"].isNull() && t["mfu"].isNull());  // a store without a probe of this machine
      const QJsonArray ts = t["samples_ts"].toArray(), ns = t["samples_ns"].toArray();
      QCOMPARE(ts.size(), 2);
      QCOMPARE(ns.size(), 2);
      double sum = 0;
      for (int s = 0; s < 2; ++s) {
        sum += ts[s].toDouble();
        const double expected_ns = (is_pp ? 8 : 4) * 1e9 / ts[s].toDouble();
        QVERIFY2(std::abs(ns[s].toDouble() - expected_ns) <= 1.0 + 1e-6 * expected_ns, qPrintable(json.out));
      }
      QVERIFY(std::abs(t["avg_ts"].toDouble() - sum / 2) <= 1e-6 * sum);
      QVERIFY(std::abs(t["avg_ns"].toDouble() - (ns[0].toDouble() + ns[1].toDouble()) / 2) <= 1.0);
      QVERIFY(t["stddev_ts"].toDouble() >= 0);
    }

    auto jsonl =
        run_iwb({"bench", "-m", m_model, "-p", "8", "-n", "4", "-r", "1", "-o", "jsonl", "--no-store"}, 120000);
    QVERIFY2(jsonl.exit_code == 0, qPrintable(jsonl.err));
    const QStringList lines = jsonl.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 2);
    for (const QString& line : lines) QVERIFY2(QJsonDocument::fromJson(line.toUtf8()).isObject(), qPrintable(line));

    auto csv = run_iwb({"bench", "-m", m_model, "-p", "8", "-n", "4", "-r", "1", "-o", "csv", "--no-store"}, 120000);
    QVERIFY2(csv.exit_code == 0, qPrintable(csv.err));
    const QStringList rows = csv.out.trimmed().split('\n');
    QCOMPARE(rows.size(), 3);
    const QStringList header = rows[0].split(',');
    QCOMPARE(header.mid(0, 5), (QStringList{"build_commit", "build_number", "cpu_info", "gpu_info", "backends"}));
    QCOMPARE(header.indexOf("avg_ts") + 1, header.indexOf("stddev_ts"));
    // Every value quoted, as llama-bench writes them: "a","b",...
    static const QRegularExpression quoted(QStringLiteral("^\"[^\"]*\"(,\"[^\"]*\")*$"));
    for (int r = 1; r < 3; ++r) {
      QVERIFY2(quoted.match(rows[r]).hasMatch(), qPrintable(rows[r]));
      QCOMPARE(rows[r].count(QStringLiteral("\",\"")) + 1, header.size());
    }
    QVERIFY(rows[2].contains(QStringLiteral("\"4\",\"0\",\"")));  // tg4: n_gen 4, n_depth 0

    // Where a llama-bench is at hand (LLAMA_BENCH), every field we share has its JSON type.
    const QString llama_bench = qEnvironmentVariable("LLAMA_BENCH");
    if (llama_bench.isEmpty() || !QFile::exists(llama_bench)) {
      qInfo("LLAMA_BENCH not set: the field types are not compared with a real llama-bench");
      return;
    }
    QProcess theirs;
    theirs.start(llama_bench, {"-m", m_model, "-p", "8", "-n", "4", "-r", "1", "-o", "json"});
    QVERIFY(theirs.waitForFinished(120000));
    const QJsonArray their_tests = QJsonDocument::fromJson(theirs.readAllStandardOutput()).array();
    QVERIFY(!their_tests.isEmpty());
    const QJsonObject their = their_tests[0].toObject(), ours = tests[0].toObject();
    for (const QString& key : ours.keys()) {
      if (key == "mbu" || key == "mfu") continue;
      QVERIFY2(their.contains(key), qPrintable(key));
      QVERIFY2(their[key].type() == ours[key].type(), qPrintable(key));
    }
    // And the model is named, sized and counted alike (llama_model_desc, tensor bytes, elements).
    for (const char* key : {"model_type", "model_size", "model_n_params", "n_prompt", "n_gen", "n_depth"})
      QVERIFY2(their[key] == ours[key],
               qPrintable(QString("%1: llama-bench %2, iwb %3")
                              .arg(key, their[key].toVariant().toString(), ours[key].toVariant().toString())));
  }
};

QTEST_GUILESS_MAIN(TestCliBench)
#include "test_cli_bench.moc"
