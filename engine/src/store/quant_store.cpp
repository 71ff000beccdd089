// ResultsStore's quantization-lab tables (schema v4, columns added in v8 and v9): quant_runs, one row per quantize /
// eval / lab run with every metric, and quant_tensor_errors, each quantized tensor's relative error.
#include "iwb/engine/store/results_store.h"

#include "store/process_identity.h"
#include "store/quant_store.h"
#include "store/sqlite_statement.h"

#include <array>
#include <vector>

namespace iwb {
namespace {

// Column order shared by INSERT, UPDATE and SELECT (id comes first in SELECT only).
constexpr std::array kRunColumns = {
    "kind", "date", "status", "error", "device_id", "device_name", "num_threads", "model_path", "model_identity",
    "model_name", "source_path", "source_identity", "weight_type", "is_imatrix", "imatrix_path", "keep_output_f16",
    "kv_cache_type", "is_reference", "text_name", "text_hash", "context", "stride", "num_chunks", "num_scored_tokens",
    "file_bytes", "memory_bytes", "num_parameters", "bits_per_weight", "perplexity", "perplexity_error", "kl_mean",
    "kl_median", "kl_p99", "kl_max", "top1_agreement", "delta_p_mean", "delta_p_rms", "prompt_tokens_per_s",
    "gen_tokens_per_s", "seconds", "note",
    // schema v8
    "gen_depth", "depth_gen_tokens_per_s", "weights_bytes", "kv_bytes_per_token", "kv_block_size", "fit_context",
    "fit_memory_bytes", "fit_sequences",
    // schema v9
    "ppl_ratio", "ppl_ratio_error"};

void bind_optional(SqliteStatement& s, int i, const std::optional<double>& v) {
  if (v)
    s.bind(i, *v);
  else
    s.bind_null(i);
}

// Binds every column of kRunColumns from index `first`; returns the next index.
int bind_run(SqliteStatement& s, const quant::QuantRun& r, int i) {
  s.bind(i++, r.kind);
  s.bind(i++, r.date);
  s.bind(i++, std::string(quant::run_status_name(r.status)));
  s.bind(i++, r.error);
  s.bind(i++, r.device_id);
  s.bind(i++, r.device_name);
  s.bind(i++, r.num_threads);
  s.bind(i++, r.model_path);
  s.bind(i++, r.model_identity);
  s.bind(i++, r.model_name);
  s.bind(i++, r.source_path);
  s.bind(i++, r.source_identity);
  s.bind(i++, r.weight_type);
  s.bind(i++, static_cast<int>(r.is_imatrix));
  s.bind(i++, r.imatrix_path);
  s.bind(i++, static_cast<int>(r.keep_output_f16));
  s.bind(i++, r.kv_cache_type);
  s.bind(i++, static_cast<int>(r.is_reference));
  s.bind(i++, r.text_name);
  s.bind(i++, r.text_hash);
  s.bind(i++, r.context);
  s.bind(i++, r.stride);
  s.bind(i++, r.num_chunks);
  s.bind(i++, r.num_scored_tokens);
  for (const auto* v : {&r.file_bytes, &r.memory_bytes, &r.num_parameters, &r.bits_per_weight, &r.perplexity,
                        &r.perplexity_error, &r.kl_mean, &r.kl_median, &r.kl_p99, &r.kl_max, &r.top1_agreement,
                        &r.delta_p_mean, &r.delta_p_rms, &r.prompt_tokens_per_s, &r.gen_tokens_per_s, &r.seconds}) {
    bind_optional(s, i++, *v);
  }
  s.bind(i++, r.note);
  s.bind(i++, r.gen_depth);
  bind_optional(s, i++, r.depth_gen_tokens_per_s);
  bind_optional(s, i++, r.weights_bytes);
  bind_optional(s, i++, r.kv_bytes_per_token);
  s.bind(i++, r.kv_block_size);
  s.bind(i++, r.fit_context);
  bind_optional(s, i++, r.fit_memory_bytes);
  bind_optional(s, i++, r.fit_sequences);
  bind_optional(s, i++, r.ppl_ratio);
  bind_optional(s, i++, r.ppl_ratio_error);
  return i;
}

quant::QuantRun run_from_row(const SqliteStatement& s) {
  quant::QuantRun r;
  int c = 0;
  r.id = s.integer(c++);
  r.kind = s.text(c++);
  r.date = s.text(c++);
  r.status = quant::run_status_from_name(s.text(c++));
  r.error = s.text(c++);
  r.device_id = s.text(c++);
  r.device_name = s.text(c++);
  r.num_threads = static_cast<int>(s.integer(c++));
  r.model_path = s.text(c++);
  r.model_identity = s.text(c++);
  r.model_name = s.text(c++);
  r.source_path = s.text(c++);
  r.source_identity = s.text(c++);
  r.weight_type = s.text(c++);
  r.is_imatrix = s.integer(c++) != 0;
  r.imatrix_path = s.text(c++);
  r.keep_output_f16 = s.integer(c++) != 0;
  r.kv_cache_type = s.text(c++);
  r.is_reference = s.integer(c++) != 0;
  r.text_name = s.text(c++);
  r.text_hash = s.text(c++);
  r.context = s.integer(c++);
  r.stride = s.integer(c++);
  r.num_chunks = s.integer(c++);
  r.num_scored_tokens = s.integer(c++);
  for (auto* v : {&r.file_bytes, &r.memory_bytes, &r.num_parameters, &r.bits_per_weight, &r.perplexity,
                  &r.perplexity_error, &r.kl_mean, &r.kl_median, &r.kl_p99, &r.kl_max, &r.top1_agreement,
                  &r.delta_p_mean, &r.delta_p_rms, &r.prompt_tokens_per_s, &r.gen_tokens_per_s, &r.seconds}) {
    if (!s.is_null(c)) *v = s.real(c);
    ++c;
  }
  r.note = s.text(c++);
  auto optional_at = [&](int column) -> std::optional<double> {
    return s.is_null(column) ? std::nullopt : std::optional<double>(s.real(column));
  };
  r.gen_depth = s.integer(c++);
  r.depth_gen_tokens_per_s = optional_at(c++);
  r.weights_bytes = optional_at(c++);
  r.kv_bytes_per_token = optional_at(c++);
  r.kv_block_size = s.integer(c++);
  r.fit_context = s.integer(c++);
  r.fit_memory_bytes = optional_at(c++);
  r.fit_sequences = optional_at(c++);
  r.ppl_ratio = optional_at(c++);
  r.ppl_ratio_error = optional_at(c++);
  return r;
}

std::string column_list() {
  std::string out;
  for (const char* c : kRunColumns) out += (out.empty() ? "" : ", ") + std::string(c);
  return out;
}

}  // namespace

const char* ResultsStore::quant_schema_sql() {
  return "CREATE TABLE IF NOT EXISTS quant_runs ("
         "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
         "  kind TEXT NOT NULL, date TEXT NOT NULL, status TEXT NOT NULL, error TEXT NOT NULL,"
         "  device_id TEXT NOT NULL, device_name TEXT NOT NULL, num_threads INTEGER NOT NULL,"
         "  model_path TEXT NOT NULL, model_identity TEXT NOT NULL, model_name TEXT NOT NULL,"
         "  source_path TEXT NOT NULL, source_identity TEXT NOT NULL, weight_type TEXT NOT NULL,"
         "  is_imatrix INTEGER NOT NULL, imatrix_path TEXT NOT NULL, keep_output_f16 INTEGER NOT NULL,"
         "  kv_cache_type TEXT NOT NULL, is_reference INTEGER NOT NULL,"
         "  text_name TEXT NOT NULL, text_hash TEXT NOT NULL, context INTEGER NOT NULL, stride INTEGER NOT NULL,"
         "  num_chunks INTEGER NOT NULL, num_scored_tokens INTEGER NOT NULL,"
         "  file_bytes REAL, memory_bytes REAL, num_parameters REAL, bits_per_weight REAL,"
         "  perplexity REAL, perplexity_error REAL, kl_mean REAL, kl_median REAL, kl_p99 REAL, kl_max REAL,"
         "  top1_agreement REAL, delta_p_mean REAL, delta_p_rms REAL,"
         "  prompt_tokens_per_s REAL, gen_tokens_per_s REAL, seconds REAL, note TEXT NOT NULL);"
         "CREATE INDEX IF NOT EXISTS quant_runs_by_model ON quant_runs(model_identity, id);"
         "CREATE TABLE IF NOT EXISTS quant_tensor_errors ("
         "  run_id INTEGER NOT NULL REFERENCES quant_runs(id),"
         "  name TEXT NOT NULL, kind TEXT NOT NULL, layer INTEGER NOT NULL, type TEXT NOT NULL,"
         "  wanted TEXT NOT NULL, is_fallback INTEGER NOT NULL, used_imatrix INTEGER NOT NULL,"
         "  num_bytes INTEGER NOT NULL, relative_rmse REAL NOT NULL);"
         "CREATE INDEX IF NOT EXISTS quant_tensor_errors_by_run ON quant_tensor_errors(run_id);";
}

Result<int64_t> ResultsStore::add_quant_run(const quant::QuantRun& run) {
  std::string marks;
  for (size_t i = 0; i < kRunColumns.size(); ++i) marks += i ? ",?" : "?";
  const std::string sql = "INSERT INTO quant_runs (" + column_list() + ") VALUES (" + marks + ")";
  SqliteStatement s(m_db, sql.c_str());
  if (!s.is_valid()) return s.prepare_error();
  bind_run(s, run, 1);
  IWB_RETURN_IF_ERROR(s.run());
  const auto id = static_cast<int64_t>(sqlite3_last_insert_rowid(m_db));
  // Who writes the row while it runs: a later opener turns it into "interrupted" once this
  // process is gone (mark_abandoned_quant_runs).
  const ProcessIdentity writer = this_process();
  SqliteStatement w(m_db,
                    "UPDATE quant_runs SET writer_pid = ?, writer_boot_id = ?, writer_start_ticks = ? WHERE id = ?");
  if (!w.is_valid()) return w.prepare_error();
  w.bind(1, writer.pid);
  w.bind(2, writer.boot_id);
  w.bind(3, writer.start_ticks);
  w.bind(4, id);
  IWB_RETURN_IF_ERROR(w.run());
  return id;
}

Status mark_abandoned_quant_runs(sqlite3* db) {
  SqliteStatement s(
      db, "SELECT id, writer_pid, writer_boot_id, writer_start_ticks FROM quant_runs WHERE status = 'running'");
  if (!s.is_valid()) return s.prepare_error();
  std::vector<int64_t> abandoned;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    if (!may_be_alive(ProcessIdentity{s.integer(1), s.text(2), s.integer(3)})) abandoned.push_back(s.integer(0));
  }
  if (rc != SQLITE_DONE) return s.error("query");
  for (const int64_t id : abandoned) {
    SqliteStatement u(db,
                      "UPDATE quant_runs SET status = 'interrupted', "
                      "error = 'interrupted: the process ended during the run (killed or crashed)' "
                      "WHERE id = ? AND status = 'running'");
    if (!u.is_valid()) return u.prepare_error();
    u.bind(1, id);
    IWB_RETURN_IF_ERROR(u.run());
  }
  return {};
}

