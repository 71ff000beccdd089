// run_quant_lab: the base (dequantized F16 when the source is quantized), the reference row
// (reused when the store has one for this base, text and context), the importance matrix
// (collected once per base and text, kept on disk), then quantize + evaluate + record per item.
#include "iwb/engine/quant/quant_lab.h"

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/imatrix_collect.h"
#include "iwb/engine/quant/logits_cache.h"
#include "iwb/engine/quant/model_quantizer.h"
#include "iwb/engine/quant/run_recorder.h"
#include "iwb/engine/store/results_store.h"
#include "quant/lab_inputs.h"

#include <algorithm>
#include <filesystem>

namespace iwb::quant {
namespace {

// An item's outcome before it runs: cancelled (not reached) until it is.
LabItemOutcome outcome_of(const LabItem& item) {
  LabItemOutcome o;
  o.item = item;
  o.label = lab_item_label(item);
  return o;
}

// One queue in progress: the settings, what was prepared for every item, and the report.
class LabQueue {
 public:
  LabQueue(const LabSettings& settings, const std::vector<LabItem>& items, ResultsStore& store,
           const LabObserver& observer, const std::atomic<bool>* cancel, lab::Texts texts, lab::Base base)
      : m_settings(settings),
        m_items(items),
        m_store(store),
        m_observer(observer),
        m_cancel(cancel),
        m_texts(std::move(texts)),
        m_base(std::move(base)),
        m_needs_imatrix(std::any_of(items.begin(), items.end(), [](const LabItem& i) { return i.is_imatrix; })),
        m_progress(observer, 2 + static_cast<int>(items.size()) + (m_needs_imatrix ? 1 : 0)) {}

  Result<LabReport> run();

 private:
  bool is_cancelled() const { return is_cancel_requested(m_cancel); }
  Status dequantize_base();
  void measure_reference();
  Status prepare_imatrix();
  LabItemOutcome run_item(int index);
  // Evaluates `model_path` against the base into the started run and finishes it.
  void evaluate_into(RunRecorder& recorder, const std::string& model_path, const std::string& label, int item,
                     double from, const std::vector<QuantizedTensor>* tensors, LabItemOutcome* outcome);
  EvalOptions eval_options(const std::string& model_path, const std::string& kv_cache_type) const;
  QuantRun new_run(const std::string& weight_type, const std::string& kv_cache_type) const;
  // Starts a run row; the outcome says why when the store refused it.
  Result<RunRecorder> start_run(QuantRun run, LabItemOutcome* outcome);
  void recorded(int64_t id) const {
    if (m_observer.run_recorded && id > 0) m_observer.run_recorded(id);
  }

