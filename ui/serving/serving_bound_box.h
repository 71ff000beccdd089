// The Serving tab's roofline-bound chooser: a GPU from the datasheet table and a model shape
// (a preset with a weight type, a GGUF file, or the model open in the workbench when the server
// serves one of that name); it turns concurrencies and a context into predicted decode
// throughput (iwb::predict_decode_throughput) for the sweep chart.
#pragma once

#include "serving/serving_sweep_charts.h"

#include "iwb/engine/profile/cost_model.h"

#include <QGroupBox>
#include <QString>

#include <optional>

class QComboBox;
class QLabel;

namespace iwb::ui {

class ServingBoundBox : public QGroupBox {
  Q_OBJECT

 public:
  explicit ServingBoundBox(QWidget* parent = nullptr);

  // The model open in the workbench (empty: none); offered as a shape.
  void setLocalModelPath(const QString& path);
  // Picks the local model when the server's model name is its file's stem (`iwb serve` names
  // models so); leaves the choice alone otherwise.
  void matchServedModel(const QString& servedModel);
  void setGgufPath(const QString& path);  // the "GGUF file" choice (tests; the button asks)

  void setGpu(const QString& name);
  void setPreset(const QString& preset, const QString& weightType);
  // The bound at these concurrencies (empty entries skipped) for requests of this shape. An
  // empty bound (and the reason shown in the box) when the shape cannot be made.
  DecodeBound bound(const QVector<double>& concurrency, qint64 inputLen, qint64 outputLen);
  QString message() const;

 signals:
  void changed();

 private:
  std::optional<iwb::ModelShape> shape(QString* why);
  void browseGguf();

  QComboBox* m_gpuBox;
  QComboBox* m_shapeBox;  // data: "preset:<name>", "local", "gguf"
  QComboBox* m_typeBox;
  QLabel* m_message;
  QString m_localPath;
  QString m_ggufPath;
  // The shape read from a file, cached by path (reading maps the file).
  QString m_cachedPath;
  std::optional<iwb::ModelShape> m_cachedShape;
};

}  // namespace iwb::ui
