// `iwb profile-overhead -m MODEL [-n N] [-r ROUNDS] [-p PROMPT] [-t THREADS]`: what the kernel
// profiler costs. Within each generation, profiling alternates step by step (it takes effect
// at the next step), so both modes see the same context lengths and the same load on a shared
// machine; prefills alternate by round. Prints median and trimmed-mean step times per mode,
// the overhead, and how much of the step time the records account for.
#include "commands.h"
#include "device_cli.h"
#include "options/option_groups.h"

#include "iwb/engine/runtime/engine.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace iwb::cli {
namespace {

// Step times of each mode: [0] profiling off, [1] on.
struct StepTimes {
  std::vector<double> decode[2], prefill[2];
  int64_t num_records = 0;       // over the profiled decode steps
  double kernel_seconds = 0;     // their recorded kernels
  double profiled_seconds = 0;   // their whole steps
  int64_t num_dropped = 0;
};

// One generation of num_tokens + 1 tokens (the first from the prefill); profiling of the
// prefill is `is_prefill_profiled`, then alternates every decode step.
Status generate(Engine& engine, std::vector<int32_t> prompt, int32_t num_tokens, bool is_prefill_profiled,
                StepTimes* times) {
  GenerationRequest request;
  request.prompt_tokens = std::move(prompt);
  request.sampling.temperature = 0.0f;
  request.sampling.repeat_penalty = 1.0f;
  request.max_new_tokens = num_tokens + 1;
  request.stop_at_end_of_generation = false;
  Result<RequestId> id = engine.add_request(std::move(request));
  if (!id) return id.status();
  bool is_on = is_prefill_profiled;
  while (engine.has_unfinished_requests()) {
    engine.set_profiling(is_on);
    Result<StepResult> step = engine.step();
    if (!step) return step.status();
    const bool is_recorded = !step->profile.kernels.empty();
    if (is_recorded != is_on) return make_error(ErrorCode::InvalidArgument, "profiling did not follow set_profiling()");
    if (step->stats.num_prompt_tokens > 0) {
      times->prefill[is_on].push_back(step->stats.seconds);
    } else if (step->stats.num_decode_tokens > 0) {
      times->decode[is_on].push_back(step->stats.seconds);
      if (is_on) {
        times->num_records += static_cast<int64_t>(step->profile.kernels.size());
        times->kernel_seconds += step->profile.kernel_seconds();
        times->profiled_seconds += step->stats.seconds;
      }
    }
    times->num_dropped += step->profile.num_dropped;
    for (const RequestFinished& f : step->finished) {
      if (f.reason == FinishReason::Error) return make_error(ErrorCode::InvalidArgument, f.error);
    }
    is_on = !is_on;
  }
  engine.set_profiling(false);
  return {};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Mean of the middle 80%: drops the steps a busy machine preempted.
double trimmed_mean(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t cut = v.size() / 10;
  double sum = 0;
  size_t n = 0;
  for (size_t i = cut; i + cut < v.size(); ++i, ++n) sum += v[i];
  return n ? sum / static_cast<double>(n) : 0;
}

}  // namespace

int run_profile_overhead(int argc, char** argv) {
  std::string model;
  int32_t num_tokens = 64;
  int32_t rounds = 10;
  int64_t num_prompt = 32;
  int threads = 0;
  DeviceOptions device;
  OptionTable t("profile-overhead", "-m MODEL.gguf [-n N] [-r ROUNDS] [-p N] [-t THREADS]",
                "What the kernel profiler costs: step times with profiling off and on, alternating.");
  add_model_option(t, &model);
  t.add({.names = {"-n", "--n-gen"}, .value_name = "N", .help = "tokens generated per run", .destination = &num_tokens, .min = 1});
  t.add({.names = {"-r", "--rounds"},
         .value_name = "N",
         .help = "generations, profiling alternating step by step",
         .destination = &rounds,
         .min = 1});
  t.add({.names = {"-p", "--n-prompt"}, .value_name = "N", .help = "random prompt tokens per run", .destination = &num_prompt, .min = 1});
  add_threads_option(t, &threads);
  add_device_options(t, &device);
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  Result<std::string> device_name = resolve_device(device, model);
  if (!device_name) return report_usage_error(t, device_name.error_message());

  EngineOptions options;
  options.num_threads = threads;
  options.device = *device_name;
  options.load_mode = device.load_mode;
  options.context_length = num_prompt + num_tokens + 1;
  auto loaded = Engine::load(model, options);
  if (!loaded) {
    std::fprintf(stderr, "iwb profile-overhead: %s\n", loaded.error_message().c_str());
    return 1;
  }
  Engine& engine = **loaded;
  std::printf("%s (%s, %s), %d threads: %d generations of %lld prompt + %d tokens, profiling alternating\n",
              engine.model().name.c_str(), engine.model().architecture.c_str(), engine.model().file_type.c_str(),
              engine.num_threads(), rounds, static_cast<long long>(num_prompt), num_tokens);
  std::printf("%s\n", device_line(engine).c_str());

  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(engine.config().vocab_size - 1));
  auto prompt = [&] {
    std::vector<int32_t> p(static_cast<size_t>(num_prompt));
    for (int32_t& t : p) t = pick(rng);
    return p;
  };
  StepTimes warmup, times;
  Status s = generate(engine, prompt(), std::min(num_tokens, 4), false, &warmup);
  for (int round = 0; s && round < rounds; ++round) s = generate(engine, prompt(), num_tokens, round % 2 == 1, &times);
  if (!s) {
    std::fprintf(stderr, "iwb profile-overhead: %s\n", s.message().c_str());
    return 1;
  }

  auto report = [](const char* what, double tokens_per_step, const std::vector<double>& off, const std::vector<double>& on) {
    if (off.empty() || on.empty()) return;
    const double off_median = median(off), on_median = median(on);
    const double off_trimmed = trimmed_mean(off), on_trimmed = trimmed_mean(on);
    std::printf("%-8s off %10.2f tokens/s   on %10.2f tokens/s   (median step %.4f ms vs %.4f ms: %+.2f%%; "
                "trimmed mean %+.2f%%; %zu + %zu steps)\n",
                what, tokens_per_step / off_median, tokens_per_step / on_median, off_median * 1e3, on_median * 1e3,
                (on_median / off_median - 1.0) * 100.0, (on_trimmed / off_trimmed - 1.0) * 100.0, off.size(), on.size());
  };
  report("decode", 1.0, times.decode[0], times.decode[1]);
  report("prefill", static_cast<double>(num_prompt), times.prefill[0], times.prefill[1]);
  const double steps = static_cast<double>(std::max<size_t>(1, times.decode[1].size()));
  std::printf("records  %.1f per decode step, %lld dropped; recorded kernels cover %.1f%% of profiled decode step time\n",
              static_cast<double>(times.num_records) / steps, static_cast<long long>(times.num_dropped),
              times.profiled_seconds > 0 ? 100.0 * times.kernel_seconds / times.profiled_seconds : 0.0);
  return 0;
}

}  // namespace iwb::cli
