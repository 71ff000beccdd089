// ServingPanel's setup form: the settings of `iwb bench-serve` as widgets, to and from the
// engine's BenchServeConfig, and the endpoint and model choices from the connected endpoints.
#include "serving/serving_panel.h"

#include "remote/remote_endpoints.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

#include <algorithm>
#include <limits>

namespace iwb::ui {
namespace {

QSpinBox* spin(const QString& name, int low, int high, int value, const QString& special = {}) {
  auto* box = new QSpinBox;
  box->setObjectName(name);
  box->setRange(low, high);
  box->setValue(value);
  if (!special.isEmpty()) box->setSpecialValueText(special);
  return box;
}

QDoubleSpinBox* doubleSpin(const QString& name, double high, double value, const QString& special,
                           const QString& suffix) {
  auto* box = new QDoubleSpinBox;
  box->setObjectName(name);
  box->setRange(0, high);
  box->setDecimals(2);
  box->setValue(value);
  box->setSpecialValueText(special);
  box->setSuffix(suffix);
  return box;
}

}  // namespace

QWidget* ServingPanel::makeSetupForm() {
  m_endpointBox = new QComboBox;
  m_endpointBox->setObjectName(QStringLiteral("servingEndpointBox"));
  m_endpointBox->setEditable(true);
  m_endpointBox->setToolTip(
      tr("A connected endpoint (File › Connect to Server…) or a base URL such as "
         "http://127.0.0.1:8000"));
  m_modelBox = new QComboBox;
  m_modelBox->setObjectName(QStringLiteral("servingModelBox"));
  m_modelBox->setEditable(true);
  m_datasetBox = new QComboBox;
  m_datasetBox->setObjectName(QStringLiteral("servingDatasetBox"));
  m_datasetBox->setEditable(true);
  m_datasetBox->addItems({QStringLiteral("random"), QStringLiteral("chat")});
  m_datasetBox->setToolTip(tr("random, chat, or the path of a JSONL prompt file or ShareGPT JSON"));
  const int most = std::numeric_limits<int>::max();
  m_inputLenBox = spin(QStringLiteral("servingInputLenBox"), 1, most, 128);
  m_outputLenBox = spin(QStringLiteral("servingOutputLenBox"), 1, most, 64);
  m_numPromptsBox = spin(QStringLiteral("servingNumPromptsBox"), 1, most, 100);
  m_rateBox = doubleSpin(QStringLiteral("servingRateBox"), 1e6, 0, tr("inf"), tr(" req/s"));
  m_burstinessBox = doubleSpin(QStringLiteral("servingBurstinessBox"), 1e3, 1, QString(), QString());
  m_burstinessBox->setMinimum(0.01);
  m_burstinessBox->setToolTip(tr("Gamma shape of the arrivals: 1 is Poisson, lower is burstier"));
  m_concurrencyBox = spin(QStringLiteral("servingConcurrencyBox"), 0, most, 0, tr("no cap"));
  m_sweepEdit = new QLineEdit;
  m_sweepEdit->setObjectName(QStringLiteral("servingSweepEdit"));
  m_sweepEdit->setPlaceholderText(tr("e.g. 1,2,4,8 (one closed-loop run each)"));
  m_sharedPrefixBox = spin(QStringLiteral("servingSharedPrefixBox"), 0, most, 0, tr("none"));
  m_ttftSloBox = doubleSpin(QStringLiteral("servingTtftSloBox"), 1e7, 0, tr("none"), tr(" ms"));
  m_tpotSloBox = doubleSpin(QStringLiteral("servingTpotSloBox"), 1e7, 0, tr("none"), tr(" ms"));
  m_labelEdit = new QLineEdit;
  m_labelEdit->setObjectName(QStringLiteral("servingLabelEdit"));
  m_labelEdit->setPlaceholderText(tr("e.g. vLLM tp=2"));
  m_startButton = new QPushButton(tr("Start"));
  m_startButton->setObjectName(QStringLiteral("servingStartButton"));
  m_stopButton = new QPushButton(tr("Stop"));
  m_stopButton->setObjectName(QStringLiteral("servingStopButton"));
  m_statusLabel = new QLabel;
  m_statusLabel->setObjectName(QStringLiteral("servingStatusLabel"));
  m_statusLabel->setWordWrap(true);
  m_statusLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* box = new QGroupBox(tr("Load"));
  auto* form = new QFormLayout(box);
  form->addRow(tr("Endpoint"), m_endpointBox);
  form->addRow(tr("Model"), m_modelBox);
  form->addRow(tr("Dataset"), m_datasetBox);
  form->addRow(tr("Input tokens"), m_inputLenBox);
  form->addRow(tr("Output tokens"), m_outputLenBox);
  form->addRow(tr("Prompts"), m_numPromptsBox);
  form->addRow(tr("Request rate"), m_rateBox);
  form->addRow(tr("Burstiness"), m_burstinessBox);
  form->addRow(tr("Max concurrency"), m_concurrencyBox);
  form->addRow(tr("Sweep concurrency"), m_sweepEdit);
  form->addRow(tr("Shared prefix"), m_sharedPrefixBox);
  form->addRow(tr("SLO TTFT"), m_ttftSloBox);
  form->addRow(tr("SLO TPOT"), m_tpotSloBox);
  form->addRow(tr("Label"), m_labelEdit);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_startButton);
  buttons->addWidget(m_stopButton);
  form->addRow(buttons);
  form->addRow(m_statusLabel);

  connect(m_endpointBox, &QComboBox::currentTextChanged, this, [this] { refillModels(); });
  connect(m_startButton, &QPushButton::clicked, this, [this] { start(); });
  connect(m_stopButton, &QPushButton::clicked, this, &ServingPanel::stop);
  return box;
}

