// `iwb spec-bench -m TARGET --spec KIND [-md F] --draft-n 1,2,4,8 [-p TEXT | -f FILE]`:
// speculative decoding against plain decoding on the same greedy request. The drafter is
// built once; each K is a request that asks for it (K = 0 is the baseline), measured before
// and after the K runs so a drifting machine shows. Prints generation tokens/s, the speedup,
// acceptance per position, mean accepted length, and whether the output equals the baseline's.
#include "commands.h"
#include "device_cli.h"
#include "json_writer.h"
#include "options/option_groups.h"
#include "spec_cli.h"

#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace iwb::cli {
namespace {

struct Options {
  std::string model, prompt = "Explain in three sentences what a hash map is.", prompt_file;
  bool is_raw = false;
  bool is_json = false;
  bool is_batch_invariant = false;
  std::vector<int32_t> draft_lengths = {1, 2, 4, 8};
  int32_t n_predict = 128;
  int threads = 0;
  DeviceOptions device;
  spec::SpeculativeConfig speculation;
};

int parse(int argc, char** argv, Options* o) {
  OptionTable t("spec-bench", "-m TARGET.gguf --spec KIND [options]",
                "Speculative decoding against plain decoding on the same greedy request.");
  t.begin_group("model and prompt");
  add_model_option(t, &o->model, "the target model");
  t.add({.names = {"-p", "--prompt"},
         .value_name = "TEXT",
         .help = "the prompt",
         .destination = &o->prompt,
         .default_text = "a short chat question"});
  t.add({.names = {"-f", "--file", "--prompt-file"},
         .value_name = "FILE",
         .help = "read the prompt from a file",
         .destination = &o->prompt_file});
  t.add({.names = {"--raw"},
         .help = "use the prompt as it is (default: a user message in the chat template)",
         .destination = &o->is_raw});
  t.add({.names = {"-n", "--n-predict"},
         .value_name = "N",
         .help = "tokens to generate per run",
         .destination = &o->n_predict,
         .min = 2});
  t.begin_group("threads and device");
  add_threads_option(t, &o->threads);
  add_device_options(t, &o->device);
  t.add({.names = {"--batch-invariant"},
         .help = "exact, batch-invariant matmuls (slower): speculative greedy output is\n"
                 "then bit for bit the plain one",
         .destination = &o->is_batch_invariant});
  t.begin_group("speculation");
  add_speculation_options(t, &o->speculation);
  t.add({.names = {"--draft-n", "--draft-max"},
         .value_name = "LIST",
         .help = "draft lengths to measure, e.g. 1,2,4,8 (one length: run's --draft-max)",
         .destination = &o->draft_lengths,
         .min = 1,
         .max = spec::kMaxDraftTokens});
  t.begin_group("output");
  add_json_option(t, &o->is_json);
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  if (!o->speculation.is_enabled()) return report_usage_error(t, "no drafter given (--spec draft|lookup|self|mtp)");
  Result<std::string> device = resolve_device(o->device, o->model);
  if (!device) return report_usage_error(t, device.error_message());
  o->device.device = *device;
  return -1;
}

struct Measurement {
  int32_t num_draft_tokens = 0;  // 0: plain decoding
  int32_t num_generated = 0;
  double generation_seconds = 0;
  double tokens_per_second = 0;
  double plain_step_seconds = 0;  // baseline runs: seconds per decode step
  spec::SpeculationStats speculation;
  std::vector<int32_t> tokens;
};

Result<Measurement> measure(Engine& engine, const GenerationRequest& base, int32_t k) {
  GenerationRequest r = base;
  r.num_draft_tokens = k;
  Result<RequestId> id = engine.add_request(std::move(r));
  if (!id) return id.status();
  Measurement m;
  m.num_draft_tokens = k;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> step = engine.step();
    if (!step) return step.status();
    if (!step->stats.speculation_error.empty())
      return make_error(ErrorCode::InvalidArgument, step->stats.speculation_error);
    for (const TokenEvent& e : step->tokens) m.tokens.push_back(e.token);
    for (const RequestFinished& f : step->finished) {
      if (f.reason == FinishReason::Error) return make_error(ErrorCode::InvalidArgument, f.error);
      m.num_generated = f.num_generated_tokens;
      m.generation_seconds = f.generation_seconds;
      m.speculation = f.speculation;
    }
  }
  // The first token comes from the prompt's pass; generation is timed from it to the last.
  if (m.generation_seconds > 0) m.tokens_per_second = (m.num_generated - 1) / m.generation_seconds;
  if (k == 0 && m.num_generated > 1) m.plain_step_seconds = m.generation_seconds / (m.num_generated - 1);
  return m;
}

