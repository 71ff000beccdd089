// ResultsStore over the SQLite C API. WAL journal so the GUI can read while `iwb` writes;
// schema versions in PRAGMA user_version so later features add tables by migration.
#include "iwb/engine/store/results_store.h"

#include "store/quant_store.h"
#include "store/serve_store.h"
#include "store/sqlite_statement.h"

#include <cstdlib>
#include <filesystem>

namespace iwb {
namespace {

// 1: probes. 2: bench_runs. 3: int8 ceilings in probes. 4: quant_runs, quant_tensor_errors.
// 5: read-only bandwidth in probes, context depth in bench_runs. 6: serve_runs, serve_points.
// 7: the writer of a running quant run. 8: long-context speed and KV capacity of quant runs.
// 9: PPL(Q)/PPL(base) of quant runs against their base.
constexpr int kSchemaVersion = 9;

// Whether `table` has `column` already: a migration that adds a column skips it then (a file
// whose version number was set back by hand, as tests do, keeps its newer columns).
Result<bool> has_column(sqlite3* db, const std::string& table, const std::string& column) {
  const std::string sql = "PRAGMA table_info(" + table + ")";
  SqliteStatement s(db, sql.c_str());
  if (!s.is_valid()) return s.prepare_error();
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    if (s.text(1) == column) return true;
  }
  if (rc != SQLITE_DONE) return s.error("table_info");
  return false;
}

ProbeResult probe_from_row(const SqliteStatement& s) {
  ProbeResult p;
  p.device_id = s.text(0);
  p.device_name = s.text(1);
  p.date = s.text(2);
  p.num_threads = static_cast<int>(s.integer(3));
  p.copy_bytes_per_s = s.real(4);
  p.triad_bytes_per_s = s.real(5);
  p.peak_flops = s.real(6);
  p.peak_flops_kind = s.text(7);
  p.buffer_bytes = s.real(8);
  p.peak_int8_ops = s.real(9);
  p.peak_int8_kind = s.text(10);
  p.read_bytes_per_s = s.real(11);
  return p;
}

constexpr const char* kProbeColumns =
    "device_id, device_name, date, num_threads, copy_bytes_per_s, triad_bytes_per_s, peak_flops, "
    "peak_flops_kind, buffer_bytes, peak_int8_ops, peak_int8_kind, read_bytes_per_s";

}  // namespace

ResultsStore::~ResultsStore() { sqlite3_close(m_db); }

std::string ResultsStore::default_path() {
  if (const char* env = std::getenv("IWB_RESULTS_DB"); env && *env) return env;
  std::filesystem::path base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg)
    base = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home)
    base = std::filesystem::path(home) / ".local/share";
  else
    base = std::filesystem::temp_directory_path();
  return (base / "inference-workbench" / "results.sqlite").string();
}