iwb::Result<iwb::remote::BenchServeConfig> ServingPanel::config() const {
  iwb::remote::BenchServeConfig c;
  const QString url = m_endpointBox->currentText().trimmed();
  if (url.isEmpty())
    return iwb::make_error(iwb::ErrorCode::InvalidArgument, tr("Give the endpoint's base URL.").toStdString());
  const RemoteEndpointInfo* known = connectedEndpoint();
  if (known != nullptr) {
    c.endpoint = known->endpoint;
  } else {
    c.endpoint.base_url = url.toStdString();
  }
  c.model = m_modelBox->currentText().trimmed().toStdString();
  if (c.model.empty())
    return iwb::make_error(iwb::ErrorCode::InvalidArgument, tr("Give the served model's name.").toStdString());
  c.dataset = m_datasetBox->currentText().trimmed().toStdString();
  if (c.dataset.empty()) c.dataset = "random";
  c.input_len = m_inputLenBox->value();
  c.output_len = m_outputLenBox->value();
  c.num_prompts = m_numPromptsBox->value();
  c.request_rate = m_rateBox->value();
  c.burstiness = m_burstinessBox->value();
  c.max_concurrency = m_concurrencyBox->value();
  c.shared_prefix_len = m_sharedPrefixBox->value();
  for (const QString& part : m_sweepEdit->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool isNumber = false;
    const qint64 value = part.trimmed().toLongLong(&isNumber);
    if (!isNumber || value < 1) {
      return iwb::make_error(iwb::ErrorCode::InvalidArgument,
                             tr("The sweep's concurrencies are whole numbers of at least 1, separated by commas "
                                "(not \"%1\").")
                                 .arg(part.trimmed())
                                 .toStdString());
    }
    c.sweep_concurrency.push_back(value);
  }
  // Ascending and once each: the curve and its knee read the points in the order offered.
  std::sort(c.sweep_concurrency.begin(), c.sweep_concurrency.end());
  c.sweep_concurrency.erase(std::unique(c.sweep_concurrency.begin(), c.sweep_concurrency.end()),
                            c.sweep_concurrency.end());
  if (m_ttftSloBox->value() > 0) c.goodput.ttft_ms = m_ttftSloBox->value();
  if (m_tpotSloBox->value() > 0) c.goodput.tpot_ms = m_tpotSloBox->value();
  return c;
}

void ServingPanel::setConfig(const iwb::remote::BenchServeConfig& c) {
  m_endpointBox->setCurrentText(QString::fromStdString(c.endpoint.base_url));
  m_modelBox->setCurrentText(QString::fromStdString(c.model));
  m_datasetBox->setCurrentText(QString::fromStdString(c.dataset));
  m_inputLenBox->setValue(static_cast<int>(c.input_len));
  m_outputLenBox->setValue(static_cast<int>(c.output_len));
  m_numPromptsBox->setValue(static_cast<int>(c.num_prompts));
  m_rateBox->setValue(c.request_rate);
  m_burstinessBox->setValue(c.burstiness);
  m_concurrencyBox->setValue(static_cast<int>(c.max_concurrency));
  QStringList sweep;
  for (int64_t v : c.sweep_concurrency) sweep << QString::number(v);
  m_sweepEdit->setText(sweep.join(QLatin1Char(',')));
  m_sharedPrefixBox->setValue(static_cast<int>(c.shared_prefix_len));
  m_ttftSloBox->setValue(c.goodput.ttft_ms.value_or(0));
  m_tpotSloBox->setValue(c.goodput.tpot_ms.value_or(0));
}

void ServingPanel::setLabel(const QString& label) { m_labelEdit->setText(label); }

void ServingPanel::setEndpoints(RemoteEndpoints* endpoints) {
  if (m_endpoints) disconnect(m_endpoints, nullptr, this, nullptr);
  m_endpoints = endpoints;
  if (endpoints != nullptr)
    connect(endpoints, &RemoteEndpoints::endpointsChanged, this, &ServingPanel::refillEndpoints);
  refillEndpoints();
}

void ServingPanel::refillEndpoints() {
  const QString typed = m_endpointBox->currentText();
  m_endpointBox->blockSignals(true);
  m_endpointBox->clear();
  if (m_endpoints) {
    for (const RemoteEndpointInfo& e : m_endpoints->endpoints()) {
      m_endpointBox->addItem(e.baseUrl);
      m_endpointBox->setItemData(m_endpointBox->count() - 1, e.displayName, Qt::ToolTipRole);
    }
  }
  m_endpointBox->setCurrentText(typed.isEmpty() && m_endpointBox->count() > 0 ? m_endpointBox->itemText(0) : typed);
  m_endpointBox->blockSignals(false);
  refillModels();
}

void ServingPanel::refillModels() {
  const RemoteEndpointInfo* known = connectedEndpoint();
  if (known == nullptr) return;  // a typed URL: the model is typed too
  const QString typed = m_modelBox->currentText();
  m_modelBox->clear();
  m_modelBox->addItems(known->models);
  if (!typed.isEmpty() && known->models.contains(typed)) {
    m_modelBox->setCurrentText(typed);
  } else if (!known->defaultModel.isEmpty()) {
    m_modelBox->setCurrentText(known->defaultModel);
  }
}

const RemoteEndpointInfo* ServingPanel::connectedEndpoint() const {
  if (!m_endpoints) return nullptr;
  // "gpu-box:8000/" typed finds "http://gpu-box:8000" connected.
  const QString typed = m_endpointBox->currentText().trimmed();
  const QString normalized = RemoteEndpoints::normalizedBaseUrl(typed);
  return m_endpoints->find(normalized.isEmpty() ? typed : normalized);
}

}  // namespace iwb::ui
