// The inference engine's step API: load a model, add generation requests, call step() until
// they finish. Requests are served together (continuous batching over a paged KV cache with
// prefix caching): each step is one forward pass mixing decode tokens and prompt chunks of
// several requests. Results are plain values so a worker thread can pass them to the GUI.
#pragma once

#include "iwb/engine/model/model_config.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/engine/paged/kv_cache_types.h"
#include "iwb/engine/profile/kernel_record.h"
#include "iwb/engine/runtime/activation_observer.h"
#include "iwb/engine/runtime/engine_reports.h"
#include "iwb/engine/runtime/expert_load.h"
#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/sampling/sampler.h"
#include "iwb/engine/spec/spec_config.h"
#include "iwb/engine/spec/spec_stats.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace iwb {

namespace tokenizer {
class Tokenizer;
}
namespace spec {
class Drafter;
}

// KV pool size when EngineOptions names none: this many full contexts (see EngineOptions).
inline constexpr int64_t kDefaultKvContexts = 4;

struct EngineOptions {
  int64_t context_length = 0;  // per sequence; 0: the model's trained context, at most 4096
  int num_threads = 0;         // 0: all cores (OpenMP default)
  // Where the forward pass runs: "auto" (the first working CUDA device, else the CPU), "cpu",
  // or "cuda:N". A named CUDA device that is missing or fails to start is an error saying why
  // (the caller can then offer the CPU); "auto" falls back to the CPU and says so in
  // ModelSummary / the load progress.
  std::string device = "auto";
  // Tokens per step, decodes and prompt chunks together (a longer prompt is prefilled in
  // chunks over several steps); also the size of the forward pass's activation scratch.
  int64_t max_batch_tokens = 128;
  // The paged KV cache: blocks of kv_block_size positions, as many as the budget holds.
  // Budget: kv_cache_bytes when set; else kv_cache_fraction (0..1] of the memory available
  // at load; else kDefaultKvContexts full contexts, lowered to a quarter of the available
  // memory when that is less, but never below one context. On a CUDA device "available" is the
  // free device memory after the weights and scratch (less a reserve), and the default takes
  // 0.9 of it, at most max_running_sequences full contexts.
  int32_t kv_block_size = 16;
  uint64_t kv_cache_bytes = 0;
  double kv_cache_fraction = 0;
  int64_t max_running_sequences = 32;  // sequences decoding together at most
  bool enable_prefix_caching = true;   // full blocks of earlier prompts are reused
  // Recurrent layers (Qwen 3.5): copies of sequences' states at the last block boundaries of
  // their prompts and of their replies, so prefix caching can resume a later prompt there (a
  // chat's next turn, a regenerated reply); at most this many, least recently used dropped first; 0: none, and every
  // prompt is computed from its start. llama.cpp's --ctx-checkpoints (its default, per slot).
  int32_t max_state_checkpoints = 32;
  // And within long prompts, every this many tokens (rounded down to whole KV blocks), so a
  // later prompt that shares only a long prompt's beginning (the same document, another
  // question) resumes part way; 0: only at the ends. llama.cpp's --checkpoint-min-step (its
  // default), which spaces its checkpoints at least this far apart.
  int64_t checkpoint_min_step = 8192;
  // What the KV cache stores keys and values as (separately, llama.cpp's -ctk/-ctv): F16, or
  // Q8_0, Q5_1, Q5_0, Q4_1, Q4_0 (head sizes must be multiples of 32), or F8_E4M3 (vLLM's; with
  // calculate_scales its per-layer scales come from the first batch). The CUDA backend takes
  // the same types (head sizes multiples of 16 with a quantized side).
  KvCacheTypes kv_cache_type{};
  // Batch-invariant matmuls: each token's logits are bit for bit the same whether it is decoded
  // alone, batched with other sequences, in a prompt chunk or verifying speculative guesses,
  // so greedy output never depends on them. The fast kernels pick other code for one token, a
  // few and many, whose sums round differently; a near-tie of the two best logits can then
  // flip. Costs speed (the dequantizing matmul path with f32 activations).
  bool is_batch_invariant = false;
  // CUDA: products of Q4_0 and Q8_0 weights on int8 activations (each 32-value block of the
  // input rounded to 8 bits with its own f32 scale, as the CPU's fast path and llama.cpp's
  // quantized kernels do; the weights uploaded in the split layout, iwb/kernels/split_blocks.h).
  // false: f32 activations throughout, which the CPU's exact (batch-invariant) path matches up
  // to the order of its sums. The environment's IWB_CUDA_SPLIT=0 keeps the GGUF layout (int8
  // only for one token) and IWB_CUDA_Q8_INPUT=0 that int8 path too, for comparisons.
  bool cuda_int8_activations = true;
  // How the weights come into memory, llama.cpp's --load-mode: "mmap" maps the file (an instant
  // load, pages shared with the page cache, a model larger than memory still runs); "mlock"
  // maps it and locks it in memory (never paged out; a refusal is reported, not fatal); "none"
  // reads it into memory of the process's own, advised for 2 MiB transparent huge pages;
  // "auto" reads on the CPU where the kernel offers transparent huge pages and the file takes
  // at most half the available memory, and maps otherwise (and on a GPU, which gets its own
  // copy). Decode reads every weight each token; in 2 MiB pages it misses the TLB far less:
  // Xeon model 207, the default model in Q4_0, MBU 75-77% mapped against 83-84% read
  // (docs/benchmarks.md). choose_load_mode (runtime/load_mode.h) has the rule.
  std::string load_mode = "auto";
  // Speculative decoding from the start (Engine::set_speculation can change it later).
  spec::SpeculativeConfig speculation{};
  // Mixture-of-experts models: Engine::expert_load() sums the routing of this many last steps.
  int32_t expert_load_steps = 64;
};

