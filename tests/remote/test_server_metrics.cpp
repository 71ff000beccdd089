// Server-kind detection and the mapping of each server's metric names onto ServerSnapshot, on the
// fixtures in each server's format (their numbers are known: fixtures/README.md), plus summing over
// label sets, histogram merging and counter_difference.
#include "iwb/engine/remote/server_metrics.h"

#include <QTest>

#include <cmath>
#include <fstream>
#include <sstream>
#include "test_paths.h"

using namespace iwb::remote;

namespace {

std::string read_fixture(const std::string& name) {
  std::ifstream in(iwb::test::from_build_dir(IWB_REMOTE_FIXTURES_FROM_BUILD) + "/" + name, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<MetricFamily> families_of(const std::string& text) {
  auto r = parse_prometheus_text(text);
  if (!r) qWarning("%s", r.error_message().c_str());
  return r ? std::move(r).value() : std::vector<MetricFamily>{};
}

ServerSnapshot fixture(const std::string& name) {
  const std::string text = read_fixture(name);
  if (text.empty()) qWarning("fixture %s is missing or empty", name.c_str());
  return map_server_metrics(families_of(text));
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(b)); }

// The cumulative count at upper bound `le`; -1 when the histogram has no such bound.
double bucket(const ScrapedHistogram& h, double le) {
  for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
    if (h.upper_bounds[i] == le) return h.cumulative_counts[i];
  }
  return -1;
}

}  // namespace

