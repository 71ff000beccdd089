// Tests of the main window: opening real GGUF files through the public slot (parsed on the
// loader thread), what the status bar, summary and tables then show, failures that keep the
// previous model, drag and drop, recent files, and the compiled-in resources.
#include "aidreams_fixture.h"
#include "gguf_fixtures.h"

#include "iwb/engine/model/model_info.h"
#include "main_window/app_info.h"
#include "main_window/main_window.h"
#include "main_window/recent_files.h"
#include "model_info/metadata_table_model.h"
#include "model_info/model_overview_widget.h"
#include "model_info/model_summary_view.h"
#include "model_info/tensor_table_model.h"
#include "roofline/machine_ceilings.h"
#include "widgets/filtered_table_view.h"
#include "widgets/message_bar.h"
#include "widgets/natural_sort_proxy_model.h"
#include "widgets/welcome_page.h"
#include "worker/engine_controller.h"

#include <QApplication>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QIcon>
#include <QImageReader>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenu>
#include <QMenuBar>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>
#include <QToolButton>

#include <algorithm>
#include "test_paths.h"

using namespace iwb::ui;

namespace {

constexpr int kLoadTimeoutMs = 15000;

// Absolute and clean, as the window reports paths.
QString vocabPath() {
  return QFileInfo(QString::fromStdString(iwb::test::shared_models_dir()) + "/vocab-gguf/ggml-vocab-llama-spm.gguf")
      .absoluteFilePath();
}

QString statusLabelText(const MainWindow& window, const char* objectName) {
  const auto* label = window.statusBar()->findChild<QLabel*>(QLatin1String(objectName));
  return label ? label->text() : QStringLiteral("<no label %1>").arg(QLatin1String(objectName));
}

// Sends a drag-enter and a drop of `paths` to the window; returns whether the drop was accepted.
bool dropFiles(MainWindow& window, const QStringList& paths, bool* enterAccepted = nullptr) {
  QMimeData mime;
  QList<QUrl> urls;
  for (const QString& p : paths) urls << QUrl::fromLocalFile(p);
  mime.setUrls(urls);
  const QPoint pos = window.rect().center();
  QDragEnterEvent enter(pos, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(&window, &enter);
  if (enterAccepted) *enterAccepted = enter.isAccepted();
  QDropEvent drop(QPointF(pos), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(&window, &drop);
  return drop.isAccepted();
}

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void init();
  void resourcesAreCompiledIn();
  void fitsASmallLaptopScreen();
  void startsOnWelcomePage();
  void opensVocabOnlyGguf();
  void opensModelWithTensors();
  void sortsAndFiltersTensorsInTheView();
  void corruptFileKeepsPreviousModel();
  void missingFileFailsBeforeAnyModel();
  void dropOfGgufOpensIt();
  void dropOfOtherFileIsRejected();
  void recentFilesArePersisted();
  void loaderLivesOnItsOwnThread();
  void aboutTextNamesVersionAndLicence();
  void firstStartMeasuresTheMachine();
  void everyTabFits1280x800();
  void modelPageLeadsToChatUnlessChosen();
  void summaryNamesExpertsAndPredictionLayers();
  void summaryNamesRecurrentLayers();

 private:
  // Opens `path` through the public slot and waits for the outcome.
  bool openAndWait(MainWindow& window, const QString& path);

  QTemporaryDir m_settingsDir;
  QTemporaryDir m_dir;
  QString m_tinyPath;
};

void TestMainWindow::initTestCase() {
  QVERIFY(m_settingsDir.isValid());
  QVERIFY(m_dir.isValid());
  // Settings (recent files, geometry) go to a throw-away folder, never the user's.
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_settingsDir.path());
  QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
  QCoreApplication::setApplicationName(QStringLiteral("test_main_window"));
  // The window opens its chat history under AppDataLocation: a test folder, not the user's.
  QStandardPaths::setTestModeEnabled(true);

  m_tinyPath = m_dir.filePath(QStringLiteral("tiny-llama.gguf"));
  const iwb::Status written = iwb::test::writeTinyModel(m_tinyPath);
  QVERIFY2(written.is_ok(), written.message().c_str());
}

void TestMainWindow::init() { QSettings().clear(); }

void TestMainWindow::everyTabFits1280x800() {
  // Issue 19: no tab may make the window wider or taller than a 1280x800 screen, with a model
  // open (the long labels: paths, roofs, device names).
  MainWindow window;
  QVERIFY(openAndWait(window, m_tinyPath));
  window.resize(1280, 800);
  window.show();
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  for (int i = 0; i < window.tabs()->count(); ++i) {
    window.tabs()->setCurrentIndex(i);
    QCoreApplication::processEvents();
    const QSize needed = window.minimumSizeHint().expandedTo(window.minimumSize());
    QVERIFY2(
        needed.width() <= 1280 && needed.height() <= 800,
        qPrintable(
            QStringLiteral("%1 needs %2x%3").arg(window.tabs()->tabText(i)).arg(needed.width()).arg(needed.height())));
    QVERIFY2(window.width() <= 1280 && window.height() <= 800, qPrintable(QStringLiteral("%1 grew the window to %2x%3")
                                                                              .arg(window.tabs()->tabText(i))
                                                                              .arg(window.width())
                                                                              .arg(window.height())));
  }
}

void TestMainWindow::firstStartMeasuresTheMachine() {
  // Issue 19: on a machine with no stored probe the roofline has its roofs without the user
  // finding Measure now: the window measures in the background, with a Cancel in the status bar.
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString results = dir.filePath(QStringLiteral("results.sqlite"));
  iwb::ProbeOptions small;  // the plumbing, not the machine
  small.num_threads = 1;
  small.buffer_bytes = 8u << 20;
  small.repetitions = 1;
  small.compute_seconds = 0.02;
  {
    MainWindow window(nullptr, dir.filePath(QStringLiteral("conversations.sqlite")), results);
    QVERIFY(!window.ceilings()->probe());
    QVERIFY(window.startFirstRunProbe(small));
    QVERIFY(window.ceilings()->isMeasuring());
    QVERIFY(window.firstRunProbeIndicator() && !window.firstRunProbeIndicator()->isHidden());
    QVERIFY(QTest::qWaitFor([&] { return !window.ceilings()->isMeasuring(); }, 30000));
    QVERIFY(window.ceilings()->probe());
    QVERIFY(window.firstRunProbeIndicator()->isHidden());
    QVERIFY(!window.startFirstRunProbe(small));  // measured: not again
  }
  {
    MainWindow window(nullptr, dir.filePath(QStringLiteral("conversations.sqlite")), results);
    QVERIFY(window.ceilings()->probe());  // stored: the next start has its roofs at once
    QVERIFY(!window.startFirstRunProbe(small));
  }
  // Cancelled on another machine (an empty store): nothing stored, and not offered again.
  QTemporaryDir other;
  const QString otherResults = other.filePath(QStringLiteral("results.sqlite"));
  {
    MainWindow window(nullptr, other.filePath(QStringLiteral("conversations.sqlite")), otherResults);
    QVERIFY(window.startFirstRunProbe(small));
    window.firstRunProbeIndicator()->findChild<QToolButton*>(QStringLiteral("cancelProbeButton"))->click();
    QVERIFY(!window.ceilings()->isMeasuring());
    QVERIFY(window.firstRunProbeIndicator()->isHidden());
    QVERIFY(!window.startFirstRunProbe(small));
    QTest::qWait(1000);
    QVERIFY(!window.ceilings()->probe());
  }
}

bool TestMainWindow::openAndWait(MainWindow& window, const QString& path) {
  QSignalSpy opened(&window, &MainWindow::modelOpened);
  QSignalSpy failed(&window, &MainWindow::modelOpenFailed);
  window.openModel(path);
  if (!window.isLoading()) return false;  // the request must be in flight, not done inline
  const bool answered = QTest::qWaitFor([&] { return opened.count() + failed.count() > 0; }, kLoadTimeoutMs);
  return answered && opened.count() == 1 && !window.isLoading();
}

void TestMainWindow::resourcesAreCompiledIn() {
  const QString iconPath = QStringLiteral(":/icons/inference-workbench.svg");
  QVERIFY2(QFile::exists(iconPath), "iwb_resources was not linked into the executable");
  QImageReader reader(iconPath);
  const QImage image = reader.read();
  QVERIFY2(!image.isNull(), qPrintable(reader.errorString()));
  QCOMPARE(image.size(), QSize(64, 64));
  QVERIFY(!QIcon(iconPath).pixmap(32, 32).isNull());
}

void TestMainWindow::startsOnWelcomePage() {
  MainWindow window;
  QVERIFY(!window.welcomePage()->isHidden());
  QVERIFY(window.overview()->isHidden());
  QVERIFY(window.messageBar()->isHidden());
  QVERIFY(window.currentModelPath().isEmpty());
  QVERIFY(!window.isLoading());
  // The empty state offers the way in.
  QCOMPARE(window.welcomePage()->openButton()->text(), QStringLiteral("Open Model…"));
  const auto labels = window.welcomePage()->findChildren<QLabel*>();
  QVERIFY(std::any_of(labels.begin(), labels.end(),
                      [](const QLabel* l) { return l->text() == QStringLiteral("or drop a .gguf file here"); }));
  QVERIFY(statusLabelText(window, "architectureLabel").isEmpty());
}

void TestMainWindow::opensVocabOnlyGguf() {
  if (!QFileInfo::exists(vocabPath())) QSKIP("shared vocab GGUF files are not available");
  MainWindow window;
  QVERIFY(openAndWait(window, vocabPath()));
  QVERIFY(!window.isLoading());
  QCOMPARE(window.currentModelPath(), vocabPath());
  QVERIFY(window.welcomePage()->isHidden());
  QVERIFY(!window.overview()->isHidden());

  QCOMPARE(statusLabelText(window, "architectureLabel"), QStringLiteral("llama"));
  QCOMPARE(statusLabelText(window, "parametersLabel"), QStringLiteral("vocabulary only"));
  QCOMPARE(statusLabelText(window, "fileTypeLabel"), QStringLiteral("F16"));        // general.file_type 1
  QCOMPARE(statusLabelText(window, "fileSizeLabel"), QStringLiteral("706.9 KiB"));  // 723,869 bytes
  QVERIFY(window.windowTitle().startsWith(QStringLiteral("ggml-vocab-llama-spm.gguf")));

  const ModelOverviewWidget* overview = window.overview();
  QCOMPARE(overview->tensorModel()->rowCount(), 0);
  QCOMPARE(overview->metadataModel()->rowCount(), 22);
  // A vocabulary-only file opens on its metadata, the only thing it has.
  QCOMPARE(overview->tabs()->currentWidget(), overview->metadataTable());
  const int model = overview->metadataModel()->rowOfKey(QStringLiteral("tokenizer.ggml.model"));
  QVERIFY(model >= 0);
  QCOMPARE(overview->metadataModel()->index(model, MetadataTableModel::ValueColumn).data().toString(),
           QStringLiteral("\"llama\""));
  const int tokens = overview->metadataModel()->rowOfKey(QStringLiteral("tokenizer.ggml.tokens"));
  QCOMPARE(overview->metadataModel()->index(tokens, MetadataTableModel::TypeColumn).data().toString(),
           QStringLiteral("str[32000]"));

  const ModelSummaryView* summary = overview->summaryView();
  QCOMPARE(summary->fieldText(QStringLiteral("architecture")), QStringLiteral("llama"));
  QCOMPARE(summary->fieldText(QStringLiteral("tokenizerModel")), QStringLiteral("llama"));
  QCOMPARE(summary->fieldText(QStringLiteral("vocabSize")), QLocale().toString(32000));
  QCOMPARE(summary->fieldText(QStringLiteral("layers")), QLocale().toString(32));
  QCOMPARE(summary->fieldText(QStringLiteral("ggufVersion")), QStringLiteral("3"));
  QCOMPARE(summary->fieldText(QStringLiteral("chatTemplate")), QStringLiteral("no"));
}

void TestMainWindow::opensModelWithTensors() {
  MainWindow window;
  QVERIFY(openAndWait(window, m_tinyPath));
  const auto& tensors = iwb::test::tinyModelTensors();

  QCOMPARE(statusLabelText(window, "architectureLabel"), QStringLiteral("llama"));
  // The expected count comes from the fixture's own shapes, not from the engine.
  QCOMPARE(
      statusLabelText(window, "parametersLabel"),
      QStringLiteral("%1 params").arg(QString::fromStdString(iwb::format_count(iwb::test::tinyModelParamCount()))));
  QCOMPARE(iwb::test::tinyModelParamCount(), quint64{128 + 256 + 512 + 16 + 16 + 16 + 256});
  QCOMPARE(statusLabelText(window, "parametersLabel"), QStringLiteral("1.2 K params"));
  QCOMPARE(statusLabelText(window, "fileTypeLabel"), QStringLiteral("F16"));
  QCOMPARE(statusLabelText(window, "fileSizeLabel"),
           QString::fromStdString(iwb::format_bytes(QFileInfo(m_tinyPath).size())));

  const ModelOverviewWidget* overview = window.overview();
  QCOMPARE(overview->tabs()->currentWidget(), overview->tensorTable());
  const TensorTableModel* model = overview->tensorModel();
  QCOMPARE(model->rowCount(), int(tensors.size()));
  for (int r = 0; r < model->rowCount(); ++r) {
    QCOMPARE(model->index(r, TensorTableModel::NameColumn).data().toString(),
             QString::fromStdString(tensors[size_t(r)].name));
    QCOMPARE(model->index(r, TensorTableModel::SizeColumn).data(TensorTableModel::SortRole).toULongLong(),
             tensors[size_t(r)].numBytes());
  }
  QCOMPARE(model->index(1, TensorTableModel::TypeColumn).data().toString(), QStringLiteral("F16"));
  QCOMPARE(model->index(1, TensorTableModel::ShapeColumn).data().toString(), QStringLiteral("16 x 16"));
  QCOMPARE(model->index(1, TensorTableModel::SizeColumn).data().toString(), QStringLiteral("512 B"));
  QCOMPARE(overview->metadataModel()->rowCount(), iwb::test::kTinyModelNumMetadata);

  const ModelSummaryView* summary = overview->summaryView();
  QCOMPARE(summary->fieldText(QStringLiteral("name")), QString::fromLatin1(iwb::test::kTinyModelName));
  QCOMPARE(summary->fieldText(QStringLiteral("heads")), QStringLiteral("4"));
  QCOMPARE(summary->fieldText(QStringLiteral("experts")), QStringLiteral("none (dense)"));
  QVERIFY(summary->fieldText(QStringLiteral("kvHeads")).startsWith(QStringLiteral("2")));
  QCOMPARE(summary->fieldText(QStringLiteral("chatTemplate")), QStringLiteral("yes"));
  QCOMPARE(summary->fieldText(QStringLiteral("vocabSize")), QStringLiteral("8"));
  // f16 K and V for 2 KV heads of dim 16/4 = 4: 2 x (4 + 4) x 2 bytes per token and layer,
  // x 11 layers x 256 tokens = 90,112 bytes.
  QCOMPARE(summary->fieldText(QStringLiteral("kvCache")),
           QStringLiteral("88.0 KiB at %1 tokens").arg(QLocale().toString(256)));
  QVERIFY2(summary->fieldText(QStringLiteral("tensorTypes")).contains(QStringLiteral("Q8_0 — 1 tensor, 272 B")),
           qPrintable(summary->fieldText(QStringLiteral("tensorTypes"))));
}

void TestMainWindow::sortsAndFiltersTensorsInTheView() {
  MainWindow window;
  QVERIFY(openAndWait(window, m_tinyPath));
  FilteredTableView* table = window.overview()->tensorTable();
  QTableView* view = table->view();
  QCOMPARE(view->model(), table->proxy());

  view->sortByColumn(TensorTableModel::SizeColumn, Qt::DescendingOrder);
  QCOMPARE(view->model()->index(0, 0).data().toString(), QStringLiteral("blk.0.ffn_up.weight"));
  table->filterEdit()->setText(QStringLiteral("norm"));
  QCOMPARE(view->model()->rowCount(), 3);

  // Opening another model clears the filter so no row is hidden for a reason nobody sees.
  QVERIFY(openAndWait(window, m_tinyPath));
  QVERIFY(table->filterEdit()->text().isEmpty());
  QCOMPARE(view->model()->rowCount(), int(iwb::test::tinyModelTensors().size()));
}

void TestMainWindow::corruptFileKeepsPreviousModel() {
  const QString corrupt = m_dir.filePath(QStringLiteral("corrupt.gguf"));
  QVERIFY(iwb::test::writeCorruptGguf(corrupt).is_ok());

  MainWindow window;
  QVERIFY(openAndWait(window, m_tinyPath));
  const QString architecture = statusLabelText(window, "architectureLabel");
  const QString size = statusLabelText(window, "fileSizeLabel");
  // Opening also loads the model for chat; let that finish so its own status line ("ready to
  // chat") cannot arrive after, and replace, the failure's.
  QVERIFY(QTest::qWaitFor([&] { return !window.engine()->isLoading(); }, 30000));
  QTest::qWait(50);

  QSignalSpy failed(&window, &MainWindow::modelOpenFailed);
  QVERIFY(!openAndWait(window, corrupt));
  QCOMPARE(failed.count(), 1);
  QCOMPARE(failed.first().at(0).toString(), QFileInfo(corrupt).absoluteFilePath());
  const QString message = failed.first().at(1).toString();
  QVERIFY(!message.isEmpty());

  // The error is in the window, non-modal, with the parser's words.
  QVERIFY(!window.messageBar()->isHidden());
  QCOMPARE(window.messageBar()->kind(), MessageBar::Kind::Error);
  QVERIFY(window.messageBar()->title().contains(QStringLiteral("corrupt.gguf")));
  QCOMPARE(window.messageBar()->detail(), message);
  QVERIFY(window.statusBar()->currentMessage().contains(QStringLiteral("corrupt.gguf")));

  // Nothing of the previous model was lost.
  QCOMPARE(window.currentModelPath(), QFileInfo(m_tinyPath).absoluteFilePath());
  QVERIFY(!window.overview()->isHidden());
  QCOMPARE(window.overview()->tensorModel()->rowCount(), int(iwb::test::tinyModelTensors().size()));
  QCOMPARE(statusLabelText(window, "architectureLabel"), architecture);
  QCOMPARE(statusLabelText(window, "fileSizeLabel"), size);
  QVERIFY(!window.recentFiles()->files().contains(QFileInfo(corrupt).absoluteFilePath()));

  // The message can be dismissed, and a successful open dismisses it too.
  window.messageBar()->dismiss();
  QVERIFY(window.messageBar()->isHidden());
  QVERIFY(!openAndWait(window, corrupt));
  QVERIFY(!window.messageBar()->isHidden());
  QVERIFY(openAndWait(window, m_tinyPath));
  QVERIFY(window.messageBar()->isHidden());
}

void TestMainWindow::missingFileFailsBeforeAnyModel() {
  const QString missing = m_dir.filePath(QStringLiteral("gone.gguf"));
  MainWindow window;
  QSignalSpy failed(&window, &MainWindow::modelOpenFailed);
  QVERIFY(!openAndWait(window, missing));
  QCOMPARE(failed.count(), 1);
  QVERIFY(failed.first().at(1).toString().contains(QStringLiteral("does not exist")));
  QVERIFY(!window.welcomePage()->isHidden());
  QVERIFY(!window.messageBar()->isHidden());
  QVERIFY(window.currentModelPath().isEmpty());
  QVERIFY(statusLabelText(window, "architectureLabel").isEmpty());
}

void TestMainWindow::dropOfGgufOpensIt() {
  MainWindow window;
  QVERIFY(window.acceptDrops());
  QSignalSpy opened(&window, &MainWindow::modelOpened);
  bool enterAccepted = false;
  QVERIFY(dropFiles(window, {m_tinyPath}, &enterAccepted));
  QVERIFY(enterAccepted);
  QVERIFY(opened.wait(kLoadTimeoutMs));
  QCOMPARE(opened.first().at(0).toString(), QFileInfo(m_tinyPath).absoluteFilePath());
  QCOMPARE(window.overview()->tensorModel()->rowCount(), int(iwb::test::tinyModelTensors().size()));

  // Among several dropped files, the .gguf one is opened.
  const QString notes = m_dir.filePath(QStringLiteral("readme.txt"));
  QVERIFY(iwb::test::writeTextFile(notes, "notes").is_ok());
  QCOMPARE(MainWindow::ggufPathFromMimeData(nullptr), QString());
  QMimeData mixed;
  mixed.setUrls({QUrl::fromLocalFile(notes), QUrl::fromLocalFile(m_tinyPath)});
  QCOMPARE(MainWindow::ggufPathFromMimeData(&mixed), m_tinyPath);
}

void TestMainWindow::dropOfOtherFileIsRejected() {
  const QString notes = m_dir.filePath(QStringLiteral("notes.txt"));
  QVERIFY(iwb::test::writeTextFile(notes, "not a model").is_ok());
  MainWindow window;
  QSignalSpy opened(&window, &MainWindow::modelOpened);
  QSignalSpy failed(&window, &MainWindow::modelOpenFailed);
  QVERIFY(!dropFiles(window, {notes}));
  QVERIFY(!window.isLoading());
  const QString status = window.statusBar()->currentMessage();
  QVERIFY2(status.contains(QStringLiteral("notes.txt")) && status.contains(QStringLiteral(".gguf")),
           qPrintable(status));
  QTest::qWait(100);  // give a wrongly started load the chance to report
  QCOMPARE(opened.count(), 0);
  QCOMPARE(failed.count(), 0);
  QVERIFY(!window.welcomePage()->isHidden());
}

void TestMainWindow::recentFilesArePersisted() {
  if (!QFileInfo::exists(vocabPath())) QSKIP("shared vocab GGUF files are not available");
  {
    MainWindow window;
    QVERIFY(openAndWait(window, m_tinyPath));
    QVERIFY(openAndWait(window, vocabPath()));
    QVERIFY(openAndWait(window, m_tinyPath));  // moves to the front, no duplicate
    QCOMPARE(window.recentFiles()->files(), QStringList({QFileInfo(m_tinyPath).absoluteFilePath(), vocabPath()}));

    // The File menu's submenu mirrors the list.
    QMenu* fileMenu = window.menuBar()->actions().first()->menu();
    QVERIFY(fileMenu);
    QMenu* recentMenu = nullptr;
    for (QAction* a : fileMenu->actions()) {
      if (a->menu() && a->menu()->title() == QStringLiteral("Open &Recent")) recentMenu = a->menu();
    }
    QVERIFY(recentMenu);
    QCOMPARE(recentMenu->actions().first()->text(), QStringLiteral("&1 tiny-llama.gguf"));
    QCOMPARE(recentMenu->actions().at(1)->text(), QStringLiteral("&2 ggml-vocab-llama-spm.gguf"));

    // Triggering an entry opens that file.
    QSignalSpy opened(&window, &MainWindow::modelOpened);
    recentMenu->actions().at(1)->trigger();
    QVERIFY(opened.wait(kLoadTimeoutMs));
    QCOMPARE(window.currentModelPath(), vocabPath());
  }
  // A new window (a later run) sees the same list, newest first.
  MainWindow later;
  QCOMPARE(later.recentFiles()->files(), QStringList({vocabPath(), QFileInfo(m_tinyPath).absoluteFilePath()}));
  later.recentFiles()->clear();
  QVERIFY(RecentFiles().files().isEmpty());
}

void TestMainWindow::loaderLivesOnItsOwnThread() {
  MainWindow window;
  const auto* thread = window.findChild<QThread*>(QStringLiteral("ModelLoaderThread"));
  QVERIFY(thread);
  QVERIFY(thread->isRunning());
  QVERIFY(thread != QThread::currentThread());
  // Two requests in a row: both answer, in order, and the last one is what is shown.
  QSignalSpy opened(&window, &MainWindow::modelOpened);
  if (QFileInfo::exists(vocabPath())) window.openModel(vocabPath());
  window.openModel(m_tinyPath);
  QTRY_VERIFY_WITH_TIMEOUT(!window.isLoading(), kLoadTimeoutMs);
  QCOMPARE(opened.last().at(0).toString(), QFileInfo(m_tinyPath).absoluteFilePath());
  QCOMPARE(window.currentModelPath(), QFileInfo(m_tinyPath).absoluteFilePath());
}

void TestMainWindow::aboutTextNamesVersionAndLicence() {
  const QString about = aboutText();
  QVERIFY(about.contains(QStringLiteral("Inference Workbench")));
  QVERIFY(about.contains(applicationVersion()));
  QVERIFY(about.contains(QStringLiteral("GPL-3.0-or-later")));
  QVERIFY(about.contains(QString::fromLatin1(qVersion())));
  QVERIFY(!applicationVersion().isEmpty());
}

// Every tab together sets the window's smallest size; it must fit a 1366 x 768 laptop screen
// with a panel and a title bar (it was 1184 x 786: the KV Cache tab's figures column and the
// Serving tab's three sweep charts in a row). Pages shrink to scroll areas or smaller charts.
// From the model page the window moves to the chat once the engine has the model, unless the
// model page was chosen while it loaded (--tab model, the View menu, the tab bar).
void TestMainWindow::modelPageLeadsToChatUnlessChosen() {
  QTemporaryDir dir;
  QString why;
  const QString model = iwb::test::convertAidreamsModel(dir.path(), &why);
  if (model.isEmpty()) QSKIP(qPrintable(why));
  for (const bool isChosen : {false, true}) {
    MainWindow window;
    QSignalSpy engineLoaded(window.engine(), &EngineController::modelLoaded);
    if (isChosen) QVERIFY(window.showTab(QStringLiteral("model")));  // as --tab model does at start
    QVERIFY(openAndWait(window, model));
    QVERIFY(engineLoaded.count() > 0 || engineLoaded.wait(60000));
    QCoreApplication::processEvents();
    const QString shown = window.tabs()->tabText(window.tabs()->currentIndex()).remove(QLatin1Char('&'));
    QCOMPARE(shown, isChosen ? QStringLiteral("Model") : QStringLiteral("Chat"));
  }
}

// A mixture of experts' routing in the model summary (GLM-4.5-Air's keys), and latent attention's widths.
void TestMainWindow::summaryNamesExpertsAndPredictionLayers() {
  iwb::ModelSummary s;
  s.architecture = "glm4moe";
  iwb::ModelHyperParams& h = s.hparams;
  h.block_count = 47;
  h.nextn_predict_layers = 1;
  h.expert_count = 128;
  h.expert_used_count = 8;
  h.expert_feed_forward_length = 1408;
  h.expert_shared_count = 1;
  h.leading_dense_block_count = 1;
  ModelSummaryView view;
  view.setSummary(s);
  const QString width = QLocale().toString(1408);  // as the other counts, in the user's locale
  QCOMPARE(view.fieldText(QStringLiteral("experts")),
           QStringLiteral("128 per layer, 8 per token, %1 wide; 1 shared; layer 0 dense").arg(width));
  QCOMPARE(view.fieldText(QStringLiteral("layers")),
           QStringLiteral("46 (+1 multi-token prediction, the MTP drafter's)"));
  h.leading_dense_block_count = 3;
  h.expert_shared_count = 0;
  view.setSummary(s);
  QCOMPARE(view.fieldText(QStringLiteral("experts")),
           QStringLiteral("128 per layer, 8 per token, %1 wide; layers 0-2 dense").arg(width));
  // Qwen 3.5's gated shared expert: a width, no count key.
  h.leading_dense_block_count = 0;
  h.expert_shared_feed_forward_length = 512;
  view.setSummary(s);
  QCOMPARE(view.fieldText(QStringLiteral("experts")),
           QStringLiteral("128 per layer, 8 per token, %1 wide; a shared expert 512 wide").arg(width));

  // DeepSeek-V2-Lite's latent attention: the cache's one head and each head's own widths.
  h.head_count = 16;
  h.head_count_kv = 1;
  h.key_length = 576;
  h.value_length = 512;
  h.kv_lora_rank = 512;
  h.key_length_mla = 192;
  h.value_length_mla = 128;
  view.setSummary(s);
  QCOMPARE(view.fieldText(QStringLiteral("headDim")),
           QStringLiteral("576 / 512  (latent 512 + 64 roped; per head q/k 192, v 128)"));
  QCOMPARE(view.fieldText(QStringLiteral("kvHeads")),
           QStringLiteral("1  (latent attention: one latent per token, shared by all 16 heads)"));
  h.kv_lora_rank = 0;  // the same widths without a latent read as grouped-query
  view.setSummary(s);
  QCOMPARE(view.fieldText(QStringLiteral("kvHeads")), QStringLiteral("1  (grouped-query, 16 heads per KV head)"));
}

// Qwen3.5-9B's layers in the model summary: which recur and which attend, the KV cache of the
// attention layers alone, and what each sequence's recurrent state takes.
void TestMainWindow::summaryNamesRecurrentLayers() {
  iwb::ModelSummary s;
  s.architecture = "qwen35";
  iwb::ModelHyperParams& h = s.hparams;
  h.context_length = 4096;
  h.block_count = 32;
  h.head_count = 16;
  h.head_count_kv = 4;
  h.key_length = 256;
  h.value_length = 256;
  h.linear_conv_kernel = 4;
  h.linear_num_key_heads = 16;
  h.linear_num_value_heads = 32;
  h.linear_head_dim = 128;
  h.recurrent_state_bytes_per_sequence = 52'690'944;
  for (int64_t il = 0; il < h.block_count; ++il) {
    const bool is_recurrent = (il + 1) % 4 != 0;
    h.layer_kv.push_back({is_recurrent ? 0 : 4, 256, 256, false, is_recurrent});
  }
  ModelSummaryView view;
  view.setSummary(s);
  QCOMPARE(view.fieldText(QStringLiteral("layers")),
           QStringLiteral("32: 24 recurrent, 8 attention (one in 4: 3, 7, …, 31)"));
  QCOMPARE(view.fieldText(QStringLiteral("recurrent")),
           QStringLiteral("gated delta net: 16 key / 32 value heads of 128, convolution over 4 tokens"));
  QCOMPARE(view.fieldText(QStringLiteral("kvHeads")),
           QStringLiteral("4  (grouped-query, 4 heads per KV head); attention layers only"));
  // 8 layers x 4 KV heads x (256 + 256) f16 values x 4,096 positions: 128 MiB.
  QCOMPARE(view.fieldText(QStringLiteral("kvCache")),
           QStringLiteral("128.0 MiB at %1 tokens (the 8 attention layers)").arg(QLocale().toString(4096)));
  QCOMPARE(view.fieldText(QStringLiteral("recurrentState")), QStringLiteral("50.2 MiB per sequence"));
  const iwb::MemoryEstimate memory = iwb::estimate_memory(s, 4096);
  QCOMPARE(view.fieldText(QStringLiteral("memoryTotal")), QString::fromStdString(iwb::format_bytes(memory.total())));

  // Attention layers placed one by one are named one by one.
  h.layer_kv[3] = {0, 256, 256, false, true};
  h.layer_kv[4] = {4, 256, 256, false, false};
  view.setSummary(s);
  QCOMPARE(view.fieldText(QStringLiteral("layers")),
           QStringLiteral("32: 24 recurrent, 8 attention (layers 4, 7, 11, 15, 19, 23, 27, 31)"));
  // A model whose every layer attends says so, and has no recurrent state.
  iwb::ModelSummary llama;
  llama.hparams.block_count = 16;
  llama.hparams.context_length = 4096;
  view.setSummary(llama);
  QCOMPARE(view.fieldText(QStringLiteral("layers")), QStringLiteral("16"));
  QCOMPARE(view.fieldText(QStringLiteral("recurrent")), QStringLiteral("none (every layer attends)"));
  QCOMPARE(view.fieldText(QStringLiteral("recurrentState")), QStringLiteral("none"));
}

void TestMainWindow::fitsASmallLaptopScreen() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  MainWindow window(nullptr, dir.filePath(QStringLiteral("conversations.sqlite")),
                    dir.filePath(QStringLiteral("results.sqlite")));
  const QSize least = window.minimumSizeHint().expandedTo(window.minimumSize());
  QVERIFY2(least.width() <= 1280 && least.height() <= 690,
           qPrintable(QStringLiteral("%1 x %2").arg(least.width()).arg(least.height())));
  for (int i = 0; i < window.tabs()->count(); ++i) {
    const QSize page = window.tabs()->widget(i)->minimumSizeHint();
    QVERIFY2(
        page.height() <= 620,
        qPrintable(QStringLiteral("%1: %2 x %3").arg(window.tabs()->tabText(i)).arg(page.width()).arg(page.height())));
  }
}

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
