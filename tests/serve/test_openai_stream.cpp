// The OpenAI client without a real engine: server-sent events split at every byte boundary
// (and at random ones) decode to the same completion with the same first-content time; broken,
// malformed and error streams are classified; and against an in-process cpp-httplib server the
// client streams, reports HTTP errors with the server's message, times out, sees a dropped
// connection, and cancels promptly.
#include "iwb/engine/chat/reply_parts.h"
#include "remote/sse_stream.h"

#include "iwb/engine/remote/bench_serve.h"
#include "iwb/engine/remote/openai_client.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <QtTest>

#include <chrono>
#include <random>
#include <thread>

using namespace iwb;
using namespace iwb::remote;

namespace {

// A chat stream as `iwb serve` writes it: a role-only chunk, three content chunks (lines ending
// in \r\n, \r and \n), a finish chunk with timings, a usage chunk and [DONE]; a keep-alive
// comment in between.
const std::string kRole =
    R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})"
    "\n\n";
const std::string kFirst =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\r\n\r\n";
const std::string kRest =
    ": keep-alive\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo \\u00e9\"},\"finish_reason\":null}]}\r\r"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"},\"finish_reason\":null}]}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],"
    "\"timings\":{\"prompt_n\":7,\"prompt_ms\":1.5,\"predicted_n\":3,\"predicted_ms\":4.25,\"cache_n\":2}}\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3,\"total_tokens\":12}}\n\n"
    "data: [DONE]\n\n";
const std::string kStream = kRole + kFirst + kRest;

// Feeds `text` cut at `cuts` (sorted offsets); piece i arrives at time i + 1.
StreamedCompletion decode(const std::string& text, const std::vector<size_t>& cuts, bool finish = true) {
  StreamedCompletion out;
  CompletionStreamDecoder decoder(&out, {});
  size_t begin = 0;
  double t = 1;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t end = i < cuts.size() ? cuts[i] : text.size();
    decoder.feed(std::string_view(text).substr(begin, end - begin), t);
    begin = end;
    t += 1;
  }
  if (finish) decoder.finish(t);
  return out;
}

// The time decode() gives the piece holding byte `offset`.
double piece_time(const std::vector<size_t>& cuts, size_t offset) {
  double t = 1;
  for (const size_t c : cuts) {
    if (offset < c) break;
    t += 1;
  }
  return t;
}

void check_complete(const StreamedCompletion& c, const std::vector<size_t>& cuts) {
  QVERIFY2(c.is_ok(), c.error.message.c_str());
  QCOMPARE(c.text, std::string("Hello \xc3\xa9!"));
  QCOMPARE(c.finish_reason, std::string("length"));
  QCOMPARE(c.token_seconds.size(), size_t{3});
  QCOMPARE(c.prompt_tokens, int64_t{9});
  QCOMPARE(c.completion_tokens, int64_t{3});
  QVERIFY(c.server_timings.has_value());
  QCOMPARE(c.server_timings->prompt_n, int64_t{7});
  QCOMPARE(c.server_timings->predicted_ms, 4.25);
  QCOMPARE(c.server_timings->cache_n, int64_t{2});
  // The first content token arrives with the blank line that ends its event (the \r that starts
  // kFirst's final \r\n; the \n after it adds nothing), never with the role-only chunk.
  QVERIFY(c.ttft_seconds.has_value());
  QCOMPARE(*c.ttft_seconds, piece_time(cuts, kRole.size() + kFirst.size() - 2));
  QCOMPARE(c.token_seconds.front(), *c.ttft_seconds);
}

