// bench-serve's parts without a server: latency statistics against a brute-force reference,
// the per-request figures vLLM defines, goodput parsing, the arrival schedule's rate and
// burstiness measured on many samples, the datasets, the JSON round trip, and the results
// store's schema-6 tables (round trip, migration from a schema-5 file, abandoned runs).
#include "remote/bench_serve_internal.h"

#include "iwb/engine/store/results_store.h"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <numeric>
#include <random>

using namespace iwb;
using namespace iwb::remote;

namespace {

// The p-th percentile the slow way numpy's documentation states it: sort, take the two values
// around the fractional rank (n−1)·p/100, interpolate.
double reference_percentile(std::vector<double> v, double p) {
  for (size_t i = 0; i < v.size(); ++i) {  // selection sort: obviously right, not fast
    for (size_t j = i + 1; j < v.size(); ++j) {
      if (v[j] < v[i]) std::swap(v[i], v[j]);
    }
  }
  const double rank = (static_cast<double>(v.size()) - 1) * p / 100;
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = lo + 1 < v.size() ? lo + 1 : lo;
  return v[lo] * (1 - (rank - static_cast<double>(lo))) + v[hi] * (rank - static_cast<double>(lo));
}

void exec(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  QVERIFY(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  QVERIFY2(rc == SQLITE_OK, message.c_str());
}

StreamedCompletion completion(std::vector<double> token_seconds, double e2e, int64_t usage_tokens) {
  StreamedCompletion c;
  c.token_seconds = std::move(token_seconds);
  if (!c.token_seconds.empty()) c.ttft_seconds = c.token_seconds.front();
  c.e2e_seconds = e2e;
  c.completion_tokens = usage_tokens;
  c.finish_reason = "length";
  return c;
}

BenchServeResult sample_result() {
  BenchServeResult r;
  r.config.endpoint = {"http://127.0.0.1:9/v1", "secret-key", 3, 30};
  r.config.model = "m";
  r.config.sweep_concurrency = {1, 4};
  r.config.goodput.ttft_ms = 500;
  r.server_kind = ServerKind::Vllm;
  r.started_at = "2026-11-27T10:00:00Z";
  for (int i = 0; i < 2; ++i) {
    BenchServePoint p;
    p.max_concurrency = i == 0 ? 1 : 4;
    p.duration_seconds = 2;
    p.requests.push_back(make_request_record(completion({0.1, 0.2, 0.35}, 0.4, 3), 0.0, 10));
    StreamedCompletion broken = completion({0.1}, 0.2, -1);
    broken.error = {RemoteErrorKind::Dropped, 0, "broke"};
    p.requests.push_back(make_request_record(broken, 0.05, 10));
    summarise_point(&p, r.config.goodput);
    ServerSnapshot s;
    s.seconds = 1;
    s.kind = ServerKind::Vllm;
    s.kv_cache_usage = 0.25;
    s.spec_accepted_per_position = {5, 3};
    s.time_to_first_token = ScrapedHistogram{{0.1, std::numeric_limits<double>::infinity()}, {1, 2}, 0.3, 2};
    p.server_series.push_back(s);
    p.server_delta = s;
    r.points.push_back(p);
  }
  return r;
}

}  // namespace

class TestBenchServeCore : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

