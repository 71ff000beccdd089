// Multi-token prediction: the model's nextn layer as a drafter (--spec mtp). The head's logits
// against the test reference's MTP head (which reads the reference's own hidden states), the
// drafter's guesses against the reference's argmax (the first from the target's hidden state,
// the next from the head's own, as llama.cpp's draft-mtp chains them; after a prefix-cache hit
// from the head's own cache), greedy speculation equal to plain decoding (batched, after a
// prefix-cache hit), the plans, and the refusals.
#include "forward_checks.h"
#include "reference_forward.h"

#include "iwb/engine/backend/cuda_step_plan.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/plan/forward_plan.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/sampling/sampler.h"
#include "iwb/engine/spec/drafter.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"
#include "model/model_weights.h"

#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <map>

using namespace iwb;
using namespace iwb::test;

namespace {

std::string synthesize(const std::string& preset, const std::string& type, const std::string& path) {
  synth::SynthOptions options;
  options.shape = *synth::find_synth_preset(preset);
  options.weight_type = type;
  options.seed = 11;
  options.num_threads = 2;
  options.output_path = path;
  if (auto written = synth::synthesize_model(options); !written.is_ok()) return written.error_message();
  return {};
}

double relative_error(std::span<const float> got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// Every request's tokens, all submitted before the first step.
std::map<RequestId, std::vector<int32_t>> run_all(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                                  int n, spec::SpeculationStats* stats) {
  std::map<RequestId, std::vector<int32_t>> out;
  for (const std::vector<int32_t>& prompt : prompts) {
    Result<RequestId> id = engine.add_request(greedy_request(prompt, n));
    if (!id) return {};
    out[*id];
  }
  while (engine.has_unfinished_requests()) {
    Result<StepResult> s = engine.step();
    if (!s) return {};
    if (!s->stats.speculation_error.empty()) qWarning("%s", s->stats.speculation_error.c_str());
    for (const TokenEvent& e : s->tokens) out[e.request].push_back(e.token);
    if (stats != nullptr) stats->add(s->stats.speculation);
  }
  return out;
}

// The two files llama.cpp's converter writes for one model with --no-mtp and --mtp: the trunk
// (block_count without the head, no nextn key) and the head's mtp- file (every key, the head's
// block and the embedding table, output norm and classifier). Empty on success.
std::string split_head(const std::string& combined, const std::string& trunk_path, const std::string& head_path) {
  auto file = gguf::GgufFile::open(combined);
  if (!file) return file.error_message();
  const gguf::GgufFile& f = **file;
  const std::string a = f.get_string("general.architecture").value_or("");
  const int64_t trunk = f.get_int(a + ".block_count").value_or(0) - f.get_int(a + ".nextn_predict_layers").value_or(0);
  const std::string head_prefix = "blk." + std::to_string(trunk) + ".";
  gguf::GgufWriter trunk_file, head_file;
  for (const gguf::KeyValue& kv : f.metadata()) {
    head_file.set(kv.key, kv.value);
    if (kv.key == a + ".nextn_predict_layers") continue;
    trunk_file.set(kv.key, kv.key == a + ".block_count" ? gguf::Value::u32(static_cast<uint32_t>(trunk)) : kv.value);
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    const bool is_head = t.name.rfind(head_prefix, 0) == 0;
    const bool is_shared = t.name == "token_embd.weight" || t.name == "output_norm.weight" || t.name == "output.weight";
    if (!is_head) {
      if (Status s = trunk_file.add_tensor(t.name, t.shape, t.type, f.tensor_data(t)); !s) return s.message();
    }
    if (is_head || is_shared) {
      if (Status s = head_file.add_tensor(t.name, t.shape, t.type, f.tensor_data(t)); !s) return s.message();
    }
  }
  if (Status s = trunk_file.write_file(trunk_path); !s) return s.message();
  if (Status s = head_file.write_file(head_path); !s) return s.message();
  return {};
}

// A test-glm4moe file's MTP drafter beside the reference's trunk and head.
struct HeadFixture {
  std::unique_ptr<gguf::GgufFile> file;
  ModelConfig config;
  ModelWeights weights;
  RefModel target, head;
  std::unique_ptr<spec::Drafter> drafter;
  std::string error;

  // With head_path: the drafter reads the head from its own file, split from the model's, and
  // runs beside the trunk-only file (the reference reads the whole one).
  bool open(const std::string& file_path, const std::string& head_path = {}) {
    error = synthesize("test-glm4moe", "F32", file_path);
    const std::string trunk_path = file_path + ".trunk.gguf";
    if (error.empty() && !head_path.empty()) error = split_head(file_path, trunk_path, head_path);
    auto opened = gguf::GgufFile::open(head_path.empty() ? file_path : trunk_path);
    if (!error.empty() || !opened.is_ok()) return false;
    file = std::move(*opened);
    Result<ModelConfig> c = model_config_from_gguf(*file);
    if (!c) return (error = c.error_message()), false;
    config = *c;
    Result<ModelWeights> w = bind_model_weights(*file, config);
    if (!w) return (error = w.error_message()), false;
    weights = std::move(*w);
    auto whole = gguf::GgufFile::open(file_path);
    if (!whole) return (error = whole.error_message()), false;
    target = load_reference_model(**whole, &error);
    head = load_reference_model(**whole, &error, 0, /*is_mtp_head=*/true);
    spec::DraftPlacement placement;
    placement.num_threads = 2;
    placement.num_kv_positions = 256;
    Result<std::unique_ptr<spec::Drafter>> d = spec::make_mtp_drafter(*file, config, weights, placement, head_path);
    if (!d) return (error = d.error_message()), false;
    drafter = std::move(*d);
    return error.empty() && drafter->reads_hidden_states();
  }

  // The target's rows of positions [from, to) handed over for sequence `key`.
  bool observe(uint64_t key, const std::vector<int32_t>& tokens, const std::vector<std::vector<float>>& hidden,
               size_t from, size_t to) {
    std::vector<float> rows;
    for (size_t p = from; p < to; ++p) rows.insert(rows.end(), hidden[p].begin(), hidden[p].end());
    const spec::HiddenStates h{key, static_cast<int64_t>(from), tokens, rows};
    return drafter->observe_hidden_states({&h, 1}).is_ok();
  }

  // K guesses after `tokens` (whose last token the target runs next), sampled at temperature 1
  // with no filter so that each comes with the head's whole distribution: the reference head's
  // softmax, the first reading the target's state before the last token, each next one reading
  // the head's own state after the guess before.
  void expect_guesses(uint64_t key, const std::vector<int32_t>& tokens, const std::vector<std::vector<float>>& hidden,
                      int32_t k) {
    spec::DraftRequest request{key, tokens, k, {}};
    request.sampling.temperature = 1.0f;
    request.sampling.top_k = 0;
    request.sampling.top_p = 1.0f;
    request.sampling.min_p = 0.0f;
    request.sampling.repeat_penalty = 1.0f;
    Result<std::vector<spec::Draft>> drafts = drafter->draft({&request, 1});
    QVERIFY(drafts.is_ok());
    QCOMPARE(drafts->size(), size_t{1});
    const spec::Draft& d = (*drafts)[0];
    QCOMPARE(d.tokens.size(), static_cast<size_t>(k));
    QCOMPARE(d.probabilities.size(), static_cast<size_t>(k));
    std::vector<int32_t> seq = tokens;
    std::vector<std::vector<float>> inputs(hidden.begin(), hidden.begin() + static_cast<ptrdiff_t>(tokens.size() - 1));
    double worst = 0;
    for (size_t j = 0; j < static_cast<size_t>(k); ++j) {
      std::vector<float> own;
      std::vector<float> want = reference_mtp_logits(head, seq, inputs, &own);
      const float top = *std::max_element(want.begin(), want.end());
      double sum = 0;
      for (float& z : want) sum += (z = std::exp(z - top));
      QCOMPARE(d.probabilities[j].size(), want.size());
      for (const TokenProb& c : d.probabilities[j]) {
        worst = std::max(worst, std::abs(c.prob - want[static_cast<size_t>(c.id)] / sum));
      }
      seq.push_back(d.tokens[j]);
      inputs.push_back(own);  // the next guess reads the head's own state
    }
    qInfo("guesses' distributions within %.2e of the reference head's", worst);
    QVERIFY2(worst < 1e-6, qPrintable(QString::number(worst)));  // a zero state at one position: 1.7e-5
  }
};

}  // namespace

class TestMtpDrafter : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_tmp;

