// ConnectDialog: the form, the probe's answer (or problem) in place, and adding the endpoint.
// The dialog never waits on the network itself: Connect posts a probe to EndpointProbe's
// thread and the answer comes back as a queued value; a stale answer (the address or key was
// edited meanwhile) is dropped.
#include "remote/connect_dialog.h"

#include "remote/api_key_store.h"
#include "remote/remote_endpoints.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QLocale>
#include <QPushButton>
#include <QVBoxLayout>

namespace iwb::ui {
namespace {

QString kindText(iwb::remote::ServerKind kind) {
  if (kind == iwb::remote::ServerKind::OpenAiNoMetrics) return ConnectDialog::tr("OpenAI-compatible, no metrics");
  return QString::fromUtf8(iwb::remote::server_kind_name(kind));
}

}  // namespace

ConnectDialog::ConnectDialog(RemoteEndpoints* endpoints, QWidget* parent)
    : QDialog(parent),
      m_endpoints(endpoints),
      m_known(new QComboBox),
      m_forget(new QPushButton(tr("Forget"))),
      m_knownRow(new QWidget),
      m_url(new QLineEdit),
      m_apiKey(new QLineEdit),
      m_connect(new QPushButton(tr("Connect"))),
      m_status(new QLabel),
      m_detail(new QLabel),
      m_kind(new QLabel),
      m_metrics(new QLabel),
      m_models(new QListWidget),
      m_keyNote(new QLabel),
      m_buttons(new QDialogButtonBox(QDialogButtonBox::Cancel)),
      m_add(new QPushButton(tr("Add Server"))) {
  setWindowTitle(tr("Connect to Server"));
  m_url->setObjectName(QStringLiteral("serverUrl"));
  m_url->setPlaceholderText(QStringLiteral("http://gpu-box:8000"));
  m_url->setClearButtonEnabled(true);
  m_apiKey->setObjectName(QStringLiteral("apiKey"));
  m_apiKey->setEchoMode(QLineEdit::Password);
  m_apiKey->setPlaceholderText(tr("none"));
  m_connect->setObjectName(QStringLiteral("connectButton"));
  m_connect->setAutoDefault(true);
  for (QLabel* label : {m_status, m_detail, m_kind, m_metrics, m_keyNote}) {
    label->setTextFormat(Qt::PlainText);
    label->setWordWrap(true);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  }
  m_status->setObjectName(QStringLiteral("probeStatus"));
  m_detail->setObjectName(QStringLiteral("probeDetail"));
  m_kind->setObjectName(QStringLiteral("serverKind"));
  m_keyNote->setObjectName(QStringLiteral("keyNote"));
  m_models->setObjectName(QStringLiteral("modelList"));
  m_models->setToolTip(tr("The model selected here is the one the chat offers first"));
  m_models->setMinimumHeight(110);
  m_add->setObjectName(QStringLiteral("addButton"));
  m_add->setEnabled(false);
  m_buttons->addButton(m_add, QDialogButtonBox::AcceptRole);

  m_known->setObjectName(QStringLiteral("knownServers"));
  m_forget->setObjectName(QStringLiteral("forgetButton"));
  m_forget->setAutoDefault(false);
  m_forget->setToolTip(tr("Remove this server from the list (and its API key from the keyring)"));
  auto* knownLayout = new QHBoxLayout(m_knownRow);
  knownLayout->setContentsMargins(0, 0, 0, 0);
  knownLayout->addWidget(new QLabel(tr("Connected servers:")));
  knownLayout->addWidget(m_known, 1);
  knownLayout->addWidget(m_forget);
  auto* urlRow = new QHBoxLayout;
  urlRow->addWidget(m_url, 1);
  urlRow->addWidget(m_connect);
  auto* form = new QFormLayout;
  form->addRow(tr("Server address:"), urlRow);
  form->addRow(tr("API key:"), m_apiKey);
  auto* results = new QFormLayout;
  results->addRow(tr("Server:"), m_kind);
  results->addRow(tr("Metrics:"), m_metrics);
  results->addRow(tr("Models:"), m_models);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_knownRow);
  layout->addLayout(form);
  layout->addWidget(m_status);
  layout->addWidget(m_detail);
  layout->addLayout(results);
  layout->addWidget(m_keyNote);
  layout->addWidget(m_buttons);
  resize(560, 440);