Result<std::unique_ptr<ResultsStore>> ResultsStore::open(const std::string& path) {
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::unique_ptr<ResultsStore> store(new ResultsStore());
  store->m_path = path;
  if (sqlite3_open_v2(path.c_str(), &store->m_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string why = store->m_db ? sqlite3_errmsg(store->m_db) : "out of memory";
    return make_error(ErrorCode::IoError, "cannot open results store '" + path + "': " + why);
  }
  sqlite3_busy_timeout(store->m_db, 5000);
  IWB_RETURN_IF_ERROR(sqlite_exec(store->m_db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  IWB_RETURN_IF_ERROR(store->migrate());
  IWB_RETURN_IF_ERROR(mark_abandoned_serve_runs(store->m_db));
  IWB_RETURN_IF_ERROR(mark_abandoned_quant_runs(store->m_db));
  return store;
}

Status ResultsStore::migrate() {
  SqliteStatement version(m_db, "PRAGMA user_version");
  if (!version.is_valid()) return version.prepare_error();
  const int current = version.step() == SQLITE_ROW ? static_cast<int>(version.integer(0)) : 0;
  if (current > kSchemaVersion) {
    return make_error(ErrorCode::Unsupported, "results store '" + m_path + "' has schema version " +
                                                  std::to_string(current) + ", newer than this program's " +
                                                  std::to_string(kSchemaVersion));
  }
  if (current < 1) {
    IWB_RETURN_IF_ERROR(sqlite_exec(m_db,
                             "BEGIN;"
                             "CREATE TABLE IF NOT EXISTS probes ("
                             "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
                             "  device_id TEXT NOT NULL, device_name TEXT NOT NULL, date TEXT NOT NULL,"
                             "  num_threads INTEGER NOT NULL, copy_bytes_per_s REAL NOT NULL,"
                             "  triad_bytes_per_s REAL NOT NULL, peak_flops REAL NOT NULL,"
                             "  peak_flops_kind TEXT NOT NULL, buffer_bytes REAL NOT NULL);"
                             "CREATE INDEX IF NOT EXISTS probes_by_device ON probes(device_id, id);"
                             "PRAGMA user_version = 1;"
                             "COMMIT;"));
  }
  if (current < 2) {
    // Added by `iwb bench`; version-1 files keep their probes and gain this table.
    IWB_RETURN_IF_ERROR(sqlite_exec(m_db,
                             "BEGIN;"
                             "CREATE TABLE IF NOT EXISTS bench_runs ("
                             "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
                             "  date TEXT NOT NULL, device_id TEXT NOT NULL, device_name TEXT NOT NULL,"
                             "  model_path TEXT NOT NULL, model_name TEXT NOT NULL, model_identity TEXT NOT NULL,"
                             "  architecture TEXT NOT NULL, file_type TEXT NOT NULL,"
                             "  model_size_bytes INTEGER NOT NULL, num_params INTEGER NOT NULL,"
                             "  num_threads INTEGER NOT NULL, test TEXT NOT NULL,"
                             "  num_prompt_tokens INTEGER NOT NULL, num_generated_tokens INTEGER NOT NULL,"
                             "  num_repetitions INTEGER NOT NULL, tokens_per_s_mean REAL NOT NULL,"
                             "  tokens_per_s_sd REAL NOT NULL, tokens_per_s_samples TEXT NOT NULL,"
                             "  mbu REAL, mfu REAL,"
                             "  predicted_flops_per_token REAL NOT NULL, predicted_bytes_per_token REAL NOT NULL,"
                             "  probe_date TEXT NOT NULL);"
                             "CREATE INDEX IF NOT EXISTS bench_runs_by_model ON bench_runs(model_identity, id);"
                             "PRAGMA user_version = 2;"
                             "COMMIT;"));
  }
  if (current < 3) {
    // The integer dot-product ceiling of quantized kernels; older probes read as 0 (unmeasured).
    IWB_RETURN_IF_ERROR(sqlite_exec(m_db,
                             "BEGIN;"
                             "ALTER TABLE probes ADD COLUMN peak_int8_ops REAL NOT NULL DEFAULT 0;"
                             "ALTER TABLE probes ADD COLUMN peak_int8_kind TEXT NOT NULL DEFAULT '';"
                             "PRAGMA user_version = 3;"
                             "COMMIT;"));
  }
  if (current < 4) {
    // The quantization lab's runs; earlier tables and rows are kept as they are.
    IWB_RETURN_IF_ERROR(sqlite_exec(m_db, (std::string("BEGIN;") + quant_schema_sql() + "PRAGMA user_version = 4; COMMIT;").c_str()));
  }
  if (current < 5) {
    // The read-only bandwidth (decode's memory roof) and `iwb bench -d`'s context depth; older
    // probes read as 0 (not measured: the copy figure stands in) and older runs as depth 0.
    std::string sql = "BEGIN;";
    Result<bool> has_read = has_column(m_db, "probes", "read_bytes_per_s");
    if (!has_read) return has_read.status();
    if (!*has_read) sql += "ALTER TABLE probes ADD COLUMN read_bytes_per_s REAL NOT NULL DEFAULT 0;";
    Result<bool> has_depth = has_column(m_db, "bench_runs", "n_depth");
    if (!has_depth) return has_depth.status();
    if (!*has_depth) sql += "ALTER TABLE bench_runs ADD COLUMN n_depth INTEGER NOT NULL DEFAULT 0;";
    IWB_RETURN_IF_ERROR(sqlite_exec(m_db, (sql + "PRAGMA user_version = 5; COMMIT;").c_str()));
  }
  if (current < 6) {
    // `iwb bench-serve` runs against remote endpoints; earlier tables are kept as they are.
    IWB_RETURN_IF_ERROR(
        sqlite_exec(m_db, (std::string("BEGIN;") + serve_schema_sql() + "PRAGMA user_version = 6; COMMIT;").c_str()));
  }
  if (current < 7) {
    // Who writes a quantization-lab run while it is running, so a run whose process died reads
    // as interrupted; older rows read as "cannot tell" (0, '').
    std::string sql = "BEGIN;";
    Result<bool> has_writer = has_column(m_db, "quant_runs", "writer_pid");
    if (!has_writer) return has_writer.status();
    if (!*has_writer) {
      sql +=
          "ALTER TABLE quant_runs ADD COLUMN writer_pid INTEGER NOT NULL DEFAULT 0;"
          "ALTER TABLE quant_runs ADD COLUMN writer_boot_id TEXT NOT NULL DEFAULT '';"
          "ALTER TABLE quant_runs ADD COLUMN writer_start_ticks INTEGER NOT NULL DEFAULT 0;";
    }
    IWB_RETURN_IF_ERROR(sqlite_exec(m_db, (sql + "PRAGMA user_version = 7; COMMIT;").c_str()));
  }
  if (current < 8) {
    // Per quant run: generation speed at a context depth, the weights' and the KV cache's bytes
    // (per position, in blocks of kv_block_size) and the sequences of fit_context that fit in
    // fit_memory_bytes. Older rows read as not measured (NULL, 0).
    std::string sql = "BEGIN;";
    const char* const columns[][2] = {{"gen_depth", "INTEGER NOT NULL DEFAULT 0"},
                                      {"depth_gen_tokens_per_s", "REAL"},
                                      {"weights_bytes", "REAL"},
                                      {"kv_bytes_per_token", "REAL"},
                                      {"kv_block_size", "INTEGER NOT NULL DEFAULT 0"},
                                      {"fit_context", "INTEGER NOT NULL DEFAULT 0"},
                                      {"fit_memory_bytes", "REAL"},
                                      {"fit_sequences", "REAL"}};
    for (const auto& [name, type] : columns) {
      Result<bool> has = has_column(m_db, "quant_runs", name);
      if (!has) return has.status();
      if (!*has) sql += std::string("ALTER TABLE quant_runs ADD COLUMN ") + name + " " + type + ";";
    }
    IWB_RETURN_IF_ERROR(sqlite_exec(m_db, (sql + "PRAGMA user_version = 8; COMMIT;").c_str()));
  }
  if (current < 9) {
    // Per quant run against its base: PPL(Q)/PPL(base) and its per-token standard error. Older
    // rows read as not measured (NULL).
    std::string sql = "BEGIN;";
    for (const char* name : {"ppl_ratio", "ppl_ratio_error"}) {
      Result<bool> has = has_column(m_db, "quant_runs", name);
      if (!has) return has.status();
      if (!*has) sql += std::string("ALTER TABLE quant_runs ADD COLUMN ") + name + " REAL;";
    }
    IWB_RETURN_IF_ERROR(sqlite_exec(m_db, (sql + "PRAGMA user_version = 9; COMMIT;").c_str()));
  }
  return {};
}

int ResultsStore::schema_version() { return kSchemaVersion; }

Result<int> ResultsStore::file_schema_version() const {
  SqliteStatement version(m_db, "PRAGMA user_version");
  if (!version.is_valid()) return version.prepare_error();
  if (version.step() != SQLITE_ROW) return version.error("query");
  return static_cast<int>(version.integer(0));
}

Status ResultsStore::add_probe(const ProbeResult& p) {
  SqliteStatement s(m_db,
                    "INSERT INTO probes (device_id, device_name, date, num_threads, copy_bytes_per_s, "
                    "triad_bytes_per_s, peak_flops, peak_flops_kind, buffer_bytes, peak_int8_ops, peak_int8_kind, "
                    "read_bytes_per_s) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
  if (!s.is_valid()) return s.prepare_error();
  s.bind(1, p.device_id);
  s.bind(2, p.device_name);
  s.bind(3, p.date);
  s.bind(4, p.num_threads);
  s.bind(5, p.copy_bytes_per_s);
  s.bind(6, p.triad_bytes_per_s);
  s.bind(7, p.peak_flops);
  s.bind(8, p.peak_flops_kind);
  s.bind(9, p.buffer_bytes);
  s.bind(10, p.peak_int8_ops);
  s.bind(11, p.peak_int8_kind);
  s.bind(12, p.read_bytes_per_s);
  return s.run();
}

Result<std::optional<ProbeResult>> ResultsStore::latest_probe(const std::string& device_id) const {
  const std::string sql =
      std::string("SELECT ") + kProbeColumns + " FROM probes WHERE device_id = ? ORDER BY id DESC LIMIT 1";
  SqliteStatement s(m_db, sql.c_str());
  if (!s.is_valid()) return s.prepare_error();
  s.bind(1, device_id);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<ProbeResult>{};
  if (rc != SQLITE_ROW) return s.error("query");
  return std::optional<ProbeResult>{probe_from_row(s)};
}

Result<std::vector<ProbeResult>> ResultsStore::list_probes() const {
  const std::string sql = std::string("SELECT ") + kProbeColumns + " FROM probes ORDER BY id";
  SqliteStatement s(m_db, sql.c_str());
  if (!s.is_valid()) return s.prepare_error();
  std::vector<ProbeResult> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(probe_from_row(s));
  if (rc != SQLITE_DONE) return s.error("query");
  return out;
}

}  // namespace iwb
