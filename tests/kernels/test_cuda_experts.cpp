// The mixture-of-experts kernels (experts_cuda.h) against references written here from
// CpuExperts' rules: routing (softmax, sigmoid with a selection bias, gpt-oss's softmax over the
// top k; renormalised and scaled weights; ties to the lower expert; non-finite logits), the
// experts' products for every weight type on odd sizes (and equal, bit for bit, to matvec_cuda's
// product of the chosen expert for the quantized types), and the weighted sum. Built twice: on a
// device (test_cuda_experts, skips without one) and on CPU fibers (test_cuda_experts_emulated).
#include "cuda_test_support.h"
#include "random_tensors.h"

#include "iwb/kernels/cuda/experts_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/dequantize.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace iwb;
using iwb::test::DeviceBuffer;

namespace {

struct Routing {
  std::vector<int32_t> choice;
  std::vector<float> weight;
};

// CpuExperts::route's rules, token by token.
Routing route_reference(const std::vector<float>& logits, const std::vector<float>& bias, int64_t tokens,
                        int64_t experts, int64_t k, ExpertGating gating, bool normalized, float scale) {
  Routing out;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * experts;
    std::vector<float> probs(row, row + experts);
    bool finite = true;
    for (float v : probs) finite = finite && std::isfinite(v);
    if (gating == ExpertGating::Softmax) {
      const float top = *std::max_element(probs.begin(), probs.end());
      float sum = 0;
      for (float& p : probs) sum += (p = std::exp(p - top));
      for (float& p : probs) p /= sum;
    } else if (gating == ExpertGating::Sigmoid) {
      for (float& p : probs) p = 1.0f / (1.0f + std::exp(-p));
    }
    std::vector<float> by(probs);
    for (int64_t e = 0; e < experts && !bias.empty(); ++e) by[static_cast<size_t>(e)] += bias[static_cast<size_t>(e)];
    std::vector<int32_t> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    // Ties keep the lower expert first (stable); a NaN score sorts last (not compared as is).
    const auto key = [&](int32_t e) { return std::isnan(by[e]) ? -INFINITY : by[e]; };
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(a) > key(b); });
    std::vector<float> w(static_cast<size_t>(k));
    float chosen = 0;
    for (int64_t j = 0; j < k; ++j) {
      out.choice.push_back(order[static_cast<size_t>(j)]);
      chosen += (w[static_cast<size_t>(j)] = probs[static_cast<size_t>(order[static_cast<size_t>(j)])]);
    }
    if (gating == ExpertGating::SoftmaxOverTopK) {
      const float top = *std::max_element(w.begin(), w.end());
      float sum = 0;
      for (float& x : w) sum += (x = std::exp(x - top));
      for (float& x : w) x *= 1.0f / sum;
    }
    for (float& x : w) {
      if (normalized) x /= std::max(chosen, 6.103515625e-5f);
      x *= scale;
      if (!finite) x = NAN;
    }
    out.weight.insert(out.weight.end(), w.begin(), w.end());
  }
  return out;
}

struct Grouping {
  std::vector<int32_t> position, source_row, groups;  // groups: expert, first row, rows
  int32_t num_groups = 0;
};

// The CPU's order (experts ascending, tokens in order within an expert), cut into groups.
Grouping group_reference(const std::vector<int32_t>& choice, int64_t experts, int64_t divisor) {
  Grouping out;
  out.position.resize(choice.size());
  out.source_row.resize(choice.size());
  int32_t row = 0;
  for (int32_t e = 0; e < experts; ++e) {
    const int32_t first = row;
    for (size_t r = 0; r < choice.size(); ++r) {
      if (choice[r] != e) continue;
      out.position[r] = row;
      out.source_row[static_cast<size_t>(row)] = static_cast<int32_t>(static_cast<int64_t>(r) / divisor);
      ++row;
    }
    for (int32_t s = first; s < row; s += static_cast<int32_t>(kCudaExpertGroupRows)) {
      out.groups.insert(out.groups.end(),
                        {e, s, std::min<int32_t>(static_cast<int32_t>(kCudaExpertGroupRows), row - s)});
      ++out.num_groups;
    }
  }
  return out;
}