  m_detail->hide();
  m_keyNote->hide();
  setStatus(tr("Type the address of an OpenAI-compatible server (vLLM, SGLang, llama-server, LM Studio, "
               "iwb serve) and press Connect."),
            Tone::Plain);

  rebuildKnownServers();
  connect(m_known, &QComboBox::activated, this, &ConnectDialog::knownServerChosen);
  connect(m_forget, &QPushButton::clicked, this, &ConnectDialog::forgetKnownServer);
  connect(m_endpoints, &RemoteEndpoints::endpointsChanged, this, &ConnectDialog::rebuildKnownServers);
  connect(m_connect, &QPushButton::clicked, this, &ConnectDialog::startProbe);
  connect(m_url, &QLineEdit::returnPressed, this, &ConnectDialog::startProbe);
  connect(m_apiKey, &QLineEdit::returnPressed, this, &ConnectDialog::startProbe);
  connect(m_url, &QLineEdit::textEdited, this, &ConnectDialog::inputsEdited);
  connect(m_apiKey, &QLineEdit::textEdited, this, &ConnectDialog::inputsEdited);
  connect(m_buttons, &QDialogButtonBox::accepted, this, &ConnectDialog::addEndpoint);
  connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(m_endpoints->endpointProbe(), &EndpointProbe::probed, this, &ConnectDialog::showResult);
  connect(m_endpoints->apiKeys(), &ApiKeyStore::stored, this,
          [this](const QString& baseUrl, bool, const QString& note) {
            if (!m_result || baseUrl != m_result->baseUrl) return;
            m_keyNote->setText(note);
            m_keyNote->show();
          });
}

void ConnectDialog::setStatus(const QString& text, Tone tone) {
  QPalette palette = m_status->palette();
  palette.setColor(QPalette::WindowText, tone == Tone::Error     ? QColor(0xb0, 0x20, 0x20)
                                         : tone == Tone::Success ? QColor(0x1e, 0x7a, 0x34)
                                                                 : this->palette().color(QPalette::WindowText));
  m_status->setPalette(palette);
  QFont font = this->font();
  font.setBold(tone != Tone::Plain);
  m_status->setFont(font);
  m_status->setText(text);
}

void ConnectDialog::rebuildKnownServers() {
  const QString current = m_known->currentData().toString();
  const QSignalBlocker blocker(m_known);
  m_known->clear();
  for (const RemoteEndpointInfo& info : m_endpoints->endpoints()) {
    m_known->addItem(QStringLiteral("%1 — %2").arg(info.displayName, info.baseUrl), info.baseUrl);
  }
  const int index = m_known->findData(current);
  m_known->setCurrentIndex(index >= 0 ? index : 0);
  m_knownRow->setVisible(m_known->count() > 0);
}

void ConnectDialog::knownServerChosen(int index) {
  const RemoteEndpointInfo* info = m_endpoints->find(m_known->itemData(index).toString());
  if (!info) return;
  m_url->setText(info->baseUrl);
  m_apiKey->setText(QString::fromStdString(info->endpoint.api_key));
  inputsEdited();
}

void ConnectDialog::forgetKnownServer() {
  const QString baseUrl = m_known->currentData().toString();
  if (baseUrl.isEmpty()) return;
  m_endpoints->remove(baseUrl);  // endpointsChanged rebuilds the list
  setStatus(tr("%1 was forgotten.").arg(baseUrl), Tone::Plain);
  m_detail->hide();
}

void ConnectDialog::inputsEdited() {
  // What was shown belongs to another address or key: Add must probe again first.
  m_pendingTag = 0;
  m_result.reset();
  m_add->setEnabled(false);
  m_connect->setEnabled(true);
  m_connect->setText(tr("Connect"));
}