// A tiny OpenAI-shaped server: the model name picks the behaviour.
class FakeServer {
 public:
  FakeServer() {
    m_server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const std::string body = req.body;
      m_auth = req.get_header_value("Authorization");
      m_body = body;
      if (body.find("\"fail500\"") != std::string::npos) {
        res.status = 500;
        res.set_content(R"({"error":{"message":"the engine ran out of memory","type":"server_error"}})",
                        "application/json");
        return;
      }
      const bool drop = body.find("\"drop\"") != std::string::npos;
      const bool slow = body.find("\"slow\"") != std::string::npos;
      const bool hang = body.find("\"hang\"") != std::string::npos;

      res.set_chunked_content_provider("text/event-stream", [=, this](size_t, httplib::DataSink& sink) {
        struct InFlight {
          FakeServer* s;
          explicit InFlight(FakeServer* server) : s(server) {
            const int n = ++s->m_in_flight;
            int seen = s->m_max_in_flight;
            while (n > seen && !s->m_max_in_flight.compare_exchange_weak(seen, n)) {
            }
          }
          ~InFlight() { --s->m_in_flight; }
        } in_flight(this);
        sink.write(kRole.data(), kRole.size());
        if (slow || hang) {
          for (int i = 0; i < (hang ? 100 : 15) && !m_is_stopping; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        sink.write(kFirst.data(), kFirst.size());
        if (drop) return false;  // the connection closes mid-stream
        sink.write(kRest.data(), kRest.size());
        sink.done();
        return true;
      });
    });
    m_server.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"alpha","object":"model"},{"id":"beta","object":"model"}]})",
                      "application/json");
    });
    m_port = m_server.bind_to_any_port("127.0.0.1");
    m_thread = std::thread([this] { m_server.listen_after_bind(); });
    while (!m_server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeServer() {
    m_is_stopping = true;
    m_server.stop();
    m_thread.join();
  }
  std::string url(bool with_v1) const { return "http://127.0.0.1:" + std::to_string(m_port) + (with_v1 ? "/v1/" : ""); }
  std::string last_auth() const { return m_auth; }
  std::string last_body() const { return m_body; }
  int max_in_flight() const { return m_max_in_flight; }

 private:
  httplib::Server m_server;
  int m_port = 0;
  std::thread m_thread;
  std::atomic<bool> m_is_stopping{false};
  std::string m_auth;
  std::string m_body;
  std::atomic<int> m_in_flight{0}, m_max_in_flight{0};
};

RemoteRequest chat_request(const std::string& model) {
  RemoteRequest r;
  r.model = model;
  r.messages = {{"user", "hi"}};
  r.max_tokens = 3;
  return r;
}

}  // namespace

class TestOpenAiStream : public QObject {
  Q_OBJECT

 private slots:
  void decodesInOnePiece() { check_complete(decode(kStream, {}), {}); }

  void decodesAcrossEveryCut() {
    for (size_t cut = 1; cut < kStream.size(); ++cut) {
      check_complete(decode(kStream, {cut}), {cut});
      if (QTest::currentTestFailed()) return qWarning("with one cut at byte %zu", cut);
    }
  }

