// QuantCompareView: the side-by-side table and the per-layer error chart.
#include "quantlab/quant_compare_view.h"

#include "quantlab/quant_runs_model.h"

#include <qcustomplot.h>
#include <QHeaderView>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <map>

namespace iwb::ui {
namespace {

using iwb::quant::QuantRun;

struct Metric {
  const char* name;
  std::optional<double> QuantRun::*field;
  int decimals;
  double scale;
};

const Metric kMetrics[] = {
    {"Size (MiB)", &QuantRun::file_bytes, 1, 1.0 / 1048576.0},
    {"Memory (MiB)", &QuantRun::memory_bytes, 1, 1.0 / 1048576.0},
    {"Bits per weight", &QuantRun::bits_per_weight, 2, 1.0},
    {"Perplexity", &QuantRun::perplexity, 4, 1.0},
    {"KL mean", &QuantRun::kl_mean, 5, 1.0},
    {"KL median", &QuantRun::kl_median, 5, 1.0},
    {"KL p99", &QuantRun::kl_p99, 4, 1.0},
    {"Top-1 agreement (%)", &QuantRun::top1_agreement, 2, 100.0},
    {"Δp mean", &QuantRun::delta_p_mean, 5, 1.0},
    {"Δp RMS", &QuantRun::delta_p_rms, 5, 1.0},
    {"Prompt tokens/s", &QuantRun::prompt_tokens_per_s, 1, 1.0},
    {"Generation tokens/s", &QuantRun::gen_tokens_per_s, 2, 1.0},
    {"Generation tokens/s at depth", &QuantRun::depth_gen_tokens_per_s, 2, 1.0},
    {"KV bytes per token", &QuantRun::kv_bytes_per_token, 0, 1.0},
    {"Sequences that fit", &QuantRun::fit_sequences, 0, 1.0},
};

QString cell(const std::optional<double>& v, int decimals, double scale) {
  return v ? QString::number(*v * scale, 'f', decimals) : QStringLiteral("–");
}

const QColor kKindColors[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xff, 0x7f, 0x0e), QColor(0x2c, 0xa0, 0x2c),
                              QColor(0xd6, 0x27, 0x28), QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b),
                              QColor(0xe3, 0x77, 0xc2), QColor(0x7f, 0x7f, 0x7f)};

}  // namespace

QuantCompareView::QuantCompareView(QWidget* parent)
    : QWidget(parent), m_table(new QTableWidget(0, 4)), m_errors(new QCustomPlot) {
  m_table->setObjectName(QStringLiteral("compareTable"));
  m_table->verticalHeader()->setVisible(false);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_errors->setObjectName(QStringLiteral("layerErrorPlot"));
  m_errors->setMinimumSize(280, 200);
  m_errors->xAxis->setLabel(tr("layer"));
  m_errors->yAxis->setLabel(tr("relative RMS error of the weights"));
  m_errors->legend->setVisible(true);
  m_errors->legend->setFont(QFont(font().family(), 7));
  auto* splitter = new QSplitter(Qt::Horizontal);
  splitter->addWidget(m_table);
  splitter->addWidget(m_errors);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(splitter);
}

int QuantCompareView::numErrorGraphs() const { return m_errors->graphCount(); }

void QuantCompareView::setRuns(const QuantRun* a, const std::vector<iwb::quant::QuantizedTensor>& tensorsA,
                               const QuantRun* b, const std::vector<iwb::quant::QuantizedTensor>& tensorsB) {
  m_table->clear();
  m_table->setRowCount(0);
  m_table->setHorizontalHeaderLabels({tr("Metric"), a ? QuantRunsModel::label(*a) : QString(),
                                      b ? QuantRunsModel::label(*b) : QString(), tr("Change")});
  if (a != nullptr) {
    m_table->setRowCount(static_cast<int>(std::size(kMetrics)));
    int row = 0;
    for (const Metric& m : kMetrics) {
      m_table->setItem(row, 0, new QTableWidgetItem(tr(m.name)));
      m_table->setItem(row, 1, new QTableWidgetItem(cell(a->*m.field, m.decimals, m.scale)));
      if (b != nullptr) {
        m_table->setItem(row, 2, new QTableWidgetItem(cell(b->*m.field, m.decimals, m.scale)));
        const auto& va = a->*m.field;
        const auto& vb = b->*m.field;
        if (va && vb) {
          QString change = QString::number((*vb - *va) * m.scale, 'f', m.decimals);
          if (*va != 0) change += QStringLiteral(" (%1%)").arg(100.0 * (*vb - *va) / std::abs(*va), 0, 'f', 1);
          m_table->setItem(row, 3, new QTableWidgetItem(change));
        }
      }
      ++row;
    }
  }

  // Per-layer error, one line per tensor kind and run.
  m_errors->clearGraphs();
  auto addRun = [&](const std::vector<iwb::quant::QuantizedTensor>& tensors, const QString& runLabel,
                    Qt::PenStyle style) {
    std::map<std::string, QVector<QPair<double, double>>> byKind;
    for (const auto& t : tensors) {
      if (t.layer < 0 || t.relative_rmse <= 0) continue;  // 1-D tensors are copied: no error
      byKind[t.kind].append({double(t.layer), t.relative_rmse});
    }
    size_t colour = 0;
    for (auto& [kind, points] : byKind) {
      std::sort(points.begin(), points.end());
      QCPGraph* g = m_errors->addGraph();
      g->setName(QStringLiteral("%1 %2").arg(runLabel, QString::fromStdString(kind)));
      g->setPen(QPen(kKindColors[colour++ % std::size(kKindColors)], 1.5, style));
      for (const auto& [layer, error] : points) g->addData(layer, error);
    }
  };
  if (a != nullptr) addRun(tensorsA, QuantRunsModel::label(*a), Qt::SolidLine);
  if (b != nullptr) addRun(tensorsB, QuantRunsModel::label(*b), Qt::DashLine);
  m_errors->rescaleAxes();
  m_errors->replot();
}

}  // namespace iwb::ui
