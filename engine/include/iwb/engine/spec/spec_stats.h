// What speculation achieved, as plain values: drafted and accepted tokens per draft position,
// the histogram of accepted lengths, and the time spent drafting and verifying. The same
// struct serves one step, one request and a whole run (add() merges). Also the expected
// tokens per step, (1 - a^(K+1)) / (1 - a), and the K it suggests under measured costs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace iwb::spec {

struct SpeculationStats {
  int64_t num_verify_steps = 0;  // sequence-steps that verified a draft (one per sequence per step)
  int64_t num_drafted = 0;       // draft tokens the target scored
  int64_t num_accepted = 0;      // of them, accepted
  int64_t num_emitted = 0;       // tokens those steps produced (accepted + the target's own)
  // [K]: drafts that reached position j + 1 and how many of those were accepted.
  std::vector<int64_t> drafted_per_position;
  std::vector<int64_t> accepted_per_position;
  // [K + 1]: how many steps accepted exactly n draft tokens.
  std::vector<int64_t> accepted_length_histogram;
  double draft_seconds = 0;   // drafter wall time
  double verify_seconds = 0;  // forward passes that carried drafts (the target's verification)

  bool empty() const { return num_verify_steps == 0; }
  void add(const SpeculationStats& other);
  // One verification of `num_drafted` tokens of which the first `num_accepted` were accepted.
  void record(int32_t num_drafted, int32_t num_accepted, int32_t num_emitted);
  double acceptance_rate() const;        // accepted / drafted (0 when nothing was drafted)
  double mean_accepted_length() const;   // accepted tokens per verify step
  double tokens_per_step() const;        // emitted tokens per verify step
  double position_acceptance(size_t position) const;  // accepted/drafted at position (0-based)
};

// E[tokens per step] for K draft tokens each accepted with probability alpha (independently):
// (1 - alpha^(K+1)) / (1 - alpha); K + 1 when alpha is 1.
double expected_tokens_per_step(double alpha, int32_t num_draft_tokens);

// Time of one step as measured: drafting costs draft_seconds_per_token per draft token; the
// target's pass over K + 1 tokens costs verify_base_seconds + K * verify_seconds_per_token.
struct SpeculationCosts {
  double draft_seconds_per_token = 0;
  double verify_base_seconds = 0;     // a plain one-token decode step
  double verify_seconds_per_token = 0;
};

// The costs as this run measured them: drafting per drafted token, plain decode steps
// (baseline_step_seconds, e.g. from a run without speculation; <= 0: guessed as the verify
// time at K = 1's share) and the extra verify time per draft token.
SpeculationCosts measured_costs(const SpeculationStats& stats, double baseline_step_seconds);

struct DraftLengthSuggestion {
  int32_t num_draft_tokens = 0;   // best K (0: speculation does not pay)
  double tokens_per_second = 0;   // predicted at that K
  double baseline_tokens_per_second = 0;  // predicted without speculation
  std::vector<double> predicted_tokens_per_second;  // [max_k + 1]: index K (0: no speculation)
};

// The K in 0..max_k that maximises E[tokens per step] / step time under `costs` and `alpha`.
DraftLengthSuggestion suggest_draft_length(double alpha, const SpeculationCosts& costs, int32_t max_k = 16);

}  // namespace iwb::spec
