// Serving metrics with hand-computed values (percentile method, latencies, rates, MBU, MFU),
// and the aggregation and decimation of kernel records for the GUI.
#include "iwb/engine/profile/metrics.h"
#include "iwb/engine/profile/op_costs.h"
#include "iwb/engine/profile/profile_aggregate.h"
#include "iwb/engine/runtime/engine.h"

#include <QtTest>

using namespace iwb;

namespace {

bool near(double a, double b) { return qAbs(a - b) <= 1e-12 * qMax(1.0, qAbs(b)); }

KernelRecord timed(KernelRecord r, Phase phase, double seconds) {
  r.phase = phase;
  r.seconds = seconds;
  return r;
}

}  // namespace

class TestMetrics : public QObject {
  Q_OBJECT

 private slots:
  // Linear interpolation between closest ranks: h = (n-1) p/100.
  void percentileMethod() {
    const std::vector<double> v = {4, 1, 3, 2};  // sorted: 1 2 3 4
    QCOMPARE(percentile(v, 0), 1.0);
    QCOMPARE(percentile(v, 100), 4.0);
    QVERIFY(near(percentile(v, 50), 2.5));   // h = 1.5: 2 + 0.5*(3-2)
    QVERIFY(near(percentile(v, 90), 3.7));   // h = 2.7: 3 + 0.7*(4-3)
    QVERIFY(near(percentile(v, 99), 3.97));  // h = 2.97
    QVERIFY(near(percentile(v, 25), 1.75));  // h = 0.75: 1 + 0.75*(2-1)
    QCOMPARE(percentile(std::vector<double>{7}, 90), 7.0);
    QCOMPARE(percentile(std::vector<double>{}, 50), 0.0);
    QCOMPARE(percentile(v, 150), 4.0);  // clamped
  }

  void latencySummary() {
    const std::vector<double> v = {0.3, 0.1, 1.0, 0.2, 0.4};  // sorted: .1 .2 .3 .4 1.0
    const LatencySummary s = summarize_latencies(v);
    QCOMPARE(s.count, int64_t(5));
    QVERIFY(near(s.mean, 0.4));   // 2.0 / 5
    QVERIFY(near(s.p50, 0.3));    // h = 2
    QVERIFY(near(s.p90, 0.76));   // h = 3.6: 0.4 + 0.6*(1.0-0.4)
    QVERIFY(near(s.p99, 0.976));  // h = 3.96: 0.4 + 0.96*0.6
    QCOMPARE(s.min, 0.1);
    QCOMPARE(s.max, 1.0);
    const std::vector<double> gaps = inter_token_latencies(std::vector<double>{0.5, 0.6, 0.75, 0.95});
    QCOMPARE(gaps.size(), size_t(3));
    QVERIFY(near(gaps[0], 0.1) && near(gaps[1], 0.15) && near(gaps[2], 0.2));
    QVERIFY(inter_token_latencies(std::vector<double>{0.5}).empty());
  }

  void utilization() {
    // 1 GB per token at 20 tokens/s over 50 GB/s: 0.4.
    QVERIFY(near(*model_bandwidth_utilization(1e9, 20, 50e9), 0.4));
    // 3 GFLOP per token at 60 tokens/s over 400 GFLOP/s: 0.45.
    QVERIFY(near(*model_flops_utilization(3e9, 60, 400e9), 0.45));
    QVERIFY(!model_bandwidth_utilization(1e9, 20, 0));
    QVERIFY(!model_flops_utilization(1e9, 20, -1));
    ProbeResult p;
    p.copy_bytes_per_s = 30e9;
    p.triad_bytes_per_s = 40e9;
    p.peak_flops = 500e9;
    const Ceilings c = ceilings_from_probe(p);
    QCOMPARE(c.bandwidth_bytes_per_s, 40e9);  // no read-only figure: the better of copy and triad
    QCOMPARE(c.peak_flops, 500e9);
    // Decode only reads: with a read-only figure, that is the roof (MBU divides by it).
    p.read_bytes_per_s = 55e9;
    QCOMPARE(ceilings_from_probe(p).bandwidth_bytes_per_s, 55e9);
    QCOMPARE(p.stream_bytes_per_s(), 40e9);
    QCOMPARE(p.ridge_point(), 500e9 / 55e9);
  }

  // A run that read faster than the stored roof, from more bytes than the caches hold, says the
  // probe was low; one that fits in the caches, or beats the roof by less than 5%, says nothing.
  void bandwidthAboveRoof() {
    constexpr uint64_t kCache = 32ull << 20;
    // 1 GB a token at 24 tokens/s over a 20 GB/s roof: 24 GB/s, 1.2x.
    QVERIFY(near(*bandwidth_above_roof(1e9, 24, 20e9, kCache), 24e9));
    QVERIFY(!bandwidth_above_roof(1e9, 20.9, 20e9, kCache));  // within 5%: noise
    QVERIFY(bandwidth_above_roof(1e9, 21.1, 20e9, kCache));
    QVERIFY(!bandwidth_above_roof(1e9, 18, 20e9, kCache));     // under the roof
    QVERIFY(!bandwidth_above_roof(60e6, 1000, 20e9, kCache));  // 60 MB: two caches' worth
    QVERIFY(bandwidth_above_roof(70e6, 1000, 20e9, kCache));   // 70 MB: streams
    QVERIFY(!bandwidth_above_roof(300e6, 100, 20e9, 0));       // cache unknown: 512 MiB
    QVERIFY(bandwidth_above_roof(600e6, 100, 20e9, 0));
    QVERIFY(!bandwidth_above_roof(1e9, 24, 0, kCache));  // no roof
  }

