// parse_prometheus_text: the text format's corners (escapes, NaN/Inf, timestamps, histogram and
// counter families, samples without TYPE), malformed lines reported with their number, and
// hostile input (random bytes, huge lines) parsed or refused without a crash or a hang.
#include "iwb/engine/remote/prometheus_text.h"

#include <QTest>

#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include "test_paths.h"

using iwb::remote::MetricFamily;
using iwb::remote::MetricType;
using iwb::remote::parse_prometheus_text;

namespace {

std::vector<MetricFamily> parsed(std::string_view text) {
  auto r = parse_prometheus_text(text);
  if (!r) qWarning("%s", r.error_message().c_str());
  return r ? std::move(r).value() : std::vector<MetricFamily>{};
}

std::string error_of(std::string_view text) {
  auto r = parse_prometheus_text(text);
  return r ? std::string("(parsed)") : r.error_message();
}

std::string read_fixture(const std::string& name) {
  std::ifstream in(iwb::test::from_build_dir(IWB_REMOTE_FIXTURES_FROM_BUILD) + "/" + name, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const MetricFamily* find(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const MetricFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

class TestPrometheusText : public QObject {
  Q_OBJECT

 private slots:
  void emptyAndCommentsOnly() {
    QVERIFY(parse_prometheus_text("").is_ok());
    QCOMPARE(parsed("").size(), size_t(0));
    QCOMPARE(parsed("\n\n  \n# just a comment\n#\n# EOF\n#TYPE not a type line\n").size(), size_t(0));
  }

  void gaugeWithHelpAndType() {
    auto f = parsed(
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n");
    QCOMPARE(f.size(), size_t(1));
    QCOMPARE(f[0].name, std::string("vllm:num_requests_running"));
    QCOMPARE(f[0].type, MetricType::Gauge);
    QCOMPARE(f[0].help, std::string("Number of requests in model execution batches."));
    QCOMPARE(f[0].samples.size(), size_t(1));
    QCOMPARE(f[0].samples[0].labels.at("engine"), std::string("0"));
    QCOMPARE(f[0].samples[0].labels.at("model_name"), std::string("m"));
    QCOMPARE(f[0].samples[0].value, 3.0);
    QVERIFY(!f[0].samples[0].timestamp_ms);
  }

  void helpEscapes() {
    auto f = parsed("# HELP foo A \\\\ backslash,\\na newline and \\\"quotes\\\".\n# TYPE foo gauge\nfoo 1\n");
    QCOMPARE(f[0].help, std::string("A \\ backslash,\na newline and \\\"quotes\\\"."));
  }

  void labelEscapes() {
    auto f = parsed("foo{path=\"C:\\\\dir\\\\x\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\",tab=\"a\\tb\"} 1\n");
    QCOMPARE(f.size(), size_t(1));
    const auto& l = f[0].samples[0].labels;
    QCOMPARE(l.at("path"), std::string("C:\\dir\\x"));
    QCOMPARE(l.at("quote"), std::string("say \"hi\""));
    QCOMPARE(l.at("nl"), std::string("a\nb"));
    QCOMPARE(l.at("tab"), std::string("a\\tb"));  // not an escape of the format: kept as written
  }

  void labelSetSyntax() {
    auto f = parsed("foo{} 1\nfoo{ a = \"1\" , b=\"}{,=\" , } 2\nfoo{a=\"\"}3\n");
    QCOMPARE(f.size(), size_t(1));
    QCOMPARE(f[0].samples.size(), size_t(3));
    QVERIFY(f[0].samples[0].labels.empty());
    QCOMPARE(f[0].samples[1].labels.at("a"), std::string("1"));
    QCOMPARE(f[0].samples[1].labels.at("b"), std::string("}{,="));
    QCOMPARE(f[0].samples[2].labels.at("a"), std::string());
    QCOMPARE(f[0].samples[2].value, 3.0);
  }

  void specialValues() {
    auto f = parsed(
        "# TYPE v gauge\nv{k=\"a\"} NaN\nv{k=\"b\"} +Inf\nv{k=\"c\"} -Inf\nv{k=\"d\"} Inf\nv{k=\"e\"} 1.5e3\n"
        "v{k=\"f\"} -0.25\nv{k=\"g\"} 42\nv{k=\"h\"} 1e999\nv{k=\"i\"} nan\nv{k=\"j\"} 1.7e+09\n");
    QCOMPARE(f.size(), size_t(1));
    const auto& s = f[0].samples;
    QCOMPARE(s.size(), size_t(10));
    QVERIFY(std::isnan(s[0].value));
    QVERIFY(std::isinf(s[1].value) && s[1].value > 0);
    QVERIFY(std::isinf(s[2].value) && s[2].value < 0);
    QVERIFY(std::isinf(s[3].value) && s[3].value > 0);
    QCOMPARE(s[4].value, 1500.0);
    QCOMPARE(s[5].value, -0.25);
    QCOMPARE(s[6].value, 42.0);
    QVERIFY(std::isinf(s[7].value));
    QVERIFY(std::isnan(s[8].value));
    QCOMPARE(s[9].value, 1.7e9);
  }

  void timestamps() {
    auto f = parsed("a 1 1700000000123\nb{x=\"y\"} 2 -5\nc\t3\t\t17\n");
    QCOMPARE(f.size(), size_t(3));
    QCOMPARE(*f[0].samples[0].timestamp_ms, int64_t(1700000000123));
    QCOMPARE(*f[1].samples[0].timestamp_ms, int64_t(-5));
    QCOMPARE(f[2].samples[0].value, 3.0);
    QCOMPARE(*f[2].samples[0].timestamp_ms, int64_t(17));
  }

  void crlfAndIndentation() {
    auto f = parsed("# TYPE a counter\r\n  a_total 5\r\n\r\n\ta_total{x=\"1\"} 6 \r\n");
    QCOMPARE(f.size(), size_t(1));
    QCOMPARE(f[0].samples.size(), size_t(2));
    QCOMPARE(f[0].samples[1].value, 6.0);
  }

  void histogramFamily() {
    auto f = parsed(
        "# HELP lat Latency.\n# TYPE lat histogram\n"
        "lat_bucket{le=\"0.1\"} 1\nlat_bucket{le=\"1\"} 3\nlat_bucket{le=\"+Inf\"} 4\n"
        "lat_count 4\nlat_sum 2.5\nlat_created 1.7e9\n"
        "# HELP lat_created Latency.\n# TYPE lat_created gauge\nlat_created 1.7e9\n"
        "# TYPE q summary\nq{quantile=\"0.5\"} 0.2\nq_sum 1\nq_count 5\n");
    QCOMPARE(f.size(), size_t(3));
    QCOMPARE(f[0].name, std::string("lat"));
    QCOMPARE(f[0].type, MetricType::Histogram);
    QCOMPARE(f[0].samples.size(), size_t(6));
    QCOMPARE(f[0].samples[2].labels.at("le"), std::string("+Inf"));
    QCOMPARE(f[0].samples[5].name, std::string("lat_created"));
    // A _created family with its own TYPE line (how prometheus_client writes it) stands alone.
    QCOMPARE(f[1].name, std::string("lat_created"));
    QCOMPARE(f[1].type, MetricType::Gauge);
    QCOMPARE(f[2].type, MetricType::Summary);
    QCOMPARE(f[2].samples.size(), size_t(3));
  }

  void counterNamings() {
    // prometheus_client's way (TYPE names foo_total) and the plain way (TYPE names foo).
    auto f = parsed(
        "# TYPE a_total counter\na_total{r=\"stop\"} 3\na_total{r=\"length\"} 4\na_created 1.7e9\n"
        "# TYPE b counter\nb_total 5\nb 6\nb_created 7\n");
    QCOMPARE(f.size(), size_t(2));
    QCOMPARE(f[0].name, std::string("a_total"));
    QCOMPARE(f[0].type, MetricType::Counter);
    QCOMPARE(f[0].samples.size(), size_t(3));
    QCOMPARE(f[0].samples[1].labels.at("r"), std::string("length"));
    QCOMPARE(f[1].name, std::string("b"));
    QCOMPARE(f[1].samples.size(), size_t(3));
    QCOMPARE(f[1].samples[0].name, std::string("b_total"));
  }

  void samplesWithoutType() {
    auto f = parsed(
        "x 1\nx{a=\"2\"} 2\ny 3\n"
        "# HELP z Only a help line.\nz 4\n"
        "# TYPE g gauge\ng 5\ng_total 6\n");
    QCOMPARE(f.size(), size_t(5));
    QCOMPARE(f[0].name, std::string("x"));
    QCOMPARE(f[0].type, MetricType::Untyped);
    QCOMPARE(f[0].samples.size(), size_t(2));
    QCOMPARE(f[1].name, std::string("y"));
    QCOMPARE(f[2].name, std::string("z"));
    QCOMPARE(f[2].help, std::string("Only a help line."));
    QCOMPARE(f[2].type, MetricType::Untyped);
    QCOMPARE(f[2].samples.size(), size_t(1));
    QCOMPARE(f[3].name, std::string("g"));
    QCOMPARE(f[3].samples.size(), size_t(1));
    // A name the gauge does not own starts an untyped family of its own.
    QCOMPARE(f[4].name, std::string("g_total"));
    QCOMPARE(f[4].type, MetricType::Untyped);
  }

  void typeNames() {
    QCOMPARE(std::string(iwb::remote::metric_type_name(MetricType::Counter)), std::string("counter"));
    QCOMPARE(std::string(iwb::remote::metric_type_name(MetricType::Histogram)), std::string("histogram"));
    QCOMPARE(std::string(iwb::remote::metric_type_name(MetricType::Untyped)), std::string("untyped"));
    QCOMPARE(parsed("# TYPE u untyped\nu 1\n# TYPE w unknown\nw 1\n")[1].type, MetricType::Untyped);
  }

  // Each server's exposition (fixtures/README.md): families with the types their TYPE lines say.
  void fixturesParse_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("family");
    QTest::addColumn<QString>("type");
    QTest::newRow("vLLM") << "vllm.prom"
                          << "vllm:time_to_first_token_seconds"
                          << "histogram";
    QTest::newRow("vLLM 0.8") << "vllm_0_8.prom"
                              << "vllm:gpu_cache_usage_perc"
                              << "gauge";
    QTest::newRow("SGLang") << "sglang.prom"
                            << "sglang:prompt_tokens_total"
                            << "counter";
    QTest::newRow("llama-server") << "llamacpp.prom"
                                  << "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
                                  << "counter";
    QTest::newRow("llama-server, old") << "llamacpp_old.prom"
                                       << "llamacpp:kv_cache_usage_ratio"
                                       << "gauge";
    QTest::newRow("iwb serve") << "iwb.prom"
                               << "iwb:e2e_request_latency_seconds"
                               << "histogram";
  }

  void fixturesParse() {
    QFETCH(QString, file);
    QFETCH(QString, family);
    QFETCH(QString, type);
    const std::string text = read_fixture(file.toStdString());
    QVERIFY2(!text.empty(), qPrintable(file));
    auto r = parse_prometheus_text(text);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    const MetricFamily* f = find(*r, family.toStdString());
    QVERIFY2(f, qPrintable(family));
    QCOMPARE(QString(iwb::remote::metric_type_name(f->type)), type);
    QVERIFY(!f->samples.empty());
    QVERIFY(!f->help.empty());
    // Every non-comment line is a sample of some family.
    size_t samples = 0, lines = 0;
    for (const MetricFamily& g : *r) samples += g.samples.size();
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines += !line.empty() && line[0] != '#';
    QCOMPARE(samples, lines);
  }

  // What a scrape gets when things go wrong: a cut connection, a proxy's error page, a value
  // printed with a decimal comma, an unterminated label value.
  void malformedFixtures_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("line");
    QTest::newRow("truncated") << "malformed/truncated_vllm.prom" << 62;
    QTest::newRow("html") << "malformed/html_error_page.prom" << 1;
    QTest::newRow("decimal comma") << "malformed/locale_comma.prom" << 9;
    QTest::newRow("unterminated label") << "malformed/unterminated_label.prom" << 7;
  }

  void malformedFixtures() {
    QFETCH(QString, file);
    QFETCH(int, line);
    const std::string text = read_fixture(file.toStdString());
    QVERIFY2(!text.empty(), qPrintable(file));
    const std::string message = error_of(text);
    QVERIFY2(message.find("line " + std::to_string(line) + ":") != std::string::npos, message.c_str());
  }

  void malformedLines_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<int>("line");
    QTest::addColumn<QString>("says");
    QTest::newRow("no value") << "# TYPE a gauge\na 1\nfoo\n" << 3 << "without a value";
    QTest::newRow("bad value") << "a 1\nb abc\n" << 2 << "invalid value 'abc'";
    QTest::newRow("underscore value") << "a 1_000\n" << 1 << "invalid value";
    QTest::newRow("hex value") << "a 0x10\n" << 1 << "invalid value";
    QTest::newRow("extra text") << "\n\na 1 2 3\n" << 3 << "after the sample";
    QTest::newRow("bad timestamp") << "a 1 1.5\n" << 1 << "invalid timestamp";
    QTest::newRow("name starts with digit") << "1a 2\n" << 1 << "expected a metric name";
    QTest::newRow("dash in name") << "foo-bar 1\n" << 1 << "unexpected '-'";
    QTest::newRow("unterminated labels") << "a{x=\"1\" 2\n" << 1 << "expected ','";
    QTest::newRow("unterminated value") << "a{x=\"1} 2\n" << 1 << "unterminated value";
    QTest::newRow("unquoted value") << "a{x=1} 2\n" << 1 << "expected '\"'";
    QTest::newRow("bad label name") << "a{1x=\"1\"} 2\n" << 1 << "expected a label name";
    QTest::newRow("no equals") << "a{x \"1\"} 2\n" << 1 << "expected '='";
    QTest::newRow("duplicate label") << "a{x=\"1\",x=\"2\"} 2\n" << 1 << "given twice";
    QTest::newRow("double comma") << "a{x=\"1\",,y=\"2\"} 2\n" << 1 << "expected a label name";
    QTest::newRow("unknown type") << "# TYPE a bogus\n" << 1 << "unknown metric type 'bogus'";
    QTest::newRow("type without type") << "# TYPE a\n" << 1 << "without a type";
    QTest::newRow("help without name") << "# HELP\n" << 1 << "without a metric name";
    QTest::newRow("bad name in type") << "# TYPE a-b gauge\n" << 1 << "invalid metric name";
    QTest::newRow("second type") << "# TYPE a gauge\n# TYPE a counter\n" << 2 << "second TYPE";
    QTest::newRow("type after samples") << "# HELP a h\na 1\n# TYPE a gauge\n" << 3 << "after samples";
    QTest::newRow("labels only") << "{x=\"1\"} 2\n" << 1 << "expected a metric name";
  }

  void malformedLines() {
    QFETCH(QString, text);
    QFETCH(int, line);
    QFETCH(QString, says);
    const std::string message = error_of(text.toStdString());
    QVERIFY2(message.find("line " + std::to_string(line) + ":") != std::string::npos, message.c_str());
    QVERIFY2(message.find(says.toStdString()) != std::string::npos, message.c_str());
    // The offending line is shown.
    const QStringList lines = text.split('\n');
    QVERIFY2(message.find(lines[line - 1].toStdString()) != std::string::npos, message.c_str());
  }

  void longLinesAreShortenedInErrors() {
    const std::string text = "a{x=\"" + std::string(100000, 'y');
    const std::string message = error_of(text);
    QVERIFY(message.find("line 1:") != std::string::npos);
    QVERIFY(message.size() < 400);
  }

  // Linear on big input: a million labels on one line, a hundred thousand lines, many escapes.
  void bigInputIsLinear() {
    std::string labels = "big{";
    for (int i = 0; i < 200000; ++i) labels += "l" + std::to_string(i) + "=\"\\\\\\\"\\n\",";
    labels += "} 1\n";
    std::string lines;
    for (int i = 0; i < 100000; ++i) lines += "m{i=\"" + std::to_string(i) + "\"} " + std::to_string(i) + "\n";
    const auto start = std::chrono::steady_clock::now();
    auto a = parsed(labels);
    auto b = parsed(lines);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    QCOMPARE(a.size(), size_t(1));
    QCOMPARE(a[0].samples[0].labels.size(), size_t(200000));
    QCOMPARE(a[0].samples[0].labels.at("l7"), std::string("\\\"\n"));
    QCOMPARE(b.size(), size_t(1));
    QCOMPARE(b[0].samples.size(), size_t(100000));
    QVERIFY2(seconds < 30, std::to_string(seconds).c_str());  // seconds under ASan on a busy machine
  }

  // Random bytes and random splices of valid lines: every input parses or is refused.
  void randomInputNeitherCrashesNorHangs() {
    const std::string pieces[] = {"# TYPE ",
                                  "# HELP ",
                                  "foo",
                                  "_bucket",
                                  "_total",
                                  "{",
                                  "}",
                                  "=",
                                  "\"",
                                  "\\",
                                  ",",
                                  " ",
                                  "\t",
                                  "\n",
                                  "\r",
                                  "le",
                                  "+Inf",
                                  "NaN",
                                  "1.5e3",
                                  "-",
                                  "0",
                                  "#",
                                  "histogram",
                                  "counter",
                                  "gauge",
                                  "summary",
                                  ":",
                                  "\xff",
                                  std::string(1, '\0')};
    std::mt19937 rng(16);
    int parsed_ok = 0;
    for (int round = 0; round < 20000; ++round) {
      std::string text;
      const int n = static_cast<int>(rng() % 40);
      for (int i = 0; i < n; ++i) {
        if (rng() % 4 == 0)
          text += static_cast<char>(rng() % 256);
        else
          text += pieces[rng() % std::size(pieces)];
      }
      auto r = parse_prometheus_text(text);
      if (r)
        ++parsed_ok;
      else
        QVERIFY(r.error_message().find("line ") != std::string::npos);
    }
    QVERIFY(parsed_ok > 0);
  }
};

QTEST_GUILESS_MAIN(TestPrometheusText)
#include "test_prometheus_text.moc"