#define COMPARE_OPT(opt, expected)                                                                \
  do {                                                                                            \
    QVERIFY2((opt).has_value(), #opt);                                                            \
    QVERIFY2(near(*(opt), expected), (std::string(#opt " = ") + std::to_string(*(opt))).c_str()); \
  } while (0)

class TestServerMetrics : public QObject {
  Q_OBJECT

 private slots:
  void kindFromPrefixes() {
    QCOMPARE(fixture("vllm.prom").kind, ServerKind::Vllm);
    QCOMPARE(fixture("vllm_0_8.prom").kind, ServerKind::Vllm);
    QCOMPARE(fixture("sglang.prom").kind, ServerKind::Sglang);
    QCOMPARE(fixture("llamacpp.prom").kind, ServerKind::LlamaCpp);
    QCOMPARE(fixture("llamacpp_old.prom").kind, ServerKind::LlamaCpp);
    QCOMPARE(fixture("iwb.prom").kind, ServerKind::Iwb);
    QCOMPARE(detect_server_kind({}), ServerKind::OpenAiNoMetrics);
    // Only a process's own metrics: nothing we recognise.
    QCOMPARE(detect_server_kind(families_of("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3\n"
                                            "python_info{version=\"3.11\"} 1\n")),
             ServerKind::OpenAiNoMetrics);
    // A gateway that passes a few names of another engine on: the prefix most families carry.
    QCOMPARE(detect_server_kind(families_of("vllm:a 1\nsglang:b 1\nsglang:c 1\n")), ServerKind::Sglang);
    QCOMPARE(std::string(server_kind_name(ServerKind::LlamaCpp)), std::string("llama-server"));
    QCOMPARE(std::string(server_kind_name(ServerKind::Iwb)), std::string("iwb serve"));
    QCOMPARE(std::string(server_kind_name(ServerKind::OpenAiNoMetrics)), std::string("OpenAI-compatible, no metrics"));
    const ServerSnapshot none = map_server_metrics(families_of("go_goroutines 12\n"));
    QCOMPARE(none.kind, ServerKind::OpenAiNoMetrics);
    QVERIFY(!none.generation_tokens && !none.num_requests_running && !none.time_to_first_token);
  }

  // Two data-parallel engines (engine="0", "1") with speculative decoding: counters add up, the
  // KV-cache fraction is their mean.
  void vllm() {
    const ServerSnapshot s = fixture("vllm.prom");
    COMPARE_OPT(s.num_requests_running, 5);
    COMPARE_OPT(s.num_requests_waiting, 1);
    COMPARE_OPT(s.kv_cache_usage, 0.5);
    COMPARE_OPT(s.prefix_cache_queries, 1600);
    COMPARE_OPT(s.prefix_cache_hits, 500);
    COMPARE_OPT(s.num_preemptions, 3);
    COMPARE_OPT(s.prompt_tokens, 8000);
    COMPARE_OPT(s.generation_tokens, 2000);
    COMPARE_OPT(s.num_requests_finished, 21);  // stop 15, length 5, abort 1
    COMPARE_OPT(s.spec_num_drafts, 500);
    COMPARE_OPT(s.spec_num_draft_tokens, 1500);
    COMPARE_OPT(s.spec_num_accepted_tokens, 800);
    QCOMPARE(s.spec_accepted_per_position, (std::vector<double>{400, 250, 150}));
    QVERIFY(s.time_to_first_token);
    const ScrapedHistogram& ttft = *s.time_to_first_token;
    QCOMPARE(ttft.upper_bounds.size(), size_t(23));  // vLLM's 22 bounds and +Inf
    QVERIFY(std::isinf(ttft.upper_bounds.back()));
    QCOMPARE(ttft.cumulative_counts.back(), 6.0);
    QCOMPARE(ttft.count, 6.0);
    QVERIFY(near(ttft.sum, 2.15));
    QCOMPARE(bucket(ttft, 0.04), 1.0);  // 0.03
    QCOMPARE(bucket(ttft, 0.1), 3.0);   // 0.03, 0.05, 0.07
    QCOMPARE(bucket(ttft, 1.0), 5.0);   // all but 1.5
    QVERIFY(s.inter_token_latency);
    QCOMPARE(s.inter_token_latency->count, 10.0);
    QCOMPARE(bucket(*s.inter_token_latency, 0.025), 8.0);
    QVERIFY(s.e2e_request_latency);
    QCOMPARE(s.e2e_request_latency->count, 3.0);
    QVERIFY(near(s.e2e_request_latency->sum, 18.0));
    QCOMPARE(bucket(*s.e2e_request_latency, 10.0), 2.0);
    QCOMPARE(bucket(*s.e2e_request_latency, 15.0), 3.0);
  }

  // vLLM before the renames: gpu_cache_usage_perc, gpu_prefix_cache_*, time_per_output_token.
  void vllmOldNames() {
    const ServerSnapshot s = fixture("vllm_0_8.prom");
    COMPARE_OPT(s.kv_cache_usage, 0.25);
    COMPARE_OPT(s.prefix_cache_queries, 1000);
    COMPARE_OPT(s.prefix_cache_hits, 400);
    COMPARE_OPT(s.num_requests_finished, 15);
    QVERIFY(s.inter_token_latency);
    QCOMPARE(s.inter_token_latency->count, 7.0);
    QVERIFY(!s.spec_num_drafts && !s.spec_num_draft_tokens && !s.spec_num_accepted_tokens);
    QVERIFY(s.spec_accepted_per_position.empty());
  }

  void sglang() {
    const ServerSnapshot s = fixture("sglang.prom");
    COMPARE_OPT(s.num_requests_running, 12);
    COMPARE_OPT(s.num_requests_waiting, 3);
    COMPARE_OPT(s.kv_cache_usage, 0.42);
    COMPARE_OPT(s.num_preemptions, 4);
    COMPARE_OPT(s.prefix_cache_hits, 7000);
    COMPARE_OPT(s.prefix_cache_queries, 20000);
    COMPARE_OPT(s.prompt_tokens, 20000);
    COMPARE_OPT(s.generation_tokens, 6000);
    COMPARE_OPT(s.num_requests_finished, 40);
    // Speculative decoding is gauges only there (spec_accept_length, spec_accept_rate).
    QVERIFY(!s.spec_num_drafts && !s.spec_num_draft_tokens && !s.spec_num_accepted_tokens);
    QVERIFY(s.spec_accepted_per_position.empty());
    QVERIFY(s.time_to_first_token && s.inter_token_latency && s.e2e_request_latency);
    QCOMPARE(s.time_to_first_token->count, 5.0);
    QVERIFY(near(s.time_to_first_token->sum, 3.6));
    QCOMPARE(bucket(*s.time_to_first_token, 0.2), 2.0);
    QCOMPARE(s.inter_token_latency->count, 8.0);
    QCOMPARE(s.e2e_request_latency->count, 3.0);
    QVERIFY(near(s.e2e_request_latency->sum, 13.5));
  }

  // Without sglang:cached_tokens_total (older SGLang) there are no prefix-cache counters: the
  // cache_hit_rate gauge is not turned into any.
  void sglangWithoutCachedTokens() {
    const ServerSnapshot s = map_server_metrics(
        families_of("# TYPE sglang:cache_hit_rate gauge\nsglang:cache_hit_rate{model_name=\"m\"} 0.5\n"
                    "# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total{model_name=\"m\"} 10\n"));
    QCOMPARE(s.kind, ServerKind::Sglang);
    COMPARE_OPT(s.prompt_tokens, 10);
    QVERIFY(!s.prefix_cache_hits && !s.prefix_cache_queries);
  }

  // llama-server prints with ostream's 6 significant digits: 1.23457e+06.
  void llamaServer() {
    const ServerSnapshot s = fixture("llamacpp.prom");
    COMPARE_OPT(s.num_requests_running, 2);
    COMPARE_OPT(s.num_requests_waiting, 1);
    COMPARE_OPT(s.prompt_tokens, 1234570);
    COMPARE_OPT(s.prefix_cache_hits, 45678);
    COMPARE_OPT(s.prefix_cache_queries, 1234570 + 45678);
    COMPARE_OPT(s.generation_tokens, 345678);
    COMPARE_OPT(s.spec_num_drafts, 30000);
    COMPARE_OPT(s.spec_num_draft_tokens, 120000);
    COMPARE_OPT(s.spec_num_accepted_tokens, 84000);
    QCOMPARE(s.spec_accepted_per_position, (std::vector<double>{27000, 24000, 19000, 14000}));
    // What llama-server does not export stays empty.
    QVERIFY(!s.kv_cache_usage);
    QVERIFY(!s.num_preemptions);
    QVERIFY(!s.num_requests_finished);
    QVERIFY(!s.time_to_first_token && !s.inter_token_latency && !s.e2e_request_latency);
  }

  void llamaServerOldBuild() {
    const ServerSnapshot s = fixture("llamacpp_old.prom");
    COMPARE_OPT(s.kv_cache_usage, 0.3125);
    COMPARE_OPT(s.prompt_tokens, 18432);
    COMPARE_OPT(s.generation_tokens, 9876);
    COMPARE_OPT(s.num_requests_running, 1);
    COMPARE_OPT(s.num_requests_waiting, 0);
    QVERIFY(!s.prefix_cache_hits && !s.prefix_cache_queries);
    QVERIFY(!s.spec_num_drafts && s.spec_accepted_per_position.empty());
  }

  // Captured from `iwb serve --spec self` after four requests (README.md).
  void iwbServe() {
    const ServerSnapshot s = fixture("iwb.prom");
    COMPARE_OPT(s.num_requests_running, 0);
    COMPARE_OPT(s.kv_cache_usage, 0);
    COMPARE_OPT(s.prefix_cache_queries, 92);
    COMPARE_OPT(s.prefix_cache_hits, 32);
    COMPARE_OPT(s.prompt_tokens, 60);
    COMPARE_OPT(s.generation_tokens, 52);
    COMPARE_OPT(s.num_preemptions, 0);
    COMPARE_OPT(s.num_requests_finished, 4);
    COMPARE_OPT(s.spec_num_drafts, 11);
    COMPARE_OPT(s.spec_num_draft_tokens, 38);
    COMPARE_OPT(s.spec_num_accepted_tokens, 35);
    QCOMPARE(s.spec_accepted_per_position, (std::vector<double>{10, 9, 8, 8}));
    QVERIFY(s.time_to_first_token && s.inter_token_latency && s.e2e_request_latency);
    QCOMPARE(s.time_to_first_token->count, 4.0);
    QCOMPARE(s.inter_token_latency->count, 48.0);
    QCOMPARE(s.e2e_request_latency->count, 4.0);
  }

  // Several models behind one server add up; histograms with different bounds keep the bounds
  // all of them have.
  void sumsOverLabelSets() {
    const ServerSnapshot s = map_server_metrics(families_of(
        "# TYPE iwb:generation_tokens_total counter\n"
        "iwb:generation_tokens_total{model_name=\"a\"} 10\niwb:generation_tokens_total{model_name=\"b\"} 32\n"
        "# TYPE iwb:time_to_first_token_seconds histogram\n"
        "iwb:time_to_first_token_seconds_bucket{model_name=\"a\",le=\"0.1\"} 1\n"
        "iwb:time_to_first_token_seconds_bucket{model_name=\"a\",le=\"0.5\"} 2\n"
        "iwb:time_to_first_token_seconds_bucket{model_name=\"a\",le=\"+Inf\"} 3\n"
        "iwb:time_to_first_token_seconds_sum{model_name=\"a\"} 1.5\n"
        "iwb:time_to_first_token_seconds_count{model_name=\"a\"} 3\n"
        "iwb:time_to_first_token_seconds_bucket{model_name=\"b\",le=\"0.5\"} 4\n"
        "iwb:time_to_first_token_seconds_bucket{model_name=\"b\",le=\"+Inf\"} 5\n"
        "iwb:time_to_first_token_seconds_sum{model_name=\"b\"} 2\n"
        "iwb:time_to_first_token_seconds_count{model_name=\"b\"} 5\n"));
    COMPARE_OPT(s.generation_tokens, 42);
    QVERIFY(!s.prompt_tokens);
    QVERIFY(s.time_to_first_token);
    QCOMPARE(s.time_to_first_token->upper_bounds.size(), size_t(2));
    QCOMPARE(s.time_to_first_token->upper_bounds[0], 0.5);
    QCOMPARE(s.time_to_first_token->cumulative_counts, (std::vector<double>{6, 8}));
    QCOMPARE(s.time_to_first_token->count, 8.0);
    QCOMPARE(s.time_to_first_token->sum, 3.5);
  }

  void differenceOfTwoScrapes() {
    ServerSnapshot a, b;
    a.seconds = 1;
    b.seconds = 5;
    a.kind = b.kind = ServerKind::Vllm;
    a.generation_tokens = 100;
    b.generation_tokens = 150;
    a.prompt_tokens = 500;
    b.prompt_tokens = 20;         // went down: the server restarted, 20 since
    b.num_requests_finished = 7;  // not exported before: its first events
    a.num_preemptions = 3;        // gone: not reported
    a.num_requests_running = 9;
    b.num_requests_running = 2;
    a.kv_cache_usage = 0.9;
    a.spec_accepted_per_position = {5};
    b.spec_accepted_per_position = {8, 4};
    a.time_to_first_token = ScrapedHistogram{{0.1, INFINITY}, {1, 2}, 0.5, 2};
    b.time_to_first_token = ScrapedHistogram{{0.1, INFINITY}, {4, 6}, 2.0, 6};
    a.e2e_request_latency = ScrapedHistogram{{1, INFINITY}, {1, 1}, 0.5, 1};
    b.e2e_request_latency = ScrapedHistogram{{2, INFINITY}, {3, 3}, 3.0, 3};  // other bounds: b's

    const ServerSnapshot d = counter_difference(a, b);
    QCOMPARE(d.seconds, 5.0);
    QCOMPARE(d.kind, ServerKind::Vllm);
    COMPARE_OPT(d.generation_tokens, 50);
    COMPARE_OPT(d.prompt_tokens, 20);
    COMPARE_OPT(d.num_requests_finished, 7);
    QVERIFY(!d.num_preemptions);
    COMPARE_OPT(d.num_requests_running, 2);  // gauges: b's
    QVERIFY(!d.kv_cache_usage);
    QCOMPARE(d.spec_accepted_per_position, (std::vector<double>{3, 4}));
    QVERIFY(d.time_to_first_token);
    QCOMPARE(d.time_to_first_token->cumulative_counts, (std::vector<double>{3, 4}));
    QCOMPARE(d.time_to_first_token->count, 4.0);
    QCOMPARE(d.time_to_first_token->sum, 1.5);
    QVERIFY(d.e2e_request_latency);
    QCOMPARE(d.e2e_request_latency->count, 3.0);
    QVERIFY(!d.inter_token_latency);
  }

  // The difference of a fixture with itself: every counter 0, every histogram empty.
  void differenceOfAFixtureWithItself() {
    const ServerSnapshot s = fixture("vllm.prom");
    const ServerSnapshot d = counter_difference(s, s);
    COMPARE_OPT(d.generation_tokens, 0);
    COMPARE_OPT(d.num_requests_finished, 0);
    COMPARE_OPT(d.num_requests_running, 5);
    QCOMPARE(d.spec_accepted_per_position, (std::vector<double>{0, 0, 0}));
    QVERIFY(d.time_to_first_token);
    QCOMPARE(d.time_to_first_token->count, 0.0);
    for (const double c : d.time_to_first_token->cumulative_counts) QCOMPARE(c, 0.0);
  }
};

QTEST_GUILESS_MAIN(TestServerMetrics)
#include "test_server_metrics.moc"
