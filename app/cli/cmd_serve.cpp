// `iwb serve -m MODEL [options]`: the engine behind an OpenAI-compatible HTTP API (engine/serve).
// Wiring only: options (spelled as llama-server spells them), the engine loaded while /health
// answers 503, one line per request on stderr, and a clean stop on SIGINT/SIGTERM.
#include "commands.h"
#include "device_cli.h"
#include "spec_cli.h"

#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/serve/engine_loop.h"
#include "iwb/engine/serve/http_server.h"
#include "iwb/engine/serve/serve_metrics.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>

namespace iwb::cli {
namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: iwb serve -m MODEL.gguf [options]\n"
               "  -m, --model FILE        GGUF model to serve\n"
               "  --host ADDR             address to listen on (default 127.0.0.1)\n"
               "  --port N                port (default 8080; 0: any free port, printed at start)\n"
               "  --api-key KEY           require 'Authorization: Bearer KEY' (all endpoints but /health)\n"
               "  -a, --alias NAME        the model name clients see (default: the file name)\n"
               "  -c, --ctx-size N        context per sequence (default: the model's, at most 4096)\n"
               "  -np, --parallel N       sequences decoding together at most (default 32)\n"
               "  -b, --batch-size N      tokens per engine step (default 128)\n"
               "  --kv-mem MIB            memory for the paged KV cache\n"
               "  -t, --threads N         CPU threads (default: all cores)\n"
               "  --threads-http N        connections served at once (default: 136)\n"
               "  -to, --timeout N        seconds a client may stall while sending or reading (default 10)\n"
               "  --max-queue N           requests in flight before new ones get 503 (default 256)\n"
               "  --max-n N               most choices (n) one request may ask for (default 16)\n"
               "  --batch-invariant       exact matmuls: each output is the same as that prompt run alone\n"
               "  --temp T, --top-k K, --top-p P, --min-p M, --repeat-penalty R, --repeat-last-n N, --seed S\n"
               "                          defaults for requests that leave them out (as `iwb run`)\n"
               "  --log-disable           no line per request on stderr\n"
               "  --draft-n K             draft tokens per step with --spec (default 4)\n"
               "%s%s",
               kDeviceUsage, kSpecUsage);
}

struct Options {
  std::string model, alias;
  serve::ServeOptions serve;
  EngineOptions engine;
  int64_t kv_mib = 0;
  bool has_seed = false;
  bool is_logging = true;
};

template <typename T>
bool parse_number(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

// Returns -1 to go on, otherwise the exit status. A plain loop for now: the table-driven
// parser of the other commands will take these options over.
int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    auto value = [&]() -> bool {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "iwb serve: %s needs a value\n\n", a.c_str());
        print_usage(stderr);
        return false;
      }
      v = argv[++i];
      return true;
    };
    auto number = [&](auto* out, auto min, const char* what) -> bool {
      if (!value()) return false;
      if (!parse_number(v, out) || !(*out >= min)) {
        std::fprintf(stderr, "iwb serve: %s must be %s, not '%s'\n", a.c_str(), what, v.c_str());
        return false;
      }
      return true;
    };
    SamplingParams& s = o->serve.default_sampling;
    bool ok = true;
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return 0;
    } else if (a == "-m" || a == "--model") {
      ok = value() && (o->model = v, true);
    } else if (a == "--host") {
      ok = value() && (o->serve.host = v, true);
    } else if (a == "--port") {
      ok = number(&o->serve.port, 0, "a port number (0 to 65535)") && o->serve.port <= 65535;
    } else if (a == "--api-key") {
      ok = value() && (o->serve.api_key = v, true);
    } else if (a == "-a" || a == "--alias") {
      ok = value() && (o->alias = v, true);
    } else if (a == "-c" || a == "--ctx-size") {
      ok = number(&o->engine.context_length, int64_t{1}, "a positive whole number");
    } else if (a == "-np" || a == "--parallel") {
      ok = number(&o->engine.max_running_sequences, int64_t{1}, "a positive whole number");
    } else if (a == "-b" || a == "--batch-size") {
      ok = number(&o->engine.max_batch_tokens, int64_t{1}, "a positive whole number");
    } else if (a == "--kv-mem") {
      ok = number(&o->kv_mib, int64_t{1}, "a positive number of MiB");
    } else if (a == "-t" || a == "--threads") {
      ok = number(&o->engine.num_threads, 1, "a positive whole number");
    } else if (a == "--threads-http") {
      ok = number(&o->serve.num_http_threads, 1, "a positive whole number");
    } else if (a == "-to" || a == "--timeout") {
      ok = number(&o->serve.read_timeout_seconds, 1, "a positive number of seconds");
      o->serve.write_timeout_seconds = o->serve.read_timeout_seconds;
    } else if (a == "--max-queue") {
      ok = number(&o->serve.max_requests_in_flight, int64_t{1}, "a positive whole number");
    } else if (a == "--max-n") {
      ok = number(&o->serve.max_choices, 1, "a positive whole number");
    } else if (a == "--batch-invariant") {
      o->engine.is_batch_invariant = true;
    } else if (a == "--temp") {
      ok = number(&s.temperature, 0.0f, "a number >= 0");
    } else if (a == "--top-k") {
      ok = number(&s.top_k, 0, "a whole number >= 0");
    } else if (a == "--top-p") {
      ok = number(&s.top_p, 0.0f, "a number >= 0");
    } else if (a == "--min-p") {
      ok = number(&s.min_p, 0.0f, "a number >= 0");
    } else if (a == "--repeat-penalty") {
      ok = number(&s.repeat_penalty, 0.0f, "a number >= 0");
    } else if (a == "--repeat-last-n") {
      ok = number(&s.penalty_last_n, -1, "a whole number >= -1");
    } else if (a == "--seed") {
      ok = number(&s.seed, uint64_t{0}, "a whole number >= 0");
    } else if (a == "--log-disable") {
      o->is_logging = false;
    } else if (a == "--draft-n") {
      ok = number(&o->engine.speculation.num_draft_tokens, 1, "a whole number >= 1");
    } else if (const int taken = parse_spec_option("serve", argc, argv, &i, &o->engine.speculation); taken != 0) {
      ok = taken > 0;
    } else if (const int taken = parse_device_option("serve", argc, argv, &i, &o->engine.device); taken != 0) {
      ok = taken > 0;
    } else {
      std::fprintf(stderr, "iwb serve: unexpected argument '%s'\n\n", a.c_str());
      print_usage(stderr);
      return 2;
    }
    if (!ok) return 2;
  }
  if (o->model.empty()) {
    std::fprintf(stderr, "iwb serve: no model given (-m MODEL.gguf)\n\n");
    print_usage(stderr);
    return 2;
  }
  if (Status s = spec::validate(o->engine.speculation); !s) {
    std::fprintf(stderr, "iwb serve: %s\n", s.message().c_str());
    return 2;
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
  if (o.is_logging) server.set_request_log(log_request);
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
    loop.start(std::move(*engine), o.alias);
    std::fprintf(stderr, "iwb serve: ready, serving '%s'\n", loop.model()->id.c_str());
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
