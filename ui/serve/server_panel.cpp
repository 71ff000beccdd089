// ServerPanel: the settings form, the Serve toggle, a status line (with a warning for an
// exposed address without an API key), numbers refreshed twice a second, and the request log.
#include "serve/server_panel.h"

#include "worker/engine_controller.h"
#include "serve/local_server.h"
#include "serve/request_log_model.h"

#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

namespace iwb::ui {

ServerPanel::ServerPanel(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      m_engine(engine),
      m_server(new LocalServer(engine, this)),
      m_log(new RequestLogModel(this)),
      m_host(new QLineEdit(QStringLiteral("127.0.0.1"))),
      m_port(new QSpinBox),
      m_apiKey(new QLineEdit),
      m_alias(new QLineEdit),
      m_serveButton(new QPushButton(tr("Serve"))),
      m_status(new QLabel),
      m_warning(new QLabel),
      m_numbers(new QLabel),
      m_table(new QTableView),
      m_timer(new QTimer(this)) {
  m_port->setRange(0, 65535);
  m_port->setValue(8080);
  m_port->setToolTip(tr("0 picks a free port"));
  m_apiKey->setEchoMode(QLineEdit::PasswordEchoOnEdit);
  m_apiKey->setPlaceholderText(tr("none: anyone who reaches the address may use it"));
  m_alias->setPlaceholderText(tr("the model's file name"));
  m_serveButton->setCheckable(true);
  m_serveButton->setToolTip(tr("Serve the open model over an OpenAI-compatible API (/v1/chat/completions, /v1/completions, "
                               "/v1/models, /health, /metrics)"));
  m_warning->setStyleSheet(QStringLiteral("color: #b35900;"));
  m_warning->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* form = new QFormLayout;
  form->addRow(tr("Address"), m_host);
  form->addRow(tr("Port"), m_port);
  form->addRow(tr("API key"), m_apiKey);
  form->addRow(tr("Model name"), m_alias);
  auto* controls = new QHBoxLayout;
  controls->addLayout(form, 1);
  auto* buttons = new QVBoxLayout;
  buttons->addWidget(m_serveButton);
  auto* clear = new QPushButton(tr("Clear log"));
  buttons->addWidget(clear);
  buttons->addStretch();
  controls->addLayout(buttons);

  m_table->setModel(m_log);
  m_table->setWordWrap(false);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->horizontalHeader()->setSectionResizeMode(RequestLogModel::RequestColumn, QHeaderView::ResizeToContents);
  m_table->verticalHeader()->hide();
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addWidget(m_status);
  layout->addWidget(m_warning);
  layout->addWidget(m_numbers);
  layout->addWidget(m_table, 1);

  connect(m_serveButton, &QPushButton::toggled, this, [this](bool isOn) { setServing(isOn); });
  connect(clear, &QPushButton::clicked, m_log, &RequestLogModel::clear);
  connect(m_server, &LocalServer::requestLogged, this, [this](const RequestLogRow& row) {
    m_log->append(row);
    m_table->scrollToBottom();
  });
  connect(m_server, &LocalServer::runningChanged, this, &ServerPanel::refresh);
  for (QLineEdit* edit : {m_host, m_apiKey}) connect(edit, &QLineEdit::textChanged, this, &ServerPanel::refresh);
  connect(m_engine, &EngineController::modelLoaded, this, &ServerPanel::refresh);
  connect(m_engine, &EngineController::modelUnloaded, this, &ServerPanel::refresh);
  connect(m_timer, &QTimer::timeout, this, &ServerPanel::refresh);
  m_timer->start(500);
  refresh();
}

ServerPanel::~ServerPanel() { m_server->stop(); }

bool ServerPanel::setServing(bool isServing) {
  if (!isServing) {
    m_server->stop();
  } else if (!m_server->isRunning()) {
    ServerSettings settings;
    settings.host = m_host->text().trimmed();
    settings.port = m_port->value();
    settings.apiKey = m_apiKey->text();
    settings.modelAlias = m_alias->text().trimmed();
    const QString error = m_server->start(settings);
    if (!error.isEmpty()) {
      m_status->setText(tr("Could not start the server: %1").arg(error));
      const QSignalBlocker blocker(m_serveButton);
      m_serveButton->setChecked(false);
      return false;
    }
  }
  {
    const QSignalBlocker blocker(m_serveButton);
    m_serveButton->setChecked(m_server->isRunning());
  }
  refresh();
  return true;
}

void ServerPanel::setPort(int port) { m_port->setValue(port); }

void ServerPanel::setApiKey(const QString& key) { m_apiKey->setText(key); }

QString ServerPanel::statusText() const { return m_status->text(); }

void ServerPanel::refresh() {
  const bool isRunning = m_server->isRunning();
  for (QWidget* w : std::initializer_list<QWidget*>{m_host, m_port, m_apiKey, m_alias}) w->setEnabled(!isRunning);
  m_serveButton->setText(isRunning ? tr("Stop serving") : tr("Serve"));
  if (isRunning) {
    const QString model = m_engine->hasModel() ? m_engine->model().name : QString();
    m_status->setText(model.isEmpty()
                          ? tr("Serving at %1 — no model is open: requests get 503 until one is loaded.").arg(m_server->baseUrl())
                          : tr("Serving %1 at %2").arg(model, m_server->baseUrl()));
  } else if (!m_status->text().startsWith(tr("Could not start"))) {
    m_status->setText(tr("Not serving."));
  }
  const bool isExposed = LocalServer::isExposed(m_host->text().trimmed());
  m_warning->setText(isExposed && m_apiKey->text().isEmpty()
                         ? tr("%1 is reachable from other machines, and there is no API key: anyone who reaches it can use "
                              "the model.").arg(m_host->text().trimmed())
                         : QString());
  m_warning->setVisible(!m_warning->text().isEmpty());
  const iwb::serve::ServeMetricValues v = m_server->metricValues();
  uint64_t finished = 0;
  for (const auto& [reason, count] : v.requests_finished) finished += count;
  m_numbers->setText(isRunning ? tr("Running %1 · waiting %2 · KV cache %3% used · prompt tokens %4 · generated %5 · "
                                    "requests finished %6")
                                     .arg(v.num_requests_running)
                                     .arg(v.num_requests_waiting)
                                     .arg(v.kv_cache_usage * 100.0, 0, 'f', 1)
                                     .arg(v.prompt_tokens)
                                     .arg(v.generation_tokens)
                                     .arg(finished)
                               : QString());
}

}  // namespace iwb::ui
