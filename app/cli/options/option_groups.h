// The option rows several `iwb` commands share, spelled as llama.cpp spells them where it has
// the option (with llama.cpp's defaults for sampling), plus the older iwb spellings as aliases.
#pragma once

#include "options/option_table.h"

#include "iwb/engine/paged/kv_cache_types.h"
#include "iwb/engine/sampling/sampler.h"
#include "iwb/engine/spec/spec_config.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <optional>
#include <string>

namespace iwb::cli {

// model: -m, --model FILE. Required unless the command has another mode (bench --list).
void add_model_option(OptionTable& table, std::string* path, std::string help = "GGUF model", bool is_required = true);

// prompt: -p, --prompt TEXT and -f, --file FILE (the prompt read from a file, bytes as they are).
struct PromptOptions {
  std::optional<std::string> text;  // -p; "-p ''" is a prompt too
  std::string file;                 // -f
};
void add_prompt_options(OptionTable& table, PromptOptions* prompt, std::string text_help = "the prompt");

// context: -c, --ctx-size N (earlier iwb spellings --ctx and --context too). `min` and the
// default differ: a generation context (0: the model's) or an evaluation chunk.
void add_context_option(OptionTable& table, int64_t* context, std::string help, int64_t min,
                        std::optional<std::string> default_text = std::nullopt);

// -b, --batch-size N: tokens per forward step, decodes and prompt chunks together (llama.cpp's
// is the logical batch of a prompt; ours is the engine's per-step budget).
void add_batch_size_option(OptionTable& table, int64_t* tokens, std::string help);

// threads: -t, --threads N (>= 1; unset: every core). llama.cpp's -tb (threads for the prompt)
// has no counterpart: the engine uses one thread pool for every step.
void add_threads_option(OptionTable& table, int* threads);

// Recurrent models' prefix caching: -ctxcp / --ctx-checkpoints N and -cms /
// --checkpoint-min-step N as llama.cpp spells them (EngineOptions::max_state_checkpoints,
// checkpoint_min_step; llama.cpp's checkpoints are per slot, ours for the engine).
void add_state_checkpoints_option(OptionTable& table, int32_t* max_checkpoints, int64_t* min_step);

// KV cache: -ctk / --cache-type-k T and -ctv / --cache-type-v T as llama.cpp spells them
// (f16, q8_0, q5_1, q5_0, q4_1, q4_0; and fp8_e4m3, vLLM's), and the older --kv-type T for both.
// --calculate-kv-scales as vLLM spells it: an fp8_e4m3 side's per-layer scales from the first batch.
struct KvCacheOptions {
  std::string k = "f16";
  std::string v = "f16";
  bool calculate_kv_scales = false;
  KvCacheTypes types() const;  // the parsed names (the table only accepts valid ones)
  std::string error() const;   // what is wrong with the combination ("" when nothing)
};
void add_kv_cache_options(OptionTable& table, KvCacheOptions* cache);

// device: --device / -dev and -ngl / --gpu-layers / --n-gpu-layers.
struct DeviceOptions {
  std::string device = "auto";  // auto, cpu, cuda, cuda:N
  // llama.cpp's -ngl: kAutoGpuLayers (unset), kAllGpuLayers ("all"), or a count. The engine runs
  // a whole model on one device, so a count is 0 (the CPU) or at least the model's layers.
  int32_t gpu_layers = -1;
  std::string load_mode = "auto";  // llama.cpp's -lm: auto, mmap, none (EngineOptions::load_mode)
};
inline constexpr int32_t kAutoGpuLayers = -1;
inline constexpr int32_t kAllGpuLayers = -2;
void add_device_options(OptionTable& table, DeviceOptions* device);
// EngineOptions::device from --device and -ngl: "-ngl 0" is the CPU; "-ngl all" or a count
// covering the model's layers leaves the GPU choice to --device. An error (a usage error: exit
// 2) when they contradict each other or the count is a part of the layers in `model_path`.
Result<std::string> resolve_device(const DeviceOptions& options, const std::string& model_path);

// sampling: llama.cpp's options with llama.cpp's defaults (common_params_sampling), so
// `iwb run --temp 0` and `llama-cli --temp 0` pick the same tokens. The chat panel keeps its own.
struct SamplingOptions {
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;                        // 1: off
  int32_t repeat_last_n = 64;                         // 0: off
  int64_t seed = -1;                                  // -1: a random seed for each run
  int32_t n_predict = -1;                             // -1: until the end of generation or a full context
  std::vector<std::pair<int32_t, float>> logit_bias;  // -l TOKEN_ID(+/-)BIAS, repeatable

  // The engine's parameters; `random_seed` is used when seed is -1.
  SamplingParams to_params(uint64_t random_seed) const;
};
inline constexpr int64_t kRandomSeed = -1;
void add_sampling_options(OptionTable& table, SamplingOptions* sampling);

// speculation: --spec KIND (--spec-type), -md / --model-draft FILE, --self-type TYPE, --lookup-ngram N,
// --spec-adaptive. The draft length is the command's own (run: one K; spec-bench: a list).
void add_speculation_options(OptionTable& table, spec::SpeculativeConfig* config);
// --draft-max N (llama.cpp's older spelling; also --spec-draft-n-max, --draft, --draft-n).
void add_draft_max_option(OptionTable& table, int32_t* num_draft_tokens);

// output: --json, -o / --output FILE, and the results store (--no-store, --db PATH).
void add_json_option(OptionTable& table, bool* is_json, std::string help = "print the results as JSON");
void add_output_file_option(OptionTable& table, std::string* path, std::string help);
void add_results_store_options(OptionTable& table, bool* is_store_skipped, std::string* db, std::string what);

}  // namespace iwb::cli
