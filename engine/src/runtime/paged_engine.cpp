// PagedEngine: loading (the backend on the chosen device, the KV pool's size), the request
// queue (any thread), abort, the reports for the UI, and logits_for. The step itself is in
// paged_engine_step.cpp.
#include "runtime/paged_engine.h"

#include "backend/cpu/cpu_forward_backend.h"
#include "backend/cuda_forward_factory.h"
#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/engine/runtime/load_mode.h"
#include "iwb/kernels/thread_pool.h"
#include "runtime/kv_budget.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

namespace iwb {

PagedEngine::PagedEngine(std::unique_ptr<gguf::GgufFile> file, tokenizer::Tokenizer tokenizer)
    : m_file(std::move(file)), m_tokenizer(std::move(tokenizer)) {}

Result<std::unique_ptr<Engine>> PagedEngine::load(const std::string& path, const EngineOptions& options,
                                                  const DeviceChoice& choice, const LoadProgress& progress) {
  const auto started = std::chrono::steady_clock::now();
  // A read into memory is most of a load on the CPU (the default model: 0.35 of 0.45 s), so it
  // takes the first 70% of the progress and the stages after it share the rest.
  double read_share = 0;
  auto report = [&](double fraction, const std::string& stage) {
    if (progress) progress(read_share + (1 - read_share) * fraction, stage);
  };
  // Mapped or read into memory (EngineOptions::load_mode); the rule weighs the file's size
  // against the memory available (a missing file is open()'s to report).
  std::error_code size_error;
  const uint64_t file_bytes = std::filesystem::file_size(path, size_error);
  Result<LoadModeChoice> load_mode =
      choose_load_mode(options.load_mode, choice.kind == ComputeDeviceKind::Cuda, size_error ? 0 : file_bytes,
                       describe_cpu_device().free_memory_bytes, transparent_huge_page_setting());
  if (!load_mode) return load_mode.status();
  const bool is_read = load_mode->mode == gguf::LoadMode::Read;
  const std::string read_stage = (is_read ? "reading " : "opening ") + path;
  report(0.0, read_stage);
  constexpr double kReadShare = 0.7;
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(path, load_mode->mode, [&](double f) {
    if (progress) progress(kReadShare * f, read_stage);
  });
  if (!file) return file.status();
  if (is_read) read_share = kReadShare;
  Result<ModelSummary> summary = summarize_model(**file);
  if (!summary) return summary.status();
  summary->weights_memory = load_mode->reason;
  if (load_mode->lock_in_memory) {
    // As llama.cpp's mlock: a refusal leaves the mapping as it is and says why.
    const Status locked = (*file)->lock_in_memory();
    summary->weights_memory += locked.is_ok() ? ", locked in memory" : ", not locked: " + locked.message();
  }
  if (is_read) {
    // (The copy's last huge page runs past the file's end: count no more than the file.)
    const uint64_t huge = std::min((*file)->huge_page_bytes(), (*file)->file_size());
    summary->weights_memory +=
        ", " + std::to_string(huge >> 20) + " of " + std::to_string((*file)->file_size() >> 20) + " MiB in 2 MiB pages";
  }
  if (summary->is_vocab_only) {
    return make_error(ErrorCode::Unsupported, "'" + path + "' holds only a tokenizer (no weights) and cannot generate");
  }
  Result<ModelConfig> config = model_config_from_gguf(**file);
  if (!config) return config.status();
  report(0.05, "reading the tokenizer");
  Result<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::from_gguf(**file);
  if (!tok) return tok.status();

  std::unique_ptr<PagedEngine> engine(new PagedEngine(std::move(*file), std::move(*tok)));
  engine->m_summary = std::move(*summary);
  engine->m_config = std::move(*config);
  engine->m_chat_template = engine->m_file->get_string("tokenizer.chat_template").value_or("");
  engine->m_chat_template_tool_use = engine->m_file->get_string("tokenizer.chat_template.tool_use").value_or("");

  report(0.1, "binding weights");
  Result<ModelWeights> weights = bind_model_weights(*engine->m_file, engine->m_config,
                                                    [&](double f) { report(0.1 + 0.1 * f, "binding weights"); });
  if (!weights) return weights.status();
  engine->m_weights = std::move(*weights);

  const ModelConfig& c = engine->m_config;
  engine->m_context_length =
      options.context_length > 0 ? options.context_length : std::min<int64_t>(c.context_length_train, 4096);
  // LongRoPE models (phi3) rotate by the long or short factors as the context asks.
  select_rope_factors(c, engine->m_context_length, &engine->m_weights);
  if (options.max_batch_tokens < 1) {
    return make_error(ErrorCode::InvalidArgument, "a step must hold at least one token (max_batch_tokens is " +
                                                      std::to_string(options.max_batch_tokens) + ")");
  }
  if (options.max_running_sequences < 1) {
    return make_error(ErrorCode::InvalidArgument,
                      "at least one sequence must be able to run (max_running_sequences is " +
                          std::to_string(options.max_running_sequences) + ")");
  }
  if (!(options.kv_cache_fraction >= 0 && options.kv_cache_fraction <= 1)) {
    return make_error(ErrorCode::InvalidArgument,
                      "the KV cache fraction of available memory must be within 0..1, not " +
                          std::to_string(options.kv_cache_fraction));
  }
  if (options.kv_block_size < 1 || options.kv_block_size > 4096) {
    return make_error(ErrorCode::InvalidArgument,
                      "a KV block holds 1 to 4096 tokens, not " + std::to_string(options.kv_block_size));
  }
  IWB_RETURN_IF_ERROR(engine->set_up_backend(options, choice, report));
  IWB_RETURN_IF_ERROR(engine->set_up_scheduler(options));
  if (options.expert_load_steps < 1) {
    return make_error(ErrorCode::InvalidArgument,
                      "the expert-load window needs at least one step (expert_load_steps is " +
                          std::to_string(options.expert_load_steps) + ")");
  }
  engine->m_expert_load = ExpertLoadWindow(c.num_layers, c.num_experts, c.num_experts_used, options.expert_load_steps,
                                           c.num_leading_dense_layers);
  engine->m_logits.resize(static_cast<size_t>(c.vocab_size));
  if (options.speculation.is_enabled()) {
    report(0.95, std::string("preparing the drafter (") + spec::drafter_kind_name(options.speculation.kind) + ")");
    IWB_RETURN_IF_ERROR(engine->set_speculation(options.speculation));
  }
  engine->m_summary.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  report(1.0, "ready");
  return std::unique_ptr<Engine>(std::move(engine));
}

Status PagedEngine::set_up_backend(const EngineOptions& o, const DeviceChoice& choice, const LoadProgress& report) {
  std::string cpu_reason = choice.cpu_reason;
  if (choice.kind == ComputeDeviceKind::Cuda) {
    report(0.2, "loading the weights onto " + choice.id() + " (" + choice.cuda_device.name + ")");
    Result<std::unique_ptr<ForwardBackend>> cuda =
        make_cuda_forward_backend(m_config, m_weights, o, choice.cuda_index, m_context_length,
                                  [&](double f, const std::string& stage) { report(0.2 + 0.7 * f, stage); });
    if (cuda) {
      m_backend = std::move(*cuda);
    } else if (!choice.is_automatic) {
      return cuda.status();
    } else {
      // "auto": a device that cannot take this model leaves the CPU, which can.
      cpu_reason = choice.id() + " could not take the model: " + cuda.error_message();
      report(0.2, "falling back to the CPU: " + cpu_reason);
    }
  }
  if (m_backend == nullptr) {
    // The KV pool's size first: a load that cannot fit is refused before it reads or allocates.
    KvPoolGeometry kv;
    kv.shape = kv_cache_shape(m_config);
    kv.block_size = o.kv_block_size;
    kv.type = o.kv_cache_type;
    const ComputeDeviceInfo host = describe_cpu_device();
    KvBudgetInput budget_input;
    budget_input.bytes_per_position = kv.bytes_per_position();
    budget_input.context_length = m_context_length;
    budget_input.available_bytes = host.free_memory_bytes;
    Result<uint64_t> budget = kv_budget_bytes(o, budget_input);
    if (!budget) return budget.status();
    Result<int64_t> num_blocks = PagedKvStorage::num_blocks_for_budget(kv.shape, kv.block_size, *budget, kv.type);
    if (!num_blocks) return num_blocks.status();
    kv.num_blocks = *num_blocks;
    const uint64_t kv_bytes =
        PagedKvStorage::bytes_per_block(kv.shape, kv.block_size, kv.type) * static_cast<uint64_t>(kv.num_blocks);
    IWB_RETURN_IF_ERROR(
        check_host_memory(m_summary.tensor_bytes, kv_bytes, host.total_memory_bytes, host.free_memory_bytes));

    // Read every page of the weights once now, so the load shows the disk time and the first
    // prompt's timing shows compute, not page faults. (A device upload reads them anyway.)
    const auto& tensors = m_file->tensors();
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const std::span<const uint8_t> bytes = m_file->tensor_data(tensors[i]);
      for (size_t off = 0; off < bytes.size(); off += 4096) sink = sink + bytes[off];
      if (i % 16 == 0)
        report(0.2 + 0.7 * static_cast<double>(i) / static_cast<double>(tensors.size()), "reading weights");
    }
    report(0.9, "allocating the KV cache");
    const int threads = o.num_threads > 0 ? o.num_threads : iwb::default_num_threads();
    Result<std::unique_ptr<CpuForwardBackend>> cpu =
        CpuForwardBackend::create(m_config, m_weights, kv, threads, o.max_batch_tokens);
    if (!cpu) return cpu.status();
    m_backend = std::move(*cpu);
  }
  m_backend->set_batch_invariant(o.is_batch_invariant);
  m_kv = m_backend->kv_geometry();
  m_summary.device = m_backend->device_id();
  m_summary.device_description = m_backend->description();
  m_summary.device_fallback_reason = m_backend->device().kind == ComputeDeviceKind::Cpu ? cpu_reason : std::string();
  return {};
}

