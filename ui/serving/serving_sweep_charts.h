// The Serving tab's charts after a sweep: p50/p99 TTFT and ITL against the load each point
// achieved (concurrency labelled, SLO lines, the knee marked), one or two runs overlaid, and
// the measured decode throughput per concurrency beside the roofline prediction for a GPU.
#pragma once

#include "serving/serving_curve.h"

#include "iwb/engine/remote/bench_serve.h"

#include <QString>
#include <QVector>
#include <QWidget>

class QCustomPlot;

namespace iwb::ui {

struct DecodeBound {
  QString label;  // "H100 SXM, llama-3-8b F16"
  QVector<double> concurrency;
  QVector<double> tokensPerS;  // predicted, per concurrency
};

class ServingSweepCharts : public QWidget {
  Q_OBJECT

 public:
  explicit ServingSweepCharts(QWidget* parent = nullptr);

  // Up to two runs; the SLO lines are the first run's.
  void setCurves(const QVector<ServingCurve>& curves, const iwb::remote::GoodputSlo& slo, LoadAxis axis);
  void setBound(const DecodeBound& bound);  // empty concurrency: no prediction drawn
  const QVector<ServingCurve>& curves() const { return m_curves; }

  // The three charts side by side in one PNG (each drawn by QCustomPlot::toPixmap).
  bool savePng(const QString& path, int width = 1500, int height = 420) const;

  QCustomPlot* ttftPlot() const { return m_ttft; }
  QCustomPlot* itlPlot() const { return m_itl; }
  QCustomPlot* decodePlot() const { return m_decode; }

 private:
  void redraw();
  void drawLatency(QCustomPlot* plot, bool isTtft);
  void drawDecode();

  QCustomPlot* m_ttft;
  QCustomPlot* m_itl;
  QCustomPlot* m_decode;
  QVector<ServingCurve> m_curves;
  iwb::remote::GoodputSlo m_slo;
  LoadAxis m_axis = LoadAxis::OutputTokensPerS;
  DecodeBound m_bound;
};

}  // namespace iwb::ui
