// A quantization-lab run's life in the results store, written once for `iwb quantize`, `iwb eval`
// and the lab's queue: the row is added as running before the work starts, its figures written
// as they arrive, and it is finished as done, failed or cancelled — and never left running.
#pragma once

#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/model_quantizer.h"
#include "iwb/engine/quant/quant_run.h"
#include "iwb/engine/status.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace iwb {
class ResultsStore;
}

namespace iwb::quant {

class RunRecorder {
 public:
  // Adds `run` as running and sets its id. A null store records nothing (`--no-store`): every
  // call below then succeeds, so callers keep one code path.
  static Result<RunRecorder> start(ResultsStore* store, QuantRun run);

  RunRecorder(RunRecorder&& other) noexcept;
  RunRecorder& operator=(RunRecorder&&) = delete;
  RunRecorder(const RunRecorder&) = delete;
  // A run still running here (an early return, a forgotten finish) is marked failed: a row that
  // says "running" would claim work that nobody is doing.
  ~RunRecorder();

  QuantRun& run() { return m_run; }
  const QuantRun& run() const { return m_run; }
  int64_t id() const { return m_run.id; }
  bool is_finished() const { return !m_is_running; }

  // Writes the run's fields as they are now.
  Status update();
  // Writes the run, then the tensors' errors when given, then marks it done. When recording
  // fails part-way the run is marked failed with that error, which is returned.
  Status finish_done(const std::vector<QuantizedTensor>* tensors = nullptr);
  // Writes the run, then marks it failed with `error`, or cancelled when `was_cancelled`.
  Status finish_failed(const std::string& error, bool was_cancelled = false);

 private:
  RunRecorder(ResultsStore* store, QuantRun run) : m_store(store), m_run(std::move(run)) {}

  ResultsStore* m_store = nullptr;
  QuantRun m_run;
  bool m_is_running = true;
};

// `iwb quantize` and `iwb eval` as recorded runs: describe the run (describe_quantize_run /
// describe_eval_run), record it as running (store may be null), do the work, record the
// figures and finish. The error is the work's (or adding the row's); a failure to record the
// figures afterwards leaves the work's result intact and is reported in `recording`.
struct RecordedQuantize {
  QuantizeReport report;
  int64_t run_id = 0;  // 0 when nothing was recorded
  Status recording;
};
Result<RecordedQuantize> quantize_and_record(const QuantizeOptions& options, ResultsStore* store);

struct RecordedEval {
  EvalResult result;
  int64_t run_id = 0;
  Status recording;
};
// An evaluated file that a recorded quantization wrote also gets that run's type, imatrix
// settings and per-tensor errors (its general.file_type cannot tell Q4_K from Q4_K_S).
Result<RecordedEval> evaluate_and_record(const EvalOptions& options, ResultsStore* store);

// True when `cancel` is set: the caller's failure was a cancellation, recorded as such.
inline bool is_cancel_requested(const std::atomic<bool>* cancel) { return cancel != nullptr && cancel->load(); }

}  // namespace iwb::quant
