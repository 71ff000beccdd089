// KvCachePanel: layout of the map, legend, details, live numbers, history chart and batch area,
// fed by the engine controller's KV snapshots.
#include "kvmap/kv_cache_panel.h"

#include "kvmap/batch_panel.h"
#include "kvmap/kv_map_model.h"
#include "kvmap/kv_map_widget.h"
#include "widgets/legend_room.h"
#include "worker/engine_controller.h"

#include <qcustomplot.h>

#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QVBoxLayout>

#include <algorithm>

namespace iwb::ui {
namespace {

constexpr int kMaxLegendSequences = 24;  // more would be a wall of text; the hover names any cell
constexpr double kHistoryWindowSeconds = 120;
const QColor kUsedColor(70, 120, 190);
const QColor kCachedLineColor(200, 150, 60);

QString swatch(const QColor& color, const QString& glyph = QStringLiteral("■")) {
  return QStringLiteral("<span style=\"color:%1; font-size:17px\">%2</span>").arg(color.name(), glyph);
}

QString bytesText(quint64 bytes) {
  if (bytes >= (quint64{1} << 30)) return QStringLiteral("%1 GiB").arg(double(bytes) / double(1 << 30), 0, 'f', 2);
  if (bytes >= (quint64{1} << 20)) return QStringLiteral("%1 MiB").arg(double(bytes) / double(1 << 20), 0, 'f', 1);
  if (bytes >= 1024) return QStringLiteral("%1 KiB").arg(double(bytes) / 1024.0, 0, 'f', 1);
  return QStringLiteral("%1 B").arg(bytes);  // a quantized cache's bytes per position
}

}  // namespace

KvCachePanel::KvCachePanel(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      m_engine(engine),
      m_model(new KvMapModel(this)),
      m_map(new KvMapWidget(m_model)),
      m_summary(new QLabel),
      m_legend(new QLabel),
      m_details(new QLabel),
      m_history(new QCustomPlot),
      m_batch(new BatchPanel(engine)) {
  setObjectName(QStringLiteral("kvCachePanel"));
  m_summary->setObjectName(QStringLiteral("kvPoolSummary"));
  m_legend->setObjectName(QStringLiteral("kvLegend"));
  m_legend->setTextFormat(Qt::RichText);
  m_legend->setWordWrap(true);
  m_details->setObjectName(QStringLiteral("kvBlockDetails"));
  m_details->setTextFormat(Qt::PlainText);
  m_details->setWordWrap(true);
  m_details->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  m_details->setMinimumHeight(m_details->fontMetrics().lineSpacing() * 5 + 8);
  m_details->setFrameShape(QFrame::StyledPanel);
  m_details->setMargin(4);
  m_details->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* mapColumn = new QVBoxLayout;
  mapColumn->addWidget(m_summary);
  mapColumn->addWidget(m_map, 1);
  mapColumn->addWidget(m_legend);
  mapColumn->addWidget(m_details);

  auto* statsBox = new QGroupBox(tr("Live"));
  auto* form = new QFormLayout(statsBox);
  form->setLabelAlignment(Qt::AlignLeft);
  for (const KvStatRow& row : m_model->statsRows()) {
    auto* label = new QLabel(row.label);
    auto* value = new QLabel;
    label->setToolTip(row.toolTip);
    value->setToolTip(row.toolTip);
    value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(label, value);
    m_statValues << value;
  }
  m_history->setObjectName(QStringLiteral("kvHistoryChart"));
  m_history->setMinimumHeight(120);
  m_history->xAxis->setLabel(tr("seconds"));
  m_history->yAxis->setLabel(tr("blocks"));
  QFont small = m_history->font();
  small.setPointSize(8);
  m_history->xAxis->setLabelFont(small);
  m_history->yAxis->setLabelFont(small);
  m_history->xAxis->setTickLabelFont(small);
  m_history->yAxis->setTickLabelFont(small);
  m_history->legend->setVisible(true);
  m_history->legend->setFont(small);
  m_history->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  QCPGraph* used = m_history->addGraph();
  used->setName(tr("used"));
  used->setPen(QPen(kUsedColor, 1.5));
  used->setBrush(QColor(kUsedColor.red(), kUsedColor.green(), kUsedColor.blue(), 60));
  // Samples are sparse while idle (one when the engine stops): a value holds until the next.
  used->setLineStyle(QCPGraph::lsStepLeft);
  QCPGraph* cached = m_history->addGraph();
  cached->setName(tr("cached prefix"));
  cached->setPen(QPen(kCachedLineColor, 1.2));
  cached->setLineStyle(QCPGraph::lsStepLeft);
  auto* historyTitle = new QLabel(tr("Blocks over time"));
  auto* side = new QVBoxLayout;
  side->addWidget(statsBox);
  side->addWidget(historyTitle);
  side->addWidget(m_history, 1);
  auto* sideContents = new QWidget;
  sideContents->setLayout(side);
  side->setContentsMargins(0, 0, 0, 0);
  // In a scroll area: on a short window the figures scroll instead of setting the window's
  // height (the column is taller than the map needs).
  auto* sideWidget = new QScrollArea;
  sideWidget->setWidget(sideContents);
  sideWidget->setWidgetResizable(true);
  sideWidget->setFrameShape(QFrame::NoFrame);
  sideWidget->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  sideWidget->setMinimumHeight(160);
  // Fixed: a longer number must not resize the map (and jump every cell).
  sideWidget->setFixedWidth(360 + sideWidget->verticalScrollBar()->sizeHint().width());

  auto* top = new QWidget;
  auto* topLayout = new QHBoxLayout(top);
  topLayout->setContentsMargins(0, 0, 0, 0);
  topLayout->addLayout(mapColumn, 1);
  topLayout->addWidget(sideWidget);

  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->setObjectName(QStringLiteral("kvSplitter"));
  splitter->addWidget(top);
  splitter->addWidget(m_batch);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);
  splitter->setChildrenCollapsible(false);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(splitter);

  connect(m_engine, &EngineController::kvSnapshotReady, m_model, &KvMapModel::setSnapshot);
  connect(m_model, &KvMapModel::changed, this, [this] {
    updateStats();
    updateLegend();
    updateHistory();
  });
  connect(m_map, &KvMapWidget::hoveredBlockChanged, this, &KvCachePanel::showDetails);
  updateStats();
  updateLegend();
  showDetails(-1);
}

QString KvCachePanel::detailsText() const { return m_details->text(); }

QString KvCachePanel::legendText() const { return m_legend->text(); }

QString KvCachePanel::summaryText() const { return m_summary->text(); }

void KvCachePanel::updateStats() {
  const QList<KvStatRow> rows = m_model->statsRows();
  const bool hasPool = !m_model->snapshot().isEmpty();
  for (qsizetype i = 0; i < rows.size() && i < m_statValues.size(); ++i) {
    m_statValues[i]->setText(hasPool ? rows.at(i).value : QStringLiteral("—"));
  }
  QString summary = m_model->poolSummary();
  if (hasPool && m_model->snapshot().bytesPerBlock > 0) {
    const QString type =
        m_model->snapshot().cacheType.isEmpty() ? QStringLiteral("f16") : m_model->snapshot().cacheType;
    const quint64 perBlock = m_model->snapshot().bytesPerBlock;
    summary += tr(", %1 cache, %2 per block").arg(type, bytesText(perBlock));
    if (const qint64 b = m_model->blockSize(); b > 0)
      summary += tr(" (%1 per position)").arg(bytesText(perBlock / quint64(b)));
  }
  m_summary->setText(summary);
}

void KvCachePanel::updateLegend() {
  QStringList items;
  items << swatch(KvMapModel::freeColor()) + tr(" free");
  items << swatch(KvMapModel::cachedHatchColor(), QStringLiteral("▨")) + tr(" cached prefix (reusable)");
  items << swatch(KvMapModel::sequenceColor(1), QStringLiteral("◧")) + tr(" in use, filled from the left");
  items << swatch(KvMapModel::sharedMarkColor(), QStringLiteral("▣")) + tr(" shared (framed)");
  const QList<quint64> sequences = m_model->sequences();
  QStringList owners;
  for (qsizetype i = 0; i < sequences.size() && i < kMaxLegendSequences; ++i) {
    owners << swatch(KvMapModel::sequenceColor(sequences.at(i))) + QLatin1Char(' ') +
                  m_model->sequenceLabel(sequences.at(i)).toHtmlEscaped();
  }
  if (sequences.size() > kMaxLegendSequences) owners << tr("and %1 more").arg(sequences.size() - kMaxLegendSequences);
  QString html = items.join(QStringLiteral("&nbsp;&nbsp; "));
  if (!owners.isEmpty()) html += QStringLiteral("<br>") + owners.join(QStringLiteral("&nbsp;&nbsp; "));
  m_legend->setText(html);
}

void KvCachePanel::updateHistory() {
  const QVector<double>& t = m_model->historySeconds();
  QVector<double> x(t.size());
  const double t0 = t.isEmpty() ? 0 : t.constFirst();
  for (qsizetype i = 0; i < t.size(); ++i) x[i] = t[i] - t0;
  m_history->graph(0)->setData(x, m_model->historyUsed(), true);
  m_history->graph(1)->setData(x, m_model->historyCached(), true);
  // The last two minutes: a long session does not squeeze the batch running now to a sliver.
  const double last = x.isEmpty() ? 0.0 : x.constLast();
  m_history->xAxis->setRange(std::max(0.0, last - kHistoryWindowSeconds), std::max(10.0, last));
  // Scaled to what was used, not to the pool: a few dozen blocks of a thousand stay readable.
  double top = 0;
  for (qsizetype i = 0; i < x.size(); ++i) {
    top = std::max(top, m_model->historyUsed()[i] + m_model->historyCached()[i]);
  }
  const double poolBlocks = std::max<double>(1.0, double(m_model->numBlocks()));
  // Under the legend in the top left corner, up to the pool's size.
  setValueRangeBelowLegend(
      m_history, {.bottom = 0, .top = top, .minimumHeadroom = 1.25, .minimumUpper = 16.0, .maximumUpper = poolBlocks});
  m_history->replot(QCustomPlot::rpQueuedReplot);
}

void KvCachePanel::showDetails(qint64 block) {
  if (block < 0) {
    m_details->setText(m_model->snapshot().isEmpty()
                           ? tr("The map fills in when a model is loaded.")
                           : tr("Hover over a block to see its owners, token range, reference count and text."));
    return;
  }
  m_details->setText(m_model->hoverText(block));
}

}  // namespace iwb::ui