Status PagedEngine::set_up_scheduler(const EngineOptions& o) {
  BlockManagerConfig blocks;
  blocks.num_blocks = m_kv.num_blocks;
  blocks.block_size = m_kv.block_size;
  // A recurrent layer's state is the whole prefix in a fixed size: a cached block of keys and
  // values cannot give it back. Such a model resumes a cached prefix only where a checkpoint of
  // its state was kept; without checkpoints every prompt is computed from its start.
  const bool is_recurrent = m_config.has_recurrent_layers();
  blocks.enable_prefix_caching = o.enable_prefix_caching && (!is_recurrent || o.max_state_checkpoints > 0);
  if (is_recurrent && blocks.enable_prefix_caching) {
    m_checkpoints = StateCheckpoints(o.max_state_checkpoints, o.checkpoint_min_step);
    blocks.is_usable_prefix = [checkpoints = &m_checkpoints](BlockHash key, std::span<const int32_t> prefix) {
      return checkpoints->has(key, prefix);
    };
  }
  SchedulerConfig scheduling;
  scheduling.max_batch_tokens = o.max_batch_tokens;
  scheduling.max_running_sequences = o.max_running_sequences;
  Result<Scheduler> scheduler = Scheduler::create(blocks, scheduling);
  if (!scheduler) return scheduler.status();
  m_scheduler = std::make_unique<Scheduler>(std::move(*scheduler));
  // A sequence can never outgrow the pool: past it, it ends as if its context were full.
  m_max_sequence_length = std::min(m_context_length, m_kv.num_slots());
  // Recurrent layers: a verification step saves the state after each guess, so a step's
  // guesses in all are held to the sequences that may run at once. The saves then never hold
  // more memory than the running sequences' live states (on the 9B, 32 sequences drafting 4
  // would otherwise save 128 states of 50 MiB in one step).
  m_speculation = SpeculationControl(m_config.vocab_size, m_max_sequence_length,
                                     m_config.has_recurrent_layers() ? o.max_running_sequences : 0);
  return {};
}

