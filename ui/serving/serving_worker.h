// The Serving tab's load runs off the GUI thread: a ServingWorker lives on its own QThread,
// opens the results store there, runs iwb::remote::run_bench_serve and passes what the live
// charts need on as small value structs in queued signals (throttled, never the whole run).
// cancel() may be called from any thread: the run stops and is stored as interrupted.
#pragma once

#include "iwb/engine/remote/bench_serve.h"

#include <QElapsedTimer>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QVector>

#include <atomic>
#include <optional>

namespace iwb::ui {

struct ServingRunRequest {
  iwb::remote::BenchServeConfig config;
  QString label;      // the user's name for the run; stored with it
  QString storePath;  // results store; empty: the default one
};

// One live update: the load so far, from the client and (when the server has /metrics) from
// the server's newest scrape.
struct ServingLiveSample {
  double seconds = 0;  // since the run began (all sweep points on one axis)
  int pointIndex = 0;
  int numPoints = 1;
  qint64 concurrency = 0;  // the point's cap; 0 = none
  qint64 numCompleted = 0;
  qint64 numFailed = 0;
  // Over the newest finished requests (a sliding window of kLatencyWindow), milliseconds.
  double ttftP50 = 0, ttftP99 = 0, itlP50 = 0, itlP99 = 0;
  bool hasLatency = false;
  double outputTokensPerS = 0;  // over the last kThroughputWindowSeconds
  // From the newest scrape; absent when the server exports none of them.
  std::optional<double> kvCacheUsage, numRunning, numWaiting;
  // Accepted drafts per position / drafts, since the run began (empty: no speculation seen).
  QVector<double> acceptancePerPosition;
};

class ServingWorker : public QObject {
  Q_OBJECT

 public:
  static constexpr int kLatencyWindow = 32;
  static constexpr double kThroughputWindowSeconds = 3.0;
  static constexpr int kMinEmitIntervalMs = 100;

  explicit ServingWorker(QObject* parent = nullptr);

  void cancel() { m_cancel = true; }  // any thread
  // Before a run is handed over, from the thread that starts runs (a Stop pressed before the
  // queued run begins still counts).
  void clearCancel() { m_cancel = false; }

 public slots:
  // Blocking on this object's thread: begin the stored run, load, finish it, then runFinished
  // (or runFailed when nothing could be measured or stored).
  void run(const iwb::ui::ServingRunRequest& request);

 signals:
  void runStarted(qint64 runId);  // the store row exists (status running)
  void sampled(const iwb::ui::ServingLiveSample& sample);
  // status: done | interrupted | failed (as stored). runId 0 when the store could not be opened.
  void runFinished(qint64 runId, const iwb::remote::BenchServeResult& result, const QString& status,
                   const QString& error);
  void runFailed(const QString& message);

 private:
  void handleProgress(const iwb::remote::BenchServeProgress& progress);

  std::atomic<bool> m_cancel{false};
  // Live state: during a run touched by the load's threads, one at a time (run_bench_serve
  // reports under its lock), and read by run() after they are joined.
  QElapsedTimer m_clock;
  QElapsedTimer m_sinceEmit;
  int m_pointIndex = -1;
  size_t m_numSeenRequests = 0;
  size_t m_numSeenScrapes = 0;
  QVector<double> m_recentTtft;                              // the window: one per request
  QVector<QVector<double>> m_recentItl;                      // every gap of those requests
  QVector<QPair<double, qint64>> m_recentTokens;             // (seconds, output tokens) of finished requests
  std::optional<iwb::remote::ServerSnapshot> m_firstScrape;  // of the run, for speculation counters
  ServingLiveSample m_sample;
};

// The live sample's percentile of a window (type 7, as iwb::percentile).
double windowPercentile(QVector<double> values, double p);

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ui::ServingRunRequest)
Q_DECLARE_METATYPE(iwb::ui::ServingLiveSample)
Q_DECLARE_METATYPE(iwb::remote::BenchServeResult)
