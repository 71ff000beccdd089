// QuantWorker::runQueue: base preparation (dequantized F16 when the source is quantized), the
// reference run, the imatrix (collected once per base and text), then quantize + evaluate +
// record for every job. Every run is added as running first and finished as done or failed.
#include "quantlab/quant_worker.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/profile/bench.h"
#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/imatrix_collect.h"
#include "iwb/engine/quant/logits_cache.h"
#include "iwb/engine/quant/model_quantizer.h"
#include "iwb/engine/quant/quant_run.h"
#include "iwb/engine/store/results_store.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/model/model_info.h"

#include <algorithm>
#include <functional>

namespace iwb::ui {
namespace {

using iwb::quant::QuantRun;
using iwb::quant::RunStatus;

bool readText(const QString& path, std::string* out, QString* error) {
  if (path.isEmpty()) {
    *out = iwb::quant::builtin_eval_text();
    return true;
  }
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) {
    *error = QObject::tr("cannot read the text '%1'").arg(path);
    return false;
  }
  *out = f.readAll().toStdString();
  return true;
}

// The source's quantized type when it holds quantized 2-D weights, empty when it is float.
std::string quantizedTypeOf(const iwb::gguf::GgufFile& file) {
  for (const auto& t : file.tensors()) {
    if (t.shape.size() >= 2 && t.type != iwb::GgmlType::F32 && t.type != iwb::GgmlType::F16 &&
        t.type != iwb::GgmlType::BF16) {
      const auto ftype = file.get_int("general.file_type");
      return ftype ? iwb::file_type_name(*ftype) : std::string(iwb::ggml_type_name(t.type));
    }
  }
  return {};
}

}  // namespace

QuantWorker::QuantWorker(QObject* parent) : QObject(parent) {
  qRegisterMetaType<iwb::ui::QuantJob>();
  qRegisterMetaType<iwb::ui::QuantLabSettings>();
  qRegisterMetaType<QVector<iwb::ui::QuantJob>>();
}

