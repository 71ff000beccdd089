// `iwb run -m MODEL (-p PROMPT | -f FILE) [options]`: generates text with the CPU engine,
// printing each piece as it is produced, then a timings line on stderr (and with --profile, where
// the time went, kernel kind by kernel kind, then weight matrix by weight matrix).
#include "commands.h"
#include "device_cli.h"
#include "options/option_groups.h"
#include "spec_cli.h"

#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/model/architecture.h"
#include "iwb/engine/profile/profile_aggregate.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/serve/http_server.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <tuple>

namespace iwb::cli {
namespace {

struct Options {
  std::string model;
  PromptOptions prompt;
  std::string system, template_name, chat_template_kwargs;
  serve::ServeOptions thinking;  // --chat-template-kwargs, read as iwb serve reads it
  bool is_chat = false;
  bool ids_only = false;
  bool is_profiled = false;
  bool is_batch_invariant = false;
  int64_t context = 0;
  int64_t batch_tokens = EngineOptions{}.max_batch_tokens;
  int threads = 0;
  DeviceOptions device;
  KvCacheOptions kv_cache;
  SamplingOptions sampling;
  std::string json_schema, json_schema_file;
  spec::SpeculativeConfig speculation;
};

OptionTable make_table(Options* o) {
  OptionTable t("run", "-m MODEL.gguf (-p PROMPT | -f FILE) [options]",
                "Generates text, printing each piece as it comes, then a timings line on stderr.");
  t.begin_group("model and prompt");
  // The architectures the engine runs, from its table (the list went stale when written out).
  std::string help = "GGUF model of an architecture the engine runs (";
  size_t line_start = 0;
  const std::vector<std::string>& names = supported_architectures();
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) help += ",";
    if (help.size() - line_start + names[i].size() > 88) {
      help += "\n";
      line_start = help.size();
    } else if (i > 0) {
      help += " ";
    }
    help += names[i];
  }
  add_model_option(t, &o->model, help + ")");
  add_prompt_options(t, &o->prompt, "the prompt (a user message with --chat)");
  t.begin_group("context");
  add_context_option(t, &o->context, "context length; 0: the model's, at most 4096", 0);
  add_batch_size_option(t, &o->batch_tokens, "tokens per forward step (prompt chunks)");
  add_kv_cache_options(t, &o->kv_cache);
  t.begin_group("threads and device");
  add_threads_option(t, &o->threads);
  add_device_options(t, &o->device);
  t.add({.names = {"--batch-invariant"},
         .help = "exact matmuls whose results do not depend on the batch (slower):\n"
                 "greedy output is then the same with or without speculation",
         .destination = &o->is_batch_invariant});
  t.begin_group("sampling (llama.cpp's defaults)");
  add_sampling_options(t, &o->sampling);
  t.begin_group("structured output");
  t.add({.names = {"-j", "--json-schema"},
         .value_name = "SCHEMA",
         .help = "hold the output to a JSON Schema, e.g. '{}' for any JSON value or\n"
                 "'{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}}}';\n"
                 "generation ends when the value is whole",
         .destination = &o->json_schema});
  t.add({.names = {"-jf", "--json-schema-file"},
         .value_name = "FILE",
         .help = "the same, with the schema read from FILE",
         .destination = &o->json_schema_file});
  t.begin_group("chat");
  t.add({.names = {"--chat"}, .help = "wrap the prompt in the model's chat template", .destination = &o->is_chat});
  t.add(
      {.names = {"--system"}, .value_name = "TEXT", .help = "system message (with --chat)", .destination = &o->system});
  t.add({.names = {"--template"},
         .value_name = "NAME",
         .help = "chat template family: chatml, llama2, llama3, mistral, gemma, phi3,\n"
                 "zephyr, tulu, smollm3, granite, harmony, hermes, qwen3-coder, glm-4.5,\n"
                 "glm-4.7, deepseek-v3.1, kimi-k2, gemma4, qwen3.5 or plain",
         .destination = CustomSetter([o](std::string_view, std::string_view value) -> std::string {
           if (!chat_template_family_from_name(value)) {
             return "unknown chat template '" + std::string(value) +
                    "' (chatml, llama2, llama3, mistral, gemma, phi3, zephyr, tulu, smollm3, granite, harmony, hermes, "
                    "qwen3-coder, glm-4.5, glm-4.7, deepseek-v3.1, kimi-k2, gemma4, qwen3.5, plain)";
           }
           o->template_name = std::string(value);
           return {};
         }),
         .default_text = "detected from the model"});
  t.add({.names = {"--chat-template-kwargs"},
         .value_name = "JSON",
         .help = "template variables (with --chat), as llama.cpp takes them: {\"enable_thinking\": false}\n"
                 "(Qwen3, Qwen3.5, SmolLM3, GLM, Gemma 4), {\"reasoning_effort\": \"high\"} (gpt-oss),\n"
                 "{\"clear_thinking\": false} (GLM-4.7)",
         .destination = &o->chat_template_kwargs});
  t.begin_group("speculation");
  add_speculation_options(t, &o->speculation);
  add_draft_max_option(t, &o->speculation.num_draft_tokens);
  t.begin_group("output");
  t.add({.names = {"--ids"},
         .help = "print the generated token ids, space separated, on one line",
         .destination = &o->ids_only});
  t.add({.names = {"--profile"},
         .help = "time every kernel; print time, FLOP/s and bytes/s per kernel kind, then per weight matrix",
         .destination = &o->is_profiled});
  return t;
}

