// `iwb bench -m MODEL [-p 512] [-n 128] [-d 0,8192] [-t THREADS] [-b 512] [-r REPS] [--paired-probe] [--json]
// [--no-store] [--db PATH]`: llama-bench style prompt-processing (ppN) and text-generation (tgN) throughput, at
// context depths (-d), with MFU and MBU against the latest probe of this machine; results go to
// the results store.
// `iwb bench --list [-m MODEL] [--db PATH]` prints the stored results.
#include "bench_llama_output.h"
#include "commands.h"
#include "device_cli.h"
#include "json_writer.h"
#include "options/option_groups.h"

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/engine/profile/bench.h"
#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/profile/metrics.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/store/results_store.h"
#include "iwb/kernels/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace iwb::cli {
namespace {

struct Options {
  std::string model;
  BenchOptions bench;
  std::vector<int32_t> depths = {0};
  // llama-bench's lists: each ppN, then each tgN, every one at each depth.
  std::vector<int32_t> prompt_sizes = {512};
  std::vector<int32_t> generation_sizes = {128};
  std::vector<int32_t> thread_counts = {0};  // llama-bench's -t list; 0: all cores
  DeviceOptions device;
  KvCacheOptions kv_cache;
  int64_t batch_tokens = 512;
  bool is_json = false;
  std::string output_format = "md";  // llama-bench's -o
  bool is_store_skipped = false;
  bool is_list = false;
  bool is_paired_probe = false;
  std::string db = ResultsStore::default_path();
};

// -1 to go on, otherwise the exit status.
int parse(int argc, char** argv, Options* o) {
  OptionTable t("bench",
                "-m MODEL.gguf [-p N,...] [-n N,...] [-d N,...] [-r REPS] [-t N,...] [-b N] [options]\n"
                "       iwb bench --list [-m MODEL.gguf] [--json] [--db PATH]",
                "llama-bench style prompt processing (ppN) and text generation (tgN) throughput.");
  t.begin_group("model and tests (llama-bench's spellings)");
  add_model_option(t, &o->model, "GGUF model", false);
  t.add({.names = {"-p", "--n-prompt"},
         .value_name = "N,...",
         .help = "prompt processing tests ppN: prefill N random tokens; 0: skip",
         .destination = &o->prompt_sizes,
         .min = 0});
  t.add({.names = {"-n", "--n-gen"},
         .value_name = "N,...",
         .help = "text generation tests tgN: N tokens one by one; 0: skip",
         .destination = &o->generation_sizes,
         .min = 0});
  t.add({.names = {"-d", "--n-depth"},
         .value_name = "N,...",
         .help = "context depths: each test runs after N random tokens are already in the\n"
                 "KV cache (their prefill is not timed), e.g. 0,8192: \"tg128 @ d8192\"",
         .destination = &o->depths,
         .min = 0});
  t.add({.names = {"-r", "--repetitions"},
         .value_name = "N",
         .help = "timed runs of each test",
         .destination = &o->bench.num_repetitions,
         .min = 1});
  t.begin_group("context, threads and device");
  add_batch_size_option(t, &o->batch_tokens,
                        "tokens per forward step, so prompt chunks (llama-bench's micro-batch;\n"
                        "the engine's own default is 128)");
  t.add({.names = {"-t", "--threads"},
         .value_name = "N,...",
         .help = "CPU threads; a list runs every test with each (the model is loaded again\n"
                 "for each count)",
         .destination = &o->thread_counts,
         .min = 1,
         .max = 1024,
         .default_text = "all cores"});
  add_kv_cache_options(t, &o->kv_cache);
  add_device_options(t, &o->device);
  t.add({.names = {"--paired-probe"},
         .help = "before each tgN repetition, probe the CPU's read-only memory bandwidth\n"
                 "(~0.2 s, 1.5 GiB) and give MBU against it: the median of the pairs.\n"
                 "On a shared host the bandwidth drifts by a third within minutes",
         .destination = &o->is_paired_probe});
  t.begin_group("output");
  t.add({.names = {"-o", "--output"},
         .value_name = "FORMAT",
         .help = "llama-bench's output formats and field names: md (the table), json (an\n"
                 "array), jsonl, csv; mbu and mfu follow llama-bench's fields",
         .destination = &o->output_format,
         .choices = llama_bench_formats()});
  add_json_option(t, &o->is_json);
  t.add({.names = {"--list"},
         .help = "print the results recorded so far (of MODEL with -m)",
         .destination = &o->is_list});
  add_results_store_options(t, &o->is_store_skipped, &o->db, "the results");
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  if (const std::string e = o->kv_cache.error(); !e.empty()) return report_usage_error(t, e);
  o->bench.depths.assign(o->depths.begin(), o->depths.end());
  // The largest of each list sizes the context; the tests run one size at a time.
  const auto largest = [](const std::vector<int32_t>& sizes) {
    return sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  };
  o->bench.num_prompt_tokens = largest(o->prompt_sizes);
  o->bench.num_generated_tokens = largest(o->generation_sizes);
  if (!o->is_list && o->model.empty()) return report_usage_error(t, "no model given (-m MODEL.gguf)");
  if (o->output_format != "md" && (o->is_json || o->is_list)) {
    return report_usage_error(t, "-o " + o->output_format + " cannot go with " + (o->is_json ? "--json" : "--list") +
                                     " (--json is iwb's own JSON, with the probe)");
  }
  if (!o->is_list && o->bench.num_prompt_tokens == 0 && o->bench.num_generated_tokens == 0) {
    return report_usage_error(t, "nothing to run: -p and -n are both 0");
  }
  if (!o->is_list) {
    Result<std::string> device = resolve_device(o->device, o->model);
    if (!device) return report_usage_error(t, device.error_message());
    o->device.device = *device;
  }
  return -1;
}

std::string percent(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", *v * 100.0);
  return buf;
}

void print_table(const std::vector<BenchResult>& results) {
  std::printf("| %-28s | %10s | %9s | %7s | %15s | %17s | %-11s |\n", "model", "size", "params", "threads", "test",
              "t/s", "utilisation");
  std::printf("| %s | %s: | %s: | %s: | %s: | %s: | %s |\n", std::string(28, '-').c_str(), std::string(9, '-').c_str(),
              std::string(8, '-').c_str(), std::string(6, '-').c_str(), std::string(14, '-').c_str(),
              std::string(16, '-').c_str(), std::string(11, '-').c_str());
  for (const BenchResult& r : results) {
    // Named and sized as llama-bench's table does, where the run has llama.cpp's description
    // (results read back from the store keep iwb's "qwen2 Q4_K_M" and the file size).
    const bool is_llama_named = !r.llama_model_type.empty();
    const std::string model = is_llama_named ? r.llama_model_type : r.architecture + " " + r.file_type;
    const uint64_t size = is_llama_named && r.tensor_bytes > 0 ? r.tensor_bytes : r.model_size_bytes;
    char rate[48];
    std::snprintf(rate, sizeof rate, "%.2f ± %.2f", r.tokens_per_s_mean, r.tokens_per_s_sd);
    // MFU for prompt processing (compute-bound), MBU for generation (bandwidth-bound).
    const bool is_pp = r.num_generated_tokens == 0;
    // A paired MBU (--paired-probe) rather than the stored probe's, marked "p".
    const std::string use = is_pp          ? "MFU " + percent(r.mfu)
                            : r.mbu_paired ? "MBU " + percent(r.mbu_paired) + " p"
                                           : "MBU " + percent(r.mbu);
    // "±" is two bytes in UTF-8: pad one more so the column lines up on a terminal.
    std::printf("| %-28s | %10s | %9s | %7d | %15s | %18s | %-11s |\n", model.c_str(), format_bytes(size).c_str(),
                format_count(r.num_params).c_str(), r.num_threads, r.test.c_str(), rate, use.c_str());
  }
}

// Prints a line (after `prefix`) for each generation test that read its bytes faster than the
// probe's roof, from more than the caches hold (bandwidth_above_roof): the stored probe, not the
// run, is off.
void print_low_probe_notes(const std::vector<BenchResult>& results, const std::optional<ProbeResult>& probe, FILE* out,
                           const char* prefix) {
  if (!probe || probe->device_id != "cpu") return;  // a GPU's copy probe is not measured on a shared host
  const uint64_t cache_bytes = describe_cpu_device().cache_bytes;
  const double roof = ceilings_from_probe(*probe).bandwidth_bytes_per_s;
  for (const BenchResult& r : results) {
    if (r.num_generated_tokens == 0) continue;
    const std::optional<double> seen =
        bandwidth_above_roof(r.predicted_bytes_per_token, r.tokens_per_s_mean, roof, cache_bytes);
    if (!seen) continue;
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s read %.1f GB/s (%s a token), above the probe's %.1f GB/s: the probe of %s ran at a slower "
                  "moment than this run (a shared host's neighbours, a busy core); `iwb probe` measures again",
                  r.test.c_str(), *seen / 1e9, format_bytes(static_cast<uint64_t>(r.predicted_bytes_per_token)).c_str(),
                  roof / 1e9, probe->date.c_str());
    std::fprintf(out, "%s%s\n", prefix, line);
  }
}

