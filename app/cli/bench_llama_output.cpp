// llama-bench's json, jsonl and csv for `iwb bench -o`: its field names, types and sample
// arithmetic (a sample's time covers n_prompt + n_gen tokens; t/s figures are the mean and
// sample standard deviation of the samples' rates).
#include "bench_llama_output.h"

#include "json_writer.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>

#ifndef IWB_VERSION
#define IWB_VERSION "unknown"
#endif

namespace iwb::cli {
namespace {

// One result's values, typed as llama-bench types them.
struct Row {
  std::string build_commit = "iwb-" IWB_VERSION;
  int64_t build_number = 0;
  std::string cpu_info, gpu_info, backends, model_filename, model_type;
  uint64_t model_size = 0, model_n_params = 0;
  int64_t n_batch = 0, n_ubatch = 0, n_threads = 0;
  std::string type_k, type_v;
  int64_t n_gpu_layers = 0;
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  std::string test_time;
  uint64_t avg_ns = 0, stddev_ns = 0;
  double avg_ts = 0, stddev_ts = 0;
  std::vector<uint64_t> samples_ns;
  std::vector<double> samples_ts;
  std::optional<double> mbu, mfu;
};

template <typename T>
T mean(const std::vector<T>& v) {
  if (v.empty()) return T{};
  return std::accumulate(v.begin(), v.end(), T{}) / static_cast<T>(v.size());
}

// The sample standard deviation (n - 1), 0 for fewer than two samples: llama-bench's stdev.
double sample_sd(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double squares = 0;
  for (const double x : v) squares += (x - m) * (x - m);
  return std::sqrt(squares / static_cast<double>(v.size() - 1));
}

Row make_row(const BenchResult& r, const LlamaBenchSettings& settings) {
  Row row;
  const bool is_gpu = r.device_id.rfind("cuda", 0) == 0;
  row.cpu_info = is_gpu ? std::string() : r.device_name;
  row.gpu_info = is_gpu ? r.device_name : std::string();
  row.backends = is_gpu ? "CUDA" : "CPU";
  row.model_filename = r.model_path;
  row.model_type = r.architecture + " " + r.file_type;
  row.model_size = r.model_size_bytes;
  row.model_n_params = r.num_params;
  row.n_batch = row.n_ubatch = settings.batch_tokens;
  row.n_threads = r.num_threads;
  row.type_k = settings.type_k;
  row.type_v = settings.type_v;
  row.n_gpu_layers = is_gpu ? 99 : 0;  // llama-bench's "all layers"; a model runs on one device here
  // A generation test's short prompt before it is not timed: llama-bench's tgN has n_prompt 0.
  row.n_gen = r.num_generated_tokens;
  row.n_prompt = r.num_generated_tokens > 0 ? 0 : r.num_prompt_tokens;
  row.n_depth = r.num_depth_tokens;
  row.test_time = r.date;
  const double tokens = static_cast<double>(row.n_prompt + row.n_gen);
  for (const double rate : r.tokens_per_s) {
    row.samples_ts.push_back(rate);
    row.samples_ns.push_back(rate > 0 ? static_cast<uint64_t>(std::llround(tokens * 1e9 / rate)) : 0);
  }
  std::vector<double> ns(row.samples_ns.begin(), row.samples_ns.end());
  row.avg_ns = static_cast<uint64_t>(std::llround(mean(ns)));
  row.stddev_ns = static_cast<uint64_t>(std::llround(sample_sd(ns)));
  row.avg_ts = mean(row.samples_ts);
  row.stddev_ts = sample_sd(row.samples_ts);
  row.mbu = r.mbu;
  row.mfu = r.mfu;
  return row;
}

std::string number(double v) { return std::to_string(v); }  // llama-bench's "%f"
std::string optional_number(const std::optional<double>& v) { return v ? number(*v) : std::string(); }

std::vector<std::string> csv_values(const Row& row) {
  return {row.build_commit,
          std::to_string(row.build_number),
          row.cpu_info,
          row.gpu_info,
          row.backends,
          row.model_filename,
          row.model_type,
          std::to_string(row.model_size),
          std::to_string(row.model_n_params),
          std::to_string(row.n_batch),
          std::to_string(row.n_ubatch),
          std::to_string(row.n_threads),
          row.type_k,
          row.type_v,
          std::to_string(row.n_gpu_layers),
          std::to_string(row.n_prompt),
          std::to_string(row.n_gen),
          std::to_string(row.n_depth),
          row.test_time,
          std::to_string(row.avg_ns),
          std::to_string(row.stddev_ns),
          number(row.avg_ts),
          number(row.stddev_ts),
          optional_number(row.mbu),
          optional_number(row.mfu)};
}

void write_json(JsonWriter& j, const Row& row) {
  j.begin_object();
  j.field("build_commit", row.build_commit).field("build_number", row.build_number);
  j.field("cpu_info", row.cpu_info).field("gpu_info", row.gpu_info).field("backends", row.backends);
  j.field("model_filename", row.model_filename).field("model_type", row.model_type);
  j.field("model_size", row.model_size).field("model_n_params", row.model_n_params);
  j.field("n_batch", row.n_batch).field("n_ubatch", row.n_ubatch).field("n_threads", row.n_threads);
  j.field("type_k", row.type_k).field("type_v", row.type_v).field("n_gpu_layers", row.n_gpu_layers);
  j.field("n_prompt", row.n_prompt).field("n_gen", row.n_gen).field("n_depth", row.n_depth);
  j.field("test_time", row.test_time);
  j.field("avg_ns", row.avg_ns).field("stddev_ns", row.stddev_ns);
  j.field("avg_ts", row.avg_ts).field("stddev_ts", row.stddev_ts);
  j.key("samples_ns").begin_array();
  for (const uint64_t ns : row.samples_ns) j.value(ns);
  j.end_array();
  j.key("samples_ts").begin_array();
  for (const double ts : row.samples_ts) j.value(ts);
  j.end_array();
  // iwb's own, after llama-bench's: null without a probe of the device.
  j.field("mbu", row.mbu ? *row.mbu : std::nan("")).field("mfu", row.mfu ? *row.mfu : std::nan(""));
  j.end_object();
}

// llama-bench quotes every CSV value and doubles the quotes inside.
std::string csv_quoted(const std::string& value) {
  std::string quoted = "\"";
  for (const char c : value) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string csv_line(const std::vector<std::string>& values, bool is_quoted) {
  std::string line;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) line += ',';
    line += is_quoted ? csv_quoted(values[i]) : values[i];
  }
  return line + "\n";
}

}  // namespace

