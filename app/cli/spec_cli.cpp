// Speculative decoding options and stats for the CLI (see spec_cli.h).
#include "spec_cli.h"

#include <charconv>
#include <sstream>

namespace iwb::cli {

int parse_spec_option(const char* command, int argc, char** argv, int* i, spec::SpeculativeConfig* c) {
  const std::string a = argv[*i];
  const bool takes_value = a == "--spec" || a == "--draft-model" || a == "--self-type" || a == "--lookup-ngram";
  if (!takes_value && a != "--spec-adaptive") return 0;
  if (a == "--spec-adaptive") {
    c->is_adaptive = true;
    return 1;
  }
  if (*i + 1 >= argc) {
    std::fprintf(stderr, "iwb %s: %s needs a value\n", command, a.c_str());
    return -1;
  }
  const std::string v = argv[++*i];
  if (a == "--spec") {
    Result<spec::DrafterKind> kind = spec::parse_drafter_kind(v);
    if (!kind) {
      std::fprintf(stderr, "iwb %s: %s\n", command, kind.error_message().c_str());
      return -1;
    }
    c->kind = *kind;
  } else if (a == "--draft-model") {
    c->draft_model_path = v;
  } else if (a == "--self-type") {
    const std::optional<GgmlType> type = ggml_type_from_name(v);
    if (!type) {
      std::fprintf(stderr, "iwb %s: unknown tensor type '%s'\n", command, v.c_str());
      return -1;
    }
    c->self_draft_type = *type;
  } else {
    int32_t n = 0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || ptr != v.data() + v.size() || n < 1 || n > 64) {
      std::fprintf(stderr, "iwb %s: --lookup-ngram must be 1 to 64, not '%s'\n", command, v.c_str());
      return -1;
    }
    c->lookup_max_ngram = n;
  }
  return 1;
}

bool parse_draft_list(const char* command, const std::string& text, std::vector<int32_t>* out) {
  out->clear();
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    int32_t k = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), k);
    if (ec != std::errc() || ptr != part.data() + part.size() || k < 1 || k > spec::kMaxDraftTokens) {
      std::fprintf(stderr, "iwb %s: --draft-n takes numbers 1 to %d, not '%s'\n", command, spec::kMaxDraftTokens,
                   part.c_str());
      return false;
    }
    out->push_back(k);
  }
  if (out->empty()) std::fprintf(stderr, "iwb %s: --draft-n needs at least one number\n", command);
  return !out->empty();
}

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