// group_expert_rows_cuda on the device, its outputs downloaded.
struct DeviceGrouping {
  DeviceBuffer<int32_t> position, source_row, groups, num_groups;
  int64_t max_groups = 0;
  DeviceGrouping(const DeviceBuffer<int32_t>& choice, int64_t routed, int64_t experts, int64_t divisor)
      : position(static_cast<size_t>(routed)),
        source_row(static_cast<size_t>(routed)),
        groups(static_cast<size_t>(3 * cuda_expert_max_groups(routed, experts))),
        num_groups(1),
        max_groups(cuda_expert_max_groups(routed, experts)) {
    ExpertGroupsCudaArgs a;
    a.choice = choice.get();
    a.num_routed = routed;
    a.num_experts = experts;
    a.x_row_divisor = divisor;
    a.position = position.get();
    a.source_row = source_row.get();
    a.groups = groups.get();
    a.num_groups = num_groups.get();
    a.max_groups = max_groups;
    status = group_expert_rows_cuda(a, nullptr);
    if (status == cudaSuccess) status = cudaDeviceSynchronize();
  }
  cudaError_t status = cudaSuccess;
};

std::vector<uint8_t> expert_weights(GgmlType type, int64_t experts, int64_t rows, int64_t cols, std::mt19937& rng) {
  return iwb::test::random_tensor_bytes(type, experts * rows, cols, rng, 0.05f);
}

}  // namespace

