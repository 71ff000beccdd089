// SpecRunsModel: rows of finished requests, the overall sums, the suggestion.
#include "spec/spec_runs_model.h"

namespace iwb::ui {
namespace {

double perStepMs(double seconds, const iwb::spec::SpeculationStats& s) {
  return s.num_verify_steps > 0 ? 1e3 * seconds / static_cast<double>(s.num_verify_steps) : 0.0;
}

}  // namespace

SpecRunsModel::SpecRunsModel(QObject* parent) : QAbstractTableModel(parent) {}

int SpecRunsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(m_reports.size()); }
int SpecRunsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : NumColumns; }

QVariant SpecRunsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Request: return tr("Request");
    case Drafter: return tr("Drafter");
    case DraftTokens: return tr("K");
    case Tokens: return tr("Tokens");
    case TokensPerSecond: return tr("Tokens/s");
    case Speedup: return tr("Speedup");
    case Acceptance: return tr("Accepted");
    case MeanAccepted: return tr("Mean acc. length");
    case DraftMs: return tr("Draft ms");
    case VerifyMs: return tr("Verify ms");
    default: return {};
  }
}

QVariant SpecRunsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_reports.size()) return {};
  const SpeculationReport& r = m_reports.at(index.row());
  const iwb::spec::SpeculationStats& s = r.stats;
  if (role == Qt::TextAlignmentRole) {
    return index.column() == Drafter ? QVariant(Qt::AlignLeft | Qt::AlignVCenter) : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool isRaw = role == Qt::UserRole;  // numbers for tests and sorting
  const double base = baselineTokensPerSecond();
  switch (index.column()) {
    case Request: return r.requestId;
    case Drafter: return r.isBaseline() ? tr("plain (baseline)") : r.drafter;
    case DraftTokens: return r.numDraftTokens;
    case Tokens: return r.numGeneratedTokens;
    case TokensPerSecond: return isRaw ? QVariant(r.tokensPerSecond()) : QVariant(QString::number(r.tokensPerSecond(), 'f', 2));
    case Speedup: {
      const double x = base > 0 ? r.tokensPerSecond() / base : 0.0;
      if (isRaw) return x;
      return x > 0 ? QStringLiteral("%1×").arg(x, 0, 'f', 2) : QStringLiteral("–");
    }
    case Acceptance:
      if (isRaw) return s.acceptance_rate();
      return r.isBaseline() ? QStringLiteral("–") : QStringLiteral("%1%").arg(100.0 * s.acceptance_rate(), 0, 'f', 1);
    case MeanAccepted:
      if (isRaw) return s.mean_accepted_length();
      return r.isBaseline() ? QStringLiteral("–") : QString::number(s.mean_accepted_length(), 'f', 2);
    case DraftMs: return isRaw ? QVariant(perStepMs(s.draft_seconds, s)) : QVariant(QString::number(perStepMs(s.draft_seconds, s), 'f', 1));
    case VerifyMs: return isRaw ? QVariant(perStepMs(s.verify_seconds, s)) : QVariant(QString::number(perStepMs(s.verify_seconds, s), 'f', 1));
    default: return {};
  }
}

void SpecRunsModel::addReport(const SpeculationReport& report) {
  const int row = static_cast<int>(m_reports.size());
  beginInsertRows({}, row, row);
  m_reports.append(report);
  endInsertRows();
  // A new baseline changes every row's speedup.
  if (report.isBaseline() && row > 0) emit dataChanged(index(0, Speedup), index(row, Speedup));
  emit statsChanged();
}

void SpecRunsModel::addStep(const SpeculationStep& step) {
  m_overall.add(step.stats);
  m_steps.append(step);
  while (m_steps.size() > kMaxSteps) m_steps.removeFirst();
  emit statsChanged();
}

void SpecRunsModel::clear() {
  beginResetModel();
  m_reports.clear();
  endResetModel();
  m_steps.clear();
  m_overall = {};
  emit statsChanged();
}

double SpecRunsModel::baselineTokensPerSecond() const {
  double sum = 0;
  int n = 0;
  for (const SpeculationReport& r : m_reports) {
    if (r.isBaseline() && r.tokensPerSecond() > 0) {
      sum += r.tokensPerSecond();
      ++n;
    }
  }
  return n > 0 ? sum / n : 0.0;
}

double SpecRunsModel::speculativeTokensPerSecond() const {
  double sum = 0;
  int n = 0;
  for (const SpeculationReport& r : m_reports) {
    if (!r.isBaseline() && r.tokensPerSecond() > 0) {
      sum += r.tokensPerSecond();
      ++n;
    }
  }
  return n > 0 ? sum / n : 0.0;
}

double SpecRunsModel::speedup() const {
  const double base = baselineTokensPerSecond();
  const double spec = speculativeTokensPerSecond();
  return base > 0 && spec > 0 ? spec / base : 0.0;
}

iwb::spec::DraftLengthSuggestion SpecRunsModel::suggestion(const iwb::spec::SpeculationStats& stats, int maxK) const {
  const double base = baselineTokensPerSecond();
  const iwb::spec::SpeculationCosts costs = iwb::spec::measured_costs(stats, base > 0 ? 1.0 / base : 0.0);
  return iwb::spec::suggest_draft_length(stats.acceptance_rate(), costs, maxK);
}

}  // namespace iwb::ui
