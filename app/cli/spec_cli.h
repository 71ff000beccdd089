// Speculative decoding options shared by `iwb run` and `iwb spec-bench` (--spec, --draft-model,
// --draft-n, --self-type, --lookup-ngram, --spec-adaptive), and the stats printed after a run.
#pragma once

#include "iwb/engine/spec/spec_config.h"
#include "iwb/engine/spec/spec_stats.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace iwb::cli {

inline constexpr const char* kSpecUsage =
    "  --spec KIND             speculative decoding: draft (a draft model), lookup (prompt lookup),\n"
    "                          self (the target requantized on load), none\n"
    "  --draft-model FILE      the draft model for --spec draft (same vocabulary as the target)\n"
    "  --self-type TYPE        what --spec self requantizes to (default Q4_0; e.g. Q2_K, Q3_K)\n"
    "  --lookup-ngram N        longest n-gram prompt lookup searches for (default 3)\n"
    "  --spec-adaptive         let K follow the measured acceptance (at most --draft-n)\n";

// Parses argv[*i] when it is one of the options above (advancing *i past a value). Returns 1
// when it took the option, 0 when it is not one of them, -1 (message printed) on a bad value.
// The draft-n option is left to the caller (run takes one K, spec-bench a list).
int parse_spec_option(const char* command, int argc, char** argv, int* i, spec::SpeculativeConfig* config);

// Parses "1,2,4,8" into K values within 1..kMaxDraftTokens; false (message printed) when bad.
bool parse_draft_list(const char* command, const std::string& text, std::vector<int32_t>* out);

// Acceptance per position as "0.91 0.80 0.66".
std::string position_acceptance_text(const spec::SpeculationStats& stats);

// One paragraph on stderr: drafted/accepted, per position, histogram, times, the best K.
void print_speculation(std::FILE* out, const spec::SpeculationStats& stats, double baseline_step_seconds);

}  // namespace iwb::cli
