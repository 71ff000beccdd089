// QuantRunsModel: stored lab runs as table rows, numeric sort keys, labels and CSV export.
#include "quantlab/quant_runs_model.h"

#include "store/results_store_access.h"

#include <QBrush>
#include <QColor>
#include <QFileInfo>
#include <QFont>
#include <QStringList>

#include <limits>

namespace iwb::ui {
namespace {

using iwb::quant::QuantRun;
using iwb::quant::RunStatus;

QString statusText(const QuantRun& r) {
  if (r.status == RunStatus::Running) return QObject::tr("running");
  if (r.status == RunStatus::Failed) return QObject::tr("failed");
  if (r.status == RunStatus::Cancelled) return QObject::tr("cancelled");
  if (r.status == RunStatus::Interrupted) return QObject::tr("interrupted");
  return r.is_reference ? QObject::tr("reference") : QObject::tr("done");
}

QVariant optionalText(const std::optional<double>& v, int decimals, double scale = 1.0, const char* suffix = "") {
  if (!v) return QStringLiteral("–");
  return QString::number(*v * scale, 'f', decimals) + QString::fromLatin1(suffix);
}

// Missing figures sort after every number in either direction's natural reading.
QVariant sortKey(const std::optional<double>& v) { return v ? *v : std::numeric_limits<double>::infinity(); }

}  // namespace

QuantRunsModel::QuantRunsModel(QObject* parent) : QAbstractTableModel(parent) {}

int QuantRunsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_runs.size());
}

int QuantRunsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : NumColumns; }

QString QuantRunsModel::label(const QuantRun& r) {
  if (r.is_reference) return QStringLiteral("base");
  QString text = QString::fromStdString(r.weight_type);
  if (r.is_imatrix) text += QStringLiteral("+im");
  if (!r.kv_cache_type.empty() && r.kv_cache_type != "f16" && r.kv_cache_type != "f16/f16") {
    text += QStringLiteral(" KV ") + QString::fromStdString(r.kv_cache_type);
  }
  return text;
}

