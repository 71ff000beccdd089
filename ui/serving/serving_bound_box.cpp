// ServingBoundBox: combo boxes for GPU, shape and weight type; shapes from presets or files.
#include "serving/serving_bound_box.h"

#include "iwb/engine/profile/decode_prediction.h"
#include "iwb/engine/profile/gpu_datasheets.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QLabel>
#include <QPushButton>

namespace iwb::ui {
namespace {

const char* const kWeightTypes[] = {"BF16", "F16", "Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q4_0"};

QString formatRate(double bytesPerS) {
  return bytesPerS >= 1e12 ? QStringLiteral("%1 TB/s").arg(bytesPerS / 1e12, 0, 'g', 4)
                           : QStringLiteral("%1 GB/s").arg(bytesPerS / 1e9, 0, 'g', 4);
}

}  // namespace

ServingBoundBox::ServingBoundBox(QWidget* parent)
    : QGroupBox(tr("Roofline bound"), parent),
      m_gpuBox(new QComboBox),
      m_shapeBox(new QComboBox),
      m_typeBox(new QComboBox),
      m_message(new QLabel) {
  m_gpuBox->setObjectName(QStringLiteral("boundGpuBox"));
  m_shapeBox->setObjectName(QStringLiteral("boundShapeBox"));
  m_typeBox->setObjectName(QStringLiteral("boundTypeBox"));
  m_message->setObjectName(QStringLiteral("boundMessage"));
  m_message->setWordWrap(true);
  for (const iwb::GpuDatasheet& g : iwb::gpu_datasheets()) {
    const QString name = QString::fromStdString(g.name);
    m_gpuBox->addItem(name, name);
    m_gpuBox->setItemData(m_gpuBox->count() - 1,
                          tr("%1, %2 TFLOP/s dense 16-bit (%3)")
                              .arg(formatRate(g.bandwidth_bytes_per_s))
                              .arg(g.peak_flops / 1e12)
                              .arg(QString::fromStdString(g.note)),
                          Qt::ToolTipRole);
  }
  for (const std::string& p : iwb::model_shape_preset_names()) {
    m_shapeBox->addItem(QString::fromStdString(p), QStringLiteral("preset:") + QString::fromStdString(p));
  }
  m_shapeBox->addItem(tr("GGUF file…"), QStringLiteral("gguf"));
  for (const char* t : kWeightTypes) m_typeBox->addItem(QString::fromLatin1(t), QString::fromLatin1(t));
  setPreset(QStringLiteral("llama-3-8b"), QStringLiteral("BF16"));

  auto* browse = new QPushButton(tr("File…"));
  browse->setObjectName(QStringLiteral("boundBrowseButton"));
  auto* form = new QFormLayout(this);
  form->addRow(tr("GPU"), m_gpuBox);
  auto* shapeRow = new QHBoxLayout;
  shapeRow->addWidget(m_shapeBox, 1);
  shapeRow->addWidget(browse);
  form->addRow(tr("Model shape"), shapeRow);
  form->addRow(tr("Weights"), m_typeBox);
  form->addRow(m_message);

  connect(browse, &QPushButton::clicked, this, &ServingBoundBox::browseGguf);
  for (QComboBox* box : {m_gpuBox, m_shapeBox, m_typeBox}) {
    connect(box, &QComboBox::currentIndexChanged, this, [this] {
      m_typeBox->setEnabled(m_shapeBox->currentData().toString().startsWith(QLatin1String("preset:")));
      emit changed();
    });
  }
}

void ServingBoundBox::setLocalModelPath(const QString& path) {
  m_localPath = path;
  const int at = m_shapeBox->findData(QStringLiteral("local"));
  if (path.isEmpty()) {
    if (at >= 0) m_shapeBox->removeItem(at);
    return;
  }
  const QString text = tr("Open model (%1)").arg(QFileInfo(path).fileName());
  if (at >= 0) {
    m_shapeBox->setItemText(at, text);
  } else {
    m_shapeBox->insertItem(0, text, QStringLiteral("local"));
  }
  emit changed();
}

void ServingBoundBox::matchServedModel(const QString& servedModel) {
  if (m_localPath.isEmpty() || servedModel.isEmpty()) return;
  const QFileInfo file(m_localPath);
  if (servedModel == file.completeBaseName() || servedModel == file.fileName()) {
    m_shapeBox->setCurrentIndex(m_shapeBox->findData(QStringLiteral("local")));
  }
}

void ServingBoundBox::setGgufPath(const QString& path) {
  m_ggufPath = path;
  const int at = m_shapeBox->findData(QStringLiteral("gguf"));
  m_shapeBox->setItemText(at, path.isEmpty() ? tr("GGUF file…") : QFileInfo(path).fileName());
  if (m_shapeBox->currentIndex() == at) {
    emit changed();
  } else {
    m_shapeBox->setCurrentIndex(at);
  }
}

void ServingBoundBox::setGpu(const QString& name) { m_gpuBox->setCurrentIndex(m_gpuBox->findData(name)); }

void ServingBoundBox::setPreset(const QString& preset, const QString& weightType) {
  m_typeBox->setCurrentIndex(std::max(0, m_typeBox->findData(weightType)));
  m_shapeBox->setCurrentIndex(std::max(0, m_shapeBox->findData(QStringLiteral("preset:") + preset)));
}

void ServingBoundBox::browseGguf() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Model shape from a GGUF file"), QString(),
                                                    tr("GGUF models (*.gguf);;All files (*)"));
  if (!path.isEmpty()) setGgufPath(path);
}

