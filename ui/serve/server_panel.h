// The Server tab: serve the open model over the OpenAI-compatible API (address, port, API key,
// on/off), with the server's live numbers (requests running and waiting, KV-cache use, tokens)
// and a log of every answered request. Served requests run in the same engine as the chat, so
// the KV Cache, Roofline, Metrics and Speculative tabs show them too.
#pragma once

#include <QWidget>

class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableView;
class QTimer;

namespace iwb::ui {

class EngineController;
class LocalServer;
class RequestLogModel;

class ServerPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ServerPanel(EngineController* engine, QWidget* parent = nullptr);
  ~ServerPanel() override;

  LocalServer* server() const { return m_server; }
  RequestLogModel* log() const { return m_log; }
  // Starts or stops serving as the Serve button would; false (with the reason shown) when it
  // could not start.
  bool setServing(bool isServing);
  void setPort(int port);
  void setApiKey(const QString& key);
  QString statusText() const;

 private:
  void refresh();

  EngineController* m_engine;
  LocalServer* m_server;
  RequestLogModel* m_log;
  QLineEdit* m_host;
  QSpinBox* m_port;
  QLineEdit* m_apiKey;
  QLineEdit* m_alias;
  QPushButton* m_serveButton;
  QLabel* m_status;
  QLabel* m_warning;
  QLabel* m_numbers;
  QTableView* m_table;
  QTimer* m_timer;
};

}  // namespace iwb::ui
