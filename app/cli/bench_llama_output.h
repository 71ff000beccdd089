// `iwb bench -o FORMAT`: the results in llama-bench's output formats (md, json, jsonl, csv) and
// field names, so scripts written for `llama-bench -o json` read ours too. Only the fields that
// mean something for this engine are written (no cpu_mask, poll, split_mode, ...), in
// llama-bench's order, then iwb's own: mbu and mfu (and mbu_paired with --paired-probe).
#pragma once

#include "iwb/engine/profile/bench.h"

#include <string>
#include <vector>

namespace iwb::cli {

// The run's settings that llama-bench prints beside each result but BenchResult does not keep.
struct LlamaBenchSettings {
  int64_t batch_tokens = 0;  // n_batch and n_ubatch (one micro-batch size here)
  std::string type_k = "f16";
  std::string type_v = "f16";
  bool has_paired_probe = false;  // --paired-probe: every row gets mbu_paired (null for ppN)
};

// The formats -o accepts besides "md" (which prints iwb's table).
inline const std::vector<std::string>& llama_bench_formats() {
  static const std::vector<std::string> formats = {"md", "json", "jsonl", "csv"};
  return formats;
}

// The whole output of `format` ("json", "jsonl" or "csv") for `results`.
std::string format_llama_bench(const std::vector<BenchResult>& results, const LlamaBenchSettings& settings,
                               const std::string& format);

}  // namespace iwb::cli
