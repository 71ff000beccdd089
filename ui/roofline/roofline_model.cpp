// RooflineModel: roofs from probes and datasheets, points from profile snapshots and cost-model
// predictions, and the table and CSV views of them.
#include "roofline/roofline_model.h"

#include <QLocale>

#include <algorithm>
#include <cmath>

namespace iwb::ui {
namespace {

QString withSiPrefix(double value, const QString& unit, int precision = 3) {
  static const char* const kPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  if (!std::isfinite(value) || value <= 0) return QStringLiteral("0 %1").arg(unit);
  int exponent = 0;
  while (value >= 1000.0 && exponent < 6) {
    value /= 1000.0;
    ++exponent;
  }
  return QStringLiteral("%1 %2%3").arg(QString::number(value, 'g', precision), QLatin1String(kPrefixes[exponent]), unit);
}

// Distinct shape texts of `kind` calls among `records`, in the order they first ran.
QStringList distinctShapes(const std::vector<iwb::KernelRecord>& records, iwb::OpKind kind) {
  QStringList shapes;
  for (const iwb::KernelRecord& r : records) {
    if (r.kind != kind) continue;
    const QString text = QString::fromStdString(r.shape_text());
    if (!shapes.contains(text)) shapes << text;
  }
  return shapes;
}

// Whether every `kind` call among `records` multiplied quantized weights (see
// RooflinePoint::isQuantized); false for ops without weights (attention's keys may be a
// quantized cache type, but its arithmetic is f32).
bool isQuantizedProduct(const std::vector<iwb::KernelRecord>& records, iwb::OpKind kind) {
  if (kind != iwb::OpKind::Matmul && kind != iwb::OpKind::Logits && kind != iwb::OpKind::ExpertMatmul) return false;
  bool any = false;
  for (const iwb::KernelRecord& r : records) {
    if (r.kind != kind) continue;
    const auto traits = iwb::ggml_type_traits(static_cast<uint32_t>(r.data_type));
    if (!traits || !traits->is_quantized) return false;
    any = true;
  }
  return any;
}

QString csvField(const QString& text) {
  if (!text.contains(QLatin1Char(',')) && !text.contains(QLatin1Char('"')) && !text.contains(QLatin1Char('\n'))) {
    return text;
  }
  QString quoted = text;
  quoted.replace(QLatin1String("\""), QLatin1String("\"\""));
  return QLatin1Char('"') + quoted + QLatin1Char('"');
}

// Full precision without an exponent for the magnitudes in play (FLOPs up to ~1e15).
QString csvNumber(double value) { return QString::number(value, 'g', 16); }

}  // namespace

double Roof::attainableFlops(double intensity) const {
  if (intensity <= 0) return 0;
  return std::min(peakFlops, bandwidthBytesPerS * intensity);
}

QList<Roof> datasheetRoofs() {
  return {
      {QStringLiteral("H100 SXM (datasheet)"), 3.35e12, 989e12, false},
      {QStringLiteral("H200 (datasheet)"), 4.8e12, 989e12, false},
  };
}

Roof roofFromProbe(const iwb::ProbeResult& probe) {
  Roof roof;
  // No date: the panel's header line gives it, and in the legend it made the box a third of
  // the chart's width.
  roof.label =
      QStringLiteral("%1 %2").arg(QString::fromStdString(probe.device_id),
                                  probe.has_read_bandwidth() ? QStringLiteral("read-only") : QStringLiteral("copy"));
  roof.bandwidthBytesPerS = probe.bandwidth_bytes_per_s();
  roof.peakFlops = probe.peak_flops;
  roof.isMeasured = true;
  return roof;
}

std::optional<Roof> copyRoofFromProbe(const iwb::ProbeResult& probe) {
  if (!probe.has_read_bandwidth() || probe.stream_bytes_per_s() <= 0 || probe.peak_flops <= 0) return std::nullopt;
  Roof roof = roofFromProbe(probe);
  roof.label = QStringLiteral("%1 copy").arg(QString::fromStdString(probe.device_id));
  roof.bandwidthBytesPerS = probe.stream_bytes_per_s();
  return roof;
}

std::optional<Roof> int8RoofFromProbe(const iwb::ProbeResult& probe) {
  if (probe.peak_int8_ops <= 0 || probe.bandwidth_bytes_per_s() <= 0) return std::nullopt;
  Roof roof = roofFromProbe(probe);
  roof.label = QStringLiteral("%1 int8 dot products").arg(QString::fromStdString(probe.device_id));
  roof.peakFlops = probe.peak_int8_ops;
  return roof;
}

QString RooflinePoint::opName() const { return QString::fromLatin1(iwb::op_kind_name(kind)); }
QString RooflinePoint::phaseName() const { return QString::fromLatin1(iwb::phase_name(phase)); }

RooflineModel::RooflineModel(QObject* parent) : QAbstractTableModel(parent) {}

int RooflineModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_points.size());
}

int RooflineModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : NumColumns; }

QVariant RooflineModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_points.size()) return {};
  const RooflinePoint& p = m_points.at(index.row());
  const bool hasRoof = p.roofFlopsPerS > 0;
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case OpColumn: return p.opName();
      case PhaseColumn: return p.phaseName();
      case SourceColumn: return p.isPredicted ? tr("predicted") : tr("measured");
      case IntensityColumn: return p.intensity > 0 ? QString::number(p.intensity, 'g', 3) : QStringLiteral("—");
      case FlopsColumn: return p.flopsPerS > 0 ? formatFlopsPerSecond(p.flopsPerS) : QStringLiteral("—");
      case RoofColumn:
        return hasRoof && p.flopsPerS > 0 ? QStringLiteral("%1%").arg(100.0 * p.fractionOfRoof(), 0, 'f', 1)
                                          : QStringLiteral("—");
      case TimeColumn: return p.seconds > 0 ? formatSeconds(p.seconds) : QStringLiteral("—");
      case CallsColumn: return QLocale().toString(p.numCalls);
      case ShapesColumn: return p.shapes.join(QLatin1String("; "));
    }
  } else if (role == Qt::UserRole) {  // sortable raw values
    switch (index.column()) {
      case IntensityColumn: return p.intensity;
      case FlopsColumn: return p.flopsPerS;
      case RoofColumn: return p.fractionOfRoof();
      case TimeColumn: return p.seconds;
      case CallsColumn: return p.numCalls;
      default: return data(index, Qt::DisplayRole);
    }
  } else if (role == Qt::TextAlignmentRole) {
    if (index.column() >= IntensityColumn && index.column() <= CallsColumn) {
      return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    }
  } else if (role == Qt::ToolTipRole && index.column() == ShapesColumn) {
    return p.shapes.join(QLatin1Char('\n'));
  }
  return {};
}

QVariant RooflineModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case OpColumn: return tr("Op");
    case PhaseColumn: return tr("Phase");
    case SourceColumn: return tr("Source");
    case IntensityColumn: return tr("FLOP/byte");
    case FlopsColumn: return tr("Achieved");
    case RoofColumn: return tr("% of roof");
    case TimeColumn: return tr("Time");
    case CallsColumn: return tr("Calls");
    case ShapesColumn: return tr("Shapes");
  }
  return {};
}

void RooflineModel::setProbe(const std::optional<iwb::ProbeResult>& probe) {
  if (probe && probe->bandwidth_bytes_per_s() > 0 && probe->peak_flops > 0) m_measuredRoof = roofFromProbe(*probe);
  else m_measuredRoof.reset();
  m_measuredInt8Roof = probe ? int8RoofFromProbe(*probe) : std::nullopt;
  m_measuredCopyRoof = probe && m_measuredRoof ? copyRoofFromProbe(*probe) : std::nullopt;
  // Predictions sit on the roof and every point's fraction is of it: both follow.
  rebuildPoints();
  emit roofsChanged();
}

void RooflineModel::setSource(RooflineSource source) {
  if (source == m_source) return;
  m_source = source;
  rebuildPoints();
}

void RooflineModel::setSnapshot(const iwb::ProfileSnapshot& snapshot) {
  m_snapshot = snapshot;
  rebuildPoints();
}

void RooflineModel::clearMeasured() {
  m_snapshot.reset();
  rebuildPoints();
}

void RooflineModel::setPrediction(const std::vector<iwb::KernelRecord>& records, const QString& label) {
  m_prediction = records;
  m_predictionLabel = label;
  rebuildPoints();
}

void RooflineModel::clearPrediction() {
  m_prediction.clear();
  m_predictionLabel.clear();
  rebuildPoints();
}

const RooflinePoint* RooflineModel::findPoint(iwb::OpKind kind, iwb::Phase phase, bool isPredicted) const {
  for (const RooflinePoint& p : m_points) {
    if (p.kind == kind && p.phase == phase && p.isPredicted == isPredicted) return &p;
  }
  return nullptr;
}