using RequestId = uint64_t;

struct GenerationRequest {
  std::vector<int32_t> prompt_tokens;
  SamplingParams sampling;
  int32_t max_new_tokens = 512;           // <= 0: no limit (until end of generation or a full context)
  std::vector<std::string> stop_strings;  // generation ends when the text contains one
  bool stop_at_end_of_generation = true;  // EOS / EOT / end-of-turn tokens
  // Write control tokens' text ("<|channel|>") into the streamed text instead of nothing: a
  // harmony reply's channels are told apart only by them (ChatPrompt::renders_special_tokens).
  bool render_special_tokens = false;
  // Speculative decoding: -1 follows the engine's setting, 0 turns it off for this request
  // (a baseline to compare with), K > 0 guesses K tokens per step when a drafter is set.
  int32_t num_draft_tokens = -1;
  // Log-probabilities in each TokenEvent (token_logprobs): -1 none, 0 the chosen token's,
  // N > 0 also the N most likely tokens. Turns off the device-side greedy argmax for the request.
  int32_t num_top_logprobs = -1;
  // Structured output (response_format / --json-schema): the reply is held to this grammar, token
  // by token, and ends as soon as its value is whole. Such a request speculates only when greedy.
  std::shared_ptr<const JsonGrammar> json_grammar;
  // Tool calls (llama.cpp's lazy grammar): with a trigger, the reply is free text until it writes
  // the trigger ("<tool_call>"); json_grammar then holds what follows, up to the end of the
  // grammar's suffix. After that the reply may only end or write another ("\n", the trigger and
  // a held value), as llama.cpp's tool grammars allow; it ends there when `ends_after_grammar`
  // (one call at most: parallel_tool_calls false).
  std::string grammar_trigger;
  std::string grammar_separator = "\n";    // between two held values (Qwen's calls; Mistral's: none)
  bool is_grammar_trigger_forced = false;  // the reply opens with the trigger (tool_choice "required")
  // Written before a forced trigger: "</think>" when the prompt left a think block open (GLM-4.7's
  // generation prompt), so that a required call is the answer's, not the reasoning's.
  std::string forced_trigger_lead;
  bool ends_after_grammar = false;
  // The trigger is the grammar's own first bytes (Llama 3's calls open with "{"): the grammar
  // holds the text from the trigger on, not after it.
  bool is_trigger_in_grammar = false;
  // The trigger counts only at the reply's start (white space before it aside).
  bool is_trigger_at_start = false;
};

