// The shared option rows (see option_groups.h).
#include "options/option_groups.h"

#include "iwb/engine/backend/device_selection.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/kernels/ggml_type.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <system_error>

namespace iwb::cli {

void add_model_option(OptionTable& table, std::string* path, std::string help, bool is_required) {
  table.add({.names = {"-m", "--model"},
             .value_name = "FILE",
             .help = std::move(help),
             .destination = path,
             .default_text = "",
             .is_required = is_required,
             .missing_message = "no model given (-m MODEL.gguf)"});
}

void add_prompt_options(OptionTable& table, PromptOptions* prompt, std::string text_help) {
  table.add(
      {.names = {"-p", "--prompt"}, .value_name = "TEXT", .help = std::move(text_help), .destination = &prompt->text});
  table.add({.names = {"-f", "--file"},
             .value_name = "FILE",
             .help = "read it from a file instead (bytes as they are)",
             .destination = &prompt->file});
}

void add_context_option(OptionTable& table, int64_t* context, std::string help, int64_t min,
                        std::optional<std::string> default_text) {
  table.add({.names = {"-c", "--ctx-size", "--ctx", "--context"},
             .value_name = "N",
             .help = std::move(help),
             .destination = context,
             .min = static_cast<double>(min),
             .default_text = std::move(default_text)});
}

void add_batch_size_option(OptionTable& table, int64_t* tokens, std::string help) {
  table.add(
      {.names = {"-b", "--batch-size"}, .value_name = "N", .help = std::move(help), .destination = tokens, .min = 1});
}

void add_threads_option(OptionTable& table, int* threads) {
  table.add({.names = {"-t", "--threads"},
             .value_name = "N",
             .help = "CPU threads",
             .destination = threads,
             .min = 1,
             .max = 1024,
             .default_text = "all cores"});
}

void add_state_checkpoints_option(OptionTable& table, int32_t* max_checkpoints, int64_t* min_step) {
  table.add({.names = {"-ctxcp", "--ctx-checkpoints"},
             .value_name = "N",
             .help = "recurrent models (Qwen 3.5): states kept at prompts' and replies' last block\n"
                     "boundaries, so prefix caching resumes a chat's next turn there; at most N (0: every\n"
                     "prompt from its start)",
             .destination = max_checkpoints,
             .min = 0,
             .max = 4096});
  table.add({.names = {"-cms", "--checkpoint-min-step"},
             .value_name = "N",
             .help = "recurrent models: within long prompts also a state every N tokens, so a prompt that\n"
                     "shares only a long one's beginning resumes part way (0: only at the ends)",
             .destination = min_step,
             .min = 0});
}

KvCacheTypes KvCacheOptions::types() const {
  Result<KvCacheTypes> types = parse_kv_cache_types(k + "/" + v);
  if (!types) return KvCacheTypes();
  types->calculate_scales = calculate_kv_scales && types->has_fp8();
  return *types;
}

std::string KvCacheOptions::error() const {
  if (calculate_kv_scales && !types().has_fp8()) {
    return "--calculate-kv-scales scales an fp8_e4m3 cache (-ctk fp8_e4m3 and/or -ctv fp8_e4m3), not " +
           kv_cache_types_name(types());
  }
  return "";
}

void add_kv_cache_options(OptionTable& table, KvCacheOptions* cache) {
  const std::vector<std::string> choices = {"f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "fp8_e4m3"};
  table.add({.names = {"-ctk", "--cache-type-k"},
             .value_name = "TYPE",
             .help = "KV cache type of the keys: f16, q8_0, q5_1, q5_0, q4_1, q4_0, fp8_e4m3",
             .destination = &cache->k,
             .choices = choices});
  table.add({.names = {"-ctv", "--cache-type-v"},
             .value_name = "TYPE",
             .help = "KV cache type of the values (the same choices)",
             .destination = &cache->v,
             .choices = choices});
  table.add({.names = {"--kv-type"},
             .value_name = "TYPE",
             .help = "KV cache type of keys and values (both -ctk and -ctv)",
             .destination = CustomSetter([cache](std::string_view, std::string_view value) -> std::string {
               Result<GgmlType> type = parse_kv_cache_type(value);
               if (!type) return type.error_message();
               cache->k = cache->v = kv_cache_types_name(*type);
               return "";
             }),
             .default_text = "f16"});
  table.add({.names = {"--calculate-kv-scales"},
             .help = "fp8_e4m3 cache: per-layer K and V scales from the first batch\n"
                     "(max |x| / 200 for keys, / 100 for values, as vLLM), not 1",
             .destination = &cache->calculate_kv_scales});
}

void add_device_options(OptionTable& table, DeviceOptions* device) {
  table.add({.names = {"--device", "-dev"},
             .value_name = "DEV",
             .help = "where the model runs: auto (a CUDA GPU when one works, else the CPU),\n"
                     "cpu, cuda or cuda:N",
             .destination = CustomSetter([device](std::string_view, std::string_view value) -> std::string {
               Result<DeviceRequest> request = parse_device_request(value);
               if (!request) return request.error_message();
               device->device = std::string(value);
               return {};
             }),
             .default_text = device->device});
  table.add({.names = {"-ngl", "--gpu-layers", "--n-gpu-layers"},
             .value_name = "N",
             .help = "layers on the GPU, as llama.cpp: 0 runs on the CPU; all (or at\n"
                     "least the model's layers) the whole model on the GPU --device\n"
                     "picks; a part is refused: the engine runs a model on one device",
             .destination = CustomSetter([device](std::string_view option, std::string_view value) -> std::string {
               if (value == "auto") {
                 device->gpu_layers = kAutoGpuLayers;
                 return {};
               }
               if (value == "all") {
                 device->gpu_layers = kAllGpuLayers;
                 return {};
               }
               int32_t n = 0;
               const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
               if (ec != std::errc() || ptr != value.data() + value.size() || value.empty() || n < 0) {
                 return std::string(option) + " expects a number of layers >= 0, auto or all, got '" +
                        std::string(value) + "'";
               }
               device->gpu_layers = n;
               return {};
             }),
             .default_text = "auto"});
  static const std::vector<std::string> kLoadModes = {"auto", "mmap", "mlock", "none"};
  table.add({.names = {"-lm", "--load-mode"},
             .value_name = "MODE",
             .help = "how the weights come into memory, as llama.cpp's: mmap maps the file;\n"
                     "mlock maps it and locks it in memory (never paged out);\n"
                     "none reads it into memory (2 MiB pages: faster CPU decode, a slower\n"
                     "load); auto reads on the CPU when the file takes at most half the\n"
                     "available memory and the kernel offers huge pages, else maps",
             .destination = &device->load_mode,
             .choices = kLoadModes});
}

Result<std::string> resolve_device(const DeviceOptions& o, const std::string& model_path) {
  if (o.gpu_layers == kAutoGpuLayers) return o.device;
  const std::string ngl = o.gpu_layers == kAllGpuLayers ? "all" : std::to_string(o.gpu_layers);
  const bool is_cpu = o.device == "cpu";
  if (o.gpu_layers == 0) {
    if (is_cpu || o.device == "auto") return std::string("cpu");
    return make_error(ErrorCode::InvalidArgument,
                      "-ngl 0 keeps the model on the CPU, but --device asks for " + o.device);
  }
  if (is_cpu)
    return make_error(ErrorCode::InvalidArgument, "-ngl " + ngl + " asks for the GPU, but --device asks for the CPU");
  if (o.gpu_layers > 0) {
    // A file that does not open is left to the load, which says why.
    auto file = gguf::GgufFile::open(model_path);
    if (!file) return o.device;
    auto summary = summarize_model(**file);
    if (!summary) return o.device;
    const int64_t num_layers = summary->hparams.trunk_layers();
    if (o.gpu_layers < num_layers) {
      return make_error(
          ErrorCode::InvalidArgument,
          "-ngl " + ngl + " asks for " + ngl + " of the model's " + std::to_string(num_layers) +
              " layers on the GPU; the engine runs a whole model on one device: use -ngl 0 (CPU) or -ngl all");
    }
  }
  return o.device;
}

SamplingParams SamplingOptions::to_params(uint64_t random_seed) const {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = repeat_penalty;
  p.penalty_last_n = repeat_last_n;
  p.seed = seed == kRandomSeed ? random_seed : static_cast<uint64_t>(seed);
  p.logit_bias = logit_bias;
  return p;
}

namespace {

// llama.cpp's -l spelling: TOKEN_ID, then + or -, then the bias ("15043+1", "2-inf").
std::string parse_logit_bias(std::string_view value, std::vector<std::pair<int32_t, float>>* out) {
  const std::string bad =
      "--logit-bias takes TOKEN_ID(+/-)BIAS, such as 15043+1 or 15043-inf, not '" + std::string(value) + "'";
  const size_t sign = value.find_first_of("+-");
  if (sign == 0 || sign == std::string_view::npos) return bad;
  const std::string id(value.substr(0, sign));
  const std::string bias(value.substr(sign + 1));
  if (id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos || bias.empty()) return bad;
  float amount = 0;
  if (bias == "inf") {
    amount = INFINITY;
  } else {
    char* end = nullptr;
    amount = std::strtof(bias.c_str(), &end);
    if (end != bias.c_str() + bias.size() || !std::isfinite(amount) || bias.find_first_of("+-") != std::string::npos)
      return bad;
  }
  if (value[sign] == '+' && !std::isfinite(amount))
    return "--logit-bias: +inf would force one token forever; give a number";
  out->emplace_back(std::stoi(id), value[sign] == '-' ? -amount : amount);
  return {};
}

}  // namespace

void add_sampling_options(OptionTable& table, SamplingOptions* s) {
  table.add({.names = {"-n", "--n-predict", "--predict"},
             .value_name = "N",
             .help = "tokens to generate at most; -1: until the end of generation or a\n"
                     "full context",
             .destination = &s->n_predict,
             .min = -1});
  table.add({.names = {"--temp", "--temperature"},
             .value_name = "T",
             .help = "temperature; 0: greedy (always the most likely token)",
             .destination = &s->temperature,
             .min = 0});
  table.add({.names = {"--top-k"},
             .value_name = "K",
             .help = "keep the K most likely tokens; 0: off",
             .destination = &s->top_k,
             .min = 0});
  table.add({.names = {"--top-p"},
             .value_name = "P",
             .help = "nucleus sampling: keep the most likely tokens up to P together; 1: off",
             .destination = &s->top_p,
             .min = 0,
             .max = 1});
  table.add({.names = {"--min-p"},
             .value_name = "P",
             .help = "drop tokens less likely than P x the most likely one; 0: off",
             .destination = &s->min_p,
             .min = 0,
             .max = 1});
  table.add({.names = {"--repeat-penalty"},
             .value_name = "R",
             .help = "penalty for tokens among the last --repeat-last-n; 1: off",
             .destination = &s->repeat_penalty,
             .min = 0,
             .is_min_exclusive = true});
  table.add({.names = {"--repeat-last-n"},
             .value_name = "N",
             .help = "how many recent tokens the repeat penalty looks at; 0: off",
             .destination = &s->repeat_last_n,
             .min = 0});
  table.add({.names = {"-s", "--seed"},
             .value_name = "SEED",
             .help = "random seed (the same seed, the same output); -1: a new one each run",
             .destination = &s->seed,
             .min = -1});
  table.add({.names = {"-l", "--logit-bias"},
             .value_name = "TOKEN_ID(+/-)BIAS",
             .help = "add BIAS to a token's logit, e.g. 15043+1 or 15043-1; 15043-inf bans\n"
                     "the token; repeat for more tokens",
             .destination = CustomSetter(
                 [s](std::string_view, std::string_view value) { return parse_logit_bias(value, &s->logit_bias); }),
             .default_text = "none"});
}

void add_speculation_options(OptionTable& table, spec::SpeculativeConfig* config) {
  table.add({.names = {"--spec", "--spec-type"},
             .value_name = "KIND",
             .help = "speculative decoding: draft (a draft model), lookup (prompt lookup),\n"
                     "self (the target requantized on load), mtp (the model's own\n"
                     "multi-token-prediction layer, llama.cpp's draft-mtp), none",
             .destination = CustomSetter([config](std::string_view, std::string_view value) -> std::string {
               Result<spec::DrafterKind> kind = spec::parse_drafter_kind(value);
               if (!kind) return kind.error_message();
               config->kind = *kind;
               return {};
             }),
             .default_text = "none"});
  table.add({.names = {"-md", "--model-draft", "--spec-draft-model", "--draft-model"},
             .value_name = "FILE",
             .help = "the draft model for --spec draft (same vocabulary as the target); for\n"
                     "--spec mtp, the MTP head's own file (llama.cpp's convert --mtp: mtp-*.gguf)",
             .destination = &config->draft_model_path});
  table.add({.names = {"--self-type"},
             .value_name = "TYPE",
             .help = "what --spec self requantizes to (e.g. Q4_0, Q2_K, Q3_K)",
             .destination = CustomSetter([config](std::string_view, std::string_view value) -> std::string {
               const std::optional<GgmlType> type = ggml_type_from_name(value);
               if (!type) return "unknown tensor type '" + std::string(value) + "'";
               config->self_draft_type = *type;
               return {};
             }),
             .default_text = std::string(ggml_type_name(config->self_draft_type))});
  table.add({.names = {"--lookup-ngram"},
             .value_name = "N",
             .help = "longest n-gram prompt lookup searches for",
             .destination = &config->lookup_max_ngram,
             .min = 1,
             .max = 64});
  table.add({.names = {"--spec-draft-p-min", "--draft-p-min"},
             .value_name = "P",
             .help = "a model drafter's draft ends before a guess whose probability among its 10\n"
                     "most likely tokens is below P (llama.cpp's); 0: off",
             .destination = &config->draft_min_probability,
             .default_text = "0"});
  table.add({.names = {"--spec-adaptive"},
             .help = "let K follow the measured acceptance (at most the draft length)",
             .destination = &config->is_adaptive});
}

void add_draft_max_option(OptionTable& table, int32_t* num_draft_tokens) {
  table.add({.names = {"--draft-max", "--spec-draft-n-max", "--draft", "--draft-n"},
             .value_name = "K",
             .help = "draft tokens per step",
             .destination = num_draft_tokens,
             .min = 1,
             .max = spec::kMaxDraftTokens});
}

void add_json_option(OptionTable& table, bool* is_json, std::string help) {
  table.add({.names = {"--json"}, .help = std::move(help), .destination = is_json});
}

void add_output_file_option(OptionTable& table, std::string* path, std::string help) {
  table.add({.names = {"-o", "--output"},
             .value_name = "FILE",
             .help = std::move(help),
             .destination = path,
             .is_required = true});
}

void add_results_store_options(OptionTable& table, bool* is_store_skipped, std::string* db, std::string what) {
  table.add({.names = {"--no-store"}, .help = "do not record " + what, .destination = is_store_skipped});
  table.add({.names = {"--db"}, .value_name = "PATH", .help = "results store", .destination = db});
}

}  // namespace iwb::cli