void RooflineModel::rebuildPoints() {
  beginResetModel();
  m_points.clear();
  if (m_snapshot) {
    const std::vector<iwb::OpAggregate>& aggregates =
        m_source == RooflineSource::LastSteps ? m_snapshot->last_steps : m_snapshot->running;
    for (const iwb::OpAggregate& a : aggregates) {
      RooflinePoint p;
      p.kind = a.kind;
      p.phase = a.phase;
      p.numCalls = a.count;
      p.flops = a.flops;
      p.bytes = a.bytes;
      p.seconds = a.seconds;
      p.intensity = a.intensity();
      p.flopsPerS = a.flops_per_s();
      // Shapes come from the newest step of the phase: the running aggregate keeps totals only.
      const auto& batch = a.phase == iwb::Phase::Prefill ? m_snapshot->last_prefill : m_snapshot->last_decode;
      if (batch) {
        p.shapes = distinctShapes(batch->kernels, a.kind);
        p.isQuantized = isQuantizedProduct(batch->kernels, a.kind);
      }
      m_points << p;
    }
  }
  for (const iwb::OpAggregate& a : iwb::aggregate_records(m_prediction)) {
    RooflinePoint p;
    p.kind = a.kind;
    p.phase = a.phase;
    p.isPredicted = true;
    p.numCalls = a.count;
    p.flops = a.flops;
    p.bytes = a.bytes;
    p.intensity = a.intensity();
    std::vector<iwb::KernelRecord> ofPhase;
    for (const iwb::KernelRecord& r : m_prediction) {
      if (r.phase == a.phase) ofPhase.push_back(r);
    }
    p.shapes = distinctShapes(ofPhase, a.kind);
    p.isQuantized = isQuantizedProduct(ofPhase, a.kind);
    m_points << p;
  }
  updateRoofFractions();
  endResetModel();
}

void RooflineModel::updateRoofFractions() {
  for (RooflinePoint& p : m_points) {
    const std::optional<Roof>& roof = p.isQuantized && m_measuredInt8Roof ? m_measuredInt8Roof : m_measuredRoof;
    p.roofFlopsPerS = roof && m_measuredRoof ? roof->attainableFlops(p.intensity) : 0;
    if (p.isPredicted) {
      // The roofline's prediction: an op runs at the roof above it, so its time is the larger
      // of its compute time at the peak and its traffic time at the bandwidth.
      p.flopsPerS = p.roofFlopsPerS;
      p.seconds = p.roofFlopsPerS > 0 ? p.flops / p.roofFlopsPerS : 0;
    }
  }
}

QString RooflineModel::toCsv() const {
  QString csv = QStringLiteral(
      "source,phase,op,calls,flops,bytes,seconds,intensity_flop_per_byte,flop_per_s,roof_flop_per_s,"
      "percent_of_roof,shapes\n");
  for (const RooflinePoint& p : m_points) {
    const QStringList fields = {
        p.isPredicted ? QStringLiteral("predicted") : QStringLiteral("measured"),
        p.phaseName(),
        p.opName(),
        QString::number(p.numCalls),
        csvNumber(p.flops),
        csvNumber(p.bytes),
        csvNumber(p.seconds),
        csvNumber(p.intensity),
        csvNumber(p.flopsPerS),
        csvNumber(p.roofFlopsPerS),
        p.roofFlopsPerS > 0 ? QString::number(100.0 * p.fractionOfRoof(), 'f', 2) : QString(),
        csvField(p.shapes.join(QLatin1String("; "))),
    };
    csv += fields.join(QLatin1Char(',')) + QLatin1Char('\n');
  }
  return csv;
}

std::optional<DecodeWeightReads> RooflineModel::newestDecodeWeightReads() const {
  if (!m_snapshot || !m_snapshot->last_decode) return std::nullopt;
  DecodeWeightReads reads;
  for (const iwb::KernelRecord& r : m_snapshot->last_decode->kernels) {
    if (r.kind != iwb::OpKind::Matmul && r.kind != iwb::OpKind::Logits && r.kind != iwb::OpKind::ExpertMatmul) continue;
    reads.bytes += r.bytes;
    reads.seconds += r.seconds;
  }
  if (!(reads.seconds > 0)) return std::nullopt;
  return reads;
}

QString formatFlopsPerSecond(double flopsPerS) { return withSiPrefix(flopsPerS, QStringLiteral("FLOP/s")); }
QString formatBytesPerSecond(double bytesPerS) { return withSiPrefix(bytesPerS, QStringLiteral("B/s")); }

QString formatSeconds(double seconds) {
  if (seconds <= 0) return QStringLiteral("0 s");
  if (seconds < 1e-3) return QStringLiteral("%1 µs").arg(QString::number(seconds * 1e6, 'g', 3));
  if (seconds < 1.0) return QStringLiteral("%1 ms").arg(QString::number(seconds * 1e3, 'g', 3));
  return QStringLiteral("%1 s").arg(QString::number(seconds, 'g', 3));
}

}  // namespace iwb::ui
