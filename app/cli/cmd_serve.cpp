// `iwb serve -m MODEL [options]`: the engine behind an OpenAI-compatible HTTP API (engine/serve).
// Wiring only: options (spelled as llama-server spells them), the engine loaded while /health
// answers 503, one line per request on stderr, and a clean stop on SIGINT/SIGTERM.
#include "commands.h"
#include "device_cli.h"
#include "options/option_groups.h"

#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/serve/engine_loop.h"
#include "iwb/engine/serve/http_server.h"
#include "iwb/engine/serve/serve_metrics.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>

namespace iwb::cli {
namespace {

struct Options {
  std::string model, alias, chat_template, chat_template_file, chat_template_kwargs;
  serve::ServeOptions serve;
  EngineOptions engine;
  int64_t kv_mib = 0;
  int64_t port = 8080;
  int64_t max_queue = serve::ServeOptions{}.max_requests_in_flight;
  bool is_log_disabled = false;
  bool is_reasoning_preserved = false, is_reasoning_cleared = false;  // --reasoning-preserve / --no-...
  DeviceOptions device;
  KvCacheOptions kv_cache;
  SamplingOptions sampling;
};

OptionTable make_table(Options* o) {
  OptionTable t("serve", "-m MODEL.gguf [options]",
                "Serves the model over the OpenAI API (chat and text completions, models, health, tokenize,\n"
                "detokenize, Prometheus metrics), options spelled as llama-server spells them.");
  t.begin_group("model");
  add_model_option(t, &o->model, "GGUF model to serve");
  t.add({.names = {"-a", "--alias"},
         .value_name = "NAME",
         .help = "the model name clients see",
         .destination = &o->alias,
         .default_text = "the file name"});
  t.add({.names = {"--chat-template"},
         .value_name = "NAME|JINJA",
         .help = "chat template: chatml, llama2, llama3, mistral, gemma, phi3, zephyr, tulu,\n"
                 "smollm3, granite, harmony, hermes, qwen3-coder, glm-4.5, glm-4.7, deepseek-v3.1, kimi-k2,\n"
                 "gemma4, qwen3.5, plain, or a Jinja template text (its family is recognised)",
         .destination = &o->chat_template,
         .default_text = "the model's"});
  t.add({.names = {"--chat-template-file"},
         .value_name = "FILE",
         .help = "the chat template as a Jinja file (llama-server's option; its family is recognised)",
         .destination = &o->chat_template_file});
  t.add({.names = {"--chat-template-kwargs"},
         .value_name = "JSON",
         .help = "template variables for requests that give none: {\"enable_thinking\": false} (Qwen3, Qwen3.5,\n"
                 "SmolLM3, GLM, Gemma 4), {\"thinking\": true} (DeepSeek V3.1), {\"reasoning_effort\": \"high\"}\n"
                 "(gpt-oss), {\"clear_thinking\": false} (GLM-4.7); a request's chat_template_kwargs take precedence",
         .destination = &o->chat_template_kwargs});
  // llama-server's names. Its default is on; here the template's own default holds (GLM-4.7's:
  // reasoning before the last user message left out), as vLLM and the model's makers render it.
  t.add({.names = {"--reasoning-preserve"},
         .help = "keep every past turn's reasoning in the prompt, not only the turns after the last user\n"
                 "message (GLM-4.7's clear_thinking false; llama-server's default)",
         .destination = &o->is_reasoning_preserved});
  t.add({.names = {"--no-reasoning-preserve"},
         .help = "leave past reasoning out as the template does (clear_thinking true); without either option\n"
                 "the template's default holds",
         .destination = &o->is_reasoning_cleared});
  t.begin_group("server");
  t.add({.names = {"--host"}, .value_name = "ADDR", .help = "address to listen on", .destination = &o->serve.host});
  t.add({.names = {"--port"},
         .value_name = "N",
         .help = "port; 0: any free port, printed at start",
         .destination = &o->port,
         .min = 0,
         .max = 65535});
  t.add({.names = {"--api-key"},
         .value_name = "KEY",
         .help = "require 'Authorization: Bearer KEY' (every endpoint but /health)",
         .destination = &o->serve.api_key});
  t.add({.names = {"--threads-http"},
         .value_name = "N",
         .help = "connections served at once",
         .destination = CustomSetter([o](std::string_view, std::string_view v) -> std::string {
           int n = 0;
           const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
           if (ec != std::errc() || ptr != v.data() + v.size() || n < 1) return "expects a whole number >= 1";
           o->serve.num_http_threads = n;
           return {};
         }),
         .default_text = "max(64, --max-queue / 2) + 8"});
  t.add({.names = {"-to", "--timeout"},
         .value_name = "N",
         .help = "seconds a client may stall while sending or reading",
         .destination = CustomSetter([o](std::string_view, std::string_view v) -> std::string {
           int n = 0;
           const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
           if (ec != std::errc() || ptr != v.data() + v.size() || n < 1)
             return "expects a whole number of seconds >= 1";
           o->serve.read_timeout_seconds = o->serve.write_timeout_seconds = n;
           return {};
         }),
         .default_text = std::to_string(serve::ServeOptions{}.read_timeout_seconds)});
  t.add({.names = {"--max-queue"},
         .value_name = "N",
         .help = "requests in flight before new ones get 503 with Retry-After",
         .destination = &o->max_queue,
         .min = 1});
  t.add({.names = {"--max-n"},
         .value_name = "N",
         .help = "most choices (n) one request may ask for",
         .destination = &o->serve.max_choices,
         .min = 1});
  t.add({.names = {"--log-disable"}, .help = "no line per request on stderr", .destination = &o->is_log_disabled});
  t.begin_group("engine");
  add_context_option(t, &o->engine.context_length, "context per sequence; 0: the model's, at most 4096", 0);
  add_batch_size_option(t, &o->engine.max_batch_tokens, "tokens per engine step");
  t.add({.names = {"-np", "--parallel"},
         .value_name = "N",
         .help = "sequences decoding together at most",
         .destination = &o->engine.max_running_sequences,
         .min = 1});
  t.add({.names = {"--kv-mem"},
         .value_name = "MIB",
         .help = "memory for the paged KV cache",
         .destination = &o->kv_mib,
         .min = 1,
         .default_text = "four full contexts"});
  add_threads_option(t, &o->engine.num_threads);
  add_device_options(t, &o->device);
  add_kv_cache_options(t, &o->kv_cache);
  add_state_checkpoints_option(t, &o->engine.max_state_checkpoints, &o->engine.checkpoint_min_step);
  t.add({.names = {"--batch-invariant"},
         .help = "exact matmuls: each output is the same as that prompt run alone",
         .destination = &o->engine.is_batch_invariant});
  t.begin_group("sampling defaults for requests that leave them out (llama.cpp's)");
  add_sampling_options(t, &o->sampling);
  t.begin_group("speculation");
  add_speculation_options(t, &o->engine.speculation);
  add_draft_max_option(t, &o->engine.speculation.num_draft_tokens);
  return t;
}

// Returns -1 to go on, otherwise the exit status.
int parse(int argc, char** argv, Options* o) {
  const OptionTable table = make_table(o);
  if (const int status = parse_command_line(table, argc, argv); status >= 0) return status;
  if (const std::string e = o->kv_cache.error(); !e.empty()) return report_usage_error(table, e);
  Result<std::string> device = resolve_device(o->device, o->model);
  if (!device) return report_usage_error(table, device.error_message());
  o->engine.device = *device;
  o->engine.load_mode = o->device.load_mode;
  o->engine.kv_cache_type = o->kv_cache.types();
  if (Status s = spec::validate(o->engine.speculation); !s) return report_usage_error(table, s.message());
  o->serve.port = static_cast<int>(o->port);
  o->serve.max_requests_in_flight = o->max_queue;
  // A request's own seed wins; without one, --seed when given, else a fresh seed per request.
  o->serve.default_sampling = o->sampling.to_params(0);
  o->serve.has_default_seed = o->sampling.seed != kRandomSeed;
  o->serve.default_max_tokens = o->sampling.n_predict;
  if (!o->chat_template_file.empty()) {
    if (!o->chat_template.empty()) {
      return report_usage_error(table, "--chat-template and --chat-template-file both give the template; give one");
    }
    std::ifstream in(o->chat_template_file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in || text.str().empty()) {
      return report_usage_error(table, "cannot read the chat template file '" + o->chat_template_file + "'");
    }
    o->chat_template = text.str();
  }
  if (!o->chat_template_kwargs.empty()) {
    if (Status s = serve::set_default_chat_template_kwargs(o->chat_template_kwargs, &o->serve); !s) {
      return report_usage_error(table, s.message());
    }
  }
  if (o->is_reasoning_preserved && o->is_reasoning_cleared) {
    return report_usage_error(table, "--reasoning-preserve and --no-reasoning-preserve contradict each other");
  }
  if (o->is_reasoning_preserved || o->is_reasoning_cleared) {
    if (o->serve.default_clear_thinking) {
      return report_usage_error(table, "--chat-template-kwargs already sets clear_thinking; give one of the two");
    }
    o->serve.default_clear_thinking = o->is_reasoning_cleared;
  }
  o->engine.kv_cache_bytes = static_cast<uint64_t>(o->kv_mib) << 20;
  return -1;
}

void log_request(const serve::RequestLogEntry& e) {
  std::fprintf(stderr, "iwb serve: %s %s %d %d+%d tokens %.3f s %s (%s)\n", e.method.c_str(), e.path.c_str(), e.status,
               e.num_prompt_tokens, e.num_generated_tokens, e.seconds, e.outcome.c_str(), e.remote_address.c_str());
}

}  // namespace

int run_serve(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;

  // SIGINT and SIGTERM go to one waiting thread (blocked here, before any thread starts, so
  // every thread inherits the mask); it stops the server, and the rest winds down in order.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  serve::ServeMetrics metrics;
  serve::EngineLoop loop(&metrics);
  serve::HttpServer server(loop, metrics, o.serve);
  if (!o.is_log_disabled) server.set_request_log(log_request);
  Result<int> port = server.bind();
  if (!port) {
    std::fprintf(stderr, "iwb serve: %s\n", port.error_message().c_str());
    return 1;
  }
  if (!serve::is_loopback_host(o.serve.host) && o.serve.api_key.empty()) {
    std::fprintf(stderr,
                 "iwb serve: warning: listening on %s without --api-key: anyone who reaches this machine can use "
                 "the model\n",
                 o.serve.host.c_str());
  }
  std::fprintf(stderr, "iwb serve: listening on http://%s:%d\n", o.serve.host.c_str(), *port);

  Status listened;
  std::atomic<bool> is_exiting{false};
  std::thread http([&] { listened = server.listen(); });
  std::thread signals([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    if (is_exiting) return;
    std::fprintf(stderr, "iwb serve: stopping\n");
    server.stop();
  });

  int status = 0;
  Result<std::unique_ptr<Engine>> engine = Engine::load(o.model, o.engine);
  if (!engine) {
    std::fprintf(stderr, "iwb serve: %s\n", engine.error_message().c_str());
    server.stop();
    status = 1;
  } else {
    const Engine& e = **engine;
    std::fprintf(stderr, "iwb serve: %s (%s, %s), context %lld, %d threads; %s\n", e.model().name.c_str(),
                 e.model().architecture.c_str(), e.model().file_type.c_str(),
                 static_cast<long long>(e.context_length()), e.num_threads(), device_line(e).c_str());
    loop.start(std::move(*engine), o.alias, o.chat_template);
    std::fprintf(stderr, "iwb serve: ready, serving '%s'\n", loop.model()->id.c_str());
    const serve::ServedModel& served = *loop.model();
    std::fprintf(stderr, "iwb serve: chat template: %s\n",
                 chat_template_summary(served.chat_template, served.chat_template_family).c_str());
    if (!served.chat_template_tool_use.empty()) {
      std::fprintf(stderr, "iwb serve: with tools, its tool_use template: %s\n",
                   chat_template_summary(served.chat_template_tool_use).c_str());
    }
  }
  http.join();
  is_exiting = true;
  loop.stop();
  // The signal thread may still wait: wake it with the signal it waits for.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  if (!listened) {
    std::fprintf(stderr, "iwb serve: %s\n", listened.message().c_str());
    return 1;
  }
  return status;
}

}  // namespace iwb::cli
