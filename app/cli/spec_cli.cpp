// Speculative decoding stats for the CLI (see spec_cli.h).
#include "spec_cli.h"

namespace iwb::cli {

std::string position_acceptance_text(const spec::SpeculationStats& s) {
  std::string text;
  char buf[16];
  for (size_t j = 0; j < s.drafted_per_position.size(); ++j) {
    std::snprintf(buf, sizeof buf, "%s%.2f", j ? " " : "", s.position_acceptance(j));
    text += buf;
  }
  return text;
}

void print_speculation(std::FILE* out, const spec::SpeculationStats& s, double baseline_step_seconds) {
  if (s.empty()) {
    std::fprintf(out, "speculation: no drafts were verified\n");
    return;
  }
  std::fprintf(out,
               "speculation: %lld verify steps, %lld drafted, %lld accepted (%.1f%%), mean accepted length %.2f, "
               "%.2f tokens/step\n",
               static_cast<long long>(s.num_verify_steps), static_cast<long long>(s.num_drafted),
               static_cast<long long>(s.num_accepted), 100.0 * s.acceptance_rate(), s.mean_accepted_length(),
               s.tokens_per_step());
  std::fprintf(out, "  acceptance per position: %s\n", position_acceptance_text(s).c_str());
  std::string histogram;
  for (size_t n = 0; n < s.accepted_length_histogram.size(); ++n) {
    histogram += (n ? " " : "") + std::to_string(n) + ":" + std::to_string(s.accepted_length_histogram[n]);
  }
  std::fprintf(out, "  accepted lengths: %s\n", histogram.c_str());
  const double steps = static_cast<double>(s.num_verify_steps);
  std::fprintf(out, "  draft %.1f ms/step, verify %.1f ms/step\n", 1e3 * s.draft_seconds / steps,
               1e3 * s.verify_seconds / steps);
  const spec::DraftLengthSuggestion best =
      spec::suggest_draft_length(s.acceptance_rate(), spec::measured_costs(s, baseline_step_seconds), 16);
  std::fprintf(out, "  suggested K from the measured acceptance and costs: %d (predicted %.1f tokens/s, plain %.1f)\n",
               best.num_draft_tokens, best.tokens_per_second, best.baseline_tokens_per_second);
}

}  // namespace iwb::cli
