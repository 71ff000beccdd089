// The stored bench-serve runs (ResultsStore::list_serve_runs), newest first, as a table whose
// first column is a check box: the user ticks one or two runs to draw side by side (two
// servers, two settings). Ticking a third unticks the one ticked longest ago.
#pragma once

#include "iwb/engine/store/results_store.h"

#include <QAbstractTableModel>
#include <QList>

#include <vector>

namespace iwb::ui {

class ServingRunsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Shown, Id, Status, Started, Label, Server, Model, Points, NumColumns };
  static constexpr int kMaxShown = 2;

  explicit ServingRunsModel(QObject* parent = nullptr);

  // Replaces the list; ticked runs that are still listed stay ticked.
  void setRuns(const std::vector<iwb::ResultsStore::ServeRunSummary>& runs);
  const iwb::ResultsStore::ServeRunSummary* run(int row) const;
  int rowOf(qint64 id) const;
  // The ticked runs' ids, in the order they were ticked.
  QList<qint64> shownIds() const { return m_shown; }
  void setShown(qint64 id, bool isShown);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 signals:
  void shownChanged(const QList<qint64>& ids);

 private:
  std::vector<iwb::ResultsStore::ServeRunSummary> m_runs;  // newest first
  QList<qint64> m_shown;
};

}  // namespace iwb::ui