Result<RequestId> PagedEngine::add_request(GenerationRequest request) {
  const auto num_prompt = static_cast<int64_t>(request.prompt_tokens.size());
  if (num_prompt == 0) return make_error(ErrorCode::InvalidArgument, "the prompt is empty");
  if (num_prompt > context_length()) {
    return make_error(ErrorCode::InvalidArgument, "prompt is " + std::to_string(num_prompt) +
                                                      " tokens but the context holds " +
                                                      std::to_string(context_length()));
  }
  // The pool's size never changes, so "never fits" is known now, without the scheduler.
  const int64_t block_size = m_kv.block_size;
  const int64_t num_blocks_needed = (num_prompt + block_size - 1) / block_size;
  if (num_blocks_needed > m_kv.num_blocks) {
    return make_error(ErrorCode::InvalidArgument,
                      "prompt is " + std::to_string(num_prompt) + " tokens and needs " +
                          std::to_string(num_blocks_needed) + " KV blocks of " + std::to_string(block_size) +
                          " tokens, but the whole KV cache holds " + std::to_string(m_kv.num_blocks) + " (" +
                          describe_bytes(m_kv.num_bytes()) + "); give the KV cache more memory");
  }
  for (size_t i = 0; i < request.prompt_tokens.size(); ++i) {
    const int32_t t = request.prompt_tokens[i];
    if (t < 0 || t >= m_config.vocab_size) {
      return make_error(ErrorCode::InvalidArgument, "prompt token " + std::to_string(i) + " has id " +
                                                        std::to_string(t) + ", outside the vocabulary (" +
                                                        std::to_string(m_config.vocab_size) + " tokens)");
    }
  }
  for (const auto& [id, bias] : request.sampling.logit_bias) {
    if (id < 0 || id >= m_config.vocab_size) {
      return make_error(ErrorCode::InvalidArgument, "logit bias names token " + std::to_string(id) +
                                                        ", outside the vocabulary (" +
                                                        std::to_string(m_config.vocab_size) + " tokens)");
    }
    // -inf bans the token (llama.cpp's "-l 15043-inf"); +inf or NaN would leave nothing to draw from.
    if (std::isnan(bias) || bias == INFINITY) {
      return make_error(ErrorCode::InvalidArgument,
                        "logit bias of token " + std::to_string(id) + " is not a number or -inf");
    }
  }
  if (!request.json_grammar && (!request.grammar_trigger.empty() || request.is_grammar_trigger_forced)) {
    return make_error(ErrorCode::InvalidArgument, "a grammar trigger needs a grammar (json_grammar)");
  }
  if (request.is_grammar_trigger_forced && request.grammar_trigger.empty()) {
    return make_error(ErrorCode::InvalidArgument, "a forced grammar trigger needs the trigger's text");
  }
  return m_inbox.add(std::move(request));
}

