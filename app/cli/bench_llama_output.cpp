// llama-bench's json, jsonl and csv for `iwb bench -o`: its field names, types and sample
// arithmetic (a sample's time covers n_prompt + n_gen tokens; t/s figures are the mean and
// sample standard deviation of the samples' rates). One typed field list serves every format.
#include "bench_llama_output.h"

#include "json_writer.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <variant>

#ifndef IWB_VERSION
#define IWB_VERSION "unknown"
#endif

namespace iwb::cli {
namespace {

// A value typed as llama-bench types it (string, integer, float); an empty optional is JSON's
// null and an empty CSV cell.
using Value = std::variant<std::string, int64_t, uint64_t, double, std::optional<double>>;

struct Field {
  const char* name;
  Value value;
};

// One result: llama-bench's fields in its order, its samples (JSON only, after those fields, as
// llama-bench writes them), then iwb's own fields.
struct Test {
  std::vector<Field> fields;
  std::vector<uint64_t> samples_ns;
  std::vector<double> samples_ts;
  std::vector<Field> iwb_fields;
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

Test describe(const BenchResult& r, const LlamaBenchSettings& settings) {
  Test t;
  const bool is_gpu = r.device_id.rfind("cuda", 0) == 0;
  // A generation test's short prompt before it is not timed: llama-bench's tgN has n_prompt 0.
  const int64_t n_gen = r.num_generated_tokens;
  const int64_t n_prompt = n_gen > 0 ? 0 : r.num_prompt_tokens;
  const double tokens = static_cast<double>(n_prompt + n_gen);
  for (const double rate : r.tokens_per_s) {
    t.samples_ts.push_back(rate);
    t.samples_ns.push_back(rate > 0 ? static_cast<uint64_t>(std::llround(tokens * 1e9 / rate)) : 0);
  }
  const std::vector<double> ns(t.samples_ns.begin(), t.samples_ns.end());
  t.fields = {
      {"build_commit", std::string("iwb-" IWB_VERSION)},
      {"build_number", int64_t{0}},
      {"cpu_info", is_gpu ? std::string() : r.device_name},
      {"gpu_info", is_gpu ? r.device_name : std::string()},
      {"backends", std::string(is_gpu ? "CUDA" : "CPU")},
      {"model_filename", r.model_path},
      // A result read back from the store has neither: iwb's own "qwen2 Q4_K_M" and the file size.
      {"model_type", r.llama_model_type.empty() ? r.architecture + " " + r.file_type : r.llama_model_type},
      {"model_size", uint64_t{r.tensor_bytes > 0 ? r.tensor_bytes : r.model_size_bytes}},
      {"model_n_params", uint64_t{r.num_params}},
      {"n_batch", settings.batch_tokens},
      {"n_ubatch", settings.batch_tokens},  // one micro-batch size here
      {"n_threads", int64_t{r.num_threads}},
      {"type_k", settings.type_k},
      {"type_v", settings.type_v},
      {"n_gpu_layers", int64_t{is_gpu ? 99 : 0}},  // llama-bench's "all layers"; a model runs on one device
      {"n_prompt", n_prompt},
      {"n_gen", n_gen},
      {"n_depth", r.num_depth_tokens},
      {"test_time", r.date},
      {"avg_ns", static_cast<uint64_t>(std::llround(mean(ns)))},
      {"stddev_ns", static_cast<uint64_t>(std::llround(sample_sd(ns)))},
      {"avg_ts", mean(t.samples_ts)},
      {"stddev_ts", sample_sd(t.samples_ts)},
  };
  t.iwb_fields = {{"mbu", r.mbu}, {"mfu", r.mfu}};  // empty without a probe of the device
  if (settings.has_paired_probe) t.iwb_fields.push_back({"mbu_paired", r.mbu_paired});
  return t;
}

std::string csv_text(const Value& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>)
          return v;
        else if constexpr (std::is_same_v<T, std::optional<double>>)
          return v ? std::to_string(*v) : std::string();
        else
          return std::to_string(v);  // llama-bench's "%f" for floats
      },
      value);
}

void write_json_value(JsonWriter& j, const Value& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::optional<double>>)
          j.value(v ? *v : std::nan(""));  // null
        else
          j.value(v);
      },
      value);
}

void write_json(JsonWriter& j, const Test& t) {
  j.begin_object();
  for (const Field& f : t.fields) write_json_value(j.key(f.name), f.value);
  j.key("samples_ns").begin_array();
  for (const uint64_t ns : t.samples_ns) j.value(ns);
  j.end_array();
  j.key("samples_ts").begin_array();
  for (const double ts : t.samples_ts) j.value(ts);
  j.end_array();
  for (const Field& f : t.iwb_fields) write_json_value(j.key(f.name), f.value);
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

// A CSV row's cells, or with `is_header` its fields' names: llama-bench's, then iwb's.
std::vector<std::string> csv_cells(const Test& t, bool is_header) {
  std::vector<std::string> cells;
  for (const std::vector<Field>* fields : {&t.fields, &t.iwb_fields}) {
    for (const Field& f : *fields) cells.push_back(is_header ? std::string(f.name) : csv_text(f.value));
  }
  return cells;
}

}  // namespace

std::string format_llama_bench(const std::vector<BenchResult>& results, const LlamaBenchSettings& settings,
                               const std::string& format) {
  std::string out;
  if (format == "csv") {
    out += csv_line(csv_cells(describe(BenchResult{}, settings), true), false);
    for (const BenchResult& r : results) out += csv_line(csv_cells(describe(r, settings), false), true);
  } else if (format == "jsonl") {
    for (const BenchResult& r : results) {
      JsonWriter j;
      write_json(j, describe(r, settings));
      out += j.str() + "\n";
    }
  } else {
    JsonWriter j;
    j.begin_array();
    for (const BenchResult& r : results) write_json(j, describe(r, settings));
    j.end_array();
    out += j.str() + "\n";
  }
  return out;
}

}  // namespace iwb::cli
