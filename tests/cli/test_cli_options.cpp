// The CLI's option table and shared groups, in-process: one-line messages for unknown options,
// bad and missing values; every alias lands in the same place; the sampling defaults are
// llama.cpp's; the generated help lists every option of every group; -ngl against --device.
#include "options/option_groups.h"

#include <QtTest>

#include <string>
#include <vector>

using namespace iwb::cli;

namespace {

// argv for OptionTable::parse: the command name, then the arguments.
class Argv {
 public:
  explicit Argv(std::vector<std::string> args) : m_args(std::move(args)) {
    for (std::string& a : m_args) m_pointers.push_back(a.data());
  }
  int argc() const { return static_cast<int>(m_pointers.size()); }
  char** argv() { return m_pointers.data(); }

 private:
  std::vector<std::string> m_args;
  std::vector<char*> m_pointers;
};

ParseOutcome parse(const OptionTable& table, std::vector<std::string> args) {
  args.insert(args.begin(), table.command());
  Argv argv(std::move(args));
  return table.parse(argv.argc(), argv.argv());
}

// A table like `iwb run`'s: every shared group.
struct RunLike {
  std::string model;
  PromptOptions prompt;
  int64_t context = 0;
  int64_t batch = 128;
  int threads = 0;
  DeviceOptions device;
  KvCacheOptions kv_cache;
  SamplingOptions sampling;
  iwb::spec::SpeculativeConfig speculation;
  bool is_json = false;
  std::string output;
  OptionTable table{"run", "-m MODEL.gguf [options]"};

  RunLike() {
    table.begin_group("model");
    add_model_option(table, &model);
    add_prompt_options(table, &prompt);
    table.begin_group("context");
    add_context_option(table, &context, "context length", 0);
    add_batch_size_option(table, &batch, "tokens per step");
    add_kv_cache_options(table, &kv_cache);
    table.begin_group("threads");
    add_threads_option(table, &threads);
    table.begin_group("device");
    add_device_options(table, &device);
    table.begin_group("sampling");
    add_sampling_options(table, &sampling);
    table.begin_group("speculation");
    add_speculation_options(table, &speculation);
    add_draft_max_option(table, &speculation.num_draft_tokens);
    table.begin_group("output");
    add_json_option(table, &is_json);
    table.add({.names = {"--out"}, .value_name = "FILE", .help = "where", .destination = &output});
  }
};

}  // namespace

class TestCliOptions : public QObject {
  Q_OBJECT

