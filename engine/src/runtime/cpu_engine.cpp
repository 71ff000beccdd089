// CpuEngine: the request queue, prefill/decode steps, sampling and the stop rules (end of
// generation, stop strings, max tokens, full context, abort).
#include "runtime/cpu_engine.h"

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/profile/cost_model.h"

#include <omp.h>

#include <algorithm>

namespace iwb {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

CpuEngine::Active::Active(RequestId request_id, GenerationRequest p, const tokenizer::Tokenizer& tok)
    : id(request_id),
      params(std::move(p)),
      sampler(params.sampling),
      // A reply continues the prompt: keep the leading space SPM tokens carry.
      detokenizer(tok, /*render_special=*/false, /*strip_leading_space=*/false),
      stops(params.stop_strings),
      history(params.prompt_tokens) {}

CpuEngine::CpuEngine(std::unique_ptr<gguf::GgufFile> file, tokenizer::Tokenizer tokenizer)
    : m_file(std::move(file)), m_tokenizer(std::move(tokenizer)) {}

Result<std::unique_ptr<Engine>> CpuEngine::load(const std::string& path, const EngineOptions& options,
                                                const LoadProgress& progress) {
  auto report = [&](double fraction, const std::string& stage) {
    if (progress) progress(fraction, stage);
  };
  report(0.0, "opening " + path);
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(path);
  if (!file) return file.status();
  Result<ModelSummary> summary = summarize_model(**file);
  if (!summary) return summary.status();
  if (summary->is_vocab_only) {
    return make_error(ErrorCode::Unsupported, "'" + path + "' holds only a tokenizer (no weights) and cannot generate");
  }
  Result<ModelConfig> config = model_config_from_gguf(**file);
  if (!config) return config.status();
  report(0.05, "reading the tokenizer");
  Result<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::from_gguf(**file);
  if (!tok) return tok.status();

  std::unique_ptr<CpuEngine> engine(new CpuEngine(std::move(*file), std::move(*tok)));
  engine->m_summary = std::move(*summary);
  engine->m_config = std::move(*config);
  engine->m_chat_template = engine->m_file->get_string("tokenizer.chat_template").value_or("");

  report(0.1, "binding weights");
  Result<ModelWeights> weights = bind_model_weights(*engine->m_file, engine->m_config, [&](double f) {
    report(0.1 + 0.1 * f, "binding weights");
  });
  if (!weights) return weights.status();
  engine->m_weights = std::move(*weights);

  // Read every page of the weights once now, so the load shows the disk time and the first
  // prompt's timing shows compute, not page faults.
  const auto& tensors = engine->m_file->tensors();
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::span<const uint8_t> bytes = engine->m_file->tensor_data(tensors[i]);
    for (size_t off = 0; off < bytes.size(); off += 4096) sink = sink + bytes[off];
    if (i % 16 == 0) report(0.2 + 0.7 * static_cast<double>(i) / static_cast<double>(tensors.size()), "reading weights");
  }

  const ModelConfig& c = engine->m_config;
  int64_t context = options.context_length > 0 ? options.context_length : std::min<int64_t>(c.context_length_train, 4096);
  report(0.9, "allocating the KV cache");
  engine->m_kv = make_contiguous_kv_cache({c.num_layers, c.num_kv_heads, c.head_dim_k, c.head_dim_v});
  IWB_RETURN_IF_ERROR(engine->m_kv->reserve(context));
  const int threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  if (options.max_batch_tokens < 1) {
    return make_error(ErrorCode::InvalidArgument, "the forward batch must hold at least one token (max_batch_tokens is " +
                                                      std::to_string(options.max_batch_tokens) + ")");
  }
  engine->m_forward =
      std::make_unique<CpuForward>(engine->m_config, engine->m_weights, threads, options.max_batch_tokens);
  engine->m_logits.resize(static_cast<size_t>(c.vocab_size));
  report(1.0, "ready");
  return std::unique_ptr<Engine>(std::move(engine));
}

Result<RequestId> CpuEngine::add_request(GenerationRequest request) {
  const auto num_prompt = static_cast<int64_t>(request.prompt_tokens.size());
  if (num_prompt == 0) return make_error(ErrorCode::InvalidArgument, "the prompt is empty");
  if (num_prompt > context_length()) {
    return make_error(ErrorCode::InvalidArgument, "prompt is " + std::to_string(num_prompt) +
                                                      " tokens but the context holds " +
                                                      std::to_string(context_length()));
  }
  for (size_t i = 0; i < request.prompt_tokens.size(); ++i) {
    const int32_t t = request.prompt_tokens[i];
    if (t < 0 || t >= m_config.vocab_size) {
      return make_error(ErrorCode::InvalidArgument, "prompt token " + std::to_string(i) + " has id " +
                                                        std::to_string(t) + ", outside the vocabulary (" +
                                                        std::to_string(m_config.vocab_size) + " tokens)");
    }
  }
  std::lock_guard lock(m_mutex);
  const RequestId id = m_next_id++;
  m_queue.push_back({id, std::move(request), Clock::now()});
  return id;
}

