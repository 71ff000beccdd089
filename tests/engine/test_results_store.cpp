// The results store's schema migration (a version-1 file keeps its probes and gains the bench
// table; a version-4 file gains the read-only bandwidth and the bench depth, its rows reading
// as "not measured" and depth 0), bench rows round-tripping (optional MBU/MFU and the depth
// included), listing by model, a version-7 file gaining the quant runs' long-context and KV
// capacity columns (version 8), and a file from a newer program refused.
#include "iwb/engine/quant/quant_run.h"
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

// A finished quant run with the fields the migration tests look at.
quant::QuantRun doneRun(const char* kind, const char* date, const char* weights, const char* kv) {
  quant::QuantRun r;
  r.kind = kind;
  r.date = date;
  r.status = quant::RunStatus::Done;
  r.weight_type = weights;
  r.kv_cache_type = kv;
  return r;
}

// Writes `run` into a new store at `path` with today's schema; the caller then sets the file
// back to an older version: what an older program left on disk.
void writeRun(const std::string& path, const quant::QuantRun& run) {
  auto store = ResultsStore::open(path);
  QVERIFY(store.is_ok());
  QVERIFY((*store)->add_quant_run(run).is_ok());
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
    exec(
        path,
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
    QCOMPARE(ResultsStore::schema_version(), 9);
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
    QCOMPARE((*probe)->peak_int8_ops, 1.9e12);            // old figures kept
    QCOMPARE((*probe)->read_bytes_per_s, 0.0);            // not measured then
    QCOMPARE((*probe)->bandwidth_bytes_per_s(), 4.5e10);  // the better of copy and triad stands in
    auto rows = (*store)->list_bench_results();
    QVERIFY(rows.is_ok());
    QCOMPARE(rows->size(), size_t(1));
    QCOMPARE((*rows)[0].test, std::string("tg128"));
    QCOMPARE((*rows)[0].num_depth_tokens, int64_t(0));  // an old run had an empty context
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

  // A lab run left "running" by a process that died reads as interrupted when the store is
  // opened again; one this process still writes, and an old row without a writer, stay running.
  void runsOfDeadWritersBecomeInterrupted() {
    const std::string path = m_tmp.filePath("interrupted.sqlite").toStdString();
    int64_t dead = 0, alive = 0, unknown = 0;
    {
      auto store = ResultsStore::open(path);
      QVERIFY2(store, store.error_message().c_str());
      quant::QuantRun run;
      run.kind = "quantize";
      run.status = quant::RunStatus::Running;
      dead = *(*store)->add_quant_run(run);
      alive = *(*store)->add_quant_run(run);
      unknown = *(*store)->add_quant_run(run);
    }
    // The same pid with another start time is a reused pid: the writer is gone.
    exec(path,
         ("UPDATE quant_runs SET writer_start_ticks = writer_start_ticks + 12345 WHERE id = " + std::to_string(dead))
             .c_str());
    exec(path, ("UPDATE quant_runs SET writer_pid = 0, writer_boot_id = '', writer_start_ticks = 0 WHERE id = " +
                std::to_string(unknown))
                   .c_str());
    auto store = ResultsStore::open(path);
    QVERIFY2(store, store.error_message().c_str());
    auto runs = (*store)->list_quant_runs();
    QVERIFY(runs);
    QCOMPARE(runs->size(), size_t{3});
    for (const quant::QuantRun& r : *runs) {
      if (r.id == dead) {
        QCOMPARE(r.status, quant::RunStatus::Interrupted);
        QVERIFY2(r.error.find("interrupted") != std::string::npos, r.error.c_str());
      } else {
        QVERIFY(r.id == alive || r.id == unknown);
        QCOMPARE(r.status, quant::RunStatus::Running);
      }
    }
    QCOMPARE(std::string(quant::run_status_name(quant::RunStatus::Interrupted)), std::string("interrupted"));
    QCOMPARE(quant::run_status_from_name("interrupted"), quant::RunStatus::Interrupted);
  }

  void migratesVersion7() {
    const std::string path = m_tmp.filePath("v7.sqlite").toStdString();
    // A version-7 file: one quant run written before version 8, its newer columns dropped.
    quant::QuantRun old = doneRun("lab", "2026-11-20T10:00:00Z", "Q4_0", "q8_0");
    old.context = 512;
    old.kl_mean = 0.0125;
    old.gen_tokens_per_s = 42.5;
    writeRun(path, old);
    exec(path,
         "ALTER TABLE quant_runs DROP COLUMN gen_depth; ALTER TABLE quant_runs DROP COLUMN depth_gen_tokens_per_s;"
         "ALTER TABLE quant_runs DROP COLUMN weights_bytes; ALTER TABLE quant_runs DROP COLUMN kv_bytes_per_token;"
         "ALTER TABLE quant_runs DROP COLUMN kv_block_size; ALTER TABLE quant_runs DROP COLUMN fit_context;"
         "ALTER TABLE quant_runs DROP COLUMN fit_memory_bytes; ALTER TABLE quant_runs DROP COLUMN fit_sequences;"
         "PRAGMA user_version = 7;");
    quant::QuantRun fresh = old;
    fresh.date = "2026-11-27T10:00:00Z";
    fresh.gen_depth = 4080;
    fresh.depth_gen_tokens_per_s = 17.25;
    fresh.weights_bytes = 1.5e9;
    fresh.kv_bytes_per_token = 15232;
    fresh.kv_block_size = 16;
    fresh.fit_context = 8192;
    fresh.fit_memory_bytes = 8.0 * 1024 * 1024 * 1024;
    fresh.fit_sequences = 56;
    {
      auto store = ResultsStore::open(path);
      QVERIFY2(store.is_ok(), store.error_message().c_str());
      QCOMPARE(*(*store)->file_schema_version(), ResultsStore::schema_version());
      auto runs = (*store)->list_quant_runs("");
      QVERIFY(runs.is_ok());
      QCOMPARE(runs->size(), size_t(1));
      const quant::QuantRun& r = (*runs)[0];
      QCOMPARE(*r.kl_mean, 0.0125);  // old figures kept
      QCOMPARE(*r.gen_tokens_per_s, 42.5);
      QCOMPARE(r.kv_cache_type, std::string("q8_0"));
      QCOMPARE(r.gen_depth, int64_t(0));  // not measured then
      QVERIFY(!r.depth_gen_tokens_per_s && !r.kv_bytes_per_token && !r.weights_bytes && !r.fit_sequences);
      QVERIFY((*store)->add_quant_run(fresh).is_ok());
    }
    // Set back by hand without dropping anything: the guarded migration keeps the columns.
    exec(path, "PRAGMA user_version = 7;");
    auto store = ResultsStore::open(path);
    QVERIFY2(store.is_ok(), store.error_message().c_str());
    auto runs = (*store)->list_quant_runs("");
    QVERIFY(runs.is_ok());
    QCOMPARE(runs->size(), size_t(2));
    const quant::QuantRun& r = (*runs)[1];
    QCOMPARE(r.gen_depth, int64_t(4080));
    QCOMPARE(*r.depth_gen_tokens_per_s, 17.25);
    QCOMPARE(*r.weights_bytes, 1.5e9);
    QCOMPARE(*r.kv_bytes_per_token, 15232.0);
    QCOMPARE(r.kv_block_size, int64_t(16));
    QCOMPARE(r.fit_context, int64_t(8192));
    QCOMPARE(*r.fit_memory_bytes, 8.0 * 1024 * 1024 * 1024);
    QCOMPARE(*r.fit_sequences, 56.0);
  }

  void migratesVersion8AddsThePerplexityRatio() {
    // A version-8 store: quant runs without PPL(Q)/PPL(base). Opening it adds the columns, the
    // old row reads as not measured, and a new row keeps both figures.
    const std::string path = m_tmp.filePath("v8.sqlite").toStdString();
    quant::QuantRun old = doneRun("eval", "2026-11-28T10:00:00Z", "Q4_K_M", "q4_0");
    old.kl_mean = 0.146;
    writeRun(path, old);
    exec(path,
         "ALTER TABLE quant_runs DROP COLUMN ppl_ratio; ALTER TABLE quant_runs DROP COLUMN ppl_ratio_error;"
         "PRAGMA user_version = 8;");
    auto store = ResultsStore::open(path);
    QVERIFY2(store.is_ok(), store.error_message().c_str());
    QCOMPARE(*(*store)->file_schema_version(), 9);
    quant::QuantRun fresh = old;
    fresh.ppl_ratio = 1.1343;
    fresh.ppl_ratio_error = 0.0071;
    QVERIFY((*store)->add_quant_run(fresh).is_ok());
    auto runs = (*store)->list_quant_runs("");
    QVERIFY(runs.is_ok());
    QCOMPARE(runs->size(), size_t(2));
    QCOMPARE(*(*runs)[0].kl_mean, 0.146);
    QVERIFY(!(*runs)[0].ppl_ratio && !(*runs)[0].ppl_ratio_error);
    QCOMPARE(*(*runs)[1].ppl_ratio, 1.1343);
    QCOMPARE(*(*runs)[1].ppl_ratio_error, 0.0071);
  }

  void kvCapacityFormula() {
    // 8 GiB, 1.5 GB of weights, 28 layers x 2 KV heads x 128 x (K+V) x 2 bytes = 28,672 B per
    // position, blocks of 16: 8192 positions are 234,881,024 B a sequence.
    const double memory = 8.0 * 1024 * 1024 * 1024;
    QCOMPARE(quant::kv_pool_bytes_for(28672, 16, 8192, 1), 234881024.0);
    QCOMPARE(quant::kv_sequences_that_fit(memory, 1.5e9, 28672, 16, 8192), int64_t(30));  // 6.09e9 / 2.35e8
    // An odd context is rounded up to whole blocks: 8193 positions take 8208.
    QCOMPARE(quant::kv_pool_bytes_for(28672, 16, 8193, 3), 3.0 * 8208 * 28672);
    QCOMPARE(quant::kv_sequences_that_fit(memory, 1.5e9, 28672, 16, 8193), int64_t(30));
    // Q8_0 keys and values: 34 bytes per 32 values instead of 64, about twice as many fit.
    QCOMPARE(quant::kv_sequences_that_fit(memory, 1.5e9, 28672.0 * 34 / 64, 16, 8192), int64_t(56));
    QCOMPARE(quant::kv_sequences_that_fit(memory, memory + 1, 28672, 16, 8192), int64_t(0));  // weights alone too big
    QCOMPARE(quant::kv_sequences_that_fit(memory, 1e9, 0, 16, 8192), int64_t(0));             // not measured
    QCOMPARE(quant::kv_pool_bytes_for(100, 0, 7, 2), 1400.0);                                 // no blocks: positions
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
