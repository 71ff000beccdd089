// The Memory and Roofline tabs when the engine runs on a GPU, from synthetic values (no GPU is
// needed): device allocation rows and bars from a MemorySample with device figures, and the
// roofs switching to the newest probe of "cuda:0" when kernel records carry that device.
#include "worker/engine_controller.h"
#include "worker/measurement_values.h"
#include "iwb/engine/backend/cuda_scratch_estimate.h"
#include "iwb/engine/store/results_store.h"
#include "memory/memory_model.h"
#include "memory/memory_panel.h"
#include "roofline/machine_ceilings.h"
#include "roofline/roofline_model.h"
#include "roofline/roofline_panel.h"

#include <qcustomplot.h>

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace iwb::ui;

namespace {

constexpr qint64 kGiB = qint64(1) << 30;

iwb::ModelSummary summary() {
  iwb::ModelSummary s;
  s.name = "tiny";
  s.architecture = "llama";
  s.tensor_bytes = 1'000'000;
  s.hparams.context_length = 512;
  s.hparams.embedding_length = 64;
  s.hparams.feed_forward_length = 128;
  s.hparams.block_count = 2;
  s.hparams.head_count = 4;
  s.hparams.head_count_kv = 2;
  s.hparams.key_length = 16;
  s.hparams.value_length = 16;
  s.hparams.vocab_size = 100;
  s.totals_by_type["F16"] = {7, 500'000, 1'000'000};
  return s;
}

// A model loaded on cuda:0: what the engine's MemoryReport would say there.
MemorySample cudaSample() {
  MemorySample s;
  s.isValid = true;
  s.baselineAnonBytes = 100'000'000;
  s.residentAnonBytes = 180'000'000;  // +80 MB on the host (pinned buffers, CUDA runtime)
  s.residentBytes = 200'000'000;
  s.contextLength = 256;
  s.hasEngineReport = true;
  s.kvBytesPerPosition = 256;
  s.kvPositionsTotal = 4096;
  s.kvPositionsUsed = 300;
  s.kvPositionsCached = 16;
  s.kvPoolBytes = 1'048'576;
  s.deviceId = QStringLiteral("cuda:0");
  s.deviceWeightsBytes = 1'010'000;
  s.deviceKvPoolBytes = 1'048'576;
  s.deviceScratchBytes = 300'000;
  s.deviceWorkspaceBytes = 32 << 20;
  s.hostPinnedBytes = 2 << 20;
  s.deviceFreeBytes = 70 * kGiB;
  s.deviceTotalBytes = 80 * kGiB;
  s.deviceNumGraphs = 3;
  return s;
}

iwb::ProbeResult probe(const char* deviceId, double peakFlops, const char* date) {
  iwb::ProbeResult p;
  p.device_id = deviceId;
  p.device_name = std::string(deviceId) == "cpu" ? "Test CPU" : "Test GPU";
  p.date = date;
  p.copy_bytes_per_s = std::string(deviceId) == "cpu" ? 50e9 : 3000e9;
  p.peak_flops = peakFlops;
  p.peak_flops_kind = std::string(deviceId) == "cpu" ? "f32 FMA test" : "f16 GEMM cuBLAS";
  return p;
}

// A decode step whose one matmul ran on `device`.
iwb::ProfileSnapshot snapshotOn(iwb::DeviceRef device) {
  iwb::KernelRecord r;
  r.kind = iwb::OpKind::Matmul;
  r.phase = iwb::Phase::Decode;
  r.device = device;
  r.name = "attn_q";
  r.flops = 2e6;
  r.bytes = 1e6;
  r.seconds = 1e-6;
  iwb::ProfileBatch batch;
  batch.step_index = 1;
  batch.num_tokens = 1;
  batch.step_seconds = 2e-6;
  batch.kernels = {r};
  iwb::ProfileSnapshot snapshot;
  snapshot.last_step_index = 1;
  snapshot.num_batches = 1;
  snapshot.last_decode = batch;
  snapshot.last_steps = iwb::aggregate_records(batch.kernels);
  snapshot.running = snapshot.last_steps;
  snapshot.running_num_steps = 1;
  return snapshot;
}

// The memory chart's measured bar (key 2) in chart layer `layer` (bottom-up: weights, KV cache,
// scratch, measured heap, available), in GiB; -1 where that layer has no measured bar.
double measuredBar(const MemoryPanel& panel, int layer) {
  auto* bars = qobject_cast<QCPBars*>(panel.chart()->plottable(layer));
  const auto it = bars->data()->findBegin(2, false);
  return it != bars->data()->constEnd() && it->key == 2 ? it->value : -1.0;
}

}  // namespace

class TestCudaViews : public QObject {
  Q_OBJECT