std::optional<iwb::ModelShape> ServingBoundBox::shape(QString* why) {
  const QString choice = m_shapeBox->currentData().toString();
  if (choice.startsWith(QLatin1String("preset:"))) {
    const auto type = iwb::ggml_type_from_name(m_typeBox->currentData().toString().toStdString());
    auto made = iwb::model_shape_preset(choice.mid(7).toStdString(), type.value_or(iwb::GgmlType::BF16));
    if (!made) {
      *why = QString::fromStdString(made.error_message());
      return std::nullopt;
    }
    return *made;
  }
  const QString path = choice == QLatin1String("local") ? m_localPath : m_ggufPath;
  if (path.isEmpty()) {
    *why = tr("Pick a GGUF file for the model shape.");
    return std::nullopt;
  }
  if (path != m_cachedPath) {
    auto read = iwb::model_shape_from_gguf(path.toStdString());
    m_cachedPath = path;
    m_cachedShape.reset();
    if (!read) {
      *why = tr("%1 cannot be described: %2")
                 .arg(QFileInfo(path).fileName(), QString::fromStdString(read.error_message()));
      m_cachedPath.clear();
      return std::nullopt;
    }
    m_cachedShape = std::move(*read);
  }
  return m_cachedShape;
}

DecodeBound ServingBoundBox::bound(const QVector<double>& concurrency, qint64 inputLen, qint64 outputLen) {
  DecodeBound b;
  const iwb::GpuDatasheet* gpu = iwb::find_gpu_datasheet(m_gpuBox->currentData().toString().toStdString());
  QString why;
  const auto model = shape(&why);
  if (gpu == nullptr || !model) {
    m_message->setText(why);
    return b;
  }
  const iwb::DeviceRoofs roofs{gpu->bandwidth_bytes_per_s, gpu->peak_flops};
  const int64_t context = iwb::mean_decode_context(inputLen, outputLen);
  for (double c : concurrency) {
    if (c < 1) continue;
    const auto p = iwb::predict_decode_throughput(*model, static_cast<int64_t>(c), context, roofs);
    if (!p) {
      m_message->setText(QString::fromStdString(p.error_message()));
      return {};
    }
    b.concurrency << c;
    b.tokensPerS << p->tokens_per_s;
  }
  const bool isPreset = m_shapeBox->currentData().toString().startsWith(QLatin1String("preset:"));
  b.label = QStringLiteral("%1, %2%3")
                .arg(QString::fromStdString(gpu->name), QString::fromStdString(model->name),
                     isPreset ? QLatin1Char(' ') + m_typeBox->currentText() : QString());
  m_message->setText(tr("Each kernel of a decode step of c sequences at context %1 (input + output/2) at the slower "
                        "of %2 and %3 TFLOP/s.")
                         .arg(context)
                         .arg(formatRate(gpu->bandwidth_bytes_per_s))
                         .arg(gpu->peak_flops / 1e12));
  return b;
}

QString ServingBoundBox::message() const { return m_message->text(); }

}  // namespace iwb::ui
