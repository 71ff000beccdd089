// Qwen 3.5's recurrent kernels (delta_net.h): the fast short convolution and gated delta rule
// against their double-precision references on odd sizes and random data; a sequence run in
// chunks (the state carried between calls) equals the same sequence in one call; and the
// reference against the rule written out for one head and two tokens.
#include "iwb/kernels/delta_net.h"

#include "random_tensors.h"

#include <QtTest>

#include <cmath>
#include <random>
#include <vector>

using namespace iwb;

namespace {

using test::max_relative_error;

struct DeltaCase {
  int64_t tokens, key_heads, value_heads, head_dim;
};

struct DeltaData {
  std::vector<float> qkv, alpha, beta, dt_bias, a, state;
};

DeltaData random_delta(const DeltaCase& c, std::mt19937& rng) {
  DeltaData d;
  const auto width = static_cast<size_t>((2 * c.key_heads + c.value_heads) * c.head_dim);
  d.qkv = test::random_floats(static_cast<size_t>(c.tokens) * width, rng);
  d.alpha = test::random_floats(static_cast<size_t>(c.tokens * c.value_heads), rng);
  d.beta = test::random_floats(static_cast<size_t>(c.tokens * c.value_heads), rng);
  d.dt_bias = test::random_floats(static_cast<size_t>(c.value_heads), rng, 0.5f);
  d.a = test::random_floats(static_cast<size_t>(c.value_heads), rng, 0.3f, -1.0f);
  for (float& x : d.a) x = -std::fabs(x);  // -exp(A_log): negative, so every decay is below 1
  d.state = test::random_floats(static_cast<size_t>(c.value_heads * c.head_dim * c.head_dim), rng, 0.1f);
  return d;
}

DeltaNetArgs delta_args(const DeltaCase& c, DeltaData& d, float* out, int64_t first = 0, int64_t count = -1) {
  const int64_t width = (2 * c.key_heads + c.value_heads) * c.head_dim;
  DeltaNetArgs args;
  args.qkv = d.qkv.data() + first * width;
  args.alpha = d.alpha.data() + first * c.value_heads;
  args.beta = d.beta.data() + first * c.value_heads;
  args.dt_bias = d.dt_bias.data();
  args.a = d.a.data();
  args.state = d.state.data();
  args.output = out + first * c.value_heads * c.head_dim;
  args.num_tokens = count < 0 ? c.tokens : count;
  args.num_key_heads = c.key_heads;
  args.num_value_heads = c.value_heads;
  args.head_dim = c.head_dim;
  args.eps = 1e-6f;
  args.num_threads = 2;
  return args;
}

}  // namespace

class TestDeltaNet : public QObject {
  Q_OBJECT

 private slots:
  void shortConvMatchesReference() {
    std::mt19937 rng(11);
    for (const int64_t kernel : {int64_t{4}, int64_t{2}, int64_t{1}}) {
      for (const int64_t tokens : {int64_t{1}, int64_t{7}, int64_t{130}}) {
        const int64_t channels = 769;
        const auto x = test::random_floats(static_cast<size_t>(tokens * channels), rng);
        const auto w = test::random_floats(static_cast<size_t>(channels * kernel), rng, 0.5f);
        const auto s0 = test::random_floats(static_cast<size_t>((kernel - 1) * channels), rng);
        std::vector<float> ref(x.size()), fast(x.size());
        std::vector<float> ref_state = s0, fast_state = s0;
        QVERIFY(short_conv_silu_ref({x.data(), ref.data(), ref_state.data(), w.data(), tokens, channels, kernel}));
        QVERIFY(short_conv_silu({x.data(), fast.data(), fast_state.data(), w.data(), tokens, channels, kernel, 2}));
        QVERIFY2(max_relative_error(fast, ref) < 1e-5,
                 qPrintable(QString("kernel %1 tokens %2").arg(kernel).arg(tokens)));
        QCOMPARE(fast_state, ref_state);
        // The state is the window's last kernel - 1 inputs.
        for (int64_t i = 0; i < kernel - 1; ++i) {
          const int64_t src = tokens - (kernel - 1) + i;  // index into the inputs; negative: the old state
          for (const int64_t c : {int64_t{0}, channels - 1}) {
            const float want = src >= 0 ? x[static_cast<size_t>(src * channels + c)]
                                        : s0[static_cast<size_t>((src + kernel - 1) * channels + c)];
            QCOMPARE(ref_state[static_cast<size_t>(i * channels + c)], want);
          }
        }
      }
    }
  }

