// RequestState: sampling history, streamed text with stop strings held back, the stop rules
// and the timings of one request.
#include "runtime/request_state.h"

#include <cmath>

namespace iwb {
namespace {

double seconds_between(RequestState::Clock::time_point a, RequestState::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

RequestState::RequestState(RequestId id, GenerationRequest params, Clock::time_point submitted,
                           const tokenizer::Tokenizer& tok, std::shared_ptr<const TokenBytes> token_bytes)
    : m_id(id),
      m_params(std::move(params)),
      m_sampler(m_params.sampling),
      // A reply continues the prompt: keep the leading space SPM tokens carry.
      m_detokenizer(tok, m_params.render_special_tokens, /*strip_leading_space=*/false),
      m_stops(m_params.stop_strings),
      m_token_bytes(std::move(token_bytes)),
      m_history(m_params.prompt_tokens),
      m_submitted(submitted),
      m_spec_rng(m_params.sampling.seed ^ 0x5DEECE66Dull) {
  if (m_params.json_grammar && m_token_bytes) {
    // With a trigger the grammar waits for it, unless the reply must open with it.
    if (m_params.grammar_trigger.empty()) {
      m_matcher.emplace(m_params.json_grammar);
    } else if (m_params.is_grammar_trigger_forced) {
      m_matcher.emplace(m_params.json_grammar, m_params.forced_trigger_lead +
                                                   (m_params.is_trigger_in_grammar ? "" : m_params.grammar_trigger));
    }
  }
}

int32_t RequestState::sample(std::span<const float> logits) {
  if (m_matcher) return sample_held(logits);
  if (!m_params.grammar_trigger.empty() && m_token_bytes) return sample_free(logits);
  return m_sampler.sample(logits, m_history);
}

RequestState::Trigger RequestState::find_trigger(int32_t token) const {
  if (m_is_trigger_passed) return {};
  const std::string text = m_trigger_tail + m_token_bytes->bytes(token);
  const size_t at = text.find(m_params.grammar_trigger);
  if (at == std::string::npos) return {};
  if (m_params.is_trigger_at_start && text.find_first_not_of(" \t\r\n") < at) return {};
  // What the grammar is fed: from the trigger (when it is the grammar's start) or after it.
  return {true, text.substr(m_params.is_trigger_in_grammar ? at : at + m_params.grammar_trigger.size())};
}

bool RequestState::would_arm(int32_t token) const {
  const Trigger t = find_trigger(token);
  return !t.is_completed || JsonMatcher(m_params.json_grammar).can_feed(t.rest);
}

// Free text between tool calls. A token that completes the trigger must also leave bytes the
// call's grammar takes ("<tool_call>" then "\n", not "<tool_call>{"): such a token is drawn again
// without it, a few times (then the reply goes on with it, as free text).
int32_t RequestState::sample_free(std::span<const float> logits) {
  int32_t token = m_sampler.sample(logits, m_history);
  if (would_arm(token)) return token;
  std::vector<float> banned(logits.begin(), logits.end());
  for (int attempt = 0; attempt < 8; ++attempt) {
    banned[static_cast<size_t>(token)] = -INFINITY;
    token = m_sampler.sample(banned, m_history);
    if (would_arm(token)) break;
  }
  return token;
}

bool RequestState::is_held_token_allowed(int32_t token) const {
  if (m_may_end_before_next_call && m_token_bytes->ends_generation(token)) return true;
  return is_token_allowed(*m_matcher, *m_token_bytes, token);
}

int32_t RequestState::sample_held(std::span<const float> logits) {
  // Structured output, as llama.cpp samples a grammar: the plain draw first, kept when it fits
  // (most do, and one token is cheap to check); otherwise a draw over the tokens that fit.
  // For plain temperature sampling the two together draw from the distribution restricted to
  // the tokens that fit.
  const int32_t first = m_sampler.sample(logits, m_history);
  if (is_held_token_allowed(first)) return first;
  std::vector<float> masked(logits.begin(), logits.end());
  size_t num_allowed = mask_disallowed_tokens(*m_matcher, *m_token_bytes, masked);
  if (m_may_end_before_next_call) {
    for (size_t id = 0; id < masked.size() && id < m_token_bytes->size(); ++id) {
      if (m_token_bytes->ends_generation(static_cast<int32_t>(id))) {
        masked[id] = logits[id];
        ++num_allowed;
      }
    }
  }
  if (num_allowed == 0) return -1;
  // Biases of -inf can rule out every token that fits; the draw then lands on one that does not.
  const int32_t token = m_sampler.sample(masked, m_history);
  return is_held_token_allowed(token) ? token : -1;
}

std::string RequestState::no_token_fits_message() const {
  const std::string what = m_params.json_grammar ? m_params.json_grammar->description() : std::string("the request");
  return "no token of the vocabulary continues the reply as " + what + " asks";
}

void RequestState::start(Clock::time_point now, int64_t num_reused_prompt_tokens) {
  m_is_started = true;
  m_started = now;
  m_num_reused_prompt_tokens = static_cast<int32_t>(num_reused_prompt_tokens);
}

RequestState::Accepted RequestState::accept(int32_t token, bool is_context_full, const tokenizer::Tokenizer& tok) {
  const Clock::time_point now = Clock::now();
  if (m_num_generated == 0) m_first_token = now;
  m_last_token = now;
  ++m_num_generated;
  m_history.push_back(token);
  const double since_submitted = seconds_between(m_submitted, now);
  m_token_seconds.push_back(since_submitted);

  Accepted out;
  out.event = TokenEvent{m_id, token, {}, since_submitted};
  if (m_params.stop_at_end_of_generation && tok.is_end_of_generation(token)) {
    bool is_stopped = false;
    out.event.text = release_held_text(&is_stopped);
    out.finish = is_stopped ? FinishReason::StopString : FinishReason::EndOfGeneration;
    return out;
  }
  const StopStringMatcher::Output text = m_stops.push(m_detokenizer.push(token));
  out.event.text = text.text;
  if (text.is_stopped) {
    out.finish = FinishReason::StopString;
    return out;
  }
  if (!m_matcher && !m_params.grammar_trigger.empty() && m_token_bytes) {
    // Free text: does this token write the trigger? Then the grammar holds what follows it.
    Trigger t = find_trigger(token);
    if (t.is_completed) {
      m_trigger_tail.clear();
      m_matcher.emplace(m_params.json_grammar);
      if (!m_matcher->feed(t.rest)) m_matcher.reset();  // sample_free gave up: free text it stays
    } else {
      m_trigger_tail += m_token_bytes->bytes(token);
      if (m_params.is_trigger_at_start) {
        // Only white space so far may still be followed by the trigger; anything else ends
        // the chance (the tail is all the reply so far, or its last bytes after white space).
        const size_t text = m_trigger_tail.find_first_not_of(" \t\r\n");
        if (text != std::string::npos &&
            m_params.grammar_trigger.compare(0, m_trigger_tail.size() - text, m_trigger_tail, text) != 0) {
          m_is_trigger_passed = true;
        }
      }
      const size_t keep = m_params.grammar_trigger.size() - 1;
      if (m_trigger_tail.size() > keep) m_trigger_tail.erase(0, m_trigger_tail.size() - keep);
    }
  } else if (m_matcher) {
    // sample() chose a token that fits.
    const std::string& bytes = m_token_bytes->bytes(token);
    (void)m_matcher->feed(bytes, m_token_bytes->is_control(token));
    if (!bytes.empty()) m_may_end_before_next_call = false;
  }
  if (m_matcher && m_matcher->is_complete() && m_matcher->next_bytes().none()) {
    // The value (a tool call: with its closing marker) is whole. The reply ends here, without
    // a step spent on the end-of-generation token, unless more calls may follow: then only
    // another one (the separator and the trigger: Qwen2.5 writes "\n" between calls) or the end.
    m_matcher.reset();
    if (m_params.grammar_trigger.empty() || m_params.ends_after_grammar) {
      bool is_stopped = false;
      out.event.text += release_held_text(&is_stopped);
      out.finish = is_stopped ? FinishReason::StopString : FinishReason::EndOfGeneration;
      return out;
    }
    m_matcher.emplace(m_params.json_grammar,
                      m_params.grammar_separator + (m_params.is_trigger_in_grammar ? "" : m_params.grammar_trigger));
    m_may_end_before_next_call = true;
  }
  const bool is_max = m_params.max_new_tokens > 0 && m_num_generated >= m_params.max_new_tokens;
  if (is_max || is_context_full) {
    bool is_stopped = false;
    out.event.text += release_held_text(&is_stopped);
    out.finish = is_stopped ? FinishReason::StopString : (is_max ? FinishReason::MaxTokens : FinishReason::ContextFull);
  }
  return out;
}

void RequestState::add_logprobs(std::span<const float> logits, TokenEvent* event) const {
  if (m_params.num_top_logprobs < 0) return;
  TokenLogprobs lp = token_logprobs(logits, event->token, m_params.num_top_logprobs);
  event->logprob = lp.logprob;
  event->top_logprobs = std::move(lp.top);
}

std::string RequestState::release_held_text(bool* is_stopped) {
  const StopStringMatcher::Output out = m_stops.push(m_detokenizer.flush());
  *is_stopped = out.is_stopped;
  return out.is_stopped ? out.text : out.text + m_stops.flush();
}

RequestFinished RequestState::finished(FinishReason reason, std::string error) {
  RequestFinished f;
  f.request = m_id;
  f.reason = reason;
  f.error = std::move(error);
  f.num_prompt_tokens = static_cast<int32_t>(m_params.prompt_tokens.size());
  f.num_generated_tokens = m_num_generated;
  // A request that never ran was queued until now.
  f.queued_seconds = seconds_between(m_submitted, m_is_started ? m_started : Clock::now());
  f.num_reused_prompt_tokens = m_num_reused_prompt_tokens;
  f.num_preemptions = m_num_preemptions;
  if (m_num_generated > 0) {
    f.prompt_seconds = seconds_between(m_started, m_first_token);
    f.generation_seconds = seconds_between(m_first_token, m_last_token);
  }
  f.token_seconds = std::move(m_token_seconds);
  f.speculation = m_speculation;
  return f;
}

}  // namespace iwb
