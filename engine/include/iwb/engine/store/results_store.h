// The results store: one SQLite file shared by `iwb` and the application, holding measured
// machine ceilings (probes), `iwb bench` runs and, as later features land, quantization runs.
// Rows are only ever added; nothing is overwritten.
#pragma once

#include "iwb/engine/profile/bench.h"
#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/quant/quant_run.h"
#include "iwb/engine/remote/bench_serve.h"
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

  // Quantization-lab runs (schema version 4): added as Running, updated as figures arrive,
  // finished as Done or Failed; never deleted or replaced. add_quant_run returns the row id.
  Result<int64_t> add_quant_run(const quant::QuantRun& run);
  Status update_quant_run(const quant::QuantRun& run);
  Status finish_quant_run(int64_t id, quant::RunStatus status, const std::string& error);
  Status add_quant_tensor_errors(int64_t run_id, const std::vector<quant::QuantizedTensor>& tensors);
  // Oldest first; with a model identity, the runs that measured or were quantized from it.
  Result<std::vector<quant::QuantRun>> list_quant_runs(const std::string& model_identity = {}) const;
  Result<std::vector<quant::QuantizedTensor>> quant_tensor_errors(int64_t run_id) const;
  // The newest finished quantization that wrote this file and recorded its tensors; 0 if none.
  Result<int64_t> latest_quantize_run_for(const std::string& model_identity) const;

  // `iwb bench-serve` runs against remote endpoints (schema version 6): a run is added as
  // running when its load starts and finished with every point (or marked interrupted/failed),
  // so a run whose process died shows as interrupted, never as running forever.
  struct ServeRunSummary {
    int64_t id = 0;
    std::string status;      // running | done | interrupted | failed
    std::string started_at;  // ISO 8601 UTC
    std::string base_url;
    std::string model;
    std::string server_kind;  // server_kind_name()
    std::string label;        // the user's name for the run ("vLLM tp=2"); may be empty
    int num_points = 0;
  };
  Result<int64_t> begin_serve_run(const remote::BenchServeConfig& config, const std::string& label);
  Status finish_serve_run(int64_t id, const remote::BenchServeResult& result, const std::string& status,
                          const std::string& error = {});
  Result<std::vector<ServeRunSummary>> list_serve_runs() const;  // oldest first
  Result<remote::BenchServeResult> serve_run(int64_t id) const;  // with points, requests, series

  // The schema version this program writes, and the one the open file has.
  static int schema_version();
  Result<int> file_schema_version() const;

  const std::string& path() const { return m_path; }

 private:
  ResultsStore() = default;
  Status migrate();
  static const char* quant_schema_sql();  // the version-4 tables (quant_store.cpp)

  sqlite3* m_db = nullptr;
  std::string m_path;
};

}  // namespace iwb
