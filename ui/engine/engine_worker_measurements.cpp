// EngineWorker's measurements: profile snapshots through the engine's decimator, token times on
// one session clock, per-request timings with the cost model's predicted work, memory samples
// and KV-cache map snapshots. All of it runs on the worker thread; only values leave.
#include "engine/engine_worker.h"

#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/tokenizer/tokenizer.h"

namespace iwb::ui {
namespace {

// Ten updates a second keep charts live without flooding the GUI's event queue; memory
// changes more slowly and costs a file read.
constexpr double kTokenTimesInterval = 0.1;
constexpr double kMemoryInterval = 0.5;
// The block map repaints thousands of cells per snapshot; seven a second looks live.
constexpr double kKvSnapshotInterval = 0.15;

}  // namespace

double EngineWorker::sessionSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_sessionStart).count();
}

void EngineWorker::setProfiling(bool isEnabled) {
  m_isProfiling = isEnabled;
  if (m_engine) m_engine->set_profiling(isEnabled);
}

void EngineWorker::resetProfile(quint64 epoch) {
  m_profileDecimator.reset();
  m_profileEpoch = epoch;
}

void EngineWorker::sampleMemory() { emitMemorySample(); }

void EngineWorker::prepareMeasurementsForLoad() {
  // The previous model is gone: what the process holds now is the application itself, and
  // whatever grows from here is the new model's.
  m_memoryBaseline = readProcessMemory();
  m_kvPositions = 0;
  m_profileDecimator.reset();
}

void EngineWorker::finishMeasurementsForLoad() {
  // The cost model's view of the file (per-layer weight types) gives each reply's predicted
  // work; a model it cannot describe still chats, its replies just have no MBU/MFU.
  auto shape = iwb::model_shape_from_gguf(m_engine->model().path);
  if (shape) m_shape = std::move(*shape);
  else m_shape.reset();
  // A block's text is what its tokens spell, specials included ("<|im_start|>"), with the
  // leading space kept: a block is the middle of a text, not its start.
  m_blockTexts.setDecoder([tokenizer = m_engine->tokenizer()](std::span<const int32_t> tokens) {
    iwb::tokenizer::DecodeOptions options;
    options.render_special = true;
    options.strip_leading_space = false;
    return tokenizer.decode(tokens, options);
  });
  emitMemorySample();
  emitKvSnapshot(true);  // the empty pool, before the first request
}

void EngineWorker::collectStepMeasurements(const iwb::StepResult& result) {
  const double now = sessionSeconds();
  if (!result.profile.is_empty()) {
    if (auto snapshot = m_profileDecimator.add(result.profile, now)) emit profileSnapshotReady(*snapshot, m_profileEpoch);
  }
  for (const iwb::TokenEvent& token : result.tokens) {
    const auto clock = m_requestClocks.find(token.request);
    const auto caller = m_requestIds.constFind(token.request);
    if (clock == m_requestClocks.end() || caller == m_requestIds.cend()) continue;
    clock->numGenerated += 1;
    // The token just sampled is not in the cache yet: the next step writes it.
    m_kvPositions = clock->numPromptTokens + clock->numGenerated - 1;
    m_pendingTokenTimes[caller.value()].append(clock->addedAt + token.seconds);
  }
  if (result.profile.num_kv > 0) m_kvPositions = result.profile.num_kv;  // exact when profiled

  if (!m_pendingTokenTimes.isEmpty() && now - m_lastTokenTimesEmit >= kTokenTimesInterval) {
    m_lastTokenTimesEmit = now;
    for (auto it = m_pendingTokenTimes.cbegin(); it != m_pendingTokenTimes.cend(); ++it) {
      emit tokenTimesReady(it.key(), it.value());
    }
    m_pendingTokenTimes.clear();
  }
  if (now - m_lastMemoryEmit >= kMemoryInterval) emitMemorySample();
  // A batch starting from idle shows at once (its prompts' blocks, the prefix they share);
  // after that the map follows at the decimated rate.
  if (m_wasKvIdle || now - m_lastKvEmit >= kKvSnapshotInterval) emitKvSnapshot(false);
}

