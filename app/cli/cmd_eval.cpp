// `iwb eval -m MODEL [--base BASE.gguf] [-f TEXT] [-c CTX] [--stride S] [--chunks N] [--json]`:
// perplexity (llama-perplexity's method), and against a base model KL divergence, top-1
// agreement and the right token's probability change; size and speed. Recorded as a run.
#include "commands.h"
#include "device_cli.h"
#include "json_writer.h"
#include "options/option_groups.h"
#include "recorded_run.h"

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/profile/bench.h"
#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/logits_cache.h"
#include "iwb/engine/quant/run_recorder.h"
#include "iwb/engine/store/results_store.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace iwb::cli {
namespace {

struct Options {
  quant::EvalOptions eval;
  std::string text_file;
  DeviceOptions device;
  KvCacheOptions kv_cache;
  bool is_cache_skipped = false;
  bool is_json = false;
  bool is_store_skipped = false;
  std::string db = ResultsStore::default_path();
};

int parse(int argc, char** argv, Options* o) {
  OptionTable t("eval", "-m MODEL.gguf [--base BASE.gguf] [-f TEXT] [-c CTX] [options]",
                "Perplexity, and against a base model KL divergence and top-1 agreement; size and speed.");
  t.begin_group("models and text");
  add_model_option(t, &o->eval.model_path, "model to measure");
  t.add({.names = {"--base"},
         .value_name = "FILE",
         .help = "unquantized model to compare with (KL divergence, top-1 agreement);\n"
                 "its distributions are computed once and cached on disk",
         .destination = &o->eval.base_path});
  t.add({.names = {"-f", "--file"},
         .value_name = "TEXT",
         .help = "evaluation text",
         .destination = &o->text_file,
         .default_text = "the built-in sample, about 1900 words"});
  t.add({.names = {"--no-cache"},
         .help = "recompute the base's distributions (and rewrite the cache)",
         .destination = &o->is_cache_skipped});
  t.begin_group("chunks");
  add_context_option(t, &o->eval.context, "context of each chunk (llama-perplexity's -c)", 8);
  t.add({.names = {"--stride"},
         .value_name = "S",
         .help = "0: llama-perplexity's chunks, scoring each chunk's second half;\n"
                 "S > 0: windows every S tokens scoring their last S (--ppl-stride)",
         .destination = &o->eval.stride,
         .min = 0});
  t.add({.names = {"--chunks"},
         .value_name = "N",
         .help = "at most N chunks; 0: all the text holds",
         .destination = &o->eval.num_chunks,
         .min = 0});
  t.add({.names = {"-n", "--n-gen"},
         .value_name = "N",
         .help = "generation speed test of N tokens; 0: skip",
         .destination = &o->eval.num_gen_tokens,
         .min = 0});
  t.begin_group("KV cache");
  add_kv_cache_options(t, &o->kv_cache);
  t.begin_group("threads and device");
  add_threads_option(t, &o->eval.num_threads);
  add_device_options(t, &o->device);
  t.begin_group("output");
  add_json_option(t, &o->is_json, "print the result as JSON");
  add_results_store_options(t, &o->is_store_skipped, &o->db, "the run");
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  if (const std::string e = o->kv_cache.error(); !e.empty()) return report_usage_error(t, e);
  o->eval.use_cache = !o->is_cache_skipped;
  o->eval.kv_cache_type = kv_cache_types_name(o->kv_cache.types());
  Result<std::string> device = resolve_device(o->device, o->eval.model_path);
  if (!device) return report_usage_error(t, device.error_message());
  o->eval.device = *device;
  o->eval.load_mode = o->device.load_mode;
  return -1;
}

void print_json(const quant::EvalResult& r, const Options& o, int64_t run_id) {
  JsonWriter j;
  j.begin_object().field("model", o.eval.model_path).field("base", o.eval.base_path).field("text", o.eval.text_name);
  j.field("context", o.eval.context).field("stride", o.eval.stride).field("text_tokens", r.num_text_tokens);
  j.field("device", r.device);
  j.field("kv_cache_type", o.eval.kv_cache_type)
      .field("chunks", r.num_chunks)
      .field("scored_tokens", r.num_scored)
      .field("perplexity", r.perplexity);
  j.field("perplexity_error", r.perplexity_error).field("mean_nll", r.mean_nll);
  if (r.has_base) {
    j.field("base_perplexity", r.base_perplexity).field("base_from_cache", r.was_base_cached);
    j.field("kl_mean", r.kl_mean).field("kl_median", r.kl_median).field("kl_p99", r.kl_p99).field("kl_max", r.kl_max);
    j.field("top1_agreement", r.top1_agreement)
        .field("delta_p_mean", r.delta_p_mean)
        .field("delta_p_rms", r.delta_p_rms);
    j.field("ln_ppl_ratio", r.ln_ppl_ratio).field("ln_ppl_ratio_error", r.ln_ppl_ratio_error);
    j.field("ppl_ratio", r.ppl_ratio).field("ppl_ratio_error", r.ppl_ratio_error);
  }
  // Per chunk: the mean negative log-likelihood of its scored tokens (and the base's), so two
  // runs, or a run and llama-perplexity's per-chunk output, can be compared chunk by chunk.
  j.key("chunk_mean_nll").begin_array();
  for (const double v : r.chunk_mean_nll) j.value(v);
  j.end_array();
  if (r.has_base) {
    j.key("base_chunk_mean_nll").begin_array();
    for (const double v : r.base_chunk_mean_nll) j.value(v);
    j.end_array();
  }
  j.field("file_type", r.file_type).field("file_bytes", r.file_bytes).field("memory_bytes", r.memory_bytes);
  j.field("kv_bytes_per_token", r.kv_bytes_per_token);
  j.field("num_parameters", r.num_parameters)
      .field("bits_per_weight",
             r.num_parameters ? 8.0 * static_cast<double>(r.file_bytes) / static_cast<double>(r.num_parameters) : 0.0);
  j.field("prompt_tokens_per_s", r.prompt_tokens_per_s).field("gen_tokens_per_s", r.gen_tokens_per_s);
  j.field("seconds", r.seconds).field("run_id", run_id).end_object();
  std::printf("%s\n", j.str().c_str());
}

void print_text(const quant::EvalResult& r, const Options& o) {
  std::printf("%s (%s, KV cache %s, %s per token, on %s): %s on disk, %s in memory\n", o.eval.model_path.c_str(),
              r.file_type.c_str(), o.eval.kv_cache_type.c_str(), format_bytes(r.kv_bytes_per_token).c_str(),
              r.device.c_str(), format_bytes(r.file_bytes).c_str(), format_bytes(r.memory_bytes).c_str());
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
    std::printf("    PPL(Q)/PPL(base): %.5f +/- %.5f (ln ratio %.6f +/- %.6f, token by token)\n", r.ppl_ratio,
                r.ppl_ratio_error, r.ln_ppl_ratio, r.ln_ppl_ratio_error);
    std::printf("    top-1 agreement: %.2f%%\n", 100.0 * r.top1_agreement);
    std::printf("    right token's probability change: mean %+.5f, RMS %.5f\n", r.delta_p_mean, r.delta_p_rms);
  }
  std::printf("  speed: prompt %.1f tokens/s (the chunks' prefill)", r.prompt_tokens_per_s);
  if (r.gen_tokens_per_s > 0)
    std::printf(", generation %.2f tokens/s (tg%lld)", r.gen_tokens_per_s,
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
  if (!o.is_store_skipped && !open_results_store("eval", o.db, &store)) return 1;
  Result<quant::RecordedEval> recorded = quant::evaluate_and_record(o.eval, store.get());
  if (!recorded) {
    std::fprintf(stderr, "\niwb eval: %s\n", recorded.error_message().c_str());
    return 1;
  }
  if (!recorded->recording) {
    std::fprintf(stderr, "iwb eval: recording the run failed: %s\n", recorded->recording.message().c_str());
  }
  const quant::EvalResult& result = recorded->result;
  if (o.is_json)
    print_json(result, o, recorded->run_id);
  else
    print_text(result, o);
  return 0;
}

}  // namespace iwb::cli
