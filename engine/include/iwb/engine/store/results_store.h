// The results store: one SQLite file shared by `iwb` and the application, holding measured
// machine ceilings (probes), `iwb bench` runs and, as later features land, quantization runs.
// Rows are only ever added; nothing is overwritten.
#pragma once

#include "iwb/engine/profile/bench.h"
#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/status.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace iwb {

class ResultsStore {
 public:
  ~ResultsStore();
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;

  // Opens (creating folders, file and schema as needed) the store at `path`.
  static Result<std::unique_ptr<ResultsStore>> open(const std::string& path);
  // ${IWB_RESULTS_DB} if set, else ${XDG_DATA_HOME:-~/.local/share}/inference-workbench/results.sqlite
  static std::string default_path();

  Status add_probe(const ProbeResult& probe);
  // Newest probe of a device; nullopt when it was never probed.
  Result<std::optional<ProbeResult>> latest_probe(const std::string& device_id) const;
  Result<std::vector<ProbeResult>> list_probes() const;

  // `iwb bench` results (schema version 2). add_bench_result returns the new row's id.
  Result<int64_t> add_bench_result(const BenchResult& result);
  // Oldest first; with a non-empty model_identity only that model's rows; limit > 0 keeps the
  // newest `limit` rows.
  Result<std::vector<BenchResult>> list_bench_results(const std::string& model_identity = {}, int limit = 0) const;

  // The schema version this program writes, and the one the open file has.
  static int schema_version();
  Result<int> file_schema_version() const;

  const std::string& path() const { return m_path; }

 private:
  ResultsStore() = default;
  Status migrate();

  sqlite3* m_db = nullptr;
  std::string m_path;
};

}  // namespace iwb
