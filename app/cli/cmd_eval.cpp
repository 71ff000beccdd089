// `iwb eval -m MODEL [--base BASE.gguf] [-f TEXT] [-c CTX] [--stride S] [--chunks N] [--json]`:
// perplexity (llama-perplexity's method), and against a base model KL divergence, top-1
// agreement and the right token's probability change; size and speed. Recorded as a run.
#include "commands.h"
#include "device_cli.h"
#include "json_writer.h"
#include "recorded_run.h"

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/profile/bench.h"
#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/logits_cache.h"
#include "iwb/engine/quant/run_recorder.h"
#include "iwb/engine/store/results_store.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace iwb::cli {
namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: iwb eval -m MODEL.gguf [--base BASE.gguf] [-f TEXT] [-c CTX] [--stride S] [--chunks N]\n"
               "                [-n GEN] [--kv-type f16|q8_0] [-t N] [--no-cache] [--json] [--no-store] [--db PATH]\n"
               "  -m, --model FILE   model to measure\n"
               "  --base FILE        unquantized model to compare with (KL divergence, top-1 agreement);\n"
               "                     its distributions are computed once and cached on disk\n"
               "  -f, --file TEXT    evaluation text (default: the built-in sample, about 1900 words)\n"
               "  -c, --ctx N        context of each chunk (default 512)\n"
               "  --stride S         0 (default): llama-perplexity's chunks, scoring each chunk's second half;\n"
               "                     S > 0: windows every S tokens scoring their last S (--ppl-stride)\n"
               "  --chunks N         at most N chunks (default: all the text holds)\n"
               "  -n, --n-gen N      generation speed test of N tokens (default 32; 0: skip)\n"
               "  --kv-type T        the model's KV cache: f16 (default) or q8_0 (8-bit)\n"
               "  -t, --threads N    CPU threads (default: all cores)\n"
               "  --device DEV       auto (a CUDA GPU when one works, else the CPU), cpu or cuda:N\n"
               "  --no-cache         recompute the base's distributions (and rewrite the cache)\n"
               "  --json             print the result as JSON\n"
               "  --no-store         do not record the run\n"
               "  --db PATH          results store (default %s)\n",
               ResultsStore::default_path().c_str());
}

struct Options {
  quant::EvalOptions eval;
  std::string text_file;
  bool is_json = false;
  bool is_store = true;
  std::string db = ResultsStore::default_path();
};

int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return 0;
    }
    if (a == "--json") { o->is_json = true; continue; }
    if (a == "--no-store") { o->is_store = false; continue; }
    if (a == "--no-cache") { o->eval.use_cache = false; continue; }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "iwb eval: unknown argument or missing value: '%s'\n", a.c_str());
      print_usage(stderr);
      return 2;
    }
    if (a == "--device") {
      if (parse_device_option("eval", argc, argv, &i, &o->eval.device) < 0) return 2;
      continue;
    }
    const std::string v = argv[++i];
    auto number = [&](int64_t* out, int64_t min) {
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
      if (ec != std::errc() || p != v.data() + v.size() || *out < min) {
        std::fprintf(stderr, "iwb eval: %s needs a whole number >= %lld, not '%s'\n", a.c_str(),
                     static_cast<long long>(min), v.c_str());
        return false;
      }
      return true;
    };
    int64_t n = 0;
    if (a == "-m" || a == "--model") o->eval.model_path = v;
    else if (a == "--base") o->eval.base_path = v;
    else if (a == "-f" || a == "--file") o->text_file = v;
    else if (a == "--db") o->db = v;
    else if (a == "--kv-type") o->eval.kv_cache_type = v;
    else if (a == "-c" || a == "--ctx") { if (!number(&o->eval.context, 8)) return 2; }
    else if (a == "--stride") { if (!number(&o->eval.stride, 0)) return 2; }
    else if (a == "--chunks") { if (!number(&o->eval.num_chunks, 0)) return 2; }
    else if (a == "-n" || a == "--n-gen") { if (!number(&o->eval.num_gen_tokens, 0)) return 2; }
    else if (a == "-t" || a == "--threads") {
      if (!number(&n, 1)) return 2;
      o->eval.num_threads = static_cast<int>(n);
    } else {
      std::fprintf(stderr, "iwb eval: unknown argument '%s'\n", a.c_str());
      print_usage(stderr);
      return 2;
    }
  }
  if (o->eval.model_path.empty()) {
    std::fprintf(stderr, "iwb eval: -m is required\n");
    print_usage(stderr);
    return 2;
  }
  return -1;
}

