// Engine load-time settings: QSettings persistence and the dialog that edits them.
#include "settings/engine_settings.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QSettings>
#include <QSignalBlocker>
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
constexpr auto kDeviceKey = "engine/device";
constexpr auto kKvFractionKey = "engine/kvCacheFraction";
constexpr auto kLoadModeKey = "engine/loadMode";

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
  // A hand-edited or foreign value falls back to the automatic choice; "cuda:7" is kept even
  // when that device is absent now (the load then says so and offers the CPU).
  const QString device = settings.value(QLatin1String(kDeviceKey), QStringLiteral("auto")).toString().trimmed();
  o.device = device == QLatin1String("cpu") || isCudaDeviceId(device) ? device : QStringLiteral("auto");
  const double fraction = settings.value(QLatin1String(kKvFractionKey), 0.0).toDouble();
  o.kvCacheFraction = fraction > 0 && fraction <= 1 ? fraction : 0;
  const QString loadMode = settings.value(QLatin1String(kLoadModeKey), QStringLiteral("auto")).toString();
  o.loadMode =
      loadMode == QLatin1String("mmap") || loadMode == QLatin1String("mlock") || loadMode == QLatin1String("none")
          ? loadMode
          : QStringLiteral("auto");
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
  settings.setValue(QLatin1String(kDeviceKey), o.device);
  settings.setValue(QLatin1String(kKvFractionKey), o.kvCacheFraction);
  settings.setValue(QLatin1String(kLoadModeKey), o.loadMode);
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
  m_device = new QComboBox(this);
  m_device->setObjectName(QStringLiteral("engineDeviceBox"));
  m_device->setToolTip(
      tr("Where the model runs. Automatic takes the first working CUDA device and falls back to "
         "the CPU."));
  m_deviceUnavailable = new QLabel(this);
  m_deviceUnavailable->setObjectName(QStringLiteral("engineDeviceUnavailable"));
  m_deviceUnavailable->setWordWrap(true);
  m_deviceUnavailable->setEnabled(false);  // greyed: a fact about the machine, not an error
  m_kvFraction = new QDoubleSpinBox(this);
  m_kvFraction->setObjectName(QStringLiteral("kvFractionBox"));
  m_kvFraction->setRange(0, 100);
  m_kvFraction->setDecimals(0);
  m_kvFraction->setSuffix(tr(" %"));
  m_kvFraction->setSpecialValueText(tr("engine default"));
  m_kvFraction->setToolTip(
      tr("On a GPU: the share of the device memory still free after the weights and scratch "
         "that the KV cache pool takes. KV cache memory, when set, wins."));

  m_loadMode = new QComboBox(this);
  m_loadMode->setObjectName(QStringLiteral("loadModeBox"));
  m_loadMode->addItem(tr("Automatic (read into memory on the CPU when it fits)"), QStringLiteral("auto"));
  m_loadMode->addItem(tr("Map the file (mmap)"), QStringLiteral("mmap"));
  m_loadMode->addItem(tr("Map and lock in memory (mlock)"), QStringLiteral("mlock"));
  m_loadMode->addItem(tr("Read into memory"), QStringLiteral("none"));
  m_loadMode->setToolTip(
      tr("Read into memory: the weights are copied into 2 MiB pages at load, a little slower to load, and decoding "
         "on the CPU reads them faster (fewer TLB misses). Mapped: an instant load, pages shared with the system's "
         "file cache, and a model larger than memory still runs. Locked: mapped and kept in memory, never paged out "
         "(the system's locked-memory limit must allow it). Automatic reads on the CPU when the file takes at "
         "most half the available memory, as llama.cpp's --load-mode names them (none, mmap, mlock)."));

  auto* form = new QFormLayout;
  form->addRow(tr("Device:"), m_device);
  form->addRow(QString(), m_deviceUnavailable);
  form->addRow(tr("Context per sequence:"), m_context);
  form->addRow(tr("Threads:"), m_threads);
  form->addRow(tr("KV cache memory:"), m_kvMiB);
  form->addRow(QString(), m_capacity);
  form->addRow(tr("KV cache share of free GPU memory:"), m_kvFraction);
  form->addRow(tr("KV block size:"), m_blockSize);
  form->addRow(tr("Tokens per step:"), m_batchTokens);
  form->addRow(QString(), m_batchInvariant);
  form->addRow(tr("Weights:"), m_loadMode);

  auto* note = new QLabel(tr("Changes apply when a model is next loaded."), this);
  note->setWordWrap(true);
  auto* buttons =
      new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel | QDialogButtonBox::RestoreDefaults, this);
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
  connect(m_device, &QComboBox::currentIndexChanged, this, &EngineSettingsDialog::updateDeviceControls);
  connect(m_kvMiB, &QSpinBox::valueChanged, this, &EngineSettingsDialog::updateDeviceControls);
  m_choices = currentDeviceList();
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
  o.device = m_device->currentData().toString();
  if (o.device.isEmpty()) o.device = QStringLiteral("auto");
  o.kvCacheFraction = m_kvFraction->value() / 100.0;
  o.loadMode = m_loadMode->currentData().toString();
  return o;
}