void add_json(JsonWriter& j, const BenchResult& r) {
  j.begin_object();
  if (r.id > 0) j.field("id", static_cast<int64_t>(r.id));
  j.field("test", r.test).field("date", r.date).field("device_id", r.device_id).field("device_name", r.device_name);
  j.field("model_path", r.model_path).field("model_name", r.model_name).field("model_identity", r.model_identity);
  j.field("architecture", r.architecture).field("file_type", r.file_type);
  j.field("model_size_bytes", static_cast<uint64_t>(r.model_size_bytes))
      .field("num_params", static_cast<uint64_t>(r.num_params));
  j.field("num_threads", r.num_threads).field("n_depth", static_cast<int64_t>(r.num_depth_tokens));
  j.field("num_prompt_tokens", static_cast<int64_t>(r.num_prompt_tokens));
  j.field("num_generated_tokens", static_cast<int64_t>(r.num_generated_tokens));
  j.field("num_repetitions", r.num_repetitions);
  j.field("tokens_per_s_mean", r.tokens_per_s_mean).field("tokens_per_s_sd", r.tokens_per_s_sd);
  j.key("tokens_per_s").begin_array();
  for (const double v : r.tokens_per_s) j.value(v);
  j.end_array();
  // JsonWriter writes a non-finite number as null: no probe, no utilisation.
  j.key("mbu");
  if (r.mbu)
    j.value(*r.mbu);
  else
    j.value(std::nan(""));
  j.key("mfu");
  if (r.mfu)
    j.value(*r.mfu);
  else
    j.value(std::nan(""));
  j.field("mfu_peak_kind", r.mfu_peak_kind);
  j.field("predicted_flops_per_token", r.predicted_flops_per_token);
  j.field("predicted_bytes_per_token", r.predicted_bytes_per_token);
  j.field("probe_date", r.probe_date);
  if (!r.paired_read_bytes_per_s.empty()) {
    j.key("mbu_paired").value(r.mbu_paired.value_or(std::nan("")));
    j.key("paired_read_bytes_per_s").begin_array();
    for (const double v : r.paired_read_bytes_per_s) j.value(v);
    j.end_array();
  }
  j.end_object();
}

