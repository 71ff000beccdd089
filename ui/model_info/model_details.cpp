// Converts a parsed GGUF file into the plain rows the model-info views show.
#include "model_info/model_details.h"

#include "iwb/engine/gguf/gguf_file.h"

#include <QFile>
#include <QFileInfo>

namespace iwb::ui {
namespace {

// Tooltips show whole strings (chat templates run to a few KiB) but stay bounded: a tooltip
// with a 32000-entry vocabulary would freeze the GUI while it lays out.
constexpr qsizetype kMaxTooltipChars = 4000;
constexpr size_t kTooltipArrayItems = 48;

QString toQString(std::string_view text) {
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

QString typeText(const gguf::Value& value) {
  if (const gguf::Array* array = value.as_array()) {
    return QStringLiteral("%1[%2]")
        .arg(toQString(gguf::value_type_name(array->element_type)))
        .arg(array->items.size());
  }
  return toQString(gguf::value_type_name(value.type()));
}

QString fullValueText(const gguf::Value& value) {
  QString text;
  if (const std::string* s = value.as_string()) {
    text = QString::fromUtf8(s->data(), static_cast<qsizetype>(s->size()));
  } else {
    text = QString::fromStdString(value.to_display_string(kTooltipArrayItems));
  }
  if (text.size() > kMaxTooltipChars) {
    text.truncate(kMaxTooltipChars);
    text += QStringLiteral("\n…");
  }
  return text;
}

}  // namespace

QList<TensorRow> tensorRows(const gguf::GgufFile& file) {
  QList<TensorRow> rows;
  rows.reserve(static_cast<qsizetype>(file.tensors().size()));
  for (const gguf::TensorInfo& tensor : file.tensors()) {
    TensorRow row;
    row.name = QString::fromStdString(tensor.name);
    row.type = toQString(ggml_type_name(tensor.type));
    row.shape = QString::fromStdString(tensor.shape_string());
    row.numElements = tensor.num_elements();
    row.numBytes = tensor.num_bytes;
    row.offset = tensor.offset;
    rows.append(std::move(row));
  }
  return rows;
}

QList<MetadataRow> metadataRows(const gguf::GgufFile& file) {
  QList<MetadataRow> rows;
  rows.reserve(static_cast<qsizetype>(file.metadata().size()));
  for (const gguf::KeyValue& kv : file.metadata()) {
    MetadataRow row;
    row.key = QString::fromStdString(kv.key);
    row.type = typeText(kv.value);
    row.value = QString::fromStdString(kv.value.to_display_string());
    row.fullValue = fullValueText(kv.value);
    rows.append(std::move(row));
  }
  return rows;
}

iwb::Result<ModelDetails> readModelDetails(const QString& path) {
  // QFile::encodeName gives the bytes the OS expects for non-ASCII paths.
  auto file = gguf::GgufFile::open(QFile::encodeName(path).toStdString());
  if (!file) return file.status();

  auto summary = summarize_model(**file);
  if (!summary) return summary.status();

  ModelDetails details;
  details.path = QFileInfo(path).absoluteFilePath();
  details.summary = std::move(*summary);
  details.tensors = tensorRows(**file);
  details.metadata = metadataRows(**file);
  return details;
}

}  // namespace iwb::ui
