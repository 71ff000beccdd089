// `iwb batch-bench -m MODEL [--parallel 1,2,4,8,16] [-p 128] [-n 128] [--shared-prefix N]
// [-t THREADS] [--json] ...`: continuous batching through the paged KV cache. For each
// parallelism: aggregate and per-sequence generation rates, time to first token, peak KV
// blocks, wasted slots, and how a contiguous max-context allocation would have fared.
#include "commands.h"
#include "device_cli.h"
#include "json_writer.h"
#include "options/option_groups.h"

#include "iwb/engine/profile/batch_bench.h"
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/runtime/engine.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace iwb::cli {
namespace {

struct Options {
  std::string model;
  BatchBenchOptions bench;
  EngineOptions engine;
  DeviceOptions device;
  KvCacheOptions kv_cache;
  uint64_t kv_mib = 0;
  bool is_json = false;
};

// -1 to go on, otherwise the exit status.
int parse(int argc, char** argv, Options* o) {
  OptionTable t("batch-bench", "-m MODEL.gguf [--parallel LIST] [-p N] [-n N] [--shared-prefix N] [options]",
                "Continuous batching through the paged KV cache, at several parallelisms.");
  t.begin_group("model and requests");
  add_model_option(t, &o->model);
  t.add({.names = {"--parallel"},
         .value_name = "LIST",
         .help = "sequences generating together, one run each",
         .destination = &o->bench.parallel,
         .min = 1,
         .max = 1024});
  t.add({.names = {"-p", "--n-prompt"},
         .value_name = "N",
         .help = "random prompt tokens per request, after the shared prefix",
         .destination = &o->bench.num_prompt_tokens,
         .min = 1});
  t.add({.names = {"-n", "--n-gen"},
         .value_name = "N",
         .help = "tokens generated per request",
         .destination = &o->bench.num_generated_tokens,
         .min = 1});
  t.add({.names = {"--shared-prefix"},
         .value_name = "N",
         .help = "N random tokens every prompt starts with; also measures time to first\n"
                 "token with the prefix cached against not cached; 0: none",
         .destination = &o->bench.shared_prefix_tokens,
         .min = 0});
  t.begin_group("context and KV cache");
  add_context_option(t, &o->engine.context_length,
                     "per-sequence context, the contiguous comparison's max context;\n"
                     "0: the model's, at most 4096",
                     0);
  t.add({.names = {"--kv-mib"},
         .value_name = "MIB",
         .help = "KV pool size",
         .destination = &o->kv_mib,
         .min = 1,
         .default_text = "the largest parallelism's sequences whole"});
  t.add({.names = {"--block-size"},
         .value_name = "N",
         .help = "tokens per KV block",
         .destination = &o->engine.kv_block_size,
         .min = 1});
  t.add({.names = {"-b", "--batch-size", "--batch-tokens"},
         .value_name = "N",
         .help = "tokens per step, decodes and prompt chunks",
         .destination = &o->engine.max_batch_tokens,
         .min = 1});
  t.begin_group("threads and device");
  add_threads_option(t, &o->engine.num_threads);
  add_device_options(t, &o->device);
  add_kv_cache_options(t, &o->kv_cache);
  t.begin_group("output");
  add_json_option(t, &o->is_json);
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  if (const std::string e = o->kv_cache.error(); !e.empty()) return report_usage_error(t, e);
  Result<std::string> device = resolve_device(o->device, o->model);
  if (!device) return report_usage_error(t, device.error_message());
  o->engine.device = *device;
  o->engine.load_mode = o->device.load_mode;
  o->engine.kv_cache_type = o->kv_cache.types();
  return -1;
}

void print_json(const Engine& engine, const Options& o, const BatchBenchResult& r) {
  JsonWriter j;
  j.begin_object();
  j.field("model", engine.model().name).field("path", engine.model().path).field("threads", engine.num_threads());
  j.field("device", engine.model().device).field("device_description", engine.model().device_description);
  j.field("context", r.context)
      .field("block_size", static_cast<int64_t>(r.block_size))
      .field("num_blocks", r.num_blocks);
  j.field("bytes_per_block", r.bytes_per_block).field("kv_pool_bytes", r.kv_pool_bytes);
  j.field("prompt_tokens", o.bench.num_prompt_tokens).field("generated_tokens", o.bench.num_generated_tokens);
  j.field("shared_prefix_tokens", o.bench.shared_prefix_tokens).field("batch_tokens", engine.max_batch_tokens());
  j.key("prefix_cache");
  if (r.prefix) {
    j.begin_object();
    j.field("prefix_tokens", r.prefix->prefix_tokens).field("prompt_tokens", r.prefix->prompt_tokens);
    j.field("cold_ttft_s", r.prefix->cold_ttft_s).field("warm_ttft_s", r.prefix->warm_ttft_s);
    j.field("ttft_cut", r.prefix->ttft_cut).field("reused_tokens", static_cast<int64_t>(r.prefix->num_reused_tokens));
    j.end_object();
  } else {
    j.value(std::string("none"));
  }
  j.key("runs").begin_array();
  for (const BatchRun& run : r.runs) {
    j.begin_object();
    j.field("parallel", run.parallel).field("steps", run.num_steps).field("seconds", run.seconds);
    j.field("generated_tokens", run.num_generated_tokens);
    j.field("aggregate_tokens_per_s", run.aggregate_tokens_per_s).field("decode_tokens_per_s", run.decode_tokens_per_s);
    j.field("per_sequence_tokens_per_s", run.per_sequence_tokens_per_s);
    j.field("mean_ttft_s", run.mean_ttft_s).field("max_ttft_s", run.max_ttft_s);
    j.field("peak_blocks", run.peak_used_blocks).field("peak_kv_bytes", run.peak_kv_bytes);
    j.field("waste", run.waste).field("waste_at_peak", run.waste_at_peak);
    j.field("preemptions", run.num_preemptions).field("prefix_hit_rate", run.prefix_hit_rate);
    j.key("contiguous").begin_object();
    j.field("max_context", run.contiguous.max_context).field("fit_in_peak_memory", run.contiguous.num_fit_in_peak);
    j.field("fit_in_pool", run.contiguous.num_fit_in_pool).field("waste", run.contiguous.waste);
    j.end_object();
    j.end_object();
  }
  j.end_array();
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

void print_table(const Engine& engine, const Options& o, const BatchBenchResult& r) {
  const std::string shared =
      o.bench.shared_prefix_tokens > 0 ? std::to_string(o.bench.shared_prefix_tokens) + " shared + " : std::string();
  std::printf("%s (%s, %s), %d threads; requests of %s%lld prompt tokens generating %lld; %lld-token steps\n",
              engine.model().name.c_str(), engine.model().architecture.c_str(), engine.model().file_type.c_str(),
              engine.num_threads(), shared.c_str(), static_cast<long long>(o.bench.num_prompt_tokens),
              static_cast<long long>(o.bench.num_generated_tokens), static_cast<long long>(engine.max_batch_tokens()));
  std::printf("%s\n", device_line(engine).c_str());
  std::printf("KV pool: %lld blocks of %d tokens (%.1f MiB); context %lld per sequence\n\n",
              static_cast<long long>(r.num_blocks), r.block_size, static_cast<double>(r.kv_pool_bytes) / (1 << 20),
              static_cast<long long>(r.context));
  if (r.prefix) {
    std::printf(
        "prefix cache: TTFT %.3f s with the %lld-token prefix not cached, %.3f s cached (%d tokens reused): "
        "%.1f%% less\n\n",
        r.prefix->cold_ttft_s, static_cast<long long>(r.prefix->prefix_tokens), r.prefix->warm_ttft_s,
        r.prefix->num_reused_tokens, 100.0 * r.prefix->ttft_cut);
  }
  std::printf("%4s %10s %10s %10s %9s %9s %7s %7s %6s %8s | %14s %8s\n", "P", "agg tok/s", "dec tok/s", "seq tok/s",
              "TTFT s", "max TTFT", "blocks", "waste", "preem", "prefix", "contig fit", "waste");
  for (const BatchRun& run : r.runs) {
    std::printf("%4d %10.2f %10.2f %10.2f %9.3f %9.3f %7lld %6.2f%% %6lld %7.1f%% | %6lld (pool %lld) %7.1f%%\n",
                run.parallel, run.aggregate_tokens_per_s, run.decode_tokens_per_s, run.per_sequence_tokens_per_s,
                run.mean_ttft_s, run.max_ttft_s, static_cast<long long>(run.peak_used_blocks), 100.0 * run.waste,
                static_cast<long long>(run.num_preemptions), 100.0 * run.prefix_hit_rate,
                static_cast<long long>(run.contiguous.num_fit_in_peak),
                static_cast<long long>(run.contiguous.num_fit_in_pool), 100.0 * run.contiguous.waste);
  }
  if (!r.runs.empty()) {
    std::printf(
        "\nagg: generated tokens / wall time; dec: during steps without prompt tokens; waste: unused slots of "
        "allocated blocks over all steps;\ncontig fit: sequences a contiguous %lld-position slab each would "
        "fit in the paged peak memory (and in the whole pool), its waste for this workload.\n",
        static_cast<long long>(r.runs.front().contiguous.max_context));
  }
}

}  // namespace

int run_batch_bench(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;
  if (o.kv_mib > 0) {
    o.engine.kv_cache_bytes = o.kv_mib << 20;
  } else {
    Result<ModelShape> shape = model_shape_from_gguf(o.model);
    if (!shape) {
      std::fprintf(stderr, "iwb batch-bench: %s\n", shape.error_message().c_str());
      return 1;
    }
    o.engine.kv_cache_bytes =
        batch_bench_kv_bytes(shape->config, o.bench, o.engine.kv_block_size, o.engine.kv_cache_type);
  }
  int max_parallel = 1;
  for (const int p : o.bench.parallel) max_parallel = std::max(max_parallel, p);
  o.engine.max_running_sequences = max_parallel;
  auto loaded = Engine::load(o.model, o.engine);
  if (!loaded) {
    std::fprintf(stderr, "iwb batch-bench: %s\n", loaded.error_message().c_str());
    return 1;
  }
  Engine& engine = **loaded;
  auto progress = [&](const std::string& what) {
    if (!o.is_json) std::fprintf(stderr, "  %s...\n", what.c_str());
  };
  Result<BatchBenchResult> result = run_batch_bench(engine, o.bench, progress);
  if (!result) {
    std::fprintf(stderr, "iwb batch-bench: %s\n", result.error_message().c_str());
    return 1;
  }
  if (o.is_json)
    print_json(engine, o, *result);
  else
    print_table(engine, o, *result);
  return 0;
}

}  // namespace iwb::cli
