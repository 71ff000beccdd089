// `iwb logits`: the file holds every position's logits (the engine's own for each prefix), the
// greedy ids follow the last row's argmax, and bad usage or out-of-vocabulary ids exit with 2.
#include "iwb_process.h"

#include "iwb/engine/runtime/engine.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>

using iwb::test::run_iwb;

class TestCliLogits : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;
  QString m_model;

 private slots:
  void initTestCase() {
    m_model = m_tmp.filePath("phi3.gguf");
    auto r = run_iwb({"synth", "--preset", "test-phi3", "--type", "F32", "-t", "1", "-o", m_model});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
  }

  void writesEveryPositionAndGreedyIds() {
    const QString out = m_tmp.filePath("logits.bin");
    const std::vector<int32_t> tokens = {5, 9, 77, 200, 13};
    auto r = run_iwb({"logits", "-m", m_model, "--tokens", "5,9,77,200,13", "-o", out, "--greedy", "4", "-t", "1",
                      "--device", "cpu"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QFile f(out);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray bytes = f.readAll();
    QVERIFY(bytes.startsWith("IWBL"));
    int32_t header[2] = {0, 0};
    std::memcpy(header, bytes.constData() + 4, sizeof header);
    QCOMPARE(header[0], 5);
    QCOMPARE(header[1], 320);
    QCOMPARE(bytes.size(), qsizetype(12 + 5 * 320 * 4));
    const float* rows = reinterpret_cast<const float*>(bytes.constData() + 12);

    iwb::EngineOptions options;
    options.context_length = 512;
    options.num_threads = 1;
    options.device = "cpu";
    auto engine = iwb::Engine::load(m_model.toStdString(), options);
    QVERIFY2(engine.is_ok(), engine.error_message().c_str());
    for (size_t p = 0; p < tokens.size(); ++p) {
      auto expected = (*engine)->logits_for(std::vector<int32_t>(tokens.begin(), tokens.begin() + p + 1));
      QVERIFY(expected.is_ok());
      double max_diff = 0, max_ref = 0;
      for (size_t i = 0; i < expected->size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(double(rows[p * 320 + i]) - (*expected)[i]));
        max_ref = std::max(max_ref, std::fabs(double((*expected)[i])));
      }
      QVERIFY2(max_diff <= 1e-4 * max_ref, qPrintable(QString("position %1: %2").arg(p).arg(max_diff)));
    }
    const QStringList ids = r.out.trimmed().split(' ');
    QCOMPARE(ids.size(), 4);
    const float* last = rows + 4 * 320;
    QCOMPARE(ids[0].toInt(), int(std::max_element(last, last + 320) - last));
  }

  void badUsage() {
    auto r = run_iwb({"logits", "-m", m_model, "--tokens", "5,9"});
    QCOMPARE(r.exit_code, 2);  // neither -o nor --greedy
    r = run_iwb({"logits", "-m", m_model, "--tokens", "5,4000", "--greedy", "1", "--device", "cpu"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("outside the vocabulary of 320"), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestCliLogits)
#include "test_cli_logits.moc"