  void requestMetrics() {
    RequestFinished f;
    f.num_prompt_tokens = 120;
    f.num_reused_prompt_tokens = 20;  // 100 computed
    f.queued_seconds = 0.1;
    f.prompt_seconds = 0.4;
    f.token_seconds = {0.5, 0.6, 0.75, 0.95};
    const RequestTiming t = request_timing(f);
    QCOMPARE(t.num_prompt_tokens, 100);
    GenerationCost cost;
    cost.prefill = {4e10, 2e9, 0};  // 4e8 FLOP and 2e7 bytes per prompt token
    cost.decode = {6e9, 3e9, 0};    // three decode steps: 2e9 FLOP and 1e9 bytes each
    cost.num_decode_steps = 3;
    const Ceilings c{50e9, 200e9};
    const RequestMetrics m = compute_request_metrics(t, &cost, c);
    QVERIFY(near(m.ttft_seconds, 0.5));
    QVERIFY(near(m.prompt_tokens_per_s, 250));           // 100 / 0.4
    QVERIFY(near(m.generation_tokens_per_s, 3 / 0.45));  // 3 gaps over 0.95 - 0.5
    QCOMPARE(m.inter_token.count, int64_t(3));
    QVERIFY(near(m.inter_token.p50, 0.15));
    QVERIFY(near(m.inter_token.p90, 0.19));                 // h = 1.8: 0.15 + 0.8*0.05
    QVERIFY(near(*m.prefill_mfu, 0.5));                     // 4e8 * 250 / 2e11
    QVERIFY(near(*m.prefill_mbu, 0.1));                     // 2e7 * 250 / 5e10
    QVERIFY(near(*m.decode_mbu, 1e9 * (3 / 0.45) / 50e9));  // 0.1333...
    QVERIFY(near(*m.decode_mfu, 2e9 * (3 / 0.45) / 200e9));
    const RequestMetrics none = compute_request_metrics(t, nullptr, c);
    QVERIFY(!none.decode_mbu && !none.prefill_mfu);
    QVERIFY(near(none.generation_tokens_per_s, 3 / 0.45));
    const RequestMetrics unprobed = compute_request_metrics(t, &cost, Ceilings{});
    QVERIFY(!unprobed.decode_mbu && !unprobed.prefill_mfu);

    // Quantized weights: MFU against the int8 dot-product peak where the probe measured one,
    // else still against the float peak; MBU does not change.
    cost.int8_dot_products = true;
    const RequestMetrics int8 = compute_request_metrics(t, &cost, Ceilings{50e9, 200e9, 800e9});
    QVERIFY(near(*int8.prefill_mfu, 0.125));  // 4e8 * 250 / 8e11
    QVERIFY(near(*int8.decode_mfu, 2e9 * (3 / 0.45) / 800e9));
    QVERIFY(near(*int8.decode_mbu, *m.decode_mbu));
    QVERIFY(near(*compute_request_metrics(t, &cost, c).prefill_mfu, 0.5));
    ProbeResult int8_probe;
    int8_probe.read_bytes_per_s = 1e9;
    int8_probe.peak_flops = 2e9;
    int8_probe.peak_int8_ops = 8e9;
    QCOMPARE(ceilings_from_probe(int8_probe).compute_roof(true), 8e9);
  }

  void stepUtilization() {
    ProfileBatch b;
    b.step_seconds = 0.01;
    b.kernels.push_back(timed(op_costs::add("x", 0, 1, 1000), Phase::Decode, 0.002));  // 1000 flops, 12000 bytes
    b.kernels.push_back(timed(op_costs::add("y", 0, 1, 1000), Phase::Decode, 0.003));
    const StepUtilization u = step_utilization(b, {1e6, 1e6});
    QVERIFY(near(u.kernel_seconds, 0.005));
    QVERIFY(near(u.flops_per_s, 2000 / 0.01));
    QVERIFY(near(u.bytes_per_s, 24000 / 0.01));
    QVERIFY(near(*u.mbu, 2.4e6 / 1e6));
    QVERIFY(near(*u.mfu, 2e5 / 1e6));

    // A step whose products are mostly quantized: MFU against the int8 peak; F16 ones: the float peak.
    ProfileBatch q;
    q.step_seconds = 0.01;
    q.kernels.push_back(op_costs::matmul(OpKind::Matmul, "ffn_up", 0, GgmlType::Q4_0, 64, 128, 1, false));
    q.kernels.push_back(op_costs::add("x", 0, 1, 1000));
    QVERIFY(int8_dot_products_dominate(q.kernels));
    const double flops = q.kernels[0].flops + q.kernels[1].flops;
    QVERIFY(near(*step_utilization(q, {1e6, 1e6, 4e6}).mfu, flops / 0.01 / 4e6));
    q.kernels[0] = op_costs::matmul(OpKind::Matmul, "ffn_up", 0, GgmlType::F16, 64, 128, 1, false);
    QVERIFY(!int8_dot_products_dominate(q.kernels));
    QVERIFY(near(*step_utilization(q, {1e6, 1e6, 4e6}).mfu, flops / 0.01 / 1e6));
  }

