// The data behind the roofline panel, with no pixels: the roofs (the machine's measured ones —
// read-only and copy bandwidth — and datasheet ones of known GPUs), and one point per (op kind, phase) at (arithmetic intensity,
// achieved FLOP/s) from the engine's profile snapshots, beside predicted points from the cost
// model. A table model too, so the panel lists the points and tests read them as data.
#pragma once

#include "iwb/engine/profile/kernel_record.h"
#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/profile/profile_aggregate.h"

#include <QAbstractTableModel>
#include <QList>
#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

namespace iwb::ui {

// A roof: performance is bounded by min(peak, bandwidth x intensity).
struct Roof {
  QString label;                  // "cpu, measured 2025-01-02", "H100 SXM (datasheet)"
  double bandwidthBytesPerS = 0;
  double peakFlops = 0;
  bool isMeasured = false;        // from a probe of this machine, not a datasheet

  double ridgePoint() const { return bandwidthBytesPerS > 0 ? peakFlops / bandwidthBytesPerS : 0; }
  // What an op of this intensity (FLOP/byte) can reach under this roof.
  double attainableFlops(double intensity) const;
};

// Datasheet roofs of GPUs to compare with (docs/ANCHORS: H100 SXM 3.35 TB/s, ~989 TFLOP/s dense
// bf16; H200 4.8 TB/s, same compute).
QList<Roof> datasheetRoofs();
// The measured roof: the probe's read-only bandwidth (what decoding's weight reads can reach;
// a copy's figure for a probe that predates it) under its f32 peak.
Roof roofFromProbe(const iwb::ProbeResult& probe);
// The same peak under the copy bandwidth (the better of STREAM copy and triad), drawn beside the
// read-only roof; nullopt when the probe has no read-only figure (the main roof is then the copy).
std::optional<Roof> copyRoofFromProbe(const iwb::ProbeResult& probe);
// The same bandwidth under the integer dot-product peak (VNNI): the ceiling of quantized
// kernels that multiply 8-bit values; nullopt when the probe did not measure one.
std::optional<Roof> int8RoofFromProbe(const iwb::ProbeResult& probe);

struct DecodeWeightReads {
  double bytes = 0;
  double seconds = 0;
};

enum class RooflineSource {
  LastSteps,  // the newest prefill step and the newest decode step
  Running,    // every profiled step since the last reset
};

struct RooflinePoint {
  iwb::OpKind kind = iwb::OpKind::Matmul;
  iwb::Phase phase = iwb::Phase::Decode;
  bool isPredicted = false;       // from the cost model (placed on the roof), not measured
  qint64 numCalls = 0;
  double flops = 0;
  double bytes = 0;
  double seconds = 0;             // measured; for a prediction the time the roof allows
  double intensity = 0;           // FLOP/byte
  double flopsPerS = 0;           // achieved (measured) or attainable (predicted)
  double roofFlopsPerS = 0;       // the measured roof above this intensity; 0 without a probe
  // Every call multiplied quantized weights (matmul, logits, experts), which the CPU kernels do
  // on int8 dot products: the roof above it is the int8 one where the probe measured it.
  bool isQuantized = false;
  QStringList shapes;             // distinct shapes of its calls, e.g. "1536x8960 Q4_K, 1 tok"

  QString opName() const;
  QString phaseName() const;
  // flopsPerS over the roof above it (0..1, more when the roof was measured low); 0 without a roof.
  double fractionOfRoof() const { return roofFlopsPerS > 0 ? flopsPerS / roofFlopsPerS : 0; }
  bool isPlottable() const { return intensity > 0 && flopsPerS > 0; }
};

class RooflineModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { OpColumn, PhaseColumn, SourceColumn, IntensityColumn, FlopsColumn, RoofColumn,
                TimeColumn, CallsColumn, ShapesColumn, NumColumns };

  explicit RooflineModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // The measured roof, from the device's newest probe; nullopt removes it.
  void setProbe(const std::optional<iwb::ProbeResult>& probe);
  const std::optional<Roof>& measuredRoof() const { return m_measuredRoof; }
  const std::optional<Roof>& measuredInt8Roof() const { return m_measuredInt8Roof; }
  const std::optional<Roof>& measuredCopyRoof() const { return m_measuredCopyRoof; }

  void setSource(RooflineSource source);
  RooflineSource source() const { return m_source; }

  // The newest snapshot from the engine; points follow it live.
  void setSnapshot(const iwb::ProfileSnapshot& snapshot);
  void clearMeasured();
  bool hasMeasured() const { return m_snapshot.has_value(); }
  qint64 numProfiledSteps() const { return m_snapshot ? m_snapshot->running_num_steps : 0; }

  // What the newest decode step read of its weights: the bytes of its matmuls, classifier and
  // experts and their kernels' time; nullopt before a decode step was profiled.
  std::optional<DecodeWeightReads> newestDecodeWeightReads() const;

  // Predicted kernel records (cost model, seconds = 0), of one or both phases, under `label`.
  void setPrediction(const std::vector<iwb::KernelRecord>& records, const QString& label);
  void clearPrediction();
  const QString& predictionLabel() const { return m_predictionLabel; }

  // Measured points first, then predicted ones; each in phase then op-kind order.
  const QList<RooflinePoint>& points() const { return m_points; }
  const RooflinePoint& point(int row) const { return m_points.at(row); }
  // The point of an op kind in a phase, measured or predicted; nullptr when there is none.
  const RooflinePoint* findPoint(iwb::OpKind kind, iwb::Phase phase, bool isPredicted) const;

  // The points as CSV (a header row, then one row per point; shapes joined by "; ").
  QString toCsv() const;

 signals:
  void roofsChanged();

 private:
  void rebuildPoints();
  void updateRoofFractions();

  std::optional<Roof> m_measuredRoof;
  std::optional<Roof> m_measuredInt8Roof;
  std::optional<Roof> m_measuredCopyRoof;
  RooflineSource m_source = RooflineSource::LastSteps;
  std::optional<iwb::ProfileSnapshot> m_snapshot;
  std::vector<iwb::KernelRecord> m_prediction;
  QString m_predictionLabel;
  QList<RooflinePoint> m_points;
};

// "1.23 GFLOP/s", "45.6 GB/s", "12.3 ms": SI prefixes for the panel and its tooltips.
QString formatFlopsPerSecond(double flopsPerS);
QString formatBytesPerSecond(double bytesPerS);
QString formatSeconds(double seconds);

}  // namespace iwb::ui