Status ResultsStore::update_quant_run(const quant::QuantRun& run) {
  std::string sets;
  for (const char* c : kRunColumns) sets += (sets.empty() ? "" : ", ") + std::string(c) + " = ?";
  const std::string sql = "UPDATE quant_runs SET " + sets + " WHERE id = ?";
  SqliteStatement s(m_db, sql.c_str());
  if (!s.is_valid()) return s.prepare_error();
  const int next = bind_run(s, run, 1);
  s.bind(next, run.id);
  return s.run();
}

Status ResultsStore::finish_quant_run(int64_t id, quant::RunStatus status, const std::string& error) {
  SqliteStatement s(m_db, "UPDATE quant_runs SET status = ?, error = ? WHERE id = ?");
  if (!s.is_valid()) return s.prepare_error();
  s.bind(1, std::string(quant::run_status_name(status)));
  s.bind(2, error);
  s.bind(3, id);
  return s.run();
}

Status ResultsStore::add_quant_tensor_errors(int64_t run_id, const std::vector<quant::QuantizedTensor>& tensors) {
  IWB_RETURN_IF_ERROR(SqliteStatement(m_db, "BEGIN").run());
  SqliteStatement s(m_db,
                    "INSERT INTO quant_tensor_errors (run_id, name, kind, layer, type, wanted, is_fallback, "
                    "used_imatrix, num_bytes, relative_rmse) VALUES (?,?,?,?,?,?,?,?,?,?)");
  if (!s.is_valid()) {
    (void)SqliteStatement(m_db, "ROLLBACK").run();
    return s.prepare_error();
  }
  for (const quant::QuantizedTensor& t : tensors) {
    s.reset();
    s.bind(1, run_id);
    s.bind(2, t.name);
    s.bind(3, t.kind);
    s.bind(4, t.layer);
    s.bind(5, std::string(ggml_type_name(t.type)));
    s.bind(6, std::string(ggml_type_name(t.wanted)));
    s.bind(7, static_cast<int>(t.is_fallback));
    s.bind(8, static_cast<int>(t.used_imatrix));
    s.bind(9, static_cast<int64_t>(t.num_bytes));
    s.bind(10, t.relative_rmse);
    if (Status st = s.run(); !st) {
      (void)SqliteStatement(m_db, "ROLLBACK").run();
      return st;
    }
  }
  return SqliteStatement(m_db, "COMMIT").run();
}

