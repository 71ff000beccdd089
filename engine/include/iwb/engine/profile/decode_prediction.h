// What a server's decode throughput could be: a batched decode step of `num_sequences`
// sequences (one new token each, every sequence over its own cached context) costed by the
// cost model's kernel records and timed under a device's roofs (datasheet or probed).
// The Serving tab draws it beside the measured throughput per concurrency.
#pragma once

#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/profile/kernel_record.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <vector>

namespace iwb {

struct DeviceRoofs {
  double bandwidth_bytes_per_s = 0;
  double peak_flops = 0;
};

// The records of one engine step decoding `num_sequences` sequences together, each with
// `context_tokens` positions already cached: every body op over num_sequences rows, attention
// as one batched call over the sequences' own caches (op_costs::batched_attention), and the
// classifier over every row (each sequence samples). predict_step costs one sequence; a batch
// of c sequences is not one sequence of c tokens (that would read the cache once, not c times).
Result<std::vector<KernelRecord>> batched_decode_records(const ModelShape& model, int64_t num_sequences,
                                                         int64_t context_tokens);

// Each kernel at its roofline: max(flops / peak_flops, bytes / bandwidth), summed over the
// records (kernels run one after another; no overlap between them is assumed). An error when a
// roof is not positive.
Result<double> roofline_seconds(const std::vector<KernelRecord>& records, const DeviceRoofs& roofs);

struct DecodePrediction {
  int64_t num_sequences = 0;
  int64_t context_tokens = 0;
  double step_seconds = 0;  // one decode step of all sequences
  double tokens_per_s = 0;  // num_sequences / step_seconds: the output-token throughput bound
  double flops = 0;         // of the step
  double bytes = 0;
  double memory_bound_fraction = 0;  // of step_seconds spent in kernels whose bytes term wins
};

// The decode-throughput bound for `num_sequences` concurrent sequences at `context_tokens`.
Result<DecodePrediction> predict_decode_throughput(const ModelShape& model, int64_t num_sequences,
                                                   int64_t context_tokens, const DeviceRoofs& roofs);

// The mean context of a request of `input_len` prompt tokens generating `output_len` tokens,
// over its decode steps: input_len + output_len / 2 (the cache grows by one per step).
int64_t mean_decode_context(int64_t input_len, int64_t output_len);

}  // namespace iwb