void EngineWorker::flushMeasurements() {
  for (auto it = m_pendingTokenTimes.cbegin(); it != m_pendingTokenTimes.cend(); ++it) {
    emit tokenTimesReady(it.key(), it.value());
  }
  m_pendingTokenTimes.clear();
  // The last steps of a reply must show, not wait for a next step that may never come.
  if (auto snapshot = m_profileDecimator.flush(sessionSeconds())) emit profileSnapshotReady(*snapshot, m_profileEpoch);
  emitMemorySample();
  emitKvSnapshot(true);
}

void EngineWorker::reportMeasurement(const iwb::RequestFinished& finished, quint64 requestId) {
  if (const auto pending = m_pendingTokenTimes.constFind(requestId); pending != m_pendingTokenTimes.cend()) {
    emit tokenTimesReady(requestId, pending.value());
    m_pendingTokenTimes.erase(pending);
  }
  const RequestClock clock = m_requestClocks.take(finished.request);
  RequestMeasurement m;
  m.requestId = requestId;
  m.modelName = m_engine ? QString::fromStdString(m_engine->model().name) : QString();
  m.finishReason = QString::fromLatin1(iwb::finish_reason_name(finished.reason));
  m.addedAtSeconds = clock.addedAt;
  m.numGeneratedTokens = finished.num_generated_tokens;
  m.timing = iwb::request_timing(finished);
  if (m_shape && m_engine && finished.num_generated_tokens > 0 && m.timing.num_prompt_tokens > 0) {
    auto cost = iwb::predict_generation(*m_shape, m.timing.num_prompt_tokens, finished.num_generated_tokens,
                                        m_engine->max_batch_tokens());
    if (cost) m.cost = *cost;
  }
  emit requestMeasured(m);
}

void EngineWorker::emitMemorySample() {
  MemorySample sample = readProcessMemory();
  sample.baselineAnonBytes = m_memoryBaseline.residentAnonBytes;
  sample.baselineFileBytes = m_memoryBaseline.residentFileBytes;
  sample.kvPositions = m_engine ? m_kvPositions : 0;
  sample.contextLength = m_engine ? m_engine->context_length() : 0;
  if (m_engine) {
    // Between steps, on the engine's thread: the report's required calling context.
    const iwb::MemoryReport report = m_engine->memory_report();
    sample.hasEngineReport = true;
    sample.kvPoolBytes = static_cast<qint64>(report.kv_pool_bytes);
    sample.kvBytesPerPosition = static_cast<qint64>(report.kv_bytes_per_position);
    sample.kvPositionsTotal = report.kv_positions_total;
    sample.kvPositionsUsed = report.kv_positions_used;
    sample.kvPositionsCached = report.kv_positions_cached;
    sample.scratchBytes = static_cast<qint64>(report.scratch_bytes);
    sample.deviceId = QString::fromStdString(report.device_id);
    sample.deviceWeightsBytes = static_cast<qint64>(report.device_weights_bytes);
    sample.deviceKvPoolBytes = static_cast<qint64>(report.device_kv_pool_bytes);
    sample.deviceScratchBytes = static_cast<qint64>(report.device_scratch_bytes);
    sample.deviceWorkspaceBytes = static_cast<qint64>(report.device_workspace_bytes);
    sample.hostPinnedBytes = static_cast<qint64>(report.host_pinned_bytes);
    sample.deviceFreeBytes = static_cast<qint64>(report.device_free_bytes);
    sample.deviceTotalBytes = static_cast<qint64>(report.device_total_bytes);
    sample.deviceNumGraphs = report.device_num_graphs;
  }
  m_lastMemoryEmit = sessionSeconds();
  emit memorySampled(sample);
}

void EngineWorker::emitKvSnapshot(bool isIdle) {
  m_lastKvEmit = sessionSeconds();
  m_wasKvIdle = isIdle;
  if (!m_engine) {
    emit kvSnapshotReady(KvMapSnapshot{});
    return;
  }
  KvMapSnapshot snapshot = makeKvMapSnapshot(m_engine->kv_snapshot(), m_blockTexts, m_requestIds);
  snapshot.sessionSeconds = m_lastKvEmit;
  snapshot.isIdle = isIdle;
  emit kvSnapshotReady(snapshot);
}

}  // namespace iwb::ui