void print_table(const Options& o, const Engine& engine, double baseline_rate, const Measurement& before,
                 const Measurement& after, const std::vector<Measurement>& runs) {
  std::printf("target %s (%s), drafter %s, %d threads, %d tokens per run, greedy\n", engine.model().name.c_str(),
              engine.model().file_type.c_str(), spec::drafter_kind_name(o.speculation.kind), engine.num_threads(),
              o.n_predict);
  std::printf("%s\n", device_line(engine).c_str());
  std::printf("plain decoding: %.2f tokens/s (%.2f before, %.2f after the speculative runs)\n", baseline_rate,
              before.tokens_per_second, after.tokens_per_second);
  std::printf("%3s %9s %8s %7s %8s %7s %9s %9s %5s  %s\n", "K", "tok/s", "speedup", "accept", "mean acc", "tok/step",
              "draft ms", "verify ms", "same", "acceptance per position");
  for (const Measurement& m : runs) {
    const spec::SpeculationStats& s = m.speculation;
    const double steps = std::max<double>(1.0, static_cast<double>(s.num_verify_steps));
    std::printf("%3d %9.2f %7.2fx %6.1f%% %8.2f %7.2f %9.1f %9.1f %5s  %s\n", m.num_draft_tokens, m.tokens_per_second,
                baseline_rate > 0 ? m.tokens_per_second / baseline_rate : 0.0, 100.0 * s.acceptance_rate(),
                s.mean_accepted_length(), s.tokens_per_step(), 1e3 * s.draft_seconds / steps,
                1e3 * s.verify_seconds / steps, m.tokens == before.tokens ? "yes" : "NO",
                position_acceptance_text(s).c_str());
  }
}

