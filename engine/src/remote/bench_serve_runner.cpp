// run_bench_serve: per point, a pool of request threads (as many as may be in flight) sends the
// prompts at their arrival times, a scraper thread reads /metrics every scrape interval, and the
// point is summarised when the last request ends. Cancelling stops new requests at once and
// breaks the streams in flight.
#include "bench_serve_internal.h"
#include "iwb/engine/profile/machine_probe.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <thread>

namespace iwb::remote {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxRequestThreads = 256;  // without a cap, at most this many requests in flight

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The request every benchmark prompt becomes: greedy, as vLLM's benchmark sends it, and with
// ignore_eos so each generates exactly output_len tokens.
RemoteRequest bench_request(const BenchServeConfig& config, const BenchPrompt& prompt) {
  RemoteRequest request;
  request.model = config.model;
  request.is_chat = prompt.is_chat;
  request.messages = prompt.messages;
  request.prompt = prompt.prompt;
  request.max_tokens = config.output_len;
  request.temperature = 0.0;
  request.ignore_eos = true;
  return request;
}

// One /metrics scrape mapped onto ServerSnapshot; nullopt when the server has none (or garbage).
std::optional<ServerSnapshot> scrape(const OpenAiClient& client, double seconds) {
  auto text = client.fetch_metrics_text();
  if (!text) return std::nullopt;
  auto families = parse_prometheus_text(*text);
  if (!families) return std::nullopt;
  ServerSnapshot s = map_server_metrics(*families);
  s.kind = detect_server_kind(*families);
  s.seconds = seconds;
  return s;
}

Status validate(const BenchServeConfig& c) {
  if (c.endpoint.base_url.empty()) return make_error(ErrorCode::InvalidArgument, "no server URL given");
  if (c.num_prompts < 1) return make_error(ErrorCode::InvalidArgument, "the number of prompts must be at least 1");
  if (c.output_len < 1) return make_error(ErrorCode::InvalidArgument, "the output length must be at least 1");
  if (c.request_rate < 0)
    return make_error(ErrorCode::InvalidArgument, "the request rate cannot be negative (0 or inf: all at once)");
  if (!(c.burstiness > 0))
    return make_error(ErrorCode::InvalidArgument, "the burstiness must be above 0 (1 = Poisson)");
  if (c.max_concurrency < 0) return make_error(ErrorCode::InvalidArgument, "the concurrency cap cannot be negative");
  for (const int64_t v : c.sweep_concurrency) {
    if (v < 1) return make_error(ErrorCode::InvalidArgument, "every swept concurrency must be at least 1");
  }
  return {};
}

class PointRunner {
 public:
  PointRunner(const BenchServeConfig& config, const OpenAiClient& client, const std::vector<BenchPrompt>& prompts,
              BenchServePoint* point, bool has_metrics, const std::function<void(const BenchServePoint&)>& progress,
              const std::atomic<bool>* cancel)
      : m_config(config),
        m_client(client),
        m_prompts(prompts),
        m_point(*point),
        m_has_metrics(has_metrics),
        m_progress(progress),
        m_cancel(cancel) {}

  void run() {
    const std::optional<ServerSnapshot> before = m_has_metrics ? scrape(m_client, 0) : std::nullopt;
    if (before) m_point.server_series.push_back(*before);
    m_arrivals = arrival_offsets(static_cast<int64_t>(m_prompts.size()), m_point.request_rate, m_config.burstiness,
                                 m_config.seed);
    m_start = Clock::now();
    std::thread scraper;
    if (m_has_metrics && m_config.scrape_interval_seconds > 0) scraper = std::thread([this] { scrape_loop(); });

    const int64_t cap = m_point.max_concurrency > 0 ? m_point.max_concurrency : kMaxRequestThreads;
    const int64_t num_threads = std::min<int64_t>(cap, static_cast<int64_t>(m_prompts.size()));
    std::vector<std::thread> workers;
    for (int64_t i = 0; i < num_threads; ++i) workers.emplace_back([this] { request_loop(); });
    for (std::thread& t : workers) t.join();
    const double duration = seconds_since(m_start);

    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_is_finished = true;
    }
    m_wake.notify_all();
    if (scraper.joinable()) scraper.join();

    std::lock_guard<std::mutex> lock(m_mutex);
    m_point.duration_seconds = duration;
    if (const std::optional<ServerSnapshot> after =
            m_has_metrics ? scrape(m_client, seconds_since(m_start)) : std::nullopt) {
      m_point.server_series.push_back(*after);
      if (before) m_point.server_delta = counter_difference(*before, *after);
    }
    std::sort(m_point.requests.begin(), m_point.requests.end(),
              [](const RequestRecord& a, const RequestRecord& b) { return a.start_seconds < b.start_seconds; });
    summarise_point(&m_point, m_config.goodput);
    if (m_progress) m_progress(m_point);
  }

 private:
  bool is_cancelled() const { return m_cancel != nullptr && m_cancel->load(); }

