// `iwb quantize -m SOURCE.gguf -o OUT.gguf --type TYPE [--keep-output-f16] [--imatrix FILE] [-t N]`:
// rewrites a model's weights in another GGUF type (llama-quantize's per-tensor rules), reports
// fallbacks and each tensor kind's quantization error, and records the run in the results store.
#include "commands.h"
#include "json_writer.h"
#include "options/option_groups.h"
#include "recorded_run.h"

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/quant/model_quantizer.h"
#include "iwb/engine/quant/run_recorder.h"
#include "iwb/engine/store/results_store.h"

#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>

namespace iwb::cli {
namespace {

struct Options {
  quant::QuantizeOptions quantize;
  bool is_json = false;
  bool is_store_skipped = false;
  std::string db = ResultsStore::default_path();
};

int parse(int argc, char** argv, Options* o) {
  std::string types, line;  // wrapped for the help's column
  for (const std::string& t : synth::weight_type_names()) {
    if (line.size() + t.size() > 60) {
      types += line + ",\n";
      line.clear();
    }
    line += (line.empty() ? "" : ", ") + t;
  }
  types += line;
  OptionTable t("quantize", "-m SOURCE.gguf -o OUT.gguf --type TYPE [--imatrix FILE] [options]",
                "Rewrites a model's weights in another GGUF type (llama-quantize's per-tensor rules).");
  add_model_option(t, &o->quantize.source_path, "source model (F32/F16/BF16; a quantized source is dequantized first)");
  add_output_file_option(t, &o->quantize.output_path, "GGUF file to write");
  t.add({.names = {"--type"}, .value_name = "TYPE", .help = types, .destination = &o->quantize.type});
  t.add({.names = {"--keep-output-f16"},
         .help = "keep the classifier (output.weight or tied embeddings) in F16",
         .destination = &o->quantize.keep_output_f16});
  t.add({.names = {"--imatrix"},
         .value_name = "FILE",
         .help = "importance matrix (iwb imatrix, or llama.cpp's imatrix .dat)",
         .destination = &o->quantize.imatrix_path});
  add_threads_option(t, &o->quantize.num_threads);
  add_json_option(t, &o->is_json, "print the report as JSON");
  add_results_store_options(t, &o->is_store_skipped, &o->db, "the run");
  return parse_command_line(t, argc, argv);
}

void print_progress(const quant::QuantizeProgress& p) {
  const double percent = p.total_bytes ? 100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.total_bytes) : 100.0;
  std::fprintf(stderr, "\r[%4" PRId64 "/%" PRId64 "] %5.1f%%  %-32s %-5s", std::min(p.tensor_index + 1, p.num_tensors),
               p.num_tensors, percent, p.tensor_name.c_str(), std::string(ggml_type_name(p.type)).c_str());
  if (p.tensor_index >= p.num_tensors) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

void print_json(const quant::QuantizeReport& r, const Options& o, int64_t run_id) {
  JsonWriter j;
  j.begin_object();
  j.field("source", o.quantize.source_path).field("output", o.quantize.output_path).field("type", r.plan.name);
  j.field("imatrix", o.quantize.imatrix_path).field("source_bytes", r.source_bytes).field("file_bytes", r.file_bytes);
  j.field("num_parameters", r.num_parameters).field("seconds", r.seconds).field("run_id", run_id);
  j.key("warnings").begin_array();
  for (const std::string& w : r.warnings) j.value(w);
  j.end_array();
  j.key("tensors").begin_array();
  for (const quant::QuantizedTensor& t : r.tensors) {
    j.begin_object().field("name", t.name).field("kind", t.kind).field("layer", t.layer);
    j.field("type", std::string(ggml_type_name(t.type))).field("wanted", std::string(ggml_type_name(t.wanted)));
    j.field("is_fallback", t.is_fallback).field("used_imatrix", t.used_imatrix).field("bytes", t.num_bytes);
    j.field("relative_rmse", t.relative_rmse).end_object();
  }
  j.end_array().end_object();
  std::printf("%s\n", j.str().c_str());
}

void print_text(const quant::QuantizeReport& r, const Options& o) {
  std::printf("quantized %s -> %s as %s%s\n", o.quantize.source_path.c_str(), o.quantize.output_path.c_str(),
              r.plan.name.c_str(), o.quantize.imatrix ? " with an importance matrix" : "");
  std::map<std::string, int> counts;
  for (const quant::QuantizedTensor& t : r.tensors) ++counts[std::string(ggml_type_name(t.type))];
  std::string text;
  for (const auto& [name, n] : counts) text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  std::printf("  %zu tensors: %s\n", r.tensors.size(), text.c_str());
  // Fallbacks grouped by tensor kind: one line per kind, row length and type change.
  std::map<std::string, std::vector<const quant::QuantizedTensor*>> fallbacks;
  for (const quant::QuantizedTensor& t : r.tensors) {
    if (!t.is_fallback) continue;
    fallbacks[t.kind + "/" + std::to_string(t.shape[0]) + "/" + std::string(ggml_type_name(t.wanted))].push_back(&t);
  }
  for (const auto& [key, list] : fallbacks) {
    const quant::QuantizedTensor& t = *list.front();
    const std::string which = list.size() == 1 ? t.name : t.kind + " (" + std::to_string(list.size()) + " tensors)";
    std::printf("  fallback: %s: rows of %" PRId64 " are not a whole number of %s blocks, written as %s\n",
                which.c_str(), t.shape[0], std::string(ggml_type_name(t.wanted)).c_str(),
                std::string(ggml_type_name(t.type)).c_str());
  }
  // Mean relative error per tensor kind: where the rounding hurts most.
  std::map<std::string, std::pair<double, int>> by_kind;
  for (const quant::QuantizedTensor& t : r.tensors) {
    if (t.shape.size() < 2) continue;
    auto& [sum, n] = by_kind[t.kind];
    sum += t.relative_rmse;
    ++n;
  }
  std::printf("  relative RMS error by tensor kind:");
  for (const auto& [kind, v] : by_kind) std::printf(" %s %.4f", kind.c_str(), v.first / v.second);
  std::printf("\n");
  for (const std::string& w : r.warnings) std::printf("  warning: %s\n", w.c_str());
  std::printf("wrote %s: %s (source %s) in %.1f s, %.2f bits per weight\n", o.quantize.output_path.c_str(),
              format_bytes(r.file_bytes).c_str(), format_bytes(r.source_bytes).c_str(), r.seconds,
              r.num_parameters > 0 ? 8.0 * static_cast<double>(r.file_bytes) / static_cast<double>(r.num_parameters) : 0.0);
}

}  // namespace

int run_quantize(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, &o); rc >= 0) return rc;
  quant::Imatrix imatrix;
  if (!o.quantize.imatrix_path.empty()) {
    Result<quant::Imatrix> read = quant::read_imatrix_file(o.quantize.imatrix_path);
    if (!read) {
      std::fprintf(stderr, "iwb quantize: %s\n", read.error_message().c_str());
      return 1;
    }
    imatrix = std::move(*read);
    o.quantize.imatrix = &imatrix;
  }
  if (!o.is_json) o.quantize.progress = print_progress;

  // The run is recorded as running first, so a failure part-way leaves a failed row.
  std::unique_ptr<ResultsStore> store;
  if (!o.is_store_skipped && !open_results_store("quantize", o.db, &store)) return 1;
  Result<quant::RecordedQuantize> recorded = quant::quantize_and_record(o.quantize, store.get());
  if (!recorded) {
    std::fprintf(stderr, "\niwb quantize: %s\n", recorded.error_message().c_str());
    return 1;
  }
  if (!recorded->recording) {
    std::fprintf(stderr, "iwb quantize: recording the run failed: %s\n", recorded->recording.message().c_str());
  }
  const quant::QuantizeReport& report = recorded->report;
  if (o.is_json) print_json(report, o, recorded->run_id);
  else print_text(report, o);
  return 0;
}

}  // namespace iwb::cli
