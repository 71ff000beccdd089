// GPU token selection against the CPU sampler: argmax exactly (ties, infinities, NaN), and
// top-k / top-p / min-p / temperature draws with fixed uniforms against Sampler::candidates and
// the same inverse-CDF draw; top_k = 1 equals argmax. Skips, saying why, without a CUDA device.
#include "cuda_test_support.h"

#include "iwb/engine/sampling/sampler.h"
#include "iwb/kernels/cuda/sampling_cuda.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

using namespace iwb;
using iwb::test::DeviceBuffer;

namespace {

// The CPU rule: Sampler's candidates (penalties off) and its draw with uniform u. Also returns
// how close u lies to a cumulative boundary, where float rounding may legitimately differ.
int32_t cpu_draw(const std::vector<float>& logits, const SamplingRowParams& p, float u, double* boundary_distance) {
  SamplingParams params;
  params.temperature = p.temperature;
  params.top_k = p.top_k;
  params.top_p = p.top_p;
  params.min_p = p.min_p;
  params.repeat_penalty = 1.0f;
  params.frequency_penalty = params.presence_penalty = 0.0f;
  const std::vector<TokenProb> c = Sampler(params).candidates(logits, {});
  *boundary_distance = INFINITY;
  if (c.empty()) return -1;
  double cumulative = 0;
  int32_t chosen = c.back().id;
  bool is_chosen = false;
  for (const TokenProb& t : c) {
    cumulative += t.prob;
    *boundary_distance = std::min(*boundary_distance, std::fabs(static_cast<double>(u) - cumulative));
    if (!is_chosen && static_cast<double>(u) < cumulative) {
      chosen = t.id;
      is_chosen = true;
    }
  }
  return chosen;
}

}  // namespace

