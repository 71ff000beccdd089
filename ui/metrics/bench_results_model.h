// The `iwb bench` runs in the results store as a table: when, which model and type, the test
// (pp512, tg128), threads, tokens/s as mean ± sd over the repetitions, and MBU/MFU against the
// probe of that day. Read on the GUI thread (a short query), newest first.
#pragma once

#include "iwb/engine/profile/bench.h"

#include <QAbstractTableModel>
#include <QString>

#include <vector>

namespace iwb::ui {

class BenchResultsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { DateColumn, ModelColumn, TypeColumn, TestColumn, ThreadsColumn, RateColumn, MbuColumn, MfuColumn,
                DeviceColumn, NumColumns };
  static constexpr int kMaxRows = 500;

  explicit BenchResultsModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // Reads the newest runs from the store at `storePath`; false (rows kept) and errorMessage()
  // when the store cannot be read.
  bool reload(const QString& storePath);
  const QString& errorMessage() const { return m_errorMessage; }
  const iwb::BenchResult& result(int row) const { return m_results.at(static_cast<size_t>(row)); }

 private:
  std::vector<iwb::BenchResult> m_results;  // newest first
  QString m_errorMessage;
};

}  // namespace iwb::ui
