// The CPU implementation of Engine: one request at a time (others wait in a queue), a
// contiguous f16 KV cache, and reuse of the cached prefix a new prompt shares with the last
// sequence (a chat's earlier turns are not recomputed).
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/runtime/kv_cache.h"
#include "iwb/engine/runtime/stop_strings.h"
#include "iwb/engine/tokenizer/streaming_detokenizer.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "model/model_weights.h"
#include "runtime/cpu_forward.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <set>

namespace iwb {

class CpuEngine final : public Engine {
 public:
  static Result<std::unique_ptr<Engine>> load(const std::string& path, const EngineOptions& options,
                                              const LoadProgress& progress);

  const ModelSummary& model() const override { return m_summary; }
  const ModelConfig& config() const override { return m_config; }
  const tokenizer::Tokenizer& tokenizer() const override { return m_tokenizer; }
  int64_t context_length() const override { return m_kv->capacity(); }
  const std::string& chat_template() const override { return m_chat_template; }
  int num_threads() const override { return m_forward->num_threads(); }
  int64_t max_batch_tokens() const override { return m_forward->max_batch(); }

  Result<RequestId> add_request(GenerationRequest request) override;
  void abort_request(RequestId id) override;
  bool has_unfinished_requests() const override;
  Result<StepResult> step() override;
  void set_profiling(bool is_enabled) override { m_is_profiling = is_enabled; }
  bool is_profiling() const override { return m_is_profiling; }
  Result<std::vector<float>> logits_for(const std::vector<int32_t>& tokens) override;

 private:
  using Clock = std::chrono::steady_clock;

  struct Queued {
    RequestId id;
    GenerationRequest params;
    Clock::time_point submitted;
  };
  // The request being generated.
  struct Active {
    Active(RequestId id, GenerationRequest p, const tokenizer::Tokenizer& tok);
    RequestId id;
    GenerationRequest params;
    Sampler sampler;
    tokenizer::StreamingDetokenizer detokenizer;
    StopStringMatcher stops;
    std::vector<int32_t> history;  // prompt, then generated tokens
    bool is_prefilled = false;
    int32_t num_generated = 0;
    int32_t num_reused_prompt_tokens = 0;
    Clock::time_point submitted, started, first_token, last_token;
    std::vector<double> token_seconds;  // since submitted
  };

  CpuEngine(std::unique_ptr<gguf::GgufFile> file, tokenizer::Tokenizer tokenizer);

  // Runs the request's next forward pass; with is_profiled, its kernel records go to result->profile.
  Status run_forward(Active& a, bool is_profiled, StepResult* result);
  void emit_token(Active& a, int32_t token, StepResult* result);
  // Releases text held by the detokenizer and the stop matcher; sets *is_stopped when that
  // text completes a stop string (then only the text before it is returned).
  std::string release_held_text(Active& a, bool* is_stopped);
  void finish(Active& a, FinishReason reason, std::string error, StepResult* result);

  std::unique_ptr<gguf::GgufFile> m_file;
  tokenizer::Tokenizer m_tokenizer;
  ModelSummary m_summary;
  ModelConfig m_config;
  ModelWeights m_weights;
  std::string m_chat_template;
  std::unique_ptr<KvCache> m_kv;
  std::unique_ptr<CpuForward> m_forward;
  std::vector<float> m_logits;          // [vocab] of the last forward pass
  std::vector<int32_t> m_cached_tokens; // the tokens whose keys and values m_kv holds

  std::unique_ptr<Active> m_active;     // touched only by step() (one thread)
  std::atomic<bool> m_has_active{false};  // m_active != null, readable from any thread
  std::atomic<bool> m_is_profiling{false};
  uint64_t m_num_steps = 0;             // touched only by step()

  mutable std::mutex m_mutex;           // guards the members below (any thread)
  std::deque<Queued> m_queue;
  std::set<RequestId> m_abort_requests;
  std::vector<RequestFinished> m_aborted_while_queued;
  RequestId m_next_id = 1;
  RequestId m_active_id = 0;            // 0: none
};

}  // namespace iwb
