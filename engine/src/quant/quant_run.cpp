// QuantRun helpers: status names, and the row a quantization starts and finishes with.
#include "iwb/engine/quant/quant_run.h"
#include "iwb/kernels/thread_pool.h"

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/profile/bench.h"
#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/quant/logits_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace iwb::quant {

const char* run_status_name(RunStatus status) {
  switch (status) {
    case RunStatus::Running: return "running";
    case RunStatus::Failed: return "failed";
    case RunStatus::Done: return "done";
    case RunStatus::Cancelled: return "cancelled";
    case RunStatus::Interrupted: return "interrupted";
  }
  return "failed";
}

RunStatus run_status_from_name(const std::string& name) {
  if (name == "running") return RunStatus::Running;
  if (name == "done") return RunStatus::Done;
  if (name == "cancelled") return RunStatus::Cancelled;
  if (name == "interrupted") return RunStatus::Interrupted;
  return RunStatus::Failed;
}

std::string utc_now() { return current_utc_iso8601(); }

double kv_pool_bytes_for(double kv_bytes_per_token, int64_t block_size, int64_t context, int64_t num_sequences) {
  if (kv_bytes_per_token <= 0 || context <= 0 || num_sequences <= 0) return 0;
  const int64_t b = std::max<int64_t>(block_size, 1);
  const int64_t positions = (context + b - 1) / b * b;
  return static_cast<double>(num_sequences) * static_cast<double>(positions) * kv_bytes_per_token;
}

int64_t kv_sequences_that_fit(double memory_bytes, double weights_bytes, double kv_bytes_per_token, int64_t block_size,
                              int64_t context) {
  const double one = kv_pool_bytes_for(kv_bytes_per_token, block_size, context, 1);
  if (one <= 0 || memory_bytes <= weights_bytes) return 0;
  return static_cast<int64_t>(std::floor((memory_bytes - weights_bytes) / one));
}

Result<std::string> file_identity(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::IoError, "cannot read '" + path + "'");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  uint64_t hash = 0xcbf29ce484222325ull;
  std::vector<char> buffer;
  auto add = [&](uint64_t offset, uint64_t length) -> bool {
    length = std::min(length, size - std::min(offset, size));
    buffer.resize(static_cast<size_t>(length));
    in.seekg(static_cast<std::streamoff>(offset));
    if (length > 0 && !in.read(buffer.data(), static_cast<std::streamsize>(length))) return false;
    for (const char c : buffer) {
      hash ^= static_cast<uint8_t>(c);
      hash *= 0x100000001b3ull;
    }
    return true;
  };
  bool ok = add(0, 1u << 20);
  for (uint64_t i = 1; i < 64 && ok; ++i) ok = add(size / 64 * i, 1u << 16);
  if (!ok) return make_error(ErrorCode::IoError, "cannot read '" + path + "'");
  char text[96];
  std::snprintf(text, sizeof text, "size=%llu;fnv1a64-sampled=%016llx", static_cast<unsigned long long>(size),
                static_cast<unsigned long long>(hash));
  return std::string(text);
}

QuantRun describe_quantize_run(const QuantizeOptions& o) {
  QuantRun run;
  run.kind = "quantize";
  run.date = utc_now();
  const ComputeDeviceInfo cpu = describe_cpu_device();
  run.device_id = cpu.id.empty() ? "cpu" : cpu.id;
  run.device_name = cpu.name;
  run.num_threads = o.num_threads > 0 ? o.num_threads : iwb::default_num_threads();
  std::error_code ec;
  run.model_path = std::filesystem::absolute(o.output_path, ec).string();
  run.source_path = std::filesystem::absolute(o.source_path, ec).string();
  if (Result<std::string> id = file_identity(o.source_path)) run.source_identity = *id;
  run.weight_type = o.type;
  if (Result<synth::WeightTypePlan> plan = synth::parse_weight_type(o.type)) run.weight_type = plan->name;
  run.is_imatrix = o.imatrix != nullptr;
  run.imatrix_path = o.imatrix_path;
  run.keep_output_f16 = o.keep_output_f16;
  return run;
}

