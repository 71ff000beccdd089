// MainWindow: menus, drag and drop, the loader thread, the tabs, and showing results or errors.
#include "main_window/main_window.h"

#include "chat/chat_panel.h"
#include "chat/message_view.h"
#include "experts/expert_load_panel.h"
#include "iwb/engine/model/model_locations.h"
#include "kvmap/kv_cache_panel.h"
#include "main_window/app_info.h"
#include "main_window/model_folders_menu.h"
#include "main_window/recent_files.h"
#include "memory/memory_panel.h"
#include "metrics/metrics_panel.h"
#include "model_info/model_loader.h"
#include "model_info/model_overview_widget.h"
#include "quantlab/quant_lab_panel.h"
#include "remote/connect_dialog.h"
#include "remote/remote_endpoints.h"
#include "roofline/machine_ceilings.h"
#include "roofline/roofline_panel.h"
#include "serve/server_panel.h"
#include "serving/serving_panel.h"
#include "settings/device_choice.h"
#include "settings/engine_settings.h"
#include "spec/spec_panel.h"
#include "store/conversation_store.h"
#include "widgets/message_bar.h"
#include "widgets/welcome_page.h"
#include "worker/engine_controller.h"

#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QRegularExpression>
#include <QSettings>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QThread>
#include <QToolButton>
#include <QVBoxLayout>

#include <utility>