void CpuEngine::abort_request(RequestId id) {
  std::lock_guard lock(m_mutex);
  for (auto it = m_queue.begin(); it != m_queue.end(); ++it) {
    if (it->id == id) {
      RequestFinished f;
      f.request = id;
      f.reason = FinishReason::Aborted;
      f.num_prompt_tokens = static_cast<int32_t>(it->params.prompt_tokens.size());
      f.queued_seconds = seconds_between(it->submitted, Clock::now());
      m_aborted_while_queued.push_back(f);
      m_queue.erase(it);
      return;
    }
  }
  if (id == m_active_id) m_abort_requests.insert(id);  // honoured by the next step()
}

bool CpuEngine::has_unfinished_requests() const {
  std::lock_guard lock(m_mutex);
  return m_has_active || !m_queue.empty() || !m_aborted_while_queued.empty();
}

Result<StepResult> CpuEngine::step() {
  const Clock::time_point step_start = Clock::now();
  StepResult result;
  bool is_abort_requested = false;
  {
    std::lock_guard lock(m_mutex);
    result.finished = std::move(m_aborted_while_queued);
    m_aborted_while_queued.clear();
    if (!m_active && !m_queue.empty()) {
      m_active = std::make_unique<Active>(m_queue.front().id, std::move(m_queue.front().params), m_tokenizer);
      m_active->submitted = m_queue.front().submitted;
      m_queue.pop_front();
      m_active->started = step_start;
      m_active_id = m_active->id;
      m_has_active = true;
    }
    if (m_active) is_abort_requested = m_abort_requests.erase(m_active->id) > 0;
  }
  if (!m_active) return result;
  Active& a = *m_active;
  const bool is_profiled = m_is_profiling.load(std::memory_order_relaxed);
  result.profile.step_index = m_num_steps++;

  if (is_abort_requested) {
    finish(a, FinishReason::Aborted, {}, &result);
  } else if (Status s = run_forward(a, is_profiled, &result); !s) {
    // The cache may hold a half-written batch: forget it rather than trust it.
    m_kv->clear();
    m_cached_tokens.clear();
    finish(a, FinishReason::Error, s.message(), &result);
  } else {
    const int32_t token = a.sampler.sample(m_logits, a.history);
    result.stats.num_decode_tokens = 1;
    emit_token(a, token, &result);
  }
  result.stats.seconds = seconds_between(step_start, Clock::now());
  result.profile.step_seconds = result.stats.seconds;
  return result;
}

Status CpuEngine::run_forward(Active& a, bool is_profiled, StepResult* result) {
  KernelRecorder& recorder = m_forward->recorder();
  ProfileBatch& profile = result->profile;
  // Reserves the step's records before any kernel runs, and hands them over afterwards, even
  // when the pass failed part-way (the records show how far it got).
  auto run = [&](Phase phase, std::span<const int32_t> tokens, int64_t first_position) -> Status {
    const auto num_tokens = static_cast<int64_t>(tokens.size());
    if (is_profiled) {
      recorder.begin(phase, static_cast<size_t>(num_step_records(m_config, num_tokens, m_forward->max_batch(), true)));
    }
    Status status = m_forward->forward(tokens, first_position, *m_kv, m_logits.data());
    if (is_profiled) {
      profile.phase = phase;
      profile.num_tokens = static_cast<int32_t>(num_tokens);
      profile.num_kv = m_kv->num_positions();
      profile.kernels = recorder.take();
      profile.num_dropped = static_cast<uint32_t>(recorder.num_dropped());
    }
    return status;
  };
  StepStats* stats = &result->stats;
  if (!a.is_prefilled) {
    // Reuse the cached prefix this prompt shares with the previous sequence; at least one
    // token must run to produce logits.
    const std::vector<int32_t>& prompt = a.params.prompt_tokens;
    size_t common = 0;
    while (common < m_cached_tokens.size() && common < prompt.size() && m_cached_tokens[common] == prompt[common]) {
      ++common;
    }
    if (common == prompt.size()) --common;
    m_kv->truncate(static_cast<int64_t>(common));
    m_cached_tokens.resize(common);
    const std::span<const int32_t> rest(prompt.data() + common, prompt.size() - common);
    IWB_RETURN_IF_ERROR(run(Phase::Prefill, rest, static_cast<int64_t>(common)));
    m_cached_tokens = prompt;
    a.is_prefilled = true;
    a.num_reused_prompt_tokens = static_cast<int32_t>(common);
    stats->num_prompt_tokens = static_cast<int32_t>(rest.size());
    return {};
  }
  const int32_t token = a.history.back();  // sampled last step, not yet in the cache
  IWB_RETURN_IF_ERROR(run(Phase::Decode, {&token, 1}, m_kv->num_positions()));
  m_cached_tokens.push_back(token);
  return {};
}

