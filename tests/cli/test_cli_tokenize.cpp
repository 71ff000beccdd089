// `iwb tokenize`: ids match llama.cpp's test vectors for the shared vocab GGUFs, the table shows
// escaped pieces and a count, and bad usage / bad files exit 2 / 1 with a message.
#include "iwb_process.h"

#include "iwb/engine/gguf/gguf_writer.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

using iwb::test::run_iwb;
using iwb::test::shared_models_qdir;

class TestCliTokenize : public QObject {
  Q_OBJECT

 private:
  // The shared folder's file, else the one in llama.cpp's vocab cache (scripts/fetch-llama-vocab.sh).
  static QString vocab(const char* name) {
    const QString shared = shared_models_qdir() + "/vocab-gguf/" + name;
    if (QFile::exists(shared)) return shared;
    return QStringLiteral(IWB_LLAMA_VOCAB_DIR "/") + name;
  }

 private slots:
  void printsIdsOnly_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QStringList>("extra");
    QTest::addColumn<QString>("expected");
    // Ids from llama.cpp's .out files (no BOS) plus the BOS the SPM vocab adds by default.
    QTest::newRow("spm default bos") << "ggml-vocab-llama-spm.gguf" << QStringList{} << "1 15043 3186";
    QTest::newRow("spm no bos") << "ggml-vocab-llama-spm.gguf" << QStringList{"--no-bos"} << "15043 3186";
    QTest::newRow("bpe gpt-2") << "ggml-vocab-gpt-2.gguf" << QStringList{"--no-bos"} << "15496 995";
    QTest::newRow("bpe deepseek") << "ggml-vocab-deepseek-coder.gguf" << QStringList{"--no-bos"} << "17535 1835";
    // Gemma 4 adds its BOS although the file could say otherwise; --no-bos leaves it out.
    QTest::newRow("gemma4 default bos") << "ggml-vocab-gemma-4.gguf" << QStringList{} << "2 9259 1902";
    QTest::newRow("gemma4 no bos") << "ggml-vocab-gemma-4.gguf" << QStringList{"--no-bos"} << "9259 1902";
  }
  void printsIdsOnly() {
    QFETCH(QString, file);
    QFETCH(QStringList, extra);
    QFETCH(QString, expected);
    if (!QFile::exists(vocab(file.toLatin1().constData()))) QSKIP(qPrintable(file + " absent"));
    auto r = run_iwb(QStringList{"tokenize", "-m", vocab(file.toLatin1().constData()), "-p", "Hello world", "--ids"} +
                     extra);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QCOMPARE(r.out, expected + "\n");
  }

  void tableEscapesPieces() {
    if (!QFile::exists(vocab("ggml-vocab-llama-spm.gguf"))) QSKIP("shared vocab files absent");
    QTemporaryDir tmp;
    const QString text_file = tmp.filePath("text.txt");
    QFile f(text_file);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("a\n\xF0\x9F\xA6\x99 </s>");
    f.close();
    auto r = run_iwb({"tokenize", "-m", vocab("ggml-vocab-llama-spm.gguf"), "-f", text_file});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("'<s>'"), qPrintable(r.out));
    QVERIFY2(r.out.contains("'\\n'"), qPrintable(r.out));
    QVERIFY2(r.out.contains("'\\xF0'"), qPrintable(r.out));  // first byte of the emoji
    QVERIFY2(!r.out.contains("'</s>'"), qPrintable(r.out));  // not parsed without the flag
    QVERIFY2(r.out.contains(" tokens (SPM, 32000 in vocabulary)"), qPrintable(r.out));

    auto parsed = run_iwb({"tokenize", "-m", vocab("ggml-vocab-llama-spm.gguf"), "-f", text_file, "--parse-special"});
    QVERIFY2(parsed.out.contains("       2  '</s>'"), qPrintable(parsed.out));
  }

  // Gemma 4's pieces: spaces come back from ▁, a character it lacks as <0xNN> bytes, its turn
  // markers as single tokens only with --parse-special.
  void gemma4Table() {
    if (!QFile::exists(vocab("ggml-vocab-gemma-4.gguf"))) QSKIP("ggml-vocab-gemma-4.gguf absent");
    const QString text = QString::fromUtf8("<|turn>user\n  Hi \xF0\x9F\xAB\xA8<turn|>");
    auto r = run_iwb({"tokenize", "-m", vocab("ggml-vocab-gemma-4.gguf"), "-p", text, "--parse-special"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("       2  '<bos>'"), qPrintable(r.out));
    QVERIFY2(r.out.contains("     105  '<|turn>'"), qPrintable(r.out));
    QVERIFY2(r.out.contains("     106  '<turn|>'"), qPrintable(r.out));
    QVERIFY2(r.out.contains("'  '"), qPrintable(r.out));  // ▁▁ is two spaces
    QVERIFY2(r.out.contains(" tokens (BPE, 262144 in vocabulary)"), qPrintable(r.out));
    auto plain = run_iwb({"tokenize", "-m", vocab("ggml-vocab-gemma-4.gguf"), "-p", text});
    QVERIFY2(!plain.out.contains("'<turn|>'"), qPrintable(plain.out));
  }

  void errors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("code");
    QTest::addColumn<QString>("message");
    QTest::newRow("no model") << QStringList{"tokenize", "-p", "x"} << 2 << "no model given";
    QTest::newRow("no text") << QStringList{"tokenize", "-m", "a.gguf"} << 2 << "exactly one of -p TEXT or -f FILE";
    QTest::newRow("both texts") << QStringList{"tokenize", "-m", "a.gguf", "-p", "x", "-f", "y"} << 2 << "exactly one";
    QTest::newRow("unknown flag") << QStringList{"tokenize", "--frobnicate"} << 2 << "unknown option '--frobnicate'";
    QTest::newRow("missing value") << QStringList{"tokenize", "-m"} << 2 << "-m needs a value";
    QTest::newRow("missing model file") << QStringList{"tokenize", "-m", "/no/such/model.gguf", "-p", "x"} << 1
                                        << "/no/such/model.gguf";
    QTest::newRow("missing text file") << QStringList{"tokenize", "-m", "a.gguf", "-f", "/no/such/text.txt"} << 1
                                       << "cannot read '/no/such/text.txt'";
  }
  void errors() {
    QFETCH(QStringList, args);
    QFETCH(int, code);
    QFETCH(QString, message);
    auto r = run_iwb(args);
    QCOMPARE(r.exit_code, code);
    QVERIFY2(r.err.contains(message), qPrintable(r.err));
    if (code == 2) QVERIFY2(r.err.contains("(see 'iwb tokenize --help')"), qPrintable(r.err));
    QVERIFY(r.out.isEmpty());
  }

  void notAGgufOrNoTokenizer() {
    QTemporaryDir tmp;
    const QString junk = tmp.filePath("junk.gguf");
    QFile f(junk);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("this is not a gguf file at all");
    f.close();
    auto r = run_iwb({"tokenize", "-m", junk, "-p", "x"});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.startsWith("iwb tokenize: " + junk + ": "), qPrintable(r.err));

    // A valid GGUF without tokenizer metadata.
    iwb::gguf::GgufWriter writer;
    writer.set_string("general.architecture", "llama");
    const QString bare = tmp.filePath("bare.gguf");
    const iwb::Status written = writer.write_file(bare.toStdString());
    QVERIFY2(written.is_ok(), written.message().c_str());
    auto r2 = run_iwb({"tokenize", "-m", bare, "-p", "x"});
    QCOMPARE(r2.exit_code, 1);
    QVERIFY2(r2.err.contains("tokenizer.ggml.model is missing"), qPrintable(r2.err));
  }
};

QTEST_GUILESS_MAIN(TestCliTokenize)
#include "test_cli_tokenize.moc"
