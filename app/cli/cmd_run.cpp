// `iwb run -m MODEL (-p PROMPT | -f FILE) [options]`: generates text with the CPU engine,
// printing each piece as it is produced, then a timings line on stderr (and with --profile, where
// the time went, kernel kind by kernel kind).
#include "commands.h"
#include "device_cli.h"
#include "spec_cli.h"

#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/profile/profile_aggregate.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

namespace iwb::cli {
namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: iwb run -m MODEL.gguf (-p PROMPT | -f FILE) [options]\n"
               "  -m, --model FILE        GGUF model (llama, qwen2 or gemma3 architecture)\n"
               "  -p, --prompt TEXT       the prompt (a user message with --chat)\n"
               "  -f, --file FILE         read the prompt from a file\n"
               "  -n, --n-predict N       tokens to generate at most (default 256; -1: until the end)\n"
               "  -c, --ctx-size N        context length (default: the model's, at most 4096)\n"
               "  -t, --threads N         CPU threads (default: all cores)\n"
               "  --temp T                temperature (default 0.8; 0: greedy)\n"
               "  --top-k K               keep the K most likely tokens (default 40; 0: off)\n"
               "  --top-p P               nucleus sampling threshold (default 0.95; 1: off)\n"
               "  --min-p M               drop tokens below M x the top probability (default 0.05; 0: off)\n"
               "  --repeat-penalty R      penalty for recent tokens (default 1.1; 1: off)\n"
               "  --seed S                random seed (same seed, same output)\n"
               "  --chat                  wrap the prompt in the model's chat template\n"
               "  --system TEXT           system message (with --chat)\n"
               "  --template NAME         chat template family: chatml, llama2, llama3, mistral, gemma,\n"
               "                          phi3, zephyr or plain (default: detected from the model)\n"
               "  --ids                   print the generated token ids, space separated, on one line\n"
               "  --profile               time every kernel; print time, FLOP/s and bytes/s per kernel kind\n"
               "  --batch-invariant       exact matmuls whose results do not depend on the batch (slower): greedy\n"
               "                          output is then the same with or without speculation\n"
               "  --draft-n K             draft tokens per step with --spec (default 4)\n"
               "%s%s",
               kDeviceUsage, kSpecUsage);
}

struct Options {
  std::string model, prompt, file, system, template_name;
  bool has_prompt = false;
  bool is_chat = false;
  bool ids_only = false;
  bool is_profiled = false;
  bool is_batch_invariant = false;
  int32_t n_predict = 256;
  int64_t context = 0;
  int threads = 0;
  std::string device = "auto";
  SamplingParams sampling;
  spec::SpeculativeConfig speculation;
};