// For each tgN run with --paired-probe: the pairs' median MBU, their range and the probes'.
void print_paired_lines(const std::vector<BenchResult>& results, FILE* out) {
  for (const BenchResult& r : results) {
    const std::vector<double> mbus = r.paired_mbus();
    if (mbus.empty()) continue;
    const auto [low, high] = std::minmax_element(mbus.begin(), mbus.end());
    const auto [slow, fast] = std::minmax_element(r.paired_read_bytes_per_s.begin(), r.paired_read_bytes_per_s.end());
    std::fprintf(out,
                 "%s: MBU against a read-only probe right before each repetition (p): median %s of %zu pairs, "
                 "range %s-%s; probes %.1f-%.1f GB/s\n",
                 r.test.c_str(), percent(r.mbu_paired).c_str(), mbus.size(), percent(*low).c_str(),
                 percent(*high).c_str(), *slow / 1e9, *fast / 1e9);
  }
}

int list_results(const Options& o) {
  if (!std::filesystem::exists(o.db)) {
    std::fprintf(stderr, "iwb bench: no results store at %s\n", o.db.c_str());
    return 1;
  }
  auto db = ResultsStore::open(o.db);
  if (!db) {
    std::fprintf(stderr, "iwb bench: %s\n", db.error_message().c_str());
    return 1;
  }
  std::string identity;
  if (!o.model.empty()) {
    Result<std::string> id = model_identity(o.model);
    if (!id) {
      std::fprintf(stderr, "iwb bench: %s\n", id.error_message().c_str());
      return 1;
    }
    identity = *id;
  }
  auto rows = (*db)->list_bench_results(identity);
  if (!rows) {
    std::fprintf(stderr, "iwb bench: %s\n", rows.error_message().c_str());
    return 1;
  }
  if (o.is_json) {
    JsonWriter j;
    j.begin_array();
    for (const BenchResult& r : *rows) add_json(j, r);
    j.end_array();
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%-20s  %-28s %7s %15s %17s %7s %7s  %s\n", "date", "model", "threads", "test", "t/s", "MBU", "MFU",
                "file");
    for (const BenchResult& r : *rows) {
      char rate[48];
      std::snprintf(rate, sizeof rate, "%.2f ± %.2f", r.tokens_per_s_mean, r.tokens_per_s_sd);
      std::printf("%-20s  %-28s %7d %15s %18s %7s %7s  %s\n", r.date.c_str(),
                  (r.architecture + " " + r.file_type).c_str(), r.num_threads, r.test.c_str(), rate,
                  percent(r.mbu).c_str(), percent(r.mfu).c_str(), r.model_path.c_str());
    }
  }
  return 0;
}

