// Speculative sampling keeps the target's distribution. The acceptance rule over explicit
// small distributions (many draws, chi-square per draft position, the acceptance rate against
// sum(min(p, q)), and a wrong rule that the same test must catch); then the engine end to end
// on the tiny aidreams model with a drafter whose guesses come from a distribution of its own:
// the joint distribution of the sampled tokens against the target's, computed from its logits.
#include "iwb/engine/convert/llama2c.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/spec/acceptance.h"
#include "iwb/engine/spec/drafter.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>
#include <random>
#include "test_paths.h"

using namespace iwb;

namespace {

using Counts = std::map<int32_t, int64_t>;
using Probs = std::map<int32_t, double>;

// Pearson's statistic with cells of expected count < 5 pooled; false when it exceeds the
// p = 1e-4 critical value (Wilson-Hilferty approximation of the chi-square quantile).
bool chi_square_fits(const Counts& observed, const Probs& expected, int64_t n, double* statistic, int* dof) {
  double chi = 0, pooled_expected = 0, pooled_observed = 0;
  int cells = 0;
  for (const auto& [id, p] : expected) {
    const double e = p * static_cast<double>(n);
    const auto it = observed.find(id);
    const double o = it == observed.end() ? 0.0 : static_cast<double>(it->second);
    if (e < 5) {
      pooled_expected += e;
      pooled_observed += o;
      continue;
    }
    chi += (o - e) * (o - e) / e;
    ++cells;
  }
  for (const auto& [id, count] : observed) {
    if (expected.count(id) == 0) pooled_observed += static_cast<double>(count);  // impossible outcomes
  }
  if (pooled_expected > 0 || pooled_observed > 0) {
    const double e = std::max(pooled_expected, 0.5);
    chi += (pooled_observed - e) * (pooled_observed - e) / e;
    ++cells;
  }
  const int k = std::max(1, cells - 1);
  const double z = 3.719;  // one-sided p = 1e-4
  const double a = 2.0 / (9.0 * k);
  const double critical = k * std::pow(1.0 - a + z * std::sqrt(a), 3);
  *statistic = chi;
  *dof = k;
  return chi <= critical;
}

std::vector<TokenProb> sparse(std::initializer_list<double> probs) {
  std::vector<TokenProb> out;
  int32_t id = 0;
  for (const double p : probs) {
    if (p > 0) out.push_back({id, static_cast<float>(p)});
    ++id;
  }
  return out;
}

Probs as_map(const std::vector<TokenProb>& d) {
  Probs m;
  for (const TokenProb& t : d) m[t.id] += t.prob;
  return m;
}

// Guesses drawn from a fixed distribution of its own, per position: rejections are frequent
// and the residual draw is exercised.
class FixedDistributionDrafter final : public spec::Drafter {
 public:
  explicit FixedDistributionDrafter(std::vector<TokenProb> q) : m_q(std::move(q)) {}
  std::string name() const override { return "fixed distribution"; }
  Result<std::vector<spec::Draft>> draft(std::span<const spec::DraftRequest> requests) override {
    std::vector<spec::Draft> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      for (int32_t j = 0; j < requests[i].num_draft_tokens; ++j) {
        const double u = static_cast<double>(m_rng() >> 11) * 0x1.0p-53;
        out[i].tokens.push_back(spec::sample_sparse(m_q, u));
        out[i].probabilities.push_back(m_q);
      }
    }
    return out;
  }

 private:
  std::vector<TokenProb> m_q;
  std::mt19937_64 m_rng{12345};
};

}  // namespace

class TestSpecSampling : public QObject {
  Q_OBJECT