template <typename T>
bool parse_number(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

// Returns -1 to go on, otherwise the exit status.
int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    auto value = [&]() -> bool {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "iwb run: %s needs a value\n\n", a.c_str());
        print_usage(stderr);
        return false;
      }
      v = argv[++i];
      return true;
    };
    auto number = [&](auto* out, auto min, const char* what) -> bool {
      if (!value()) return false;
      if (!parse_number(v, out) || !(*out >= min)) {
        std::fprintf(stderr, "iwb run: %s must be %s, not '%s'\n", a.c_str(), what, v.c_str());
        return false;
      }
      return true;
    };
    bool ok = true;
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      ok = value() && (o->model = v, true);
    } else if (a == "-p" || a == "--prompt") {
      ok = value() && (o->prompt = v, o->has_prompt = true);
    } else if (a == "-f" || a == "--file") {
      ok = value() && (o->file = v, true);
    } else if (a == "-n" || a == "--n-predict") {
      ok = number(&o->n_predict, -1, "a whole number >= -1");
    } else if (a == "-c" || a == "--ctx-size") {
      ok = number(&o->context, int64_t{1}, "a positive whole number");
    } else if (a == "-t" || a == "--threads") {
      ok = number(&o->threads, 1, "a positive whole number");
    } else if (a == "--temp") {
      ok = number(&o->sampling.temperature, 0.0f, "a number >= 0");
    } else if (a == "--top-k") {
      ok = number(&o->sampling.top_k, 0, "a whole number >= 0");
    } else if (a == "--top-p") {
      ok = number(&o->sampling.top_p, 0.0f, "a number >= 0");
    } else if (a == "--min-p") {
      ok = number(&o->sampling.min_p, 0.0f, "a number >= 0");
    } else if (a == "--repeat-penalty") {
      ok = number(&o->sampling.repeat_penalty, 0.0f, "a number >= 0");
    } else if (a == "--seed") {
      ok = number(&o->sampling.seed, uint64_t{0}, "a whole number >= 0");
    } else if (a == "--chat") {
      o->is_chat = true;
    } else if (a == "--system") {
      ok = value() && (o->system = v, true);
    } else if (a == "--template") {
      ok = value() && (o->template_name = v, true);
    } else if (a == "--ids") {
      o->ids_only = true;
    } else if (a == "--profile") {
      o->is_profiled = true;
    } else if (a == "--batch-invariant") {
      o->is_batch_invariant = true;
    } else if (a == "--draft-n") {
      ok = number(&o->speculation.num_draft_tokens, 1, "a whole number >= 1");
    } else if (const int taken = parse_spec_option("run", argc, argv, &i, &o->speculation); taken != 0) {
      ok = taken > 0;
    } else if (const int taken = parse_device_option("run", argc, argv, &i, &o->device); taken != 0) {
      ok = taken > 0;
    } else {
      std::fprintf(stderr, "iwb run: unexpected argument '%s'\n\n", a.c_str());
      print_usage(stderr);
      return 2;
    }
    if (!ok) return 2;
  }
  const char* problem = nullptr;
  if (o->model.empty()) problem = "no model given (-m MODEL.gguf)";
  else if (o->has_prompt == !o->file.empty()) problem = "give exactly one of -p PROMPT or -f FILE";
  else if (!o->is_chat && (!o->system.empty() || !o->template_name.empty())) problem = "--system and --template need --chat";
  if (problem != nullptr) {
    std::fprintf(stderr, "iwb run: %s\n\n", problem);
    print_usage(stderr);
    return 2;
  }
  if (!o->template_name.empty() && !chat_template_family_from_name(o->template_name)) {
    std::fprintf(stderr,
                 "iwb run: unknown chat template '%s' (chatml, llama2, llama3, mistral, gemma, phi3, zephyr, plain)\n",
                 o->template_name.c_str());
    return 2;
  }
  return -1;
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

void print_timings(const RequestFinished& f) {
  const double prompt_rate = f.prompt_seconds > 0 ? f.num_prompt_tokens / f.prompt_seconds : 0.0;
  // The first token comes out of the prompt step; the rest are timed from it to the last.
  const double gen_rate = f.generation_seconds > 0 ? (f.num_generated_tokens - 1) / f.generation_seconds : 0.0;
  std::fprintf(stderr,
               "timings: prompt %d tokens (%.2f tokens/s), generated %d tokens (%.2f tokens/s), "
               "time to first token %.3f s, finished: %s\n",
               f.num_prompt_tokens, prompt_rate, f.num_generated_tokens, gen_rate, f.prompt_seconds,
               finish_reason_name(f.reason));
}

// Per (phase, kernel kind): calls, time and its share, achieved rates, intensity.
void print_profile(const RunningAggregate& profile) {
  const std::vector<OpAggregate> rows = profile.snapshot();
  std::fprintf(stderr, "profile: %lld steps, kernels %.3f s of %.3f s step time\n",
               static_cast<long long>(profile.num_steps()), profile.kernel_seconds(), profile.step_seconds());
  std::fprintf(stderr, "  %-8s %-11s %7s %10s %6s %10s %9s %10s\n", "phase", "kernel", "calls", "ms", "%", "GFLOP/s",
               "GB/s", "FLOP/byte");
  for (const OpAggregate& a : rows) {
    const double share = profile.kernel_seconds() > 0 ? 100.0 * a.seconds / profile.kernel_seconds() : 0.0;
    std::fprintf(stderr, "  %-8s %-11s %7lld %10.2f %6.1f %10.2f %9.2f %10.2f\n", phase_name(a.phase), a.name.c_str(),
                 static_cast<long long>(a.count), a.seconds * 1e3, share, a.flops_per_s() / 1e9, a.bytes_per_s() / 1e9,
                 a.intensity());
  }
}

}  // namespace