// The context the tests need against the one the model was trained for (read from the file's
// header before anything is loaded): positions past it were never trained, and a KV cache that
// large would be allocated for nothing. "" when it fits or the file does not say.
std::string context_shortfall(const std::string& path, const BenchOptions& bench) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return {};  // Engine::load reports an unreadable file in its own words
  auto summary = summarize_model(**file);
  if (!summary) return {};
  const int64_t trained = summary->hparams.context_length;
  const int64_t needed = bench_context_length(bench);
  if (trained <= 0 || needed <= trained) return {};
  int64_t deepest = 0;
  for (const int64_t d : bench.depths) deepest = std::max(deepest, d);
  const std::string what = deepest > 0 ? "depth " + std::to_string(deepest) + " plus the test" : "the test";
  return what + " needs a context of " + std::to_string(needed) + " tokens, but " + summary->name +
         " was trained for " + std::to_string(trained) + " (its context_length)";
}

// Every test in llama-bench's order: each depth, then each ppN, then each tgN. One warm-up
// before the first; a depth's tokens stay in the prefix cache from one test to the next.
Result<std::vector<BenchResult>> run_tests(Engine& engine, const Options& o, const std::optional<ProbeResult>& probe) {
  std::vector<BenchResult> all;
  bool is_first = true;
  const auto run = [&](int64_t depth, int64_t prompt, int64_t generated) -> Status {
    BenchOptions one = o.bench;
    one.depths = {depth};
    one.num_prompt_tokens = prompt;
    one.num_generated_tokens = generated;
    one.is_warmup = is_first;
    is_first = false;
    auto results = iwb::run_bench(engine, one, probe);
    if (!results) return results.status();
    all.insert(all.end(), results->begin(), results->end());
    return {};
  };
  for (const int64_t depth : o.bench.depths) {
    for (const int32_t prompt : o.prompt_sizes) {
      if (prompt == 0) continue;
      if (Status s = run(depth, prompt, 0); !s) return s;
    }
    for (const int32_t generated : o.generation_sizes) {
      if (generated == 0) continue;
      if (Status s = run(depth, 0, generated); !s) return s;
    }
  }
  return all;
}

}  // namespace