void print_json(const quant::EvalResult& r, const Options& o, int64_t run_id) {
  JsonWriter j;
  j.begin_object().field("model", o.eval.model_path).field("base", o.eval.base_path).field("text", o.eval.text_name);
  j.field("context", o.eval.context).field("stride", o.eval.stride).field("text_tokens", r.num_text_tokens);
  j.field("device", r.device);
  j.field("kv_cache_type", o.eval.kv_cache_type).field("chunks", r.num_chunks).field("scored_tokens", r.num_scored).field("perplexity", r.perplexity);
  j.field("perplexity_error", r.perplexity_error).field("mean_nll", r.mean_nll);
  if (r.has_base) {
    j.field("base_perplexity", r.base_perplexity).field("base_from_cache", r.was_base_cached);
    j.field("kl_mean", r.kl_mean).field("kl_median", r.kl_median).field("kl_p99", r.kl_p99).field("kl_max", r.kl_max);
    j.field("top1_agreement", r.top1_agreement).field("delta_p_mean", r.delta_p_mean).field("delta_p_rms", r.delta_p_rms);
  }
  j.field("file_type", r.file_type).field("file_bytes", r.file_bytes).field("memory_bytes", r.memory_bytes);
  j.field("num_parameters", r.num_parameters)
      .field("bits_per_weight", r.num_parameters ? 8.0 * static_cast<double>(r.file_bytes) / static_cast<double>(r.num_parameters) : 0.0);
  j.field("prompt_tokens_per_s", r.prompt_tokens_per_s).field("gen_tokens_per_s", r.gen_tokens_per_s);
  j.field("seconds", r.seconds).field("run_id", run_id).end_object();
  std::printf("%s\n", j.str().c_str());
}

void print_text(const quant::EvalResult& r, const Options& o) {
  std::printf("%s (%s, KV cache %s, on %s): %s on disk, %s in memory\n", o.eval.model_path.c_str(),
              r.file_type.c_str(), o.eval.kv_cache_type.c_str(), r.device.c_str(), format_bytes(r.file_bytes).c_str(), format_bytes(r.memory_bytes).c_str());
  std::printf("  text: %s, %lld tokens; %lld chunks of %lld%s; %lld tokens scored\n", o.eval.text_name.c_str(),
              static_cast<long long>(r.num_text_tokens), static_cast<long long>(r.num_chunks),
              static_cast<long long>(o.eval.context),
              o.eval.stride > 0 ? (", stride " + std::to_string(o.eval.stride)).c_str() : "",
              static_cast<long long>(r.num_scored));
  std::printf("  perplexity: %.4f +/- %.4f\n", r.perplexity, r.perplexity_error);
  if (r.has_base) {
    std::printf("  against %s (perplexity %.4f%s):\n", o.eval.base_path.c_str(), r.base_perplexity,
                r.was_base_cached ? ", cached distributions" : "");
    std::printf("    KL divergence: mean %.6f, median %.6f, p99 %.6f, max %.6f\n", r.kl_mean, r.kl_median, r.kl_p99,
                r.kl_max);
    std::printf("    top-1 agreement: %.2f%%\n", 100.0 * r.top1_agreement);
    std::printf("    right token's probability change: mean %+.5f, RMS %.5f\n", r.delta_p_mean, r.delta_p_rms);
  }
  std::printf("  speed: prompt %.1f tokens/s (the chunks' prefill)", r.prompt_tokens_per_s);
  if (r.gen_tokens_per_s > 0) std::printf(", generation %.2f tokens/s (tg%lld)", r.gen_tokens_per_s,
                                           static_cast<long long>(o.eval.num_gen_tokens));
  std::printf("\n  %.1f s\n", r.seconds);
}

}  // namespace

int run_eval(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, &o); rc >= 0) return rc;
  if (o.text_file.empty()) {
    o.eval.text = quant::builtin_eval_text();
  } else {
    std::ifstream in(o.text_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "iwb eval: cannot read the text '%s'\n", o.text_file.c_str());
      return 1;
    }
    std::ostringstream text;
    text << in.rdbuf();
    o.eval.text = text.str();
    o.eval.text_name = std::filesystem::path(o.text_file).filename().string();
  }
  if (!o.is_json) {
    o.eval.progress = [](const quant::EvalProgress& p) {
      std::fprintf(stderr, "\r%-18s chunk %lld/%lld", p.stage.c_str(), static_cast<long long>(p.chunk),
                   static_cast<long long>(p.num_chunks));
      if (p.chunk == p.num_chunks) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    };
  }
  std::unique_ptr<ResultsStore> store;
  if (o.is_store && !open_results_store("eval", o.db, &store)) return 1;
  Result<quant::RecordedEval> recorded = quant::evaluate_and_record(o.eval, store.get());
  if (!recorded) {
    std::fprintf(stderr, "\niwb eval: %s\n", recorded.error_message().c_str());
    return 1;
  }
  if (!recorded->recording) {
    std::fprintf(stderr, "iwb eval: recording the run failed: %s\n", recorded->recording.message().c_str());
  }
  const quant::EvalResult& result = recorded->result;
  if (o.is_json) print_json(result, o, recorded->run_id);
  else print_text(result, o);
  return 0;
}

}  // namespace iwb::cli