  const LabSettings& m_settings;
  const std::vector<LabItem>& m_items;
  ResultsStore& m_store;
  const LabObserver& m_observer;
  const std::atomic<bool>* m_cancel;
  const lab::Texts m_texts;
  const lab::Base m_base;
  const bool m_needs_imatrix;
  lab::ProgressShares m_progress;
  Imatrix m_imatrix;
  std::string m_imatrix_path;
  LabReport m_report;
};

Result<LabReport> LabQueue::run() {
  m_report.base_path = m_base.path;
  m_report.base_note = m_base.note;
  m_report.reference.label = "base";
  for (const LabItem& item : m_items) m_report.items.push_back(outcome_of(item));
  m_progress.report(LabStage::Base, -1, 0, "Preparing the base");
  if (Status s = dequantize_base(); !s && !is_cancelled()) return s;
  m_progress.next_step();
  if (!is_cancelled()) measure_reference();
  m_progress.next_step();
  if (m_needs_imatrix && !is_cancelled()) {
    if (Status s = prepare_imatrix(); !s && !is_cancelled()) return s;
    m_progress.next_step();
  }
  for (size_t i = 0; i < m_items.size() && !is_cancelled(); ++i) {
    m_report.items[i] = run_item(static_cast<int>(i));
    if (m_observer.item_finished) m_observer.item_finished(m_report.items[i]);
    m_progress.next_step();
  }
  m_report.was_cancelled = is_cancelled();
  m_progress.finish(m_report.was_cancelled);
  return std::move(m_report);
}

Status LabQueue::dequantize_base() {
  if (!m_base.needs_dequantize) return {};
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(m_base.path).parent_path(), ec);
  QuantizeOptions q;
  q.source_path = m_settings.source_path;
  q.output_path = m_base.path;
  q.type = "F16";
  q.num_threads = m_settings.num_threads;
  q.cancel = m_cancel;
  q.progress = [&](const QuantizeProgress& p) {
    m_progress.report(LabStage::Base, -1, p.total_bytes ? double(p.bytes_done) / double(p.total_bytes) : 0,
                      "Dequantizing the source to F16");
  };
  Result<QuantizeReport> r = quantize_model(q);
  return r.status();
}

void LabQueue::measure_reference() {
  const Result<std::string> identity = file_identity(m_base.path);
  const std::string base_identity = identity ? *identity : std::string();
  const std::string text_hash = hash_text(m_texts.eval);
  if (Result<std::vector<QuantRun>> runs = m_store.list_quant_runs(base_identity)) {
    for (const QuantRun& r : *runs) {
      if (r.is_reference && r.status == RunStatus::Done && r.text_hash == text_hash &&
          r.context == m_settings.context && r.model_identity == base_identity) {
        m_report.reference.run_id = r.id;  // the newest such row
        m_report.reference.status = RunStatus::Done;
        m_report.was_reference_reused = true;
      }
    }
  }
  if (m_report.was_reference_reused) {
    m_progress.report(LabStage::Reference, -1, 1, "Reference: run " + std::to_string(m_report.reference.run_id));
    return;
  }
  QuantRun run = new_run(lab::base_weight_type(m_base.path), "f16");
  Result<RunRecorder> recorder = start_run(std::move(run), &m_report.reference);
  if (recorder) evaluate_into(*recorder, m_base.path, "base", -1, 0, nullptr, &m_report.reference);
}

Status LabQueue::prepare_imatrix() {
  m_imatrix_path = lab::imatrix_path(m_settings, m_texts.calibration);
  if (Result<Imatrix> cached = read_imatrix_file(m_imatrix_path)) {
    m_imatrix = std::move(*cached);
    m_report.was_imatrix_cached = true;
    return {};
  }
  ImatrixOptions io;
  io.model_path = m_base.path;
  io.text = m_texts.calibration;
  io.text_name = m_texts.calibration_name;
  io.context = m_settings.context;
  io.num_threads = m_settings.num_threads;
  io.compute_perplexity = false;  // the lab scores the base with `evaluate` on its own text
  io.cancel = m_cancel;
  io.progress = [&](int64_t chunk, int64_t n) {
    m_progress.report(
        LabStage::Imatrix, -1, n ? double(chunk) / double(n) : 0,
        "Collecting the importance matrix (chunk " + std::to_string(chunk) + " of " + std::to_string(n) + ")");
  };
  Result<Imatrix> collected = collect_imatrix(io);
  if (!collected) return collected.status();
  std::error_code ec;
  std::filesystem::create_directories(m_settings.output_dir, ec);
  IWB_RETURN_IF_ERROR(write_imatrix_file(*collected, m_imatrix_path));
  m_imatrix = std::move(*collected);
  return {};
}

LabItemOutcome LabQueue::run_item(int index) {
  const LabItem& item = m_items[static_cast<size_t>(index)];
  LabItemOutcome outcome = outcome_of(item);
  if (item.type.empty()) {  // the base itself, e.g. with the 8-bit KV cache
    Result<RunRecorder> recorder = start_run(new_run(lab::base_weight_type(m_base.path), item.kv_cache_type), &outcome);
    if (recorder) evaluate_into(*recorder, m_base.path, outcome.label, index, 0, nullptr, &outcome);
    return outcome;
  }
  QuantRun run = new_run(item.type, item.kv_cache_type);
  run.is_imatrix = item.is_imatrix;
  run.imatrix_path = item.is_imatrix ? m_imatrix_path : std::string();
  run.source_path = m_base.path;
  Result<RunRecorder> recorder = start_run(std::move(run), &outcome);
  if (!recorder) return outcome;
  QuantizeOptions q;
  q.source_path = m_base.path;
  q.output_path = lab::quantized_path(m_settings, item);
  q.type = item.type;
  q.num_threads = m_settings.num_threads;
  q.cancel = m_cancel;
  q.imatrix = item.is_imatrix ? &m_imatrix : nullptr;
  q.imatrix_path = recorder->run().imatrix_path;
  q.progress = [&](const QuantizeProgress& p) {
    m_progress.report(LabStage::Quantize, index,
                      0.5 * (p.total_bytes ? double(p.bytes_done) / double(p.total_bytes) : 0),
                      outcome.label + ": quantizing " + p.tensor_name);
  };
  std::error_code ec;
  std::filesystem::create_directories(m_settings.output_dir, ec);
  Result<QuantizeReport> quantized = quantize_model(q);
  if (!quantized) {
    (void)recorder->finish_failed(quantized.error_message(), is_cancelled());
    outcome.status = recorder->run().status;
    outcome.error = quantized.error_message();
    recorded(outcome.run_id);
    return outcome;
  }
  std::string& note = recorder->run().note;
  for (const std::string& w : quantized->warnings) note += (note.empty() ? "" : "; ") + w;
  evaluate_into(*recorder, q.output_path, outcome.label, index, 0.5, &quantized->tensors, &outcome);
  return outcome;
}

void LabQueue::evaluate_into(RunRecorder& recorder, const std::string& model_path, const std::string& label, int item,
                             double from, const std::vector<QuantizedTensor>* tensors, LabItemOutcome* outcome) {
  QuantRun& run = recorder.run();
  EvalOptions e = eval_options(model_path, run.kv_cache_type);
  const LabStage stage = item < 0 ? LabStage::Reference : LabStage::Evaluate;
  e.progress = [&](const EvalProgress& p) {
    // The base's distributions (when not cached) take the first half, the model the rest.
    const double done = p.num_chunks ? double(p.chunk) / double(p.num_chunks) : 0;
    const double part = p.stage == "base model" ? 0.5 * done : p.stage == "model" ? 0.5 + 0.45 * done : 0.95;
    m_progress.report(stage, item, from + (1 - from) * part,
                      label + ": evaluating (" + p.stage + ", chunk " + std::to_string(p.chunk) + " of " +
                          std::to_string(p.num_chunks) + ")");
  };
  // The eval's own description of the files, keeping the lab's kind, type and notes.
  const QuantRun described = describe_eval_run(e);
  run.model_path = described.model_path;
  run.model_identity = described.model_identity;
  run.source_path = described.source_path;
  run.source_identity = described.source_identity;
  run.is_reference = described.is_reference;
  run.text_name = described.text_name;
  run.text_hash = described.text_hash;
  run.context = described.context;
  Result<EvalResult> result = evaluate(e);
  if (!result) {
    (void)recorder.finish_failed(result.error_message(), is_cancelled());
    outcome->error = result.error_message();
  } else {
    record_eval_result(*result, &run);
    if (run.kv_bytes_per_token && m_settings.fit_context > 0 && m_settings.fit_memory_bytes > 0) {
      run.fit_context = m_settings.fit_context;
      run.fit_memory_bytes = m_settings.fit_memory_bytes;
      run.fit_sequences = static_cast<double>(
          kv_sequences_that_fit(m_settings.fit_memory_bytes, run.weights_bytes.value_or(run.file_bytes.value_or(0)),
                                *run.kv_bytes_per_token, run.kv_block_size, m_settings.fit_context));
    }
    outcome->was_base_cached = result->was_base_cached;
    if (Status s = recorder.finish_done(tensors); !s) outcome->error = s.message();
  }
  outcome->status = run.status;
  recorded(outcome->run_id);
}

EvalOptions LabQueue::eval_options(const std::string& model_path, const std::string& kv_cache_type) const {
  EvalOptions e;
  e.model_path = model_path;
  e.base_path = m_base.path;
  e.kv_cache_type = kv_cache_type;
  e.text = m_texts.eval;
  e.text_name = m_texts.eval_name;
  e.context = m_settings.context;
  e.num_chunks = m_settings.num_chunks;
  e.num_threads = m_settings.num_threads;
  e.num_gen_tokens = m_settings.num_gen_tokens;
  e.gen_depth = m_settings.gen_depth;
  e.cancel = m_cancel;
  return e;
}

QuantRun LabQueue::new_run(const std::string& weight_type, const std::string& kv_cache_type) const {
  QuantRun run;
  run.kind = "lab";
  run.date = utc_now();
  run.device_id = "cpu";
  run.device_name = describe_cpu_device().name;
  run.num_threads = m_settings.num_threads;
  run.weight_type = weight_type;
  run.kv_cache_type = kv_cache_type;
  run.note = m_base.note;
  return run;
}

Result<RunRecorder> LabQueue::start_run(QuantRun run, LabItemOutcome* outcome) {
  Result<RunRecorder> recorder = RunRecorder::start(&m_store, std::move(run));
  if (!recorder) {
    outcome->status = RunStatus::Failed;
    outcome->error = recorder.error_message();
    return recorder;
  }
  outcome->run_id = recorder->id();
  recorded(outcome->run_id);
  return recorder;
}

}  // namespace

