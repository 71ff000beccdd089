// Engine load-time settings: QSettings persistence and the dialog that edits them.
#include "settings/engine_settings.h"

#include <QPushButton>
#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLocale>
#include <QSettings>
#include <QSpinBox>
#include <QThread>
#include <QVBoxLayout>

namespace iwb::ui {

namespace {

constexpr auto kContextKey = "engine/contextLength";
constexpr auto kThreadsKey = "engine/numThreads";
constexpr auto kKvMiBKey = "engine/kvCacheMiB";
constexpr auto kBlockSizeKey = "engine/kvBlockSize";
constexpr auto kBatchTokensKey = "engine/maxBatchTokens";
constexpr auto kBatchInvariantKey = "engine/batchInvariant";

// A spin box whose minimum (0) reads as the engine's own choice.
QSpinBox* makeSpinBox(int maximum, const QString& defaultText, const QString& suffix, QWidget* parent) {
  auto* box = new QSpinBox(parent);
  box->setRange(0, maximum);
  box->setSpecialValueText(defaultText);
  box->setSuffix(suffix);
  box->setGroupSeparatorShown(true);
  return box;
}

}  // namespace

EngineLoadOptions loadEngineSettings() {
  const QSettings settings;
  EngineLoadOptions o;
  o.contextLength = qMax<qint64>(0, settings.value(QLatin1String(kContextKey), 0).toLongLong());
  o.numThreads = qMax(0, settings.value(QLatin1String(kThreadsKey), 0).toInt());
  o.kvCacheMiB = qMax<qint64>(0, settings.value(QLatin1String(kKvMiBKey), 0).toLongLong());
  o.kvBlockSize = qMax(0, settings.value(QLatin1String(kBlockSizeKey), 0).toInt());
  o.maxBatchTokens = qMax<qint64>(0, settings.value(QLatin1String(kBatchTokensKey), 0).toLongLong());
  o.isBatchInvariant = settings.value(QLatin1String(kBatchInvariantKey), false).toBool();
  return o;
}

void saveEngineSettings(const EngineLoadOptions& o) {
  QSettings settings;
  settings.setValue(QLatin1String(kContextKey), o.contextLength);
  settings.setValue(QLatin1String(kThreadsKey), o.numThreads);
  settings.setValue(QLatin1String(kKvMiBKey), o.kvCacheMiB);
  settings.setValue(QLatin1String(kBlockSizeKey), o.kvBlockSize);
  settings.setValue(QLatin1String(kBatchTokensKey), o.maxBatchTokens);
  settings.setValue(QLatin1String(kBatchInvariantKey), o.isBatchInvariant);
}

EngineSettingsDialog::EngineSettingsDialog(const EngineLoadOptions& options, quint64 kvBytesPerPosition,
                                           QWidget* parent)
    : QDialog(parent), m_kvBytesPerPosition(kvBytesPerPosition) {
  setWindowTitle(tr("Engine Settings"));
  const QString byEngine = tr("engine default");
  m_context = makeSpinBox(1 << 20, tr("model's context, at most 4,096"), tr(" tokens"), this);
  m_threads = makeSpinBox(QThread::idealThreadCount() * 4, tr("all cores (%1)").arg(QThread::idealThreadCount()),
                          QString(), this);
  m_kvMiB = makeSpinBox(1 << 20, tr("engine default (4 contexts, at most a quarter of free memory)"), tr(" MiB"), this);
  m_blockSize = makeSpinBox(4096, tr("engine default (16)"), tr(" tokens"), this);
  m_batchTokens = makeSpinBox(1 << 16, tr("engine default (128)"), tr(" tokens"), this);
  m_batchInvariant = new QCheckBox(tr("Batch-invariant matmuls (exact, several times slower)"), this);
  m_batchInvariant->setToolTip(
      tr("Each token's logits come out bit for bit the same whether it is decoded alone, batched with other "
         "chats or verifying speculative guesses, so greedy replies never depend on them. The fast kernels round "
         "differently for one token, a few and many, which can flip a near-tie."));
  m_capacity = new QLabel(this);
  m_capacity->setWordWrap(true);

  auto* form = new QFormLayout;
  form->addRow(tr("Context per sequence:"), m_context);
  form->addRow(tr("Threads:"), m_threads);
  form->addRow(tr("KV cache memory:"), m_kvMiB);
  form->addRow(QString(), m_capacity);
  form->addRow(tr("KV block size:"), m_blockSize);
  form->addRow(tr("Tokens per step:"), m_batchTokens);
  form->addRow(QString(), m_batchInvariant);

  auto* note = new QLabel(tr("Changes apply when a model is next loaded."), this);
  note->setWordWrap(true);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel | QDialogButtonBox::RestoreDefaults, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(buttons->button(QDialogButtonBox::RestoreDefaults), &QAbstractButton::clicked, this,
          [this] { setOptions(EngineLoadOptions{}); });
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(note);
  layout->addWidget(buttons);

  for (QSpinBox* box : {m_context, m_kvMiB}) {
    connect(box, &QSpinBox::valueChanged, this, &EngineSettingsDialog::updateCapacity);
  }
  setOptions(options);
}

EngineLoadOptions EngineSettingsDialog::options() const {
  EngineLoadOptions o;
  o.contextLength = m_context->value();
  o.numThreads = m_threads->value();
  o.kvCacheMiB = m_kvMiB->value();
  o.kvBlockSize = m_blockSize->value();
  o.maxBatchTokens = m_batchTokens->value();
  o.isBatchInvariant = m_batchInvariant->isChecked();
  return o;
}

void EngineSettingsDialog::setOptions(const EngineLoadOptions& o) {
  m_context->setValue(static_cast<int>(qMin<qint64>(o.contextLength, m_context->maximum())));
  m_threads->setValue(qMin(o.numThreads, m_threads->maximum()));
  m_kvMiB->setValue(static_cast<int>(qMin<qint64>(o.kvCacheMiB, m_kvMiB->maximum())));
  m_blockSize->setValue(qMin(o.kvBlockSize, m_blockSize->maximum()));
  m_batchTokens->setValue(static_cast<int>(qMin<qint64>(o.maxBatchTokens, m_batchTokens->maximum())));
  m_batchInvariant->setChecked(o.isBatchInvariant);
  updateCapacity();
}

QString EngineSettingsDialog::kvCapacityText() const { return m_capacity->text(); }

void EngineSettingsDialog::updateCapacity() {
  if (m_kvMiB->value() == 0) {
    m_capacity->setText(tr("The engine sizes the pool when the model loads."));
    return;
  }
  if (m_kvBytesPerPosition == 0) {
    m_capacity->setText(tr("Open a model to see how many positions this holds."));
    return;
  }
  const QLocale locale;
  const qint64 positions = static_cast<qint64>((static_cast<quint64>(m_kvMiB->value()) << 20) / m_kvBytesPerPosition);
  QString text = tr("Holds about %1 positions for the loaded model").arg(locale.toString(positions));
  if (m_context->value() > 0) {
    text += tr(" (%1 full contexts of %2)").arg(locale.toString(double(positions) / m_context->value(), 'f', 1),
                                                locale.toString(m_context->value()));
  }
  m_capacity->setText(text + QLatin1Char('.'));
}

}  // namespace iwb::ui
