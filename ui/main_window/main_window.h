// The application's main window: File/View/Help menus with recent models, a Chat tab (the engine
// on its worker thread, history in SQLite), a Model tab (the welcome page or the opened model's
// overview), Roofline, Metrics and Memory tabs (what the engine measured), a KV Cache tab (the
// paged cache's block map and batches of requests), a non-modal message
// bar for errors, and status-bar facts about the model. Files
// are parsed on a loader thread and then loaded into the engine; results arrive as values
// through queued signals.
#pragma once

#include "iwb/engine/profile/machine_probe.h"
#include "model_info/model_details.h"
#include "worker/generation_values.h"

#include <QMainWindow>
#include <QString>

#include <memory>

class QLabel;
class QMimeData;
class QProgressBar;
class QStackedWidget;
class QTabWidget;
class QThread;

namespace iwb::ui {

class ChatPanel;
class ConnectDialog;
class ConversationStore;
class EngineController;
class KvCachePanel;
class QuantLabPanel;
class MachineCeilings;
class MemoryPanel;
class MessageBar;
class MetricsPanel;
class ModelOverviewWidget;
class RecentFiles;
class RemoteEndpoints;
class RooflinePanel;
class ExpertLoadPanel;
class ServerPanel;
class ServingPanel;
class SpecPanel;
class WelcomePage;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // `conversationsPath`: the chat history database; empty means ConversationStore::defaultPath().
  // `resultsPath`: the results store (machine probes); empty means the one `iwb` uses, or a
  // test folder under QStandardPaths' test mode.
  explicit MainWindow(QWidget* parent = nullptr, const QString& conversationsPath = {},
                      const QString& resultsPath = {});
  ~MainWindow() override;

  // Absolute path of the model shown now; empty before the first successful open.
  QString currentModelPath() const { return m_currentPath; }
  bool isLoading() const { return m_numPendingLoads > 0; }

  ModelOverviewWidget* overview() const { return m_overview; }
  WelcomePage* welcomePage() const { return m_welcomePage; }
  MessageBar* messageBar() const { return m_messageBar; }
  RecentFiles* recentFiles() const { return m_recentFiles; }
  ChatPanel* chatPanel() const { return m_chatPanel; }
  EngineController* engine() const { return m_engine; }
  QTabWidget* tabs() const { return m_tabs; }
  RooflinePanel* rooflinePanel() const { return m_rooflinePanel; }
  ExpertLoadPanel* expertLoadPanel() const { return m_expertLoadPanel; }
  MetricsPanel* metricsPanel() const { return m_metricsPanel; }
  MemoryPanel* memoryPanel() const { return m_memoryPanel; }
  KvCachePanel* kvCachePanel() const { return m_kvCachePanel; }
  QuantLabPanel* quantLabPanel() const { return m_quantLabPanel; }
  SpecPanel* specPanel() const { return m_specPanel; }
  ServerPanel* serverPanel() const { return m_serverPanel; }
  ServingPanel* servingPanel() const { return m_servingPanel; }
  MachineCeilings* ceilings() const { return m_ceilings; }
  // The servers connected with File › Connect to Server… (shared by the chat and Serving tabs).
  RemoteEndpoints* remoteEndpoints() const { return m_remoteEndpoints; }
  // On a machine with no stored probe of its CPU: measures its ceilings in the background so
  // the roofline has roofs, with a line and a Cancel button in the status bar. A cancelled
  // first-run probe is not offered again (QSettings roofline/firstRunProbeDeclined). True when
  // it started. The application calls it at start and opens the model once it ends; tests
  // pass small options.
  bool startFirstRunProbe(const iwb::ProbeOptions& options = {});
  QWidget* firstRunProbeIndicator() const { return m_probeIndicator; }
  // Shows the tab named (case-insensitive, without '&'; spaces, '-' and '_' alike) "chat",
  // "model", "roofline", "kv-cache", ...; false when there is no such tab.
  bool showTab(const QString& name);
  // The tabs' names as the command line writes them: "chat", "model", ..., "kv-cache".
  QStringList tabNames() const;
  // Models opened from now on run on `device` ("auto", "cpu", "cuda:N") whatever the saved
  // engine settings say, which stay as they are (the application's --device).
  void setSessionDevice(const QString& device) { m_sessionDevice = device; }
  // The Model tab's page (the welcome page or the overview).
  QWidget* modelPage() const;

