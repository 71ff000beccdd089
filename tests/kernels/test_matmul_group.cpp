// matmul_group (products of one input: q/k/v, gate/up) against matmul on each product: equal
// bit for bit, on odd shapes and random data, with Q4_K_M's mix of Q4_K and Q6_K, matrices of
// one type, mixed activation formats (one product at a time) and float types; 1, 2, 3, 8, 17
// and 70 tokens (rows, tiles, token lanes, GEMM), 1 and 2 threads, with and without bias. Run once
// per CPU path.
#include "random_tensors.h"

#include "iwb/kernels/matmul.h"

#include <QTest>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace iwb;
using iwb::test::random_floats;
using iwb::test::random_tensor_bytes;

namespace {

struct Product {
  GgmlType type;
  int64_t out;
  std::vector<uint8_t> weight;
  std::vector<float> bias;
};

// One product per type; `in` columns; odd row counts so thread ranges and tiles have tails.
std::vector<Product> make_products(const std::vector<GgmlType>& types, int64_t in, std::mt19937& rng) {
  std::vector<Product> products;
  int64_t out = 37;
  for (GgmlType t : types) {
    products.push_back(
        {t, out, random_tensor_bytes(t, out, in, rng, 0.05f), random_floats(static_cast<size_t>(out), rng, 0.1f)});
    out = out * 3 + 2;  // 37, 113, 341, ...
  }
  return products;
}

}  // namespace

class TestMatmulGroup : public QObject {
  Q_OBJECT

 private slots:
  void matchesSeparateProducts_data() {
    QTest::addColumn<QString>("types");
    QTest::addColumn<int>("numTokens");
    for (const char* types :
         {"Q4_K Q4_K Q6_K", "Q4_0 Q4_0", "Q8_0 Q4_1 Q5_0", "Q5_K Q6_K", "Q8_0 Q4_K", "F16 F16 F16", "BF16 F32"}) {
      for (int tokens : {1, 2, 3, 8, 17, 70})
        QTest::newRow(qPrintable(QString("%1 x%2").arg(types).arg(tokens))) << QString(types) << tokens;
    }
  }
  void matchesSeparateProducts() {
    QFETCH(QString, types);
    QFETCH(int, numTokens);
    std::vector<GgmlType> list;
    for (const QString& name : types.split(' ')) list.push_back(*ggml_type_from_name(name.toStdString()));
    std::mt19937 rng(static_cast<uint32_t>(qHash(types) + static_cast<size_t>(numTokens)));
    const int64_t in = 3 * 256;  // whole blocks of every type
    const std::vector<Product> products = make_products(list, in, rng);
    const std::vector<float> x = random_floats(static_cast<size_t>(numTokens * in), rng, 1.0f, 0.1f);
    for (const bool has_bias : {false, true}) {
      for (int threads : {1, 2}) {
        std::vector<std::vector<float>> separate, grouped;
        std::vector<MatmulArgs> args;
        for (const Product& p : products) {
          separate.emplace_back(static_cast<size_t>(numTokens * p.out), NAN);
          grouped.emplace_back(static_cast<size_t>(numTokens * p.out), NAN);
          MatmulArgs a{p.type,
                       p.weight.data(),
                       in,
                       p.out,
                       x.data(),
                       numTokens,
                       has_bias ? p.bias.data() : nullptr,
                       separate.back().data(),
                       threads};
          QVERIFY(matmul(a));
          a.output = grouped.back().data();
          args.push_back(a);
        }
        QVERIFY(matmul_group(args));
        for (size_t i = 0; i < products.size(); ++i) {
          for (size_t e = 0; e < separate[i].size(); ++e) {
            if (grouped[i][e] != separate[i][e]) {
              QFAIL(qPrintable(QString("product %1 (%2), element %3, threads %4, bias %5: %6 against %7")
                                   .arg(i)
                                   .arg(ggml_type_name(products[i].type).data())
                                   .arg(e)
                                   .arg(threads)
                                   .arg(has_bias)
                                   .arg(grouped[i][e])
                                   .arg(separate[i][e])));
            }
          }
        }
      }
    }
  }

  // Products that do not share an input or shape are refused and nothing is written.
  void refusesMismatchedProducts() {
    std::mt19937 rng(3);
    const int64_t in = 256;
    const std::vector<Product> products = make_products({GgmlType::Q4_K, GgmlType::Q4_K}, in, rng);
    const std::vector<float> x = random_floats(static_cast<size_t>(2 * in), rng);
    std::vector<float> out0(static_cast<size_t>(products[0].out), NAN), out1(static_cast<size_t>(products[1].out), NAN);
    MatmulArgs a{GgmlType::Q4_K, products[0].weight.data(), in, products[0].out, x.data(), 1, nullptr, out0.data(), 1};
    MatmulArgs b{
        GgmlType::Q4_K, products[1].weight.data(), in, products[1].out, x.data() + in, 1, nullptr, out1.data(), 1};
    QVERIFY(!matmul_group(std::vector<MatmulArgs>{a, b}));  // another input
    b.input = x.data();
    b.num_tokens = 2;
    QVERIFY(!matmul_group(std::vector<MatmulArgs>{a, b}));  // another token count
    b.num_tokens = 1;
    b.weight = nullptr;
    QVERIFY(!matmul_group(std::vector<MatmulArgs>{a, b}));  // an invalid product
    QVERIFY(!matmul_group({}));
    for (float v : out0) QVERIFY(std::isnan(v));
    for (float v : out1) QVERIFY(std::isnan(v));
  }
};

QTEST_APPLESS_MAIN(TestMatmulGroup)
#include "test_matmul_group.moc"