  void request_loop() {
    for (;;) {
      size_t index = 0;
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_next >= m_prompts.size() || is_cancelled()) return;
        index = m_next++;
      }
      // Wait for this request's arrival time, in short slices so a cancel is seen at once.
      const auto due =
          m_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(m_arrivals[index]));
      while (Clock::now() < due) {
        if (is_cancelled()) return;
        std::this_thread::sleep_for(std::min<Clock::duration>(due - Clock::now(), std::chrono::milliseconds(20)));
      }
      const BenchPrompt& prompt = m_prompts[index];
      const double sent = seconds_since(m_start);
      const StreamedCompletion completion = m_client.stream(bench_request(m_config, prompt), {}, m_cancel);
      RequestRecord record = make_request_record(completion, sent, prompt.approx_prompt_tokens);
      std::lock_guard<std::mutex> lock(m_mutex);
      m_point.requests.push_back(std::move(record));
      report_locked();
    }
  }

  void scrape_loop() {
    std::unique_lock<std::mutex> lock(m_mutex);
    while (!m_is_finished && !is_cancelled()) {
      const auto interval = std::chrono::duration<double>(m_config.scrape_interval_seconds);
      if (m_wake.wait_for(lock, interval, [this] { return m_is_finished; })) return;
      lock.unlock();
      std::optional<ServerSnapshot> s = scrape(m_client, seconds_since(m_start));
      lock.lock();
      if (s) {
        m_point.server_series.push_back(std::move(*s));
        report_locked();
      }
    }
  }

  // The live figures so far, for progress views; under m_mutex.
  void report_locked() {
    if (!m_progress) return;
    m_point.duration_seconds = seconds_since(m_start);
    summarise_point(&m_point, m_config.goodput);
    m_progress(m_point);
  }

  const BenchServeConfig& m_config;
  const OpenAiClient& m_client;
  const std::vector<BenchPrompt>& m_prompts;
  BenchServePoint& m_point;
  const bool m_has_metrics;
  const std::function<void(const BenchServePoint&)>& m_progress;
  const std::atomic<bool>* m_cancel;
  std::vector<double> m_arrivals;
  Clock::time_point m_start;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  size_t m_next = 0;
  bool m_is_finished = false;
};

}  // namespace

Result<BenchServeResult> run_bench_serve(const BenchServeConfig& config,
                                         const std::function<void(const BenchServeProgress&)>& on_progress,
                                         const std::atomic<bool>* cancel) {
  IWB_RETURN_IF_ERROR(validate(config));
  BenchServeResult result;
  result.config = config;
  result.started_at = current_utc_iso8601();
  auto prompts = make_bench_prompts(config);
  if (!prompts) return prompts.status();

  const OpenAiClient client(config.endpoint);
  if (result.config.model.empty()) {
    auto models = client.list_models();
    if (!models)
      return make_error(models.status().code(),
                        "no model given and listing the served ones failed: " + models.error_message());
    if (models->empty())
      return make_error(ErrorCode::NotFound, endpoint_root(config.endpoint.base_url) + "/v1/models lists no model");
    result.config.model = models->front();
  }
  const std::optional<ServerSnapshot> probe = scrape(client, 0);
  result.server_kind = probe ? probe->kind : ServerKind::OpenAiNoMetrics;
  const bool has_metrics = probe && probe->kind != ServerKind::OpenAiNoMetrics;

  // Warm-up requests: the first prompts, one at a time, measured by nobody. A warm-up that
  // cannot reach the server is not an error here: the first point then reports what happens.
  for (int64_t i = 0; i < config.num_warmups && !prompts->empty(); ++i) {
    if (cancel && cancel->load()) break;
    const BenchPrompt& prompt = (*prompts)[static_cast<size_t>(i) % prompts->size()];
    if (!client.stream(bench_request(result.config, prompt), {}, cancel).is_ok()) break;
  }

  std::vector<std::pair<int64_t, double>> loads;  // (max concurrency, request rate) per point
  if (config.sweep_concurrency.empty()) {
    loads.emplace_back(config.max_concurrency, config.request_rate);
  } else {
    for (const int64_t c : config.sweep_concurrency) loads.emplace_back(c, 0.0);  // closed loop
  }
  int64_t num_reached = 0;
  RemoteError last_error;
  for (size_t i = 0; i < loads.size(); ++i) {
    if (cancel && cancel->load()) break;
    BenchServePoint point;
    point.max_concurrency = loads[i].first;
    point.request_rate = loads[i].second;
    std::function<void(const BenchServePoint&)> progress;
    if (on_progress) {
      progress = [&, i](const BenchServePoint& p) {
        BenchServeProgress report;
        report.point_index = static_cast<int>(i);
        report.num_points = static_cast<int>(loads.size());
        report.point = &p;
        on_progress(report);
      };
    }
    PointRunner(result.config, client, *prompts, &point, has_metrics, progress, cancel).run();
    for (const RequestRecord& r : point.requests) {
      if (r.error.kind != RemoteErrorKind::ConnectFailed)
        ++num_reached;
      else
        last_error = r.error;
    }
    result.points.push_back(std::move(point));
  }
  if (num_reached == 0 && last_error.kind == RemoteErrorKind::ConnectFailed) {
    return make_error(ErrorCode::IoError, "no request reached the server: " + last_error.message);
  }
  return result;
}

}  // namespace iwb::remote
