// ResultsStore's bench_runs table: one row per `iwb bench` test (ppN or tgN, at a context depth).
#include "iwb/engine/store/results_store.h"

#include "store/sqlite_statement.h"

#include <cstdio>
#include <cstdlib>

namespace iwb {
namespace {

constexpr const char* kBenchColumns =
    "id, date, device_id, device_name, model_path, model_name, model_identity, architecture, file_type, "
    "model_size_bytes, num_params, num_threads, test, num_prompt_tokens, num_generated_tokens, num_repetitions, "
    "tokens_per_s_mean, tokens_per_s_sd, tokens_per_s_samples, mbu, mfu, predicted_flops_per_token, "
    "predicted_bytes_per_token, probe_date, n_depth";

// Per-repetition rates as space-separated numbers: readable in any SQLite browser.
std::string join_samples(const std::vector<double>& values) {
  std::string out;
  char buf[32];
  for (const double v : values) {
    std::snprintf(buf, sizeof buf, "%.6g", v);
    if (!out.empty()) out += ' ';
    out += buf;
  }
  return out;
}

std::vector<double> split_samples(const std::string& text) {
  std::vector<double> out;
  const char* p = text.c_str();
  char* end = nullptr;
  for (double v = std::strtod(p, &end); end != p; v = std::strtod(p, &end)) {
    out.push_back(v);
    p = end;
  }
  return out;
}

BenchResult bench_from_row(const SqliteStatement& s) {
  BenchResult r;
  int c = 0;
  r.id = s.integer(c++);
  r.date = s.text(c++);
  r.device_id = s.text(c++);
  r.device_name = s.text(c++);
  r.model_path = s.text(c++);
  r.model_name = s.text(c++);
  r.model_identity = s.text(c++);
  r.architecture = s.text(c++);
  r.file_type = s.text(c++);
  r.model_size_bytes = static_cast<uint64_t>(s.integer(c++));
  r.num_params = static_cast<uint64_t>(s.integer(c++));
  r.num_threads = static_cast<int>(s.integer(c++));
  r.test = s.text(c++);
  r.num_prompt_tokens = s.integer(c++);
  r.num_generated_tokens = s.integer(c++);
  r.num_repetitions = static_cast<int>(s.integer(c++));
  r.tokens_per_s_mean = s.real(c++);
  r.tokens_per_s_sd = s.real(c++);
  r.tokens_per_s = split_samples(s.text(c++));
  if (!s.is_null(c)) r.mbu = s.real(c);
  ++c;
  if (!s.is_null(c)) r.mfu = s.real(c);
  ++c;
  r.predicted_flops_per_token = s.real(c++);
  r.predicted_bytes_per_token = s.real(c++);
  r.probe_date = s.text(c++);
  r.num_depth_tokens = s.integer(c++);
  return r;
}

}  // namespace

Result<int64_t> ResultsStore::add_bench_result(const BenchResult& r) {
  SqliteStatement s(m_db,
                    "INSERT INTO bench_runs (date, device_id, device_name, model_path, model_name, model_identity, "
                    "architecture, file_type, model_size_bytes, num_params, num_threads, test, num_prompt_tokens, "
                    "num_generated_tokens, num_repetitions, tokens_per_s_mean, tokens_per_s_sd, tokens_per_s_samples, "
                    "mbu, mfu, predicted_flops_per_token, predicted_bytes_per_token, probe_date, n_depth) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  if (!s.is_valid()) return s.prepare_error();
  int i = 1;
  s.bind(i++, r.date);
  s.bind(i++, r.device_id);
  s.bind(i++, r.device_name);
  s.bind(i++, r.model_path);
  s.bind(i++, r.model_name);
  s.bind(i++, r.model_identity);
  s.bind(i++, r.architecture);
  s.bind(i++, r.file_type);
  s.bind(i++, static_cast<int64_t>(r.model_size_bytes));
  s.bind(i++, static_cast<int64_t>(r.num_params));
  s.bind(i++, r.num_threads);
  s.bind(i++, r.test);
  s.bind(i++, r.num_prompt_tokens);
  s.bind(i++, r.num_generated_tokens);
  s.bind(i++, r.num_repetitions);
  s.bind(i++, r.tokens_per_s_mean);
  s.bind(i++, r.tokens_per_s_sd);
  s.bind(i++, join_samples(r.tokens_per_s));
  if (r.mbu) s.bind(i++, *r.mbu); else s.bind_null(i++);
  if (r.mfu) s.bind(i++, *r.mfu); else s.bind_null(i++);
  s.bind(i++, r.predicted_flops_per_token);
  s.bind(i++, r.predicted_bytes_per_token);
  s.bind(i++, r.probe_date);
  s.bind(i++, r.num_depth_tokens);
  IWB_RETURN_IF_ERROR(s.run());
  return static_cast<int64_t>(sqlite3_last_insert_rowid(m_db));
}

Result<std::vector<BenchResult>> ResultsStore::list_bench_results(const std::string& model_identity, int limit) const {
  // The newest `limit` rows, returned oldest first.
  std::string sql = std::string("SELECT ") + kBenchColumns + " FROM bench_runs";
  if (!model_identity.empty()) sql += " WHERE model_identity = ?";
  sql += " ORDER BY id DESC";
  if (limit > 0) sql += " LIMIT " + std::to_string(limit);
  SqliteStatement s(m_db, sql.c_str());
  if (!s.is_valid()) return s.prepare_error();
  if (!model_identity.empty()) s.bind(1, model_identity);
  std::vector<BenchResult> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(bench_from_row(s));
  if (rc != SQLITE_DONE) return s.error("query");
  return std::vector<BenchResult>(out.rbegin(), out.rend());
}

}  // namespace iwb
