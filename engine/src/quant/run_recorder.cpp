// RunRecorder: a run row from running to done/failed/cancelled; and the recorded quantize and
// eval commands built on it.
#include "iwb/engine/quant/run_recorder.h"

#include "iwb/engine/store/results_store.h"

#include <utility>

namespace iwb::quant {
namespace {

// The settings and per-tensor errors of the recorded quantization that wrote run->model_path's
// file (matched by identity), copied into `run` and `tensors`; nothing when there is none.
void inherit_quantization(const ResultsStore& store, QuantRun* run, std::vector<QuantizedTensor>* tensors) {
  const Result<int64_t> writer = store.latest_quantize_run_for(run->model_identity);
  if (!writer || *writer <= 0) return;
  if (Result<std::vector<QuantizedTensor>> t = store.quant_tensor_errors(*writer)) *tensors = std::move(*t);
  if (Result<std::vector<QuantRun>> runs = store.list_quant_runs(run->model_identity)) {
    for (const QuantRun& w : *runs) {
      if (w.id != *writer) continue;
      run->weight_type = w.weight_type;
      run->is_imatrix = w.is_imatrix;
      run->imatrix_path = w.imatrix_path;
      run->keep_output_f16 = w.keep_output_f16;
    }
  }
}

}  // namespace

Result<RunRecorder> RunRecorder::start(ResultsStore* store, QuantRun run) {
  run.status = RunStatus::Running;
  run.error.clear();
  if (store != nullptr) {
    Result<int64_t> id = store->add_quant_run(run);
    if (!id) return id.status();
    run.id = *id;
  }
  return RunRecorder(store, std::move(run));
}

RunRecorder::RunRecorder(RunRecorder&& other) noexcept
    : m_store(other.m_store), m_run(std::move(other.m_run)), m_is_running(std::exchange(other.m_is_running, false)) {}

RunRecorder::~RunRecorder() {
  if (m_is_running) (void)finish_failed("interrupted: the run ended without a result");
}

Status RunRecorder::update() {
  if (m_store == nullptr) return {};
  return m_store->update_quant_run(m_run);
}

Status RunRecorder::finish_done(const std::vector<QuantizedTensor>* tensors) {
  m_is_running = false;
  if (m_store == nullptr) {
    m_run.status = RunStatus::Done;
    return {};
  }
  Status s = m_store->update_quant_run(m_run);
  if (s && tensors != nullptr && !tensors->empty()) s = m_store->add_quant_tensor_errors(m_run.id, *tensors);
  if (s) s = m_store->finish_quant_run(m_run.id, RunStatus::Done, {});
  if (s) {
    m_run.status = RunStatus::Done;
    return s;
  }
  // The figures did not all reach the store: the row must not claim a complete result.
  m_run.status = RunStatus::Failed;
  m_run.error = "recording the run failed: " + s.message();
  (void)m_store->finish_quant_run(m_run.id, RunStatus::Failed, m_run.error);
  return s;
}

Status RunRecorder::finish_failed(const std::string& error, bool was_cancelled) {
  m_is_running = false;
  m_run.status = was_cancelled ? RunStatus::Cancelled : RunStatus::Failed;
  m_run.error = error;
  if (m_store == nullptr) return {};
  // The status is written even when the figures could not be: a stale "running" is worse.
  const Status figures = m_store->update_quant_run(m_run);
  const Status status = m_store->finish_quant_run(m_run.id, m_run.status, error);
  return status ? figures : status;
}

Result<RecordedQuantize> quantize_and_record(const QuantizeOptions& options, ResultsStore* store) {
  Result<RunRecorder> recorder = RunRecorder::start(store, describe_quantize_run(options));
  if (!recorder) return recorder.status();
  Result<QuantizeReport> report = quantize_model(options);
  if (!report) {
    (void)recorder->finish_failed(report.error_message(), is_cancel_requested(options.cancel));
    return report.status();
  }
  RecordedQuantize out;
  record_quantize_report(*report, &recorder->run());
  out.recording = recorder->finish_done(&report->tensors);
  out.report = std::move(*report);
  out.run_id = store != nullptr ? recorder->id() : 0;
  return out;
}

Result<RecordedEval> evaluate_and_record(const EvalOptions& options, ResultsStore* store) {
  Result<RunRecorder> recorder = RunRecorder::start(store, describe_eval_run(options));
  if (!recorder) return recorder.status();
  Result<EvalResult> result = evaluate(options);
  if (!result) {
    (void)recorder->finish_failed(result.error_message(), is_cancel_requested(options.cancel));
    return result.status();
  }
  RecordedEval out;
  record_eval_result(*result, &recorder->run());
  std::vector<QuantizedTensor> tensors;
  if (store != nullptr) inherit_quantization(*store, &recorder->run(), &tensors);
  out.recording = recorder->finish_done(&tensors);
  out.result = std::move(*result);
  out.run_id = store != nullptr ? recorder->id() : 0;
  return out;
}

}  // namespace iwb::quant