 private slots:
  void statsMatchABruteForceReference() {
    std::mt19937_64 rng(7);
    for (const size_t n : {size_t{1}, size_t{2}, size_t{5}, size_t{100}, size_t{1001}}) {
      std::vector<double> v(n);
      std::lognormal_distribution<double> d(3, 1);
      for (double& x : v) x = d(rng);
      const LatencyStats s = latency_stats(v);
      QCOMPARE(s.count, static_cast<int64_t>(n));
      QVERIFY(std::abs(s.mean - std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n)) < 1e-9 * s.mean);
      QCOMPARE(s.median, reference_percentile(v, 50));
      QCOMPARE(s.p90, reference_percentile(v, 90));
      QCOMPARE(s.p99, reference_percentile(v, 99));
      QCOMPARE(s.min, *std::min_element(v.begin(), v.end()));
      QCOMPARE(s.max, *std::max_element(v.begin(), v.end()));
    }
    // numpy.percentile([1, 2, 3, 4], [50, 90]) = [2.5, 3.7]
    const LatencyStats small = latency_stats({4, 1, 3, 2});
    QCOMPARE(small.median, 2.5);
    QVERIFY(std::abs(small.p90 - 3.7) < 1e-12);
    QCOMPARE(latency_stats({}).count, int64_t{0});
  }

  void requestFiguresAsVllmDefinesThem() {
    // Content at 100, 150, 300 and 400 ms, done at 450 ms; the server says 7 tokens.
    const RequestRecord r = make_request_record(completion({0.1, 0.15, 0.3, 0.4}, 0.45, 7), 1.5, 3);
    QCOMPARE(r.ttft_ms, 100.0);
    QCOMPARE(r.e2e_ms, 450.0);
    QCOMPARE(r.output_tokens, int64_t{7});            // usage wins over the chunk count
    QVERIFY(std::abs(r.tpot_ms - 350.0 / 6) < 1e-9);  // (e2e − ttft) / (tokens − 1)
    QCOMPARE(r.itl_ms.size(), size_t{3});             // gaps between content chunks
    QVERIFY(std::abs(r.itl_ms[1] - 150.0) < 1e-9);
    QCOMPARE(r.prompt_tokens, int64_t{3});  // no usage: the word count stands in
    // Without usage every content chunk counts as one token.
    QCOMPARE(make_request_record(completion({0.1, 0.2}, 0.3, -1), 0, 0).output_tokens, int64_t{2});
    // One token: no TPOT; no content at all: a failure (vLLM's benchmark counts it so too).
    QCOMPARE(make_request_record(completion({0.1}, 0.1, 1), 0, 0).tpot_ms, 0.0);
    QCOMPARE(make_request_record(completion({}, 0.1, 0), 0, 0).error.kind, RemoteErrorKind::Malformed);
  }

  void summarisesAPoint() {
    BenchServePoint p;
    p.duration_seconds = 2;
    p.requests.push_back(make_request_record(completion({0.1, 0.2, 0.3}, 0.4, 3), 0, 10));  // ttft 100, tpot 150
    p.requests.push_back(make_request_record(completion({0.6, 0.7, 0.8}, 0.9, 3), 0, 20));  // ttft 600, tpot 150
    p.requests.push_back(make_request_record(completion({0.1, 0.5, 0.9}, 1.3, 3), 0, 30));  // ttft 100, tpot 600
    StreamedCompletion failed = completion({}, 0.1, -1);
    failed.error = {RemoteErrorKind::HttpError, 503, "busy"};
    p.requests.push_back(make_request_record(failed, 0, 40));
    GoodputSlo slo;
    slo.ttft_ms = 500;
    slo.tpot_ms = 200;
    summarise_point(&p, slo);
    QCOMPARE(p.num_completed, int64_t{3});
    QCOMPARE(p.num_failed, int64_t{1});
    QCOMPARE(p.errors_by_kind.at("http"), int64_t{1});
    QCOMPARE(p.total_input_tokens, int64_t{60});
    QCOMPARE(p.total_output_tokens, int64_t{9});
    QCOMPARE(p.request_throughput, 1.5);
    QCOMPARE(p.output_throughput, 4.5);
    QCOMPARE(p.total_token_throughput, 34.5);
    QCOMPARE(p.goodput, 0.5);  // only the first meets both SLOs
    QCOMPARE(p.ttft.count, int64_t{3});
    QCOMPARE(p.itl.count, int64_t{6});
  }

  void parsesGoodput() {
    auto slo = parse_goodput("ttft:500,tpot:50");
    QVERIFY2(slo.is_ok(), slo.error_message().c_str());
    QCOMPARE(*slo->ttft_ms, 500.0);
    QCOMPARE(*slo->tpot_ms, 50.0);
    QVERIFY(!slo->e2el_ms);
    auto spaced = parse_goodput("e2el:2500.5 TTFT:100");  // vLLM's own spelling: space-separated
    QVERIFY(spaced.is_ok());
    QCOMPARE(*spaced->e2el_ms, 2500.5);
    QCOMPARE(*spaced->ttft_ms, 100.0);
    for (const char* bad : {"", "ttft", "ttft:", "ttft:abc", "ttft:-5", "itl:5", "ttft:5,ttft:6", "ttft:5ms"}) {
      auto r = parse_goodput(bad);
      QVERIFY2(!r.is_ok(), bad);
      QVERIFY(!r.error_message().empty());
    }
  }

  void arrivalsHaveTheRateAndShapeAsked() {
    for (const double burstiness : {1.0, 0.25, 4.0}) {
      const int64_t n = 20000;
      const double rate = 8;
      const std::vector<double> t = arrival_offsets(n, rate, burstiness, 42);
      QCOMPARE(t.front(), 0.0);
      std::vector<double> gaps;
      for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
      const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / static_cast<double>(gaps.size());
      double var = 0;
      for (const double g : gaps) var += (g - mean) * (g - mean);
      var /= static_cast<double>(gaps.size() - 1);
      // A gamma of shape k has mean k·θ = 1/rate and squared coefficient of variation 1/k.
      QVERIFY2(std::abs(mean * rate - 1) < 0.05, QByteArray::number(mean * rate));
      const double cv2 = var / (mean * mean);
      QVERIFY2(std::abs(cv2 * burstiness - 1) < 0.1, QByteArray::number(cv2 * burstiness));
    }
    QCOMPARE(arrival_offsets(5, 0, 1, 1), std::vector<double>(5, 0.0));    // rate inf: all at once
    QCOMPARE(arrival_offsets(50, 3, 1, 9), arrival_offsets(50, 3, 1, 9));  // reproducible from the seed
  }

  void makesPromptsOfEachDataset() {
    BenchServeConfig c;
    c.num_prompts = 20;
    c.input_len = 50;
    c.shared_prefix_len = 30;
    auto random = make_bench_prompts(c);
    QVERIFY2(random.is_ok(), random.error_message().c_str());
    QCOMPARE(random->size(), size_t{20});
    const std::string prefix = (*random)[0].prompt.substr(0, (*random)[0].prompt.find(' ', 0));
    for (const BenchPrompt& p : *random) {
      QVERIFY(!p.is_chat);
      QCOMPARE(p.approx_prompt_tokens, int64_t{80});
      // Every prompt starts with the same 30 words and differs after them.
      QCOMPARE(p.prompt.substr(0, 60), (*random)[0].prompt.substr(0, 60));
    }
    QVERIFY((*random)[0].prompt != (*random)[1].prompt);

    c.dataset = "chat";
    auto chat = make_bench_prompts(c);
    QVERIFY(chat.is_ok() && chat->size() == 20);
    QVERIFY((*chat)[0].is_chat && (*chat)[0].messages.back().role == "user");

    const std::string jsonl = m_tmp.filePath("prompts.jsonl").toStdString();
    std::ofstream(jsonl) << "{\"prompt\": \"one two three\"}\n\n{\"prompt\": \"four\"}\n";
    c.dataset = jsonl;
    auto lines = make_bench_prompts(c);
    QVERIFY2(lines.is_ok(), lines.error_message().c_str());
    QCOMPARE(lines->size(), size_t{20});  // two prompts, repeated
    const std::string sharegpt = m_tmp.filePath("sharegpt.json").toStdString();
    std::ofstream(sharegpt) << R"([{"id": "a", "conversations": [{"from": "human", "value": "Hello there"},
                                  {"from": "gpt", "value": "Hi"}]}, {"id": "b", "conversations": []}])";
    c.dataset = sharegpt;
    auto conv = make_bench_prompts(c);
    QVERIFY2(conv.is_ok(), conv.error_message().c_str());
    QCOMPARE((*conv)[3].messages.at(0).content, std::string("Hello there"));

    const std::string empty = m_tmp.filePath("empty.jsonl").toStdString();
    std::ofstream(empty) << "{\"text\": \"no prompt key\"}\n";
    c.dataset = empty;
    QVERIFY(make_bench_prompts(c).error_message().find("no prompts") != std::string::npos);
    c.dataset = m_tmp.filePath("absent.jsonl").toStdString();
    QCOMPARE(make_bench_prompts(c).status().code(), ErrorCode::NotFound);
  }

  void jsonRoundTripKeepsEverythingButTheKey() {
    const BenchServeResult r = sample_result();
    const std::string text = bench_serve_result_to_json(r);
    QVERIFY(text.find("secret-key") == std::string::npos);
    auto back = bench_serve_result_from_json(text);
    QVERIFY2(back.is_ok(), back.error_message().c_str());
    QCOMPARE(bench_serve_result_to_json(*back), text);
    QCOMPARE(back->points[1].requests[1].error.kind, RemoteErrorKind::Dropped);
    QVERIFY(std::isinf(back->points[0].server_delta->time_to_first_token->upper_bounds.back()));
    QVERIFY(!back->points[0].server_delta->num_requests_running);  // absent stays absent
    QVERIFY(!bench_serve_result_from_json("[1]").is_ok());
  }

  void storeRoundTripAndMigrationFromVersion5() {
    const std::string path = m_tmp.filePath("v5.sqlite").toStdString();
    {
      auto store = ResultsStore::open(path);
      QVERIFY(store.is_ok());
    }
    // A version-5 file: this program's file without the version-6 tables, with a probe.
    exec(
        path,
        "DROP TABLE serve_points; DROP TABLE serve_runs;"
        "INSERT INTO probes (device_id, device_name, date, num_threads, copy_bytes_per_s, triad_bytes_per_s,"
        " peak_flops, peak_flops_kind, buffer_bytes) VALUES ('cpu', 'Old', '2026-01-01T00:00:00Z', 2, 1, 1, 1, 'x', 1);"
        "PRAGMA user_version = 5;");
    auto store = ResultsStore::open(path);
    QVERIFY2(store.is_ok(), store.error_message().c_str());
    QCOMPARE(*(*store)->file_schema_version(), ResultsStore::schema_version());
    QCOMPARE((*store)->list_probes()->size(), size_t{1});

    const BenchServeResult r = sample_result();
    auto id = (*store)->begin_serve_run(r.config, "vLLM tp=2");
    QVERIFY2(id.is_ok(), id.error_message().c_str());
    auto listed = (*store)->list_serve_runs();
    QCOMPARE(listed->size(), size_t{1});
    QCOMPARE(listed->front().status, std::string("running"));
    QVERIFY((*store)->finish_serve_run(*id, r, "done").is_ok());
    QVERIFY(!(*store)->finish_serve_run(*id, r, "running").is_ok());
    QCOMPARE((*store)->finish_serve_run(*id + 100, r, "done").code(), ErrorCode::NotFound);

    store = ResultsStore::open(path);  // a fresh connection reads what the first wrote
    listed = (*store)->list_serve_runs();
    QCOMPARE(listed->front().status, std::string("done"));
    QCOMPARE(listed->front().label, std::string("vLLM tp=2"));
    QCOMPARE(listed->front().server_kind, std::string(server_kind_name(ServerKind::Vllm)));
    QCOMPARE(listed->front().num_points, 2);
    QCOMPARE(listed->front().base_url, r.config.endpoint.base_url);
    auto back = (*store)->serve_run(*id);
    QVERIFY2(back.is_ok(), back.error_message().c_str());
    QCOMPARE(back->started_at.empty(), false);
    BenchServeResult expected = r;
    expected.started_at = back->started_at;  // the store's own clock
    QCOMPARE(bench_serve_result_to_json(*back), bench_serve_result_to_json(expected));
    QCOMPARE((*store)->serve_run(*id + 100).status().code(), ErrorCode::NotFound);
  }

  void runsOfDeadWritersBecomeInterrupted() {
    const std::string path = m_tmp.filePath("abandoned.sqlite").toStdString();
    auto store = ResultsStore::open(path);
    QVERIFY(store.is_ok());
    BenchServeConfig c;
    c.endpoint.base_url = "http://x";
    const int64_t mine = *(*store)->begin_serve_run(c, "alive");
    const int64_t exited = *(*store)->begin_serve_run(c, "exited");
    const int64_t rebooted = *(*store)->begin_serve_run(c, "rebooted");
    const int64_t unknown = *(*store)->begin_serve_run(c, "unknown writer");
    // A child that has exited (and been reaped) stands for a crashed `iwb bench-serve`.
    const pid_t child = fork();
    if (child == 0) _exit(0);
    QVERIFY(child > 0);
    waitpid(child, nullptr, 0);
    const std::string sql =
        "UPDATE serve_runs SET writer_pid = " + std::to_string(child) + " WHERE id = " + std::to_string(exited) +
        "; UPDATE serve_runs SET writer_boot_id = 'another-boot' WHERE id = " + std::to_string(rebooted) +
        "; UPDATE serve_runs SET writer_start_ticks = 0 WHERE id = " + std::to_string(unknown) + ";";
    exec(path, sql.c_str());
    store = ResultsStore::open(path);
    QVERIFY(store.is_ok());
    std::map<std::string, std::string> status;
    auto runs = (*store)->list_serve_runs();
    QVERIFY(runs.is_ok());
    for (const auto& r : *runs) status[r.label] = r.status;
    QCOMPARE(status["alive"], std::string("running"));  // this process still holds it
    QCOMPARE(status["exited"], std::string("interrupted"));
    QCOMPARE(status["rebooted"], std::string("interrupted"));
    QCOMPARE(status["unknown writer"], std::string("running"));  // cannot tell: left alone
    Q_UNUSED(mine);
  }
};

QTEST_GUILESS_MAIN(TestBenchServeCore)
#include "test_bench_serve_core.moc"
