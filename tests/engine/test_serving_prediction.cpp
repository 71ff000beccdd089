// The Serving tab's pure functions: the knee of a latency–throughput sweep (both rules, on
// made-up curves whose knee is read off by eye), the roofline timing of kernel records, and the
// batched-decode throughput bound against a hand computation for Llama 3 8B on an H100 SXM.
#include "iwb/engine/profile/decode_prediction.h"
#include "iwb/engine/profile/gpu_datasheets.h"
#include "iwb/engine/remote/serve_knee.h"

#include <QtTest>

#include <cstring>

using namespace iwb;
using iwb::remote::find_knee;
using iwb::remote::GoodputSlo;
using iwb::remote::KneeRule;
using iwb::remote::LoadCurvePoint;

namespace {

std::vector<LoadCurvePoint> curve(const std::vector<double>& throughput, const std::vector<double>& ttft,
                                  const std::vector<double>& itl) {
  std::vector<LoadCurvePoint> out;
  for (size_t i = 0; i < throughput.size(); ++i) out.push_back({throughput[i], ttft[i], itl[i], itl[i]});
  return out;
}

ModelShape preset(const char* name) {
  auto shape = model_shape_preset(name, GgmlType::F16);
  if (!shape) qFatal("%s", shape.error_message().c_str());
  return *shape;
}

}  // namespace

class TestServingPrediction : public QObject {
  Q_OBJECT

 private slots:
  void kneeUnderSloIsTheBestPointBeforeTheFirstBreach() {
    // p99 TTFT breaks 100 ms at the fourth point; the fifth is back under it but comes after
    // the breach, so it does not count. The best before: the third (250 tok/s).
    const auto points = curve({100, 180, 250, 260, 300}, {20, 40, 90, 150, 80}, {5, 6, 7, 8, 9});
    GoodputSlo slo;
    slo.ttft_ms = 100;
    const auto knee = find_knee(points, slo);
    QVERIFY(knee);
    QCOMPARE(knee->index, size_t(2));
    QCOMPARE(knee->rule, KneeRule::WithinSlo);
    // A TPOT SLO of 7.5 ms is broken at the fourth point too.
    GoodputSlo tpot;
    tpot.tpot_ms = 7.5;
    QCOMPARE(find_knee(points, tpot)->index, size_t(2));
    // Every point within the SLOs: the best one (here the last).
    GoodputSlo loose;
    loose.ttft_ms = 1000;
    QCOMPARE(find_knee(points, loose)->index, size_t(4));
  }

  void noKneeWhenTheFirstPointBreaksTheSlo() {
    GoodputSlo slo;
    slo.tpot_ms = 4;
    QVERIFY(!find_knee(curve({100, 180}, {20, 40}, {5, 6}), slo));
    QVERIFY(!find_knee({}, slo));
  }

  void kneeWithoutSloIsWhereThroughputStallsAndLatencyJumps() {
    // 280 -> 300 tok/s is +7% (< 10%) while p99 ITL 12 -> 20 ms is +67% (> 50%): the knee is
    // the point before, 280 tok/s.
    const auto points = curve({100, 190, 280, 300, 305}, {30, 32, 35, 40, 90}, {10, 11, 12, 20, 40});
    const auto knee = find_knee(points, {});
    QVERIFY(knee);
    QCOMPARE(knee->index, size_t(2));
    QCOMPARE(knee->rule, KneeRule::Saturation);
    // p99 TTFT jumping (+100%) counts as well as ITL.
    QCOMPARE(find_knee(curve({100, 105}, {40, 80}, {10, 10}), {})->index, size_t(0));
  }

  void noKneeWhileTheCurveKeepsScaling() {
    // Throughput nearly doubles each time: latency growth alone is no knee.
    QVERIFY(!find_knee(curve({100, 190, 360}, {10, 20, 40}, {5, 10, 20}), {}));
    // Throughput flat but latency steady: not a knee either (a server limited elsewhere).
    QVERIFY(!find_knee(curve({100, 101, 102}, {10, 11, 12}, {5, 5.5, 6}), {}));
    QVERIFY(!find_knee(curve({100}, {10}, {5}), {}));
  }

  void rooflineSecondsTakesTheSlowerRoofPerKernel() {
    // Roofs: 1 TB/s and 100 TFLOP/s. Kernel a: 1e12 FLOPs (10 ms) and 1e9 bytes (1 ms) -> 10 ms.
    // Kernel b: 1e9 FLOPs (0.01 ms) and 1e10 bytes (10 ms) -> 10 ms. Sum 20 ms.
    KernelRecord a, b;
    a.flops = 1e12;
    a.bytes = 1e9;
    b.flops = 1e9;
    b.bytes = 1e10;
    const auto seconds = roofline_seconds({a, b}, {1e12, 1e14});
    QVERIFY(seconds);
    QVERIFY(qAbs(*seconds - 0.020) < 1e-12);
    QVERIFY(!roofline_seconds({a}, {0, 1e14}));
    QVERIFY(!roofline_seconds({a}, {1e12, -1}));
  }

  void oneSequenceIsPredictStepOfOneToken() {
    const ModelShape shape = preset("qwen2.5-0.5b");
    auto batched = batched_decode_records(shape, 1, 300);
    auto single = predict_step(shape, {Phase::Decode, 1, 300, 0, true, 1});
    QVERIFY(batched && single);
    QCOMPARE(batched->size(), single->size());
    for (size_t i = 0; i < batched->size(); ++i) {
      QCOMPARE((*batched)[i].flops, (*single)[i].flops);
      QCOMPARE((*batched)[i].bytes, (*single)[i].bytes);
    }
  }

