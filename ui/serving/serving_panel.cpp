// ServingPanel: the worker thread, Start/Stop, live samples to the live charts, stored runs to
// the sweep charts and the roofline bound, and the exports.
#include "serving/serving_panel.h"

#include "serving/serving_bound_box.h"
#include "serving/serving_live_charts.h"
#include "serving/serving_runs_model.h"
#include "serving/serving_sweep_charts.h"
#include "serving/serving_worker.h"
#include "store/results_store_access.h"
#include "worker/engine_controller.h"

#include "iwb/engine/store/results_store.h"

#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSet>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QThread>
#include <QVBoxLayout>

#include <algorithm>

namespace iwb::ui {

ServingPanel::ServingPanel(EngineController* engine, const QString& storePath, QWidget* parent)
    : QWidget(parent),
      m_storePath(storePath),
      m_thread(new QThread(this)),
      m_worker(new ServingWorker),
      m_chartTabs(new QTabWidget),
      m_live(new ServingLiveCharts),
      m_sweep(new ServingSweepCharts),
      m_axisBox(new QComboBox),
      m_bound(new ServingBoundBox),
      m_runsModel(new ServingRunsModel(this)),
      m_runsView(new QTableView) {
  m_thread->setObjectName(QStringLiteral("serving load"));
  m_worker->moveToThread(m_thread);
  connect(m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
  connect(m_worker, &ServingWorker::runStarted, this, &ServingPanel::reloadRuns);  // the running row
  connect(m_worker, &ServingWorker::sampled, this, &ServingPanel::handleSample);
  connect(m_worker, &ServingWorker::runFinished, this, &ServingPanel::handleFinished);
  connect(m_worker, &ServingWorker::runFailed, this, &ServingPanel::handleFailed);
  m_thread->start();

  m_axisBox->setObjectName(QStringLiteral("servingAxisBox"));
  m_axisBox->addItem(tr("Load as output tokens/s"), static_cast<int>(LoadAxis::OutputTokensPerS));
  m_axisBox->addItem(tr("Load as requests/s"), static_cast<int>(LoadAxis::RequestsPerS));
  auto* sweepPage = new QWidget;
  auto* sweepLayout = new QVBoxLayout(sweepPage);
  auto* sweepBar = new QHBoxLayout;
  sweepBar->addWidget(m_axisBox);
  sweepBar->addStretch(1);
  sweepLayout->addLayout(sweepBar);
  sweepLayout->addWidget(m_sweep, 1);
  m_chartTabs->setObjectName(QStringLiteral("servingChartTabs"));
  m_chartTabs->addTab(m_live, tr("Live"));
  m_chartTabs->addTab(sweepPage, tr("Sweep"));

  auto* left = new QWidget;
  auto* leftLayout = new QVBoxLayout(left);
  leftLayout->setContentsMargins(0, 0, 0, 0);
  leftLayout->addWidget(makeSetupForm());
  leftLayout->addWidget(m_bound);
  leftLayout->addStretch(1);
  auto* scroll = new QScrollArea;
  scroll->setWidget(left);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setMinimumWidth(left->sizeHint().width() + 24);

  auto* right = new QSplitter(Qt::Vertical);
  right->addWidget(m_chartTabs);
  right->addWidget(makeRunsBox());
  right->setStretchFactor(0, 3);
  right->setStretchFactor(1, 1);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(scroll);
  layout->addWidget(right, 1);

  connect(m_axisBox, &QComboBox::currentIndexChanged, this, [this] { showRuns(m_shownIds); });
  connect(m_runsModel, &ServingRunsModel::shownChanged, this, &ServingPanel::showRuns);
  connect(m_bound, &ServingBoundBox::changed, this, &ServingPanel::updateBound);
  if (engine != nullptr) {
    connect(engine, &EngineController::modelLoaded, this, [this](const LoadedModel& model) {
      m_bound->setLocalModelPath(model.path);
      if (!m_shownIds.isEmpty() && m_loaded.contains(m_shownIds.first())) {
        m_bound->matchServedModel(QString::fromStdString(m_loaded[m_shownIds.first()].config.model));
      }
    });
  }
  updateEnabled();
  reloadRuns();
  updateBound();
}

ServingPanel::~ServingPanel() {
  // A run in progress stops at its next check (between stream chunks) and is stored as
  // interrupted before the thread ends.
  m_worker->cancel();
  m_thread->quit();
  m_thread->wait();
}

QWidget* ServingPanel::makeRunsBox() {
  m_runsView->setObjectName(QStringLiteral("servingRunsView"));
  m_runsView->setModel(m_runsModel);
  m_runsView->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_runsView->verticalHeader()->hide();
  m_runsView->horizontalHeader()->setStretchLastSection(true);
  m_runsView->setToolTip(tr("Tick one run to draw it, two to draw them side by side"));
  auto* refresh = new QPushButton(tr("Reload"));
  auto* csv = new QPushButton(tr("Export CSV…"));
  csv->setObjectName(QStringLiteral("servingCsvButton"));
  auto* png = new QPushButton(tr("Export PNG…"));
  png->setObjectName(QStringLiteral("servingPngButton"));
  connect(refresh, &QPushButton::clicked, this, &ServingPanel::reloadRuns);
  connect(csv, &QPushButton::clicked, this, &ServingPanel::browseCsv);
  connect(png, &QPushButton::clicked, this, &ServingPanel::browsePng);
  auto* box = new QWidget;
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Stored runs")));
  bar->addStretch(1);
  bar->addWidget(refresh);
  bar->addWidget(csv);
  bar->addWidget(png);
  layout->addLayout(bar);
  layout->addWidget(m_runsView, 1);
  return box;
}

bool ServingPanel::start() {
  if (m_isRunning) {
    setStatus(tr("A run is in progress."));
    return false;
  }
  auto made = config();
  if (!made) {
    setStatus(QString::fromStdString(made.error_message()));
    return false;
  }
  ServingRunRequest request{*made, m_labelEdit->text().trimmed(), m_storePath};
  m_isRunning = true;
  m_live->clear();
  m_chartTabs->setCurrentWidget(m_live);
  setStatus(tr("Starting the load on %1…").arg(QString::fromStdString(made->endpoint.base_url)));
  updateEnabled();
  m_worker->clearCancel();
  QMetaObject::invokeMethod(
      m_worker, [worker = m_worker, request] { worker->run(request); }, Qt::QueuedConnection);
  return true;
}

void ServingPanel::stop() {
  if (!m_isRunning) return;
  m_worker->cancel();
  m_stopButton->setEnabled(false);
  setStatus(tr("Stopping: the requests in flight end, and the run is stored as interrupted…"));
}

QString ServingPanel::statusText() const { return m_statusLabel->text(); }

void ServingPanel::handleSample(const ServingLiveSample& s) {
  m_live->addSample(s);
  if (!m_isRunning || !m_stopButton->isEnabled()) return;
  QString text = s.numPoints > 1
                     ? tr("Point %1 of %2 (c=%3): ").arg(s.pointIndex + 1).arg(s.numPoints).arg(s.concurrency)
                     : QString();
  text += tr("%n request(s) done", nullptr, static_cast<int>(s.numCompleted));
  if (s.numFailed > 0) text += tr(", %n failed", nullptr, static_cast<int>(s.numFailed));
  text += tr(", %1 tokens/s").arg(s.outputTokensPerS, 0, 'f', 1);
  setStatus(text);
}

void ServingPanel::handleFinished(qint64 runId, const iwb::remote::BenchServeResult& result, const QString& status,
                                  const QString& error) {
  m_isRunning = false;
  m_loaded.insert(runId, result);
  QString text = tr("Run %1 %2: %n point(s)", nullptr, static_cast<int>(result.points.size())).arg(runId).arg(status);
  const QString failures = failureSummary(result);
  if (!failures.isEmpty()) text += QLatin1String(", ") + failures;
  if (!error.isEmpty()) text += QLatin1String(" — ") + error;
  setStatus(text);
  updateEnabled();
  reloadRuns();
  // The new run alone on the curves; a second one can be ticked beside it.
  for (qint64 id : m_runsModel->shownIds()) m_runsModel->setShown(id, false);
  m_runsModel->setShown(runId, true);
  if (!result.points.empty()) m_chartTabs->setCurrentIndex(1);
  emit statusMessage(text);
  emit runFinished(runId, status);
}

void ServingPanel::handleFailed(const QString& message) {
  m_isRunning = false;
  setStatus(message);
  updateEnabled();
  emit statusMessage(message);
}

void ServingPanel::reloadRuns() {
  auto store = ResultsStoreAccess(m_storePath).openOnThisThread();
  if (!store) {
    setStatus(tr("The results store cannot be opened: %1").arg(QString::fromStdString(store.error_message())));
    return;
  }
  auto runs = (*store)->list_serve_runs();
  if (!runs) {
    setStatus(tr("Stored runs cannot be read: %1").arg(QString::fromStdString(runs.error_message())));
    return;
  }
  m_runsModel->setRuns(*runs);
  m_runsView->resizeColumnsToContents();
}

QString ServingPanel::runName(qint64 id) const {
  const int row = m_runsModel->rowOf(id);
  const auto* r = m_runsModel->run(row);
  if (r != nullptr && !r->label.empty()) return QString::fromStdString(r->label);
  if (r != nullptr) return tr("#%1 %2").arg(id).arg(QString::fromStdString(r->server_kind));
  return tr("#%1").arg(id);
}

void ServingPanel::showRuns(const QList<qint64>& ids) {
  m_shownIds = ids;
  std::unique_ptr<iwb::ResultsStore> store;
  QVector<ServingCurve> curves;
  iwb::remote::GoodputSlo slo;
  const auto axis = static_cast<LoadAxis>(m_axisBox->currentData().toInt());
  for (qint64 id : ids) {
    const auto* summary = m_runsModel->run(m_runsModel->rowOf(id));
    const bool isFinal = summary != nullptr && summary->status != "running";
    if (!m_loaded.contains(id) || !isFinal) {
      if (!store) {
        auto opened = ResultsStoreAccess(m_storePath).openOnThisThread();
        if (!opened) {
          setStatus(QString::fromStdString(opened.error_message()));
          return;
        }
        store = std::move(*opened);
      }
      auto run = store->serve_run(id);
      if (!run) {
        setStatus(tr("Run %1 cannot be read: %2").arg(id).arg(QString::fromStdString(run.error_message())));
        continue;
      }
      m_loaded.insert(id, *run);
    }
    const iwb::remote::BenchServeResult& result = m_loaded[id];
    if (curves.isEmpty()) {
      slo = result.config.goodput;
      m_bound->matchServedModel(QString::fromStdString(result.config.model));
    }
    curves << servingCurve(result, axis, runName(id));
  }
  m_sweep->setCurves(curves, slo, axis);
  updateBound();
}

void ServingPanel::updateBound() {
  QSet<double> seen;
  QVector<double> concurrency;
  qint64 inputLen = m_inputLenBox->value(), outputLen = m_outputLenBox->value();
  for (const ServingCurve& c : m_sweep->curves()) {
    for (qint64 v : c.concurrency) {
      if (v > 0 && !seen.contains(static_cast<double>(v))) {
        seen.insert(static_cast<double>(v));
        concurrency << static_cast<double>(v);
      }
    }
  }
  if (!m_shownIds.isEmpty() && m_loaded.contains(m_shownIds.first())) {
    inputLen = m_loaded[m_shownIds.first()].config.input_len;
    outputLen = m_loaded[m_shownIds.first()].config.output_len;
  }
  if (concurrency.isEmpty()) concurrency = {1, 2, 4, 8, 16, 32, 64};
  std::sort(concurrency.begin(), concurrency.end());
  m_sweep->setBound(m_bound->bound(concurrency, inputLen, outputLen));
}

bool ServingPanel::exportCsv(const QString& path, QString* error) const {
  if (m_shownIds.isEmpty()) {
    *error = tr("Tick a stored run to export.");
    return false;
  }
  QString text;
  for (qint64 id : m_shownIds) {
    if (!m_loaded.contains(id)) continue;
    const QString csv = servingCsv(m_loaded[id], runName(id));
    text += text.isEmpty() ? csv : csv.section(QLatin1Char('\n'), 1);  // one header line
  }
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(text.toUtf8()) < 0) {
    *error = tr("%1 cannot be written: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

bool ServingPanel::exportPng(const QString& path) const { return m_sweep->savePng(path); }

void ServingPanel::browseCsv() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export the shown runs"), QStringLiteral("serving.csv"),
                                                    tr("CSV files (*.csv)"));
  if (path.isEmpty()) return;
  QString error;
  setStatus(exportCsv(path, &error) ? tr("Saved %1").arg(path) : error);
}

void ServingPanel::browsePng() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export the sweep charts"), QStringLiteral("serving.png"),
                                                    tr("PNG images (*.png)"));
  if (path.isEmpty()) return;
  setStatus(exportPng(path) ? tr("Saved %1").arg(path) : tr("%1 cannot be written").arg(path));
}

void ServingPanel::updateEnabled() {
  m_startButton->setEnabled(!m_isRunning);
  m_stopButton->setEnabled(m_isRunning);
}

void ServingPanel::setStatus(const QString& text) { m_statusLabel->setText(text); }

}  // namespace iwb::ui