std::string lab_item_label(const LabItem& item) {
  return (item.type.empty() ? "base" : item.type) + (item.is_imatrix ? " + imatrix" : "") +
         (item.kv_cache_type.empty() || item.kv_cache_type == "f16" || item.kv_cache_type == "f16/f16"
              ? std::string()
              : ", KV " + item.kv_cache_type);
}

const char* lab_stage_name(LabStage stage) {
  switch (stage) {
    case LabStage::Base: return "base";
    case LabStage::Reference: return "reference";
    case LabStage::Imatrix: return "imatrix";
    case LabStage::Quantize: return "quantize";
    case LabStage::Evaluate: return "evaluate";
    case LabStage::Finished: return "finished";
  }
  return "finished";
}

int LabReport::num_done() const {
  return static_cast<int>(
      std::count_if(items.begin(), items.end(), [](const LabItemOutcome& o) { return o.status == RunStatus::Done; }));
}

int LabReport::num_failed() const {
  return static_cast<int>(
      std::count_if(items.begin(), items.end(), [](const LabItemOutcome& o) { return o.status == RunStatus::Failed; }));
}

std::string LabReport::summary() const {
  return std::to_string(num_done()) + " runs done, " + std::to_string(num_failed()) + " failed" +
         (was_cancelled ? ", cancelled" : "");
}

Result<LabReport> run_quant_lab(const LabSettings& settings, const std::vector<LabItem>& items, ResultsStore& store,
                                const LabObserver& observer, const std::atomic<bool>* cancel) {
  Result<lab::Texts> texts = lab::read_texts(settings);
  if (!texts) return texts.status();
  Result<lab::Base> base = lab::plan_base(settings);
  if (!base) return base.status();
  LabQueue queue(settings, items, store, observer, cancel, std::move(*texts), std::move(*base));
  return queue.run();
}

}  // namespace iwb::quant
