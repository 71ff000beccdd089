// The results store's schema migration (a version-1 file keeps its probes and gains the bench
// table; a version-4 file gains the read-only bandwidth and the bench depth, its rows reading
// as "not measured" and depth 0), bench rows round-tripping (optional MBU/MFU and the depth
// included), listing by model, and a file from a newer program refused.
#include "iwb/engine/store/results_store.h"

#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

using namespace iwb;

namespace {

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

BenchResult sample(const std::string& identity, const std::string& test, std::optional<double> mbu) {
  BenchResult r;
  r.date = "2025-01-02T03:04:05Z";
  r.device_id = "cpu";
  r.device_name = "Test CPU";
  r.model_path = "/models/m.gguf";
  r.model_name = "m";
  r.model_identity = identity;
  r.architecture = "llama";
  r.file_type = "Q4_K_M";
  r.model_size_bytes = 1117320768ull;
  r.num_params = 1777088000ull;
  r.num_threads = 2;
  r.test = test;
  r.num_prompt_tokens = 512;
  r.num_repetitions = 3;
  r.tokens_per_s = {60.5, 61.25, 59.75};
  r.tokens_per_s_mean = 60.5;
  r.tokens_per_s_sd = 0.75;
  r.mbu = mbu;
  r.mfu = 0.125;
  r.predicted_flops_per_token = 3.1e9;
  r.predicted_bytes_per_token = 2.2e6;
  r.probe_date = mbu ? "2025-01-01T00:00:00Z" : "";
  return r;
}

}  // namespace

