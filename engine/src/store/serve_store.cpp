// ResultsStore's bench-serve runs (schema v6): a run row added as running before the load
// starts, finished with its points in one transaction, and recognised as interrupted when the
// process that was writing it has died.
#include "store/serve_store.h"

#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/store/results_store.h"
#include "remote/bench_serve_internal.h"
#include "store/process_identity.h"
#include "store/sqlite_statement.h"

namespace iwb {
namespace {

constexpr const char* kStatsNames[] = {"ttft", "tpot", "itl", "e2el"};

}  // namespace

const char* serve_schema_sql() {
  return "CREATE TABLE IF NOT EXISTS serve_runs ("
         "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
         "  status TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT NOT NULL DEFAULT '',"
         "  base_url TEXT NOT NULL, model TEXT NOT NULL, server_kind TEXT NOT NULL, label TEXT NOT NULL,"
         "  config_json TEXT NOT NULL, error TEXT NOT NULL DEFAULT '', num_points INTEGER NOT NULL DEFAULT 0,"
         "  writer_pid INTEGER NOT NULL, writer_boot_id TEXT NOT NULL, writer_start_ticks INTEGER NOT NULL);"
         "CREATE TABLE IF NOT EXISTS serve_points ("
         "  run_id INTEGER NOT NULL REFERENCES serve_runs(id), point_index INTEGER NOT NULL,"
         "  max_concurrency INTEGER NOT NULL, request_rate REAL NOT NULL, duration_seconds REAL NOT NULL,"
         "  num_completed INTEGER NOT NULL, num_failed INTEGER NOT NULL,"
         "  total_input_tokens INTEGER NOT NULL, total_output_tokens INTEGER NOT NULL,"
         "  request_throughput REAL NOT NULL, output_throughput REAL NOT NULL,"
         "  total_token_throughput REAL NOT NULL, goodput REAL NOT NULL,"
         "  ttft_mean REAL, ttft_median REAL, ttft_p90 REAL, ttft_p99 REAL,"
         "  tpot_mean REAL, tpot_median REAL, tpot_p90 REAL, tpot_p99 REAL,"
         "  itl_mean REAL, itl_median REAL, itl_p90 REAL, itl_p99 REAL,"
         "  e2el_mean REAL, e2el_median REAL, e2el_p90 REAL, e2el_p99 REAL,"
         "  point_json TEXT NOT NULL,"  // the whole point: statistics, requests, scraped series
         "  PRIMARY KEY (run_id, point_index));";
}

Status mark_abandoned_serve_runs(sqlite3* db) {
  SqliteStatement s(
      db, "SELECT id, writer_pid, writer_boot_id, writer_start_ticks FROM serve_runs WHERE status = 'running'");
  if (!s.is_valid()) return s.prepare_error();
  std::vector<int64_t> abandoned;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    ProcessIdentity writer{s.integer(1), s.text(2), s.integer(3)};
    if (!may_be_alive(writer)) abandoned.push_back(s.integer(0));
  }
  if (rc != SQLITE_DONE) return s.error("query");
  for (const int64_t id : abandoned) {
    SqliteStatement u(db,
                      "UPDATE serve_runs SET status = 'interrupted', finished_at = ?, "
                      "error = 'the process recording this run ended before it finished' "
                      "WHERE id = ? AND status = 'running'");
    if (!u.is_valid()) return u.prepare_error();
    u.bind(1, current_utc_iso8601());
    u.bind(2, id);
    IWB_RETURN_IF_ERROR(u.run());
  }
  return {};
}

Result<int64_t> ResultsStore::begin_serve_run(const remote::BenchServeConfig& config, const std::string& label) {
  const ProcessIdentity me = this_process();
  SqliteStatement s(m_db,
                    "INSERT INTO serve_runs (status, started_at, base_url, model, server_kind, label, config_json, "
                    "writer_pid, writer_boot_id, writer_start_ticks) VALUES ('running',?,?,?,'',?,?,?,?,?)");
  if (!s.is_valid()) return s.prepare_error();
  s.bind(1, current_utc_iso8601());
  s.bind(2, config.endpoint.base_url);
  s.bind(3, config.model);
  s.bind(4, label);
  s.bind(5, remote::bench_serve_config_to_json(config));
  s.bind(6, me.pid);
  s.bind(7, me.boot_id);
  s.bind(8, me.start_ticks);
  IWB_RETURN_IF_ERROR(s.run());
  return static_cast<int64_t>(sqlite3_last_insert_rowid(m_db));
}

