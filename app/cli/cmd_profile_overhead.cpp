// `iwb profile-overhead -m MODEL [-n N] [-r ROUNDS] [-p PROMPT] [-t THREADS]`: what the kernel
// profiler costs. Within each generation, profiling alternates step by step (it takes effect
// at the next step), so both modes see the same context lengths and the same load on a shared
// machine; prefills alternate by round. Prints median and trimmed-mean step times per mode,
// the overhead, and how much of the step time the records account for.
#include "commands.h"
#include "device_cli.h"

#include "iwb/engine/runtime/engine.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <random>
#include <string>
#include <system_error>
#include <vector>

namespace iwb::cli {
namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: iwb profile-overhead -m MODEL.gguf [-n N] [-r ROUNDS] [-p PROMPT] [-t THREADS]\n"
               "  -m, --model FILE   GGUF model\n"
               "  -n N               tokens generated per run (default 64)\n"
               "  -r ROUNDS          generations, profiling alternating step by step (default 10)\n"
               "  -p PROMPT          random prompt tokens per run (default 32)\n"
               "  -t, --threads N    CPU threads (default: all cores)\n"
               "  --device DEV       auto (a CUDA GPU when one works, else the CPU), cpu or cuda:N\n");
}

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

template <typename T>
bool parse_number(const char* text, T* out) {
  const char* end = text + std::char_traits<char>::length(text);
  const auto [ptr, ec] = std::from_chars(text, end, *out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

int run_profile_overhead(int argc, char** argv) {
  std::string model;
  int32_t num_tokens = 64;
  int rounds = 10;
  int64_t num_prompt = 32;
  int threads = 0;
  std::string device = "auto";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    bool ok = has_value;
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return 0;
    } else if ((a == "-m" || a == "--model") && has_value) {
      model = argv[++i];
    } else if (a == "-n" && has_value) {
      ok = parse_number(argv[++i], &num_tokens) && num_tokens >= 1;
    } else if (a == "-r" && has_value) {
      ok = parse_number(argv[++i], &rounds) && rounds >= 1;
    } else if (a == "-p" && has_value) {
      ok = parse_number(argv[++i], &num_prompt) && num_prompt >= 1;
    } else if ((a == "-t" || a == "--threads") && has_value) {
      ok = parse_number(argv[++i], &threads) && threads >= 1;
    } else if (const int taken = parse_device_option("profile-overhead", argc, argv, &i, &device); taken != 0) {
      if (taken < 0) return 2;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "iwb profile-overhead: bad or incomplete option '%s'\n\n", a.c_str());
      print_usage(stderr);
      return 2;
    }
  }
  if (model.empty()) {
    std::fprintf(stderr, "iwb profile-overhead: no model given (-m MODEL.gguf)\n\n");
    print_usage(stderr);
    return 2;
  }

  EngineOptions options;
  options.num_threads = threads;
  options.device = device;
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
