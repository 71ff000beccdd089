// The data behind the Memory tab. Before a model loads: its estimate (weights by type, the KV
// cache at the chosen context, scratch) against the device's total and available memory, and
// whether it fits. After it loads: what the process measurably holds beside the estimate, with
// the difference shown: the engine's report (KV pool, scratch) and what Linux says about the
// process (file-backed resident pages of the mapped weights, anonymous memory grown since just
// before the load). On a CUDA device the engine's device allocations replace the host rows. A
// recurrent model (Qwen 3.5) adds its sequences' states, which the engine keeps beside the KV pool.
#pragma once

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/runtime/kv_pool_estimate.h"
#include "worker/measurement_values.h"

#include <QAbstractTableModel>
#include <QList>
#include <QString>

#include <optional>

namespace iwb::ui {

enum class MemoryFit {
  Unknown,     // no model, or the device's free memory is unknown
  Fits,        // the estimate is under 80% of the available memory
  Tight,       // it fits, with less than a fifth of the available memory to spare
  DoesNotFit,  // more than is available
};

class MemoryModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { ItemColumn, EstimateColumn, MeasuredColumn, DifferenceColumn, SourceColumn, NumColumns };

  struct Row {
    QString item;
    qint64 estimateBytes = -1;  // -1: nothing estimated for this row
    qint64 measuredBytes = -1;  // -1: not measured (yet, or at all)
    QString source;             // how the measured figure was obtained, or why there is none
    bool isTotal = false;
    bool isDetail = false;  // a breakdown line (weights by type)

    std::optional<qint64> difference() const;
  };

  explicit MemoryModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // The opened model's details (the estimate needs no loaded model).
  void setModelSummary(const iwb::ModelSummary& summary);
  void clearModel();
  bool hasModel() const { return m_summary.has_value(); }
  // Context the estimate's KV cache and scratch are sized for.
  void setContext(qint64 context);
  qint64 context() const { return m_context; }
  void setDevice(const iwb::ComputeDeviceInfo& device);
  const iwb::ComputeDeviceInfo& device() const { return m_device; }
  // The engine options the model is (or will be) loaded with (Engine Settings): the KV pool's
  // budget and block size follow them; the context comes from setContext.
  void setEngineOptions(const iwb::EngineOptions& options);
  // The KV pool the engine allocates at this context on this device, by the engine's rule;
  // empty without a model or when the engine would refuse the options.
  std::optional<iwb::KvPoolEstimate> kvPool() const;
  // The newest measurement; a sample with contextLength 0 means no model is loaded.
  void setSample(const MemorySample& sample);
  const std::optional<MemorySample>& sample() const { return m_sample; }
  bool isLoaded() const { return m_sample && m_sample->isValid && m_sample->contextLength > 0; }

  // The estimate: the engine's KV pool at this context, and for a recurrent model (Qwen 3.5)
  // one recurrent state for each of recurrentSequences().
  std::optional<iwb::MemoryEstimate> estimate() const;
  // Sequences the estimate gives a recurrent state: one per full context the KV pool holds (at
  // least one, at most Engine Settings' running sequences); 0 without recurrent layers.
  qint64 recurrentSequences() const;
  MemoryFit fit() const;
  // A sentence for the banner: "Fits: needs 1.2 GiB of 20.1 GiB available (23.4 GiB total)."
  QString fitText() const;
  // KV cache bytes per position (K and V over every layer in Engine Settings' cache type), from
  // the model's shape.
  qint64 kvBytesPerPosition() const;
  // "1,024 blocks of 16 positions, 4 contexts of 4,096 (Engine Settings); q8_0 cache, ... per
  // block ..."; empty without a pool.
  QString kvPoolText() const;
  // "q8_0 cache, 8.5 KB per block of 16 positions (544 bytes per position)".
  static QString kvBlockText(const QString& type, qint64 bytesPerPosition, qint64 blockSize);

  const QList<Row>& rows() const { return m_rows; }
  // The row named `item`; nullptr when there is none.
  const Row* findRow(const QString& item) const;

 signals:
  void changed();

 private:
  void rebuild();
  // The engine's allocations on its CUDA device (weights, KV pool, scratch, cuBLAS workspace,
  // free and total), measured against the estimate.
  void appendDeviceRows(const iwb::MemoryEstimate& e, const MemorySample& sample);
  // The recurrent layers' states (Qwen 3.5): the estimate's sequences, and the engine's live ones.
  Row recurrentRow(const iwb::MemoryEstimate& e, const MemorySample& sample, bool hasReport) const;
  // The process's resident memory and the selected device's available memory.
  void appendProcessRows(const MemorySample& sample);

  std::optional<iwb::ModelSummary> m_summary;
  qint64 m_context = 4096;
  iwb::ComputeDeviceInfo m_device;
  iwb::EngineOptions m_options;
  std::optional<MemorySample> m_sample;
  QList<Row> m_rows;
};

}  // namespace iwb::ui