 private slots:
  void usageErrorsAreOneLine_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("unknown option") << QStringList{"-m", "a.gguf", "--foo"}
                                    << "iwb run: unknown option '--foo' (see 'iwb run --help')";
    QTest::newRow("unknown inline") << QStringList{"-m", "a.gguf", "--foo=3"}
                                    << "iwb run: unknown option '--foo' (see 'iwb run --help')";
    QTest::newRow("positional") << QStringList{"-m", "a.gguf", "stray"}
                                << "iwb run: unexpected argument 'stray' (see 'iwb run --help')";
    QTest::newRow("bad integer") << QStringList{"-m", "a.gguf", "-t", "x"}
                                 << "iwb run: -t expects an integer from 1 to 1024, got 'x'";
    QTest::newRow("integer below min") << QStringList{"-m", "a.gguf", "--threads", "0"}
                                       << "iwb run: --threads expects an integer from 1 to 1024, got '0'";
    QTest::newRow("integer with junk") << QStringList{"-m", "a.gguf", "-n", "12abc"}
                                       << "iwb run: -n expects an integer >= -1, got '12abc'";
    QTest::newRow("integer overflow") << QStringList{"-m", "a.gguf", "--top-k", "99999999999"}
                                      << "iwb run: --top-k expects an integer >= 0, got '99999999999'";
    QTest::newRow("negative temp") << QStringList{"-m", "a.gguf", "--temp", "-1"}
                                   << "iwb run: --temp expects a number >= 0, got '-1'";
    QTest::newRow("temp not a number") << QStringList{"-m", "a.gguf", "--temp", "nan"}
                                       << "iwb run: --temp expects a number >= 0, got 'nan'";
    QTest::newRow("top-p above 1") << QStringList{"-m", "a.gguf", "--top-p=1.5"}
                                   << "iwb run: --top-p expects a number from 0 to 1, got '1.5'";
    QTest::newRow("zero penalty") << QStringList{"-m", "a.gguf", "--repeat-penalty", "0"}
                                  << "iwb run: --repeat-penalty expects a number > 0, got '0'";
    QTest::newRow("seed below -1") << QStringList{"-m", "a.gguf", "-s", "-2"}
                                   << "iwb run: -s expects an integer >= -1, got '-2'";
    QTest::newRow("draft length") << QStringList{"-m", "a.gguf", "--draft-n", "33"}
                                  << "iwb run: --draft-n expects an integer from 1 to 32, got '33'";
    QTest::newRow("device") << QStringList{"-m", "a.gguf", "--device", "gpu"} << "iwb run: ";
    QTest::newRow("gpu layers") << QStringList{"-m", "a.gguf", "-ngl", "many"}
                                << "iwb run: -ngl expects a number of layers >= 0, auto or all, got 'many'";
    QTest::newRow("drafter") << QStringList{"-m", "a.gguf", "--spec", "magic"}
                             << "iwb run: unknown drafter 'magic': use draft, lookup, self, mtp or none";
    QTest::newRow("self type") << QStringList{"-m", "a.gguf", "--self-type", "Q9_9"}
                               << "iwb run: unknown tensor type 'Q9_9'";
    QTest::newRow("missing value") << QStringList{"-m", "a.gguf", "--temp"}
                                   << "iwb run: --temp needs a value (T) (see 'iwb run --help')";
    QTest::newRow("flag with a value") << QStringList{"-m", "a.gguf", "--json=yes"}
                                       << "iwb run: --json takes no value (see 'iwb run --help')";
    QTest::newRow("required") << QStringList{"-p", "hi"}
                              << "iwb run: no model given (-m MODEL.gguf) (see 'iwb run --help')";
  }
  void usageErrorsAreOneLine() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    RunLike r;
    std::vector<std::string> list;
    for (const QString& a : args) list.push_back(a.toStdString());
    const ParseOutcome outcome = parse(r.table, list);
    QCOMPARE(outcome.kind, ParseOutcome::Kind::UsageError);
    const QString got = QString::fromStdString(outcome.message);
    QVERIFY2(got.startsWith(message), qPrintable(got));
    QVERIFY2(!got.contains('\n'), qPrintable(got));
  }

  void helpWins() {
    RunLike r;
    QCOMPARE(parse(r.table, {"--help"}).kind, ParseOutcome::Kind::HelpRequested);
    QCOMPARE(parse(r.table, {"-m", "a.gguf", "-h"}).kind, ParseOutcome::Kind::HelpRequested);
  }

  void aliasesReachTheSameValue_data() {
    QTest::addColumn<QStringList>("args");
    QTest::newRow("-c") << QStringList{"-c", "77"};
    QTest::newRow("--ctx-size") << QStringList{"--ctx-size", "77"};
    QTest::newRow("--ctx (old eval/imatrix)") << QStringList{"--ctx", "77"};
    QTest::newRow("--context (old info/batch-bench)") << QStringList{"--context", "77"};
    QTest::newRow("underscore, as llama.cpp takes") << QStringList{"--ctx_size", "77"};
    QTest::newRow("inline value") << QStringList{"--ctx-size=77"};
  }
  void aliasesReachTheSameValue() {
    QFETCH(QStringList, args);
    RunLike r;
    std::vector<std::string> list{"-m", "a.gguf"};
    for (const QString& a : args) list.push_back(a.toStdString());
    QVERIFY(parse(r.table, list).is_parsed());
    QCOMPARE(r.context, int64_t{77});
  }

  void moreAliases() {
    RunLike r;
    QVERIFY(parse(r.table, {"--model", "a.gguf", "--temperature", "0.25", "-s", "9", "--predict", "7", "--draft-model",
                            "d.gguf", "--draft-max", "6", "-dev", "cpu", "--n-gpu-layers", "all"})
                .is_parsed());
    QCOMPARE(r.model, std::string("a.gguf"));
    QCOMPARE(r.sampling.temperature, 0.25f);
    QCOMPARE(r.sampling.seed, int64_t{9});
    QCOMPARE(r.sampling.n_predict, 7);
    QCOMPARE(r.speculation.draft_model_path, std::string("d.gguf"));
    QCOMPARE(r.speculation.num_draft_tokens, 6);
    QCOMPARE(r.device.device, std::string("cpu"));
    QCOMPARE(r.device.gpu_layers, kAllGpuLayers);
    // llama.cpp's -md, the newer --spec-draft-model and our old --draft-n land where the others do.
    RunLike s;
    QVERIFY(parse(s.table, {"-m", "a.gguf", "-md", "x.gguf", "--draft-n", "3"}).is_parsed());
    QCOMPARE(s.speculation.draft_model_path, std::string("x.gguf"));
    QCOMPARE(s.speculation.num_draft_tokens, 3);
    QVERIFY(parse(s.table, {"-m", "a.gguf", "--spec-draft-model", "y.gguf", "--spec-draft-n-max", "5"}).is_parsed());
    QCOMPARE(s.speculation.draft_model_path, std::string("y.gguf"));
    QCOMPARE(s.speculation.num_draft_tokens, 5);
  }

  void kvCacheTypesAsLlamaCpp() {
    RunLike r;
    QVERIFY(r.kv_cache.types().is_f16());
    QVERIFY(parse(r.table, {"-m", "a.gguf", "-ctk", "q8_0", "--cache-type-v", "Q4_0"}).is_parsed());
    QVERIFY(r.kv_cache.types() == iwb::KvCacheTypes(iwb::GgmlType::Q8_0, iwb::GgmlType::Q4_0));
    QCOMPARE(iwb::kv_cache_types_name(r.kv_cache.types()), std::string("q8_0/q4_0"));
    // The older --kv-type sets both; a later -ctv still wins for the values.
    RunLike s;
    QVERIFY(parse(s.table, {"-m", "a.gguf", "--kv-type", "q5_1", "-ctv", "q8_0"}).is_parsed());
    QVERIFY(s.kv_cache.types() == iwb::KvCacheTypes(iwb::GgmlType::Q5_1, iwb::GgmlType::Q8_0));
    RunLike t;
    QVERIFY(parse(t.table, {"-m", "a.gguf", "--kv-type", "q4_1"}).is_parsed());
    QCOMPARE(iwb::kv_cache_types_name(t.kv_cache.types()), std::string("q4_1"));
    // Types the cache cannot hold are usage errors naming the option.
    RunLike u;
    const ParseOutcome bad = parse(u.table, {"-m", "a.gguf", "-ctk", "q6_k"});
    QVERIFY(bad.kind == ParseOutcome::Kind::UsageError);
    QVERIFY2(bad.message.find("-ctk") != std::string::npos, bad.message.c_str());
    QVERIFY(parse(u.table, {"-m", "a.gguf", "--kv-type", "q2_k"}).kind == ParseOutcome::Kind::UsageError);
    QVERIFY(iwb::parse_kv_cache_types("q8_0/q4_0").is_ok() && !iwb::parse_kv_cache_types("q8_0/").is_ok());
    // vLLM's --calculate-kv-scales: with an fp8_e4m3 side, and the name runs are stored under says so.
    RunLike f;
    QVERIFY(parse(f.table, {"-m", "a.gguf", "-ctk", "fp8_e4m3", "--calculate-kv-scales"}).is_parsed());
    QVERIFY(f.kv_cache.error().empty() && f.kv_cache.types().calculate_scales);
    QCOMPARE(iwb::kv_cache_types_name(f.kv_cache.types()), std::string("fp8_e4m3/f16+calibrated"));
    const iwb::Result<iwb::KvCacheTypes> round_trip = iwb::parse_kv_cache_types("fp8_e4m3/f16+calibrated");
    QVERIFY(round_trip.is_ok() && *round_trip == f.kv_cache.types());
    RunLike g;
    QVERIFY(parse(g.table, {"-m", "a.gguf", "--calculate-kv-scales"}).is_parsed());
    QVERIFY2(g.kv_cache.error().find("fp8_e4m3") != std::string::npos, g.kv_cache.error().c_str());
    QVERIFY(!iwb::parse_kv_cache_types("q8_0+calibrated").is_ok());
  }

  void samplingDefaultsAreLlamaCpps() {
    RunLike r;
    QVERIFY(parse(r.table, {"-m", "a.gguf", "-p", "hi"}).is_parsed());
    // llama.cpp common/common.h, common_params_sampling and common_params.n_predict.
    QCOMPARE(r.sampling.temperature, 0.80f);
    QCOMPARE(r.sampling.top_k, 40);
    QCOMPARE(r.sampling.top_p, 0.95f);
    QCOMPARE(r.sampling.min_p, 0.05f);
    QCOMPARE(r.sampling.repeat_penalty, 1.00f);
    QCOMPARE(r.sampling.repeat_last_n, 64);
    QCOMPARE(r.sampling.seed, kRandomSeed);
    QCOMPARE(r.sampling.n_predict, -1);
    const iwb::SamplingParams p = r.sampling.to_params(4242);
    QCOMPARE(p.seed, uint64_t{4242});  // -1: the run's random seed
    QCOMPARE(p.repeat_penalty, 1.0f);
    QCOMPARE(p.penalty_last_n, 64);
    QCOMPARE(p.frequency_penalty, 0.0f);
    QCOMPARE(p.presence_penalty, 0.0f);
    r.sampling.seed = 7;
    QCOMPARE(r.sampling.to_params(4242).seed, uint64_t{7});
  }

  // Temperature 0 without penalties is the argmax of the logits, as llama.cpp's greedy sampler.
  void greedyWithoutPenaltyIsArgmax() {
    SamplingOptions s;
    s.temperature = 0;
    std::vector<float> logits = {0.5f, 3.0f, 2.9f, -1.0f, 3.0f};
    const std::vector<int32_t> history = {1, 1, 1, 4};  // a penalty would push 1 and 4 down
    iwb::Sampler plain(s.to_params(1));
    QCOMPARE(plain.sample(logits, history), 1);  // the first of the tied best
    s.repeat_penalty = 1.1f;
    iwb::Sampler penalized(s.to_params(1));
    QCOMPARE(penalized.sample(logits, history), 2);
  }

  void enumsAndLists() {
    std::string type = "f32";
    std::vector<int32_t> lengths = {1, 2};
    OptionTable t("convert", "");
    t.add({.names = {"--type"}, .help = "weights", .destination = &type, .choices = {"f32", "f16"}});
    t.add({.names = {"--draft-n"},
           .value_name = "LIST",
           .help = "lengths",
           .destination = &lengths,
           .min = 1,
           .max = 32});
    QVERIFY(parse(t, {"--type", "F16", "--draft-n", "1,4,8"}).is_parsed());
    QCOMPARE(type, std::string("f16"));  // stored as the table spells it
    QCOMPARE(lengths, (std::vector<int32_t>{1, 4, 8}));
    QCOMPARE(QString::fromStdString(parse(t, {"--type", "q4_0"}).message),
             QString("iwb convert: --type expects one of f32, f16, got 'q4_0'"));
    for (const char* bad : {"1,0", "", "1,,2", "1,2,", "x"}) {
      const ParseOutcome o = parse(t, {"--draft-n", bad});
      QCOMPARE(o.kind, ParseOutcome::Kind::UsageError);
      QCOMPARE(
          QString::fromStdString(o.message),
          QString("iwb convert: --draft-n expects a comma-separated list of integers from 1 to 32, got '%1'").arg(bad));
    }
    QVERIFY(QString::fromStdString(t.help()).contains("--type f32|f16"));
  }

  void optionalStringTellsEmptyFromAbsent() {
    RunLike r;
    QVERIFY(parse(r.table, {"-m", "a.gguf"}).is_parsed());
    QVERIFY(!r.prompt.text.has_value());
    QVERIFY(parse(r.table, {"-m", "a.gguf", "-p", ""}).is_parsed());
    QVERIFY(r.prompt.text.has_value());
    QVERIFY(r.prompt.text->empty());
  }

  void helpListsEveryOptionOfEveryGroup() {
    RunLike r;
    const QString help = QString::fromStdString(r.table.help());
    QVERIFY(help.startsWith("usage: iwb run -m MODEL.gguf [options]\n"));
    for (const Option& o : r.table.options()) {
      for (const std::string& name : o.names) QVERIFY2(help.contains(QString::fromStdString(name)), name.c_str());
    }
    for (const char* heading : {"model:", "context:", "threads:", "device:", "sampling:", "speculation:", "output:"}) {
      QVERIFY2(help.contains(heading), heading);
    }
    // Defaults come from the destinations, so the help cannot drift from what a run uses.
    for (const char* shown : {"--temp, --temperature T", "(default: 0.8)", "(default: 40)", "(default: 0.95)",
                              "(default: 0.05)", "(default: 1)", "(default: 64)", "(default: -1)", "-s, --seed SEED",
                              "-c, --ctx-size, --ctx, --context N", "-ngl, --gpu-layers, --n-gpu-layers N",
                              "-md, --model-draft, --spec-draft-model, --draft-model FILE", "-h, --help"}) {
      QVERIFY2(help.contains(shown), shown);
    }
  }

  void gpuLayersAgainstDevice() {
    DeviceOptions d;
    QCOMPARE(*resolve_device(d, "none.gguf"), std::string("auto"));
    d.gpu_layers = 0;
    QCOMPARE(*resolve_device(d, "none.gguf"), std::string("cpu"));
    d.device = "cuda:1";
    QVERIFY(!resolve_device(d, "none.gguf").is_ok());
    d.gpu_layers = kAllGpuLayers;
    QCOMPARE(*resolve_device(d, "none.gguf"), std::string("cuda:1"));
    d.device = "cpu";
    QVERIFY(!resolve_device(d, "none.gguf").is_ok());
  }
};

QTEST_GUILESS_MAIN(TestCliOptions)
#include "test_cli_options.moc"