void CpuEngine::emit_token(Active& a, int32_t token, StepResult* result) {
  const Clock::time_point now = Clock::now();
  if (a.num_generated == 0) a.first_token = now;
  a.last_token = now;
  a.num_generated += 1;
  a.history.push_back(token);
  const double since_submitted = seconds_between(a.submitted, now);
  a.token_seconds.push_back(since_submitted);

  TokenEvent event{a.id, token, {}, since_submitted};
  if (a.params.stop_at_end_of_generation && m_tokenizer.is_end_of_generation(token)) {
    bool is_stopped = false;
    event.text = release_held_text(a, &is_stopped);
    result->tokens.push_back(std::move(event));
    finish(a, is_stopped ? FinishReason::StopString : FinishReason::EndOfGeneration, {}, result);
    return;
  }
  const StopStringMatcher::Output out = a.stops.push(a.detokenizer.push(token));
  event.text = out.text;
  if (out.is_stopped) {
    result->tokens.push_back(std::move(event));
    finish(a, FinishReason::StopString, {}, result);
    return;
  }
  const bool is_max = a.params.max_new_tokens > 0 && a.num_generated >= a.params.max_new_tokens;
  // The new token would be written at the next free position: none left means a full context.
  const bool is_full = m_kv->num_positions() >= m_kv->capacity();
  if (is_max || is_full) {
    bool is_stopped = false;
    event.text += release_held_text(a, &is_stopped);
    result->tokens.push_back(std::move(event));
    const FinishReason reason =
        is_stopped ? FinishReason::StopString : (is_max ? FinishReason::MaxTokens : FinishReason::ContextFull);
    finish(a, reason, {}, result);
    return;
  }
  result->tokens.push_back(std::move(event));
}

std::string CpuEngine::release_held_text(Active& a, bool* is_stopped) {
  const StopStringMatcher::Output out = a.stops.push(a.detokenizer.flush());
  *is_stopped = out.is_stopped;
  return out.is_stopped ? out.text : out.text + a.stops.flush();
}

void CpuEngine::finish(Active& a, FinishReason reason, std::string error, StepResult* result) {
  RequestFinished f;
  f.request = a.id;
  f.reason = reason;
  f.error = std::move(error);
  f.num_prompt_tokens = static_cast<int32_t>(a.params.prompt_tokens.size());
  f.num_generated_tokens = a.num_generated;
  f.queued_seconds = seconds_between(a.submitted, a.started);
  f.num_reused_prompt_tokens = a.num_reused_prompt_tokens;
  if (a.num_generated > 0) {
    f.prompt_seconds = seconds_between(a.started, a.first_token);
    f.generation_seconds = seconds_between(a.first_token, a.last_token);
  }
  f.token_seconds = std::move(a.token_seconds);
  result->finished.push_back(std::move(f));
  {
    std::lock_guard lock(m_mutex);
    m_abort_requests.erase(a.id);
    m_active_id = 0;
  }
  m_active.reset();
  m_has_active = false;
}

Result<std::vector<float>> CpuEngine::logits_for(const std::vector<int32_t>& tokens) {
  if (m_has_active) return make_error(ErrorCode::InvalidArgument, "logits_for needs an idle engine: a request is running");
  if (tokens.empty()) return make_error(ErrorCode::InvalidArgument, "no tokens to compute logits for");
  if (static_cast<int64_t>(tokens.size()) > context_length()) {
    return make_error(ErrorCode::InvalidArgument, "the sequence is " + std::to_string(tokens.size()) +
                                                      " tokens but the context holds " +
                                                      std::to_string(context_length()));
  }
  m_kv->clear();
  m_cached_tokens.clear();
  std::vector<float> logits(static_cast<size_t>(m_config.vocab_size));
  IWB_RETURN_IF_ERROR(m_forward->forward(tokens, 0, *m_kv, logits.data()));
  m_cached_tokens = tokens;
  return logits;
}

}  // namespace iwb
