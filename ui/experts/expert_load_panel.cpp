// ExpertLoadPanel: the expert-load heatmap (QCustomPlot colour map), its summary and the
// per-layer table, fed by EngineController::expertLoadReady.
#include "experts/expert_load_panel.h"

#include "experts/expert_load_model.h"
#include "worker/engine_controller.h"

#include <qcustomplot.h>

#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>

namespace iwb::ui {

ExpertLoadPanel::ExpertLoadPanel(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      m_model(new ExpertLoadModel(this)),
      m_summary(new QLabel),
      m_body(new QSplitter(Qt::Vertical)),
      m_plot(new QCustomPlot),
      m_table(new QTableView) {
  setObjectName(QStringLiteral("expertLoadPanel"));
  m_summary->setObjectName(QStringLiteral("expertLoadSummary"));
  m_summary->setWordWrap(true);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);

  m_plot->setObjectName(QStringLiteral("expertLoadHeatmap"));
  m_plot->setMinimumHeight(220);
  m_plot->xAxis->setLabel(tr("expert"));
  m_plot->yAxis->setLabel(tr("layer"));
  m_plot->yAxis->setRangeReversed(true);  // layer 0 at the top, as the model runs
  m_map = new QCPColorMap(m_plot->xAxis, m_plot->yAxis);
  m_scale = new QCPColorScale(m_plot);
  m_scale->setType(QCPAxis::atRight);
  m_scale->axis()->setLabel(tr("tokens routed / mean per expert"));
  m_plot->plotLayout()->addElement(0, 1, m_scale);
  m_map->setColorScale(m_scale);
  m_map->setInterpolate(false);
  // White for an expert no token reached, blue around an even share, red for a hot expert.
  QCPColorGradient gradient;
  gradient.setColorStopAt(0.0, QColor(250, 250, 250));
  gradient.setColorStopAt(0.25, QColor(120, 170, 220));
  gradient.setColorStopAt(0.5, QColor(40, 90, 170));
  gradient.setColorStopAt(0.75, QColor(230, 140, 40));
  gradient.setColorStopAt(1.0, QColor(200, 30, 30));
  gradient.setNanHandling(QCPColorGradient::nhTransparent);  // dense layers: no experts to colour
  m_map->setGradient(gradient);
  auto* margins = new QCPMarginGroup(m_plot);
  m_plot->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  m_scale->setMarginGroup(QCP::msBottom | QCP::msTop, margins);

  m_table->setObjectName(QStringLiteral("expertLoadTable"));
  m_table->setModel(m_model);
  m_table->verticalHeader()->hide();
  m_table->setAlternatingRowColors(true);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);

  m_body->addWidget(m_plot);
  m_body->addWidget(m_table);
  m_body->setStretchFactor(0, 3);
  m_body->setStretchFactor(1, 1);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_summary);
  layout->addWidget(m_body, 1);

  connect(engine, &EngineController::expertLoadReady, this, &ExpertLoadPanel::setSnapshot);
  connect(engine, &EngineController::modelUnloaded, this, [this] { setSnapshot(iwb::ExpertLoadSnapshot{}); });
  redraw();
}

void ExpertLoadPanel::setSnapshot(const iwb::ExpertLoadSnapshot& snapshot) {
  m_model->setSnapshot(snapshot);
  redraw();
}

QString ExpertLoadPanel::summaryText() const { return m_summary->text(); }

void ExpertLoadPanel::redraw() {
  const iwb::ExpertLoadSnapshot& s = m_model->snapshot();
  m_body->setVisible(s.is_moe());
  if (!s.is_moe()) {
    m_summary->setText(s.num_layers > 0
                           ? tr("The loaded model is dense: every token runs the same feed-forward weights, so "
                                "there is no routing to show. Load a mixture-of-experts model (qwen3moe) to see "
                                "how its router spreads tokens over the experts.")
                           : tr("No model is loaded. With a mixture-of-experts model (qwen3moe) generating, this "
                                "tab shows how many tokens each layer's router sent to each expert."));
    return;
  }
  const QLocale locale;
  QString text = tr("%1 experts per layer, %2 per token. Last %3 of at most %4 steps: %5 tokens.")
                     .arg(s.num_experts)
                     .arg(s.num_experts_used)
                     .arg(s.num_steps)
                     .arg(s.window_steps)
                     .arg(locale.toString(static_cast<qlonglong>(s.num_tokens)));
  const int worst = m_model->mostImbalancedLayer();
  if (worst >= 0) {
    const int expert = m_model->busiestExpert(worst);
    text += QLatin1Char(' ') + tr("Most uneven: layer %1, whose expert %2 took %3× an even share; %4 of its "
                                  "experts saw no token.")
                                   .arg(worst)
                                   .arg(expert)
                                   .arg(m_model->relativeLoad(worst, expert), 0, 'f', 2)
                                   .arg(m_model->idleExperts(worst));
  } else {
    text += QLatin1Char(' ') + tr("No token has run through the model yet.");
  }
  if (s.num_dense_layers == 1) {
    text += QLatin1Char(' ') + tr("Layer 0 has a dense feed-forward block (no experts: a blank row).");
  } else if (s.num_dense_layers > 1) {
    text += QLatin1Char(' ') +
            tr("Layers 0 to %1 have dense feed-forward blocks (no experts: blank rows).").arg(s.num_dense_layers - 1);
  }
  m_summary->setText(text);

  const int nx = static_cast<int>(s.num_experts), ny = static_cast<int>(s.num_layers);
  m_map->data()->setSize(nx, ny);
  m_map->data()->setRange(QCPRange(0, nx - 1), QCPRange(0, ny - 1));
  double highest = 2.0;  // at least twice an even share, so an even spread reads as the middle
  for (int l = 0; l < ny; ++l) {
    for (int e = 0; e < nx; ++e) {
      if (s.is_dense_layer(l)) {
        m_map->data()->setCell(e, l, std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      const double v = m_model->relativeLoad(l, e);
      highest = std::max(highest, v);
      m_map->data()->setCell(e, l, v);
    }
  }
  m_map->setDataRange(QCPRange(0, highest));
  m_plot->xAxis->setRange(-0.5, nx - 0.5);
  m_plot->yAxis->setRange(-0.5, ny - 0.5);
  m_plot->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace iwb::ui
