// RAII wrapper of a prepared SQLite statement with checked binds and typed column reads.
#pragma once

#include "iwb/engine/status.h"

#include <sqlite3.h>

#include <string>

namespace iwb {

// Runs SQL without results (schema, transactions); the error carries SQLite's message.
inline Status sqlite_exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    return make_error(ErrorCode::IoError, std::string("results store: ") + text);
  }
  return {};
}

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, const char* sql) : m_db(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &m_stmt, nullptr) != SQLITE_OK) m_stmt = nullptr;
  }
  ~SqliteStatement() { sqlite3_finalize(m_stmt); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  bool is_valid() const { return m_stmt != nullptr; }
  Status prepare_error() const { return error("prepare"); }

  void bind(int index, const std::string& v) { sqlite3_bind_text(m_stmt, index, v.c_str(), -1, SQLITE_TRANSIENT); }
  void bind(int index, double v) { sqlite3_bind_double(m_stmt, index, v); }
  void bind(int index, int64_t v) { sqlite3_bind_int64(m_stmt, index, v); }
  void bind(int index, int v) { sqlite3_bind_int(m_stmt, index, v); }
  void bind_null(int index) { sqlite3_bind_null(m_stmt, index); }
  // Ready to run again with new binds (one statement inserting many rows).
  void reset() {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
  }

  // SQLITE_ROW, SQLITE_DONE, or an error code.
  int step() { return sqlite3_step(m_stmt); }
  Status run() {
    const int rc = step();
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? Status{} : error("step");
  }

  std::string text(int column) const {
    const auto* p = sqlite3_column_text(m_stmt, column);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  double real(int column) const { return sqlite3_column_double(m_stmt, column); }
  int64_t integer(int column) const { return sqlite3_column_int64(m_stmt, column); }
  bool is_null(int column) const { return sqlite3_column_type(m_stmt, column) == SQLITE_NULL; }

  Status error(const char* what) const {
    return make_error(ErrorCode::IoError, std::string("results store: ") + what + " failed: " + sqlite3_errmsg(m_db));
  }

 private:
  sqlite3* m_db;
  sqlite3_stmt* m_stmt = nullptr;
};

}  // namespace iwb
