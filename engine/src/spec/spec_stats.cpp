// Speculation statistics, the expected tokens per step and the suggested draft length.
#include "iwb/engine/spec/spec_stats.h"

#include <algorithm>
#include <cmath>

namespace iwb::spec {
namespace {

void add_into(std::vector<int64_t>& into, const std::vector<int64_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] += from[i];
}

}  // namespace

void SpeculationStats::add(const SpeculationStats& o) {
  num_verify_steps += o.num_verify_steps;
  num_drafted += o.num_drafted;
  num_accepted += o.num_accepted;
  num_emitted += o.num_emitted;
  add_into(drafted_per_position, o.drafted_per_position);
  add_into(accepted_per_position, o.accepted_per_position);
  add_into(accepted_length_histogram, o.accepted_length_histogram);
  draft_seconds += o.draft_seconds;
  verify_seconds += o.verify_seconds;
}

void SpeculationStats::record(int32_t drafted, int32_t accepted, int32_t emitted) {
  ++num_verify_steps;
  num_drafted += drafted;
  num_accepted += accepted;
  num_emitted += emitted;
  const auto k = static_cast<size_t>(std::max(drafted, 0));
  if (drafted_per_position.size() < k) drafted_per_position.resize(k, 0);
  if (accepted_per_position.size() < k) accepted_per_position.resize(k, 0);
  for (size_t j = 0; j < k; ++j) ++drafted_per_position[j];
  for (size_t j = 0; j < static_cast<size_t>(std::max(accepted, 0)); ++j) ++accepted_per_position[j];
  if (accepted_length_histogram.size() < k + 1) accepted_length_histogram.resize(k + 1, 0);
  ++accepted_length_histogram[static_cast<size_t>(std::clamp(accepted, 0, drafted))];
}

double SpeculationStats::acceptance_rate() const {
  return num_drafted > 0 ? static_cast<double>(num_accepted) / static_cast<double>(num_drafted) : 0.0;
}

double SpeculationStats::mean_accepted_length() const {
  return num_verify_steps > 0 ? static_cast<double>(num_accepted) / static_cast<double>(num_verify_steps) : 0.0;
}

double SpeculationStats::tokens_per_step() const {
  return num_verify_steps > 0 ? static_cast<double>(num_emitted) / static_cast<double>(num_verify_steps) : 0.0;
}

double SpeculationStats::position_acceptance(size_t position) const {
  if (position >= drafted_per_position.size() || drafted_per_position[position] == 0) return 0.0;
  const int64_t accepted = position < accepted_per_position.size() ? accepted_per_position[position] : 0;
  return static_cast<double>(accepted) / static_cast<double>(drafted_per_position[position]);
}

double expected_tokens_per_step(double alpha, int32_t k) {
  if (k <= 0) return 1.0;
  alpha = std::clamp(alpha, 0.0, 1.0);
  if (alpha >= 1.0 - 1e-12) return static_cast<double>(k) + 1.0;
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

SpeculationCosts measured_costs(const SpeculationStats& s, double baseline_step_seconds) {
  SpeculationCosts c;
  if (s.num_drafted > 0) c.draft_seconds_per_token = s.draft_seconds / static_cast<double>(s.num_drafted);
  if (s.num_verify_steps == 0) {
    c.verify_base_seconds = std::max(0.0, baseline_step_seconds);
    return c;
  }
  const double step = s.verify_seconds / static_cast<double>(s.num_verify_steps);
  const double k = static_cast<double>(s.num_drafted) / static_cast<double>(s.num_verify_steps);
  // Without a baseline, assume the K extra tokens cost as much as half the plain token each
  // (a pass over a few tokens reads the same weights: the usual case on bandwidth-bound CPUs).
  const double base = baseline_step_seconds > 0 ? std::min(baseline_step_seconds, step) : step / (1.0 + 0.5 * k);
  c.verify_base_seconds = base;
  c.verify_seconds_per_token = k > 0 ? std::max(0.0, (step - base) / k) : 0.0;
  return c;
}

DraftLengthSuggestion suggest_draft_length(double alpha, const SpeculationCosts& c, int32_t max_k) {
  DraftLengthSuggestion out;
  max_k = std::max(0, max_k);
  out.predicted_tokens_per_second.resize(static_cast<size_t>(max_k) + 1, 0.0);
  double best = -1;
  for (int32_t k = 0; k <= max_k; ++k) {
    const double seconds = static_cast<double>(k) * c.draft_seconds_per_token + c.verify_base_seconds +
                           static_cast<double>(k) * c.verify_seconds_per_token;
    const double rate = seconds > 0 ? expected_tokens_per_step(alpha, k) / seconds : 0.0;
    out.predicted_tokens_per_second[static_cast<size_t>(k)] = rate;
    if (rate > best * (1.0 + 1e-9)) {
      best = rate;
      out.num_draft_tokens = k;
    }
  }
  out.tokens_per_second = std::max(0.0, best);
  out.baseline_tokens_per_second = out.predicted_tokens_per_second[0];
  return out;
}

}  // namespace iwb::spec
