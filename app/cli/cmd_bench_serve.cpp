// `iwb bench-serve --base-url URL [--model NAME] [--input-len N] [--output-len N] [--num-prompts N]
// [--request-rate R|inf] [--burstiness B] [--max-concurrency C] [--sweep-concurrency 1,2,4]
// [--shared-prefix N] [--dataset random|chat|FILE] [--goodput ttft:MS,tpot:MS] [--json]`: load on
// an OpenAI-compatible server, measured like `vllm bench serve`, recorded in the results store.
// `iwb bench-serve --list [--json]` prints the recorded runs.
#include "bench_serve_report.h"
#include "commands.h"
#include "json_writer.h"
#include "options/option_groups.h"

#include "iwb/engine/remote/bench_serve.h"
#include "iwb/engine/store/results_store.h"

#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

namespace iwb::cli {
namespace {

using namespace iwb::remote;

struct Options {
  BenchServeConfig config;
  std::string api_key;
  std::vector<int32_t> sweep;
  std::string label;
  bool is_json = false;
  bool is_list = false;
  bool is_store_skipped = false;
  std::string db = ResultsStore::default_path();
};

// A positive number of seconds (or a gamma shape); with accepts_inf a rate, where 0 and "inf" mean inf.
CustomSetter number_setter(double* out, bool accepts_inf) {
  return [=](std::string_view option, std::string_view v) -> std::string {
    if (accepts_inf && (v == "inf" || v == "Inf" || v == "INF")) {
      *out = 0;
      return {};
    }
    double x = 0;
    const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || ptr != v.data() + v.size() || !std::isfinite(x) || x < 0 || (x == 0 && !accepts_inf)) {
      return std::string(option) + (accepts_inf ? " expects a number >= 0 or inf" : " expects a number > 0") +
             ", not '" + std::string(v) + "'";
    }
    *out = x;
    return {};
  };
}

int parse(int argc, char** argv, Options* o) {
  OptionTable t("bench-serve",
                "--base-url URL [--model NAME] [--num-prompts N] [--request-rate R|inf]\n"
                "       [--max-concurrency C | --sweep-concurrency 1,2,4] [options]\n"
                "       iwb bench-serve --list [--json] [--db PATH]",
                "load on an OpenAI-compatible server (vLLM, SGLang, llama-server, iwb serve), measured like\n"
                "vllm bench serve, with the server's own view from its /metrics.");
  BenchServeConfig& c = o->config;
  t.begin_group("endpoint");
  t.add({.names = {"--base-url"},
         .value_name = "URL",
         .help = "the server, with or without /v1 (http:// or https://)",
         .destination = &c.endpoint.base_url});
  t.add({.names = {"--model"},
         .value_name = "NAME",
         .help = "the served model",
         .destination = &c.model,
         .default_text = "the first of /v1/models"});
  t.add({.names = {"--api-key"},
         .value_name = "KEY",
         .help = "sent as 'Authorization: Bearer KEY'",
         .destination = &o->api_key,
         .default_text = "$OPENAI_API_KEY"});
  t.add({.names = {"--timeout"},
         .value_name = "S",
         .help = "seconds of silence before a request counts as timed out",
         .destination = number_setter(&c.endpoint.read_timeout_seconds, false),
         .default_text = "120"});
  t.add({.names = {"--connect-timeout"},
         .value_name = "S",
         .help = "seconds to wait for a connection",
         .destination = number_setter(&c.endpoint.connect_timeout_seconds, false),
         .default_text = "5"});
  t.begin_group("workload (vLLM's spellings)");
  t.add({.names = {"--dataset"},
         .value_name = "random|chat|FILE",
         .help = "random: synthetic prompts of --input-len words (about a token each);\n"
                 "chat: built-in conversations; FILE: JSON lines with \"prompt\", or ShareGPT JSON",
         .destination = &c.dataset});
  t.add({.names = {"--input-len"},
         .value_name = "N",
         .help = "random: prompt length",
         .destination = &c.input_len,
         .min = 1});
  t.add({.names = {"--output-len"},
         .value_name = "N",
         .help = "tokens each request generates (ignore_eos)",
         .destination = &c.output_len,
         .min = 1});
  t.add({.names = {"--shared-prefix"},
         .value_name = "N",
         .help = "random: a prefix of N words every prompt starts with",
         .destination = &c.shared_prefix_len,
         .min = 0});
  t.add({.names = {"--num-prompts"},
         .value_name = "N",
         .help = "requests per point",
         .destination = &c.num_prompts,
         .min = 1});
  t.add({.names = {"--seed"}, .value_name = "N", .help = "prompts and arrival times", .destination = &c.seed});
  t.begin_group("load");
  t.add({.names = {"--request-rate"},
         .value_name = "R|inf",
         .help = "requests per second (open loop); inf: all at once",
         .destination = number_setter(&c.request_rate, true),
         .default_text = "inf"});
  t.add({.names = {"--burstiness"},
         .value_name = "B",
         .help = "gamma shape of the gaps between arrivals; 1: Poisson",
         .destination = number_setter(&c.burstiness, false),
         .default_text = "1"});
  t.add({.names = {"--max-concurrency"},
         .value_name = "C",
         .help = "requests in flight at most (closed loop)",
         .destination = &c.max_concurrency,
         .min = 1,
         .default_text = "no cap"});
  t.add({.names = {"--sweep-concurrency"},
         .value_name = "C,...",
         .help = "one point per concurrency (rate inf)",
         .destination = &o->sweep,
         .min = 1});
  t.add({.names = {"--goodput"},
         .value_name = "ttft:MS,tpot:MS",
         .help = "SLOs (ttft, tpot, e2el in ms) for goodput: requests/s meeting all of them",
         .destination = CustomSetter([o](std::string_view option, std::string_view v) -> std::string {
           auto slo = parse_goodput(std::string(v));
           if (!slo) return std::string(option) + ": " + slo.error_message();
           o->config.goodput = *slo;
           return {};
         })});
  t.add({.names = {"--scrape-interval"},
         .value_name = "S",
         .help = "seconds between /metrics scrapes during a point",
         .destination = number_setter(&c.scrape_interval_seconds, false),
         .default_text = "1"});
  t.begin_group("output");
  add_json_option(t, &o->is_json, "print the whole result (every request and scrape) as JSON");
  t.add({.names = {"--label"},
         .value_name = "TEXT",
         .help = "a name for the run in the store (\"vLLM tp=2\")",
         .destination = &o->label});
  t.add({.names = {"--list"}, .help = "print the recorded runs", .destination = &o->is_list});
  add_results_store_options(t, &o->is_store_skipped, &o->db, "the run");
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  if (o->is_list) return -1;
  if (c.endpoint.base_url.empty()) return report_usage_error(t, "no server given (--base-url http://host:8000)");
  if (!o->sweep.empty() && c.max_concurrency > 0) {
    return report_usage_error(t, "give --max-concurrency or --sweep-concurrency, not both");
  }
  c.sweep_concurrency.assign(o->sweep.begin(), o->sweep.end());
  c.endpoint.api_key = o->api_key;
  if (c.endpoint.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY"); env) c.endpoint.api_key = env;
  }
  return -1;
}

int list_runs(const Options& o) {
  if (!std::filesystem::exists(o.db)) {
    std::fprintf(stderr, "iwb bench-serve: no results store at %s\n", o.db.c_str());
    return 1;
  }
  auto db = ResultsStore::open(o.db);
  auto runs = db ? (*db)->list_serve_runs() : Result<std::vector<ResultsStore::ServeRunSummary>>(db.status());
  if (!runs) {
    std::fprintf(stderr, "iwb bench-serve: %s\n", runs.error_message().c_str());
    return 1;
  }
  if (o.is_json) {
    JsonWriter j;
    j.begin_array();
    for (const auto& r : *runs) {
      j.begin_object().field("id", r.id).field("status", r.status).field("started_at", r.started_at);
      j.field("base_url", r.base_url).field("model", r.model).field("server_kind", r.server_kind);
      j.field("label", r.label).field("num_points", r.num_points).end_object();
    }
    j.end_array();
    std::printf("%s\n", j.str().c_str());
    return 0;
  }
  std::printf("%5s  %-20s  %-11s  %-12s  %6s  %-24s %s\n", "id", "started", "status", "server", "points", "model",
              "url (label)");
  for (const auto& r : *runs) {
    std::printf("%5lld  %-20s  %-11s  %-12s  %6d  %-24s %s%s\n", static_cast<long long>(r.id), r.started_at.c_str(),
                r.status.c_str(), r.server_kind.c_str(), r.num_points, r.model.c_str(), r.base_url.c_str(),
                r.label.empty() ? "" : (" (" + r.label + ")").c_str());
  }
  return 0;
}

std::atomic<bool> g_cancel{false};

void on_interrupt(int) {
  g_cancel = true;               // the load stops, the run is stored as interrupted
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

}  // namespace

int run_bench_serve(int argc, char** argv) {
  Options o;
  if (const int status = parse(argc, argv, &o); status >= 0) return status;
  if (o.is_list) return list_runs(o);

  // Recorded from the start, so a run cut short still shows in the store.
  std::unique_ptr<ResultsStore> store;
  int64_t run_id = 0;
  if (!o.is_store_skipped) {
    auto opened = ResultsStore::open(o.db);
    if (!opened) {
      std::fprintf(stderr, "iwb bench-serve: %s\n", opened.error_message().c_str());
      return 1;
    }
    store = std::move(*opened);
    auto id = store->begin_serve_run(o.config, o.label);
    if (!id) {
      std::fprintf(stderr, "iwb bench-serve: %s\n", id.error_message().c_str());
      return 1;
    }
    run_id = *id;
  }

  std::signal(SIGINT, on_interrupt);
  const bool is_tty = isatty(STDERR_FILENO) != 0;
  int last_point = -1;
  auto progress = [&](const BenchServeProgress& p) {
    if (p.point_index != last_point) {
      last_point = p.point_index;
      if (p.num_points > 1) {
        std::fprintf(stderr, "iwb bench-serve: point %d/%d, concurrency %lld\n", p.point_index + 1, p.num_points,
                     static_cast<long long>(p.point->max_concurrency));
      }
    }
    if (is_tty) {
      std::fprintf(stderr, "\r  %lld done, %lld failed of %lld   ", static_cast<long long>(p.point->num_completed),
                   static_cast<long long>(p.point->num_failed), static_cast<long long>(o.config.num_prompts));
    }
  };
  std::fprintf(stderr, "iwb bench-serve: %lld requests per point to %s\n", static_cast<long long>(o.config.num_prompts),
               o.config.endpoint.base_url.c_str());
  Result<BenchServeResult> result = run_bench_serve(o.config, progress, &g_cancel);
  std::signal(SIGINT, SIG_DFL);
  if (is_tty) std::fprintf(stderr, "\n");

  if (!result) {
    std::fprintf(stderr, "iwb bench-serve: %s\n", result.error_message().c_str());
    if (store) {
      BenchServeResult failed;
      failed.config = o.config;
      const Status finished = store->finish_serve_run(run_id, failed, "failed", result.error_message());
      if (!finished) std::fprintf(stderr, "iwb bench-serve: %s\n", finished.message().c_str());
    }
    return 1;
  }

  int64_t num_failed = 0, num_requests = 0;
  std::map<std::string, std::string> first_message;  // per error kind
  for (const BenchServePoint& p : result->points) {
    num_failed += p.num_failed;
    num_requests += static_cast<int64_t>(p.requests.size());
    for (const RequestRecord& r : p.requests) {
      if (r.error.kind != RemoteErrorKind::None)
        first_message.emplace(remote_error_kind_name(r.error.kind), r.error.message);
    }
  }
  const bool is_interrupted = g_cancel.load();
  if (store) {
    const std::string error = is_interrupted   ? "interrupted (Ctrl-C)"
                              : num_failed > 0 ? std::to_string(num_failed) + " requests failed"
                                               : "";
    const Status finished = store->finish_serve_run(run_id, *result, is_interrupted ? "interrupted" : "done", error);
    if (!finished) std::fprintf(stderr, "iwb bench-serve: %s\n", finished.message().c_str());
  }

  if (o.is_json) {
    std::string text = bench_serve_result_to_json(*result);
    if (run_id > 0) text = "{\"run_id\":" + std::to_string(run_id) + "," + text.substr(1);
    std::printf("%s\n", text.c_str());
  } else {
    for (size_t i = 0; i < result->points.size(); ++i) print_bench_serve_point(stdout, *result, i);
    if (result->points.size() > 1) print_bench_serve_sweep(stdout, *result);
  }
  if (result->server_kind == ServerKind::OpenAiNoMetrics) {
    std::fprintf(
        stderr,
        "iwb bench-serve: note: the server has no /metrics this program recognises; only the client's figures\n");
  }
  for (const auto& [kind, message] : first_message)
    std::fprintf(stderr, "iwb bench-serve: %s error: %s\n", kind.c_str(), message.c_str());
  if (store)
    std::fprintf(stderr, "iwb bench-serve: recorded as run %lld in %s\n", static_cast<long long>(run_id), o.db.c_str());
  if (is_interrupted) {
    std::fprintf(stderr, "iwb bench-serve: interrupted\n");
    return 130;
  }
  if (num_failed > 0) {
    std::fprintf(stderr, "iwb bench-serve: %lld of %lld requests failed\n", static_cast<long long>(num_failed),
                 static_cast<long long>(num_requests));
    return 1;
  }
  return 0;
}

}  // namespace iwb::cli
