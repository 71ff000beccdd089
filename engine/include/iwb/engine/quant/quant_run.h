// One quantization-lab run as the results store keeps it (table quant_runs, schema v4/v8): what
// was quantized or evaluated, with which settings, on which machine, and every metric. A run
// is added as Running before the work starts and finished as Done, Failed or Cancelled, never
// replaced (run_recorder.h keeps that promise).
#pragma once

#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/model_quantizer.h"

#include <cstdint>
#include <optional>
#include <string>

namespace iwb::quant {

// Cancelled: stopped on request part-way; its figures are incomplete, as a failed run's are.
// Interrupted: the process recording the run died (killed, crashed) while it was running.
enum class RunStatus { Running, Failed, Done, Cancelled, Interrupted };
const char* run_status_name(RunStatus status);  // "running", "failed", "done", "cancelled", "interrupted"
RunStatus run_status_from_name(const std::string& name);

struct QuantRun {
  int64_t id = 0;
  std::string kind;  // "quantize", "eval", or "lab" (quantize then eval, the GUI queue)
  std::string date;  // ISO 8601 UTC, when the run started
  RunStatus status = RunStatus::Running;
  std::string error;  // why it failed
  std::string device_id, device_name;
  int num_threads = 0;

  // The model measured (eval) or written (quantize), and where it came from.
  std::string model_path, model_identity, model_name;
  std::string source_path, source_identity;  // quantize: the source; eval: the base model
  std::string weight_type;                   // "Q4_K_M", or the file's own type for eval
  bool is_imatrix = false;
  std::string imatrix_path;
  bool keep_output_f16 = false;
  std::string kv_cache_type = "f16";  // "f16", "q8_0", ..., or keys/values "q8_0/q4_0" (kv_cache_types_name)
  bool is_reference = false;          // the base model's own row in a comparison

  // Evaluation settings.
  std::string text_name;  // calibration/evaluation text ("built-in" or a file name)
  std::string text_hash;
  int64_t context = 0, stride = 0, num_chunks = 0, num_scored_tokens = 0;

  // Metrics (empty when not measured).
  std::optional<double> file_bytes, memory_bytes, num_parameters, bits_per_weight;
  std::optional<double> perplexity, perplexity_error;  // error: standard error of the mean NLL, as exp
  std::optional<double> kl_mean, kl_median, kl_p99, kl_max;
  std::optional<double> top1_agreement;             // fraction 0..1
  std::optional<double> delta_p_mean, delta_p_rms;  // change of the right token's probability
  std::optional<double> prompt_tokens_per_s, gen_tokens_per_s;
  std::optional<double> seconds;
  std::string note;

  // Long context and capacity (schema v8): generation tokens/s after gen_depth tokens already in
  // the KV cache; the weights and the KV cache's bytes per position (K and V of every layer, in
  // the cache's types) in blocks of kv_block_size positions; and how many sequences of
  // fit_context positions fit in fit_memory_bytes beside the weights (kv_sequences_that_fit).
  int64_t gen_depth = 0;
  std::optional<double> depth_gen_tokens_per_s;
  std::optional<double> weights_bytes, kv_bytes_per_token;
  int64_t kv_block_size = 0;
  int64_t fit_context = 0;
  std::optional<double> fit_memory_bytes, fit_sequences;

  // Against the base (schema v9): llama-perplexity's PPL(Q)/PPL(base) and its standard error
  // from the per-token differences (EvalResult::ppl_ratio); far tighter than the two
  // perplexities' own errors, so it tells whether a cheap setting's cost is real.
  std::optional<double> ppl_ratio, ppl_ratio_error;
};

// The KV pool of `num_sequences` sequences of `context` positions each, in whole blocks of
// `block_size` (<= 0: one position): num_sequences * ceil(context / B) * B * kv_bytes_per_token.
double kv_pool_bytes_for(double kv_bytes_per_token, int64_t block_size, int64_t context, int64_t num_sequences);
// How many sequences of `context` positions fit in `memory_bytes` beside the weights:
// floor((memory - weights) / kv_pool_bytes_for(b, B, context, 1)); 0 when the weights alone do
// not fit, or when a figure is missing (b or context <= 0). Scratch and runtime buffers are
// not counted: a few percent of the smallest models' footprint, less of larger ones.
int64_t kv_sequences_that_fit(double memory_bytes, double weights_bytes, double kv_bytes_per_token, int64_t block_size,
                              int64_t context);

// A run row describing a quantization about to start (source identity, settings, machine, date).
QuantRun describe_quantize_run(const QuantizeOptions& options);
// Fills the size figures of a finished quantization into the run.
void record_quantize_report(const QuantizeReport& report, QuantRun* run);
// A run row describing an evaluation about to start (model and base identities, text, settings).
QuantRun describe_eval_run(const EvalOptions& options);
// Fills an evaluation's figures (size, perplexity, KL, speed) into the run.
void record_eval_result(const EvalResult& result, QuantRun* run);
// A model file's identity for the lab: "size=N;fnv1a64-sampled=H", the 64-bit FNV-1a hash of
// its first MiB and of 64 KiB at 63 evenly spaced offsets. Unlike bench's model_identity (first
// MiB only), two quantizations that differ only past their first tensors get different
// identities, so the logits cache and per-tensor errors never attach to the wrong file.
Result<std::string> file_identity(const std::string& path);
// ISO 8601 UTC of now, as the store's dates are written.
std::string utc_now();

}  // namespace iwb::quant