  void eachSequenceReadsItsOwnCache() {
    // Eight sequences: eight times one sequence's attention traffic, weights read once.
    const ModelShape shape = preset("qwen2.5-0.5b");
    auto one = batched_decode_records(shape, 1, 500);
    auto eight = batched_decode_records(shape, 8, 500);
    QVERIFY(one && eight);
    for (size_t i = 0; i < one->size(); ++i) {
      const KernelRecord& r1 = (*one)[i];
      const KernelRecord& r8 = (*eight)[i];
      if (r1.kind == OpKind::Attention) {
        QCOMPARE(r8.flops, 8 * r1.flops);
        QCOMPARE(r8.bytes, 8 * r1.bytes);
      } else if (r1.kind == OpKind::Matmul && std::strcmp(r1.name, "ffn_down") == 0) {
        QCOMPARE(r8.flops, 8 * r1.flops);     // 2 x 8 tokens x in x out
        QVERIFY(r8.bytes < 1.05 * r1.bytes);  // the weight dominates; f32 activations add ~2%
      }
    }
    QVERIFY(!batched_decode_records(shape, 0, 10));
    QVERIFY(!batched_decode_records(shape, 1, -1));
  }

  void llama3EightSequencesOnH100MatchesTheHandComputation() {
    // Llama 3 8B, F16, 8 sequences at context 1024, H100 SXM (3.35 TB/s, 989 TFLOP/s).
    // Weights read per step: per layer q 4096x4096 + k, v 4096x1024 + o 4096x4096 + gate, up,
    // down 3 x 4096x14336 = 218,103,808 parameters; x 32 layers = 6,979,321,856; the classifier
    // 128,256 x 4096 = 525,336,576 (the untied embedding table is only gathered: 8 rows).
    // 7,504,658,432 parameters x 2 bytes = 15,009,316,864 bytes.
    // KV cache read: per sequence and layer 1025 positions x 8 KV heads x (128 + 128) x 2 bytes
    // = 4,198,400 bytes; x 32 layers x 8 sequences = 1,074,790,400 bytes.
    // Step: (15,009,316,864 + 1,074,790,400) / 3.35e12 = 4.8012 ms (the FLOPs, 2 x 7.5e9 x 8 =
    // 0.12 TFLOP, take 0.12 ms at 989 TFLOP/s: memory wins) -> 8 / 4.8012 ms = 1666 tokens/s.
    const GpuDatasheet* h100 = find_gpu_datasheet("H100 SXM");
    QVERIFY(h100);
    const auto p =
        predict_decode_throughput(preset("llama-3-8b"), 8, 1024, {h100->bandwidth_bytes_per_s, h100->peak_flops});
    QVERIFY2(p, p.error_message().c_str());
    const double hand_bytes = 15009316864.0 + 1074790400.0;
    const double hand_tokens_per_s = 8 / (hand_bytes / 3.35e12);
    // f32 activations (~0.5 MB per token and layer), norms and the logits add about 1.2%.
    QVERIFY2(p->bytes > hand_bytes && p->bytes < 1.02 * hand_bytes, qPrintable(QString::number(p->bytes)));
    QVERIFY2(p->tokens_per_s < hand_tokens_per_s && p->tokens_per_s > 0.98 * hand_tokens_per_s,
             qPrintable(QString::number(p->tokens_per_s)));
    QVERIFY(p->memory_bound_fraction > 0.99);
    QCOMPARE(p->num_sequences, int64_t(8));
  }

  void throughputGrowsWithConcurrencyUntilTheComputeRoof() {
    const ModelShape shape = preset("llama-3.2-1b");
    const DeviceRoofs roofs{3.35e12, 989e12};
    double previous = 0;
    for (int64_t c : {1, 2, 4, 8, 16, 32}) {
      const auto p = predict_decode_throughput(shape, c, 128, roofs);
      QVERIFY(p);
      QVERIFY(p->tokens_per_s > previous);
      previous = p->tokens_per_s;
    }
    // Never above the compute roof: c tokens x 2 FLOPs per parameter (~1.24e9 parameters
    // through the matrices and classifier).
    const auto big = predict_decode_throughput(shape, 4096, 16, roofs);
    QVERIFY(big);
    QVERIFY(big->tokens_per_s < 989e12 / (2 * 1.2e9));
  }

  void datasheetTableHasEveryGpuWithPositiveRoofs() {
    for (const char* name :
         {"H100 SXM", "H100 PCIe", "H200 SXM", "A100 80GB SXM", "L40S", "RTX 4090", "A10G", "MI300X"}) {
      const GpuDatasheet* g = find_gpu_datasheet(name);
      QVERIFY2(g, name);
      QVERIFY(g->bandwidth_bytes_per_s > 1e11 && g->peak_flops > 1e13);
    }
    QCOMPARE(find_gpu_datasheet("H100 SXM")->bandwidth_bytes_per_s, 3.35e12);
    QVERIFY(!find_gpu_datasheet("no such GPU"));
    QCOMPARE(mean_decode_context(128, 64), int64_t(160));
  }
};

QTEST_GUILESS_MAIN(TestServingPrediction)
#include "test_serving_prediction.moc"