// Returns -1 to go on, otherwise the exit status.
int parse(int argc, char** argv, Options* o) {
  const OptionTable table = make_table(o);
  if (const int status = parse_command_line(table, argc, argv); status >= 0) return status;
  if (const std::string e = o->kv_cache.error(); !e.empty()) return report_usage_error(table, e);
  if (o->prompt.text.has_value() == !o->prompt.file.empty()) {
    return report_usage_error(table, "give exactly one of -p PROMPT or -f FILE");
  }
  if (!o->json_schema.empty() && !o->json_schema_file.empty()) {
    return report_usage_error(table, "give one of -j SCHEMA or -jf FILE");
  }
  if (!o->is_chat && (!o->system.empty() || !o->template_name.empty() || !o->chat_template_kwargs.empty())) {
    return report_usage_error(table, "--system, --template and --chat-template-kwargs need --chat");
  }
  if (!o->chat_template_kwargs.empty()) {
    if (Status s = serve::set_default_chat_template_kwargs(o->chat_template_kwargs, &o->thinking); !s) {
      return report_usage_error(table, s.message());
    }
  }
  Result<std::string> device = resolve_device(o->device, o->model);
  if (!device) return report_usage_error(table, device.error_message());
  o->device.device = *device;
  return -1;
}

// The settings as options, so a sampled run can be repeated exactly (the seed included).
void print_sampling(const SamplingParams& p, int32_t n_predict) {
  std::string bias;
  for (const auto& [id, amount] : p.logit_bias) {
    char one[64];
    std::snprintf(one, sizeof one, " -l %d%c%g", id, amount < 0 ? '-' : '+', static_cast<double>(std::fabs(amount)));
    bias += one;
  }
  std::fprintf(stderr,
               "iwb run: sampling --temp %g --top-k %d --top-p %g --min-p %g --repeat-penalty %g --repeat-last-n %d "
               "--seed %llu -n %d%s\n",
               p.temperature, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.penalty_last_n,
               static_cast<unsigned long long>(p.seed), n_predict, bias.c_str());
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
  std::fprintf(stderr, "  %-8s %-13s %7s %10s %6s %10s %9s %10s\n", "phase", "kernel", "calls", "ms", "%", "GFLOP/s",
               "GB/s", "FLOP/byte");
  for (const OpAggregate& a : rows) {
    const double share = profile.kernel_seconds() > 0 ? 100.0 * a.seconds / profile.kernel_seconds() : 0.0;
    std::fprintf(stderr, "  %-8s %-13s %7lld %10.2f %6.1f %10.2f %9.2f %10.2f\n", phase_name(a.phase), a.name.c_str(),
                 static_cast<long long>(a.count), a.seconds * 1e3, share, a.flops_per_s() / 1e9, a.bytes_per_s() / 1e9,
                 a.intensity());
  }
}

// The weight products by (phase, name, type, shape): which matrices fall short of the memory
// roof, and the slowest single call ("max ms"), where a one-time cost hides in a total (on an
// H200 the first prefill's attn_q GEMMs took 48-68 ms in all against attn_output's 3.4 ms, the
// pattern of cuBLAS loading its kernels on first use). Kept apart from RunningAggregate, whose
// per-kind rows are the roofline's points.
class WeightProfile {
 public:
  void add(const ProfileBatch& batch) {
    for (const KernelRecord& r : batch.kernels) {
      if (r.kind != OpKind::Matmul && r.kind != OpKind::Logits && r.kind != OpKind::ExpertMatmul) continue;
      Row& row = m_rows[{r.phase, std::string(r.name), r.data_type, r.shape.cols, r.shape.rows}];
      ++row.calls;
      row.seconds += r.seconds;
      row.max_seconds = std::max(row.max_seconds, r.seconds);
      row.bytes += r.bytes;
      row.flops += r.flops;
    }
  }
  void print() const {
    std::fprintf(stderr, "  %-8s %-14s %-6s %13s %7s %10s %9s %10s %9s\n", "phase", "weight", "type", "in x out",
                 "calls", "ms", "GB/s", "GFLOP/s", "max ms");
    for (const auto& [key, row] : m_rows) {
      const auto& [phase, name, type, in, out] = key;
      const std::string shape = std::to_string(in) + "x" + std::to_string(out);
      std::fprintf(stderr, "  %-8s %-14s %-6s %13s %7lld %10.2f %9.2f %10.2f %9.3f\n", phase_name(phase), name.c_str(),
                   std::string(ggml_type_name(type)).c_str(), shape.c_str(), static_cast<long long>(row.calls),
                   row.seconds * 1e3, row.seconds > 0 ? row.bytes / row.seconds / 1e9 : 0.0,
                   row.seconds > 0 ? row.flops / row.seconds / 1e9 : 0.0, row.max_seconds * 1e3);
    }
  }