 private slots:
  void acceptanceRuleKeepsTheTargetDistribution() {
    const std::vector<std::vector<TokenProb>> targets = {
        sparse({0.40, 0.25, 0.15, 0.10, 0.07, 0.03}), sparse({0.05, 0.05, 0.60, 0.10, 0.10, 0.10}),
        sparse({0.30, 0.00, 0.30, 0.00, 0.20, 0.20}), sparse({0.10, 0.20, 0.30, 0.40, 0.00, 0.00})};
    const std::vector<std::vector<TokenProb>> drafts = {sparse({0.10, 0.40, 0.10, 0.10, 0.10, 0.20}),
                                                        sparse({0.20, 0.00, 0.50, 0.30, 0.00, 0.00}),
                                                        sparse({0.00, 0.50, 0.25, 0.00, 0.25, 0.00})};
    std::mt19937_64 rng(7);
    auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
    const int64_t trials = 120000;
    std::vector<Counts> at(4);
    std::vector<int64_t> reached(4, 0);
    int64_t accepted_first = 0;
    for (int64_t t = 0; t < trials; ++t) {
      std::vector<int32_t> guesses;
      for (const auto& q : drafts) guesses.push_back(spec::sample_sparse(q, uniform()));
      const spec::VerifyOutcome o = spec::verify_sampled(targets, drafts, guesses, uniform);
      QCOMPARE(static_cast<int>(o.tokens.size()), o.num_accepted + 1);
      accepted_first += o.num_accepted >= 1 ? 1 : 0;
      for (size_t j = 0; j < o.tokens.size(); ++j) {
        ++at[j][o.tokens[j]];
        ++reached[j];
      }
    }
    for (size_t j = 0; j < 4; ++j) {
      double chi = 0;
      int dof = 0;
      QVERIFY2(chi_square_fits(at[j], as_map(targets[j]), reached[j], &chi, &dof),
               qPrintable(QString("position %1: chi2 %2 with %3 dof").arg(j).arg(chi).arg(dof)));
    }
    // P(accept) at the first position is sum(min(p, q)).
    double overlap = 0;
    const Probs p = as_map(targets[0]), q = as_map(drafts[0]);
    for (const auto& [id, pt] : p) overlap += std::min(pt, q.count(id) ? q.at(id) : 0.0);
    const double rate = static_cast<double>(accepted_first) / trials;
    QVERIFY2(std::abs(rate - overlap) < 4 * std::sqrt(overlap * (1 - overlap) / trials),
             qPrintable(QString("acceptance %1, expected %2").arg(rate).arg(overlap)));

    // The same test rejects a wrong rule: resampling from p_t (not the residual) on rejection
    // over-weights the tokens the draft proposes.
    Counts wrong;
    for (int64_t t = 0; t < trials; ++t) {
      const int32_t guess = spec::sample_sparse(drafts[0], uniform());
      const bool ok = spec::accept_draft_token(targets[0], drafts[0], guess, uniform());
      ++wrong[ok ? guess : spec::sample_sparse(targets[0], uniform())];
    }
    double chi = 0;
    int dof = 0;
    QVERIFY(!chi_square_fits(wrong, as_map(targets[0]), trials, &chi, &dof));
  }

  void oneHotDraftsAndEdgeCases() {
    const std::vector<TokenProb> target = sparse({0.5, 0.3, 0.2});
    // One-hot (deterministic) drafts: accepted with probability p_t(d).
    QVERIFY(spec::accept_draft_token(target, {}, 1, 0.29));
    QVERIFY(!spec::accept_draft_token(target, {}, 1, 0.31));
    // The residual of a one-hot draft is p_t without the rejected token, renormalised.
    for (double u : {0.0, 0.3, 0.6, 0.99}) QVERIFY(spec::sample_residual(target, {}, 0, u) != 0);
    QCOMPARE(spec::sample_residual(target, {}, 0, 0.5), 1);  // 0.3 / 0.5 of the mass is token 1
    // A token the target cannot give is never accepted.
    QVERIFY(!spec::accept_draft_token(target, {}, 7, 0.0));
    QCOMPARE(spec::sample_sparse({}, 0.5), -1);
  }

