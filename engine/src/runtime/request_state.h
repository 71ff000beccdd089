// One generation request inside the CPU engine: its sampler, detokenizer and stop-string
// matcher, its structured output's place in its grammar, the history its repeat penalty sees,
// and its timings. It decides, token by token, whether the request ends (end of generation,
// stop string, a structured reply's closed value, token limit, full context).
#pragma once

#include "iwb/engine/paged/paged_types.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/runtime/stop_strings.h"
#include "iwb/engine/sampling/sampler.h"
#include "iwb/engine/sampling/token_constraint.h"
#include "iwb/engine/tokenizer/streaming_detokenizer.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace iwb {

class RequestState {
 public:
  using Clock = std::chrono::steady_clock;

  // `token_bytes`: the vocabulary's bytes, needed (not null) when params.json_grammar is set.
  RequestState(RequestId id, GenerationRequest params, Clock::time_point submitted, const tokenizer::Tokenizer& tok,
               std::shared_ptr<const TokenBytes> token_bytes = nullptr);

  RequestId id() const { return m_id; }
  SequenceId sequence() const { return m_sequence; }
  void set_sequence(SequenceId sequence) { m_sequence = sequence; }
  const GenerationRequest& params() const { return m_params; }
  int32_t num_generated() const { return m_num_generated; }
  bool is_started() const { return m_is_started; }

  // The request's first step: queued time ends, prompt time begins. `num_reused_prompt_tokens`
  // is what the prefix cache held of its prompt.
  void start(Clock::time_point now, int64_t num_reused_prompt_tokens);
  void count_preemption() { ++m_num_preemptions; }

  // Samples the next token from the logits of the request's last token; -1 when a structured
  // reply has no token that may come next (the request then ends with no_token_fits_message()).
  int32_t sample(std::span<const float> logits);
  std::string no_token_fits_message() const;

  // Speculative decoding (paged_engine_spec.cpp): the target's distribution after the history
  // so far, the acceptance rule's uniform draws (a stream of their own, seeded from the
  // request's seed), the request's statistics and its current draft length (adaptive K).
  std::vector<TokenProb> candidates(std::span<const float> logits) const {
    return m_sampler.candidates(logits, m_history);
  }
  double uniform() { return static_cast<double>(m_spec_rng() >> 11) * 0x1.0p-53; }
  spec::SpeculationStats& speculation() { return m_speculation; }
  int32_t adaptive_draft_tokens() const { return m_adaptive_draft_tokens; }
  void set_adaptive_draft_tokens(int32_t k) { m_adaptive_draft_tokens = k; }

  // Takes a sampled token: its event, and the reason the request ends with it, if it does.
  // is_context_full: no position is left for the token to be run at.
  struct Accepted {
    TokenEvent event;
    std::optional<FinishReason> finish;
  };
  Accepted accept(int32_t token, bool is_context_full, const tokenizer::Tokenizer& tok);
  // The log-probabilities the request asked for (GenerationRequest::num_top_logprobs), from
  // the logits `event`'s token was sampled from; nothing when it asked for none.
  void add_logprobs(std::span<const float> logits, TokenEvent* event) const;

  // The request's summary (prompt and generation times, token timestamps).
  RequestFinished finished(FinishReason reason, std::string error = {});

 private:
  // Text held by the detokenizer and the stop matcher; *is_stopped when it completes a stop
  // string (then only the text before it).
  std::string release_held_text(bool* is_stopped);

  RequestId m_id;
  GenerationRequest m_params;
  Sampler m_sampler;
  tokenizer::StreamingDetokenizer m_detokenizer;
  StopStringMatcher m_stops;
  std::shared_ptr<const TokenBytes> m_token_bytes;
  // Tool calls (GenerationRequest::grammar_trigger): whether the token's bytes complete the
  // trigger, and the bytes after it; would_arm() asks whether the grammar takes those bytes.
  struct Trigger {
    bool is_completed = false;
    std::string rest;
  };
  Trigger find_trigger(int32_t token) const;
  bool would_arm(int32_t token) const;
  int32_t sample_free(std::span<const float> logits);
  int32_t sample_held(std::span<const float> logits);
  bool is_held_token_allowed(int32_t token) const;

  std::optional<JsonMatcher> m_matcher;     // structured output: where the reply is in its grammar
                                            // (with a trigger: only while a call is being written)
  std::string m_trigger_tail;               // with a trigger: the free text's last bytes, shorter than it
  bool m_may_end_before_next_call = false;  // after a call: the reply may end instead of another
  bool m_is_trigger_passed = false;         // a trigger only at the start: the reply began otherwise
  std::vector<int32_t> m_history;           // prompt, then generated tokens
  SequenceId m_sequence = 0;
  bool m_is_started = false;
  int32_t m_num_generated = 0;
  int32_t m_num_reused_prompt_tokens = 0;
  int32_t m_num_preemptions = 0;
  Clock::time_point m_submitted, m_started, m_first_token, m_last_token;
  std::vector<double> m_token_seconds;  // since submitted
  std::mt19937_64 m_spec_rng;
  spec::SpeculationStats m_speculation;
  int32_t m_adaptive_draft_tokens = 0;  // 0: not yet chosen
};

}  // namespace iwb
