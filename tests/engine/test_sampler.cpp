// Sampler: each filter keeps exactly what it claims, draws follow the stated distribution
// (chi-square), penalties change logits by the documented amounts, and seeds reproduce.
#include "iwb/engine/sampling/sampler.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

using namespace iwb;

namespace {

std::vector<float> random_logits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

SamplingParams plain(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  return p;
}

std::vector<double> softmax(const std::vector<float>& logits, double t) {
  double m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += p[i] = std::exp((logits[i] - m) / t);
  for (double& x : p) x /= s;
  return p;
}

}  // namespace

class TestSampler : public QObject {
  Q_OBJECT

 private slots:
  void greedyIsArgmax() {
    const auto logits = random_logits(1001, 1);
    Sampler s(plain(0.0f));
    const int32_t expected = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    for (int i = 0; i < 5; ++i) QCOMPARE(s.sample(logits, {}), expected);
  }

  void sameSeedSameTokens() {
    const auto logits = random_logits(500, 2);
    SamplingParams p = plain(1.0f);
    p.seed = 42;
    Sampler a(p), b(p);
    std::vector<int32_t> ta, tb;
    for (int i = 0; i < 200; ++i) {
      ta.push_back(a.sample(logits, {}));
      tb.push_back(b.sample(logits, {}));
    }
    QCOMPARE(ta, tb);
    p.seed = 43;
    Sampler c(p);
    std::vector<int32_t> tc;
    for (int i = 0; i < 200; ++i) tc.push_back(c.sample(logits, {}));
    QVERIFY(tc != ta);
  }

  void drawsFollowSoftmax() {
    // 12 tokens, temperature 0.7: chi-square of 60000 draws against softmax(l / 0.7).
    const std::vector<float> logits = {0.1f, 1.5f, -0.3f, 2.0f, 0.0f, 0.7f, -1.0f, 1.1f, 0.4f, -0.5f, 1.8f, 0.9f};
    Sampler s(plain(0.7f));
    const auto expected = softmax(logits, 0.7);
    std::vector<int> counts(logits.size());
    const int n = 60000;
    for (int i = 0; i < n; ++i) counts[static_cast<size_t>(s.sample(logits, {}))]++;
    double chi2 = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      const double e = expected[i] * n;
      chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    // 11 degrees of freedom: p = 0.001 at 31.3.
    QVERIFY2(chi2 < 31.3, qPrintable(QString("chi2 = %1").arg(chi2)));
  }

  void topKNeverLeavesTheKBest() {
    const auto logits = random_logits(769, 3);
    SamplingParams p = plain(1.5f);
    p.top_k = 7;
    Sampler s(p);
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    const std::set<int32_t> best(order.begin(), order.begin() + 7);
    std::set<int32_t> seen;
    for (int i = 0; i < 20000; ++i) {
      const int32_t t = s.sample(logits, {});
      QVERIFY(best.count(t));
      seen.insert(t);
    }
    QCOMPARE(seen.size(), size_t(7));  // and every one of them is reachable
  }

  void topPKeepsTheSmallestNucleus() {
    const auto logits = random_logits(300, 4);
    SamplingParams p = plain(1.0f);
    p.top_p = 0.8f;
    const auto c = Sampler(p).candidates(logits, {});
    auto probs = softmax(logits, 1.0);
    std::sort(probs.rbegin(), probs.rend());
    double mass = 0;
    for (size_t i = 0; i + 1 < c.size(); ++i) mass += probs[i];
    QVERIFY(mass < 0.8);                         // one fewer would not reach p
    QVERIFY(mass + probs[c.size() - 1] >= 0.8);  // these do
    double total = 0;
    for (const TokenProb& t : c) total += t.prob;
    QVERIFY(std::abs(total - 1.0) < 1e-5);
  }

  void minPDropsUnlikelyTokens() {
    const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
    SamplingParams p = plain(1.0f);
    p.min_p = 0.2f;  // threshold 0.1: drops the 0.05 token only
    const auto c = Sampler(p).candidates(logits, {});
    QCOMPARE(c.size(), size_t(3));
    QCOMPARE(c[0].id, 0);
    QVERIFY(std::abs(c[2].prob - 0.15f / 0.95f) < 1e-5);
  }

