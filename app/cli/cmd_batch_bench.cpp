// `iwb batch-bench -m MODEL [--parallel 1,2,4,8,16] [-p 128] [-n 128] [--shared-prefix N]
// [-t THREADS] [--json] ...`: continuous batching through the paged KV cache. For each
// parallelism: aggregate and per-sequence generation rates, time to first token, peak KV
// blocks, wasted slots, and how a contiguous max-context allocation would have fared.
#include "commands.h"
#include "device_cli.h"
#include "json_writer.h"

#include "iwb/engine/profile/batch_bench.h"
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/runtime/engine.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>
#include <system_error>

namespace iwb::cli {
namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: iwb batch-bench -m MODEL.gguf [--parallel LIST] [-p N] [-n N] [--shared-prefix N] [-t THREADS]\n"
               "                       [-c CONTEXT] [--kv-mib MIB] [--block-size N] [--batch-tokens N] [--json]\n"
               "  -m, --model FILE     GGUF model\n"
               "  --parallel LIST      sequences generating together, one run each (default 1,2,4,8,16)\n"
               "  -p, --n-prompt N     random prompt tokens per request, after the shared prefix (default 128)\n"
               "  -n, --n-gen N        tokens generated per request (default 128)\n"
               "  --shared-prefix N    N random tokens every prompt starts with; also measures time to first\n"
               "                       token with the prefix cached against not cached (default 0: none)\n"
               "  -t, --threads N      CPU threads (default: all cores)\n"
               "  -c, --context N      per-sequence context, the contiguous comparison's max context\n"
               "                       (default: the model's, at most 4096)\n"
               "  --kv-mib MIB         KV pool size (default: the largest parallelism's sequences whole)\n"
               "  --block-size N       tokens per KV block (default 16)\n"
               "  --batch-tokens N     tokens per step, decodes and prompt chunks (default 128)\n"
               "  --device DEV         auto (a CUDA GPU when one works, else the CPU), cpu or cuda:N\n"
               "  --json               print the results as JSON\n");
}

struct Options {
  std::string model;
  BatchBenchOptions bench;
  EngineOptions engine;
  uint64_t kv_mib = 0;
  bool is_json = false;
};

template <typename T>
bool parse_number(std::string_view text, T* out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool parse_list(std::string_view text, std::vector<int>* out) {
  out->clear();
  while (!text.empty()) {
    const size_t comma = text.find(',');
    int value = 0;
    if (!parse_number(text.substr(0, comma), &value) || value < 1 || value > 1024) return false;
    out->push_back(value);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return !out->empty();
}

// -1 to go on, otherwise the exit status.
int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    auto number = [&](auto* out, long long min) {
      if (value == nullptr || !parse_number(std::string_view(value), out) || static_cast<long long>(*out) < min) {
        std::fprintf(stderr, "iwb batch-bench: %s needs a whole number >= %lld, not '%s'\n", a.c_str(), min,
                     value ? value : "");
        return false;
      }
      ++i;
      return true;
    };
    bool ok = true;
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return 0;
    } else if ((a == "-m" || a == "--model") && value) {
      o->model = argv[++i];
    } else if (a == "--parallel") {
      ok = value != nullptr && parse_list(value, &o->bench.parallel);
      if (!ok) std::fprintf(stderr, "iwb batch-bench: --parallel needs a list such as 1,2,4,8 (each 1..1024)\n");
      ++i;
    } else if (a == "-p" || a == "--n-prompt") {
      ok = number(&o->bench.num_prompt_tokens, 1);
    } else if (a == "-n" || a == "--n-gen") {
      ok = number(&o->bench.num_generated_tokens, 1);
    } else if (a == "--shared-prefix") {
      ok = number(&o->bench.shared_prefix_tokens, 0);
    } else if (a == "-t" || a == "--threads") {
      ok = number(&o->engine.num_threads, 1);
    } else if (a == "-c" || a == "--context") {
      ok = number(&o->engine.context_length, 1);
    } else if (a == "--kv-mib") {
      ok = number(&o->kv_mib, 1);
    } else if (a == "--block-size") {
      ok = number(&o->engine.kv_block_size, 1);
    } else if (a == "--batch-tokens") {
      ok = number(&o->engine.max_batch_tokens, 1);
    } else if (a == "--json") {
      o->is_json = true;
    } else if (const int taken = parse_device_option("batch-bench", argc, argv, &i, &o->engine.device); taken != 0) {
      ok = taken > 0;
    } else {
      std::fprintf(stderr, "iwb batch-bench: unknown or incomplete option '%s'\n", a.c_str());
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "\n");
      print_usage(stderr);
      return 2;
    }
  }
  if (o->model.empty()) {
    std::fprintf(stderr, "iwb batch-bench: no model given (-m MODEL.gguf)\n\n");
    print_usage(stderr);
    return 2;
  }
  return -1;
}

void print_json(const Engine& engine, const Options& o, const BatchBenchResult& r) {
  JsonWriter j;
  j.begin_object();
  j.field("model", engine.model().name).field("path", engine.model().path).field("threads", engine.num_threads());
  j.field("device", engine.model().device).field("device_description", engine.model().device_description);
  j.field("context", r.context).field("block_size", static_cast<int64_t>(r.block_size)).field("num_blocks", r.num_blocks);
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
    std::printf("prefix cache: TTFT %.3f s with the %lld-token prefix not cached, %.3f s cached (%d tokens reused): "
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
    std::printf("\nagg: generated tokens / wall time; dec: during steps without prompt tokens; waste: unused slots of "
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
    o.engine.kv_cache_bytes = batch_bench_kv_bytes(shape->config, o.bench, o.engine.kv_block_size);
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
  if (o.is_json) print_json(engine, o, *result);
  else print_table(engine, o, *result);
  return 0;
}

}  // namespace iwb::cli