class TestCudaSampling : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    const QString reason = iwb::test::cuda_unavailable_reason();
    if (!reason.isEmpty()) QSKIP(qPrintable(QStringLiteral("CUDA sampling not tested: %1").arg(reason)));
  }

  void argmax_matches_cpu() {
    const int64_t vocab = 151936, rows = 5;
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    for (float& l : logits) l = normal(rng);
    float* row1 = logits.data() + vocab;  // ties at the maximum: the lowest index wins
    row1[90000] = row1[70000] = row1[150000] = 100.0f;
    float* row2 = logits.data() + 2 * vocab;  // -inf everywhere but one
    std::fill(row2, row2 + vocab, -INFINITY);
    row2[vocab - 1] = -5.0f;
    float* row3 = logits.data() + 3 * vocab;  // +inf wins, as on the CPU
    row3[12345] = INFINITY;
    std::vector<int32_t> expected;
    for (int64_t r = 0; r < rows; ++r) {
      expected.push_back(argmax(std::span<const float>(logits.data() + r * vocab, static_cast<size_t>(vocab))));
    }
    float* row4 = logits.data() + 4 * vocab;  // NaN never wins (the CPU's max_element is undefined there)
    row4[0] = NAN;
    row4[500] = NAN;
    expected[4] = argmax(std::span<const float>(row4 + 1, static_cast<size_t>(vocab - 1))) + 1;
    if (expected[4] == 500) QSKIP("the random row put its maximum under a NaN");

    DeviceBuffer<float> d_logits(logits);
    DeviceBuffer<int32_t> d_tokens(static_cast<size_t>(rows));
    CUDA_VERIFY(argmax_rows_cuda(d_logits.get(), rows, vocab, d_tokens.get(), nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    QCOMPARE(d_tokens.download(), expected);
    QCOMPARE(expected[1], 70000);
  }

  void sampling_matches_cpu_data() {
    QTest::addColumn<int>("vocab");
    QTest::newRow("qwen vocabulary") << 151936;
    QTest::newRow("gpt-2 vocabulary") << 50257;
    QTest::newRow("1000") << 1000;
    QTest::newRow("fewer tokens than k") << 7;
  }

  void sampling_matches_cpu() {
    QFETCH(int, vocab);
    const std::vector<SamplingRowParams> settings = {
        {0.8f, 40, 0.95f, 0.05f}, {1.0f, 128, 1.0f, 0.0f}, {0.5f, 1, 0.9f, 0.0f}, {1.3f, 7, 0.5f, 0.1f},
        {0.0f, 40, 0.95f, 0.05f}, {2.0f, 100, 0.99f, 0.0f}, {0.7f, 64, 1.0f, 0.2f}, {1.0f, 20, 0.3f, 0.0f}};
    std::mt19937 rng(static_cast<uint32_t>(vocab));
    std::normal_distribution<float> normal(0.0f, 2.5f);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    int mismatches_at_boundaries = 0;
    for (int round = 0; round < 6; ++round) {
      const auto rows = static_cast<int64_t>(settings.size());
      std::vector<float> logits(static_cast<size_t>(rows * vocab));
      for (float& l : logits) l = normal(rng);
      if (vocab > 1000) {
        // Ties: 300 equal logits at the top of one row and straddling the top-k threshold of another.
        for (int i = 0; i < 300; ++i) logits[static_cast<size_t>(vocab) * 1 + static_cast<size_t>(i * 97 % vocab)] = 9.0f;
        std::vector<float> sorted(logits.begin(), logits.begin() + vocab);
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        const float straddling = sorted[35];  // row 0 keeps top_k = 40: 5 of these ~30 ties get in
        for (int i = 0; i < 30; ++i) logits[static_cast<size_t>(i * 389 % vocab)] = straddling;
        logits[static_cast<size_t>(vocab) * 3 + 17] = -INFINITY;
        logits[static_cast<size_t>(vocab) * 3 + 18] = NAN;
      }
      std::vector<float> uniforms(static_cast<size_t>(rows));
      for (float& u : uniforms) u = uniform(rng);
      DeviceBuffer<float> d_logits(logits), d_uniforms(uniforms);
      DeviceBuffer<SamplingRowParams> d_params(settings);
      DeviceBuffer<int32_t> d_tokens(static_cast<size_t>(rows));
      CUDA_VERIFY(d_tokens.poison());
      SampleCudaArgs args{d_logits.get(), rows, vocab, d_params.get(), d_uniforms.get(), d_tokens.get()};
      CUDA_VERIFY(sample_rows_cuda(args, nullptr));
      CUDA_VERIFY(cudaDeviceSynchronize());
      const std::vector<int32_t> got = d_tokens.download();
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
        double distance = 0;
        const int32_t expected = cpu_draw(row, settings[static_cast<size_t>(r)], uniforms[static_cast<size_t>(r)], &distance);
        if (got[static_cast<size_t>(r)] == expected) continue;
        // Only a uniform within rounding of a cumulative boundary may pick the neighbour.
        QVERIFY2(distance < 1e-5, qPrintable(QStringLiteral("round %1 row %2: GPU %3, CPU %4 (u %5)")
                                                 .arg(round).arg(r).arg(got[static_cast<size_t>(r)]).arg(expected)
                                                 .arg(uniforms[static_cast<size_t>(r)])));
        ++mismatches_at_boundaries;
      }
    }
    QVERIFY(mismatches_at_boundaries <= 1);
  }

  void top_k_one_is_argmax() {
    const int64_t vocab = 32000, rows = 9;
    std::mt19937 rng(8);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    for (float& l : logits) l = normal(rng);
    logits[5 * vocab + 100] = logits[5 * vocab + 50] = 20.0f;  // a tie: the lower id
    std::vector<SamplingRowParams> params(static_cast<size_t>(rows), SamplingRowParams{1.5f, 1, 0.9f, 0.05f});
    std::vector<float> uniforms(static_cast<size_t>(rows), 0.999f);
    DeviceBuffer<float> d_logits(logits), d_uniforms(uniforms);
    DeviceBuffer<SamplingRowParams> d_params(params);
    DeviceBuffer<int32_t> d_sampled(static_cast<size_t>(rows)), d_argmax(static_cast<size_t>(rows));
    CUDA_VERIFY(sample_rows_cuda({d_logits.get(), rows, vocab, d_params.get(), d_uniforms.get(), d_sampled.get()}, nullptr));
    CUDA_VERIFY(argmax_rows_cuda(d_logits.get(), rows, vocab, d_argmax.get(), nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    QCOMPARE(d_sampled.download(), d_argmax.download());
    QCOMPARE(d_argmax.download()[5], 50);
  }

  void rows_without_finite_logits_give_minus_one() {
    const int64_t vocab = 100;
    std::vector<float> logits(static_cast<size_t>(vocab), -INFINITY);
    logits[3] = NAN;
    DeviceBuffer<float> d_logits(logits), d_uniforms(std::vector<float>{0.5f});
    DeviceBuffer<SamplingRowParams> d_params(std::vector<SamplingRowParams>{SamplingRowParams{}});
    DeviceBuffer<int32_t> d_tokens(1);
    CUDA_VERIFY(sample_rows_cuda({d_logits.get(), 1, vocab, d_params.get(), d_uniforms.get(), d_tokens.get()}, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    QCOMPARE(d_tokens.download().front(), -1);
  }

  void settings_the_device_follows_exactly() {
    QVERIFY(cuda_sampling_matches_cpu({0.0f, 0, 1.0f, 0.0f}));
    QVERIFY(cuda_sampling_matches_cpu({0.8f, 40, 0.95f, 0.05f}));
    QVERIFY(!cuda_sampling_matches_cpu({0.8f, 0, 0.95f, 0.05f}));
    QVERIFY(!cuda_sampling_matches_cpu({0.8f, 129, 0.95f, 0.05f}));
    QCOMPARE(sample_rows_cuda({nullptr, 1, 10, nullptr, nullptr, nullptr}, nullptr), cudaErrorInvalidValue);
    QCOMPARE(cudaGetLastError(), cudaSuccess);
  }
};

QTEST_APPLESS_MAIN(TestCudaSampling)
#include "test_cuda_sampling.moc"
