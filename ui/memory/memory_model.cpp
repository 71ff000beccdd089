// MemoryModel: estimate rows from iwb::estimate_memory, measured rows from process samples and the
// engine's report (device allocations when it runs on a GPU), and the fit against the device's memory.
#include "memory/memory_model.h"

#include "iwb/engine/backend/cuda_scratch_estimate.h"

#include <QBrush>
#include <QFont>
#include <QLocale>

#include <algorithm>
#include <cmath>

namespace iwb::ui {
namespace {

QString bytesText(qint64 bytes) {
  if (bytes < 0) return QStringLiteral("—");
  return QString::fromStdString(iwb::format_bytes(static_cast<uint64_t>(bytes)));
}

QString signedBytesText(qint64 bytes) {
  const QString magnitude =
      QString::fromStdString(iwb::format_bytes(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes)));
  return (bytes < 0 ? QStringLiteral("−") : QStringLiteral("+")) + magnitude;
}

}  // namespace

std::optional<qint64> MemoryModel::Row::difference() const {
  if (estimateBytes < 0 || measuredBytes < 0) return std::nullopt;
  return measuredBytes - estimateBytes;
}

MemoryModel::MemoryModel(QObject* parent) : QAbstractTableModel(parent) {}

int MemoryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int MemoryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : NumColumns; }

QVariant MemoryModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_rows.size()) return {};
  const Row& r = m_rows.at(index.row());
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case ItemColumn: return r.isDetail ? QStringLiteral("    ") + r.item : r.item;
      case EstimateColumn: return bytesText(r.estimateBytes);
      case MeasuredColumn: return bytesText(r.measuredBytes);
      case DifferenceColumn: {
        const auto d = r.difference();
        if (!d) return QStringLiteral("—");
        if (r.estimateBytes <= 0) return signedBytesText(*d);
        const double percent = 100.0 * double(*d < 0 ? -*d : *d) / double(r.estimateBytes);
        return QStringLiteral("%1 (%2%3%)")
            .arg(signedBytesText(*d), *d < 0 ? QStringLiteral("−") : QStringLiteral("+"))
            .arg(percent, 0, 'f', 1);
      }
      case SourceColumn: return r.source;
    }
  } else if (role == Qt::TextAlignmentRole) {
    if (index.column() >= EstimateColumn && index.column() <= DifferenceColumn) {
      return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    }
  } else if (role == Qt::FontRole && r.isTotal) {
    QFont font;
    font.setBold(true);
    return font;
  } else if (role == Qt::UserRole) {
    switch (index.column()) {
      case EstimateColumn: return r.estimateBytes;
      case MeasuredColumn: return r.measuredBytes;
      case DifferenceColumn: return r.difference() ? QVariant(*r.difference()) : QVariant();
      default: return r.item;
    }
  } else if (role == Qt::ToolTipRole && index.column() == SourceColumn) {
    return r.source;
  }
  return {};
}

QVariant MemoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case ItemColumn: return tr("Where");
    case EstimateColumn: return tr("Estimate");
    case MeasuredColumn: return tr("Measured");
    case DifferenceColumn: return tr("Difference");
    case SourceColumn: return tr("How it is known");
  }
  return {};
}

void MemoryModel::setModelSummary(const iwb::ModelSummary& summary) {
  m_summary = summary;
  rebuild();
}

void MemoryModel::clearModel() {
  m_summary.reset();
  rebuild();
}

void MemoryModel::setContext(qint64 context) {
  if (context == m_context) return;
  m_context = context;
  rebuild();
}

void MemoryModel::setDevice(const iwb::ComputeDeviceInfo& device) {
  m_device = device;
  rebuild();
}

void MemoryModel::setSample(const MemorySample& sample) {
  m_sample = sample;
  rebuild();
}

void MemoryModel::setEngineOptions(const iwb::EngineOptions& options) {
  m_options = options;
  rebuild();
}

std::optional<iwb::KvPoolEstimate> MemoryModel::kvPool() const {
  if (!m_summary || m_summary->is_vocab_only) return std::nullopt;
  iwb::EngineOptions options = m_options;
  options.context_length = m_context;
  const bool isDevice = m_device.id.rfind("cuda", 0) == 0;
  // A device pool takes from what the weights leave free; the host pool from available memory.
  uint64_t available = m_device.free_memory_bytes;
  if (isDevice) available = available > m_summary->tensor_bytes ? available - m_summary->tensor_bytes : 0;
  auto pool = iwb::estimate_kv_pool(*m_summary, options, available, isDevice);
  if (!pool) return std::nullopt;
  return *pool;
}

