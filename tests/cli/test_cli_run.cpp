// `iwb run` on the aidreams model (converted here with `iwb convert`): greedy output is
// printed and repeatable, and llama.cpp's with no extra flags; no sampling flags mean
// llama.cpp's defaults; --ids prints one line of ids, the timings line is on stderr, and bad
// usage or a prompt longer than the context get clear messages and exit codes.
#include "iwb_process.h"

#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

using iwb::test::run_iwb;
using iwb::test::shared_models_qdir;

class TestCliRun : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;
  QString m_model;

  QStringList greedy(const QStringList& extra) const {
    return QStringList{"run", "-m", m_model, "-p", "Once upon a time", "-n", "40", "--temp", "0", "-t", "2"} + extra;
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
    if (m_model.isEmpty() && QString(QTest::currentTestFunction()) != "usageErrors") {
      QSKIP("shared aidreams model absent");
    }
  }

  void greedyRunPrintsTextAndTimings() {
    auto a = run_iwb(greedy({}));
    QVERIFY2(a.exit_code == 0, qPrintable(a.err));
    // The model writes English "dreams": words and spaces, not noise.
    QVERIFY2(a.out.size() > 60, qPrintable(a.out));
    QVERIFY2(a.out.count(' ') > 8, qPrintable(a.out));
    QVERIFY2(a.out.contains("petals"), qPrintable(a.out));
    auto b = run_iwb(greedy({}));
    QCOMPARE(b.out, a.out);

    static const QRegularExpression timings(
        "timings: prompt (\\d+) tokens \\(([0-9.]+) tokens/s\\), generated (\\d+) tokens \\(([0-9.]+) tokens/s\\), "
        "time to first token ([0-9.]+) s, finished: max tokens");
    const QRegularExpressionMatch m = timings.match(a.err);
    QVERIFY2(m.hasMatch(), qPrintable(a.err));
    QVERIFY(m.captured(1).toInt() > 3);
    QCOMPARE(m.captured(3).toInt(), 40);
    QVERIFY(m.captured(2).toDouble() > 0);
    QVERIFY(m.captured(4).toDouble() > 0);
    QVERIFY(a.err.contains("iwb run: llama2c (llama, F32), context 128, 2 threads"));
  }

  // `llama-simple -m aidreams.gguf -n 32 "I dreamed"` (llama.cpp of llama-cpp-python 0.3.36,
  // greedy sampler) printed "<s> I dreamed" and then exactly this.
  void greedyIsLlamaCppsWithNoExtraFlags() {
    const QStringList args{"run", "-m", m_model, "--temp", "0", "-p", "I dreamed", "-n", "32", "-t", "2"};
    auto plain = run_iwb(args);
    QVERIFY2(plain.exit_code == 0, qPrintable(plain.err));
    QCOMPARE(plain.out, QString(", as I sense the nodes, a gentle hum of probability. Contrast emerge\n"));
    auto explicit_penalty = run_iwb(args + QStringList{"--repeat-penalty", "1.0"});
    QCOMPARE(explicit_penalty.out, plain.out);
    // The old default (1.1) changes this text by token 40: the default is not it.
    const QStringList longer{"run", "-m", m_model, "--temp", "0", "-p", "I dreamed", "-n", "64", "-t", "2"};
    auto penalized = run_iwb(longer + QStringList{"--repeat-penalty", "1.1"});
    QVERIFY2(penalized.exit_code == 0, qPrintable(penalized.err));
    QVERIFY(run_iwb(longer).out != penalized.out);
  }

  void noSamplingFlagsGiveLlamaCppDefaults() {
    const QStringList args{"run", "-m", m_model, "-p", "I dreamed", "-t", "2"};
    auto a = run_iwb(args + QStringList{"-n", "4"});
    auto b = run_iwb(args + QStringList{"-n", "4"});
    QVERIFY2(a.exit_code == 0 && b.exit_code == 0, qPrintable(a.err + b.err));
    static const QRegularExpression line(
        "iwb run: sampling --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 --repeat-penalty 1 --repeat-last-n 64 "
        "--seed (\\d+) -n 4\n");
    const QRegularExpressionMatch ma = line.match(a.err), mb = line.match(b.err);
    QVERIFY2(ma.hasMatch(), qPrintable(a.err));
    QVERIFY2(mb.hasMatch(), qPrintable(b.err));
    QVERIFY(ma.captured(1) != mb.captured(1));  // -1: a new seed each run, as llama.cpp
    // A seed given repeats the run; no -n generates until the end or a full context.
    auto c = run_iwb(args + QStringList{"-s", ma.captured(1), "-n", "4"});
    QCOMPARE(c.out, a.out);
    auto until_end = run_iwb(args);
    QVERIFY2(until_end.exit_code == 0, qPrintable(until_end.err));
    QVERIFY2(until_end.err.contains(" -n -1\n"), qPrintable(until_end.err));
    QVERIFY2(QRegularExpression("finished: (end of generation|context full)").match(until_end.err).hasMatch(),
             qPrintable(until_end.err));
  }

  void gpuLayers() {
    auto part = run_iwb({"run", "-m", m_model, "-p", "hi", "-ngl", "2"});
    QCOMPARE(part.exit_code, 2);
    QVERIFY2(part.err.contains("-ngl 2 asks for 2 of the model's 4 layers on the GPU"), qPrintable(part.err));
    auto cpu = run_iwb({"run", "-m", m_model, "-p", "hi", "-n", "2", "-ngl", "0", "-t", "1"});
    QVERIFY2(cpu.exit_code == 0, qPrintable(cpu.err));
    QVERIFY2(cpu.err.contains("iwb run: device: cpu"), qPrintable(cpu.err));
  }

  void idsAreOneLine() {
    auto r = run_iwb(greedy({"--ids"}));
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QStringList lines = r.out.split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1);
    const QStringList ids = lines[0].split(' ');
    QCOMPARE(ids.size(), 40);
    for (const QString& id : ids) {
      bool ok = false;
      const int v = id.toInt(&ok);
      QVERIFY2(ok && v >= 0 && v < 512, qPrintable(id));
    }
  }

  void promptFromFileAndChat() {
    const QString path = m_tmp.filePath("prompt.txt");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("Once upon a time");
    f.close();
    auto from_file = run_iwb({"run", "-m", m_model, "-f", path, "-n", "40", "--temp", "0", "-t", "2"});
    QVERIFY2(from_file.exit_code == 0, qPrintable(from_file.err));
    QCOMPARE(from_file.out, run_iwb(greedy({})).out);
    auto chat =
        run_iwb({"run", "-m", m_model, "-p", "Hello", "--chat", "--template", "zephyr", "-n", "8", "--seed", "3"});
    QVERIFY2(chat.exit_code == 0, qPrintable(chat.err));
    QVERIFY(chat.err.contains("timings: prompt"));
    // --chat-template-kwargs as llama.cpp takes it: SmolLM3's template with thinking off writes its
    // short system block (206 of aidreams' tokens against 791 with its reasoning instructions).
    const auto prompt_tokens = [&](const QStringList& extra) {
      auto r = run_iwb(
          QStringList{"run", "-m", m_model, "-p", "Hello", "--chat", "--template", "smollm3", "-n", "1", "-c", "1024"} +
          extra);
      const QRegularExpressionMatch m = QRegularExpression("timings: prompt (\\d+) tokens").match(r.err);
      return r.exit_code == 0 && m.hasMatch() ? m.captured(1).toInt() : -1;
    };
    const int on = prompt_tokens({});
    const int off = prompt_tokens({"--chat-template-kwargs", "{\"enable_thinking\": false}"});
    QVERIFY2(off > 0 && on > off, qPrintable(QString("on %1, off %2").arg(on).arg(off)));
    // GLM-4.7's generation prompt opens the reply's think block: the reply is printed from
    // "<think>" on; with thinking off the prompt closes it and nothing is added.
    const auto glm_reply = [&](const QStringList& extra) {
      return run_iwb(QStringList{"run", "-m", m_model, "-p", "Hello", "--chat", "--template", "glm-4.7", "-n", "4",
                                 "--temp", "0"} +
                     extra);
    };
    const auto thinking = glm_reply({});
    QVERIFY2(thinking.exit_code == 0 && thinking.out.startsWith("<think>"), qPrintable(thinking.out + thinking.err));
    const auto answering = glm_reply({"--chat-template-kwargs", "{\"enable_thinking\": false}"});
    QVERIFY2(answering.exit_code == 0 && !answering.out.startsWith("<think>"), qPrintable(answering.out));
  }

  void promptLongerThanContext() {
    auto r = run_iwb({"run", "-m", m_model, "-p", "Once upon a time, in a land far away", "-c", "8"});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(QRegularExpression("prompt is \\d+ tokens but the context holds 8").match(r.err).hasMatch(),
             qPrintable(r.err));
  }

  void usageErrors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("no model") << QStringList{"run", "-p", "hi"} << "no model given";
    QTest::newRow("no prompt") << QStringList{"run", "-m", "x.gguf"} << "give exactly one of -p PROMPT or -f FILE";
    QTest::newRow("bad number") << QStringList{"run", "-m", "x.gguf", "-p", "hi", "-n", "ten"}
                                << "-n expects an integer >= -1, got 'ten'";
    QTest::newRow("negative temp") << QStringList{"run", "-m", "x.gguf", "-p", "hi", "--temp", "-1"}
                                   << "--temp expects a number >= 0, got '-1'";
    QTest::newRow("template without chat") << QStringList{"run", "-m", "x.gguf", "-p", "hi", "--template", "chatml"}
                                           << "--system, --template and --chat-template-kwargs need --chat";
    QTest::newRow("unknown template kwarg")
        << QStringList{"run", "-m", "x.gguf", "-p", "hi", "--chat", "--chat-template-kwargs", "{\"think\": 1}"}
        << "'chat_template_kwargs.think' is not read by the chat templates here";
    QTest::newRow("unknown template") << QStringList{"run", "-m",     "x.gguf",     "-p",
                                                     "hi",  "--chat", "--template", "jinja9"}
                                      << "unknown chat template 'jinja9'";
    QTest::newRow("missing value") << QStringList{"run", "-m"} << "-m needs a value";
    QTest::newRow("unknown option") << QStringList{"run", "--frobnicate"}
                                    << "unknown option '--frobnicate' (see 'iwb run --help')";
  }
  void usageErrors() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    auto r = run_iwb(args);
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains(message), qPrintable(r.err));
  }

  void missingModelFile() {
    auto r = run_iwb({"run", "-m", m_tmp.filePath("nope.gguf"), "-p", "hi"});
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.startsWith("iwb run: "), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestCliRun)
#include "test_cli_run.moc"