class TestCudaExperts : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    const QString reason = iwb::test::cuda_unavailable_reason();
    if (!reason.isEmpty()) QSKIP(qPrintable(QStringLiteral("CUDA expert kernels not tested: %1").arg(reason)));
  }

  void routing_matches_reference_data() {
    QTest::addColumn<int>("gating");
    QTest::addColumn<bool>("normalized");
    QTest::addColumn<bool>("with_bias");
    QTest::addColumn<int>("experts");
    QTest::addColumn<int>("used");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<float>("scale");
    QTest::newRow("softmax, qwen3moe-like") << 0 << true << false << 37 << 5 << 9 << 1.0f;
    QTest::newRow("softmax, not renormalised, one expert") << 0 << false << false << 7 << 1 << 3 << 1.0f;
    QTest::newRow("sigmoid with bias, scaled (glm4moe)") << 1 << true << true << 130 << 8 << 5 << 2.5f;
    QTest::newRow("softmax over the top k (gpt-oss)") << 2 << false << false << 6 << 2 << 6 << 1.0f;
    QTest::newRow("every expert chosen") << 0 << true << false << 5 << 5 << 2 << 1.0f;
    QTest::newRow("the largest router") << 0 << true << true << 512 << 32 << 2 << 1.0f;
  }
  void routing_matches_reference() {
    QFETCH(int, gating);
    QFETCH(bool, normalized);
    QFETCH(bool, with_bias);
    QFETCH(int, experts);
    QFETCH(int, used);
    QFETCH(int, tokens);
    QFETCH(float, scale);
    std::mt19937 rng(static_cast<uint32_t>(experts * 31 + used));
    std::vector<float> logits = iwb::test::random_floats(static_cast<size_t>(tokens * experts), rng, 2.0f);
    // Ties: token 1's first four logits equal and above the rest (the lower expert goes first).
    if (tokens > 1) std::fill(logits.begin() + experts, logits.begin() + experts + std::min(4, experts), 20.0f);
    // A token whose logits overflowed: NaN weights (the experts still chosen, in range).
    if (tokens > 2) logits[static_cast<size_t>(2 * experts + 1)] = INFINITY;
    const std::vector<float> bias =
        with_bias ? iwb::test::random_floats(static_cast<size_t>(experts), rng, 0.3f) : std::vector<float>{};
    const auto kind = static_cast<ExpertGating>(gating);
    const Routing want = route_reference(logits, bias, tokens, experts, used, kind, normalized, scale);

    DeviceBuffer<float> d_logits(logits), d_bias(bias), d_weight(static_cast<size_t>(tokens * used));
    DeviceBuffer<int32_t> d_choice(static_cast<size_t>(tokens * used));
    RouteExpertsCudaArgs a;
    a.logits = d_logits.get();
    a.selection_bias = with_bias ? d_bias.get() : nullptr;
    a.num_tokens = tokens;
    a.num_experts = experts;
    a.num_used = used;
    a.gating = kind;
    a.is_normalized = normalized;
    a.weights_scale = scale;
    a.choice = d_choice.get();
    a.weight = d_weight.get();
    QCOMPARE(route_experts_cuda(a, nullptr), cudaSuccess);
    QCOMPARE(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> choice = d_choice.download();
    const std::vector<float> weight = d_weight.download();
    for (size_t i = 0; i < choice.size(); ++i) {
      const auto t = static_cast<int64_t>(i) / used;
      const bool overflowed = t == 2;
      if (!overflowed) {
        QVERIFY2(
            choice[i] == want.choice[i],
            qPrintable(QString("routed row %1: expert %2, reference %3").arg(i).arg(choice[i]).arg(want.choice[i])));
        QVERIFY2(
            std::fabs(weight[i] - want.weight[i]) <= 1e-5f + 1e-5f * std::fabs(want.weight[i]),
            qPrintable(QString("routed row %1: weight %2, reference %3").arg(i).arg(weight[i]).arg(want.weight[i])));
      } else {
        QVERIFY2(choice[i] >= 0 && choice[i] < experts, "an overflowed token's experts stay in range");
        QVERIFY2(std::isnan(weight[i]), "an overflowed token's weights are NaN");
      }
    }
    // The tie: experts 0..3 of token 1 in ascending order wherever they were chosen first.
    if (tokens > 1 && used >= 2 && !with_bias && experts >= 4 && kind != ExpertGating::Sigmoid) {
      QVERIFY(choice[static_cast<size_t>(used)] < choice[static_cast<size_t>(used + 1)]);
    }
  }

  void expert_products_match_reference_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("in_features");
    QTest::addColumn<int>("out_features");
    QTest::addColumn<int>("divisor");
    struct Row {
      GgmlType type;
      int in, out;
    };
    // Odd row counts; Q4_0 / Q5_0 / Q8_0 rows of 96 values take 2- or 4-byte loads; Q4_0's 4160
    // spans two tiles; MXFP4 rows of an odd number of its 17-byte blocks take byte loads.
    for (const Row r : {Row{GgmlType::F32, 56, 37}, Row{GgmlType::F16, 40, 19}, Row{GgmlType::BF16, 24, 21},
                        Row{GgmlType::Q4_0, 96, 23}, Row{GgmlType::Q4_0, 4160, 5}, Row{GgmlType::Q4_1, 64, 9},
                        Row{GgmlType::Q5_0, 96, 11}, Row{GgmlType::Q5_1, 128, 7}, Row{GgmlType::Q8_0, 96, 13},
                        Row{GgmlType::Q4_K, 256, 9}, Row{GgmlType::Q5_K, 512, 5}, Row{GgmlType::Q6_K, 256, 7},
                        Row{GgmlType::MXFP4, 64, 9}, Row{GgmlType::MXFP4, 96, 7}, Row{GgmlType::MXFP4, 4160, 3}}) {
      for (const int divisor : {1, 3}) {
        QTest::newRow(qPrintable(QString("%1 %2x%3, x row per %4")
                                     .arg(QString::fromUtf8(ggml_type_name(r.type).data(),
                                                            static_cast<qsizetype>(ggml_type_name(r.type).size())))
                                     .arg(r.out)
                                     .arg(r.in)
                                     .arg(divisor == 1 ? "routed row" : "token")))
            << static_cast<int>(r.type) << r.in << r.out << divisor;
      }
    }
  }
  void expert_products_match_reference() {
    QFETCH(int, type);
    QFETCH(int, in_features);
    QFETCH(int, out_features);
    QFETCH(int, divisor);
    const auto t = static_cast<GgmlType>(type);
    const int64_t experts = 5, k = 3, tokens = 4, routed = tokens * k;
    std::mt19937 rng(static_cast<uint32_t>(type * 131 + in_features + divisor));
    const std::vector<uint8_t> bytes = expert_weights(t, experts, out_features, in_features, rng);
    const uint64_t expert_bytes = bytes.size() / experts;
    std::vector<float> w(static_cast<size_t>(experts * out_features * in_features));
    QVERIFY(dequantize_row_ref(t, bytes.data(), w.data(), static_cast<int64_t>(w.size())));
    const int64_t x_rows = divisor == 1 ? routed : tokens;
    const std::vector<float> x = iwb::test::random_floats(static_cast<size_t>(x_rows * in_features), rng);
    const std::vector<float> bias = iwb::test::random_floats(static_cast<size_t>(experts * out_features), rng, 0.1f);
    std::vector<int32_t> choice(static_cast<size_t>(routed));
    for (int32_t& c : choice) c = static_cast<int32_t>(rng() % experts);

    DeviceBuffer<uint8_t> d_w(bytes);
    DeviceBuffer<float> d_x(x), d_bias(bias), d_y(static_cast<size_t>(routed * out_features));
    DeviceBuffer<int32_t> d_choice(choice);
    QCOMPARE(d_y.poison(), cudaSuccess);
    ExpertMatvecCudaArgs a;
    a.type = t;
    a.weights = d_w.get();
    a.expert_stride = expert_bytes;
    a.num_experts = experts;
    a.in_features = in_features;
    a.out_features = out_features;
    a.choice = d_choice.get();
    a.num_routed = routed;
    a.x = d_x.get();
    a.x_row_divisor = divisor;
    a.y = d_y.get();
    a.bias = d_bias.get();
    QCOMPARE(expert_matvec_cuda(a, nullptr), cudaSuccess);
    QCOMPARE(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = d_y.download();
    for (int64_t r = 0; r < routed; ++r) {
      const int64_t e = choice[static_cast<size_t>(r)];
      const float* xr = x.data() + (r / divisor) * in_features;
      for (int64_t o = 0; o < out_features; ++o) {
        const float* wr = w.data() + (e * out_features + o) * in_features;
        double sum = bias[static_cast<size_t>(e * out_features + o)], magnitude = 0;
        for (int64_t i = 0; i < in_features; ++i) {
          sum += static_cast<double>(wr[i]) * xr[i];
          magnitude += std::fabs(static_cast<double>(wr[i]) * xr[i]);
        }
        const float value = got[static_cast<size_t>(r * out_features + o)];
        QVERIFY2(std::fabs(value - sum) <= 1e-5 * magnitude + 1e-6,
                 qPrintable(QString("routed row %1 (expert %2), output %3: %4, reference %5")
                                .arg(r)
                                .arg(e)
                                .arg(o)
                                .arg(value, 0, 'g', 9)
                                .arg(sum, 0, 'g', 9)));
      }
    }
    // Grouped (the rows of an expert together, up to 8 a product): each row bit for bit as above.
    {
      DeviceGrouping grouping(d_choice, routed, experts, divisor);
      QCOMPARE(grouping.status, cudaSuccess);
      const std::vector<int32_t> position = grouping.position.download(), source = grouping.source_row.download();
      std::vector<float> grouped_x(static_cast<size_t>(routed * in_features));
      for (int64_t p = 0; p < routed; ++p) {
        std::copy_n(x.begin() + source[static_cast<size_t>(p)] * in_features, in_features,
                    grouped_x.begin() + p * in_features);
      }
      DeviceBuffer<float> d_gx(grouped_x), d_gy(static_cast<size_t>(routed * out_features));
      QCOMPARE(d_gy.poison(), cudaSuccess);
      ExpertMatvecCudaArgs g = a;
      g.choice = nullptr;
      g.x = d_gx.get();
      g.x_row_divisor = 1;
      g.y = d_gy.get();
      g.groups = grouping.groups.get();
      g.num_groups = grouping.num_groups.get();
      g.max_groups = grouping.max_groups;
      QCOMPARE(expert_matvec_cuda(g, nullptr), cudaSuccess);
      QCOMPARE(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> grouped = d_gy.download();
      for (int64_t r = 0; r < routed; ++r) {
        QVERIFY2(std::equal(got.begin() + r * out_features, got.begin() + (r + 1) * out_features,
                            grouped.begin() + position[static_cast<size_t>(r)] * out_features),
                 qPrintable(QString("routed row %1 differs when grouped (at row %2)").arg(r).arg(position[r])));
      }
    }
    // The quantized types run matvec_cuda's kernel body: each routed row is its product of the
    // chosen expert, bit for bit (matvec_cuda has no MXFP4).
    if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || t == GgmlType::MXFP4) return;
    DeviceBuffer<float> d_one(static_cast<size_t>(out_features));
    for (int64_t r = 0; r < routed; ++r) {
      const int64_t e = choice[static_cast<size_t>(r)];
      MatvecCudaArgs m;
      m.type = t;
      m.weight = d_w.get() + e * expert_bytes;
      m.in_features = in_features;
      m.out_features = out_features;
      m.x = d_x.get() + (r / divisor) * in_features;
      m.num_tokens = 1;
      m.y = d_one.get();
      m.bias = d_bias.get() + e * out_features;
      QCOMPARE(matvec_cuda(m, nullptr), cudaSuccess);
      QCOMPARE(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> one = d_one.download();
      QVERIFY2(std::equal(one.begin(), one.end(), got.begin() + r * out_features),
               qPrintable(QString("routed row %1 differs from matvec_cuda's product of expert %2").arg(r).arg(e)));
    }
  }

  void grouping_matches_reference_data() {
    QTest::addColumn<int>("experts");
    QTest::addColumn<int>("routed");
    QTest::addColumn<int>("divisor");
    QTest::addColumn<bool>("skewed");
    QTest::newRow("5 experts, 37 rows of 3 a token") << 5 << 37 << 3 << false;
    QTest::newRow("130 experts, 600 rows (two chunks)") << 130 << 600 << 8 << false;
    QTest::newRow("one hot expert of 8 (groups cut at 8 rows)") << 8 << 203 << 1 << true;
    QTest::newRow("512 experts, one row") << 512 << 1 << 1 << false;
  }
  void grouping_matches_reference() {
    QFETCH(int, experts);
    QFETCH(int, routed);
    QFETCH(int, divisor);
    QFETCH(bool, skewed);
    std::mt19937 rng(static_cast<uint32_t>(experts + routed));
    std::vector<int32_t> choice(static_cast<size_t>(routed));
    for (int32_t& c : choice) c = skewed && rng() % 4 != 0 ? 3 : static_cast<int32_t>(rng() % experts);
    const Grouping want = group_reference(choice, experts, divisor);
    DeviceBuffer<int32_t> d_choice(choice);
    DeviceGrouping got(d_choice, routed, experts, divisor);
    QCOMPARE(got.status, cudaSuccess);
    QCOMPARE(got.num_groups.download()[0], want.num_groups);
    QVERIFY(want.num_groups <= got.max_groups);
    QCOMPARE(got.position.download(), want.position);
    QCOMPARE(got.source_row.download(), want.source_row);
    std::vector<int32_t> groups = got.groups.download();
    groups.resize(want.groups.size());
    QCOMPARE(groups, want.groups);
  }

  void combine_matches_reference_data() {
    QTest::addColumn<bool>("with_scales");
    QTest::addColumn<bool>("accumulating");
    QTest::addColumn<bool>("grouped");
    QTest::newRow("weights only") << false << false << false;
    QTest::newRow("per-expert scales, added to shared experts' output") << true << true << false;
    QTest::newRow("grouped rows") << true << false << true;
  }
  void combine_matches_reference() {
    QFETCH(bool, with_scales);
    QFETCH(bool, accumulating);
    QFETCH(bool, grouped);
    const int64_t tokens = 5, k = 3, width = 130, experts = 4;
    std::mt19937 rng(5);
    const std::vector<float> out = iwb::test::random_floats(static_cast<size_t>(tokens * k * width), rng);
    const std::vector<float> weight = iwb::test::random_floats(static_cast<size_t>(tokens * k), rng, 0.5f, 0.3f);
    const std::vector<float> scales = iwb::test::random_floats(static_cast<size_t>(experts), rng, 0.2f, 1.0f);
    const std::vector<float> y0 = iwb::test::random_floats(static_cast<size_t>(tokens * width), rng);
    std::vector<int32_t> choice(static_cast<size_t>(tokens * k));
    for (int32_t& c : choice) c = static_cast<int32_t>(rng() % experts);
    // Grouped: routed row r's output sits at row rows[r] (a permutation).
    std::vector<int32_t> rows(static_cast<size_t>(tokens * k));
    std::iota(rows.begin(), rows.end(), 0);
    if (grouped) std::shuffle(rows.begin(), rows.end(), rng);
    std::vector<float> want(static_cast<size_t>(tokens * width));
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t i = 0; i < width; ++i) {
        float sum = accumulating ? y0[static_cast<size_t>(t * width + i)] : 0.0f;
        for (int64_t j = 0; j < k; ++j) {
          const auto r = static_cast<size_t>(t * k + j);
          const float w = weight[r] * (with_scales ? scales[static_cast<size_t>(choice[r])] : 1.0f);
          sum += w * out[static_cast<size_t>(rows[r]) * width + static_cast<size_t>(i)];
        }
        want[static_cast<size_t>(t * width + i)] = sum;
      }
    }
    DeviceBuffer<float> d_out(out), d_weight(weight), d_scales(scales), d_y(y0);
    DeviceBuffer<int32_t> d_choice(choice), d_rows(rows);
    CombineExpertsCudaArgs a;
    a.expert_out = d_out.get();
    a.expert_rows = grouped ? d_rows.get() : nullptr;
    a.choice = d_choice.get();
    a.weight = d_weight.get();
    a.expert_scales = with_scales ? d_scales.get() : nullptr;
    a.num_tokens = tokens;
    a.num_used = k;
    a.width = width;
    a.y = d_y.get();
    a.is_accumulating = accumulating;
    QCOMPARE(combine_experts_cuda(a, nullptr), cudaSuccess);
    QCOMPARE(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = d_y.download();
    const long long bad = iwb::test::first_mismatch(got, want, 1e-5f, 1e-5f);
    if (bad >= 0) QFAIL(qPrintable(iwb::test::mismatch_message("weighted sum", got, want, bad)));
  }

  void bad_arguments_are_refused() {
    DeviceBuffer<float> logits(64), weight(64), x(256), y(256);
    DeviceBuffer<int32_t> choice(64);
    RouteExpertsCudaArgs r;
    r.logits = logits.get();
    r.num_tokens = 2;
    r.num_experts = 8;
    r.num_used = 2;
    r.choice = choice.get();
    r.weight = weight.get();
    QCOMPARE(route_experts_cuda_check(r), cudaSuccess);
    RouteExpertsCudaArgs bad = r;
    bad.num_used = 9;  // more than there are
    QCOMPARE(route_experts_cuda(bad, nullptr), cudaErrorInvalidValue);
    bad = r;
    bad.num_experts = kCudaMaxExperts + 1;
    QCOMPARE(route_experts_cuda_check(bad), cudaErrorInvalidValue);
    bad = r;
    bad.choice = nullptr;
    QCOMPARE(route_experts_cuda_check(bad), cudaErrorInvalidValue);

    ExpertMatvecCudaArgs m;
    m.type = GgmlType::F32;
    m.weights = x.get();
    m.expert_stride = 8 * 8 * 4;
    m.num_experts = 1;
    m.in_features = 8;
    m.out_features = 8;
    m.choice = choice.get();
    m.num_routed = 2;
    m.x = x.get() + 64;
    m.y = y.get();
    QCOMPARE(expert_matvec_cuda_check(m), cudaSuccess);
    ExpertMatvecCudaArgs wrong = m;
    wrong.y = x.get() + 64 + 8;  // overlaps x's rows
    QCOMPARE(expert_matvec_cuda(wrong, nullptr), cudaErrorInvalidValue);
    wrong = m;
    wrong.in_features = 12;  // not a multiple of 8
    QCOMPARE(expert_matvec_cuda_check(wrong), cudaErrorInvalidValue);
    wrong = m;
    wrong.expert_stride = 8 * 8 * 4 - 4;  // shorter than an expert's matrix
    QCOMPARE(expert_matvec_cuda_check(wrong), cudaErrorInvalidValue);
    wrong = m;
    wrong.type = GgmlType::Q2_K;  // no kernel
    QCOMPARE(expert_matvec_cuda_check(wrong), cudaErrorInvalidValue);

    ExpertGroupsCudaArgs g;
    g.choice = choice.get();
    g.num_routed = 20;
    g.num_experts = 8;
    g.position = choice.get() + 20;
    g.source_row = choice.get() + 40;
    g.groups = reinterpret_cast<int32_t*>(weight.get());
    g.num_groups = reinterpret_cast<int32_t*>(weight.get()) + 60;
    g.max_groups = cuda_expert_max_groups(20, 8);
    QCOMPARE(g.max_groups, int64_t{3 + 8});
    QCOMPARE(group_expert_rows_cuda_check(g), cudaSuccess);
    g.max_groups -= 1;  // a table too small for the worst case
    QCOMPARE(group_expert_rows_cuda(g, nullptr), cudaErrorInvalidValue);

    CombineExpertsCudaArgs c;
    c.expert_out = x.get();
    c.choice = choice.get();
    c.weight = weight.get();
    c.num_tokens = 2;
    c.num_used = 2;
    c.width = 8;
    c.y = y.get();
    QCOMPARE(combine_experts_cuda_check(c), cudaSuccess);
    c.num_used = 0;
    QCOMPARE(combine_experts_cuda(c, nullptr), cudaErrorInvalidValue);
    QCOMPARE(cudaGetLastError(), cudaSuccess);  // refusals launch nothing
  }
};

QTEST_GUILESS_MAIN(TestCudaExperts)
#include "test_cuda_experts.moc"