  // End to end: x1 (plain), then x2 and x3 verified against a fixed-distribution drafter.
  void engineSamplesFollowTheTarget() {
    const std::string dir = iwb::test::shared_models_dir() + "/llama2c/";
    if (!QFile::exists(QString::fromStdString(dir + "aidreams260K.bin"))) QSKIP("shared aidreams model absent");
    QTemporaryDir tmp;
    const std::string path = tmp.filePath("aidreams.gguf").toStdString();
    QVERIFY(
        convert::convert_llama2c_to_gguf(dir + "aidreams260K.bin", dir + "aidreams260K-tok512.bin", path, {}).is_ok());

    EngineOptions options;
    options.num_threads = 1;
    options.max_batch_tokens = 512;
    options.max_running_sequences = 128;
    auto reference = Engine::load(path, options);
    QVERIFY(reference.is_ok());
    Engine& ref = **reference;
    SamplingParams sampling;
    sampling.temperature = 1.0f;
    sampling.top_k = 5;
    sampling.top_p = 1.0f;
    sampling.min_p = 0.0f;
    sampling.repeat_penalty = 1.0f;
    const Sampler filter(sampling);
    const std::vector<int32_t> prompt = ref.tokenizer().encode("Once upon a time, there was a little");
    auto distribution = [&](const std::vector<int32_t>& tokens) {
      Result<std::vector<float>> logits = ref.logits_for(tokens);
      return logits ? filter.candidates(*logits, tokens) : std::vector<TokenProb>{};
    };
    const std::vector<TokenProb> p1 = distribution(prompt);
    QCOMPARE(p1.size(), size_t{5});
    // The drafter's guesses: the likeliest second tokens, weighted unlike the target, plus
    // tokens the target never gives.
    std::vector<int32_t> mode_context = prompt;
    mode_context.push_back(p1.front().id);
    const std::vector<TokenProb> p2_mode = distribution(mode_context);
    std::vector<TokenProb> q;
    for (size_t i = 0; i < p2_mode.size(); ++i) q.push_back({p2_mode[i].id, static_cast<float>(1 + i)});
    q.push_back({200, 2.0f});
    q.push_back({300, 1.0f});
    float total = 0;
    for (const TokenProb& t : q) total += t.prob;
    for (TokenProb& t : q) t.prob /= total;

    auto engine = Engine::load(path, options);
    QVERIFY(engine.is_ok());
    spec::SpeculativeConfig config;
    config.num_draft_tokens = 2;
    QVERIFY((*engine)->set_drafter(std::make_unique<FixedDistributionDrafter>(q), config).is_ok());
    const int n = 4000;
    for (int i = 0; i < n; ++i) {
      GenerationRequest r;
      r.prompt_tokens = prompt;
      r.sampling = sampling;
      r.sampling.seed = 1000 + static_cast<uint64_t>(i);
      r.max_new_tokens = 4;
      r.stop_at_end_of_generation = false;
      QVERIFY((*engine)->add_request(r).is_ok());
    }
    std::map<RequestId, std::vector<int32_t>> out;
    spec::SpeculationStats stats;
    while ((*engine)->has_unfinished_requests()) {
      Result<StepResult> s = (*engine)->step();
      QVERIFY2(s.is_ok(), s.error_message().c_str());
      for (const TokenEvent& e : s->tokens) out[e.request].push_back(e.token);
      stats.add(s->stats.speculation);
    }
    QCOMPARE(static_cast<int>(out.size()), n);
    QVERIFY(stats.num_accepted > 0 && stats.num_accepted < stats.num_drafted);

    // Joint (x1, x2) against p(x1) p(x2 | x1), cells keyed x1 * vocab + x2.
    const int32_t vocab = static_cast<int32_t>(ref.config().vocab_size);
    Probs joint;
    std::map<int32_t, std::vector<TokenProb>> p2;
    for (const TokenProb& a : p1) {
      std::vector<int32_t> context = prompt;
      context.push_back(a.id);
      p2[a.id] = distribution(context);
      for (const TokenProb& b : p2[a.id]) joint[a.id * vocab + b.id] = static_cast<double>(a.prob) * b.prob;
    }
    Counts observed12;
    Counts observed23;  // (x2, x3) given x1 = the mode
    int64_t n_mode = 0;
    for (const auto& [id, tokens] : out) {
      QCOMPARE(tokens.size(), size_t{4});
      ++observed12[tokens[0] * vocab + tokens[1]];
      if (tokens[0] == p1.front().id) {
        ++observed23[tokens[1] * vocab + tokens[2]];
        ++n_mode;
      }
    }
    double chi = 0;
    int dof = 0;
    QVERIFY2(chi_square_fits(observed12, joint, n, &chi, &dof),
             qPrintable(QString("(x1,x2): chi2 %1, %2 dof").arg(chi).arg(dof)));
    Probs joint23;
    for (const TokenProb& b : p2[p1.front().id]) {
      std::vector<int32_t> context = mode_context;
      context.push_back(b.id);
      for (const TokenProb& c : distribution(context))
        joint23[b.id * vocab + c.id] = static_cast<double>(b.prob) * c.prob;
    }
    QVERIFY(n_mode > 400);
    QVERIFY2(chi_square_fits(observed23, joint23, n_mode, &chi, &dof),
             qPrintable(QString("(x2,x3 | x1): chi2 %1, %2 dof").arg(chi).arg(dof)));
  }
};

QTEST_GUILESS_MAIN(TestSpecSampling)
#include "test_spec_sampling.moc"
