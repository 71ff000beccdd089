// `iwb convert llama2c`: converts the shared aidreams model into a GGUF that opens, prints its
// summary, and answers bad usage with exit 2 and bad files with exit 1 and a clear message.
#include "iwb_process.h"

#include "iwb/engine/gguf/gguf_file.h"

#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QtTest>

using iwb::test::run_iwb;
using iwb::test::shared_models_qdir;

class TestCliConvert : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;
  static QString model() { return shared_models_qdir() + "/llama2c/aidreams260K.bin"; }
  static QString tokenizer() { return shared_models_qdir() + "/llama2c/aidreams260K-tok512.bin"; }

 private slots:
  void convertsAidreams_data() {
    QTest::addColumn<QStringList>("extra");
    QTest::addColumn<QString>("type");
    QTest::addColumn<int>("fileType");
    QTest::newRow("default f32") << QStringList{} << "F32" << 0;
    QTest::newRow("f16 named") << QStringList{"--type", "f16", "--name", "aidreams"} << "F16" << 1;
  }
  void convertsAidreams() {
    if (!QFile::exists(model())) QSKIP("shared models folder absent: nothing to convert");
    QFETCH(QStringList, extra);
    QFETCH(QString, type);
    QFETCH(int, fileType);
    const QString out = m_tmp.filePath("aidreams-" + type + ".gguf");
    auto r = run_iwb(QStringList{"convert", "llama2c", "--checkpoint", model(), "--tokenizer", tokenizer(), "-o", out} +
                     extra);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("dim 64, hidden 172, layers 4, heads 4, KV heads 4, vocab 512, seq_len 128, shared"),
             qPrintable(r.out));
    QVERIFY2(r.out.contains("38 tensors (" + type + ")"), qPrintable(r.out));
    const qint64 size = QFileInfo(out).size();
    QVERIFY(size > 0);
    QVERIFY2(r.out.contains(QString("(%1 bytes)").arg(size)), qPrintable(r.out));

    auto file = iwb::gguf::GgufFile::open(out.toStdString());
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    QCOMPARE((*file)->tensors().size(), size_t(38));
    QCOMPARE((*file)->get_int("general.file_type").value_or(-1), fileType);
  }

  void usageErrors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("no format") << QStringList{"convert"} << "usage: iwb convert llama2c";
    QTest::newRow("unknown format") << QStringList{"convert", "safetensors"} << "unknown source format 'safetensors'";
    QTest::newRow("no tokenizer") << QStringList{"convert", "llama2c", "--checkpoint", "a.bin", "-o", "b.gguf"}
                                  << "--tokenizer is required";
    QTest::newRow("no output") << QStringList{"convert", "llama2c", "--checkpoint", "a.bin", "--tokenizer", "t.bin"}
                               << "-o is required";
    QTest::newRow("bad type") << QStringList{"convert", "llama2c", "--type", "q4_0"}
                              << "--type expects one of f32, f16, got 'q4_0'";
    QTest::newRow("missing value") << QStringList{"convert", "llama2c", "--checkpoint"} << "--checkpoint needs a value";
    QTest::newRow("unknown option") << QStringList{"convert", "llama2c", "--frobnicate"}
                                    << "unknown option '--frobnicate'";
  }
  void usageErrors() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    auto r = run_iwb(args);
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains(message), qPrintable(r.err));
  }

  void help() {
    auto r = run_iwb({"convert", "--help"});
    QCOMPARE(r.exit_code, 0);
    QVERIFY(r.out.contains("--checkpoint"));
  }

  void badFiles() {
    const QString out = m_tmp.filePath("never.gguf");
    auto r = run_iwb(
        {"convert", "llama2c", "--checkpoint", m_tmp.filePath("absent.bin"), "--tokenizer", "t.bin", "-o", out});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("absent.bin"), qPrintable(r.err));

    if (!QFile::exists(model())) QSKIP("shared models folder absent: no checkpoint to truncate");
    QFile in(model());
    QVERIFY(in.open(QIODevice::ReadOnly));
    const QByteArray bytes = in.readAll();
    const QString cut = m_tmp.filePath("cut.bin");
    QFile c(cut);
    QVERIFY(c.open(QIODevice::WriteOnly));
    c.write(bytes.left(bytes.size() / 2));
    c.close();
    r = run_iwb({"convert", "llama2c", "--checkpoint", cut, "--tokenizer", tokenizer(), "-o", out});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("truncated") && r.err.contains("implies 932124 bytes, the file has 466062"),
             qPrintable(r.err));
    QVERIFY(!QFile::exists(out));
  }
};

QTEST_GUILESS_MAIN(TestCliConvert)
#include "test_cli_convert.moc"