void EngineSettingsDialog::setOptions(const EngineLoadOptions& o) {
  m_context->setValue(static_cast<int>(qMin<qint64>(o.contextLength, m_context->maximum())));
  m_threads->setValue(qMin(o.numThreads, m_threads->maximum()));
  m_kvMiB->setValue(static_cast<int>(qMin<qint64>(o.kvCacheMiB, m_kvMiB->maximum())));
  m_blockSize->setValue(qMin(o.kvBlockSize, m_blockSize->maximum()));
  m_batchTokens->setValue(static_cast<int>(qMin<qint64>(o.maxBatchTokens, m_batchTokens->maximum())));
  m_batchInvariant->setChecked(o.isBatchInvariant);
  m_kvFraction->setValue(o.kvCacheFraction * 100.0);
  m_loadMode->setCurrentIndex(qMax(0, m_loadMode->findData(o.loadMode)));
  selectDevice(o.device);
  updateCapacity();
}

void EngineSettingsDialog::setDeviceList(const DeviceList& choices) {
  const QString selected = m_device->currentData().toString();
  m_choices = choices;
  selectDevice(selected.isEmpty() ? QStringLiteral("auto") : selected);
}

void EngineSettingsDialog::selectDevice(const QString& id) {
  const QSignalBlocker blocker(m_device);
  m_device->clear();
  for (const DeviceEntry& c : m_choices.choices) m_device->addItem(c.label, c.id);
  int index = m_choices.indexOf(id);
  if (index < 0 && !id.isEmpty()) {
    // Chosen earlier (another GPU, another session): kept, so a save does not lose it.
    m_device->addItem(tr("%1 (not found now)").arg(id), id);
    index = m_device->count() - 1;
  }
  m_device->setCurrentIndex(qMax(0, index));
  updateDeviceControls();
}

QStringList EngineSettingsDialog::deviceIds() const {
  QStringList ids;
  for (int i = 0; i < m_device->count(); ++i) ids << m_device->itemData(i).toString();
  return ids;
}

QString EngineSettingsDialog::deviceText() const { return m_device->currentText(); }

QString EngineSettingsDialog::deviceUnavailableText() const {
  return m_deviceUnavailable->isHidden() ? QString() : m_deviceUnavailable->text();
}

void EngineSettingsDialog::updateDeviceControls() {
  m_deviceUnavailable->setText(m_choices.cudaUnavailableReason);
  m_deviceUnavailable->setVisible(!m_choices.cudaUnavailableReason.isEmpty());
  // The share applies only where a GPU may be used, and only when no fixed size is set.
  const QString id = m_device->currentData().toString();
  const bool mayUseGpu =
      isCudaDeviceId(id) || (id == QLatin1String("auto") && m_choices.cudaUnavailableReason.isEmpty());
  m_kvFraction->setEnabled(mayUseGpu && m_kvMiB->value() == 0);
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
    text +=
        tr(" (%1 full contexts of %2)")
            .arg(locale.toString(double(positions) / m_context->value(), 'f', 1), locale.toString(m_context->value()));
  }
  m_capacity->setText(text + QLatin1Char('.'));
}

}  // namespace iwb::ui