void PagedEngine::abort_request(RequestId id) { m_inbox.abort(id); }

bool PagedEngine::has_unfinished_requests() const { return m_inbox.has_unfinished(); }

EngineKvSnapshot PagedEngine::kv_snapshot() const {
  EngineKvSnapshot snap;
  snap.cache = m_scheduler->block_manager().snapshot();
  snap.scheduler = m_scheduler->stats();
  snap.bytes_per_block = m_kv.bytes_per_block();
  snap.cache_type = kv_cache_types_name(m_kv.type);
  auto describe = [&](SequenceId id, bool is_running) {
    const Sequence* s = m_scheduler->find(id);
    if (s == nullptr) return;
    KvSequenceInfo info;
    info.sequence = id;
    info.request = s->request;
    info.is_running = is_running;
    info.num_tokens = s->num_tokens();
    info.num_prompt_tokens = s->num_prompt_tokens;
    info.num_computed_tokens = s->num_computed_tokens;
    info.num_cached_prompt_tokens = s->num_cached_prompt_tokens;
    info.num_preemptions = s->num_preemptions;
    snap.sequences.push_back(info);
  };
  for (const SequenceId id : m_scheduler->waiting()) describe(id, false);
  for (const SequenceId id : m_scheduler->running()) describe(id, true);
  return snap;
}