std::optional<iwb::MemoryEstimate> MemoryModel::estimate() const {
  if (!m_summary) return std::nullopt;
  iwb::MemoryEstimate e = iwb::estimate_memory(*m_summary, m_context);
  // On a GPU the backend's scratch is another matter: past 8 tokens a step an f16 copy of the
  // largest weight (usually the output head: 0.5 GB for a 1B Llama) for cuBLAS, and the cuBLAS
  // workspace (the CPU's estimate said 51 MiB where an H100 run measured 589 MiB).
  if (m_device.id.rfind("cuda", 0) == 0 && !m_summary->is_vocab_only) {
    const int64_t tokens =
        m_options.max_batch_tokens > 0 ? m_options.max_batch_tokens : iwb::EngineOptions{}.max_batch_tokens;
    e.scratch_bytes = iwb::estimate_cuda_scratch_bytes(m_summary->hparams, tokens);
  }
  // The engine's pool holds several contexts (kDefaultKvContexts on the CPU) in whole blocks,
  // or what Engine Settings give it: estimate that, not one context.
  if (const auto pool = kvPool()) e.kv_cache_bytes = pool->bytes;
  e.recurrent_state_bytes *= static_cast<uint64_t>(recurrentSequences());
  return e;
}

qint64 MemoryModel::recurrentSequences() const {
  if (!m_summary || m_summary->hparams.recurrent_state_bytes_per_sequence == 0) return 0;
  const auto pool = kvPool();
  const qint64 contexts = pool ? static_cast<qint64>(std::floor(pool->num_contexts())) : 1;
  const qint64 most = m_options.max_running_sequences > 0 ? m_options.max_running_sequences : 1;
  return std::clamp<qint64>(contexts, 1, most);
}

qint64 MemoryModel::kvBytesPerPosition() const {
  if (!m_summary || m_summary->is_vocab_only) return 0;
  // In the cache type Engine Settings ask for (the pool estimate's own figure).
  if (const auto pool = kvPool()) return static_cast<qint64>(pool->bytes_per_position);
  const iwb::ModelHyperParams& h = m_summary->hparams;
  return h.kv_values_per_position() * 2;  // f16
}

QString MemoryModel::kvBlockText(const QString& type, qint64 bytesPerPosition, qint64 blockSize) {
  const QLocale locale;
  if (blockSize <= 0) {
    return tr("%1 cache, %2 per position")
        .arg(type.isEmpty() ? QStringLiteral("f16") : type, locale.formattedDataSize(bytesPerPosition));
  }
  return tr("%1 cache, %2 per block of %3 positions (%4 per position)")
      .arg(type.isEmpty() ? QStringLiteral("f16") : type, locale.formattedDataSize(bytesPerPosition * blockSize),
           locale.toString(blockSize), locale.formattedDataSize(bytesPerPosition));
}

MemoryFit MemoryModel::fit() const {
  const auto e = estimate();
  if (!e || m_device.free_memory_bytes == 0) return MemoryFit::Unknown;
  const double need = static_cast<double>(e->total());
  const double available = static_cast<double>(m_device.free_memory_bytes);
  if (need > available) return MemoryFit::DoesNotFit;
  return need > 0.8 * available ? MemoryFit::Tight : MemoryFit::Fits;
}

QString MemoryModel::fitText() const {
  const auto e = estimate();
  if (!e) return tr("Open a model to see how much memory it needs.");
  const QString need = bytesText(static_cast<qint64>(e->total()));
  const QString available = bytesText(static_cast<qint64>(m_device.free_memory_bytes));
  const QString total = bytesText(static_cast<qint64>(m_device.total_memory_bytes));
  const QString where = QString::fromStdString(m_device.name.empty() ? m_device.id : m_device.name);
  switch (fit()) {
    case MemoryFit::Unknown:
      return tr("Needs about %1 at a context of %2; the free memory of %3 is unknown.")
          .arg(need, QLocale().toString(m_context), where);
    case MemoryFit::Fits:
      return tr("Fits: needs about %1 at a context of %2, of %3 available (%4 total) on %5.")
          .arg(need, QLocale().toString(m_context), available, total, where);
    case MemoryFit::Tight:
      return tr("Fits, barely: needs about %1 at a context of %2, of %3 available (%4 total) on %5.")
          .arg(need, QLocale().toString(m_context), available, total, where);
    case MemoryFit::DoesNotFit:
      return tr("Does not fit: needs about %1 at a context of %2, but only %3 is available (%4 total) on %5. "
                "Choose a smaller context or a smaller quantization.")
          .arg(need, QLocale().toString(m_context), available, total, where);
  }
  return {};
}

