// ServingWorker: the stored run around run_bench_serve, and its progress callbacks (on the
// load's threads, serialised by it) reduced to ServingLiveSample values at most every kMinEmitIntervalMs.
#include "serving/serving_worker.h"

#include "iwb/engine/profile/metrics.h"
#include "iwb/engine/store/results_store.h"
#include "store/results_store_access.h"

namespace iwb::ui {

double windowPercentile(QVector<double> values, double p) {
  return iwb::percentile(std::span<const double>(values.constData(), static_cast<size_t>(values.size())), p);
}

ServingWorker::ServingWorker(QObject* parent) : QObject(parent) {
  qRegisterMetaType<iwb::ui::ServingRunRequest>();
  qRegisterMetaType<iwb::ui::ServingLiveSample>();
  qRegisterMetaType<iwb::remote::BenchServeResult>();
}

void ServingWorker::run(const ServingRunRequest& request) {
  m_pointIndex = -1;
  m_numSeenRequests = m_numSeenScrapes = 0;
  m_recentTtft.clear();
  m_recentItl.clear();
  m_recentTokens.clear();
  m_firstScrape.reset();
  m_sample = {};
  m_clock.start();
  m_sinceEmit.start();

  // The connection is made here, on the thread that uses it, and closed before returning.
  auto store = ResultsStoreAccess(request.storePath).openOnThisThread();
  if (!store) {
    emit runFailed(tr("The results store cannot be opened: %1").arg(QString::fromStdString(store.error_message())));
    return;
  }
  auto runId = (*store)->begin_serve_run(request.config, request.label.toStdString());
  if (!runId) {
    emit runFailed(tr("The run cannot be stored: %1").arg(QString::fromStdString(runId.error_message())));
    return;
  }
  emit runStarted(*runId);

  auto result = iwb::remote::run_bench_serve(
      request.config, [this](const iwb::remote::BenchServeProgress& p) { handleProgress(p); }, &m_cancel);
  QString status, error;
  iwb::remote::BenchServeResult stored;
  if (result) {
    stored = std::move(*result);
    status = m_cancel ? QStringLiteral("interrupted") : QStringLiteral("done");
  } else {
    stored.config = request.config;
    status = m_cancel ? QStringLiteral("interrupted") : QStringLiteral("failed");
    error = QString::fromStdString(result.error_message());
  }
  if (m_pointIndex >= 0) emit sampled(m_sample);  // the last, unthrottled
  const iwb::Status finished = (*store)->finish_serve_run(*runId, stored, status.toStdString(), error.toStdString());
  if (!finished.is_ok()) {
    error = error.isEmpty() ? QString::fromStdString(finished.message())
                            : error + QLatin1String("; ") + QString::fromStdString(finished.message());
  }
  emit runFinished(*runId, stored, status, error);
}

void ServingWorker::handleProgress(const iwb::remote::BenchServeProgress& progress) {
  if (progress.point == nullptr) return;
  const iwb::remote::BenchServePoint& point = *progress.point;
  const double now = static_cast<double>(m_clock.nsecsElapsed()) * 1e-9;
  if (progress.point_index != m_pointIndex) {  // a new sweep point: its vectors start empty
    m_pointIndex = progress.point_index;
    m_numSeenRequests = m_numSeenScrapes = 0;
  }
  for (size_t i = m_numSeenRequests; i < point.requests.size(); ++i) {
    const iwb::remote::RequestRecord& r = point.requests[i];
    if (r.error.kind != iwb::remote::RemoteErrorKind::None) continue;
    m_recentTtft.append(r.ttft_ms);
    m_recentItl.append(QVector<double>(r.itl_ms.begin(), r.itl_ms.end()));
    m_recentTokens.append({now, r.output_tokens});
  }
  m_numSeenRequests = point.requests.size();
  while (m_recentTtft.size() > kLatencyWindow) m_recentTtft.removeFirst();
  while (m_recentItl.size() > kLatencyWindow) m_recentItl.removeFirst();
  while (!m_recentTokens.isEmpty() && m_recentTokens.first().first < now - kThroughputWindowSeconds) {
    m_recentTokens.removeFirst();
  }

  ServingLiveSample& s = m_sample;
  s.seconds = now;
  s.pointIndex = progress.point_index;
  s.numPoints = progress.num_points;
  s.concurrency = point.max_concurrency;
  s.numCompleted = point.num_completed;
  s.numFailed = point.num_failed;
  s.hasLatency = !m_recentTtft.isEmpty();
  if (s.hasLatency) {
    QVector<double> itl;
    for (const QVector<double>& gaps : std::as_const(m_recentItl)) itl += gaps;
    s.ttftP50 = windowPercentile(m_recentTtft, 50);
    s.ttftP99 = windowPercentile(m_recentTtft, 99);
    s.itlP50 = windowPercentile(itl, 50);
    s.itlP99 = windowPercentile(itl, 99);
  }
  qint64 tokens = 0;
  for (const auto& [at, n] : std::as_const(m_recentTokens)) tokens += n;
  const double window = std::min(kThroughputWindowSeconds, now);
  s.outputTokensPerS = window > 0 ? static_cast<double>(tokens) / window : 0;

  if (point.server_series.size() > m_numSeenScrapes) {
    m_numSeenScrapes = point.server_series.size();
    const iwb::remote::ServerSnapshot& latest = point.server_series.back();
    if (!m_firstScrape) m_firstScrape = point.server_series.front();
    s.kvCacheUsage = latest.kv_cache_usage;
    s.numRunning = latest.num_requests_running;
    s.numWaiting = latest.num_requests_waiting;
    s.acceptancePerPosition.clear();
    const auto delta = iwb::remote::counter_difference(*m_firstScrape, latest);
    if (delta.spec_num_drafts && *delta.spec_num_drafts > 0) {
      for (double accepted : delta.spec_accepted_per_position)
        s.acceptancePerPosition << accepted / *delta.spec_num_drafts;
    }
  }
  if (m_sinceEmit.elapsed() >= kMinEmitIntervalMs) {
    m_sinceEmit.restart();
    emit sampled(s);
  }
}

}  // namespace iwb::ui
