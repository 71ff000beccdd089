// `iwb quantize`, `iwb imatrix` and `iwb eval` end to end on the real aidreams model: types,
// the fallback report, metadata, an imatrix file quantize reads back, perplexity and KL
// against the F32 base, runs recorded in the store (done and failed), bad usage.
#include "iwb_process.h"

#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/store/results_store.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

using iwb::test::run_iwb;

class TestCliQuantize : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  QString m_base;
  QString m_db;

 private slots:
  void initTestCase() {
    const QString dir = iwb::test::shared_models_qdir() + "/llama2c/";
    if (!QFile::exists(dir + "aidreams260K.bin")) QSKIP("shared models folder absent: no aidreams model");
    m_base = m_tmp.filePath("aid.gguf");
    iwb::convert::Llama2cConvertOptions options;
    options.name = "aidreams260K";
    auto r = iwb::convert::convert_llama2c_to_gguf((dir + "aidreams260K.bin").toStdString(),
                                                   (dir + "aidreams260K-tok512.bin").toStdString(),
                                                   m_base.toStdString(), options);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    m_db = m_tmp.filePath("results.sqlite");
    qputenv("IWB_LOGITS_CACHE", m_tmp.filePath("logits").toUtf8());
  }

  void quantizesAndReportsFallbacks() {
    const QString out = m_tmp.filePath("aid-q4_0.gguf");
    auto r = run_iwb({"quantize", "-m", m_base, "-o", out, "--type", "Q4_0", "-t", "2", "--db", m_db});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("as Q4_0"), qPrintable(r.out));
    QVERIFY2(r.out.contains("fallback: ffn_down (4 tensors): rows of 172 are not a whole number of Q4_0 blocks, "
                            "written as F16"),
             qPrintable(r.out));
    QVERIFY2(r.out.contains(
                 "fallback: token_embd.weight: rows of 64 are not a whole number of Q6_K blocks, written as Q8_0"),
             qPrintable(r.out));
    QVERIFY2(r.out.contains("9 F32"), qPrintable(r.out));  // norms
    auto file = iwb::gguf::GgufFile::open(out.toStdString());
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    QCOMPARE((*file)->get_int("general.file_type").value_or(-1), int64_t{2});
    QCOMPARE((*file)->get_int("general.quantization_version").value_or(-1), int64_t{2});
    QCOMPARE((*file)->find_tensor("blk.0.attn_q.weight")->type, iwb::GgmlType::Q4_0);

    // JSON report: every tensor with its error.
    r = run_iwb(
        {"quantize", "-m", m_base, "-o", m_tmp.filePath("aid-q8.gguf"), "--type", "q8_0", "--json", "--no-store"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject report = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(report["type"].toString(), QString("Q8_0"));
    QCOMPARE(report["tensors"].toArray().size(), 38);
  }

  void imatrixIsCollectedAndUsed() {
    const QString matrix = m_tmp.filePath("aid.imatrix");
    auto r = run_iwb({"imatrix", "-m", m_base, "-o", matrix, "-c", "128", "--chunks", "4"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("28 matrices, 4 chunks of 128 tokens (512 token rows)"), qPrintable(r.out));
    // The text's perplexity from the same run, in llama-imatrix's lines: the same figure `iwb
    // eval` (llama-perplexity's method) gives for these chunks.
    const QRegularExpression final(QStringLiteral("Final estimate: PPL = ([0-9.]+) \\+/- ([0-9.]+)"));
    const QRegularExpressionMatch ppl = final.match(r.out);
    QVERIFY2(ppl.hasMatch(), qPrintable(r.out));
    QVERIFY2(r.out.contains(QRegularExpression(QStringLiteral("\\[1\\][0-9.]+,\\[2\\][0-9.]+,\\[3\\][0-9.]+,\\[4\\]") +
                                               QRegularExpression::escape(ppl.captured(1)) + ",")),
             qPrintable(r.out));  // the running value after the last chunk is the estimate
    auto eval = run_iwb({"eval", "-m", m_base, "-c", "128", "--chunks", "4", "-n", "0", "--json", "--db",
                         m_tmp.filePath("imatrix-eval.sqlite")});
    QVERIFY2(eval.exit_code == 0, qPrintable(eval.err));
    const QJsonObject scored = QJsonDocument::fromJson(eval.out.toUtf8()).object();
    const double expected = scored["perplexity"].toDouble();
    QVERIFY(expected > 1);
    QVERIFY2(std::abs(ppl.captured(1).toDouble() - expected) < 1e-3 * expected,
             qPrintable(QStringLiteral("imatrix %1, eval %2").arg(ppl.captured(1)).arg(expected)));
    QVERIFY2(std::abs(ppl.captured(2).toDouble() - scored["perplexity_error"].toDouble()) < 1e-3 * expected,
             qPrintable(ppl.captured(2)));
    // --no-ppl (llama-imatrix's option): the same matrix, no perplexity.
    const QString again = m_tmp.filePath("aid-no-ppl.imatrix");
    r = run_iwb({"imatrix", "-m", m_base, "-o", again, "-c", "128", "--chunks", "4", "--no-ppl"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(!r.out.contains("PPL") && !r.err.contains("perplexity"), qPrintable(r.out + r.err));
    QFile first(matrix), second(again);
    QVERIFY(first.open(QIODevice::ReadOnly) && second.open(QIODevice::ReadOnly));
    QCOMPARE(second.readAll(), first.readAll());
    const QString out = m_tmp.filePath("aid-q4_1-im.gguf");
    r = run_iwb({"quantize", "-m", m_base, "-o", out, "--type", "Q4_1", "--imatrix", matrix, "--no-store"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("with an importance matrix"), qPrintable(r.out));
    auto file = iwb::gguf::GgufFile::open(out.toStdString());
    QVERIFY(file.is_ok());
    QCOMPARE((*file)->get_int("quantize.imatrix.chunks_count").value_or(-1), int64_t{4});
    r = run_iwb({"quantize", "-m", m_base, "-o", out, "--type", "Q4_1", "--imatrix", m_base, "--no-store"});
    QCOMPARE(r.exit_code, 1);  // not an imatrix file
    QVERIFY2(r.err.contains("is not an imatrix file"), qPrintable(r.err));
  }

  void evalsAgainstTheBaseAndRecordsRuns() {
    const QString q4 = m_tmp.filePath("aid-q4_0.gguf");
    if (!QFile::exists(q4)) QSKIP("quantizesAndReportsFallbacks did not run");
    auto r =
        run_iwb({"eval", "-m", q4, "--base", m_base, "-c", "128", "--chunks", "4", "-n", "8", "--json", "--db", m_db});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(o["chunks"].toInt(), 4);
    QCOMPARE(o["scored_tokens"].toInt(), 4 * 63);
    QVERIFY(o["perplexity"].toDouble() > 5);
    QVERIFY(o["kl_mean"].toDouble() > 0 && o["kl_mean"].toDouble() < 0.5);
    QVERIFY(o["top1_agreement"].toDouble() > 0.6);
    QVERIFY(o["gen_tokens_per_s"].toDouble() > 0);
    // llama-perplexity's PPL(Q)/PPL(base), and per chunk the mean NLL of the model and the base,
    // which average to the whole run's.
    const double ratio = o["ppl_ratio"].toDouble();
    QVERIFY2(std::abs(ratio - o["perplexity"].toDouble() / o["base_perplexity"].toDouble()) < 1e-6 * ratio,
             qPrintable(QString::number(ratio)));
    QVERIFY(o["ppl_ratio_error"].toDouble() > 0);
    const QJsonArray chunks = o["chunk_mean_nll"].toArray(), baseChunks = o["base_chunk_mean_nll"].toArray();
    QCOMPARE(chunks.size(), 4);
    QCOMPARE(baseChunks.size(), 4);
    double sum = 0, baseSum = 0;
    for (int c = 0; c < 4; ++c) {
      sum += chunks[c].toDouble();
      baseSum += baseChunks[c].toDouble();
    }
    QVERIFY(std::abs(sum / 4 - o["mean_nll"].toDouble()) < 1e-6);
    QVERIFY(std::abs(std::exp(sum / 4 - baseSum / 4) - ratio) < 1e-5 * ratio);

    // Text output, and a failing run (a missing model) marked failed in the store.
    r = run_iwb({"eval", "-m", m_tmp.filePath("missing.gguf"), "-c", "128", "--db", m_db});
    QCOMPARE(r.exit_code, 1);
    auto store = iwb::ResultsStore::open(m_db.toStdString());
    QVERIFY(store.is_ok());
    auto runs = (*store)->list_quant_runs();
    QVERIFY(runs.is_ok());
    QCOMPARE(runs->size(), size_t{3});  // quantize, eval, failed eval
    QCOMPARE(runs->at(0).kind, std::string("quantize"));
    QCOMPARE(runs->at(1).status, iwb::quant::RunStatus::Done);
    QVERIFY(runs->at(1).kl_mean.has_value());
    QCOMPARE(runs->at(2).status, iwb::quant::RunStatus::Failed);
    QVERIFY(!runs->at(2).error.empty());
    // The eval run carries the quantization's per-tensor errors.
    auto errors = (*store)->quant_tensor_errors(runs->at(1).id);
    QVERIFY(errors.is_ok());
    QCOMPARE(errors->size(), size_t{38});
  }

  void badUsage() {
    QCOMPARE(run_iwb({"quantize", "-m", "x.gguf"}).exit_code, 2);
    auto r = run_iwb({"quantize", "-m", m_base, "-o", m_tmp.filePath("x.gguf"), "--type", "IQ1_S", "--no-store"});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("unknown weight type 'IQ1_S'"), qPrintable(r.err));
    QVERIFY(!QFile::exists(m_tmp.filePath("x.gguf")));
    QCOMPARE(run_iwb({"eval", "-m", m_base, "-c", "3"}).exit_code, 2);
    QCOMPARE(run_iwb({"imatrix", "-m", m_base}).exit_code, 2);  // no output
  }
};

QTEST_GUILESS_MAIN(TestCliQuantize)
#include "test_cli_quantize.moc"