QString MemoryModel::kvPoolText() const {
  const auto pool = kvPool();
  if (!pool) return {};
  const QLocale locale;
  return tr("%1 blocks of %2 positions, %3 contexts of %4 (Engine Settings); %5")
      .arg(locale.toString(pool->num_blocks), locale.toString(pool->block_size),
           locale.toString(pool->num_contexts(), 'f', pool->num_contexts() == std::floor(pool->num_contexts()) ? 0 : 1),
           locale.toString(pool->context_length),
           kvBlockText(QString::fromStdString(iwb::kv_cache_types_name(m_options.kv_cache_type)),
                       static_cast<qint64>(pool->bytes_per_position), pool->block_size));
}

const MemoryModel::Row* MemoryModel::findRow(const QString& item) const {
  for (const Row& r : m_rows) {
    if (r.item == item) return &r;
  }
  return nullptr;
}

void MemoryModel::rebuild() {
  beginResetModel();
  m_rows.clear();
  const auto e = estimate();
  const bool isLoaded = this->isLoaded();
  const MemorySample sample = m_sample.value_or(MemorySample{});
  const QString notLoaded = tr("measured once the model is loaded");
  const QString noReport = tr("not measurable yet: the engine reports no allocations of its own");
  if (e) {
    Row weights{tr("Weights"), static_cast<qint64>(e->weight_bytes), -1, notLoaded, false, false};
    if (isLoaded && sample.weightsReadBytes > 0) {
      // Read into the process's own memory at load (Engine Settings' load mode): all resident,
      // counted in RssAnon, so the anonymous rows below leave it out.
      weights.measuredBytes = sample.weightsReadBytes + sample.fileGrowthBytes();
      weights.source =
          tr("the file read into memory at load, in 2 MiB pages where the kernel gave them (anonymous "
             "memory, all resident), plus file pages mapped since");
    } else if (isLoaded) {
      weights.measuredBytes = sample.fileGrowthBytes();
      weights.source =
          tr("memory-mapped file pages resident now (RssFile growth since before the load); pages "
             "not read yet are not counted");
    }
    m_rows << weights;
    for (const auto& [type, totals] : m_summary->totals_by_type) {
      m_rows << Row{tr("%1 (%2 tensors)").arg(QString::fromStdString(type)).arg(totals.num_tensors),
                    static_cast<qint64>(totals.num_bytes),
                    -1,
                    tr("from the GGUF's tensor table"),
                    false,
                    true};
    }
    const bool hasReport = isLoaded && sample.hasEngineReport;
    // The CUDA backend refuses recurrent layers (cuda_step_plan), so a model with a recurrent
    // state runs on the CPU and its row comes with the host rows below.
    if (isLoaded && sample.isOnCuda()) {
      appendDeviceRows(*e, sample);
      m_rows << Row{tr("Host heap"),
                    -1,
                    sample.anonGrowthBesideWeightsBytes(),
                    tr("anonymous resident memory grown since before the load (RssAnon): the engine's host side, "
                       "pinned staging buffers included (weights read into memory left out)"),
                    false,
                    false};
      m_rows << Row{tr("Pinned host buffers"),
                    -1,
                    sample.hostPinnedBytes,
                    tr("page-locked staging: the step's metadata up, logits rows down"),
                    false,
                    true};
      appendProcessRows(sample);
      endResetModel();
      emit changed();
      return;
    }
    Row kv{tr("KV cache"), static_cast<qint64>(e->kv_cache_bytes), -1, isLoaded ? noReport : notLoaded, false, false};
    const QString poolRule = kvPoolText();
    if (!isLoaded && !poolRule.isEmpty())
      kv.source = tr("estimate: %1; measured once the model is loaded").arg(poolRule);
    if (hasReport) {
      // The estimate follows the engine's own sizing rule, so a difference here is the
      // memory the engine found available at load differing from now (it caps the pool).
      kv.measuredBytes = sample.kvPoolBytes;
      // A host pool's pages as the kernel gave them (2 MiB ones read faster at depth), named
      // first: the rest of the line is long and the table elides its end.
      const QString pages = sample.kvHugePageBytes > 0
                                ? tr(" (%1 of it in 2 MiB pages)").arg(bytesText(sample.kvHugePageBytes))
                                : QString();
      kv.source =
          tr("the engine's paged KV pool, allocated at load%4: %1 positions in blocks, %2 (estimate: %3)")
              .arg(QLocale().toString(sample.kvPositionsTotal),
                   kvBlockText(sample.kvCacheType, sample.kvBytesPerPosition, sample.kvBlockSize), poolRule, pages);
    }
    m_rows << kv;
    if (hasReport) {
      m_rows << Row{tr("KV cache in use"),
                    -1,
                    sample.kvBytesPerPosition * sample.kvPositionsUsed,
                    tr("%1 of %2 positions hold keys and values of live sequences; %3 more keep reusable prefixes")
                        .arg(QLocale().toString(sample.kvPositionsUsed), QLocale().toString(sample.kvPositionsTotal),
                             QLocale().toString(sample.kvPositionsCached)),
                    false,
                    true};
    } else if (isLoaded) {
      const qint64 used = kvBytesPerPosition() * sample.kvPositions;
      m_rows << Row{tr("KV cache in use"),
                    used,
                    -1,
                    tr("%1 of %2 positions hold keys and values (computed from the positions, not measured)")
                        .arg(QLocale().toString(sample.kvPositions), QLocale().toString(sample.contextLength)),
                    false,
                    true};
    }
    if (e->recurrent_state_bytes > 0) {
      m_rows << recurrentRow(*e, sample, hasReport);
      // Kept states are not in the estimate: how many there are depends on the prompts run.
      if (hasReport) {
        const QString kept = sample.recurrentNumCheckpoints == 1
                                 ? tr("1 state kept")
                                 : tr("%1 states kept").arg(QLocale().toString(sample.recurrentNumCheckpoints));
        m_rows << Row{tr("Recurrent-state checkpoints"),
                      -1,
                      sample.recurrentCheckpointBytes,
                      tr("%1 at prompts' last block boundaries, so prefix caching resumes a chat's next turn there "
                         "(at most %2, the least recently used dropped first)")
                          .arg(kept, QLocale().toString(m_options.max_state_checkpoints)),
                      false,
                      false};
      }
    }
    Row scratch{tr("Scratch"), static_cast<qint64>(e->scratch_bytes), -1, isLoaded ? noReport : notLoaded, false,
                false};
    if (hasReport) {
      scratch.measuredBytes = sample.scratchBytes;
      scratch.source = tr("the engine's step buffers: activations of one step and the logits rows");
    }
    m_rows << scratch;
    // The recurrent states are heap allocations of the engine's too.
    Row anon{tr("KV cache, scratch and heap"),
             static_cast<qint64>(e->kv_cache_bytes + e->scratch_bytes + e->recurrent_state_bytes),
             -1,
             notLoaded,
             false,
             false};
    if (isLoaded) {
      anon.measuredBytes = sample.anonGrowthBesideWeightsBytes();
      anon.source =
          tr("anonymous resident memory grown since before the load (RssAnon, weights read into memory "
             "left out); the engine's heap, pages of the KV cache not yet written are not counted");
    }
    m_rows << anon;
    Row total{tr("Total"), static_cast<qint64>(e->total()), -1, notLoaded, true, false};
    if (isLoaded) {
      total.measuredBytes = sample.fileGrowthBytes() + sample.anonGrowthBytes();
      total.source = tr("RssFile + RssAnon growth since before the load");
    }
    m_rows << total;
  }
  appendProcessRows(sample);
  endResetModel();
  emit changed();
}