  void aggregation() {
    std::vector<KernelRecord> r;
    r.push_back(
        timed(op_costs::matmul(OpKind::Matmul, "attn_q", 0, GgmlType::F16, 64, 64, 1, false), Phase::Decode, 1e-3));
    r.push_back(
        timed(op_costs::matmul(OpKind::Matmul, "ffn_up", 0, GgmlType::F16, 64, 128, 1, false), Phase::Decode, 3e-3));
    r.push_back(
        timed(op_costs::matmul(OpKind::Matmul, "attn_q", 1, GgmlType::F16, 64, 64, 4, false), Phase::Prefill, 2e-3));
    r.push_back(timed(op_costs::add("attn_residual", 0, 1, 64), Phase::Decode, 1e-4));
    const auto by_kind = aggregate_records(r);
    QCOMPARE(by_kind.size(), size_t(3));
    // Prefill first, then decode by kind (matmul before add).
    QCOMPARE(by_kind[0].phase, Phase::Prefill);
    QCOMPARE(by_kind[1].kind, OpKind::Matmul);
    QCOMPARE(by_kind[1].phase, Phase::Decode);
    QCOMPARE(by_kind[1].count, int64_t(2));
    // flops 2*64*64 + 2*64*128 = 8192 + 16384 = 24576 over 4 ms.
    QCOMPARE(by_kind[1].flops, 24576.0);
    QVERIFY(near(by_kind[1].flops_per_s(), 24576 / 4e-3));
    // bytes (8192 + 256 + 256) + (16384 + 256 + 512) = 8704 + 17152 = 25856.
    QCOMPARE(by_kind[1].bytes, 25856.0);
    QVERIFY(near(by_kind[1].intensity(), 24576.0 / 25856.0));
    QCOMPARE(by_kind[1].name, std::string("matmul"));
    QCOMPARE(by_kind[2].kind, OpKind::Add);

    const auto by_name = aggregate_records(r, AggregateBy::Name);
    QCOMPARE(by_name.size(), size_t(4));  // prefill attn_q; decode attn_q, ffn_up, attn_residual

    RunningAggregate running;
    ProfileBatch b1;
    b1.kernels = r;
    b1.step_seconds = 0.01;
    running.add(b1);
    running.add(b1);
    running.add(ProfileBatch{});  // an unprofiled step adds nothing
    QCOMPARE(running.num_steps(), int64_t(2));
    QVERIFY(near(running.step_seconds(), 0.02));
    QCOMPARE(running.snapshot()[1].count, int64_t(4));
    running.reset();
    QVERIFY(running.snapshot().empty());
  }

  void decimation() {
    ProfileDecimator d(0.1);
    ProfileBatch decode;
    decode.phase = Phase::Decode;
    decode.kernels.push_back(timed(op_costs::add("a", 0, 1, 8), Phase::Decode, 1e-6));
    ProfileBatch prefill = decode;
    prefill.phase = Phase::Prefill;
    prefill.kernels[0].phase = Phase::Prefill;

    prefill.step_index = 1;
    auto s1 = d.add(prefill, 10.0);  // the first batch shows at once
    QVERIFY(s1.has_value());
    QCOMPARE(s1->num_batches, int64_t(1));
    QVERIFY(s1->last_prefill && !s1->last_decode);
    decode.step_index = 2;
    QVERIFY(!d.add(decode, 10.03).has_value());
    decode.step_index = 3;
    QVERIFY(!d.add(decode, 10.06).has_value());
    QVERIFY(!d.add(ProfileBatch{}, 10.07).has_value());
    decode.step_index = 4;
    auto s2 = d.add(decode, 10.11);
    QVERIFY(s2.has_value());
    QCOMPARE(s2->num_batches, int64_t(3));
    QCOMPARE(s2->last_step_index, uint64_t(4));
    QVERIFY(s2->last_prefill && s2->last_decode);  // the prefill stays until a newer one
    QCOMPARE(s2->running_num_steps, int64_t(4));
    QCOMPARE(s2->last_steps.size(), size_t(2));  // one add per phase
    QCOMPARE(s2->running[1].count, int64_t(3));  // decode adds
    QVERIFY(!d.flush(10.12).has_value());        // nothing new
    decode.step_index = 5;
    QVERIFY(!d.add(decode, 10.13).has_value());
    auto s3 = d.flush(10.14);
    QVERIFY(s3.has_value());
    QCOMPARE(s3->num_batches, int64_t(1));
    d.reset();
    QVERIFY(!d.flush(11).has_value());
  }
};

QTEST_GUILESS_MAIN(TestMetrics)
#include "test_metrics.moc"
