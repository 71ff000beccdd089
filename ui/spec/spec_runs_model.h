// What the Speculative tab shows, as a table model: one row per finished request (speculative
// or a plain baseline) with its tokens/s, speedup against the baseline, acceptance and costs;
// beside it the overall statistics summed from every verifying step, the draft and verify
// time of the recent steps, and the K the measured acceptance and costs suggest. Updated only
// from the GUI thread, from the engine controller's signals.
#pragma once

#include "worker/spec_values.h"

#include <QAbstractTableModel>
#include <QList>

namespace iwb::ui {

class SpecRunsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Request, Drafter, DraftTokens, Tokens, TokensPerSecond, Speedup, Acceptance, MeanAccepted, DraftMs,
                VerifyMs, NumColumns };
  static constexpr int kMaxSteps = 240;  // steps kept for the time chart

  explicit SpecRunsModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  void addReport(const SpeculationReport& report);
  void addStep(const SpeculationStep& step);
  void clear();

  const SpeculationReport& report(int row) const { return m_reports.at(row); }
  // Every verifying step so far, summed (live: includes requests still running).
  const iwb::spec::SpeculationStats& overall() const { return m_overall; }
  const QList<SpeculationStep>& steps() const { return m_steps; }
  // Plain decoding's generation speed: the mean of the baseline rows (0 without one).
  double baselineTokensPerSecond() const;
  // The speculative rows' mean generation speed, and its ratio to the baseline (0 without both).
  double speculativeTokensPerSecond() const;
  double speedup() const;
  // The best K for `stats` under its measured costs (plain steps from the baseline when there
  // is one), up to maxK.
  iwb::spec::DraftLengthSuggestion suggestion(const iwb::spec::SpeculationStats& stats, int maxK = 16) const;

 signals:
  // After any change: the charts and the summary redraw.
  void statsChanged();

 private:
  QList<SpeculationReport> m_reports;
  QList<SpeculationStep> m_steps;
  iwb::spec::SpeculationStats m_overall;
};

}  // namespace iwb::ui
