// The Qt side of the quantization lab's queue: runQueue turns the form's values into the
// engine's (quant/quant_lab.h), runs the queue on the thread this object lives on, and passes
// its progress and outcomes on as queued signals carrying values. The panel moves it onto the
// engine's thread, so the lab never computes beside the chat. cancel() is safe from any thread.
#pragma once

#include "iwb/engine/quant/quant_lab.h"

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QVector>

#include <atomic>

namespace iwb::ui {

struct QuantJob {
  QString type;  // "Q4_K_M" ...; empty: the base itself (no quantization)
  bool isImatrix = false;
  QString kvCacheType = QStringLiteral("f16");  // "f16", "q8_0", ..., or keys/values "q8_0/q4_0"
};

struct QuantLabSettings {
  QString sourcePath;           // the model to quantize (F32/F16/BF16, or quantized: dequantized first)
  QString outputDir;            // where quantized files, the F16 base and the imatrix go
  QString storePath;            // results store
  QString evalTextPath;         // empty: the built-in text
  QString calibrationTextPath;  // imatrix text; empty: the evaluation text
  qint64 context = 512;
  qint64 numChunks = 4;
  qint64 numGenTokens = 16;
  qint64 genDepth = 4096;                            // generation speed after this many tokens in the cache; 0: skip
  qint64 fitContext = 8192;                          // capacity: sequences of this many positions ...
  double fitMemoryBytes = 8.0 * 1024 * 1024 * 1024;  // ... that fit in this memory beside the weights
  int numThreads = 0;
};

// The engine's values for the form's.
iwb::quant::LabSettings toLabSettings(const QuantLabSettings& settings);
std::vector<iwb::quant::LabItem> toLabItems(const QVector<QuantJob>& jobs);

class QuantWorker : public QObject {
  Q_OBJECT

 public:
  explicit QuantWorker(QObject* parent = nullptr);

  // Any thread: the current step stops at its next check; the queue ends.
  void cancel() { m_cancel = true; }
  // Before a new queue is handed over (from the thread that starts queues).
  void clearCancel() { m_cancel = false; }

 public slots:
  // Opens the results store on this thread, runs the queue, then queueFinished or queueFailed.
  void runQueue(const iwb::ui::QuantLabSettings& settings, const QVector<iwb::ui::QuantJob>& jobs);

 signals:
  void progressed(const iwb::quant::LabProgress& progress);
  void runRecorded(qint64 runId);  // a run row was added or finished: the table can reload
  void itemFinished(const iwb::quant::LabItemOutcome& outcome);
  void queueFinished(const iwb::quant::LabReport& report);
  // The whole queue stopped before its items (an unreadable text or store, the base failing).
  void queueFailed(const QString& message);

 private:
  std::atomic<bool> m_cancel{false};
};

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ui::QuantJob)
Q_DECLARE_METATYPE(iwb::ui::QuantLabSettings)
Q_DECLARE_METATYPE(iwb::quant::LabProgress)
Q_DECLARE_METATYPE(iwb::quant::LabItemOutcome)
Q_DECLARE_METATYPE(iwb::quant::LabReport)
