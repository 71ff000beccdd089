// The local server's answered requests, newest last: time, client, request, status, tokens,
// seconds and outcome. Capped (the oldest rows go first) so a busy server cannot grow it forever.
#pragma once

#include "serve/local_server.h"

#include <QAbstractTableModel>
#include <QList>

namespace iwb::ui {

class RequestLogModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { TimeColumn, ClientColumn, RequestColumn, StatusColumn, PromptColumn, GeneratedColumn,
                SecondsColumn, OutcomeColumn, NumColumns };
  static constexpr int kMaxRows = 2000;

  explicit RequestLogModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  const QList<RequestLogRow>& rows() const { return m_rows; }
  void clear();

 public slots:
  void append(const iwb::ui::RequestLogRow& row);

 private:
  QList<RequestLogRow> m_rows;
};

}  // namespace iwb::ui