MemoryModel::Row MemoryModel::recurrentRow(const iwb::MemoryEstimate& e, const MemorySample& sample,
                                           bool hasReport) const {
  const QLocale locale;
  const iwb::ModelHyperParams& h = m_summary->hparams;
  const QString each = bytesText(static_cast<qint64>(h.recurrent_state_bytes_per_sequence));
  Row row{tr("Recurrent state"),
          static_cast<qint64>(e.recurrent_state_bytes),
          -1,
          tr("estimate: %1 sequences (a KV pool's full contexts) × %2, the %3 recurrent layers' state of each; "
             "measured once the model is loaded")
              .arg(locale.toString(recurrentSequences()), each, locale.toString(h.num_recurrent_layers())),
          false,
          false};
  if (hasReport) {
    row.measuredBytes = sample.recurrentStateBytes;
    // The states live from a sequence's first step to its end, whatever its length.
    row.source = tr("%1 live sequences × %2: the recurrent layers' state each running sequence holds beside its KV "
                    "blocks (estimate: %3 sequences)")
                     .arg(locale.toString(sample.recurrentNumSequences),
                          bytesText(sample.recurrentStateBytesPerSequence), locale.toString(recurrentSequences()));
  } else if (isLoaded()) {
    row.source = tr("not measurable yet: the engine reports no allocations of its own");
  }
  return row;
}