QVariant QuantRunsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const QuantRun& r = m_runs[static_cast<size_t>(index.row())];
  const auto mib = [](const std::optional<double>& bytes) -> std::optional<double> {
    return bytes ? std::optional<double>(*bytes / (1024.0 * 1024.0)) : std::nullopt;
  };
  if (role == RunIdRole) return QVariant::fromValue<qint64>(r.id);
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case StatusColumn: return statusText(r);
      case TypeColumn: return QString::fromStdString(r.weight_type) + (r.is_reference ? tr(" (base)") : QString());
      case ImatrixColumn: return r.is_imatrix ? tr("yes") : tr("no");
      case KvColumn: return QString::fromStdString(r.kv_cache_type);
      case SizeColumn: return optionalText(mib(r.file_bytes), 1);
      case BitsColumn: return optionalText(r.bits_per_weight, 2);
      case PerplexityColumn:
        if (!r.perplexity) return QStringLiteral("–");
        return QStringLiteral("%1 ± %2").arg(*r.perplexity, 0, 'f', 3).arg(r.perplexity_error.value_or(0), 0, 'f', 3);
      case PplRatioColumn:
        if (!r.ppl_ratio) return QStringLiteral("–");
        return QStringLiteral("%1 ± %2").arg(*r.ppl_ratio, 0, 'f', 4).arg(r.ppl_ratio_error.value_or(0), 0, 'f', 4);
      case KlMeanColumn: return optionalText(r.kl_mean, 5);
      case KlP99Column: return optionalText(r.kl_p99, 4);
      case Top1Column: return optionalText(r.top1_agreement, 1, 100.0, " %");
      case DeltaPColumn: return optionalText(r.delta_p_rms, 4);
      case PromptRateColumn: return optionalText(r.prompt_tokens_per_s, 1);
      case GenRateColumn: return optionalText(r.gen_tokens_per_s, 2);
      case DepthRateColumn:
        if (!r.depth_gen_tokens_per_s) return QStringLiteral("–");
        return tr("%1 @ %2").arg(*r.depth_gen_tokens_per_s, 0, 'f', 2).arg(r.gen_depth);
      case KvBytesColumn: return optionalText(r.kv_bytes_per_token, 0);
      case FitColumn:
        if (!r.fit_sequences || !r.fit_memory_bytes) return QStringLiteral("–");
        return tr("%1 × %2 in %3 GiB")
            .arg(*r.fit_sequences, 0, 'f', 0)
            .arg(r.fit_context)
            .arg(*r.fit_memory_bytes / (1024.0 * 1024.0 * 1024.0), 0, 'g', 3);
      case ModelColumn: return QFileInfo(QString::fromStdString(r.model_path)).fileName();
      case DateColumn: return QString::fromStdString(r.date).left(19).replace(QLatin1Char('T'), QLatin1Char(' '));
    }
  } else if (role == SortRole) {
    switch (index.column()) {
      case SizeColumn: return sortKey(r.file_bytes);
      case BitsColumn: return sortKey(r.bits_per_weight);
      case PerplexityColumn: return sortKey(r.perplexity);
      case PplRatioColumn: return sortKey(r.ppl_ratio);
      case KlMeanColumn: return sortKey(r.kl_mean);
      case KlP99Column: return sortKey(r.kl_p99);
      case Top1Column: return sortKey(r.top1_agreement);
      case DeltaPColumn: return sortKey(r.delta_p_rms);
      case PromptRateColumn: return sortKey(r.prompt_tokens_per_s);
      case GenRateColumn: return sortKey(r.gen_tokens_per_s);
      case DepthRateColumn: return sortKey(r.depth_gen_tokens_per_s);
      case KvBytesColumn: return sortKey(r.kv_bytes_per_token);
      case FitColumn: return sortKey(r.fit_sequences);
      default: return data(index, Qt::DisplayRole);
    }
  } else if (role == Qt::TextAlignmentRole) {
    if (index.column() >= SizeColumn && index.column() <= FitColumn) {
      return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    }
  } else if (role == Qt::FontRole && r.is_reference) {
    QFont bold;
    bold.setBold(true);
    return bold;
  } else if (role == Qt::ForegroundRole && r.status == RunStatus::Failed) {
    return QBrush(QColor(0xb0, 0x30, 0x30));
  } else if (role == Qt::ForegroundRole && r.status == RunStatus::Interrupted) {
    return QBrush(QColor(0xb0, 0x70, 0x20));  // the process died mid-run: figures incomplete
  } else if (role == Qt::ForegroundRole && r.status == RunStatus::Cancelled) {
    return QBrush(QColor(0x80, 0x80, 0x80));  // stopped on request: figures incomplete, not an error
  } else if (role == Qt::ToolTipRole) {
    QString tip = QString::fromStdString(r.model_path);
    if (!r.source_path.empty()) tip += tr("\nbase: %1").arg(QString::fromStdString(r.source_path));
    tip += tr("\ntext: %1, context %2, %3 chunks, %4 tokens scored")
               .arg(QString::fromStdString(r.text_name))
               .arg(r.context)
               .arg(r.num_chunks)
               .arg(r.num_scored_tokens);
    if (r.kv_bytes_per_token) {
      tip += tr("\nKV cache %1: %2 bytes per position, blocks of %3 positions")
                 .arg(QString::fromStdString(r.kv_cache_type))
                 .arg(*r.kv_bytes_per_token, 0, 'f', 0)
                 .arg(r.kv_block_size);
    }
    if (!r.error.empty()) tip += tr("\nfailed: %1").arg(QString::fromStdString(r.error));
    if (!r.note.empty()) tip += QLatin1Char('\n') + QString::fromStdString(r.note);
    return tip;
  }
  return {};
}

QVariant QuantRunsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case StatusColumn: return tr("Status");
    case TypeColumn: return tr("Type");
    case ImatrixColumn: return tr("imatrix");
    case KvColumn: return tr("KV cache");
    case SizeColumn: return tr("Size (MiB)");
    case BitsColumn: return tr("Bits/weight");
    case PerplexityColumn: return tr("Perplexity");
    case PplRatioColumn: return tr("PPL(Q)/PPL(base)");
    case KlMeanColumn: return tr("KL mean");
    case KlP99Column: return tr("KL p99");
    case Top1Column: return tr("Top-1 agree");
    case DeltaPColumn: return tr("Δp RMS");
    case PromptRateColumn: return tr("Prompt tok/s");
    case GenRateColumn: return tr("Gen tok/s");
    case DepthRateColumn: return tr("Gen tok/s @ depth");
    case KvBytesColumn: return tr("KV B/token");
    case FitColumn: return tr("Sequences that fit");
    case ModelColumn: return tr("File");
    case DateColumn: return tr("Date (UTC)");
  }
  return {};
}

