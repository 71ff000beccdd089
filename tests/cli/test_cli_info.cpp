// `iwb info` on the shared vocab GGUFs, on the converted aidreams model and on a synthetic
// Qwen 3.5: the figures it prints (JSON and text) match what the files hold and what the
// model's shape implies.
#include "iwb_process.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

using iwb::test::run_iwb;
using iwb::test::shared_models_qdir;

class TestCliInfo : public QObject {
  Q_OBJECT

 private:
  static QJsonObject info_json(const QStringList& extra) {
    auto r = run_iwb(QStringList{"info", "--json"} + extra);
    if (r.exit_code != 0) qWarning("iwb info failed (%d): %s", r.exit_code, qPrintable(r.err));
    return QJsonDocument::fromJson(r.out.toUtf8()).object();
  }

 private slots:
  void vocabFiles_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("pre");
    QTest::addColumn<int>("numTokens");
    QTest::addColumn<QString>("architecture");
    // One row per file reads as the table it is.
    // clang-format off
    QTest::newRow("llama-spm") << "ggml-vocab-llama-spm.gguf" << "llama" << "default" << 32000 << "llama";
    QTest::newRow("phi-3") << "ggml-vocab-phi-3.gguf" << "llama" << "default" << 32064 << "phi3";
    QTest::newRow("bert-bge") << "ggml-vocab-bert-bge.gguf" << "bert" << "bert-bge" << 30522 << "bert";
    QTest::newRow("gpt-2") << "ggml-vocab-gpt-2.gguf" << "gpt2" << "gpt-2" << 50257 << "gpt2";
    QTest::newRow("falcon") << "ggml-vocab-falcon.gguf" << "gpt2" << "falcon" << 65024 << "falcon";
    QTest::newRow("deepseek-coder") << "ggml-vocab-deepseek-coder.gguf" << "gpt2" << "deepseek-coder" << 32256 << "llama";
    QTest::newRow("starcoder") << "ggml-vocab-starcoder.gguf" << "gpt2" << "starcoder" << 49152 << "starcoder2";
    // clang-format on
  }

  void vocabFiles() {
    QFETCH(QString, file);
    QFETCH(QString, model);
    QFETCH(QString, pre);
    QFETCH(int, numTokens);
    QFETCH(QString, architecture);
    const QString path = shared_models_qdir() + "/vocab-gguf/" + file;
    if (!QFile::exists(path)) QSKIP(qPrintable("shared model file absent: " + path));
    const QJsonObject j = info_json({path});
    QCOMPARE(j["architecture"].toString(), architecture);
    QCOMPARE(j["vocab_only"].toBool(), true);
    QCOMPARE(j["num_params"].toInteger(), 0);
    QCOMPARE(j["file_size"].toInteger(), QFileInfo(path).size());
    const QJsonObject tok = j["tokenizer"].toObject();
    QCOMPARE(tok["model"].toString(), model);
    if (!tok["pre"].toString().isEmpty() || pre != "default") QCOMPARE(tok["pre"].toString(), pre);
    QCOMPARE(tok["vocab_size"].toInt(), numTokens);
    QCOMPARE(j["tensors"].toArray().size(), 0);

    // The text form says the same in words.
    auto r = run_iwb({"info", path});
    QCOMPARE(r.exit_code, 0);
    QVERIFY(r.out.contains("vocabulary-only"));
    QVERIFY(r.out.contains(QString("%1 tokens").arg(numTokens)));
    QVERIFY(r.out.contains("tokenizer.ggml.tokens"));
  }

  void convertedAidreams() {
    const QString dir = shared_models_qdir() + "/llama2c/";
    if (!QFile::exists(dir + "aidreams260K.bin")) QSKIP("shared llama2c models absent");
    QTemporaryDir tmp;
    const QString out = tmp.filePath("aidreams.gguf");
    auto conv = run_iwb({"convert", "llama2c", "--checkpoint", dir + "aidreams260K.bin", "--tokenizer",
                         dir + "aidreams260K-tok512.bin", "-o", out});
    QVERIFY2(conv.exit_code == 0, qPrintable(conv.err));

    const QJsonObject j = info_json({out, "-c", "128"});
    QCOMPARE(j["architecture"].toString(), QString("llama"));
    QCOMPARE(j["file_type"].toString(), QString("F32"));
    const QJsonObject h = j["hparams"].toObject();
    QCOMPARE(h["embedding_length"].toInt(), 64);
    QCOMPARE(h["feed_forward_length"].toInt(), 172);
    QCOMPARE(h["block_count"].toInt(), 4);
    QCOMPARE(h["head_count"].toInt(), 4);
    QCOMPARE(h["head_count_kv"].toInt(), 4);
    QCOMPARE(h["key_length"].toInt(), 16);
    QCOMPARE(h["context_length"].toInt(), 128);
    QCOMPARE(h["vocab_size"].toInt(), 512);
    // Parameters: embedding 512x64 (shared with the classifier) + per layer two norms of 64,
    // Q/K/V/O 64x64 each and three FFN matrices 64x172, + the final norm.
    const qint64 per_layer = 2 * 64 + 4 * 64 * 64 + 3 * 64 * 172;
    const qint64 num_params = 512 * 64 + 4 * per_layer + 64;
    QCOMPARE(j["num_params"].toInteger(), num_params);
    const QJsonObject mem = j["memory"].toObject();
    QCOMPARE(mem["context"].toInt(), 128);
    QCOMPARE(mem["weights"].toInteger(), 4 * num_params);  // all f32
    // f16 K and V: 4 layers x 4 KV heads x (16 + 16) dims x 2 bytes x 128 positions.
    QCOMPARE(mem["kv_cache"].toInteger(), qint64(4 * 4 * 32 * 2 * 128));
    QVERIFY(mem["scratch"].toInteger() > 0);
    QCOMPARE(mem["total"].toInteger(),
             mem["weights"].toInteger() + mem["kv_cache"].toInteger() + mem["scratch"].toInteger());
    const QJsonArray tensors = j["tensors"].toArray();
    QCOMPARE(tensors.size(), 1 + 4 * 9 + 1);
    QCOMPARE(j["totals_by_type"].toObject()["F32"].toObject()["tensors"].toInt(), tensors.size());

    auto text = run_iwb({"info", out, "-c", "128"});
    QCOMPARE(text.exit_code, 0);
    QVERIFY(text.out.contains("parameters    231.0 K (230976)"));
    QVERIFY(text.out.contains("blk.3.ffn_down.weight"));
    QVERIFY(text.out.contains("memory at context 128"));
  }

  // Qwen 3.5 (iwb synth's test-qwen35: 8 layers, every 4th attending with 2 KV heads of 64, the
  // others recurrent with 2 key / 4 value heads of 64): which layers recur, a KV cache of the
  // attention layers alone, and each sequence's recurrent state.
  void qwen35RecurrentLayers() {
    QTemporaryDir tmp;
    const QString out = tmp.filePath("q.gguf");
    auto synth = run_iwb({"synth", "--preset", "test-qwen35", "--type", "F32", "-o", out});
    QVERIFY2(synth.exit_code == 0, qPrintable(synth.err));
    const QJsonObject j = info_json({out, "-c", "512", "--no-tensors"});
    const QJsonObject h = j["hparams"].toObject();
    QCOMPARE(h["recurrent_layers"].toArray(), (QJsonArray{0, 1, 2, 4, 5, 6}));
    QCOMPARE(h["linear_num_value_heads"].toInt(), 4);
    // Per recurrent layer: the convolution's last 3 inputs of 2 x 2 x 64 + 4 x 64 channels and
    // 4 heads' 64 x 64 state, f32; six such layers.
    const qint64 state = 6 * (3 * 512 + 4 * 64 * 64) * 4;
    QCOMPARE(h["recurrent_state_bytes_per_sequence"].toInteger(), state);
    const QJsonObject mem = j["memory"].toObject();
    // f16 K and V of the 2 attention layers: 2 x 2 KV heads x (64 + 64) x 2 bytes x 512 positions.
    QCOMPARE(mem["kv_cache"].toInteger(), qint64(2 * 2 * 128 * 2 * 512));
    QCOMPARE(mem["recurrent_state"].toInteger(), state);
    QCOMPARE(mem["total"].toInteger(),
             mem["weights"].toInteger() + mem["kv_cache"].toInteger() + mem["scratch"].toInteger() + state);

    auto text = run_iwb({"info", out, "--no-tensors"});
    QCOMPARE(text.exit_code, 0);
    QVERIFY2(text.out.contains("6 recurrent layers (gated delta net: 2 key / 4 value heads of 64, conv 4), 2 "
                               "attention (one layer in 4: 3, 7)"),
             qPrintable(text.out));
    QVERIFY2(text.out.contains("(f16, 2 attention layers x 2 KV heads x 64+64 dims; the recurrent layers keep none)"),
             qPrintable(text.out));
    QVERIFY2(text.out.contains("  recurrent   420.0 KiB  (f32 state per sequence: 6 recurrent layers"),
             qPrintable(text.out));
  }

  // Qwen 3.5's mixture of experts (test-qwen35moe): its gated shared expert has a width and no
  // count key; info names it.
  void qwen35MoeSharedExpert() {
    QTemporaryDir tmp;
    const QString out = tmp.filePath("m.gguf");
    auto synth = run_iwb({"synth", "--preset", "test-qwen35moe", "--type", "F32", "-o", out});
    QVERIFY2(synth.exit_code == 0, qPrintable(synth.err));
    const QJsonObject h = info_json({out, "--no-tensors"})["hparams"].toObject();
    QVERIFY(h["expert_count"].toInt() > 0);
    const qint64 width = h["expert_shared_feed_forward_length"].toInteger();
    QVERIFY(width > 0);
    auto text = run_iwb({"info", out, "--no-tensors"});
    QCOMPARE(text.exit_code, 0);
    QVERIFY2(text.out.contains(QString("  shared expert feed-forward %1\n").arg(width)), qPrintable(text.out));
  }

  void badInput() {
    auto usage = run_iwb({"info"});
    QCOMPARE(usage.exit_code, 2);
    QVERIFY(usage.err.contains("usage"));
    auto missing = run_iwb({"info", "/nonexistent.gguf"});
    QCOMPARE(missing.exit_code, 1);
    QVERIFY(missing.err.contains("/nonexistent.gguf"));
    QTemporaryDir tmp;
    QFile junk(tmp.filePath("junk.gguf"));
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("this is not a model file at all");
    junk.close();
    auto bad = run_iwb({"info", junk.fileName()});
    QCOMPARE(bad.exit_code, 1);
    QVERIFY(bad.err.contains("not a GGUF file"));
    auto bad_ctx = run_iwb({"info", junk.fileName(), "-c", "zero"});
    QCOMPARE(bad_ctx.exit_code, 2);
  }
};

QTEST_GUILESS_MAIN(TestCliInfo)
#include "test_cli_info.moc"
