// The speculative decoding stats `iwb run` and `iwb spec-bench` print after a run (their options
// are rows of options/option_groups.h).
#pragma once

#include "iwb/engine/spec/spec_stats.h"

#include <cstdio>
#include <string>

namespace iwb::cli {

// Acceptance per position as "0.91 0.80 0.66".
std::string position_acceptance_text(const spec::SpeculationStats& stats);

// One paragraph on stderr: drafted/accepted, per position, histogram, times, the best K.
void print_speculation(std::FILE* out, const spec::SpeculationStats& stats, double baseline_step_seconds);

}  // namespace iwb::cli