namespace iwb::ui {
namespace {

constexpr int kStatusTimeoutMs = 8000;
const char* const kGeometryKey = "mainWindow/geometry";
const char* const kLastDirKey = "lastOpenDir";

// The results store `iwb probe` writes; under QStandardPaths' test mode a test folder instead,
// so tests never touch the user's measurements.
QString resultsStorePath(const QString& requested) {
  if (!requested.isEmpty()) return requested;
  if (QStandardPaths::isTestModeEnabled()) {
    return QDir(QStandardPaths::writableLocation(QStandardPaths::AppDataLocation))
        .filePath(QStringLiteral("results.sqlite"));
  }
  return {};  // MachineCeilings' default: ResultsStore::default_path()
}

bool hasGgufSuffix(const QString& path) {
  return QFileInfo(path).suffix().compare(QLatin1String("gguf"), Qt::CaseInsensitive) == 0;
}

QLabel* makeStatusLabel(const QString& objectName, const QString& toolTip, QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setObjectName(objectName);
  label->setToolTip(toolTip);
  label->setTextFormat(Qt::PlainText);
  label->setContentsMargins(6, 0, 6, 0);
  label->hide();  // nothing to say before a model is open
  return label;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent, const QString& conversationsPath, const QString& resultsPath)
    : QMainWindow(parent),
      m_recentFiles(new RecentFiles(this)),
      m_engine(new EngineController(this)),
      m_ceilings(new MachineCeilings(resultsStorePath(resultsPath), this)),
      m_messageBar(new MessageBar),
      m_tabs(new QTabWidget),
      m_pages(new QStackedWidget),
      m_welcomePage(new WelcomePage),
      m_overview(new ModelOverviewWidget) {
  setWindowTitle(QApplication::applicationDisplayName());
  setAcceptDrops(true);

  m_pages->addWidget(m_welcomePage);
  m_pages->addWidget(m_overview);
  openConversationStore(conversationsPath.isEmpty() ? ConversationStore::defaultPath() : conversationsPath);
  m_chatPanel = new ChatPanel(m_engine, m_store.get());
  m_remoteEndpoints = new RemoteEndpoints(this);
  m_remoteEndpoints->restoreApiKeys();
  m_chatPanel->setRemoteEndpoints(m_remoteEndpoints);
  if (!m_store) {
    m_chatPanel->messageBar()->showMessage(
        MessageBar::Kind::Error, tr("Conversations are not saved"),
        tr("%1\nChats in this session are kept only until the program ends.").arg(m_storeError));
  }
  m_tabs->setObjectName(QStringLiteral("mainTabs"));
  m_tabs->setDocumentMode(true);
  connect(m_tabs, &QTabWidget::tabBarClicked, this, [this](int) { m_isTabChosen = true; });
  m_tabs->addTab(m_chatPanel, tr("Chat"));
  m_tabs->addTab(m_pages, tr("Model"));
  m_ceilings->reload();
  m_rooflinePanel = new RooflinePanel(m_engine, m_ceilings);
  m_metricsPanel = new MetricsPanel(m_engine, m_ceilings);
  m_memoryPanel = new MemoryPanel(m_engine);
  m_memoryPanel->setEngineOptions(loadEngineSettings());
  m_tabs->addTab(m_rooflinePanel, tr("Roofline"));
  // Mixture-of-experts routing (issue 21): tokens per expert and layer over the last steps.
  m_expertLoadPanel = new ExpertLoadPanel(m_engine);
  m_tabs->addTab(m_expertLoadPanel, tr("Experts"));
  m_tabs->addTab(m_metricsPanel, tr("Metrics"));
  m_tabs->addTab(m_memoryPanel, tr("Memory"));
  m_kvCachePanel = new KvCachePanel(m_engine);
  m_tabs->addTab(m_kvCachePanel, tr("KV Cache"));
  // The quantization lab keeps its runs in the same results store as probes and benchmarks, and
  // computes on the engine's thread (never beside a chat reply).
  m_quantLabPanel = new QuantLabPanel(m_engine, resultsStorePath(resultsPath));
  m_tabs->addTab(m_quantLabPanel, tr("Quantization"));
  connect(m_quantLabPanel, &QuantLabPanel::statusMessage, this,
          [this](const QString& text) { statusBar()->showMessage(text, kStatusTimeoutMs); });
  connect(m_engine, &EngineController::modelLoaded, m_quantLabPanel,
          [this](const LoadedModel& model) { m_quantLabPanel->suggestSourcePath(model.path); });
  m_specPanel = new SpecPanel(m_engine);
  m_tabs->addTab(m_specPanel, tr("Speculative"));
  m_serverPanel = new ServerPanel(m_engine);
  m_tabs->addTab(m_serverPanel, tr("Server"));
  // Load on remote endpoints (issue 16); its runs go into the same results store.
  m_servingPanel = new ServingPanel(m_engine, resultsStorePath(resultsPath));
  m_servingPanel->setEndpoints(m_remoteEndpoints);
  m_tabs->addTab(m_servingPanel, tr("Serving"));
  connect(m_servingPanel, &ServingPanel::statusMessage, this,
          [this](const QString& text) { statusBar()->showMessage(text, kStatusTimeoutMs); });
  m_tabs->setCurrentWidget(m_pages);  // the welcome page, until a model is open
  auto* central = new QWidget;
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(m_messageBar);
  layout->addWidget(m_tabs, 1);
  setCentralWidget(central);

  connect(m_chatPanel, &ChatPanel::statusMessage, this,
          [this](const QString& text) { statusBar()->showMessage(text, kStatusTimeoutMs); });
  connect(m_engine, &EngineController::modelLoadProgress, this, [this](double fraction, const QString& stage) {
    statusBar()->showMessage(tr("Loading the model: %1% (%2)").arg(int(fraction * 100)).arg(stage));
  });
  connect(m_engine, &EngineController::modelLoaded, this, [this](const LoadedModel& model) {
    statusBar()->showMessage(tr("%1 is ready to chat (loaded in %2 s)")
                                 .arg(QFileInfo(model.path).fileName())
                                 .arg(model.loadSeconds, 0, 'f', model.loadSeconds < 10 ? 1 : 0),
                             kStatusTimeoutMs);
    // From the model page the next step is chatting; a user watching another tab, or who chose
    // the model page while the model loaded, stays there.
    if (m_tabs->currentWidget() == m_pages && !m_isTabChosen) m_tabs->setCurrentWidget(m_chatPanel);
    m_isTabChosen = false;
  });
  connect(m_engine, &EngineController::modelLoadFailed, this, [this](const QString& path, const QString&) {
    statusBar()->showMessage(tr("%1 cannot be used for chat").arg(QFileInfo(path).fileName()), kStatusTimeoutMs);
  });

  m_welcomePage->setRecentFiles(m_recentFiles->files());
  connect(m_recentFiles, &RecentFiles::changed, m_welcomePage, &WelcomePage::setRecentFiles);
  connect(m_welcomePage, &WelcomePage::openRequested, this, &MainWindow::showOpenDialog);
  connect(m_welcomePage, &WelcomePage::recentFileActivated, this, &MainWindow::openModel);

  createMenus();
  createStatusBar();
  connectDeviceStatus();
  startLoaderThread();

  if (!restoreGeometry(QSettings().value(QLatin1String(kGeometryKey)).toByteArray())) {
    resize(1280, 800);
  }
}

MainWindow::~MainWindow() {
  // The loader finishes the file it is reading (parsing is bounded by the file), then stops.
  m_loaderThread->quit();
  m_loaderThread->wait();
  // Order matters: the chat panel saves into the store as it goes, and the engine thread must
  // be joined before anything it reports to disappears.
  delete m_chatPanel;
  m_chatPanel = nullptr;
  delete m_serverPanel;  // its server's requests run in the engine worker: stopped first
  m_serverPanel = nullptr;
  // The lab's queue runs on the engine thread: cancelled with its panel, so joining that thread
  // does not wait for the queue to finish.
  delete m_quantLabPanel;
  m_quantLabPanel = nullptr;
  delete m_engine;
  m_engine = nullptr;
  m_store.reset();
}

void MainWindow::openConversationStore(const QString& path) {
  auto store = ConversationStore::open(path);
  if (!store) {
    m_storeError = QString::fromStdString(store.error_message());
    return;
  }
  m_store = std::move(*store);
}

QWidget* MainWindow::modelPage() const { return m_pages; }

namespace {
// A tab's name as the command line compares it: lower case, no mnemonic '&', and spaces,
// hyphens and underscores dropped, so "KV Cache", "kv-cache" and "kv_cache" name one tab.
QString comparableTabName(QString name) {
  name.remove(QLatin1Char('&'));
  name.remove(QRegularExpression(QStringLiteral("[\\s_-]")));
  return name.toLower();
}
}  // namespace

QStringList MainWindow::tabNames() const {
  QStringList names;
  for (int i = 0; i < m_tabs->count(); ++i)
    names << m_tabs->tabText(i).remove(QLatin1Char('&')).toLower().replace(QLatin1Char(' '), QLatin1Char('-'));
  return names;
}

bool MainWindow::showTab(const QString& name) {
  const QString wanted = comparableTabName(name);
  for (int i = 0; i < m_tabs->count(); ++i) {
    if (!wanted.isEmpty() && comparableTabName(m_tabs->tabText(i)) == wanted) {
      m_isTabChosen = true;
      m_tabs->setCurrentIndex(i);
      return true;
    }
  }
  return false;
}

void MainWindow::createMenus() {
  QMenu* fileMenu = menuBar()->addMenu(tr("&File"));
  QAction* openAction = fileMenu->addAction(style()->standardIcon(QStyle::SP_DialogOpenButton), tr("&Open Model…"),
                                            this, &MainWindow::showOpenDialog);
  openAction->setShortcut(QKeySequence::Open);
  openAction->setStatusTip(tr("Open a GGUF model file"));

  auto* recentMenu = new RecentFilesMenu(m_recentFiles, this);
  connect(recentMenu, &RecentFilesMenu::fileTriggered, this, &MainWindow::openModel);
  fileMenu->addMenu(recentMenu);
  auto* foldersMenu = new ModelFoldersMenu(this);
  connect(foldersMenu, &ModelFoldersMenu::fileTriggered, this, &MainWindow::openModel);
  fileMenu->addMenu(foldersMenu);
  QAction* connectAction = fileMenu->addAction(tr("&Connect to Server…"), this, &MainWindow::showConnectDialog);
  connectAction->setObjectName(QStringLiteral("connectToServerAction"));
  connectAction->setStatusTip(
      tr("Chat with and measure an OpenAI-compatible server (vLLM, SGLang, llama-server, iwb serve)"));
  fileMenu->addSeparator();
  QAction* settingsAction = fileMenu->addAction(tr("Engine &Settings…"), this, &MainWindow::showEngineSettings);
  settingsAction->setMenuRole(QAction::PreferencesRole);
  settingsAction->setStatusTip(tr("Context, threads, KV cache memory and block size"));
  fileMenu->addSeparator();
  QAction* quitAction = fileMenu->addAction(tr("&Quit"), this, &QWidget::close);
  quitAction->setShortcut(QKeySequence::Quit);
  quitAction->setMenuRole(QAction::QuitRole);

  QMenu* viewMenu = menuBar()->addMenu(tr("&View"));
  viewMenu->addAction(m_rooflinePanel->profilingAction());
  // Replies as the model wrote them, Markdown unrendered (kept across runs).
  QAction* rawTextAction = viewMenu->addAction(tr("Show &Raw Text"));
  rawTextAction->setObjectName(QStringLiteral("showRawTextAction"));
  rawTextAction->setCheckable(true);
  rawTextAction->setStatusTip(tr("Show replies as the model wrote them, without rendering their Markdown"));
  const bool isRaw = QSettings().value(QStringLiteral("chat/showRawText"), false).toBool();
  rawTextAction->setChecked(isRaw);
  m_chatPanel->messageView()->setShowsRawText(isRaw);
  connect(rawTextAction, &QAction::toggled, this, [this](bool checked) {
    QSettings().setValue(QStringLiteral("chat/showRawText"), checked);
    m_chatPanel->messageView()->setShowsRawText(checked);
  });
  // Each token's probability and the alternatives the model considered (costs nothing when off).
  QAction* probabilitiesAction = viewMenu->addAction(tr("Token &Probabilities"));
  probabilitiesAction->setObjectName(QStringLiteral("tokenProbabilitiesAction"));
  probabilitiesAction->setCheckable(true);
  probabilitiesAction->setStatusTip(
      tr("Colour replies by how likely each token was, and show the alternatives on hover (for replies from now on)"));
  const bool showsProbabilities = QSettings().value(QStringLiteral("chat/showTokenProbabilities"), false).toBool();
  probabilitiesAction->setChecked(showsProbabilities);
  m_chatPanel->setShowsTokenProbabilities(showsProbabilities);
  connect(probabilitiesAction, &QAction::toggled, this, [this](bool checked) {
    QSettings().setValue(QStringLiteral("chat/showTokenProbabilities"), checked);
    m_chatPanel->setShowsTokenProbabilities(checked);
  });
  viewMenu->addSeparator();
  for (int i = 0; i < m_tabs->count(); ++i) {
    QAction* tabAction = viewMenu->addAction(m_tabs->tabText(i), this, [this, i] {
      m_isTabChosen = true;
      m_tabs->setCurrentIndex(i);
    });
    tabAction->setShortcut(QKeySequence(Qt::ALT | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }

  QMenu* helpMenu = menuBar()->addMenu(tr("&Help"));
  QAction* aboutAction = helpMenu->addAction(tr("&About Inference Workbench"), this, &MainWindow::showAbout);
  aboutAction->setMenuRole(QAction::AboutRole);
  helpMenu->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt)->setMenuRole(QAction::AboutQtRole);
}

void MainWindow::createStatusBar() {
  m_busyIndicator = new QProgressBar(this);
  m_busyIndicator->setRange(0, 0);  // indeterminate: parsing has no useful percentage
  m_busyIndicator->setMaximumWidth(120);
  m_busyIndicator->setMaximumHeight(statusBar()->fontMetrics().height());
  m_busyIndicator->hide();
  m_architectureLabel = makeStatusLabel(QStringLiteral("architectureLabel"), tr("Architecture"), this);
  m_parametersLabel = makeStatusLabel(QStringLiteral("parametersLabel"), QString(), this);
  m_fileTypeLabel = makeStatusLabel(QStringLiteral("fileTypeLabel"), tr("File type"), this);
  m_fileSizeLabel = makeStatusLabel(QStringLiteral("fileSizeLabel"), QString(), this);
  m_deviceLabel = makeStatusLabel(QStringLiteral("deviceLabel"), tr("Where the model runs"), this);
  statusBar()->addPermanentWidget(m_busyIndicator);
  for (QLabel* label : {m_architectureLabel, m_parametersLabel, m_fileTypeLabel, m_fileSizeLabel, m_deviceLabel}) {
    statusBar()->addPermanentWidget(label);
  }
}

bool MainWindow::startFirstRunProbe(const iwb::ProbeOptions& options) {
  constexpr auto kDeclinedKey = "roofline/firstRunProbeDeclined";
  if (m_ceilings->probe() || m_ceilings->isMeasuring() || m_ceilings->deviceId() != QLatin1String("cpu") ||
      QSettings().value(QLatin1String(kDeclinedKey), false).toBool()) {
    return false;
  }
  if (!m_probeIndicator) {
    m_probeIndicator = new QWidget(this);
    m_probeIndicator->setObjectName(QStringLiteral("firstRunProbeIndicator"));
    auto* layout = new QHBoxLayout(m_probeIndicator);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* busy = new QProgressBar;
    busy->setRange(0, 0);
    busy->setMaximumWidth(80);
    busy->setMaximumHeight(statusBar()->fontMetrics().height());
    auto* label = new QLabel(tr("First start: measuring this machine for the roofline (a few seconds)…"));
    auto* cancel = new QToolButton;
    cancel->setObjectName(QStringLiteral("cancelProbeButton"));
    cancel->setText(tr("Cancel"));
    cancel->setAutoRaise(true);
    layout->addWidget(busy);
    layout->addWidget(label);
    layout->addWidget(cancel);
    // Permanent: a load's progress messages would hide an ordinary status-bar widget.
    statusBar()->insertPermanentWidget(0, m_probeIndicator);
    connect(cancel, &QToolButton::clicked, this, [this, kDeclinedKey] {
      QSettings().setValue(QLatin1String(kDeclinedKey), true);  // asked not to: not at every start
      m_ceilings->cancelMeasure();
      statusBar()->showMessage(tr("Not measured: the Roofline tab's Measure now does it later."), kStatusTimeoutMs);
    });
    connect(m_ceilings, &MachineCeilings::measuringChanged, m_probeIndicator,
            [this](bool isMeasuring) { m_probeIndicator->setVisible(isMeasuring); });
  }
  m_probeIndicator->show();
  m_ceilings->measure(options);
  return true;
}

void MainWindow::connectDeviceStatus() {
  // The device label follows the engine's model; a failed load on a GPU is offered again on the CPU.
  connect(m_engine, &EngineController::modelLoaded, this, [this](const LoadedModel& model) {
    m_deviceLabel->setText(deviceShortName(model.deviceId));
    QString tip = model.deviceName.isEmpty()
                      ? tr("The model runs on %1").arg(deviceShortName(model.deviceId))
                      : tr("The model runs on %1 (%2)").arg(deviceShortName(model.deviceId), model.deviceName);
    // "Automatic" chose the CPU: say why, so a missing GPU is not a mystery.
    if (!model.deviceFallbackReason.isEmpty()) tip += tr("\nAutomatic device: %1").arg(model.deviceFallbackReason);
    m_deviceLabel->setToolTip(tip);
    m_deviceLabel->show();
    m_ceilings->setDeviceId(model.deviceId.isEmpty() ? QStringLiteral("cpu") : model.deviceId);
  });
  connect(m_engine, &EngineController::modelUnloaded, m_deviceLabel, &QLabel::hide);
  connect(m_engine, &EngineController::modelLoadFailed, m_deviceLabel, &QLabel::hide);
  connect(m_engine, &EngineController::deviceLoadFailed, this,
          [this](const QString& path, const QString& deviceId, const QString& message) {
            m_cpuRetryPath = path;
            m_messageBar->showMessage(MessageBar::Kind::Error,
                                      tr("Could not load %1 on %2").arg(QFileInfo(path).fileName(), deviceId), message);
            m_messageBar->setAction(tr("Load on the CPU"));
          });
  connect(m_messageBar, &MessageBar::actionTriggered, this, [this] {
    if (m_cpuRetryPath.isEmpty()) return;
    m_engine->loadOnCpu(std::exchange(m_cpuRetryPath, QString()));
    statusBar()->showMessage(tr("Loading the model on the CPU (Engine Settings keep the device chosen there)…"),
                             kStatusTimeoutMs);
  });
}

void MainWindow::startLoaderThread() {
  m_loaderThread = new QThread(this);
  m_loaderThread->setObjectName(QStringLiteral("ModelLoaderThread"));
  auto* loader = new ModelLoader;  // no parent: it moves to the loader thread
  loader->moveToThread(m_loaderThread);
  connect(m_loaderThread, &QThread::finished, loader, &QObject::deleteLater);
  connect(this, &MainWindow::loadRequested, loader, &ModelLoader::load);
  connect(loader, &ModelLoader::loaded, this, &MainWindow::handleModelLoaded);
  connect(loader, &ModelLoader::loadFailed, this, &MainWindow::handleModelLoadFailed);
  m_loaderThread->start();
}

void MainWindow::openModel(const QString& path) {
  if (path.isEmpty()) return;
  const QString absolute = QFileInfo(path).absoluteFilePath();
  ++m_numPendingLoads;
  m_busyIndicator->show();
  statusBar()->showMessage(tr("Opening %1…").arg(QFileInfo(absolute).fileName()));
  emit loadRequested(absolute);
}

void MainWindow::showOpenDialog() {
  QSettings settings;
  QString dir = settings.value(QLatin1String(kLastDirKey)).toString();
  if (dir.isEmpty() && !m_recentFiles->files().isEmpty()) {
    dir = QFileInfo(m_recentFiles->files().constFirst()).path();
  }
  QFileDialog dialog(this, tr("Open Model"), dir, tr("GGUF models (*.gguf *.GGUF);;All files (*)"));
  dialog.setFileMode(QFileDialog::ExistingFile);
  // The places people keep models (Hugging Face cache, LM Studio, ...) one click away.
  dialog.setSidebarUrls(dialog.sidebarUrls() + ModelFoldersMenu::existingFolderUrls());
  if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) return;
  const QString path = dialog.selectedFiles().constFirst();
  settings.setValue(QLatin1String(kLastDirKey), QFileInfo(path).path());
  openModel(path);
}

bool MainWindow::openDefaultModel() {
  const QString path = QString::fromStdString(iwb::default_model_path());
  if (QFileInfo::exists(path)) {
    openModel(path);
    return true;
  }
  m_messageBar->showMessage(
      MessageBar::Kind::Information, tr("The default model is not downloaded yet."),
      tr("%1 is expected at %2. Run scripts/fetch-model.sh (needs network access to PyPI), or open any GGUF "
         "file with File → Open Model, drag and drop, or File → Models on This Computer.")
          .arg(QString::fromStdString(iwb::default_model_description()), QDir::toNativeSeparators(path)));
  return false;
}

void MainWindow::showAbout() { QMessageBox::about(this, tr("About Inference Workbench"), aboutText()); }

void MainWindow::finishLoad() {
  m_numPendingLoads = qMax(0, m_numPendingLoads - 1);
  m_busyIndicator->setVisible(m_numPendingLoads > 0);
}

void MainWindow::handleModelLoaded(const ModelDetails& details) {
  finishLoad();
  m_currentPath = details.path;
  m_messageBar->dismiss();  // an earlier failure no longer describes what is shown
  m_overview->showModel(details);
  m_memoryPanel->setModelSummary(details.summary);
  m_rooflinePanel->setOpenedModel(details.path, QString::fromStdString(details.summary.name));
  m_pages->setCurrentWidget(m_overview);
  updateStatusLabels(details.summary);
  m_recentFiles->add(details.path);
  // The engine loads the model for chat on its own thread (a file it cannot run, such as a
  // vocabulary-only GGUF, gets its explanation in the Chat tab; the details stay shown here).
  m_kvBytesPerPosition = iwb::estimate_memory(details.summary, 1).kv_cache_bytes;
  if (m_engine->isLoading() || m_engine->model().path != details.path) {
    EngineLoadOptions options = loadEngineSettings();
    if (!m_sessionDevice.isEmpty()) options.device = m_sessionDevice;
    m_engine->loadModel(details.path, options);
  }

  const QString fileName = QFileInfo(details.path).fileName();
  setWindowTitle(tr("%1 — %2").arg(fileName, QApplication::applicationDisplayName()));
  statusBar()->showMessage(tr("Opened %1").arg(fileName), kStatusTimeoutMs);
  emit modelOpened(details.path);
}

ConnectDialog* MainWindow::showConnectDialog() {
  auto* dialog = new ConnectDialog(m_remoteEndpoints, this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->open();
  return dialog;
}

void MainWindow::showEngineSettings() {
  EngineSettingsDialog dialog(loadEngineSettings(), m_kvBytesPerPosition, this);
  if (dialog.exec() == QDialog::Accepted) applyEngineSettings(dialog.options());
}

void MainWindow::applyEngineSettings(const EngineLoadOptions& options) {
  saveEngineSettings(options);
  m_memoryPanel->setEngineOptions(options);
  // A reply in flight is not cut short; the settings then apply at the next load.
  if (!m_engine->hasModel() || m_engine->isLoading() || m_engine->isGenerating()) {
    statusBar()->showMessage(tr("Engine settings saved; they apply when a model is next loaded."), kStatusTimeoutMs);
    return;
  }
  m_engine->loadModel(m_engine->model().path, options);
  statusBar()->showMessage(tr("Reloading the model with the new engine settings…"), kStatusTimeoutMs);
}

void MainWindow::handleModelLoadFailed(const QString& path, const QString& message) {
  finishLoad();
  const QString fileName = QFileInfo(path).fileName();
  // What was shown before stays shown: a failed open replaces nothing.
  m_messageBar->showMessage(MessageBar::Kind::Error, tr("Could not open %1").arg(fileName), message);
  statusBar()->showMessage(tr("Could not open %1").arg(fileName), kStatusTimeoutMs);
  if (!QFileInfo::exists(path)) m_recentFiles->remove(path);
  emit modelOpenFailed(path, message);
}

void MainWindow::updateStatusLabels(const iwb::ModelSummary& s) {
  const QLocale locale;
  m_architectureLabel->setText(QString::fromStdString(s.architecture));
  m_parametersLabel->setText(s.is_vocab_only ? tr("vocabulary only")
                                             : tr("%1 params").arg(QString::fromStdString(format_count(s.num_params))));
  m_parametersLabel->setToolTip(tr("%1 parameters").arg(locale.toString(qulonglong{s.num_params})));
  m_fileTypeLabel->setText(QString::fromStdString(s.file_type));
  m_fileSizeLabel->setText(QString::fromStdString(format_bytes(s.file_size)));
  m_fileSizeLabel->setToolTip(tr("File size: %1 bytes").arg(locale.toString(qulonglong{s.file_size})));
  for (QLabel* label : {m_architectureLabel, m_parametersLabel, m_fileTypeLabel, m_fileSizeLabel}) {
    label->setVisible(!label->text().isEmpty());
  }
}

QString MainWindow::ggufPathFromMimeData(const QMimeData* mimeData) {
  if (!mimeData || !mimeData->hasUrls()) return {};
  for (const QUrl& url : mimeData->urls()) {
    if (url.isLocalFile() && hasGgufSuffix(url.toLocalFile())) return url.toLocalFile();
  }
  return {};
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  // Accept any local file so that dropping the wrong one gets an explanation, not silence.
  const QMimeData* mime = event->mimeData();
  if (mime && mime->hasUrls()) {
    for (const QUrl& url : mime->urls()) {
      if (url.isLocalFile()) {
        event->acceptProposedAction();
        return;
      }
    }
  }
  event->ignore();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QString path = ggufPathFromMimeData(event->mimeData());
  if (path.isEmpty()) {
    QString name;
    if (event->mimeData() && event->mimeData()->hasUrls() && !event->mimeData()->urls().isEmpty()) {
      name = QFileInfo(event->mimeData()->urls().constFirst().toLocalFile()).fileName();
    }
    statusBar()->showMessage(name.isEmpty() ? tr("Only GGUF model files (.gguf) can be opened.")
                                            : tr("%1 is not a GGUF model; only .gguf files can be opened.").arg(name),
                             kStatusTimeoutMs);
    event->ignore();
    return;
  }
  event->acceptProposedAction();
  openModel(path);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings().setValue(QLatin1String(kGeometryKey), saveGeometry());
  QMainWindow::closeEvent(event);
}

}  // namespace iwb::ui
