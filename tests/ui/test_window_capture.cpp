// The application's --capture: PNGs of named tabs once a real model (aidreams, converted for
// the test) has loaded, or once a reply has ended, saved by the offscreen platform with no
// display; an unknown tab and a model that cannot load end it with a reason, not a hang.
#include "aidreams_fixture.h"
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "main_window/main_window.h"
#include "main_window/window_capture.h"
#include "worker/engine_controller.h"

#include <QFile>
#include <QImage>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

using namespace iwb::ui;

namespace {
constexpr int kTimeoutMs = 60000;
}

class TestWindowCapture : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QSettings::setDefaultFormat(QSettings::IniFormat);
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
    QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
    QCoreApplication::setApplicationName(QStringLiteral("test_window_capture"));
    QStandardPaths::setTestModeEnabled(true);
    QString why;
    m_modelPath = iwb::test::convertAidreamsModel(m_dir.path(), &why);
    if (m_modelPath.isEmpty()) {
      if (!iwb::test::hasAidreamsModel()) QSKIP(qPrintable(why));
      QFAIL(qPrintable(why));
    }
  }

  void capturesTheTabsOnceTheModelLoads() {
    MainWindow window(nullptr, m_dir.filePath(QStringLiteral("a/conversations.sqlite")),
                      m_dir.filePath(QStringLiteral("a/results.sqlite")));
    window.setSessionDevice(QStringLiteral("cpu"));
    const QString out = m_dir.filePath(QStringLiteral("shots-a"));
    WindowCapture capture(&window, {out, {QStringLiteral("memory"), QStringLiteral("kv cache")}, false, 100});
    QSignalSpy finished(&capture, &WindowCapture::finished);
    capture.start();
    window.resize(1000, 700);
    window.show();
    window.openModel(m_modelPath);
    QVERIFY(QTest::qWaitFor([&] { return finished.count() == 1; }, kTimeoutMs));
    QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
    QCOMPARE(window.engine()->model().deviceId, QStringLiteral("cpu"));
    QCOMPARE(capture.savedFiles(),
             QStringList({out + QStringLiteral("/memory.png"), out + QStringLiteral("/kv-cache.png")}));
    for (const QString& path : capture.savedFiles()) {
      const QImage image(path);
      QVERIFY2(!image.isNull(), qPrintable(path));
      QVERIFY(image.width() >= 1000 * image.devicePixelRatio() - 1);
    }
    // The last tab captured is the one left showing.
    QCOMPARE(window.tabs()->tabText(window.tabs()->currentIndex()).remove(QLatin1Char('&')),
             QStringLiteral("KV Cache"));
  }

  void waitsForTheReplyWhenAsked() {
    MainWindow window(nullptr, m_dir.filePath(QStringLiteral("b/conversations.sqlite")),
                      m_dir.filePath(QStringLiteral("b/results.sqlite")));
    window.setSessionDevice(QStringLiteral("cpu"));
    WindowCapture capture(&window, {m_dir.filePath(QStringLiteral("shots-b")), {QStringLiteral("chat")}, true, 50});
    QSignalSpy finished(&capture, &WindowCapture::finished);
    QSignalSpy replies(window.engine(), &EngineController::generationFinished);
    capture.start();
    QObject::connect(
        window.engine(), &EngineController::modelLoaded, &window,
        [&window] {
          window.chatPanel()->input()->setPlainText(QStringLiteral("Once upon a time"));
          window.chatPanel()->send();
        },
        Qt::SingleShotConnection);
    window.show();
    window.openModel(m_modelPath);
    QVERIFY(QTest::qWaitFor([&] { return finished.count() == 1; }, kTimeoutMs));
    QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
    QCOMPARE(replies.count(), 1);  // not before the reply ended
    QVERIFY(QFile::exists(m_dir.filePath(QStringLiteral("shots-b/chat.png"))));
  }

  // A run started with the model (--spec-run, --lab-run) holds the capture until it ends.
  void waitsForTheRunsItIsGiven() {
    MainWindow window(nullptr, m_dir.filePath(QStringLiteral("e/conversations.sqlite")),
                      m_dir.filePath(QStringLiteral("e/results.sqlite")));
    window.setSessionDevice(QStringLiteral("cpu"));
    WindowCapture capture(&window, {m_dir.filePath(QStringLiteral("shots-e")), {QStringLiteral("model")}, false, 10});
    QSignalSpy finished(&capture, &WindowCapture::finished);
    QSignalSpy loaded(window.engine(), &EngineController::modelLoaded);
    QTimer runs;  // stands in for a comparison: ends a while after the model has loaded
    runs.setSingleShot(true);
    capture.waitAlsoFor(&runs, &QTimer::timeout);
    capture.start();
    QObject::connect(
        window.engine(), &EngineController::modelLoaded, &runs, [&runs] { runs.start(300); }, Qt::SingleShotConnection);
    window.openModel(m_modelPath);
    QVERIFY(QTest::qWaitFor([&] { return loaded.count() == 1; }, kTimeoutMs));
    QTest::qWait(150);
    QCOMPARE(finished.count(), 0);  // loaded, but the run has not ended
    QVERIFY(QTest::qWaitFor([&] { return finished.count() == 1; }, kTimeoutMs));
    QVERIFY2(finished.at(0).at(0).toBool(), qPrintable(finished.at(0).at(1).toString()));
    QVERIFY(!runs.isActive());
  }

  void anUnknownTabIsAFailure() {
    MainWindow window(nullptr, m_dir.filePath(QStringLiteral("c/conversations.sqlite")),
                      m_dir.filePath(QStringLiteral("c/results.sqlite")));
    window.setSessionDevice(QStringLiteral("cpu"));
    WindowCapture capture(&window, {m_dir.filePath(QStringLiteral("shots-c")), {QStringLiteral("nowhere")}, false, 10});
    QSignalSpy finished(&capture, &WindowCapture::finished);
    capture.start();
    window.openModel(m_modelPath);
    QVERIFY(QTest::qWaitFor([&] { return finished.count() == 1; }, kTimeoutMs));
    QVERIFY(!finished.at(0).at(0).toBool());
    QVERIFY2(finished.at(0).at(1).toString().contains(QStringLiteral("nowhere")),
             qPrintable(finished.at(0).at(1).toString()));
  }

  void aModelThatCannotLoadIsAFailure() {
    MainWindow window(nullptr, m_dir.filePath(QStringLiteral("d/conversations.sqlite")),
                      m_dir.filePath(QStringLiteral("d/results.sqlite")));
    const QString broken = m_dir.filePath(QStringLiteral("broken.gguf"));
    QFile file(broken);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("GGUF but not really");
    file.close();
    WindowCapture capture(&window, {m_dir.filePath(QStringLiteral("shots-d")), {QStringLiteral("chat")}, false, 10});
    QSignalSpy finished(&capture, &WindowCapture::finished);
    capture.start();
    window.openModel(broken);
    QVERIFY(QTest::qWaitFor([&] { return finished.count() == 1; }, kTimeoutMs));
    QVERIFY(!finished.at(0).at(0).toBool());
    QVERIFY(!QFile::exists(m_dir.filePath(QStringLiteral("shots-d/chat.png"))));
  }

 private:
  QTemporaryDir m_dir;
  QString m_modelPath;
};

QTEST_MAIN(TestWindowCapture)
#include "test_window_capture.moc"
