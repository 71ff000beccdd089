// The quantization lab's table: every stored run that measured a model (eval and lab runs),
// one row each, with the base model's own run as the reference row. Sortable through a
// QSortFilterProxyModel: SortRole gives numbers for the numeric columns (missing figures sort
// last). Read from the results store on the GUI thread (a short query).
#pragma once

#include "iwb/engine/quant/quant_run.h"

#include <QAbstractTableModel>
#include <QHash>
#include <QString>

#include <vector>

namespace iwb::ui {

class QuantRunsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    StatusColumn,
    TypeColumn,
    ImatrixColumn,
    KvColumn,
    SizeColumn,
    BitsColumn,
    PerplexityColumn,
    PplRatioColumn,
    KlMeanColumn,
    KlP99Column,
    Top1Column,
    DeltaPColumn,
    PromptRateColumn,
    GenRateColumn,
    DepthRateColumn,
    KvBytesColumn,
    FitColumn,
    ModelColumn,
    DateColumn,
    NumColumns
  };
  static constexpr int SortRole = Qt::UserRole + 1;
  static constexpr int RunIdRole = Qt::UserRole + 2;

  explicit QuantRunsModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // Every eval/lab run of the store (all bases), oldest first; false and errorMessage() when
  // the store cannot be read (rows kept).
  bool reload(const QString& storePath);
  void setRuns(std::vector<iwb::quant::QuantRun> runs);
  const QString& errorMessage() const { return m_errorMessage; }
  const std::vector<iwb::quant::QuantRun>& runs() const { return m_runs; }
  const iwb::quant::QuantRun& run(int row) const { return m_runs.at(static_cast<size_t>(row)); }
  int rowOfRun(qint64 id) const;
  // The quantized file a model was dequantized from by `iwb quantize` (its recorded run), or empty.
  QString dequantizedFrom(const iwb::quant::QuantRun& run) const;

  // A short label for charts: "Q4_K_M", "Q4_K_M+im", "Q8_0 KV q8_0", "F16 KV q8_0/q4_0", "base".
  static QString label(const iwb::quant::QuantRun& run);
  // The table as CSV (header row, then one row per run, every metric unformatted).
  QString toCsv() const;

 private:
  std::vector<iwb::quant::QuantRun> m_runs;
  QHash<QString, QString> m_provenance;  // model identity (and path) -> the quantized source's file name
  QString m_errorMessage;
};

}  // namespace iwb::ui