  // The local .gguf file among dragged/dropped data, or empty (exposed for tests).
  static QString ggufPathFromMimeData(const QMimeData* mimeData);

 public slots:
  // Starts opening `path` in the background; modelOpened or modelOpenFailed follows.
  void openModel(const QString& path);
  void showOpenDialog();
  // Edits the engine's load settings (context, threads, KV cache memory and block size).
  void showEngineSettings();
  // Saves `options` and, when a model is loaded and idle, reloads it with them.
  void applyEngineSettings(const iwb::ui::EngineLoadOptions& options);
  // Opens the default chat model if scripts/fetch-model.sh has fetched it; otherwise says in
  // the message bar what is missing and how to get it. Returns whether it is opening.
  bool openDefaultModel();
  void showAbout();
  // File › Connect to Server…: opens the dialog (window-modal, deleted on close) and returns it.
  ConnectDialog* showConnectDialog();

 signals:
  void modelOpened(const QString& path);
  void modelOpenFailed(const QString& path, const QString& message);
  // Internal: carries a request to the loader thread.
  void loadRequested(const QString& path);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;

 private:
  void createMenus();
  void createStatusBar();
  // The status bar's device label and the "Load on the CPU" offer after a failed GPU load.
  void connectDeviceStatus();
  void startLoaderThread();
  void handleModelLoaded(const iwb::ui::ModelDetails& details);
  void handleModelLoadFailed(const QString& path, const QString& message);
  void finishLoad();
  void updateStatusLabels(const iwb::ModelSummary& summary);
  void openConversationStore(const QString& path);

  QString m_currentPath;
  QString m_sessionDevice;           // setSessionDevice; empty: the saved engine settings' device
  quint64 m_kvBytesPerPosition = 0;  // of the opened model (f16 K and V, all layers)
  int m_numPendingLoads = 0;
  // A tab was chosen (the tab bar, View menu, --tab) since the engine last loaded a model: the
  // next load's end leaves the window on it rather than moving from the model page to the chat.
  bool m_isTabChosen = false;
  QThread* m_loaderThread = nullptr;
  RecentFiles* m_recentFiles;

  EngineController* m_engine;
  std::unique_ptr<ConversationStore> m_store;
  QString m_storeError;  // why the history could not be opened, shown in the chat
  MachineCeilings* m_ceilings;
  RemoteEndpoints* m_remoteEndpoints = nullptr;

  MessageBar* m_messageBar;
  QTabWidget* m_tabs;
  ChatPanel* m_chatPanel = nullptr;
  RooflinePanel* m_rooflinePanel = nullptr;
  ExpertLoadPanel* m_expertLoadPanel = nullptr;
  MetricsPanel* m_metricsPanel = nullptr;
  MemoryPanel* m_memoryPanel = nullptr;
  KvCachePanel* m_kvCachePanel = nullptr;
  QuantLabPanel* m_quantLabPanel = nullptr;
  SpecPanel* m_specPanel = nullptr;
  ServerPanel* m_serverPanel = nullptr;
  ServingPanel* m_servingPanel = nullptr;
  QStackedWidget* m_pages;
  WelcomePage* m_welcomePage;
  ModelOverviewWidget* m_overview;

  QProgressBar* m_busyIndicator;
  QWidget* m_probeIndicator = nullptr;  // "Measuring this machine…" and Cancel, in the status bar
  QLabel* m_architectureLabel;
  QLabel* m_parametersLabel;
  QLabel* m_fileTypeLabel;
  QLabel* m_fileSizeLabel;
  QLabel* m_deviceLabel;   // where the engine's model runs: "CPU", "cuda:0"
  QString m_cpuRetryPath;  // the model whose CUDA load failed, offered on the CPU
};

}  // namespace iwb::ui