void print_json(const Options& o, const Engine& engine, double baseline_rate, const Measurement& before,
                const Measurement& after, const std::vector<Measurement>& runs) {
  JsonWriter j;
  j.begin_object();
  j.field("model", engine.model().name).field("file_type", engine.model().file_type);
  j.field("drafter", spec::drafter_kind_name(o.speculation.kind)).field("draft_model", o.speculation.draft_model_path);
  j.field("threads", engine.num_threads()).field("tokens_per_run", o.n_predict);
  j.field("device", engine.model().device).field("device_description", engine.model().device_description);
  j.field("baseline_tokens_per_second", baseline_rate);
  j.field("baseline_before", before.tokens_per_second).field("baseline_after", after.tokens_per_second);
  j.key("runs").begin_array();
  for (const Measurement& m : runs) {
    const spec::SpeculationStats& s = m.speculation;
    j.begin_object();
    j.field("draft_tokens", m.num_draft_tokens).field("tokens_per_second", m.tokens_per_second);
    j.field("speedup", baseline_rate > 0 ? m.tokens_per_second / baseline_rate : 0.0);
    j.field("acceptance_rate", s.acceptance_rate()).field("mean_accepted_length", s.mean_accepted_length());
    j.field("tokens_per_step", s.tokens_per_step()).field("verify_steps", s.num_verify_steps);
    j.field("draft_seconds", s.draft_seconds).field("verify_seconds", s.verify_seconds);
    j.field("output_matches_baseline", m.tokens == before.tokens);
    j.key("acceptance_per_position").begin_array();
    for (size_t p = 0; p < s.drafted_per_position.size(); ++p) j.value(s.position_acceptance(p));
    j.end_array();
    j.key("accepted_length_histogram").begin_array();
    for (const int64_t n : s.accepted_length_histogram) j.value(n);
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

int run_spec_bench(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;
  if (!o.prompt_file.empty()) {
    std::ifstream in(o.prompt_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "iwb spec-bench: cannot read '%s'\n", o.prompt_file.c_str());
      return 1;
    }
    o.prompt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  int32_t max_k = 1;
  for (const int32_t k : o.draft_lengths) max_k = std::max(max_k, k);
  o.speculation.num_draft_tokens = max_k;
  if (Status s = spec::validate(o.speculation); !s) {
    std::fprintf(stderr, "iwb spec-bench: %s\n", s.message().c_str());
    return 2;
  }
  EngineOptions options;
  options.num_threads = o.threads;
  options.device = o.device.device;
  options.load_mode = o.device.load_mode;
  options.context_length = 4096;
  options.is_batch_invariant = o.is_batch_invariant;
  Result<std::unique_ptr<Engine>> loaded = Engine::load(o.model, options);
  if (!loaded) {
    std::fprintf(stderr, "iwb spec-bench: %s\n", loaded.error_message().c_str());
    return 1;
  }
  Engine& engine = **loaded;
  const auto start = std::chrono::steady_clock::now();
  if (Status s = engine.set_speculation(o.speculation); !s) {
    std::fprintf(stderr, "iwb spec-bench: %s\n", s.message().c_str());
    return 1;
  }
  if (!o.is_json) {
    std::fprintf(stderr, "drafter ready in %.1f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  GenerationRequest request;
  request.sampling.temperature = 0.0f;  // greedy: the speculative output must equal the plain one
  request.max_new_tokens = o.n_predict;
  request.stop_at_end_of_generation = false;  // every run generates the same number of tokens
  if (o.is_raw) {
    tokenizer::EncodeOptions encode;
    encode.parse_special = true;
    request.prompt_tokens = engine.tokenizer().encode(o.prompt, encode);
  } else {
    Result<ChatPrompt> prompt = build_chat_prompt(engine.tokenizer(), engine.chat_template(), {{"user", o.prompt}}, {});
    if (!prompt) {
      std::fprintf(stderr, "iwb spec-bench: %s\n", prompt.error_message().c_str());
      return 1;
    }
    request.prompt_tokens = std::move(prompt->tokens);
  }
  auto run = [&](int32_t k) -> Result<Measurement> {
    if (!o.is_json) std::fprintf(stderr, "  %s...\n", k == 0 ? "plain decoding" : ("K = " + std::to_string(k)).c_str());
    return measure(engine, request, k);
  };
  // Warm-up: pages, caches, the prompt's prefix blocks.
  GenerationRequest warm = request;
  warm.max_new_tokens = 4;
  if (Result<Measurement> w = measure(engine, warm, 0); !w) {
    std::fprintf(stderr, "iwb spec-bench: %s\n", w.error_message().c_str());
    return 1;
  }
  Result<Measurement> before = run(0);
  if (!before) {
    std::fprintf(stderr, "iwb spec-bench: %s\n", before.error_message().c_str());
    return 1;
  }
  std::vector<Measurement> runs;
  for (const int32_t k : o.draft_lengths) {
    Result<Measurement> m = run(k);
    if (!m) {
      std::fprintf(stderr, "iwb spec-bench: %s\n", m.error_message().c_str());
      return 1;
    }
    runs.push_back(std::move(*m));
  }
  Result<Measurement> after = run(0);
  if (!after) {
    std::fprintf(stderr, "iwb spec-bench: %s\n", after.error_message().c_str());
    return 1;
  }
  const double baseline = 0.5 * (before->tokens_per_second + after->tokens_per_second);
  if (o.is_json) {
    print_json(o, engine, baseline, *before, *after, runs);
  } else {
    print_table(o, engine, baseline, *before, *after, runs);
    if (!runs.empty()) {
      const Measurement& best = *std::max_element(
          runs.begin(), runs.end(),
          [](const Measurement& a, const Measurement& b) { return a.tokens_per_second < b.tokens_per_second; });
      std::printf("best K = %d: %.2fx; ", best.num_draft_tokens,
                  baseline > 0 ? best.tokens_per_second / baseline : 0.0);
      const double plain_step = 0.5 * (before->plain_step_seconds + after->plain_step_seconds);
      const spec::DraftLengthSuggestion s = spec::suggest_draft_length(
          best.speculation.acceptance_rate(), spec::measured_costs(best.speculation, plain_step), 16);
      std::printf("the measured acceptance (%.2f) and costs suggest K = %d\n", best.speculation.acceptance_rate(),
                  s.num_draft_tokens);
    }
  }
  return 0;
}

}  // namespace iwb::cli