Status ResultsStore::finish_serve_run(int64_t id, const remote::BenchServeResult& result, const std::string& status,
                                      const std::string& error) {
  if (status != "done" && status != "interrupted" && status != "failed") {
    return make_error(ErrorCode::InvalidArgument,
                      "a bench-serve run finishes as done, interrupted or failed, not '" + status + "'");
  }
  IWB_RETURN_IF_ERROR(sqlite_exec(m_db, "BEGIN IMMEDIATE;"));
  auto write = [&]() -> Status {
    SqliteStatement u(m_db,
                      "UPDATE serve_runs SET status = ?, finished_at = ?, model = ?, server_kind = ?, "
                      "config_json = ?, error = ?, num_points = ? WHERE id = ?");
    if (!u.is_valid()) return u.prepare_error();
    u.bind(1, status);
    u.bind(2, current_utc_iso8601());
    u.bind(3, result.config.model);
    u.bind(4, std::string(remote::server_kind_name(result.server_kind)));
    u.bind(5, remote::bench_serve_config_to_json(result.config));
    u.bind(6, error);
    u.bind(7, static_cast<int64_t>(result.points.size()));
    u.bind(8, id);
    IWB_RETURN_IF_ERROR(u.run());
    if (sqlite3_changes(m_db) != 1)
      return make_error(ErrorCode::NotFound, "no bench-serve run " + std::to_string(id) + " in the store");
    SqliteStatement p(
        m_db, "INSERT INTO serve_points VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?, ?,?,?,?, ?,?,?,?, ?,?,?,?, ?,?,?,?, ?)");
    if (!p.is_valid()) return p.prepare_error();
    for (size_t i = 0; i < result.points.size(); ++i) {
      const remote::BenchServePoint& pt = result.points[i];
      p.reset();
      int c = 1;
      p.bind(c++, id);
      p.bind(c++, static_cast<int64_t>(i));
      p.bind(c++, pt.max_concurrency);
      p.bind(c++, pt.request_rate);
      p.bind(c++, pt.duration_seconds);
      p.bind(c++, pt.num_completed);
      p.bind(c++, pt.num_failed);
      p.bind(c++, pt.total_input_tokens);
      p.bind(c++, pt.total_output_tokens);
      p.bind(c++, pt.request_throughput);
      p.bind(c++, pt.output_throughput);
      p.bind(c++, pt.total_token_throughput);
      p.bind(c++, pt.goodput);
      for (const remote::LatencyStats* st : {&pt.ttft, &pt.tpot, &pt.itl, &pt.e2el}) {
        for (const double v : {st->mean, st->median, st->p90, st->p99}) {
          if (st->count > 0)
            p.bind(c++, v);
          else
            p.bind_null(c++);  // no sample: not "0 ms"
        }
      }
      p.bind(c++, remote::bench_serve_point_to_json(pt, true));
      IWB_RETURN_IF_ERROR(p.run());
    }
    return {};
  };
  const Status written = write();
  if (!written) {
    sqlite_exec(m_db, "ROLLBACK;");
    return written;
  }
  return sqlite_exec(m_db, "COMMIT;");
}

Result<std::vector<ResultsStore::ServeRunSummary>> ResultsStore::list_serve_runs() const {
  SqliteStatement s(
      m_db,
      "SELECT id, status, started_at, base_url, model, server_kind, label, num_points FROM serve_runs ORDER BY id");
  if (!s.is_valid()) return s.prepare_error();
  std::vector<ServeRunSummary> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    ServeRunSummary r;
    r.id = s.integer(0);
    r.status = s.text(1);
    r.started_at = s.text(2);
    r.base_url = s.text(3);
    r.model = s.text(4);
    r.server_kind = s.text(5);
    r.label = s.text(6);
    r.num_points = static_cast<int>(s.integer(7));
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return s.error("query");
  return out;
}

Result<remote::BenchServeResult> ResultsStore::serve_run(int64_t id) const {
  SqliteStatement s(m_db, "SELECT config_json, server_kind, started_at FROM serve_runs WHERE id = ?");
  if (!s.is_valid()) return s.prepare_error();
  s.bind(1, id);
  const int rc = s.step();
  if (rc == SQLITE_DONE)
    return make_error(ErrorCode::NotFound, "no bench-serve run " + std::to_string(id) + " in the store");
  if (rc != SQLITE_ROW) return s.error("query");
  auto config = remote::bench_serve_config_from_json(s.text(0));
  if (!config) return config.status();
  remote::BenchServeResult result;
  result.config = std::move(*config);
  result.server_kind = remote::server_kind_from_name(s.text(1));
  result.started_at = s.text(2);
  SqliteStatement p(m_db, "SELECT point_json FROM serve_points WHERE run_id = ? ORDER BY point_index");
  if (!p.is_valid()) return p.prepare_error();
  p.bind(1, id);
  int prc;
  while ((prc = p.step()) == SQLITE_ROW) {
    auto point = remote::bench_serve_point_from_json(p.text(0));
    if (!point) return point.status();
    result.points.push_back(std::move(*point));
  }
  if (prc != SQLITE_DONE) return p.error("query");
  return result;
}

}  // namespace iwb