void ConnectDialog::startProbe() {
  QString why;
  const QString baseUrl = RemoteEndpoints::normalizedBaseUrl(m_url->text(), &why);
  m_result.reset();
  m_add->setEnabled(false);
  m_models->clear();
  m_kind->clear();
  m_metrics->clear();
  m_keyNote->hide();
  if (baseUrl.isEmpty()) {
    m_pendingTag = 0;
    setStatus(tr("That address cannot be used"), Tone::Error);
    m_detail->setText(why);
    m_detail->show();
    return;
  }
  m_pendingUrl = baseUrl;
  m_pendingKey = m_apiKey->text().trimmed();
  m_pendingTag = m_endpoints->endpointProbe()->probe(baseUrl, m_pendingKey, m_probeTimeoutSeconds);
  m_connect->setEnabled(false);
  m_connect->setText(tr("Connecting…"));
  setStatus(tr("Connecting to %1…").arg(baseUrl), Tone::Plain);
  m_detail->hide();
}

void ConnectDialog::showResult(quint64 tag, const ProbeResult& result) {
  if (tag != m_pendingTag) return;  // an older probe, or the inputs changed since
  m_pendingTag = 0;
  m_connect->setEnabled(true);
  m_connect->setText(tr("Connect"));
  if (!result.isOk()) {
    setStatus(result.title, Tone::Error);
    m_detail->setText(result.detail);
    m_detail->show();
    emit probeFinished(result);
    return;
  }
  m_result = result;
  m_probedKey = m_pendingKey;
  const QLocale locale;
  setStatus(result.seconds < 1
                ? tr("Connected to %1 in %2 ms").arg(result.baseUrl).arg(qRound(result.seconds * 1000))
                : tr("Connected to %1 in %2 s").arg(result.baseUrl, locale.toString(result.seconds, 'f', 1)),
            Tone::Success);
  m_detail->hide();
  m_kind->setText(kindText(result.kind));
  m_metrics->setText(result.metricsNote);
  m_models->addItems(result.models);
  if (result.models.isEmpty()) {
    m_detail->setText(tr("The server lists no models; the chat and load tests need one."));
    m_detail->show();
  } else {
    // The model chosen earlier for this server stays the default.
    const RemoteEndpointInfo* known = m_endpoints->find(result.baseUrl);
    const qsizetype known_row = known ? result.models.indexOf(known->defaultModel) : -1;
    m_models->setCurrentRow(known_row >= 0 ? int(known_row) : 0);
  }
  m_add->setEnabled(!result.models.isEmpty());
  if (!m_probedKey.isEmpty()) {
    // The key worked: keep it now, so the dialog can say where before the user adds the server.
    m_hasStoredKey = true;
    m_endpoints->apiKeys()->store(result.baseUrl, m_probedKey);
  }
  emit probeFinished(result);
}

void ConnectDialog::addEndpoint() {
  if (!m_result || !m_add->isEnabled()) return;
  RemoteEndpointInfo info;
  info.baseUrl = m_result->baseUrl;
  info.models = m_result->models;
  info.defaultModel = m_models->currentItem() ? m_models->currentItem()->text() : m_result->models.value(0);
  info.kind = m_result->kind;
  info.displayName = m_result->kind == iwb::remote::ServerKind::OpenAiNoMetrics
                         ? RemoteEndpoints::hostLabel(info.baseUrl)
                         : tr("%1 at %2").arg(kindText(info.kind), RemoteEndpoints::hostLabel(info.baseUrl));
  info.hasApiKey = !m_probedKey.isEmpty();
  info.endpoint.api_key = m_probedKey.toStdString();
  if (!info.hasApiKey && m_endpoints->find(info.baseUrl)) m_endpoints->apiKeys()->remove(info.baseUrl);
  m_endpoints->addOrUpdate(info);
  m_isAdded = true;
  accept();
}

void ConnectDialog::done(int result) {
  // A key kept for a server the user then did not add goes again; a server added before gets
  // its own key back.
  if (!m_isAdded && m_hasStoredKey && m_result) {
    const RemoteEndpointInfo* known = m_endpoints->find(m_result->baseUrl);
    if (known && !known->endpoint.api_key.empty()) {
      m_endpoints->apiKeys()->store(known->baseUrl, QString::fromStdString(known->endpoint.api_key));
    } else if (!known || !known->hasApiKey) {
      m_endpoints->apiKeys()->remove(m_result->baseUrl);
    }
  }
  QDialog::done(result);
}

}  // namespace iwb::ui