void record_quantize_report(const QuantizeReport& r, QuantRun* run) {
  if (Result<std::string> id = file_identity(run->model_path)) run->model_identity = *id;
  run->file_bytes = static_cast<double>(r.file_bytes);
  run->num_parameters = static_cast<double>(r.num_parameters);
  if (r.num_parameters > 0) {
    run->bits_per_weight = 8.0 * static_cast<double>(r.file_bytes) / static_cast<double>(r.num_parameters);
  }
  run->seconds = r.seconds;
  for (const std::string& w : r.warnings) run->note += (run->note.empty() ? "" : "; ") + w;
}

QuantRun describe_eval_run(const EvalOptions& o) {
  QuantRun run;
  run.kind = "eval";
  run.date = utc_now();
  const ComputeDeviceInfo cpu = describe_cpu_device();
  run.device_id = cpu.id.empty() ? "cpu" : cpu.id;
  run.device_name = cpu.name;
  run.num_threads = o.num_threads > 0 ? o.num_threads : iwb::default_num_threads();
  std::error_code ec;
  run.model_path = std::filesystem::absolute(o.model_path, ec).string();
  if (Result<std::string> id = file_identity(o.model_path)) run.model_identity = *id;
  if (!o.base_path.empty()) {
    run.source_path = std::filesystem::absolute(o.base_path, ec).string();
    if (Result<std::string> id = file_identity(o.base_path)) run.source_identity = *id;
    run.is_reference =
        !run.source_identity.empty() && run.source_identity == run.model_identity && o.kv_cache_type == "f16";
  }
  run.kv_cache_type = o.kv_cache_type;
  run.text_name = o.text_name;
  run.text_hash = hash_text(o.text);
  run.context = o.context;
  run.stride = o.stride;
  return run;
}

void record_eval_result(const EvalResult& r, QuantRun* run) {
  run->model_name = r.model_name;
  if (run->weight_type.empty()) run->weight_type = r.file_type;
  run->num_chunks = r.num_chunks;
  run->num_scored_tokens = r.num_scored;
  run->file_bytes = static_cast<double>(r.file_bytes);
  run->memory_bytes = static_cast<double>(r.memory_bytes);
  run->num_parameters = static_cast<double>(r.num_parameters);
  if (r.num_parameters > 0) {
    run->bits_per_weight = 8.0 * static_cast<double>(r.file_bytes) / static_cast<double>(r.num_parameters);
  }
  run->perplexity = r.perplexity;
  run->perplexity_error = r.perplexity_error;
  if (r.has_base) {
    run->kl_mean = r.kl_mean;
    run->kl_median = r.kl_median;
    run->kl_p99 = r.kl_p99;
    run->kl_max = r.kl_max;
    run->top1_agreement = r.top1_agreement;
    run->delta_p_mean = r.delta_p_mean;
    run->delta_p_rms = r.delta_p_rms;
    run->ppl_ratio = r.ppl_ratio;
    run->ppl_ratio_error = r.ppl_ratio_error;
  }
  run->prompt_tokens_per_s = r.prompt_tokens_per_s;
  if (r.gen_tokens_per_s > 0) run->gen_tokens_per_s = r.gen_tokens_per_s;
  if (r.weights_bytes > 0) run->weights_bytes = static_cast<double>(r.weights_bytes);
  if (r.kv_bytes_per_token > 0) run->kv_bytes_per_token = static_cast<double>(r.kv_bytes_per_token);
  run->kv_block_size = r.kv_block_size;
  if (r.gen_depth > 0 && r.depth_gen_tokens_per_s > 0) {
    run->gen_depth = r.gen_depth;
    run->depth_gen_tokens_per_s = r.depth_gen_tokens_per_s;
  }
  run->seconds = r.seconds;
}

}  // namespace iwb::quant