  std::string path(const char* name) const { return m_tmp.filePath(name).toStdString(); }

 private slots:
  void headMatchesReference_data() {
    QTest::addColumn<QString>("type");
    QTest::newRow("F32") << "F32";
    QTest::newRow("Q8_0") << "Q8_0";
    QTest::newRow("Q4_K_M") << "Q4_K_M";
  }

  // iwb logits --mtp's rows: the head at every position, reading the target's hidden state of
  // the position before, equal to the reference's (f32 activations: IWB_MATMUL_EXACT=1).
  void headMatchesReference() {
    QFETCH(QString, type);
    const std::string file_path = path(("glm-" + type.toStdString() + ".gguf").c_str());
    QCOMPARE(QString::fromStdString(synthesize("test-glm4moe", type.toStdString(), file_path)), QString());
    RefModel target;
    std::unique_ptr<Engine> engine;
    QCOMPARE(QString::fromStdString(load_reference_and_engine(file_path, &target, &engine)), QString());
    auto file = gguf::GgufFile::open(file_path);
    QVERIFY(file.is_ok());
    std::string error;
    const RefModel head = load_reference_model(**file, &error, 0, /*is_mtp_head=*/true);
    QCOMPARE(QString::fromStdString(error), QString());
    QCOMPARE(head.n_layer, int64_t{1});

    const std::vector<int32_t> tokens = random_tokens(12, target.vocab, 5);
    std::vector<std::vector<float>> rows;
    QVERIFY(engine->mtp_logits_for_positions(tokens, [&](int64_t p, std::span<const float> logits) -> Status {
      if (p != static_cast<int64_t>(rows.size())) return make_error(ErrorCode::InvalidArgument, "out of order");
      rows.emplace_back(logits.begin(), logits.end());
      return {};
    }));
    QCOMPARE(rows.size(), tokens.size());
    const std::vector<std::vector<float>> hidden = reference_hidden_states(target, tokens);
    double worst = 0;
    for (const size_t n : {size_t{1}, size_t{2}, size_t{7}, tokens.size()}) {
      const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(n));
      const std::vector<float> want = reference_mtp_logits(head, prefix, hidden);
      worst = std::max(worst, relative_error(rows[n - 1], want));
      QCOMPARE(argmax(rows[n - 1]), argmax(want));
    }
    qInfo("%s: MTP head within %.2e of the reference", qPrintable(type), worst);
    QVERIFY2(worst < 5e-3, qPrintable(QString::number(worst)));
    // The head's rows are not the model's: it predicts a token further on.
    std::vector<float> model_logits;
    QVERIFY(engine->logits_for_positions(tokens, static_cast<int64_t>(tokens.size()) - 1,
                                         [&](int64_t, std::span<const float> l) -> Status {
                                           model_logits.assign(l.begin(), l.end());
                                           return {};
                                         }));
    QVERIFY(relative_error(rows.back(), model_logits) > 0.05);
  }

  // The drafter on its own: given the target's hidden states as the engine hands them over
  // (in two parts), its first guess is the head's argmax and the next ones the head's argmax on
  // its own hidden state after its previous guess.
  void guessesFollowTheHead() {
    HeadFixture f;
    QVERIFY2(f.open(path("glm-guess.gguf")), qPrintable(QString::fromStdString(f.error)));
    const std::vector<int32_t> tokens = random_tokens(10, f.target.vocab, 9);
    const std::vector<std::vector<float>> hidden = reference_hidden_states(f.target, tokens);
    // The target computed positions 0..8 (its last token, 9, is the next it runs): rows of 0..3,
    // then of 4..8, as two steps hand them over.
    QVERIFY(f.observe(7, tokens, hidden, 0, 4));
    QVERIFY(f.observe(7, tokens, hidden, 4, 9));
    f.expect_guesses(7, tokens, hidden, 3);
  }

  // A second sequence whose target took its first block from the prefix cache (so its states
  // there never reach the head): the head starts from the first sequence's cached block and the
  // target state it kept at that block's end, and guesses as if it had seen every state.
  void prefixCacheHitKeepsTheHeadExact() {
    HeadFixture f;
    QVERIFY2(f.open(path("glm-prefix.gguf")), qPrintable(QString::fromStdString(f.error)));
    const std::vector<int32_t> first = random_tokens(24, f.target.vocab, 21);
    QVERIFY(f.observe(1, first, reference_hidden_states(f.target, first), 0, 23));
    f.drafter->release(1);  // finished: its full block stays in the head's cache
    std::vector<int32_t> second(first.begin(), first.begin() + 16);
    const std::vector<int32_t> tail = random_tokens(8, f.target.vocab, 22);
    second.insert(second.end(), tail.begin(), tail.end());
    const std::vector<std::vector<float>> hidden = reference_hidden_states(f.target, second);
    QVERIFY(f.observe(2, second, hidden, 16, 23));  // positions 0..15 came from the target's cache
    f.expect_guesses(2, second, hidden, 6);
  }

  // --spec-draft-p-min: the draft ends before the first guess whose probability among its 10
  // most likely tokens is below the bound (llama.cpp's draft sampler), here just above or
  // just below the reference head's first guess's; out of range is refused.
  void minProbabilityEndsDrafts() {
    HeadFixture f;
    QVERIFY2(f.open(path("glm-pmin.gguf")), qPrintable(QString::fromStdString(f.error)));
    const std::vector<int32_t> tokens = random_tokens(8, f.target.vocab, 41);
    const std::vector<std::vector<float>> hidden = reference_hidden_states(f.target, tokens);
    QVERIFY(f.observe(5, tokens, hidden, 0, 7));
    std::vector<float> logits =
        reference_mtp_logits(f.head, tokens, {hidden.begin(), hidden.begin() + static_cast<ptrdiff_t>(7)});
    std::sort(logits.begin(), logits.end(), std::greater<>());
    double sum = 0;
    for (size_t i = 0; i < 10; ++i) sum += std::exp(logits[i] - logits[0]);
    const auto first = static_cast<float>(1.0 / sum);  // the top guess's share of the top 10
    for (const auto& [bound, expected] : {std::pair{first * 1.01f, size_t{0}}, std::pair{first * 0.99f, size_t{1}}}) {
      spec::DraftRequest request{5, tokens, 3, {}, bound};
      request.sampling.temperature = 0.0f;
      Result<std::vector<spec::Draft>> drafts = f.drafter->draft({&request, 1});
      QVERIFY(drafts.is_ok());
      QVERIFY2((*drafts)[0].tokens.size() >= expected && (expected > 0 || (*drafts)[0].tokens.empty()),
               qPrintable(QString::number((*drafts)[0].tokens.size())));
    }
    spec::SpeculativeConfig c;
    c.kind = spec::DrafterKind::Mtp;
    c.draft_min_probability = 1.5f;
    QVERIFY(!spec::validate(c).is_ok());
  }

  // The head from its own mtp- file beside a trunk converted without it (llama.cpp's --mtp and
  // --no-mtp): the same guesses as the head inside the whole file; the trunk alone refuses MTP
  // with the way out, and a file announcing a head it lacks, or another model's head, is named.
  void headFromItsOwnFile() {
    HeadFixture f;
    const std::string head_path = path("mtp-glm.gguf");
    QVERIFY2(f.open(path("glm-split.gguf"), head_path), qPrintable(QString::fromStdString(f.error)));
    QCOMPARE(f.config.num_nextn_layers, int64_t{0});
    const std::vector<int32_t> tokens = random_tokens(12, f.target.vocab, 31);
    const std::vector<std::vector<float>> hidden = reference_hidden_states(f.target, tokens);
    QVERIFY(f.observe(3, tokens, hidden, 0, 11));
    f.expect_guesses(3, tokens, hidden, 4);

    auto engine = Engine::load(path("glm-split.gguf.trunk.gguf"), {0, 2});
    QVERIFY(engine.is_ok());
    spec::SpeculativeConfig c;
    c.kind = spec::DrafterKind::Mtp;
    Status s = (*engine)->set_speculation(c);
    QVERIFY2(!s.is_ok() && s.message().find("mtp- file with -md") != std::string::npos, s.message().c_str());
    c.draft_model_path = head_path;
    s = (*engine)->set_speculation(c);
    QVERIFY2(s.is_ok(), s.message().c_str());
    const std::vector<int32_t> prompt = random_tokens(9, f.target.vocab, 32);
    QCOMPARE(run_all(**engine, {prompt}, 12, nullptr).begin()->second.size(), size_t{12});

    // The whole file with the head's tensors gone: the key promises what the file lacks.
    const std::string trunk_only = path("glm-split.gguf.trunk.gguf"), promised = path("glm-promised.gguf");
    {
      auto trunk = gguf::GgufFile::open(trunk_only);
      QVERIFY(trunk.is_ok());
      gguf::GgufWriter w;
      for (const gguf::KeyValue& kv : (*trunk)->metadata()) w.set(kv.key, kv.value);
      w.set_u32("glm4moe.block_count", static_cast<uint32_t>(f.config.num_layers + 1));
      w.set_u32("glm4moe.nextn_predict_layers", 1);
      for (const gguf::TensorInfo& t : (*trunk)->tensors())
        QVERIFY(w.add_tensor(t.name, t.shape, t.type, (*trunk)->tensor_data(t)));
      QVERIFY(w.write_file(promised));
    }
    auto broken = Engine::load(promised, {0, 2});
    QVERIFY(broken.is_ok());
    c.draft_model_path.clear();
    s = (*broken)->set_speculation(c);
    QVERIFY2(!s.is_ok() && s.message().find("holds no 'blk.4.nextn.eh_proj.weight'") != std::string::npos,
             s.message().c_str());
    // Another model's head.
    const std::string other = path("mtp-deepseek.gguf");
    synth::SynthOptions o;
    o.shape = *synth::find_synth_preset("test-deepseek2");
    o.shape.num_nextn_layers = 1;
    o.weight_type = "F32";
    o.output_path = other;
    QVERIFY(synth::synthesize_model(o).is_ok());
    c.draft_model_path = other;
    s = (*engine)->set_speculation(c);
    QVERIFY2(!s.is_ok() && s.message().find("is a deepseek2 file; the model is glm4moe") != std::string::npos,
             s.message().c_str());
  }

  // Speculation changes no greedy token: several sequences batched, one of them after a
  // prefix-cache hit (its cached positions' hidden states never reach the head). Batch-invariant
  // matmuls (IWB_MATMUL_EXACT=1): verifying K + 1 rows must round as decoding one does.
  void greedySpeculationEqualsPlain() {
    const std::string file_path = path("glm-spec.gguf");
    QCOMPARE(QString::fromStdString(synthesize("test-glm4moe", "Q8_0", file_path)), QString());
    auto engine = Engine::load(file_path, {0, 2});
    QVERIFY(engine.is_ok());
    const std::vector<int32_t> a = random_tokens(20, 320, 1), b = random_tokens(9, 320, 2);
    std::vector<int32_t> shared = a;  // a's first 16 tokens (one full block) and more
    shared.resize(16);
    const std::vector<int32_t> tail = random_tokens(5, 320, 3);
    shared.insert(shared.end(), tail.begin(), tail.end());
    const std::vector<std::vector<int32_t>> prompts = {a, b, shared};
    std::vector<std::vector<int32_t>> plain;
    for (const std::vector<int32_t>& p : prompts) plain.push_back(engine_greedy(**engine, p, 24));

    spec::SpeculativeConfig c;
    c.kind = spec::DrafterKind::Mtp;
    c.num_draft_tokens = 3;
    QVERIFY((*engine)->set_speculation(c).is_ok());
    spec::SpeculationStats stats;
    const std::map<RequestId, std::vector<int32_t>> batched = run_all(**engine, {a, b}, 24, &stats);
    QCOMPARE(batched.size(), size_t{2});
    QCOMPARE(batched.begin()->second, plain[0]);
    QCOMPARE(std::next(batched.begin())->second, plain[1]);
    const std::map<RequestId, std::vector<int32_t>> after_hit = run_all(**engine, {shared}, 24, &stats);
    QCOMPARE(after_hit.begin()->second, plain[2]);
    QVERIFY(stats.num_verify_steps > 0);
    // Three guesses a step, fewer only where a request's last tokens leave less room.
    QVERIFY(stats.num_drafted <= 3 * stats.num_verify_steps && stats.num_drafted > 2 * stats.num_verify_steps);
    QVERIFY((*engine)->memory_report().drafter_bytes > 0);
    // Off again: the backend stops keeping hidden states; the tokens stay the same.
    QVERIFY((*engine)->set_speculation({}).is_ok());
    QCOMPARE(engine_greedy(**engine, a, 24), plain[0]);
  }

  void plansCheck() {
    const ModelConfig config = synth::shape_config(*synth::find_synth_preset("glm-4.5-air"));
    const ForwardPlan model = build_forward_plan(config);
    PlanOptions exported;
    exported.exports_hidden = true;
    const ForwardPlan exporting = build_forward_plan(config, nullptr, exported);
    QVERIFY(check_forward_plan(exporting).is_ok());
    QCOMPARE(exporting.body.back().output, PlanBuffer::Hidden);
    QCOMPARE(exporting.logits.front().input, PlanBuffer::Hidden);
    // The last layer's FFN and the output norm move into the body: the same kernels in all.
    QCOMPARE(num_plan_records(exporting, true), num_plan_records(model, true));
    QVERIFY(num_plan_records(exporting, false) > num_plan_records(model, false));

    PlanOptions head;
    head.is_mtp_head = true;
    const ModelConfig head_config = mtp_head_config(config);
    QCOMPARE(head_config.num_layers, int64_t{1});
    QVERIFY(head_config.is_expert_layer(0));  // GLM-4.5-Air's prediction layer routes to experts
    const ForwardPlan mtp = build_forward_plan(head_config, nullptr, head);
    QVERIFY(check_forward_plan(mtp).is_ok());
    QVERIFY(mtp.options.exports_hidden);
    QCOMPARE(mtp.body[4].kind, PlanOpKind::Matmuls);  // embedding, enorm, hnorm, concat, eh_proj
    QCOMPARE(mtp.body[4].products[0].in_features, 2 * config.embedding_length);
    // Without the caller's hidden rows the head's plan reads a buffer nothing wrote.
    ForwardPlan unread = mtp;
    unread.options.is_mtp_head = false;
    QVERIFY(!check_forward_plan(unread).is_ok());
    QVERIFY(check_cuda_plan_support(mtp).message().find("multi-token prediction") != std::string::npos);
  }

  void modelsWithoutHeadAreRefused() {
    const std::string file_path = path("qwen3.gguf");
    QCOMPARE(QString::fromStdString(synthesize("test-qwen3", "F32", file_path)), QString());
    auto engine = Engine::load(file_path, {0, 2});
    QVERIFY(engine.is_ok());
    spec::SpeculativeConfig c;
    c.kind = spec::DrafterKind::Mtp;
    const Status s = (*engine)->set_speculation(c);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("multi-token-prediction") != std::string::npos, s.message().c_str());
    QVERIFY(!(*engine)->mtp_logits_for_positions({5, 6}, [](int64_t, std::span<const float>) { return Status{}; }));
    // The engine goes on without speculation.
    QCOMPARE(engine_greedy(**engine, {5, 6, 7}, 4).size(), size_t{4});
    Result<spec::DrafterKind> kind = spec::parse_drafter_kind("draft-mtp");
    QVERIFY(kind.is_ok() && *kind == spec::DrafterKind::Mtp);
  }
};

QTEST_GUILESS_MAIN(TestMtpDrafter)
#include "test_mtp_drafter.moc"
