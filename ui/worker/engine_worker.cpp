// EngineWorker: model loading with progress, prompt building through the engine's chat-prompt
// helper (one request, or a batch of them queued together), and the step loop — one step per
// queued invocation so the event loop can deliver stop() and unload() between steps.
#include "worker/engine_worker.h"

#include "iwb/engine/backend/device_selection.h"
#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "settings/device_choice.h"

#include <QFileInfo>

#include <chrono>
#include <cmath>
#include <span>

namespace iwb::ui {
namespace {

GenerationStats statsFrom(const iwb::RequestFinished& f, quint64 seed) {
  GenerationStats s;
  s.finishReason = QString::fromLatin1(iwb::finish_reason_name(f.reason));
  s.errorMessage = QString::fromStdString(f.error);
  s.numPromptTokens = f.num_prompt_tokens;
  s.numGeneratedTokens = f.num_generated_tokens;
  s.timeToFirstTokenSeconds = f.prompt_seconds;
  s.generationSeconds = f.generation_seconds;
  s.seed = seed;
  return s;
}

// The CPU's model name or the GPU's product name for a device id; empty when unknown.
QString deviceNameOf(const QString& deviceId) {
  if (!isCudaDeviceId(deviceId)) return QString::fromStdString(iwb::describe_cpu_device().name);
  if (auto gpus = iwb::list_cuda_devices()) {
    for (const iwb::ComputeDeviceInfo& gpu : *gpus) {
      if (QString::fromStdString(gpu.id) == deviceId) return QString::fromStdString(gpu.name);
    }
  }
  return {};
}

}  // namespace

EngineWorker::EngineWorker(QObject* parent)
    : QObject(parent),
      m_seedSource(static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) {
  registerGenerationMetaTypes();
  registerMeasurementMetaTypes();
  registerKvMapMetaTypes();
  registerExpertLoadMetaTypes();
  registerSpeculationMetaTypes();
}

EngineWorker::~EngineWorker() = default;

void EngineWorker::loadModel(const QString& path, const EngineLoadOptions& options) {
  const bool hadModel = m_engine != nullptr;
  releaseEngine();
  m_measurements.prepareForLoad();
  if (hadModel) emitKvSnapshot(true);  // the old pool is gone, whether or not the new model loads
  const QFileInfo info(path);
  if (!info.exists()) {
    emit modelLoadFailed(path, tr("The file %1 does not exist.").arg(info.fileName()));
    return;
  }
  // Where the engine will try to run decides whether the GPU's KV share applies and whether a
  // failure is one the CPU can answer (the engine makes the same choice again when it loads).
  const auto device = iwb::choose_device(options.device.toStdString());
  const bool isForCuda = isCudaDeviceId(options.device) || (device && device->kind == iwb::ComputeDeviceKind::Cuda);
  const iwb::EngineOptions engineOptions = toEngineOptions(options, isForCuda);
  // Progress arrives on this thread; the signal queues it to the GUI. Reports closer than a
  // percent apart are dropped so a fast load does not flood the GUI's event queue.
  double lastReported = -1.0;
  auto progress = [this, &lastReported](double fraction, const std::string& stage) {
    if (fraction < 1.0 && fraction - lastReported < 0.01) return;
    lastReported = fraction;
    emit modelLoadProgress(fraction, QString::fromStdString(stage));
  };
  auto engine = iwb::Engine::load(path.toStdString(), engineOptions, progress);
  if (!engine) {
    const QString message = QString::fromStdString(engine.error_message());
    if (isForCuda) emit deviceLoadFailed(path, device ? QString::fromStdString(device->id()) : options.device, message);
    emit modelLoadFailed(path, message);
    return;
  }
  m_engine = std::move(*engine);
  m_engine->set_profiling(m_isProfiling);
  applySpeculation();
  publishServedModel();

  LoadedModel model;
  model.path = path;
  model.name = QString::fromStdString(m_engine->model().name);
  model.architecture = QString::fromStdString(m_engine->model().architecture);
  model.contextLength = m_engine->context_length();
  model.numThreads = m_engine->num_threads();
  model.hasChatTemplate = !m_engine->chat_template().empty();
  const std::string_view family = iwb::chat_template_family_name(iwb::detect_chat_template(m_engine->chat_template()));
  model.detectedTemplate = QString::fromUtf8(family.data(), static_cast<qsizetype>(family.size()));
  const iwb::MemoryReport report = m_engine->memory_report();
  model.deviceId = QString::fromStdString(report.device_id);
  model.deviceName =
      report.device_name.empty() ? deviceNameOf(model.deviceId) : QString::fromStdString(report.device_name);
  model.deviceFallbackReason = QString::fromStdString(m_engine->model().device_fallback_reason);
  model.loadSeconds = m_engine->model().load_seconds;
  model.numMtpLayers = m_engine->config().num_nextn_layers;
  emit modelLoaded(model);
  m_measurements.finishLoad(*m_engine);
  emitMemorySample();
  emitKvSnapshot(true);  // the empty pool, before the first request
}

void EngineWorker::generate(quint64 requestId, const GenerationInput& input) {
  if (queueRequest(requestId, input)) scheduleStep();
}

void EngineWorker::submitBatch(const QList<quint64>& requestIds, const BatchInput& batch) {
  bool isAnyQueued = false;
  for (qsizetype i = 0; i < requestIds.size(); ++i) isAnyQueued |= queueRequest(requestIds.at(i), batch.inputFor(i));
  if (isAnyQueued) scheduleStep();
}

namespace {

// The prompt generate() would queue for `input`: the chat template rendered and tokenized.
iwb::Result<iwb::ChatPrompt> buildPrompt(const iwb::Engine& engine, const GenerationInput& input) {
  std::vector<iwb::ChatMessage> messages;
  messages.reserve(static_cast<size_t>(input.messages.size()));
  for (const ChatTurn& turn : input.messages) {
    messages.push_back({turn.role.toStdString(), turn.content.toStdString()});
  }
  iwb::ChatPromptOptions promptOptions;
  if (!input.templateOverride.isEmpty() && input.templateOverride != QLatin1String("auto")) {
    promptOptions.family = iwb::chat_template_family_from_name(input.templateOverride.toStdString());
    if (!promptOptions.family) {
      return iwb::make_error(iwb::ErrorCode::InvalidArgument,
                             "Unknown chat template \"" + input.templateOverride.toStdString() + "\".");
    }
  }
  if (!input.sampling.thinking.isEmpty())
    promptOptions.enable_thinking = input.sampling.thinking == QLatin1String("on");
  promptOptions.reasoning_effort = input.sampling.reasoningEffort.toStdString();
  return iwb::build_chat_prompt(engine.tokenizer(), engine.chat_template(), messages, promptOptions);
}

// buildPrompt, leaving out the oldest turns (whole exchanges: the prompt still starts with a
// user turn after the system turn; the last user turn always stays) while the prompt and
// input.fitReserveTokens reply tokens exceed the context.
iwb::Result<iwb::ChatPrompt> buildFittingPrompt(const iwb::Engine& engine, const GenerationInput& input,
                                                int* numTurnsLeftOut) {
  *numTurnsLeftOut = 0;
  auto prompt = buildPrompt(engine, input);
  if (input.fitReserveTokens < 0) return prompt;
  const int64_t limit = engine.context_length() - input.fitReserveTokens;
  GenerationInput shortened = input;
  const qsizetype first = !input.messages.isEmpty() && input.messages.first().role == QLatin1String("system") ? 1 : 0;
  while (prompt && int64_t(prompt->tokens.size()) > limit && shortened.messages.size() - first > 1) {
    shortened.messages.removeAt(first);
    ++*numTurnsLeftOut;
    while (shortened.messages.size() - first > 1 && shortened.messages.at(first).role != QLatin1String("user")) {
      shortened.messages.removeAt(first);
      ++*numTurnsLeftOut;
    }
    prompt = buildPrompt(engine, shortened);
  }
  return prompt;
}

}  // namespace

void EngineWorker::countTokens(quint64 tag, const GenerationInput& input) {
  if (!m_engine) {
    emit tokensCounted(tag, -1, 0, 0);
    return;
  }
  int numTurnsLeftOut = 0;
  auto prompt = buildFittingPrompt(*m_engine, input, &numTurnsLeftOut);
  emit tokensCounted(tag, prompt ? static_cast<int>(prompt->tokens.size()) : -1,
                     static_cast<int>(m_engine->context_length()), numTurnsLeftOut);
}

TokenProbability EngineWorker::tokenProbabilityOf(const iwb::TokenEvent& token) const {
  TokenProbability p;
  p.probability = std::exp(double(token.logprob));
  p.alternatives.reserve(qsizetype(token.top_logprobs.size()));
  for (const iwb::TokenLogprob& top : token.top_logprobs) {
    const iwb::tokenizer::TokenId id = top.token;
    p.alternatives.push_back(
        {QString::fromStdString(m_engine->tokenizer().decode(std::span<const iwb::tokenizer::TokenId>(&id, 1))),
         std::exp(double(top.logprob))});
  }
  return p;
}

bool EngineWorker::queueRequest(quint64 requestId, const GenerationInput& input) {
  if (!m_engine) {
    emit generationFailed(requestId, tr("No model is loaded."));
    return false;
  }
  int numTurnsLeftOut = 0;
  auto prompt = buildFittingPrompt(*m_engine, input, &numTurnsLeftOut);
  if (!prompt) {
    emit generationFailed(requestId,
                          tr("Could not build the prompt: %1").arg(QString::fromStdString(prompt.error_message())));
    return false;
  }
  const int numPromptTokens = static_cast<int>(prompt->tokens.size());
  // The engine would refuse too, but in its own words; this one tells the user what to do.
  if (numPromptTokens >= m_engine->context_length()) {
    emit generationFailed(requestId, tr("The conversation is %1 tokens long but the model's context holds %2 tokens. "
                                        "Start a new conversation, or edit an earlier message to shorten it.")
                                         .arg(numPromptTokens)
                                         .arg(m_engine->context_length()));
    return false;
  }

  auto grammar = input.sampling.replyGrammar();
  if (!grammar) {
    emit generationFailed(
        requestId, tr("The reply format cannot be used: %1").arg(QString::fromStdString(grammar.error_message())));
    return false;
  }

  iwb::GenerationRequest request;
  request.prompt_tokens = std::move(prompt->tokens);
  request.json_grammar = *grammar;
  const quint64 seed = input.sampling.seed >= 0 ? static_cast<quint64>(input.sampling.seed) : m_seedSource();
  request.sampling = input.sampling.toSamplingParams(seed);
  request.max_new_tokens = input.sampling.maxTokens;
  request.stop_strings = std::move(prompt->stop_strings);
  request.render_special_tokens = prompt->renders_special_tokens;
  const bool opensReasoning = prompt->opens_reasoning;
  request.num_draft_tokens = input.numDraftTokens;
  request.num_top_logprobs = input.numTopAlternatives;
  const double addedAt = m_measurements.sessionSeconds();  // token times count from here
  auto id = m_engine->add_request(std::move(request));
  if (!id) {
    emit generationFailed(requestId, QString::fromStdString(id.error_message()));
    return false;
  }
  m_requests.add(*id, {requestId, seed, input.numDraftTokens, {addedAt, numPromptTokens, 0}, iwb::thread_pool_stats()});
  if (numTurnsLeftOut > 0) emit promptShortened(requestId, numTurnsLeftOut);
  emit generationStarted(requestId, numPromptTokens);
  // The prompt opened the reply's think block (GLM-4.7, Qwen3.5): the reply's text starts with
  // it, so that the chat shows what follows as reasoning and sends it back as the template reads it.
  if (opensReasoning) emit tokensReady(requestId, QStringLiteral("<think>"));
  return true;
}

void EngineWorker::stop(quint64 requestId) {
  if (!m_engine) return;
  for (const quint64 engineId : m_requests.engineIdsOf(requestId)) m_engine->abort_request(engineId);
}

void EngineWorker::unload() {
  const bool hadModel = m_engine != nullptr;
  releaseEngine();
  if (hadModel) {
    emit modelUnloaded();
    emitMemorySample();
    emitKvSnapshot(true);  // empty: no pool any more
  }
}

void EngineWorker::scheduleStep() {
  if (m_isStepScheduled) return;
  m_isStepScheduled = true;
  // Queued, not a loop: the stop() and unload() calls that arrived meanwhile run first.
  QMetaObject::invokeMethod(this, &EngineWorker::runStep, Qt::QueuedConnection);
}

void EngineWorker::runStep() {
  m_isStepScheduled = false;
  if (!m_engine || !m_engine->has_unfinished_requests()) return;
  auto result = m_engine->step();
  if (!result) {
    // The step itself failed (not one request): every reply in flight ends with its text so
    // far, marked as an error.
    const QString message = QString::fromStdString(result.error_message());
    m_serveRouter.fail_all(*m_engine, result.error_message());
    const QHash<quint64, WorkerRequests::Entry> ids = m_requests.takeAll();
    for (auto it = ids.cbegin(); it != ids.cend(); ++it) {
      m_engine->abort_request(it.key());
      GenerationStats stats;
      stats.finishReason = QString::fromLatin1(iwb::finish_reason_name(iwb::FinishReason::Error));
      stats.errorMessage = message;
      stats.seed = it.value().seed;
      m_measurements.dropTokenTimes(it.value().callerId);
      emit generationFinished(it.value().callerId, stats);
    }
    // The aborted requests are cleared out of the engine by the next step.
    if (m_engine->has_unfinished_requests())
      scheduleStep();
    else
      flushMeasurements();
    return;
  }
  collectStepMeasurements(*result);
  reportSpeculation(*result);
  dispatchServed(*result);
  const bool isSpeculating = m_engine->speculation().is_enabled();
  for (const iwb::TokenEvent& token : result->tokens) {
    if (token.text.empty()) continue;  // a character still incomplete, or a held-back stop string
    const WorkerRequests::Entry* entry = m_requests.find(token.request);
    if (entry == nullptr) continue;
    const QString text = QString::fromStdString(token.text);
    if (isSpeculating) emit draftTokensReady(entry->callerId, text, token.is_draft);  // right before its tokensReady
    if (!token.top_logprobs.empty()) emit tokenProbabilityReady(entry->callerId, tokenProbabilityOf(token));
    emit tokensReady(entry->callerId, text);
  }
  reportFinished(result->finished);
  if (m_engine->has_unfinished_requests())
    scheduleStep();
  else
    flushMeasurements();
}

void EngineWorker::reportFinished(const std::vector<iwb::RequestFinished>& finished) {
  for (const iwb::RequestFinished& f : finished) {
    const std::optional<WorkerRequests::Entry> entry = m_requests.take(f.request);
    if (!entry) continue;
    reportMeasurement(f, *entry);
    reportSpeculationFinished(f, *entry);
    emit generationFinished(entry->callerId, statsFrom(f, entry->seed));
  }
}

void EngineWorker::releaseEngine() {
  if (!m_engine) return;
  // Abort through the engine so the replies end with their real counts and timings; an
  // aborted request finishes at the next step without running the model.
  for (const quint64 engineId : m_requests.engineIdsOf(0)) m_engine->abort_request(engineId);
  m_serveRouter.abort_all(*m_engine);
  for (int i = 0; i < 8 && (!m_requests.isEmpty() || !m_serveRouter.is_empty()) && m_engine->has_unfinished_requests();
       ++i) {
    auto result = m_engine->step();
    if (!result) break;
    dispatchServed(*result);
    reportFinished(result->finished);
  }
  m_serveRouter.fail_all(*m_engine, "the model was closed in the workbench");
  const QHash<quint64, WorkerRequests::Entry> left = m_requests.takeAll();
  for (auto it = left.cbegin(); it != left.cend(); ++it) {  // whatever is left
    GenerationStats stats;
    stats.finishReason = QString::fromLatin1(iwb::finish_reason_name(iwb::FinishReason::Aborted));
    stats.seed = it.value().seed;
    emit generationFinished(it.value().callerId, stats);
  }
  m_measurements.release();
  m_engine.reset();
  publishServedModel();
}

}  // namespace iwb::ui
