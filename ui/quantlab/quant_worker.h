// The quantization lab's queue, run on a worker thread: for each setting, quantize the base
// model, evaluate the result against it (perplexity, KL divergence, speed) and record the run
// in the results store, which the worker opens in its own thread. A quantized source is first
// dequantized to an F16 base (said so in the runs' notes); the base's own run is the reference.
// Values cross threads in queued signals; cancel() is safe from any thread.
#pragma once

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QVector>

#include <atomic>

namespace iwb::ui {

struct QuantJob {
  QString type;              // "Q4_K_M" ...; empty: the base itself (no quantization)
  bool isImatrix = false;
  QString kvCacheType = QStringLiteral("f16");  // "f16" or "q8_0" (the 8-bit KV cache)
};

struct QuantLabSettings {
  QString sourcePath;        // the model to quantize (F32/F16/BF16, or quantized: dequantized first)
  QString outputDir;         // where quantized files, the F16 base and the imatrix go
  QString storePath;         // results store
  QString evalTextPath;      // empty: the built-in text
  QString calibrationTextPath;  // imatrix text; empty: the evaluation text
  qint64 context = 512;
  qint64 numChunks = 4;
  qint64 numGenTokens = 16;
  int numThreads = 0;
};

class QuantWorker : public QObject {
  Q_OBJECT

 public:
  explicit QuantWorker(QObject* parent = nullptr);

  // Any thread: the current step stops at its next check; the queue ends.
  void cancel() { m_cancel = true; }
  // Before a new queue is handed over (from the thread that starts queues).
  void clearCancel() { m_cancel = false; }

 public slots:
  void runQueue(const iwb::ui::QuantLabSettings& settings, const QVector<iwb::ui::QuantJob>& jobs);

 signals:
  // overall: 0..1 over the whole queue; stage: what is happening now.
  void progressed(double overall, const QString& stage);
  void runRecorded(qint64 runId);  // a run row was added or finished: the table can reload
  void jobFailed(const QString& label, const QString& message);
  void queueFinished(bool wasCancelled, const QString& summary);

 private:
  std::atomic<bool> m_cancel{false};
};

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ui::QuantJob)
Q_DECLARE_METATYPE(iwb::ui::QuantLabSettings)
