// The seams of `iwb bench-serve` (bench_serve_*.cpp): the prompts a dataset yields, the arrival
// schedule, one request's record from its stream, and a point's summary statistics. Separate so
// each can be tested without a server.
#pragma once

#include "iwb/engine/remote/bench_serve.h"

#include <cstdint>
#include <string>
#include <vector>

namespace iwb::remote {

struct BenchPrompt {
  bool is_chat = false;  // chat messages, else a text-completion prompt
  std::vector<RemoteMessage> messages;
  std::string prompt;
  int64_t approx_prompt_tokens = 0;  // counted in words; the server's usage replaces it
};

// num_prompts prompts of config.dataset ("random", "chat" or a file path), reproducible from
// config.seed. A file: JSON lines with "prompt" (text completions), or ShareGPT JSON (a list of
// objects with "conversations", or such objects one per line), whose first user turn is the
// prompt (chat); prompts repeat when the file has fewer than num_prompts.
Result<std::vector<BenchPrompt>> make_bench_prompts(const BenchServeConfig& config);

// When each request is sent, in seconds since the point began: vLLM's schedule (the first at 0,
// then gamma-distributed gaps of shape `burstiness` and mean 1/request_rate; Poisson arrivals
// when burstiness is 1). All zeros when request_rate is 0 (infinite).
std::vector<double> arrival_offsets(int64_t num_requests, double request_rate, double burstiness, uint64_t seed);

// One finished stream as a record: output tokens from usage when the server sent it, else one
// per content chunk; TPOT = (e2e − ttft) / (output − 1); ITL = gaps between content chunks.
RequestRecord make_request_record(const StreamedCompletion& completion, double start_seconds,
                                  int64_t approx_prompt_tokens);

// Counts, throughputs, goodput and latency statistics of point->requests over
// point->duration_seconds (the figures vLLM's benchmark prints).
void summarise_point(BenchServePoint* point, const GoodputSlo& slo);

// Whether a successful request met every SLO given.
bool meets_slo(const RequestRecord& record, const GoodputSlo& slo);

// JSON of the parts the results store keeps in separate rows (bench_serve_json.cpp).
std::string bench_serve_config_to_json(const BenchServeConfig& config);
Result<BenchServeConfig> bench_serve_config_from_json(const std::string& text);
std::string bench_serve_point_to_json(const BenchServePoint& point, bool with_details);
Result<BenchServePoint> bench_serve_point_from_json(const std::string& text);
ServerKind server_kind_from_name(const std::string& name);  // Unknown when no kind has that name

}  // namespace iwb::remote