  void shortConvInChunksEqualsOneCall() {
    std::mt19937 rng(12);
    const int64_t channels = 97, kernel = 4, tokens = 23;
    const auto x = test::random_floats(static_cast<size_t>(tokens * channels), rng);
    const auto w = test::random_floats(static_cast<size_t>(channels * kernel), rng);
    std::vector<float> whole(x.size()), chunked(x.size());
    std::vector<float> s1(static_cast<size_t>((kernel - 1) * channels), 0.0f), s2 = s1;
    QVERIFY(short_conv_silu({x.data(), whole.data(), s1.data(), w.data(), tokens, channels, kernel}));
    for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 2}, {2, 1}, {3, 15}, {18, 5}}) {
      QVERIFY(short_conv_silu({x.data() + first * channels, chunked.data() + first * channels, s2.data(), w.data(),
                               count, channels, kernel}));
    }
    QCOMPARE(chunked, whole);
    QCOMPARE(s2, s1);
  }

  void deltaNetMatchesReference() {
    std::mt19937 rng(21);
    for (const DeltaCase& c :
         {DeltaCase{1, 2, 4, 16}, DeltaCase{9, 3, 6, 37}, DeltaCase{33, 2, 2, 128}, DeltaCase{5, 1, 3, 5}}) {
      DeltaData d = random_delta(c, rng);
      DeltaData d2 = d;
      std::vector<float> ref(static_cast<size_t>(c.tokens * c.value_heads * c.head_dim));
      std::vector<float> fast(ref.size());
      QVERIFY(delta_net_ref(delta_args(c, d, ref.data())));
      QVERIFY(delta_net(delta_args(c, d2, fast.data())));
      const QString what =
          QString("tokens %1 heads %2/%3 dim %4").arg(c.tokens).arg(c.key_heads).arg(c.value_heads).arg(c.head_dim);
      QVERIFY2(max_relative_error(fast, ref) < 1e-4f, qPrintable(what));
      QVERIFY2(max_relative_error(d2.state, d.state) < 1e-4f, qPrintable(what));
    }
  }

  void deltaNetInChunksEqualsOneCall() {
    std::mt19937 rng(22);
    const DeltaCase c{17, 2, 4, 24};
    DeltaData d = random_delta(c, rng);
    for (float& s : d.state) s = 0.0f;
    DeltaData d2 = d;
    std::vector<float> whole(static_cast<size_t>(c.tokens * c.value_heads * c.head_dim)), chunked(whole.size());
    QVERIFY(delta_net(delta_args(c, d, whole.data())));
    for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 1}, {1, 8}, {9, 1}, {10, 7}}) {
      QVERIFY(delta_net(delta_args(c, d2, chunked.data(), first, count)));
    }
    QCOMPARE(chunked, whole);
    QCOMPARE(d2.state, d.state);
  }

  // One value head over one key head, head size 2, from a zero state, written out by hand.
  void deltaNetFollowsTheRule() {
    const DeltaCase c{2, 1, 1, 2};
    DeltaData d;
    d.qkv = {3, 4, 1, 0, 2,    -1,  // token 0: q, k, v
             0, 1, 0, 2, 0.5f, 1};  // token 1
    d.alpha = {0.0f, 1.0f};
    d.beta = {0.0f, 2.0f};
    d.dt_bias = {0.25f};
    d.a = {-0.5f};
    d.state.assign(4, 0.0f);
    std::vector<float> out(4);
    QVERIFY(delta_net_ref(delta_args(c, d, out.data())));

    auto softplus = [](double x) { return std::log1p(std::exp(x)); };
    auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
    double s[2][2] = {{0, 0}, {0, 0}};
    const double q[2][2] = {{0.6, 0.8}, {0.0, 1.0}};  // L2-normalised
    const double k[2][2] = {{1.0, 0.0}, {0.0, 1.0}};
    const double v[2][2] = {{2, -1}, {0.5, 1}};
    for (int t = 0; t < 2; ++t) {
      const double decay = std::exp(softplus(d.alpha[static_cast<size_t>(t)] + 0.25) * -0.5);
      const double b = sigmoid(d.beta[static_cast<size_t>(t)]);
      for (int j = 0; j < 2; ++j) {
        for (int i = 0; i < 2; ++i) s[j][i] *= decay;
        const double delta = (v[t][j] - (s[j][0] * k[t][0] + s[j][1] * k[t][1])) * b;
        for (int i = 0; i < 2; ++i) s[j][i] += delta * k[t][i];
        const double o = (s[j][0] * q[t][0] + s[j][1] * q[t][1]) / std::sqrt(2.0);
        QVERIFY(std::fabs(out[static_cast<size_t>(t * 2 + j)] - o) < 1e-5);
      }
    }
  }

  void badArgumentsAreRefused() {
    std::vector<float> buf(64, 1.0f);
    QVERIFY(!short_conv_silu({buf.data(), buf.data(), buf.data(), buf.data(), 2, 4, 4}));  // output is the input
    DeltaNetArgs a;
    QVERIFY(!delta_net(a));
    std::mt19937 rng(1);
    DeltaData d = random_delta({1, 2, 3, 4}, rng);
    std::vector<float> out(12);
    QVERIFY(!delta_net(delta_args({1, 2, 3, 4}, d, out.data())));  // 3 value heads over 2 key heads
  }
};

QTEST_APPLESS_MAIN(TestDeltaNet)
#include "test_delta_net.moc"
