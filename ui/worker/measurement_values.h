// Plain values the engine worker sends about what it measured: profile snapshots (the
// engine's decimated kernel records), each finished request's timings with its predicted work,
// and samples of the process's memory. Copyable and registered for queued connections.
#pragma once

#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/profile/metrics.h"
#include "iwb/engine/profile/profile_aggregate.h"

#include <QList>
#include <QMetaType>
#include <QString>

#include <optional>

namespace iwb::ui {

// One finished request, as the metrics panel needs it. Times on the session clock are seconds
// since the worker started (one clock for every request, so requests line up on a timeline).
// Request ids of the local server's requests in measurements: this bit and the engine's id (the
// chat's ids are small counters, so the two never meet).
inline constexpr quint64 kServedRequestBit = quint64{1} << 48;

struct RequestMeasurement {
  quint64 requestId = 0;  // the caller's id; a served request's has kServedRequestBit
  QString modelName;
  QString finishReason;       // iwb::finish_reason_name()
  double addedAtSeconds = 0;  // session clock: when the request was queued
  int numGeneratedTokens = 0;
  iwb::RequestTiming timing;  // token times relative to addedAtSeconds
  // The cost model's work for this prompt and reply length (MBU/MFU divide by it); empty when
  // the model's shape could not be read.
  std::optional<iwb::GenerationCost> cost;
  // The engine's thread pool while the request ran (shared with any request beside it): parallel
  // regions opened, and those it ran on fewer threads because other work on the machine held its
  // workers back (iwb/kernels/thread_pool.h). Unknown (-1) where the worker did not see the
  // request start (a served request, measured when it finished).
  qint64 numParallelRegions = -1;
  qint64 numContendedRegions = -1;
};

// The process's memory as /proc/self/status reports it, with the context the KV cache holds.
struct MemorySample {
  qint64 residentBytes = 0;      // VmRSS
  qint64 residentAnonBytes = 0;  // RssAnon: heap and anonymous maps (KV cache, scratch)
  qint64 residentFileBytes = 0;  // RssFile: file pages resident (the memory-mapped weights)
  qint64 baselineAnonBytes = 0;  // RssAnon just before the model was loaded
  qint64 baselineFileBytes = 0;  // RssFile just before the model was loaded
  qint64 kvPositions = 0;        // positions the KV cache holds (prompt + generated so far)
  qint64 contextLength = 0;      // the engine's context (KV cache capacity); 0 without a model
  bool isValid = false;          // false where /proc/self/status could not be read
  // The engine's own report of what it allocated (Engine::memory_report); hasEngineReport is
  // false without a loaded model.
  bool hasEngineReport = false;
  qint64 kvPoolBytes = 0;      // the paged KV pool, allocated whole at load
  qint64 kvHugePageBytes = 0;  // of a host pool, in 2 MiB pages (MemoryReport::kv_huge_page_bytes)
  qint64 kvBytesPerPosition = 0;
  QString kvCacheType;           // "f16", "q8_0", or keys/values "q8_0/q4_0"
  qint64 kvBlockSize = 0;        // positions per block of the pool
  qint64 kvPositionsTotal = 0;   // slots in the pool
  qint64 kvPositionsUsed = 0;    // slots holding tokens of live sequences
  qint64 kvPositionsCached = 0;  // slots of reusable prefix blocks
  qint64 scratchBytes = 0;       // activations of one step and the logits rows
  // Recurrent layers (Qwen 3.5): the live sequences' states and one sequence's
  // (MemoryReport::recurrent_*); 0 for other models.
  qint64 recurrentStateBytes = 0;
  qint64 recurrentStateBytesPerSequence = 0;
  // Prefix caching's copies of states (MemoryReport::recurrent_checkpoint_bytes, _num_checkpoints).
  qint64 recurrentCheckpointBytes = 0;
  qint64 recurrentNumCheckpoints = 0;
  qint64 recurrentNumSequences = 0;
  // Where the forward pass runs (MemoryReport::device_id) and, on a CUDA device, what the engine
  // allocated there; the device figures are 0 on the CPU.
  QString deviceId = QStringLiteral("cpu");
  qint64 deviceWeightsBytes = 0;    // weights uploaded in their stored type, norms and biases
  qint64 deviceKvPoolBytes = 0;     // the paged K/V pool
  qint64 deviceScratchBytes = 0;    // activations, f16 staging for cuBLAS, attention workspace, metadata
  qint64 deviceWorkspaceBytes = 0;  // cuBLAS workspace
  qint64 hostPinnedBytes = 0;       // page-locked host staging buffers
  qint64 weightsReadBytes = 0;      // weights read into anonymous memory (MemoryReport::weights_read_bytes)
  qint64 deviceFreeBytes = 0;       // free device memory when sampled (all processes)
  qint64 deviceTotalBytes = 0;
  int deviceNumGraphs = 0;  // captured decode-step CUDA graphs

  bool isOnCuda() const { return hasEngineReport && deviceId.startsWith(QLatin1String("cuda:")); }
  qint64 deviceEngineBytes() const {
    return deviceWeightsBytes + deviceKvPoolBytes + deviceScratchBytes + deviceWorkspaceBytes;
  }

  qint64 anonGrowthBytes() const { return residentAnonBytes - baselineAnonBytes; }
  // RssAnon growth less the weights read into memory: the engine's heap, KV cache and scratch.
  qint64 anonGrowthBesideWeightsBytes() const { return anonGrowthBytes() - weightsReadBytes; }
  qint64 fileGrowthBytes() const { return residentFileBytes - baselineFileBytes; }
};

// Reads VmRSS, RssAnon and RssFile of this process (Linux); isValid is false elsewhere or when
// the file cannot be read. Cheap (one small file), but call it off the GUI thread while a step
// runs, where the engine is.
MemorySample readProcessMemory();
// Parses the text of a /proc/<pid>/status file (exposed for tests).
MemorySample parseProcStatus(const QByteArray& text);

// Registers the types above and iwb::ProfileSnapshot for queued connections.
void registerMeasurementMetaTypes();

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ProfileSnapshot)
Q_DECLARE_METATYPE(iwb::ui::RequestMeasurement)
Q_DECLARE_METATYPE(iwb::ui::MemorySample)
