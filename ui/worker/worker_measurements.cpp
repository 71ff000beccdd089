// WorkerMeasurements: the decimated measurements of the engine worker (see worker_measurements.h).
#include "worker/worker_measurements.h"

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

double WorkerMeasurements::sessionSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_sessionStart).count();
}

void WorkerMeasurements::resetProfile(quint64 epoch) {
  m_profileDecimator.reset();
  m_profileEpoch = epoch;
}

void WorkerMeasurements::prepareForLoad() {
  // The previous model is gone: what the process holds now is the application itself, and
  // whatever grows from here is the new model's.
  m_memoryBaseline = readProcessMemory();
  m_kvPositions = 0;
  m_profileDecimator.reset();
}

void WorkerMeasurements::finishLoad(const iwb::Engine& engine) {
  // The cost model's view of the file (per-layer weight types) gives each reply's predicted
  // work; a model it cannot describe still chats, its replies just have no MBU/MFU.
  auto shape = iwb::model_shape_from_gguf(engine.model().path);
  if (shape)
    m_shape = std::move(*shape);
  else
    m_shape.reset();
  // A block's text is what its tokens spell, specials included ("<|im_start|>"), with the
  // leading space kept: a block is the middle of a text, not its start.
  m_blockTexts.setDecoder([tokenizer = engine.tokenizer()](std::span<const int32_t> tokens) {
    iwb::tokenizer::DecodeOptions options;
    options.render_special = true;
    options.strip_leading_space = false;
    return tokenizer.decode(tokens, options);
  });
}

void WorkerMeasurements::release() {
  m_pendingTokenTimes.clear();
  m_shape.reset();
  m_blockTexts.setDecoder({});
}

WorkerMeasurements::StepOutput WorkerMeasurements::collectStep(const iwb::StepResult& result,
                                                               WorkerRequests& requests) {
  StepOutput out;
  const double now = sessionSeconds();
  if (!result.profile.is_empty()) out.profile = m_profileDecimator.add(result.profile, now);
  for (const iwb::TokenEvent& token : result.tokens) {
    WorkerRequests::Entry* entry = requests.find(token.request);
    if (entry == nullptr) continue;
    WorkerRequests::Clock& clock = entry->clock;
    clock.numGenerated += 1;
    // The token just sampled is not in the cache yet: the next step writes it.
    m_kvPositions = clock.numPromptTokens + clock.numGenerated - 1;
    m_pendingTokenTimes[entry->callerId].append(clock.addedAt + token.seconds);
  }
  if (result.profile.num_kv > 0) m_kvPositions = result.profile.num_kv;  // exact when profiled

  if (!m_pendingTokenTimes.isEmpty() && now - m_lastTokenTimesEmit >= kTokenTimesInterval) {
    m_lastTokenTimesEmit = now;
    out.tokenTimes.swap(m_pendingTokenTimes);
  }
  out.isMemoryDue = now - m_lastMemoryEmit >= kMemoryInterval;
  // A batch starting from idle shows at once (its prompts' blocks, the prefix they share);
  // after that the map follows at the decimated rate.
  out.isKvDue = m_wasKvIdle || now - m_lastKvEmit >= kKvSnapshotInterval;
  return out;
}

WorkerMeasurements::Flush WorkerMeasurements::flush() {
  Flush out;
  out.tokenTimes.swap(m_pendingTokenTimes);
  // The last steps of a reply must show, not wait for a next step that may never come.
  out.profile = m_profileDecimator.flush(sessionSeconds());
  return out;
}

std::optional<QList<double>> WorkerMeasurements::takeTokenTimes(quint64 callerId) {
  const auto pending = m_pendingTokenTimes.find(callerId);
  if (pending == m_pendingTokenTimes.end()) return std::nullopt;
  QList<double> times = pending.value();
  m_pendingTokenTimes.erase(pending);
  return times;
}

