// collect_imatrix: an ActivationObserver summing squared matmul inputs per channel while the
// calibration chunks run (each from an empty cache, BOS first when the model adds one), and the
// perplexity of each chunk's second half from the same logits (llama-imatrix's [i] values).
#include "iwb/engine/quant/imatrix_collect.h"

#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

namespace iwb::quant {
namespace {

class Collector final : public ActivationObserver {
 public:
  Collector(Imatrix* out, bool include_output) : m_out(out), m_include_output(include_output) {}

  void observe_matmul_input(const char* weight, int64_t layer, const float* input, int64_t num_rows,
                            int64_t num_features) override {
    const std::string kind(weight);
    if (kind == "output" && !m_include_output) return;
    const std::string name = layer >= 0 ? "blk." + std::to_string(layer) + "." + kind + ".weight" : kind + ".weight";
    ImatrixEntry& e = m_out->entries[name];
    if (e.sum_squares.empty()) e.sum_squares.assign(static_cast<size_t>(num_features), 0.0);
    if (static_cast<int64_t>(e.sum_squares.size()) != num_features) return;  // cannot happen for one model
    for (int64_t r = 0; r < num_rows; ++r) {
      const float* x = input + r * num_features;
      for (int64_t j = 0; j < num_features; ++j) e.sum_squares[static_cast<size_t>(j)] += static_cast<double>(x[j]) * x[j];
    }
    e.num_rows += num_rows;
    ++e.num_calls;
  }

  void observe_expert_matmul_input(const char* weight, int64_t layer, int64_t expert, int64_t num_experts,
                                   const float* input, int64_t num_rows, int64_t num_features) override {
    if (expert < 0 || expert >= num_experts) return;
    ImatrixEntry& e = m_out->entries["blk." + std::to_string(layer) + "." + weight + ".weight"];
    if (e.sum_squares.empty()) {
      e.sum_squares.assign(static_cast<size_t>(num_experts * num_features), 0.0);
      e.expert_rows.assign(static_cast<size_t>(num_experts), 0);
    }
    if (e.expert_rows.size() != static_cast<size_t>(num_experts) ||
        e.sum_squares.size() != static_cast<size_t>(num_experts * num_features)) {
      return;  // cannot happen for one model
    }
    double* sums = e.sum_squares.data() + expert * num_features;
    for (int64_t r = 0; r < num_rows; ++r) {
      const float* x = input + r * num_features;
      for (int64_t j = 0; j < num_features; ++j) sums[j] += static_cast<double>(x[j]) * x[j];
    }
    e.expert_rows[static_cast<size_t>(expert)] += num_rows;
    e.num_rows += num_rows;
  }

  // llama-imatrix's ncall for an expert tensor: its busiest expert's rows in chunks of the
  // context, rounded up (what a later merge of imatrix files weights the entry by).
  void finish_expert_calls(int64_t context) {
    for (auto& [name, e] : m_out->entries) {
      if (e.expert_rows.empty()) continue;
      const int64_t busiest = *std::max_element(e.expert_rows.begin(), e.expert_rows.end());
      e.num_calls = static_cast<int32_t>(
          std::clamp<int64_t>((busiest + context - 1) / context, 1, std::numeric_limits<int32_t>::max()));
    }
  }

 private:
  Imatrix* m_out;
  bool m_include_output;
};

}  // namespace

Result<Imatrix> collect_imatrix(const ImatrixOptions& o, ImatrixPerplexity* perplexity) {
  if (o.text.empty()) return make_error(ErrorCode::InvalidArgument, "the calibration text is empty");
  Result<std::unique_ptr<Engine>> engine = Engine::load(o.model_path, *eval_engine_options(o.context, o.num_threads));
  if (!engine) return engine.status();
  Engine& e = **engine;
  const std::vector<int32_t> tokens = e.tokenizer().encode(o.text);
  Result<ChunkPlan> plan = plan_chunks(static_cast<int64_t>(tokens.size()), o.context, 0, o.num_chunks);
  if (!plan) return plan.status();

  Imatrix m;
  m.dataset = o.text_name;
  Collector collector(&m, o.include_output);
  // Off again however this returns: the observer lives on this stack.
  struct Detach {
    Engine& engine;
    ~Detach() { engine.set_activation_observer(nullptr); }
  } detach{e};
  e.set_activation_observer(&collector);
  const bool add_bos = e.tokenizer().vocab().add_bos && e.tokenizer().bos() >= 0;
  const auto num_chunks = static_cast<int64_t>(plan->starts.size());
  double nll_sum = 0, nll_squares = 0;
  int64_t num_scored = 0;
  for (int64_t c = 0; c < num_chunks; ++c) {
    if (o.cancel != nullptr && o.cancel->load()) return make_error(ErrorCode::InvalidArgument, "imatrix collection cancelled");
    if (o.progress) o.progress(c, num_chunks);
    const int64_t start = plan->starts[static_cast<size_t>(c)];
    std::vector<int32_t> chunk(tokens.begin() + start, tokens.begin() + start + o.context);
    if (add_bos) chunk[0] = e.tokenizer().bos();
    // Every row samples, as in llama-imatrix: the last layer's feed-forward block runs on the
    // rows that sample only (forward_plan.h), and its matrices need every token's inputs too.
    // The logits of positions first_scored .. context - 2 score the token after each, as
    // `iwb eval` and llama-imatrix score a chunk (the first half only gives them context).
    IWB_RETURN_IF_ERROR(e.logits_for_positions(chunk, 0, [&](int64_t position, std::span<const float> logits) {
      if (o.compute_perplexity && position >= plan->first_scored && position + 1 < o.context) {
        const double nll = -log_probability(logits, tokens[static_cast<size_t>(start + position + 1)]);
        nll_sum += nll;
        nll_squares += nll * nll;
        ++num_scored;
      }
      return Status{};
    }));
    m.num_chunks = static_cast<int32_t>(c + 1);
    if (o.compute_perplexity && o.chunk_perplexity && num_scored > 0) {
      o.chunk_perplexity(c, std::exp(nll_sum / static_cast<double>(num_scored)));
    }
  }
  collector.finish_expert_calls(o.context);
  if (o.progress) o.progress(num_chunks, num_chunks);
  if (perplexity != nullptr) {
    const PerplexityEstimate estimate = estimate_perplexity(nll_sum, nll_squares, num_scored);
    *perplexity = {num_scored, estimate.perplexity, estimate.error};
  }
  return m;
}

}  // namespace iwb::quant
