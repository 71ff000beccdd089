// Decode products (one token, or a few of quantized weights) whose ends are shared out
// (matmul_driver.cpp's DecodeSteal): a thread with no chunk left asks the others for the back
// half of theirs. Here one thread is slowed after every batch of its own steps, so the other
// takes some, and the results must be the single thread's bit for bit (a row's sum never
// depends on who ran it), on every decode kind of weight (quantized with and without the decode
// layout, K-quants, floats), odd row counts and groups of products (white-box: includes
// kernels/src). Run once per CPU path.
#include "matmul_paths.h"
#include "random_tensors.h"

#include "iwb/kernels/matmul.h"
#include "iwb/kernels/thread_pool.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace iwb;
using iwb::test::random_floats;
using iwb::test::random_tensor_bytes;

namespace {

// Resets the slowed thread however the test ends.
struct SlowOwner {
  SlowOwner(int thread, int microseconds) { detail::set_slow_decode_owner_for_testing(thread, microseconds); }
  ~SlowOwner() { detail::set_slow_decode_owner_for_testing(-1, 0); }
};

struct Product {
  int64_t out;
  std::vector<uint8_t> weight;
  std::vector<float> bias;
};

}  // namespace

class TestMatmulDecodeSteal : public QObject {
  Q_OBJECT

 private slots:
  // A slowed worker looks to the pool like one the machine holds back, and it would run the
  // next regions on one thread (thread_pool.h).
  void initTestCase() {
    m_was_adaptive = thread_pool_adaptive();
    set_thread_pool_adaptive(false);
  }
  void cleanupTestCase() { set_thread_pool_adaptive(m_was_adaptive); }

  void stolenStepsGiveTheSameBits_data() {
    QTest::addColumn<QString>("types");
    QTest::addColumn<int>("in");
    QTest::addColumn<int>("numTokens");
    for (const char* types : {"Q4_0", "Q4_K Q4_K Q6_K", "Q8_0", "Q5_K", "Q6_K", "Q4_1 Q4_1", "F16", "BF16 BF16"}) {
      for (int in : {256, 2304}) {
        QTest::newRow(qPrintable(QString("%1 in %2").arg(types).arg(in))) << QString(types) << in << 1;
      }
    }
    // Two tokens of quantized weights take the same decode steps, and where the CPU's kernels
    // dot several at once, more (Q4_0 and Q8_0 up to 7 or 8 on AVX-512 and AVX2).
    for (const char* types : {"Q4_0", "Q4_K Q4_K Q6_K", "Q8_0"}) {
      QTest::newRow(qPrintable(QString("%1 in 2304 x2").arg(types))) << QString(types) << 2304 << 2;
    }
    QTest::newRow("Q4_0 in 2304 x5") << QString("Q4_0") << 2304 << 5;
    QTest::newRow("Q8_0 in 2304 x3") << QString("Q8_0") << 2304 << 3;
  }
  void stolenStepsGiveTheSameBits() {
    QFETCH(QString, types);
    QFETCH(int, in);
    QFETCH(int, numTokens);
    std::mt19937 rng(static_cast<uint32_t>(qHash(types)) + static_cast<uint32_t>(in));
    std::vector<GgmlType> list;
    for (const QString& name : types.split(' ')) list.push_back(*ggml_type_from_name(name.toStdString()));
    if (numTokens > detail::decode_steps_max_tokens(list[0], in))
      QSKIP("this CPU's kernels take these tokens in tiles");
    // Enough rows that every chunk has batches to share (chunks of a product are an eighth of
    // it with two threads, batches 16 KiB), odd so streams and chunks have tails.
    std::vector<Product> products;
    int64_t out = 1021 * 2304 / in;
    for (GgmlType t : list) {
      products.push_back(
          {out, random_tensor_bytes(t, out, in, rng, 0.05f), random_floats(static_cast<size_t>(out), rng, 0.1f)});
      out = out * 2 + 7;
    }
    const std::vector<float> x = random_floats(static_cast<size_t>(in * numTokens), rng, 1.0f, 0.1f);
    auto run = [&](int threads, std::vector<std::vector<float>>* outputs) {
      std::vector<MatmulArgs> args;
      outputs->clear();
      for (size_t i = 0; i < products.size(); ++i) {
        outputs->emplace_back(static_cast<size_t>(products[i].out * numTokens), NAN);
        args.push_back({list[i], products[i].weight.data(), in, products[i].out, x.data(), numTokens,
                        i % 2 == 0 ? products[i].bias.data() : nullptr, outputs->back().data(), threads});
      }
      return matmul_group(args);
    };
    std::vector<std::vector<float>> alone;
    QVERIFY(run(1, &alone));
    // The slowed thread sleeps after every batch of its own. Slowed, the caller (thread 0)
    // leaves a worker time to arrive, take the other chunk and then ask it for steps, so that
    // case runs until some steps were shared (a worker woken late can find every chunk taken),
    // every run checked. A slowed worker is asked for steps only if it arrived in time to take
    // a chunk, which a busy machine (other tests beside this one) can keep from happening, so
    // that case checks the bits alone. (Float weights take the steps only where the CPU has dot
    // kernels for them and does not tile one token's rows: decode_streaming() decides per CPU.)
    const bool is_quantized = list[0] != GgmlType::F16 && list[0] != GgmlType::BF16;
    for (int slow_thread : {0, 1}) {
      bool shared_some = false;
      for (int attempt = 0; attempt < 20 && !shared_some; ++attempt) {
        const int64_t stolen_before = detail::decode_steps_stolen();
        std::vector<std::vector<float>> shared;
        {
          const SlowOwner slow(slow_thread, 2000);
          QVERIFY(run(2, &shared));
        }
        for (size_t i = 0; i < products.size(); ++i) {
          for (size_t r = 0; r < alone[i].size(); ++r) {
            if (shared[i][r] != alone[i][r]) {
              QFAIL(qPrintable(QString("product %1, row %2, thread %3 slowed: %4 against %5 alone")
                                   .arg(i)
                                   .arg(r)
                                   .arg(slow_thread)
                                   .arg(shared[i][r], 0, 'g', 9)
                                   .arg(alone[i][r], 0, 'g', 9)));
            }
          }
        }
        shared_some = !is_quantized || slow_thread != 0 || detail::decode_steps_stolen() > stolen_before;
      }
      QVERIFY2(shared_some, "no steps were shared in 20 runs");
    }
  }