RequestMeasurement WorkerMeasurements::measure(const iwb::RequestFinished& finished, const WorkerRequests::Entry& entry,
                                               const iwb::Engine* engine) const {
  RequestMeasurement m;
  m.requestId = entry.callerId;
  m.modelName = engine ? QString::fromStdString(engine->model().name) : QString();
  m.finishReason = QString::fromLatin1(iwb::finish_reason_name(finished.reason));
  m.addedAtSeconds = entry.clock.addedAt;
  m.numGeneratedTokens = finished.num_generated_tokens;
  m.timing = iwb::request_timing(finished);
  if (entry.poolAtAdd) {
    const iwb::ThreadPoolStats now = iwb::thread_pool_stats();
    m.numContendedRegions = now.contended_regions - entry.poolAtAdd->contended_regions;
    m.numParallelRegions = now.pooled_regions - entry.poolAtAdd->pooled_regions;
  }
  if (m_shape && engine && finished.num_generated_tokens > 0 && m.timing.num_prompt_tokens > 0) {
    auto cost = iwb::predict_generation(*m_shape, m.timing.num_prompt_tokens, finished.num_generated_tokens,
                                        engine->max_batch_tokens());
    if (cost) m.cost = *cost;
  }
  return m;
}

MemorySample WorkerMeasurements::memorySample(const iwb::Engine* engine) {
  MemorySample sample = readProcessMemory();
  sample.baselineAnonBytes = m_memoryBaseline.residentAnonBytes;
  sample.baselineFileBytes = m_memoryBaseline.residentFileBytes;
  sample.kvPositions = engine ? m_kvPositions : 0;
  sample.contextLength = engine ? engine->context_length() : 0;
  if (engine) {
    // Between steps, on the engine's thread: the report's required calling context.
    const iwb::MemoryReport report = engine->memory_report();
    sample.hasEngineReport = true;
    sample.kvPoolBytes = static_cast<qint64>(report.kv_pool_bytes);
    sample.kvHugePageBytes = static_cast<qint64>(report.kv_huge_page_bytes);
    sample.kvBytesPerPosition = static_cast<qint64>(report.kv_bytes_per_position);
    sample.kvCacheType = QString::fromStdString(report.kv_cache_type);
    sample.kvBlockSize = report.kv_block_size;
    sample.kvPositionsTotal = report.kv_positions_total;
    sample.kvPositionsUsed = report.kv_positions_used;
    sample.kvPositionsCached = report.kv_positions_cached;
    sample.scratchBytes = static_cast<qint64>(report.scratch_bytes);
    sample.recurrentStateBytes = static_cast<qint64>(report.recurrent_state_bytes);
    sample.recurrentStateBytesPerSequence = static_cast<qint64>(report.recurrent_state_bytes_per_sequence);
    sample.recurrentNumSequences = report.recurrent_num_sequences;
    sample.recurrentCheckpointBytes = static_cast<qint64>(report.recurrent_checkpoint_bytes);
    sample.recurrentNumCheckpoints = report.recurrent_num_checkpoints;
    sample.deviceId = QString::fromStdString(report.device_id);
    sample.deviceWeightsBytes = static_cast<qint64>(report.device_weights_bytes);
    sample.deviceKvPoolBytes = static_cast<qint64>(report.device_kv_pool_bytes);
    sample.deviceScratchBytes = static_cast<qint64>(report.device_scratch_bytes);
    sample.deviceWorkspaceBytes = static_cast<qint64>(report.device_workspace_bytes);
    sample.hostPinnedBytes = static_cast<qint64>(report.host_pinned_bytes);
    sample.weightsReadBytes = static_cast<qint64>(report.weights_read_bytes);
    sample.deviceFreeBytes = static_cast<qint64>(report.device_free_bytes);
    sample.deviceTotalBytes = static_cast<qint64>(report.device_total_bytes);
    sample.deviceNumGraphs = report.device_num_graphs;
  }
  m_lastMemoryEmit = sessionSeconds();
  return sample;
}

KvMapSnapshot WorkerMeasurements::kvSnapshot(const iwb::Engine* engine, bool isIdle, const WorkerRequests& requests) {
  m_lastKvEmit = sessionSeconds();
  m_wasKvIdle = isIdle;
  if (!engine) return KvMapSnapshot{};
  KvMapSnapshot snapshot = makeKvMapSnapshot(engine->kv_snapshot(), m_blockTexts, requests.callerIds());
  snapshot.sessionSeconds = m_lastKvEmit;
  snapshot.isIdle = isIdle;
  return snapshot;
}

}  // namespace iwb::ui