MemoryReport PagedEngine::memory_report() const {
  MemoryReport m;
  m.weights_bytes = m_weights.num_bytes;
  m.file_bytes = m_file->file_size();
  if (m_file->load_mode() == gguf::LoadMode::Read) m.weights_read_bytes = m_file->file_size();
  m.kv_pool_bytes = m_kv.num_bytes();
  m.kv_bytes_per_position = m_kv.bytes_per_position();
  m.kv_cache_type = kv_cache_types_name(m_kv.type);
  m.kv_num_blocks = m_kv.num_blocks;
  m.kv_block_size = m_kv.block_size;
  m.kv_positions_total = m_kv.num_slots();
  const BlockManagerStats st = m_scheduler->block_manager().stats();
  m.kv_positions_used = st.num_used_slots;
  m.kv_positions_allocated = st.num_used_blocks * st.block_size;
  m.kv_positions_cached = st.num_cached_blocks * st.block_size;
  m.scratch_bytes = m_logits.capacity() * sizeof(float);
  m_backend->fill_memory_report(&m);  // its scratch, and a device's allocations
  m.drafter_bytes = m_speculation.drafter_bytes();
  m.recurrent_state_bytes_per_sequence = m_config.has_recurrent_layers() ? m_config.recurrent_state_bytes() : 0;
  if (m.recurrent_state_bytes_per_sequence > 0) {
    m.recurrent_num_sequences = static_cast<int64_t>(m.recurrent_state_bytes / m.recurrent_state_bytes_per_sequence);
  }
  return m;
}

Result<std::vector<float>> PagedEngine::logits_for(const std::vector<int32_t>& tokens) {
  const ReleaseRemovedOnExit release{*this};  // the temporary sequence's state, on every path
  if (has_unfinished_requests()) {
    return make_error(ErrorCode::InvalidArgument, "logits_for needs an idle engine: a request is running");
  }
  if (tokens.empty()) return make_error(ErrorCode::InvalidArgument, "no tokens to compute logits for");
  if (static_cast<int64_t>(tokens.size()) > context_length()) {
    return make_error(ErrorCode::InvalidArgument, "the sequence is " + std::to_string(tokens.size()) +
                                                      " tokens but the context holds " +
                                                      std::to_string(context_length()));
  }
  for (const int32_t t : tokens) {
    if (t < 0 || t >= m_config.vocab_size) {
      return make_error(ErrorCode::InvalidArgument, "token id " + std::to_string(t) + " is outside the vocabulary (" +
                                                        std::to_string(m_config.vocab_size) + " tokens)");
    }
  }
  // A temporary sequence (request 0) through the ordinary steps: chunked like any prompt, its
  // full blocks left in the prefix cache afterwards.
  Result<SequenceId> sequence = m_scheduler->add_sequence(0, tokens);
  if (!sequence) return sequence.status();
  std::vector<float> logits;
  while (logits.empty()) {
    const ScheduledStep plan = m_scheduler->schedule();
    if (!plan.failed.empty()) return make_error(ErrorCode::InvalidArgument, plan.failed.front().message);
    if (plan.batch.empty()) {
      (void)m_scheduler->abort(*sequence);
      return make_error(ErrorCode::OutOfMemory, "the sequence could not be scheduled: no KV blocks are free");
    }
    FlatBatch flat = flatten(plan.batch);
    Status forward_status = prepare_state_checkpoints(plan.batch, &flat);
    if (forward_status) forward_status = run_forward(plan.batch, flat, nullptr);
    if (!forward_status) {
      (void)m_scheduler->abort(*sequence);
      return forward_status;
    }
    keep_state_checkpoints();
    std::vector<SequenceOutput> outputs;
    if (!flat.logits_rows.empty()) {
      logits.assign(m_logits.begin(), m_logits.begin() + m_config.vocab_size);
      outputs.push_back({*sequence, -1, /*is_finished=*/true});
    }
    IWB_RETURN_IF_ERROR(m_scheduler->on_step_done(outputs));
  }
  return logits;
}

}  // namespace iwb
