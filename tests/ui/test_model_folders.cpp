// Finding models where people keep them: the "Models on This Computer" menu lists .gguf files
// of the known folders and opens the chosen one; without the default model the window says
// what is missing and how to get it.
#include "main_window/main_window.h"
#include "main_window/model_folders_menu.h"
#include "widgets/message_bar.h"

#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

using namespace iwb::ui;

class TestModelFolders : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_home.isValid());
    qputenv("HOME", m_home.path().toUtf8());
    qputenv("XDG_CACHE_HOME", (m_home.path() + "/.cache").toUtf8());
    qunsetenv("HF_HOME");
    qunsetenv("HF_HUB_CACHE");
    qunsetenv("LLAMA_CACHE");
  }

  void emptyFoldersSaySo() {
    ModelFoldersMenu menu;
    QVERIFY(!menu.actions().isEmpty());
    QVERIFY(menu.actions().first()->text().contains("No .gguf files found"));
    QVERIFY(!menu.actions().first()->isEnabled());
    QVERIFY(ModelFoldersMenu::existingFolderUrls().isEmpty());
  }

  void listsAndOpensModels() {
    const QString dir = m_home.path() + "/.lmstudio/models/someone/repo";
    QVERIFY(QDir().mkpath(dir));
    QFile f(dir + "/tiny-q8_0.gguf");
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(2048, 'x'));
    f.close();

    ModelFoldersMenu menu;
    QSignalSpy spy(&menu, &ModelFoldersMenu::fileTriggered);
    QAction* entry = nullptr;
    for (QAction* a : menu.actions()) {
      if (a->text().contains("tiny-q8_0.gguf")) entry = a;
    }
    QVERIFY(entry);
    QVERIFY(entry->text().contains("2.0 KiB"));
    entry->trigger();
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.first().first().toString(), f.fileName());
    QCOMPARE(ModelFoldersMenu::existingFolderUrls().size(), 1);
  }

  void missingDefaultModelIsExplained() {
    MainWindow window(nullptr, m_home.filePath("history.sqlite"));
    QVERIFY(!window.openDefaultModel());
    QVERIFY(window.messageBar()->isVisibleTo(&window));
    QCOMPARE(window.messageBar()->title(), QString("The default model is not downloaded yet."));
    QVERIFY(window.messageBar()->detail().contains("scripts/fetch-model.sh"));
    QVERIFY(window.messageBar()->detail().contains(m_home.path()));
    QVERIFY(!window.isLoading());
  }

 private:
  QTemporaryDir m_home;
};

QTEST_MAIN(TestModelFolders)
#include "test_model_folders.moc"