 private slots:
  void memoryRowsShowDeviceAllocations();
  void memoryRowsOnTheCpuHaveNoDeviceSection();
  void memoryChartStacksDeviceAllocations();
  void memoryChartCountsWeightsReadIntoMemory();
  void estimateOnAGpuCountsItsScratch();
  void profiledDeviceComesFromTheRecords();
  void ceilingsFollowTheDevice();
  void rooflineSwitchesToGpuRoofs();
};

void TestCudaViews::memoryRowsShowDeviceAllocations() {
  MemoryModel model;
  model.setModelSummary(summary());
  model.setContext(256);
  const MemorySample s = cudaSample();
  QVERIFY(s.isOnCuda());
  model.setSample(s);
  QVERIFY(model.isLoaded());
  const auto* weights = model.findRow(QStringLiteral("Weights on cuda:0"));
  QVERIFY(weights);
  QCOMPARE(weights->measuredBytes, qint64(1'010'000));
  QCOMPARE(weights->estimateBytes, qint64(model.estimate()->weight_bytes));
  QCOMPARE(model.findRow(QStringLiteral("KV pool on cuda:0"))->measuredBytes, qint64(1'048'576));
  QVERIFY(model.findRow(QStringLiteral("KV pool on cuda:0"))->source.contains(QLocale().toString(4096)));
  QCOMPARE(model.findRow(QStringLiteral("KV cache in use"))->measuredBytes, qint64(300 * 256));
  QCOMPARE(model.findRow(QStringLiteral("Scratch on cuda:0"))->measuredBytes, qint64(300'000));
  QCOMPARE(model.findRow(QStringLiteral("cuBLAS workspace"))->measuredBytes, qint64(32 << 20));
  const auto* total = model.findRow(QStringLiteral("Engine total on cuda:0"));
  QVERIFY(total && total->isTotal);
  QCOMPARE(total->measuredBytes, qint64(1'010'000 + 1'048'576 + 300'000 + (32 << 20)));
  const auto* free = model.findRow(QStringLiteral("Free on cuda:0"));
  QVERIFY(free);
  QCOMPARE(free->measuredBytes, 70 * kGiB);
  QVERIFY2(free->source.contains(QStringLiteral("80.00 GiB")), qPrintable(free->source));
  QVERIFY(free->source.contains(QStringLiteral("3 decode-step CUDA graphs")));
  QCOMPARE(model.findRow(QStringLiteral("Host heap"))->measuredBytes, qint64(80'000'000));
  QCOMPARE(model.findRow(QStringLiteral("Pinned host buffers"))->measuredBytes, qint64(2 << 20));
  // The host-side rows that would describe a CPU run are not shown beside the device's.
  QVERIFY(!model.findRow(QStringLiteral("KV cache, scratch and heap")));
  QVERIFY(!model.findRow(QStringLiteral("Total")));
  QCOMPARE(model.findRow(QStringLiteral("Process resident (VmRSS)"))->measuredBytes, qint64(200'000'000));
}

// With a GPU chosen, the estimate's scratch is the CUDA backend's (cuda_scratch_estimate.h): with
// steps over 8 tokens an f16 copy of the largest weight and the cuBLAS workspace, which the
// fit banner then counts.
void TestCudaViews::estimateOnAGpuCountsItsScratch() {
  MemoryModel model;
  iwb::ModelSummary s = summary();
  s.hparams.vocab_size = 128256;  // a large output head: 128256 x 64 f16 = 16 MB
  model.setModelSummary(s);
  model.setContext(256);
  const uint64_t cpu_scratch = model.estimate()->scratch_bytes;
  iwb::ComputeDeviceInfo gpu;
  gpu.kind = iwb::ComputeDeviceKind::Cuda;
  gpu.id = "cuda:0";
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.total_memory_bytes = 80 * kGiB;
  gpu.free_memory_bytes = 79 * kGiB;
  model.setDevice(gpu);
  const uint64_t expected = iwb::estimate_cuda_scratch_bytes(s.hparams, iwb::EngineOptions{}.max_batch_tokens);
  QCOMPARE(model.estimate()->scratch_bytes, expected);
  QVERIFY(expected > cpu_scratch + (uint64_t{32} << 20));  // the cuBLAS workspace at least
  iwb::EngineOptions eight;
  eight.max_batch_tokens = 8;  // no cuBLAS path: no f16 weight copy
  model.setEngineOptions(eight);
  QCOMPARE(model.estimate()->scratch_bytes, iwb::estimate_cuda_scratch_bytes(s.hparams, 8));
  QVERIFY(model.estimate()->scratch_bytes < expected);
}

void TestCudaViews::memoryRowsOnTheCpuHaveNoDeviceSection() {
  MemoryModel model;
  model.setModelSummary(summary());
  model.setContext(256);
  MemorySample s = cudaSample();
  s.deviceId = QStringLiteral("cpu");
  QVERIFY(!s.isOnCuda());
  model.setSample(s);
  QVERIFY(!model.findRow(QStringLiteral("Weights on cuda:0")));
  QVERIFY(model.findRow(QStringLiteral("Weights")));
  QCOMPARE(model.findRow(QStringLiteral("KV cache"))->measuredBytes, qint64(1'048'576));
  QVERIFY(model.findRow(QStringLiteral("Total")));
}

void TestCudaViews::memoryChartStacksDeviceAllocations() {
  EngineController engine;
  MemoryPanel panel(&engine);
  panel.setModelSummary(summary());
  panel.setContext(256);
  panel.model()->setSample(cudaSample());
  // Layers bottom-up: weights, KV cache, scratch (+ cuBLAS workspace), measured heap, available.
  auto value = [&](int layer) { return measuredBar(panel, layer); };
  QCOMPARE(value(0), 1'010'000.0 / double(kGiB));
  QCOMPARE(value(1), 1'048'576.0 / double(kGiB));
  QCOMPARE(value(2), (300'000.0 + double(32 << 20)) / double(kGiB));
  QCOMPARE(value(3), -1.0);  // no host-heap bar on a GPU
}

// On the CPU, weights read into memory at load (the default load mode) are anonymous memory:
// the measured bar shows them as weights, and only the rest as KV cache, scratch and heap.
void TestCudaViews::memoryChartCountsWeightsReadIntoMemory() {
  EngineController engine;
  MemoryPanel panel(&engine);
  panel.setModelSummary(summary());
  panel.setContext(256);
  MemorySample s = cudaSample();
  s.deviceId = QStringLiteral("cpu");
  s.isValid = true;
  s.baselineAnonBytes = 50'000'000;
  s.residentAnonBytes = 51'500'000;  // 1,000,000 of weights and 500,000 of the engine's own
  s.baselineFileBytes = s.residentFileBytes = 7'000'000;
  s.weightsReadBytes = 1'000'000;
  panel.model()->setSample(s);
  auto value = [&](int layer) { return measuredBar(panel, layer); };
  QCOMPARE(value(0), 1'000'000.0 / double(kGiB));
  QCOMPARE(value(3), 500'000.0 / double(kGiB));
}

void TestCudaViews::profiledDeviceComesFromTheRecords() {
  QCOMPARE(profiledDeviceId(iwb::ProfileSnapshot{}), QString());
  QCOMPARE(profiledDeviceId(snapshotOn({iwb::ComputeDeviceKind::Cuda, 0})), QStringLiteral("cuda:0"));
  QCOMPARE(profiledDeviceId(snapshotOn({iwb::ComputeDeviceKind::Cuda, 1})), QStringLiteral("cuda:1"));
  QCOMPARE(profiledDeviceId(snapshotOn({})), QStringLiteral("cpu"));
}

void TestCudaViews::ceilingsFollowTheDevice() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("results.sqlite"));
  {
    auto store = iwb::ResultsStore::open(path.toStdString());
    QVERIFY2(store, store.error_message().c_str());
    QVERIFY((*store)->add_probe(probe("cpu", 1e12, "2025-01-01T00:00:00Z")));
    QVERIFY((*store)->add_probe(probe("cuda:0", 500e12, "2025-01-02T00:00:00Z")));
    QVERIFY((*store)->add_probe(probe("cuda:0", 700e12, "2025-01-03T00:00:00Z")));  // the newest
  }
  MachineCeilings ceilings(path);
  ceilings.reload();
  QCOMPARE(ceilings.deviceId(), QStringLiteral("cpu"));
  QVERIFY(ceilings.probe());
  QCOMPARE(ceilings.probe()->peak_flops, 1e12);

  QSignalSpy changed(&ceilings, &MachineCeilings::probeChanged);
  ceilings.setDeviceId(QStringLiteral("cuda:0"));
  QCOMPARE(changed.count(), 1);
  QVERIFY(ceilings.probe());
  QCOMPARE(ceilings.probe()->device_id, std::string("cuda:0"));
  QCOMPARE(ceilings.probe()->peak_flops, 700e12);
  QCOMPARE(ceilings.ceilings().peak_flops, 700e12);
  ceilings.setDeviceId(QStringLiteral("cuda:0"));  // unchanged: no reload
  QCOMPARE(changed.count(), 1);

  ceilings.setDeviceId(QStringLiteral("cuda:1"));  // never probed: no roofs, no error
  QVERIFY(!ceilings.probe());
  QVERIFY(ceilings.errorMessage().isEmpty());
}

void TestCudaViews::rooflineSwitchesToGpuRoofs() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("results.sqlite"));
  {
    auto store = iwb::ResultsStore::open(path.toStdString());
    QVERIFY2(store, store.error_message().c_str());
    QVERIFY((*store)->add_probe(probe("cpu", 1e12, "2025-01-01T00:00:00Z")));
    QVERIFY((*store)->add_probe(probe("cuda:0", 700e12, "2025-01-03T00:00:00Z")));
  }
  EngineController engine;
  MachineCeilings ceilings(path);
  ceilings.reload();
  RooflinePanel panel(&engine, &ceilings);
  QVERIFY(panel.model()->measuredRoof());
  QVERIFY(panel.model()->measuredRoof()->label.contains(QStringLiteral("cpu")));

  // A decode matmul of 2 FLOP/byte that ran on cuda:0: under the GPU's roof, min(700 TFLOP/s,
  // 2 x 3000 GB/s) = 6 TFLOP/s, not the CPU's min(1 TFLOP/s, 2 x 50 GB/s) = 100 GFLOP/s.
  emit engine.profileSnapshotReady(snapshotOn({iwb::ComputeDeviceKind::Cuda, 0}));
  QCOMPARE(ceilings.deviceId(), QStringLiteral("cuda:0"));
  QVERIFY(panel.model()->measuredRoof());
  QVERIFY2(panel.model()->measuredRoof()->label.contains(QStringLiteral("cuda:0")),
           qPrintable(panel.model()->measuredRoof()->label));
  const auto* point = panel.model()->findPoint(iwb::OpKind::Matmul, iwb::Phase::Decode, false);
  QVERIFY(point);
  QCOMPARE(point->flopsPerS, 2e12);
  QCOMPARE(point->roofFlopsPerS, 6e12);

  // A CPU run afterwards brings the CPU's roofs back.
  emit engine.profileSnapshotReady(snapshotOn({}));
  QCOMPARE(ceilings.deviceId(), QStringLiteral("cpu"));
  QCOMPARE(panel.model()->findPoint(iwb::OpKind::Matmul, iwb::Phase::Decode, false)->roofFlopsPerS, 100e9);
}

QTEST_MAIN(TestCudaViews)
#include "test_cuda_views.moc"