bool QuantRunsModel::reload(const QString& storePath) {
  auto runs = ResultsStoreAccess(storePath).quantRuns();
  if (!runs) {
    m_errorMessage = QString::fromStdString(runs.error_message());
    return false;
  }
  m_errorMessage.clear();
  std::vector<QuantRun> measured;
  m_provenance.clear();
  for (QuantRun& r : *runs) {
    // Quantize-only runs hold no metrics; they say where a file came from.
    if (r.kind == "quantize") {
      if (r.status == iwb::quant::RunStatus::Done && r.note.find("holds quantized tensors") != std::string::npos) {
        const QString from = QFileInfo(QString::fromStdString(r.source_path)).fileName();
        m_provenance[QString::fromStdString(r.model_identity)] = from;
        m_provenance[QString::fromStdString(r.model_path)] = from;  // runs recorded with another identity scheme
      }
      continue;
    }
    measured.push_back(std::move(r));
  }
  setRuns(std::move(measured));
  return true;
}

void QuantRunsModel::setRuns(std::vector<QuantRun> runs) {
  beginResetModel();
  m_runs = std::move(runs);
  endResetModel();
}

QString QuantRunsModel::dequantizedFrom(const QuantRun& run) const {
  const QString byIdentity = m_provenance.value(QString::fromStdString(run.model_identity));
  return byIdentity.isEmpty() ? m_provenance.value(QString::fromStdString(run.model_path)) : byIdentity;
}

int QuantRunsModel::rowOfRun(qint64 id) const {
  for (size_t i = 0; i < m_runs.size(); ++i) {
    if (m_runs[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

QString QuantRunsModel::toCsv() const {
  auto number = [](const std::optional<double>& v) { return v ? QString::number(*v, 'g', 10) : QString(); };
  auto quoted = [](QString s) {
    return QLatin1Char('"') + s.replace(QLatin1Char('"'), QStringLiteral("\"\"")) + QLatin1Char('"');
  };
  QStringList lines;
  lines << QStringLiteral(
      "id,date,status,kind,type,imatrix,kv_cache,reference,model,base,text,context,chunks,scored_tokens,file_bytes,"
      "memory_bytes,bits_per_weight,perplexity,perplexity_error,kl_mean,kl_median,kl_p99,kl_max,top1_agreement,"
      "delta_p_mean,delta_p_rms,prompt_tokens_per_s,gen_tokens_per_s,gen_depth,depth_gen_tokens_per_s,weights_bytes,"
      "kv_bytes_per_token,kv_block_size,fit_context,fit_memory_bytes,fit_sequences,ppl_ratio,ppl_ratio_error,threads,"
      "device,error");
  for (const QuantRun& r : m_runs) {
    QStringList f;
    f << QString::number(r.id) << QString::fromStdString(r.date)
      << QString::fromLatin1(iwb::quant::run_status_name(r.status)) << QString::fromStdString(r.kind)
      << QString::fromStdString(r.weight_type) << QString::number(int(r.is_imatrix))
      << QString::fromStdString(r.kv_cache_type) << QString::number(int(r.is_reference))
      << quoted(QString::fromStdString(r.model_path)) << quoted(QString::fromStdString(r.source_path))
      << quoted(QString::fromStdString(r.text_name)) << QString::number(r.context) << QString::number(r.num_chunks)
      << QString::number(r.num_scored_tokens) << number(r.file_bytes) << number(r.memory_bytes)
      << number(r.bits_per_weight) << number(r.perplexity) << number(r.perplexity_error) << number(r.kl_mean)
      << number(r.kl_median) << number(r.kl_p99) << number(r.kl_max) << number(r.top1_agreement)
      << number(r.delta_p_mean) << number(r.delta_p_rms) << number(r.prompt_tokens_per_s) << number(r.gen_tokens_per_s)
      << QString::number(r.gen_depth) << number(r.depth_gen_tokens_per_s) << number(r.weights_bytes)
      << number(r.kv_bytes_per_token) << QString::number(r.kv_block_size) << QString::number(r.fit_context)
      << number(r.fit_memory_bytes) << number(r.fit_sequences) << number(r.ppl_ratio) << number(r.ppl_ratio_error)
      << QString::number(r.num_threads) << quoted(QString::fromStdString(r.device_name))
      << quoted(QString::fromStdString(r.error));
    lines << f.join(QLatin1Char(','));
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace iwb::ui