  void penaltiesChangeLogitsAsDocumented() {
    // Token 0 and 1 tie; token 1 appears twice in history. With frequency 0.5 and presence 0.25
    // its logit drops by 2*0.5 + 0.25 = 1.25; greedy then picks token 0.
    std::vector<float> logits = {2.0f, 2.0f, -1.0f};
    SamplingParams p = plain(1.0f);
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    const std::vector<int32_t> history = {1, 2, 1};
    const auto c = Sampler(p).candidates(logits, history);
    std::map<int32_t, float> prob;
    for (const TokenProb& t : c) prob[t.id] = t.prob;
    const auto expected = softmax({2.0f, 0.75f, -1.0f - 0.75f}, 1.0);
    QVERIFY(std::abs(prob[0] - expected[0]) < 1e-5);
    QVERIFY(std::abs(prob[1] - expected[1]) < 1e-5);
    QVERIFY(std::abs(prob[2] - expected[2]) < 1e-5);

    // Repeat penalty divides positive logits and multiplies negative ones.
    SamplingParams r = plain(1.0f);
    r.repeat_penalty = 2.0f;
    const auto rc = Sampler(r).candidates(logits, history);
    std::map<int32_t, float> rp;
    for (const TokenProb& t : rc) rp[t.id] = t.prob;
    const auto rexp = softmax({2.0f, 1.0f, -2.0f}, 1.0);
    QVERIFY(std::abs(rp[1] - rexp[1]) < 1e-5);
    QVERIFY(std::abs(rp[2] - rexp[2]) < 1e-5);
    // Only the last penalty_last_n tokens count.
    r.penalty_last_n = 1;  // history tail is {1}
    const auto tail = Sampler(r).candidates(logits, history);
    for (const TokenProb& t : tail) {
      if (t.id == 2) QVERIFY(std::abs(t.prob - softmax({2.0f, 1.0f, -1.0f}, 1.0)[2]) < 1e-5);
    }
  }

  // The one-pass top-k (a heap of k) keeps what a sort of every finite logit keeps, in the same
  // order, ties broken by the smaller id, on a vocabulary's worth of logits with repeated values
  // and masked (-inf) tokens.
  void topKMatchesAFullSort() {
    std::vector<float> logits = random_logits(151936, 17);
    for (size_t i = 0; i < logits.size(); i += 7) logits[i] = std::round(logits[i] * 4) / 4;  // ties
    for (size_t i = 3; i < logits.size(); i += 13) logits[i] = -INFINITY;
    std::vector<int32_t> order;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isfinite(logits[i])) order.push_back(static_cast<int32_t>(i));
    }
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
    });
    for (const int32_t k : {1, 5, 40, 1000}) {
      SamplingParams p = plain(1.0f);
      p.top_k = k;
      const auto c = Sampler(p).candidates(logits, {});
      QCOMPARE(c.size(), size_t(k));
      for (int32_t i = 0; i < k; ++i) QCOMPARE(c[size_t(i)].id, order[size_t(i)]);
    }
    // Greedy is the first of them.
    QCOMPARE(Sampler(plain(0.0f)).sample(logits, {}), order.front());
    // token_logprobs: the same top ids, and log-probabilities as the double sum gives them.
    const TokenLogprobs lp = token_logprobs(logits, order[3], 6);
    QCOMPARE(lp.top.size(), size_t(6));
    double sum = 0;
    const double top = logits[size_t(order.front())];
    for (const float l : logits) sum += std::exp(double(l) - top);
    for (size_t i = 0; i < 6; ++i) {
      QCOMPARE(lp.top[i].token, order[i]);
      QVERIFY(std::abs(lp.top[i].logprob - (logits[size_t(order[i])] - top - std::log(sum))) < 1e-5);
    }
    QVERIFY(std::abs(lp.logprob - (logits[size_t(order[3])] - top - std::log(sum))) < 1e-5);
  }

  void nonFiniteLogitsAreIgnored() {
    std::vector<float> logits = {-INFINITY, 1.0f, NAN, 0.5f};
    Sampler s(plain(1.0f));
    for (int i = 0; i < 100; ++i) {
      const int32_t t = s.sample(logits, {});
      QVERIFY(t == 1 || t == 3);
    }
    std::vector<float> none = {-INFINITY, -INFINITY};
    QCOMPARE(Sampler(plain(1.0f)).sample(none, {}), -1);
  }
};

QTEST_GUILESS_MAIN(TestSampler)
#include "test_sampler.moc"
