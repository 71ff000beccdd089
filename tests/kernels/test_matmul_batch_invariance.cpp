// matmul with is_exact is batch-invariant: a token's output row is bit for bit the same
// whatever the number of tokens in the call (1, a speculative verify's few, a prompt chunk), for
// every weight type, alone and through matmul_group. The engine's batch-invariant mode rests on it.
#include "random_tensors.h"

#include "iwb/kernels/matmul.h"

#include <QTest>

#include <cstring>

using namespace iwb;

class TestMatmulBatchInvariance : public QObject {
  Q_OBJECT

 private slots:
  void sameBitsForAnyNumberOfTokens_data() {
    QTest::addColumn<int>("type");
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                       GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                       GgmlType::Q6_K, GgmlType::MXFP4}) {
      QTest::newRow(std::string(ggml_type_name(t)).c_str()) << int(t);
    }
  }

  void sameBitsForAnyNumberOfTokens() {
    QFETCH(int, type);
    const auto t = static_cast<GgmlType>(type);
    const int64_t in = 512, out = 67;  // 67 rows: tiles and thread chunks end mid-way
    std::mt19937 rng(static_cast<uint32_t>(type) + 11);
    const std::vector<uint8_t> w = test::random_tensor_bytes(t, out, in, rng, 0.05f);
    const int64_t max_tokens = 130;
    const std::vector<float> x = test::random_floats(static_cast<size_t>(max_tokens * in), rng);

    auto run = [&](int64_t first_token, int64_t num_tokens, std::vector<float>* y) {
      y->assign(static_cast<size_t>(num_tokens * out), 0.0f);
      MatmulArgs a;
      a.weight_type = t;
      a.weight = w.data();
      a.in_features = in;
      a.out_features = out;
      a.input = x.data() + first_token * in;
      a.num_tokens = num_tokens;
      a.output = y->data();
      a.num_threads = 2;
      a.is_exact = true;
      return matmul(a);
    };
    // Each token alone: the decode path.
    std::vector<float> alone(static_cast<size_t>(max_tokens * out));
    std::vector<float> y;
    for (int64_t tok = 0; tok < max_tokens; ++tok) {
      QVERIFY(run(tok, 1, &y));
      std::memcpy(alone.data() + tok * out, y.data(), sizeof(float) * static_cast<size_t>(out));
    }
    for (const int64_t n : {2, 3, 4, 5, 8, 9, 17, 33, 64, 130}) {
      QVERIFY(run(0, n, &y));
      QVERIFY2(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)) == 0,
               qPrintable(QString("%1 tokens in one call differ from one at a time").arg(n)));
    }
    // The same through matmul_group (q/k/v-style products of one input).
    std::vector<float> y0(static_cast<size_t>(9 * out)), y1(static_cast<size_t>(9 * out));
    MatmulArgs a;
    a.weight_type = t;
    a.weight = w.data();
    a.in_features = in;
    a.out_features = out;
    a.input = x.data();
    a.num_tokens = 9;
    a.num_threads = 2;
    a.is_exact = true;
    MatmulArgs b = a;
    a.output = y0.data();
    b.output = y1.data();
    const MatmulArgs group[] = {a, b};
    QVERIFY(matmul_group(group));
    QVERIFY(std::memcmp(y0.data(), alone.data(), y0.size() * sizeof(float)) == 0);
    QVERIFY(std::memcmp(y1.data(), alone.data(), y1.size() * sizeof(float)) == 0);
  }
};

QTEST_APPLESS_MAIN(TestMatmulBatchInvariance)
#include "test_matmul_batch_invariance.moc"