void MemoryModel::appendDeviceRows(const iwb::MemoryEstimate& e, const MemorySample& sample) {
  // On a GPU the engine's own allocations are exact: every cudaMalloc is counted where it is made.
  const QString device = sample.deviceId;
  const QLocale locale;
  m_rows << Row{tr("Weights on %1").arg(device),
                static_cast<qint64>(e.weight_bytes),
                sample.deviceWeightsBytes,
                tr("uploaded at load in their stored type (Q4_0 and Q8_0 regrouped, the same bytes, for int8 "
                   "products); norms and biases as f32"),
                false,
                false};
  m_rows << Row{tr("KV pool on %1").arg(device),
                static_cast<qint64>(e.kv_cache_bytes),
                sample.deviceKvPoolBytes,
                tr("the paged KV pool in device memory, sized at load: %1 positions in blocks, %2")
                    .arg(locale.toString(sample.kvPositionsTotal),
                         kvBlockText(sample.kvCacheType, sample.kvBytesPerPosition, sample.kvBlockSize)),
                false,
                false};
  m_rows << Row{tr("KV cache in use"),
                -1,
                sample.kvBytesPerPosition * sample.kvPositionsUsed,
                tr("%1 of %2 positions hold keys and values of live sequences; %3 more keep reusable prefixes")
                    .arg(locale.toString(sample.kvPositionsUsed), locale.toString(sample.kvPositionsTotal),
                         locale.toString(sample.kvPositionsCached)),
                false,
                true};
  m_rows << Row{tr("Scratch on %1").arg(device),
                static_cast<qint64>(e.scratch_bytes),
                sample.deviceScratchBytes,
                tr("activations of one step, f16 staging for cuBLAS, attention workspace, the step's metadata and "
                   "logits rows"),
                false,
                false};
  m_rows << Row{
      tr("cuBLAS workspace"), -1, sample.deviceWorkspaceBytes, tr("the workspace handed to cuBLAS"), false, true};
  m_rows << Row{tr("Engine total on %1").arg(device),
                static_cast<qint64>(e.total()),
                sample.deviceEngineBytes(),
                tr("weights + KV pool + scratch + cuBLAS workspace, as the engine allocated them"),
                true,
                false};
  if (sample.deviceTotalBytes > 0) {
    QString source = tr("cudaMemGetInfo when sampled, of %1 total (every process on the device counts)")
                         .arg(bytesText(sample.deviceTotalBytes));
    if (sample.deviceNumGraphs > 0) source += tr("; %1 decode-step CUDA graphs captured").arg(sample.deviceNumGraphs);
    m_rows << Row{tr("Free on %1").arg(device), -1, sample.deviceFreeBytes, source, false, false};
  }
}

void MemoryModel::appendProcessRows(const MemorySample& sample) {
  if (m_sample && m_sample->isValid) {
    m_rows << Row{tr("Process resident (VmRSS)"),
                  -1,
                  sample.residentBytes,
                  tr("the whole application, from /proc/self/status"),
                  false,
                  false};
  }
  if (m_device.total_memory_bytes > 0) {
    const bool isCpu = m_device.kind == iwb::ComputeDeviceKind::Cpu;
    m_rows << Row{tr("Available on %1").arg(QString::fromStdString(m_device.id)),
                  -1,
                  static_cast<qint64>(m_device.free_memory_bytes),
                  (isCpu ? tr("MemAvailable of %1 total") : tr("free device memory of %1 total, when last refreshed"))
                      .arg(bytesText(static_cast<qint64>(m_device.total_memory_bytes))),
                  false,
                  false};
  }
}

}  // namespace iwb::ui