  // Two tokens of quantized weights run as decode does, each row dotted against both: each
  // token's outputs are the ones it gets alone, bit for bit.
  void fewTokensGiveEachTokenItsOwnBits() {
    std::mt19937 rng(11);
    for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q5_1}) {
      const int64_t in = 2304, out = 1001;
      // Two tokens everywhere; more where this CPU's kernels dot several at once (AVX-512).
      const int64_t max_tokens = std::max<int64_t>(2, detail::decode_steps_max_tokens(type, in));
      const std::vector<uint8_t> w = random_tensor_bytes(type, out, in, rng, 0.05f);
      const std::vector<float> x = random_floats(static_cast<size_t>(max_tokens * in), rng, 1.0f, 0.1f);
      const std::vector<float> bias = random_floats(static_cast<size_t>(out), rng, 0.1f);
      std::vector<float> alone(static_cast<size_t>(out), NAN);
      for (int64_t tokens = 2; tokens <= max_tokens; ++tokens) {
        std::vector<float> together(static_cast<size_t>(tokens * out), NAN);
        for (int threads : {1, 2}) {
          QVERIFY(matmul({type, w.data(), in, out, x.data(), tokens, bias.data(), together.data(), threads}));
          for (int64_t t = 0; t < tokens; ++t) {
            QVERIFY(matmul({type, w.data(), in, out, x.data() + t * in, 1, bias.data(), alone.data(), 1}));
            for (int64_t r = 0; r < out; ++r) {
              if (together[static_cast<size_t>(t * out + r)] != alone[static_cast<size_t>(r)]) {
                QFAIL(qPrintable(QString("%1, %2 tokens, token %3, row %4, %5 threads: %6 against %7 alone")
                                     .arg(QString::fromStdString(std::string(ggml_type_name(type))))
                                     .arg(tokens)
                                     .arg(t)
                                     .arg(r)
                                     .arg(threads)
                                     .arg(together[static_cast<size_t>(t * out + r)], 0, 'g', 9)
                                     .arg(alone[static_cast<size_t>(r)], 0, 'g', 9)));
              }
            }
          }
        }
      }
    }
  }

  // Without a slowed thread the threads share the ends as they come; still the same bits.
  void unevenThreadsGiveTheSameBits() {
    std::mt19937 rng(7);
    const int64_t in = 1536, out = 4099;
    const std::vector<uint8_t> w = random_tensor_bytes(GgmlType::Q4_0, out, in, rng, 0.05f);
    const std::vector<float> x = random_floats(static_cast<size_t>(in), rng, 1.0f, 0.1f);
    std::vector<float> alone(static_cast<size_t>(out)), shared(static_cast<size_t>(out));
    QVERIFY(matmul({GgmlType::Q4_0, w.data(), in, out, x.data(), 1, nullptr, alone.data(), 1}));
    for (int rep = 0; rep < 50; ++rep) {
      QVERIFY(matmul({GgmlType::Q4_0, w.data(), in, out, x.data(), 1, nullptr, shared.data(), 2}));
      QVERIFY(shared == alone);
    }
  }

 private:
  bool m_was_adaptive = true;
};

QTEST_GUILESS_MAIN(TestMatmulDecodeSteal)
#include "test_matmul_decode_steal.moc"