enum class FinishReason { EndOfGeneration, StopString, MaxTokens, ContextFull, Aborted, Error };
const char* finish_reason_name(FinishReason reason);

// One generated token of one request. `text` is the complete UTF-8 text this token adds
// (empty while a multi-byte character is still incomplete; stop strings are held back). The
// token that ends a request (end of generation, last allowed token) also carries whatever
// text was still held back.
struct TokenEvent {
  RequestId request = 0;
  int32_t token = -1;
  std::string text;
  double seconds = 0;     // when the token was sampled, in seconds since add_request() took the request
  bool is_draft = false;  // speculation: a drafted token the target accepted
  // When GenerationRequest::num_top_logprobs >= 0: the token's log-probability and the most
  // likely tokens at its position (see token_logprobs).
  float logprob = 0;
  std::vector<TokenLogprob> top_logprobs{};
};

struct RequestFinished {
  RequestId request = 0;
  FinishReason reason = FinishReason::EndOfGeneration;
  std::string error;  // for FinishReason::Error
  int32_t num_prompt_tokens = 0;
  int32_t num_generated_tokens = 0;
  double prompt_seconds = 0;      // from the request's first step to its first token
  double generation_seconds = 0;  // from first to last generated token
  double queued_seconds = 0;      // from add_request() to the request's first step
  // Prompt prefix whose keys and values the prefix cache already held (whole blocks).
  int32_t num_reused_prompt_tokens = 0;
  int32_t num_preemptions = 0;  // times its blocks were taken back and it was recomputed
  // When each generated token was sampled, seconds since add_request() (TokenEvent::seconds):
  // token_seconds[0] = queued_seconds + prompt_seconds is the time to first token.
  std::vector<double> token_seconds;
  // Speculative decoding over the request's life (draft and verify seconds are the wall time
  // of the steps it speculated in, shared with the other sequences of those steps).
  spec::SpeculationStats speculation{};
};

struct StepStats {
  int32_t num_prompt_tokens = 0;  // prompt tokens processed in this step (prefill chunks, recomputation)
  int32_t num_decode_tokens = 0;  // tokens generated (sampled) in this step
  int32_t num_sequences = 0;      // sequences in the step's forward pass
  int32_t num_preemptions = 0;    // sequences preempted while planning this step
  int64_t num_waiting = 0;        // after the step: sequences waiting for admission
  int64_t num_running = 0;        // after the step: sequences holding KV blocks
  BlockManagerStats kv;           // the KV pool after the step (counters only; kv_snapshot() has the blocks)
  double seconds = 0;
  spec::SpeculationStats speculation{};  // the step's drafts and their verification (empty without)
  std::string speculation_error{};       // the drafter failed this step (the step decoded without drafts)
};

struct StepResult {
  std::vector<TokenEvent> tokens;
  std::vector<RequestFinished> finished;
  StepStats stats;
  ProfileBatch profile;  // the step's kernel records while profiling is on
};

// Load progress: fraction 0..1 and what is happening.
using LoadProgress = std::function<void(double fraction, const std::string& stage)>;

class Engine {
 public:
  virtual ~Engine() = default;

  static Result<std::unique_ptr<Engine>> load(const std::string& gguf_path, const EngineOptions& options,
                                              const LoadProgress& progress = {});

  virtual const ModelSummary& model() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual const tokenizer::Tokenizer& tokenizer() const = 0;
  virtual int64_t context_length() const = 0;
  // The model's tokenizer.chat_template (a Jinja text), empty when it has none.
  virtual const std::string& chat_template() const = 0;
  // Its tokenizer.chat_template.tool_use (Hermes 2 Pro / 3: the template for conversations with
  // tools, as Hugging Face's tokenizer_config names it), empty when it has none.
  virtual const std::string& chat_template_tool_use() const = 0;
  virtual int num_threads() const = 0;
  virtual int64_t max_batch_tokens() const = 0;  // tokens per step (EngineOptions)