int run_bench(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;
  if (o.is_list) return list_results(o);

  // The latest probe of this machine, if the store has one (a --no-store run creates no file).
  std::unique_ptr<ResultsStore> store;
  if (!o.is_store_skipped || std::filesystem::exists(o.db)) {
    auto db = ResultsStore::open(o.db);
    if (!db) {
      std::fprintf(stderr, "iwb bench: %s\n", db.error_message().c_str());
      return 1;
    }
    store = std::move(*db);
  }
  if (const std::string shortfall = context_shortfall(o.model, o.bench); !shortfall.empty()) {
    std::fprintf(stderr, "iwb bench: %s\n", shortfall.c_str());
    return 1;
  }
  EngineOptions engine_options;
  engine_options.device = o.device.device;
  engine_options.load_mode = o.device.load_mode;
  engine_options.kv_cache_type = o.kv_cache.types();
  // Whole prompts of up to a batch in one step: each step streams every weight once.
  engine_options.max_batch_tokens = o.batch_tokens;
  // Room for the deepest depth plus the largest test; the depth's blocks stay in the prefix
  // cache between repetitions (the default pool holds several such contexts).
  engine_options.context_length = bench_context_length(o.bench);
  std::optional<ProbeResult> probe;
  std::vector<BenchResult> results;
  const ThreadPoolStats pool_before = thread_pool_stats();
  for (const int32_t threads : o.thread_counts) {
    // The engine sizes its thread pool when it loads: one load per thread count.
    engine_options.num_threads = threads;
    auto engine = Engine::load(o.model, engine_options);
    if (!engine) {
      std::fprintf(stderr, "iwb bench: %s\n", engine.error_message().c_str());
      return 1;
    }
    // The latest probe of the device the model runs on ("cpu", "cuda:0"), if the store has one.
    if (store && results.empty()) {
      auto latest = store->latest_probe((*engine)->model().device);
      if (!latest) {
        std::fprintf(stderr, "iwb bench: %s\n", latest.error_message().c_str());
        return 1;
      }
      probe = *latest;
    }
    if (!o.is_json) {
      std::fprintf(stderr, "iwb bench: %s (%s, %s), %d threads, %d repetitions\n", (*engine)->model().name.c_str(),
                   (*engine)->model().architecture.c_str(), (*engine)->model().file_type.c_str(),
                   (*engine)->num_threads(), o.bench.num_repetitions);
      std::fprintf(stderr, "iwb bench: %s\n", device_line(**engine).c_str());
    }
    // --paired-probe: one set of probe buffers for this engine's thread count, measured by
    // run_bench right before each generation repetition.
    std::unique_ptr<ReadBandwidthProbe> paired;
    Options run = o;
    if (o.is_paired_probe) {
      if ((*engine)->model().device != "cpu") {
        std::fprintf(stderr, "iwb bench: --paired-probe measures the CPU's memory; the model runs on %s\n",
                     (*engine)->model().device.c_str());
        return 1;
      }
      auto made = ReadBandwidthProbe::create((*engine)->num_threads());
      if (!made) {
        std::fprintf(stderr, "iwb bench: %s\n", made.error_message().c_str());
        return 1;
      }
      paired = std::move(*made);
      run.bench.paired_read_probe = [&paired] { return paired->measure(); };
    }
    auto part = run_tests(**engine, run, probe);
    if (!part) {
      std::fprintf(stderr, "iwb bench: %s\n", part.error_message().c_str());
      return 1;
    }
    results.insert(results.end(), part->begin(), part->end());
  }
  // Figures from a machine where something else held a core are not the machine's: say so.
  if (const ThreadPoolStats pool = thread_pool_stats(); pool.contention_events > pool_before.contention_events) {
    std::fprintf(stderr,
                 "iwb bench: the machine was busy: %lld times the engine's workers were held back by other work, "
                 "and %lld parallel regions ran on fewer threads (IWB_THREAD_ADAPT=0 keeps all)\n",
                 static_cast<long long>(pool.contention_events - pool_before.contention_events),
                 static_cast<long long>(pool.contended_regions - pool_before.contended_regions));
  }
  if (!o.is_store_skipped) {
    for (BenchResult& r : results) {
      auto id = store->add_bench_result(r);
      if (!id) {
        std::fprintf(stderr, "iwb bench: %s\n", id.error_message().c_str());
        return 1;
      }
      r.id = *id;
    }
  }

  if (o.output_format != "md") {
    // Only the data on stdout, as llama-bench writes it; what iwb adds goes to stderr.
    const LlamaBenchSettings settings{.batch_tokens = o.batch_tokens,
                                      .type_k = o.kv_cache.k,
                                      .type_v = o.kv_cache.v,
                                      .has_paired_probe = o.is_paired_probe};
    std::fputs(format_llama_bench(results, settings, o.output_format).c_str(), stdout);
    print_low_probe_notes(results, probe, stderr, "iwb bench: ");
    print_paired_lines(results, stderr);
    return 0;
  }
  if (o.is_json) {
    JsonWriter j;
    j.begin_object().key("results").begin_array();
    for (const BenchResult& r : results) add_json(j, r);
    j.end_array();
    j.key("probe");
    if (probe) {
      j.begin_object().field("device_id", probe->device_id).field("date", probe->date);
      // bandwidth_bytes_per_s: the roof MBU divides by (read-only; copy for an older probe).
      j.field("bandwidth_bytes_per_s", probe->bandwidth_bytes_per_s());
      j.field("read_bytes_per_s", probe->read_bytes_per_s).field("copy_bytes_per_s", probe->copy_bytes_per_s);
      j.field("peak_flops", probe->peak_flops).end_object();
    } else {
      j.value(std::nan(""));
    }
    print_low_probe_notes(results, probe, stderr, "iwb bench: ");
    j.field("stored", !o.is_store_skipped);
    if (!o.is_store_skipped) j.field("db", o.db);
    j.end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  print_table(results);
  if (o.is_paired_probe) {
    std::printf("\n");
    print_paired_lines(results, stdout);
  }
  if (probe) {
    std::printf("\nMFU and MBU against the probe of %s (%s): %.1f GB/s %s, %.1f GFLOP/s (%s)", probe->device_id.c_str(),
                probe->date.c_str(), probe->bandwidth_bytes_per_s() / 1e9,
                probe->has_read_bandwidth() ? "read-only" : "copy (the probe predates the read-only figure)",
                probe->peak_flops / 1e9, probe->peak_flops_kind.c_str());
    if (probe->peak_int8_ops > 0) {
      std::printf(", %.1f GOP/s (%s; MFU of quantized weights)", probe->peak_int8_ops / 1e9,
                  probe->peak_int8_kind.c_str());
    }
    std::printf("\n");
    print_low_probe_notes(results, probe, stdout, "note: ");
  } else {
    std::printf("\nno probe of this machine in %s: run `iwb probe` to get MBU and MFU\n", o.db.c_str());
  }
  if (!o.is_store_skipped) std::printf("recorded in %s\n", o.db.c_str());
  return 0;
}

}  // namespace iwb::cli