int run_run(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;
  if (!o.file.empty() && !read_file(o.file, &o.prompt)) {
    std::fprintf(stderr, "iwb run: cannot read '%s'\n", o.file.c_str());
    return 1;
  }

  EngineOptions engine_options;
  engine_options.context_length = o.context;
  engine_options.num_threads = o.threads;
  engine_options.speculation = o.speculation;
  engine_options.is_batch_invariant = o.is_batch_invariant;
  engine_options.device = o.device;
  if (Status s = spec::validate(o.speculation); !s) {
    std::fprintf(stderr, "iwb run: %s\n", s.message().c_str());
    return 2;
  }
  Result<std::unique_ptr<Engine>> loaded = Engine::load(o.model, engine_options);
  if (!loaded) {
    std::fprintf(stderr, "iwb run: %s\n", loaded.error_message().c_str());
    return 1;
  }
  Engine& engine = **loaded;
  std::fprintf(stderr, "iwb run: %s (%s, %s), context %lld, %d threads\n", engine.model().name.c_str(),
               engine.model().architecture.c_str(), engine.model().file_type.c_str(),
               static_cast<long long>(engine.context_length()), engine.num_threads());
  std::fprintf(stderr, "iwb run: %s\n", device_line(engine).c_str());

  GenerationRequest request;
  request.sampling = o.sampling;
  request.max_new_tokens = o.n_predict;
  if (o.is_chat) {
    std::vector<ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", o.prompt});
    ChatPromptOptions chat;
    if (!o.template_name.empty()) chat.family = chat_template_family_from_name(o.template_name);
    Result<ChatPrompt> prompt = build_chat_prompt(engine.tokenizer(), engine.chat_template(), messages, chat);
    if (!prompt) {
      std::fprintf(stderr, "iwb run: %s\n", prompt.error_message().c_str());
      return 1;
    }
    request.prompt_tokens = std::move(prompt->tokens);
    request.stop_strings = std::move(prompt->stop_strings);
  } else {
    tokenizer::EncodeOptions encode;
    encode.parse_special = true;  // as llama.cpp does for prompts: "<|im_start|>" is one token
    request.prompt_tokens = engine.tokenizer().encode(o.prompt, encode);
  }

  Result<RequestId> id = engine.add_request(std::move(request));
  if (!id) {
    std::fprintf(stderr, "iwb run: %s\n", id.error_message().c_str());
    return 1;
  }
  bool is_first_id = true;
  engine.set_profiling(o.is_profiled);
  RunningAggregate profile;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> step = engine.step();
    if (!step) {
      std::fprintf(stderr, "\niwb run: %s\n", step.error_message().c_str());
      return 1;
    }
    profile.add(step->profile);
    for (const TokenEvent& e : step->tokens) {
      if (o.ids_only) {
        std::printf(is_first_id ? "%d" : " %d", e.token);
        is_first_id = false;
      } else {
        std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      }
      std::fflush(stdout);
    }
    for (const RequestFinished& f : step->finished) {
      std::printf("\n");
      std::fflush(stdout);
      if (f.reason == FinishReason::Error) {
        std::fprintf(stderr, "iwb run: generation failed: %s\n", f.error.c_str());
        return 1;
      }
      print_timings(f);
      if (o.speculation.is_enabled()) print_speculation(stderr, f.speculation, 0.0);
      if (o.is_profiled) print_profile(profile);
    }
  }
  return 0;
}

}  // namespace iwb::cli