  // Queues a request; a prompt that cannot fit the context, or that needs more KV blocks than
  // the whole pool holds, is refused with a clear message. Safe from any thread.
  virtual Result<RequestId> add_request(GenerationRequest request) = 0;
  // Any request, queued or generating; it finishes (FinishReason::Aborted) in the next step().
  // Unknown or finished ids are ignored. Safe from any thread.
  virtual void abort_request(RequestId id) = 0;
  virtual bool has_unfinished_requests() const = 0;

  // One forward pass over the scheduler's batch: one new token for every generating request,
  // then prompt chunks, under the max_batch_tokens budget. Requests that finish (or are
  // refused, or lose to an error) are in StepResult::finished.
  virtual Result<StepResult> step() = 0;

  // The paged KV cache for the block map: a copy of every block and the counters. Call from
  // the thread that calls step(), between steps.
  virtual EngineKvSnapshot kv_snapshot() const = 0;
  // Where the engine's memory goes (weights, KV pool and its use, scratch). Same thread rule.
  virtual MemoryReport memory_report() const = 0;
  // Mixture-of-experts models: tokens routed to each expert of each layer over the last
  // EngineOptions::expert_load_steps steps (step() only; logits_for and evaluation runs are
  // not counted). Empty (num_experts 0) for a dense model or a backend that does not run
  // experts. Same thread rule.
  virtual ExpertLoadSnapshot expert_load() const = 0;

  // Per-kernel records in StepResult::profile, off by default. Safe from any thread; takes
  // effect at the next step(). Costs nothing while off; the measured cost while on is
  // printed by `iwb profile-overhead`.
  virtual void set_profiling(bool is_enabled) = 0;
  virtual bool is_profiling() const = 0;

  // Full-vocabulary logits of the last token of a sequence (tests, evaluation), computed as a
  // temporary sequence through the same paged path (cached prefix blocks are reused, as for
  // any prompt). Refused while requests are queued or generating.
  virtual Result<std::vector<float>> logits_for(const std::vector<int32_t>& tokens) = 0;

  // Speculative decoding for every following step: builds the drafter the config names
  // (opening a draft model, whose vocabulary must match, or requantizing the target's weights:
  // seconds) and guesses config.num_draft_tokens tokens per decoding sequence and step. Kind
  // None turns it off. A bad config leaves the previous setting. Step thread only.
  virtual Status set_speculation(const spec::SpeculativeConfig& config) = 0;
  // The same with a drafter of the caller's (tests, tools); the config gives K and adaptivity.
  virtual Status set_drafter(std::unique_ptr<spec::Drafter> drafter, const spec::SpeculativeConfig& config) = 0;
  virtual const spec::SpeculativeConfig& speculation() const = 0;

  // Logits of every position from `first_position` on (the logits at position p predict token
  // p + 1), for perplexity and KL divergence: one temporary sequence run in chunks of
  // max_batch_tokens, each row handed to `sink` in position order. Positions served from the
  // prefix cache have no logits: load evaluation engines with prefix caching off. Refused
  // while requests are queued or generating.
  using LogitsSink = std::function<Status(int64_t position, std::span<const float> logits)>;
  virtual Status logits_for_positions(const std::vector<int32_t>& tokens, int64_t first_position,
                                      const LogitsSink& sink) = 0;
  // The model's multi-token-prediction head (nextn_predict_layers) over the same tokens: at
  // position p it reads token p and the target's hidden state at p - 1 (zeros at 0), and its
  // logits predict token p + 2; every position's row goes to `sink`, for comparing the head
  // with another implementation. Refused for a model without one, or while requests run.
  virtual Status mtp_logits_for_positions(const std::vector<int32_t>& tokens, const LogitsSink& sink) {
    (void)tokens, (void)sink;
    return make_error(ErrorCode::Unsupported, "this engine does not run multi-token-prediction heads");
  }

  // Sees the input of every weight matmul from the next step on (imatrix collection); null
  // turns it off (the default, costing one pointer test per matmul). Step thread only.
  virtual void set_activation_observer(ActivationObserver* observer) = 0;
};

}  // namespace iwb