 private:
  struct Row {
    int64_t calls = 0;
    double seconds = 0, bytes = 0, flops = 0;
    double max_seconds = 0;  // the slowest call
  };
  std::map<std::tuple<Phase, std::string, GgmlType, int64_t, int64_t>, Row> m_rows;
};

}  // namespace

int run_run(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;
  std::string prompt = o.prompt.text.value_or("");
  if (!o.prompt.file.empty() && !read_file(o.prompt.file, &prompt)) {
    std::fprintf(stderr, "iwb run: cannot read '%s'\n", o.prompt.file.c_str());
    return 1;
  }

  // The schema is compiled before the model loads: a mistake in it costs no load.
  std::shared_ptr<const JsonGrammar> json_grammar;
  if (!o.json_schema.empty() || !o.json_schema_file.empty()) {
    std::string schema = o.json_schema;
    if (!o.json_schema_file.empty() && !read_file(o.json_schema_file, &schema)) {
      std::fprintf(stderr, "iwb run: cannot read '%s'\n", o.json_schema_file.c_str());
      return 1;
    }
    Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_schema(schema);
    if (!g) {
      std::fprintf(stderr, "iwb run: %s\n", g.error_message().c_str());
      return 2;
    }
    json_grammar = *g;
  }

  EngineOptions engine_options;
  engine_options.context_length = o.context;
  engine_options.num_threads = o.threads;
  engine_options.speculation = o.speculation;
  engine_options.is_batch_invariant = o.is_batch_invariant;
  engine_options.max_batch_tokens = o.batch_tokens;
  engine_options.device = o.device.device;
  engine_options.load_mode = o.device.load_mode;
  engine_options.kv_cache_type = o.kv_cache.types();
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
  std::fprintf(stderr, "iwb run: %s (%s, %s), context %lld, %d threads, KV cache %s\n", engine.model().name.c_str(),
               engine.model().architecture.c_str(), engine.model().file_type.c_str(),
               static_cast<long long>(engine.context_length()), engine.num_threads(),
               engine.memory_report().kv_cache_type.c_str());
  std::fprintf(stderr, "iwb run: %s\n", device_line(engine).c_str());

  GenerationRequest request;
  request.sampling = o.sampling.to_params(std::random_device{}());
  request.max_new_tokens = o.sampling.n_predict;
  request.json_grammar = json_grammar;
  print_sampling(request.sampling, o.sampling.n_predict);
  bool opens_reasoning = false;  // the prompt opened the reply's think block (GLM-4.7, Qwen3.5)
  if (o.is_chat) {
    std::vector<ChatMessage> messages;
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", prompt});
    ChatPromptOptions chat;
    if (!o.template_name.empty()) chat.family = chat_template_family_from_name(o.template_name);
    chat.enable_thinking = o.thinking.default_enable_thinking;
    chat.reasoning_effort = o.thinking.default_reasoning_effort;
    chat.clear_thinking = o.thinking.default_clear_thinking;
    Result<ChatPrompt> prompt = build_chat_prompt(engine.tokenizer(), engine.chat_template(), messages, chat);
    if (!prompt) {
      std::fprintf(stderr, "iwb run: %s\n", prompt.error_message().c_str());
      return 1;
    }
    request.prompt_tokens = std::move(prompt->tokens);
    request.stop_strings = std::move(prompt->stop_strings);
    // Harmony channels print as their markers, as llama-cli shows them, not run together.
    request.render_special_tokens = prompt->renders_special_tokens;
    opens_reasoning = prompt->opens_reasoning;
  } else {
    tokenizer::EncodeOptions encode;
    encode.parse_special = true;  // as llama.cpp does for prompts: "<|im_start|>" is one token
    request.prompt_tokens = engine.tokenizer().encode(prompt, encode);
  }

  Result<RequestId> id = engine.add_request(std::move(request));
  if (!id) {
    std::fprintf(stderr, "iwb run: %s\n", id.error_message().c_str());
    return 1;
  }
  bool is_first_id = true;
  // The reply starts inside the think block its prompt opened: shown from "<think>", so that its
  // reasoning reads as reasoning up to "</think>".
  if (opens_reasoning && !o.ids_only) std::fputs("<think>", stdout);
  engine.set_profiling(o.is_profiled);
  RunningAggregate profile;
  WeightProfile weight_profile;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> step = engine.step();
    if (!step) {
      std::fprintf(stderr, "\niwb run: %s\n", step.error_message().c_str());
      return 1;
    }
    profile.add(step->profile);
    if (o.is_profiled) weight_profile.add(step->profile);
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
      if (o.is_profiled) {
        print_profile(profile);
        weight_profile.print();
      }
    }
  }
  return 0;
}

}  // namespace iwb::cli