  void decodesAcrossRandomCuts() {
    std::mt19937 rng(16);
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<size_t> cuts;
      const int num_cuts = 1 + static_cast<int>(rng() % 40);
      for (int i = 0; i < num_cuts; ++i) cuts.push_back(1 + rng() % (kStream.size() - 1));
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      check_complete(decode(kStream, cuts), cuts);
      if (QTest::currentTestFailed()) return qWarning("in random trial %d", trial);
    }
  }

  void sseJoinsDataLinesAndSkipsOtherFields() {
    std::vector<std::string> events;
    SseParser parser([&](const std::string& d) {
      events.push_back(d);
      return true;
    });
    QVERIFY(parser.feed("event: x\nid: 4\ndata: a\ndata:b\nretry: 10\n\n:comment\n\ndata"));
    QVERIFY(parser.finish());  // an event the server closed without its blank line
    QCOMPARE(events, (std::vector<std::string>{"a\nb", ""}));
  }

  void classifiesBrokenStreams() {
    const std::string cut = kRole + kFirst;
    StreamedCompletion dropped = decode(cut, {});
    QCOMPARE(dropped.error.kind, RemoteErrorKind::Dropped);
    QCOMPARE(dropped.text, std::string("Hel"));  // what came before the break is kept

    QCOMPARE(decode("", {}).error.kind, RemoteErrorKind::Dropped);

    StreamedCompletion garbage = decode(kRole + "data: {\"choices\": [tru\n\n" + kRest, {});
    QCOMPARE(garbage.error.kind, RemoteErrorKind::Malformed);
    QVERIFY(garbage.error.message.find("not a JSON object") != std::string::npos);

    QCOMPARE(decode("data: {\"choices\": 5}\n\n", {}).error.kind, RemoteErrorKind::Malformed);
    QCOMPARE(decode("<html>Bad gateway</html>", {}).error.kind, RemoteErrorKind::Malformed);

    StreamedCompletion error = decode(kRole + R"(data: {"error": {"message": "generation failed: boom"}})"
                                              "\n\n",
                                      {});
    QCOMPARE(error.error.kind, RemoteErrorKind::HttpError);
    QVERIFY(error.error.message.find("generation failed: boom") != std::string::npos);

    // A finish_reason without [DONE] is a complete answer (some servers close right away).
    StreamedCompletion no_done =
        decode(kRole + kFirst + "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\n", {});
    QVERIFY2(no_done.is_ok(), no_done.error.message.c_str());
  }

  void acceptsANonStreamedAnswer() {
    StreamedCompletion c =
        decode(R"({"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],)"
               R"("usage":{"prompt_tokens":2,"completion_tokens":5}})",
               {10});
    QVERIFY2(c.is_ok(), c.error.message.c_str());
    QCOMPARE(c.text, std::string("whole"));
    QCOMPARE(c.completion_tokens, int64_t{5});
  }

  void reasoningReachesTheChatAsAThinkBlock() {
    // vLLM's and llama-server's reasoning_content: handed on inside <think>…</think>, ahead of
    // the content, while the completion's text (what bench-serve counts) stays the content.
    const std::string stream =
        kRole +
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Two\"},\"finish_reason\":null}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\" plus two\"},\"finish_reason\":null}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Four\"},\"finish_reason\":null}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\".\"},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    StreamedCompletion out;
    std::string handed;
    CompletionStreamDecoder decoder(&out, [&](std::string_view d, double) {
      handed += d;
      return true;
    });
    QVERIFY(decoder.feed(stream, 1));
    decoder.finish(2);
    QVERIFY2(out.is_ok(), out.error.message.c_str());
    QCOMPARE(handed, std::string("<think>Two plus two</think>Four."));
    QCOMPARE(out.text, std::string("Four."));
    QCOMPARE(out.token_seconds.size(), size_t{4});
    const iwb::ReplyParts parts = iwb::split_reply(handed);
    QCOMPARE(parts.reasoning, std::string("Two plus two"));
    QCOMPARE(parts.content, std::string("Four."));
  }

  void contentCallbackCanCancel() {
    StreamedCompletion out;
    int calls = 0;
    CompletionStreamDecoder decoder(&out, [&](std::string_view, double) { return ++calls < 2; });
    QVERIFY(!decoder.feed(kStream, 1));
    QCOMPARE(calls, 2);
    QCOMPARE(out.error.kind, RemoteErrorKind::Cancelled);
  }

  void endpointRootDropsV1() {
    QCOMPARE(endpoint_root("http://h:8000/v1/"), std::string("http://h:8000"));
    QCOMPARE(endpoint_root(" http://h:8000 "), std::string("http://h:8000"));
    QCOMPARE(endpoint_root("https://h/proxy/v1"), std::string("https://h/proxy"));
    QCOMPARE(server_error_message(R"({"detail":"Not Found"})"), std::string("Not Found"));
  }

  void streamsOverHttp() {
    FakeServer server;
    for (const bool with_v1 : {false, true}) {
      OpenAiClient client(Endpoint{server.url(with_v1), "sekrit", 2, 5});
      auto models = client.list_models();
      QVERIFY2(models.is_ok(), models.error_message().c_str());
      QCOMPARE(*models, (std::vector<std::string>{"alpha", "beta"}));
      std::string seen;
      StreamedCompletion c = client.stream(chat_request("alpha"), [&](std::string_view d, double) {
        seen += d;
        return true;
      });
      QVERIFY2(c.is_ok(), c.error.message.c_str());
      QCOMPARE(seen, std::string("Hello \xc3\xa9!"));
      QCOMPARE(c.completion_tokens, int64_t{3});
      QVERIFY(c.ttft_seconds && *c.ttft_seconds <= c.e2e_seconds);
      QCOMPARE(server.last_auth(), std::string("Bearer sekrit"));
      QVERIFY(server.last_body().find("chat_template_kwargs") == std::string::npos);
      QVERIFY(server.last_body().find("reasoning_effort") == std::string::npos);
      // Thinking controls go as vLLM and llama-server take them.
      RemoteRequest thinking = chat_request("alpha");
      thinking.enable_thinking = false;
      thinking.reasoning_effort = "high";
      QVERIFY(client.stream(thinking, [](std::string_view, double) { return true; }).is_ok());
      const nlohmann::json sent = nlohmann::json::parse(server.last_body());
      QCOMPARE(sent["chat_template_kwargs"]["enable_thinking"], nlohmann::json(false));
      QCOMPARE(sent["reasoning_effort"], nlohmann::json("high"));
      auto metrics = client.fetch_metrics_text();
      QCOMPARE(metrics.status().code(), ErrorCode::NotFound);
    }
  }

  void classifiesHttpFailures() {
    FakeServer server;
    OpenAiClient client(Endpoint{server.url(true), "", 2, 0.5});
    StreamedCompletion e500 = client.stream(chat_request("fail500"));
    QCOMPARE(e500.error.kind, RemoteErrorKind::HttpError);
    QCOMPARE(e500.error.http_status, 500);
    QVERIFY2(e500.error.message.find("the engine ran out of memory") != std::string::npos, e500.error.message.c_str());

    StreamedCompletion dropped = client.stream(chat_request("drop"));
    QCOMPARE(dropped.error.kind, RemoteErrorKind::Dropped);
    QCOMPARE(dropped.text, std::string("Hel"));

    StreamedCompletion slow = client.stream(chat_request("slow"));
    QCOMPARE(slow.error.kind, RemoteErrorKind::Timeout);
    QVERIFY(slow.e2e_seconds < 1.4);  // the read timeout, not the server's 1.5 s pause

    OpenAiClient nobody(Endpoint{"http://127.0.0.1:1", "", 2, 2});
    QCOMPARE(nobody.stream(chat_request("alpha")).error.kind, RemoteErrorKind::ConnectFailed);
    QVERIFY(!nobody.list_models().is_ok());
    QCOMPARE(OpenAiClient(Endpoint{"ftp://x", "", 1, 1}).stream(chat_request("a")).error.kind,
             RemoteErrorKind::ConnectFailed);
  }

  void cancelsPromptlyDuringSilence() {
    FakeServer server;
    OpenAiClient client(Endpoint{server.url(false), "", 2, 30});
    std::atomic<bool> cancel{false};
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      cancel = true;
    });
    const auto t0 = std::chrono::steady_clock::now();
    StreamedCompletion c = client.stream(chat_request("hang"), {}, &cancel);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    canceller.join();
    QCOMPARE(c.error.kind, RemoteErrorKind::Cancelled);
    QVERIFY2(took < 2.0, std::to_string(took).c_str());
  }

  void benchServeHoldsItsConcurrencyCap() {
    FakeServer server;
    BenchServeConfig c;
    c.endpoint = Endpoint{server.url(false), "", 2, 5};
    c.dataset = "chat";
    c.num_prompts = 9;
    c.max_concurrency = 3;
    c.scrape_interval_seconds = 0.05;
    int num_reports = 0;
    auto result = run_bench_serve(c, [&](const BenchServeProgress& p) {
      ++num_reports;
      QVERIFY(p.point != nullptr && p.num_points == 1);
    });
    QVERIFY2(result.is_ok(), result.error_message().c_str());
    QCOMPARE(result->config.model, std::string("alpha"));  // the first served model
    QCOMPARE(result->server_kind, ServerKind::OpenAiNoMetrics);
    const BenchServePoint& p = result->points.at(0);
    QCOMPARE(p.num_completed, int64_t{9});
    QCOMPARE(p.total_output_tokens, int64_t{27});  // the usage chunk's 3 each
    QVERIFY(!p.server_delta);
    QVERIFY(server.max_in_flight() <= 3);
    QVERIFY(num_reports >= 9);
  }

  void benchServeStopsPromptlyWhenCancelled() {
    FakeServer server;
    BenchServeConfig c;
    c.endpoint = Endpoint{server.url(false), "", 2, 30};
    c.model = "hang";    // each request stalls for ten seconds
    c.dataset = "chat";  // the fake serves chat completions only
    c.num_prompts = 6;
    c.max_concurrency = 2;
    c.num_warmups = 0;  // the cancel must land in the point, not in a warm-up request
    std::atomic<bool> cancel{false};
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      cancel = true;
    });
    const auto t0 = std::chrono::steady_clock::now();
    auto result = run_bench_serve(c, {}, &cancel);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    canceller.join();
    QVERIFY2(result.is_ok(), result.error_message().c_str());
    QVERIFY2(took < 3.0, std::to_string(took).c_str());
    const BenchServePoint& p = result->points.at(0);
    QCOMPARE(p.requests.size(), size_t{2});  // the two in flight; the rest never sent
    QCOMPARE(p.errors_by_kind.at("cancelled"), int64_t{2});
  }
};

QTEST_GUILESS_MAIN(TestOpenAiStream)
#include "test_openai_stream.moc"