class TestResultsStore : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;

 private slots:
  void migratesVersion1() {
    const std::string path = m_tmp.filePath("v1.sqlite").toStdString();
    // What version 1 of the program wrote: the probes table and one probe.
    exec(path,
         "CREATE TABLE probes (id INTEGER PRIMARY KEY AUTOINCREMENT, device_id TEXT NOT NULL, device_name TEXT NOT NULL,"
         " date TEXT NOT NULL, num_threads INTEGER NOT NULL, copy_bytes_per_s REAL NOT NULL,"
         " triad_bytes_per_s REAL NOT NULL, peak_flops REAL NOT NULL, peak_flops_kind TEXT NOT NULL,"
         " buffer_bytes REAL NOT NULL);"
         "INSERT INTO probes (device_id, device_name, date, num_threads, copy_bytes_per_s, triad_bytes_per_s,"
         " peak_flops, peak_flops_kind, buffer_bytes) VALUES ('cpu', 'Old CPU', '2024-12-31T00:00:00Z', 2, 4e10, 3.5e10,"
         " 2.5e11, 'f32 FMA avx512', 536870912);"
         "PRAGMA user_version = 1;");
    auto store = ResultsStore::open(path);
    QVERIFY2(store.is_ok(), store.error_message().c_str());
    QCOMPARE(*(*store)->file_schema_version(), ResultsStore::schema_version());
    QCOMPARE(ResultsStore::schema_version(), 6);
    auto probe = (*store)->latest_probe("cpu");
    QVERIFY(probe.is_ok() && probe->has_value());
    QCOMPARE((*probe)->device_name, std::string("Old CPU"));
    QCOMPARE((*probe)->peak_flops, 2.5e11);
    QCOMPARE((*probe)->peak_int8_ops, 0.0);  // not measured by version 1
    QCOMPARE((*probe)->read_bytes_per_s, 0.0);
    QVERIFY(!(*probe)->has_read_bandwidth());
    QCOMPARE((*probe)->bandwidth_bytes_per_s(), 4e10);  // the copy stands in for the missing read-only figure
    // A new probe keeps its integer ceiling and its read-only bandwidth, which becomes the roof.
    ProbeResult fresh = **probe;
    fresh.peak_int8_ops = 6.4e11;
    fresh.peak_int8_kind = "int8 dot products, AVX-512 VNNI";
    fresh.read_bytes_per_s = 5.5e10;
    QVERIFY((*store)->add_probe(fresh).is_ok());
    auto newest = (*store)->latest_probe("cpu");
    QCOMPARE((*newest)->peak_int8_ops, 6.4e11);
    QCOMPARE((*newest)->peak_int8_kind, fresh.peak_int8_kind);
    QCOMPARE((*newest)->read_bytes_per_s, 5.5e10);
    QCOMPARE((*newest)->bandwidth_bytes_per_s(), 5.5e10);
    QCOMPARE((*newest)->stream_bytes_per_s(), 4e10);
    auto none = (*store)->list_bench_results();
    QVERIFY(none.is_ok() && none->empty());
  }

  void migratesVersion4() {
    const std::string path = m_tmp.filePath("v4.sqlite").toStdString();
    // A version-4 file as that program left it: made by this one, its version-5 columns
    // dropped, with one probe and one bench row in the old shape.
    {
      auto store = ResultsStore::open(path);
      QVERIFY(store.is_ok());
    }
    exec(path,
         "ALTER TABLE probes DROP COLUMN read_bytes_per_s;"
         "ALTER TABLE bench_runs DROP COLUMN n_depth;"
         "INSERT INTO probes (device_id, device_name, date, num_threads, copy_bytes_per_s, triad_bytes_per_s,"
         " peak_flops, peak_flops_kind, buffer_bytes, peak_int8_ops, peak_int8_kind) VALUES ('cpu', 'Old CPU',"
         " '2025-06-01T00:00:00Z', 2, 4e10, 4.5e10, 5e11, 'f32 FMA, AVX-512', 536870912, 1.9e12, 'int8 VNNI');"
         "INSERT INTO bench_runs (date, device_id, device_name, model_path, model_name, model_identity, architecture,"
         " file_type, model_size_bytes, num_params, num_threads, test, num_prompt_tokens, num_generated_tokens,"
         " num_repetitions, tokens_per_s_mean, tokens_per_s_sd, tokens_per_s_samples, mbu, mfu,"
         " predicted_flops_per_token, predicted_bytes_per_token, probe_date) VALUES ('2025-06-01T00:00:00Z', 'cpu',"
         " 'Old CPU', '/m.gguf', 'm', 'size=1;fnv=a', 'llama', 'Q4_0', 1, 1, 2, 'tg128', 4, 128, 3, 20, 1, '19 20 21',"
         " 0.9, NULL, 1e9, 1e9, '2025-06-01T00:00:00Z');"
         "PRAGMA user_version = 4;");
    auto store = ResultsStore::open(path);
    QVERIFY2(store.is_ok(), store.error_message().c_str());
    QCOMPARE(*(*store)->file_schema_version(), ResultsStore::schema_version());
    auto probe = (*store)->latest_probe("cpu");
    QVERIFY(probe.is_ok() && probe->has_value());
    QCOMPARE((*probe)->peak_int8_ops, 1.9e12);                 // old figures kept
    QCOMPARE((*probe)->read_bytes_per_s, 0.0);                 // not measured then
    QCOMPARE((*probe)->bandwidth_bytes_per_s(), 4.5e10);       // the better of copy and triad stands in
    auto rows = (*store)->list_bench_results();
    QVERIFY(rows.is_ok());
    QCOMPARE(rows->size(), size_t(1));
    QCOMPARE((*rows)[0].test, std::string("tg128"));
    QCOMPARE((*rows)[0].num_depth_tokens, int64_t(0));         // an old run had an empty context
    QCOMPARE(*(*rows)[0].mbu, 0.9);
    // New rows carry both.
    BenchResult deep = sample("size=1;fnv=a", "tg128 @ d8192", 0.5);
    deep.num_depth_tokens = 8192;
    QVERIFY((*store)->add_bench_result(deep).is_ok());
    ProbeResult fresh = **probe;
    fresh.read_bytes_per_s = 6e10;
    QVERIFY((*store)->add_probe(fresh).is_ok());
    store->reset();
    auto reopened = ResultsStore::open(path);  // a second open migrates nothing
    QVERIFY2(reopened.is_ok(), reopened.error_message().c_str());
    QCOMPARE((*(*reopened)->latest_probe("cpu"))->read_bytes_per_s, 6e10);
    auto again = (*reopened)->list_bench_results();
    QCOMPARE(again->size(), size_t(2));
    QCOMPARE((*again)[1].num_depth_tokens, int64_t(8192));
    QCOMPARE((*again)[1].test, std::string("tg128 @ d8192"));
  }

  void benchRowsRoundTrip() {
    const std::string path = m_tmp.filePath("bench.sqlite").toStdString();
    {
      auto store = ResultsStore::open(path);
      QVERIFY(store.is_ok());
      auto a = (*store)->add_bench_result(sample("size=1;fnv=a", "pp512", 0.25));
      auto b = (*store)->add_bench_result(sample("size=2;fnv=b", "tg128", std::nullopt));
      auto c = (*store)->add_bench_result(sample("size=1;fnv=a", "tg128", 0.5));
      QVERIFY(a.is_ok() && b.is_ok() && c.is_ok());
      QVERIFY(*a < *b && *b < *c);
    }
    auto store = ResultsStore::open(path);  // reopened: rows persist, no second migration
    QVERIFY(store.is_ok());
    auto all = (*store)->list_bench_results();
    QVERIFY(all.is_ok());
    QCOMPARE(all->size(), size_t(3));
    const BenchResult& first = (*all)[0];
    const BenchResult expected = sample("size=1;fnv=a", "pp512", 0.25);
    QCOMPARE(first.test, std::string("pp512"));
    QCOMPARE(first.model_size_bytes, expected.model_size_bytes);
    QCOMPARE(first.num_params, expected.num_params);
    QCOMPARE(first.tokens_per_s, expected.tokens_per_s);
    QCOMPARE(first.tokens_per_s_sd, 0.75);
    QCOMPARE(*first.mbu, 0.25);
    QCOMPARE(*first.mfu, 0.125);
    QCOMPARE(first.predicted_flops_per_token, 3.1e9);
    QCOMPARE(first.probe_date, expected.probe_date);
    QVERIFY(!(*all)[1].mbu.has_value());  // no probe: stored as NULL, read back as empty

    auto of_a = (*store)->list_bench_results("size=1;fnv=a");
    QVERIFY(of_a.is_ok());
    QCOMPARE(of_a->size(), size_t(2));
    auto newest = (*store)->list_bench_results({}, 2);
    QVERIFY(newest.is_ok());
    QCOMPARE(newest->size(), size_t(2));
    QCOMPARE((*newest)[0].test, std::string("tg128"));
    QCOMPARE((*newest)[1].id, (*all)[2].id);
  }

  void refusesNewerSchema() {
    const std::string path = m_tmp.filePath("future.sqlite").toStdString();
    exec(path, "PRAGMA user_version = 99;");
    auto store = ResultsStore::open(path);
    QVERIFY(!store.is_ok());
    QVERIFY2(store.error_message().find("99") != std::string::npos, store.error_message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestResultsStore)
#include "test_results_store.moc"