const std::vector<std::string>& llama_bench_csv_fields() {
  static const std::vector<std::string> fields = {
      "build_commit", "build_number",   "cpu_info", "gpu_info", "backends",  "model_filename", "model_type",
      "model_size",   "model_n_params", "n_batch",  "n_ubatch", "n_threads", "type_k",         "type_v",
      "n_gpu_layers", "n_prompt",       "n_gen",    "n_depth",  "test_time", "avg_ns",         "stddev_ns",
      "avg_ts",       "stddev_ts",      "mbu",      "mfu"};
  return fields;
}

std::string format_llama_bench(const std::vector<BenchResult>& results, const LlamaBenchSettings& settings,
                               const std::string& format) {
  std::string out;
  if (format == "csv") {
    out += csv_line(llama_bench_csv_fields(), false);
    for (const BenchResult& r : results) out += csv_line(csv_values(make_row(r, settings)), true);
  } else if (format == "jsonl") {
    for (const BenchResult& r : results) {
      JsonWriter j;
      write_json(j, make_row(r, settings));
      out += j.str() + "\n";
    }
  } else {
    JsonWriter j;
    j.begin_array();
    for (const BenchResult& r : results) write_json(j, make_row(r, settings));
    j.end_array();
    out += j.str() + "\n";
  }
  return out;
}

}  // namespace iwb::cli