void QuantWorker::runQueue(const QuantLabSettings& s, const QVector<QuantJob>& jobs) {
  auto opened = iwb::ResultsStore::open(s.storePath.toStdString());
  if (!opened) {
    emit queueFinished(false, QString::fromStdString(opened.error_message()));
    return;
  }
  iwb::ResultsStore& store = **opened;
  QString error;
  std::string evalText, calibrationText;
  if (!readText(s.evalTextPath, &evalText, &error) ||
      !readText(s.calibrationTextPath.isEmpty() ? s.evalTextPath : s.calibrationTextPath, &calibrationText, &error)) {
    emit queueFinished(false, error);
    return;
  }
  QDir().mkpath(s.outputDir);
  const QString stem = QFileInfo(s.sourcePath).completeBaseName();
  const bool needsImatrix = std::any_of(jobs.begin(), jobs.end(), [](const QuantJob& j) { return j.isImatrix; });
  const double numSteps = 2.0 + jobs.size() + (needsImatrix ? 1 : 0);
  double step = 0;
  auto report = [&](double within, const QString& stage) { emit progressed((step + within) / numSteps, stage); };

  // 1. The base: the source itself, or its dequantized F16 when it is quantized.
  std::string basePath = s.sourcePath.toStdString();
  std::string baseNote;
  {
    auto source = iwb::gguf::GgufFile::open(basePath);
    if (!source) {
      emit queueFinished(false, QString::fromStdString(source.error_message()));
      return;
    }
    const std::string sourceType = quantizedTypeOf(**source);
    if (!sourceType.empty()) {
      const QString f16 = QDir(s.outputDir).filePath(stem + QStringLiteral("-f16.gguf"));
      baseNote = "base: F16 dequantized from " + QFileInfo(s.sourcePath).fileName().toStdString() + " (" + sourceType +
                 "), the only file at hand: errors are measured against that";
      if (!QFileInfo::exists(f16)) {
        iwb::quant::QuantizeOptions q;
        q.source_path = basePath;
        q.output_path = f16.toStdString();
        q.type = "F16";
        q.num_threads = s.numThreads;
        q.cancel = &m_cancel;
        q.progress = [&](const iwb::quant::QuantizeProgress& p) {
          report(p.total_bytes ? double(p.bytes_done) / double(p.total_bytes) : 0, tr("Dequantizing the source to F16"));
        };
        auto r = iwb::quant::quantize_model(q);
        if (!r) {
          emit queueFinished(m_cancel, QString::fromStdString(r.error_message()));
          return;
        }
      }
      basePath = f16.toStdString();
    }
  }
  ++step;

  // Runs one evaluation against the base and records it; false when it failed.
  auto evaluateAndRecord = [&](QuantRun run, const std::string& modelPath, const QString& label,
                               const std::vector<iwb::quant::QuantizedTensor>* tensors) {
    iwb::quant::EvalOptions e;
    e.kv_cache_type = run.kv_cache_type;
    e.model_path = modelPath;
    e.base_path = basePath;
    e.text = evalText;
    e.text_name = s.evalTextPath.isEmpty() ? "built-in" : QFileInfo(s.evalTextPath).fileName().toStdString();
    e.context = s.context;
    e.num_chunks = s.numChunks;
    e.num_threads = s.numThreads;
    e.num_gen_tokens = s.numGenTokens;
    e.cancel = &m_cancel;
    e.progress = [&](const iwb::quant::EvalProgress& p) {
      report(0.5 + 0.5 * (p.num_chunks ? double(p.chunk) / double(p.num_chunks) : 0),
             tr("%1: evaluating (%2, chunk %3 of %4)").arg(label, QString::fromStdString(p.stage)).arg(p.chunk).arg(p.num_chunks));
    };
    const QuantRun described = iwb::quant::describe_eval_run(e);
    run.model_path = described.model_path;
    run.model_identity = described.model_identity;
    run.source_path = described.source_path;
    run.source_identity = described.source_identity;
    run.is_reference = described.is_reference;
    run.kv_cache_type = described.kv_cache_type;
    run.text_name = described.text_name;
    run.text_hash = described.text_hash;
    run.context = described.context;
    if (run.id == 0) {
      auto id = store.add_quant_run(run);
      if (!id) return false;
      run.id = *id;
      emit runRecorded(run.id);
    }
    auto result = iwb::quant::evaluate(e);
    if (!result) {
      (void)store.update_quant_run(run);
      (void)store.finish_quant_run(run.id, RunStatus::Failed, result.error_message());
      emit jobFailed(label, QString::fromStdString(result.error_message()));
      emit runRecorded(run.id);
      return false;
    }
    iwb::quant::record_eval_result(*result, &run);
    Status st = store.update_quant_run(run);
    if (st && tensors != nullptr) st = store.add_quant_tensor_errors(run.id, *tensors);
    (void)store.finish_quant_run(run.id, st ? RunStatus::Done : RunStatus::Failed, st ? std::string() : st.message());
    emit runRecorded(run.id);
    return static_cast<bool>(st);
  };
  auto newRun = [&](const std::string& type) {
    QuantRun run;
    run.kind = "lab";
    run.date = iwb::quant::utc_now();
    run.device_id = "cpu";
    run.device_name = iwb::describe_cpu_device().name;
    run.num_threads = s.numThreads;
    run.weight_type = type;
    run.note = baseNote;
    return run;
  };

  // 2. The reference row: the base against itself, unless this base, text and context have one.
  {
    const auto baseIdentity = iwb::quant::file_identity(basePath);
    bool haveReference = false;
    if (auto runs = store.list_quant_runs(baseIdentity ? *baseIdentity : std::string())) {
      const std::string textHash = iwb::quant::hash_text(evalText);
      for (const QuantRun& r : *runs) {
        haveReference |= r.is_reference && r.status == RunStatus::Done && r.text_hash == textHash &&
                         r.context == s.context && r.model_identity == (baseIdentity ? *baseIdentity : "");
      }
    }
    if (!haveReference && !m_cancel) {
      auto base = iwb::gguf::GgufFile::open(basePath);
      const auto ftype = base ? (*base)->get_int("general.file_type") : std::nullopt;
      evaluateAndRecord(newRun(ftype ? iwb::file_type_name(*ftype) : "F16"), basePath, tr("base"), nullptr);
    }
  }
  ++step;

  // 3. The importance matrix, once per base and calibration text.
  iwb::quant::Imatrix imatrix;
  const QString imatrixPath = QDir(s.outputDir).filePath(
      stem + QStringLiteral("-%1.imatrix").arg(QString::fromStdString(iwb::quant::hash_text(calibrationText)).left(8)));
  if (needsImatrix && !m_cancel) {
    auto cached = iwb::quant::read_imatrix_file(imatrixPath.toStdString());
    if (cached) {
      imatrix = std::move(*cached);
    } else {
      iwb::quant::ImatrixOptions io;
      io.model_path = basePath;
      io.text = calibrationText;
      io.context = s.context;
      io.num_threads = s.numThreads;
      io.cancel = &m_cancel;
      io.progress = [&](int64_t chunk, int64_t n) {
        report(n ? double(chunk) / double(n) : 0, tr("Collecting the importance matrix (chunk %1 of %2)").arg(chunk).arg(n));
      };
      auto collected = iwb::quant::collect_imatrix(io);
      if (!collected || !iwb::quant::write_imatrix_file(*collected, imatrixPath.toStdString())) {
        emit queueFinished(m_cancel, collected ? tr("cannot write %1").arg(imatrixPath)
                                               : QString::fromStdString(collected.error_message()));
        return;
      }
      imatrix = std::move(*collected);
    }
    ++step;
  }

  // 4. Every job: quantize, evaluate, record.
  int numDone = 0, numFailed = 0;
  for (const QuantJob& job : jobs) {
    if (m_cancel) break;
    const bool isKv8 = job.kvCacheType != QLatin1String("f16");
    const QString label = (job.type.isEmpty() ? tr("base") : job.type) + (job.isImatrix ? tr(" + imatrix") : QString()) +
                          (isKv8 ? tr(", 8-bit KV cache") : QString());
    if (job.type.isEmpty()) {  // the base itself, e.g. with the 8-bit KV cache
      auto base = iwb::gguf::GgufFile::open(basePath);
      const auto ftype = base ? (*base)->get_int("general.file_type") : std::nullopt;
      QuantRun run = newRun(ftype ? iwb::file_type_name(*ftype) : "F16");
      run.kv_cache_type = job.kvCacheType.toStdString();
      if (evaluateAndRecord(run, basePath, label, nullptr)) ++numDone;
      else ++numFailed;
      ++step;
      continue;
    }
    QuantRun run = newRun(job.type.toStdString());
    run.kv_cache_type = job.kvCacheType.toStdString();
    run.is_imatrix = job.isImatrix;
    run.imatrix_path = job.isImatrix ? imatrixPath.toStdString() : std::string();
    run.source_path = basePath;
    if (auto id = store.add_quant_run(run)) {
      run.id = *id;
      emit runRecorded(run.id);
    }
    iwb::quant::QuantizeOptions q;
    q.source_path = basePath;
    q.output_path = QDir(s.outputDir).filePath(stem + QLatin1Char('-') + job.type + (job.isImatrix ? "-im" : "") +
                                               (isKv8 ? "-kv8" : "") + ".gguf").toStdString();
    q.type = job.type.toStdString();
    q.num_threads = s.numThreads;
    q.cancel = &m_cancel;
    q.imatrix = job.isImatrix ? &imatrix : nullptr;
    q.imatrix_path = run.imatrix_path;
    q.progress = [&](const iwb::quant::QuantizeProgress& p) {
      report(0.5 * (p.total_bytes ? double(p.bytes_done) / double(p.total_bytes) : 0), tr("%1: quantizing %2").arg(label, QString::fromStdString(p.tensor_name)));
    };
    auto quantized = iwb::quant::quantize_model(q);
    if (!quantized) {
      (void)store.finish_quant_run(run.id, RunStatus::Failed, quantized.error_message());
      emit jobFailed(label, QString::fromStdString(quantized.error_message()));
      emit runRecorded(run.id);
      ++numFailed;
      ++step;
      continue;
    }
    for (const std::string& w : quantized->warnings) run.note += (run.note.empty() ? "" : "; ") + w;
    if (evaluateAndRecord(run, q.output_path, label, &quantized->tensors)) ++numDone;
    else ++numFailed;
    ++step;
  }
  emit progressed(1.0, m_cancel ? tr("Cancelled") : tr("Done"));
  emit queueFinished(m_cancel.load(), tr("%1 runs done, %2 failed%3").arg(numDone).arg(numFailed).arg(m_cancel ? tr(", cancelled") : QString()));
}

}  // namespace iwb::ui