Result<std::vector<quant::QuantRun>> ResultsStore::list_quant_runs(const std::string& model_identity) const {
  std::string sql = "SELECT id, " + column_list() + " FROM quant_runs";
  if (!model_identity.empty()) sql += " WHERE model_identity = ? OR source_identity = ?";
  sql += " ORDER BY id";
  SqliteStatement s(m_db, sql.c_str());
  if (!s.is_valid()) return s.prepare_error();
  if (!model_identity.empty()) {
    s.bind(1, model_identity);
    s.bind(2, model_identity);
  }
  std::vector<quant::QuantRun> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(run_from_row(s));
  if (rc != SQLITE_DONE) return s.error("query");
  return out;
}

Result<std::vector<quant::QuantizedTensor>> ResultsStore::quant_tensor_errors(int64_t run_id) const {
  SqliteStatement s(m_db,
                    "SELECT name, kind, layer, type, wanted, is_fallback, used_imatrix, num_bytes, relative_rmse "
                    "FROM quant_tensor_errors WHERE run_id = ? ORDER BY rowid");
  if (!s.is_valid()) return s.prepare_error();
  s.bind(1, run_id);
  std::vector<quant::QuantizedTensor> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    quant::QuantizedTensor t;
    t.name = s.text(0);
    t.kind = s.text(1);
    t.layer = s.integer(2);
    t.type = ggml_type_from_name(s.text(3)).value_or(GgmlType::F32);
    t.wanted = ggml_type_from_name(s.text(4)).value_or(t.type);
    t.is_fallback = s.integer(5) != 0;
    t.used_imatrix = s.integer(6) != 0;
    t.num_bytes = static_cast<uint64_t>(s.integer(7));
    t.relative_rmse = s.real(8);
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return s.error("query");
  return out;
}

Result<int64_t> ResultsStore::latest_quantize_run_for(const std::string& model_identity) const {
  SqliteStatement s(m_db,
                    "SELECT id FROM quant_runs WHERE model_identity = ? AND status = 'done' AND "
                    "(kind = 'quantize' OR kind = 'lab') AND EXISTS (SELECT 1 FROM quant_tensor_errors e "
                    "WHERE e.run_id = quant_runs.id) ORDER BY id DESC LIMIT 1");
  if (!s.is_valid()) return s.prepare_error();
  s.bind(1, model_identity);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return int64_t{0};
  if (rc != SQLITE_ROW) return s.error("query");
  return s.integer(0);
}

}  // namespace iwb
