// ModelDrafter: catch-up, rollback and K batched draft passes over the draft model's own paged
// KV cache (see model_drafter.h).
#include "spec/model_drafter.h"

#include "backend/cpu/cpu_forward_backend.h"
#include "backend/cuda_forward_factory.h"
#include "iwb/engine/paged/block_hash.h"
#include "iwb/engine/spec/acceptance.h"

#include <algorithm>
#include <cstdlib>

namespace iwb::spec {
namespace {

double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// How sure llama.cpp's draft sampler (top-k 10 at temperature 1, no other filter) is of a
// guess: its probability among the 10 most likely tokens, 0 outside them.
float top_k_probability(std::span<const float> logits, int32_t token, int32_t k) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = k;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  for (const TokenProb& c : Sampler(p).candidates(logits, {})) {
    if (c.id == token) return c.prob;
  }
  return 0.0f;
}

}  // namespace

namespace {

// Draft steps are a few tokens per sequence; a longer catch-up runs as several passes.
constexpr int64_t kDraftMaxBatch = 128;

Result<std::unique_ptr<ForwardBackend>> make_draft_backend(const DraftModel& m, const DraftPlacement& placement) {
  const ModelConfig& c = m.config;
  KvPoolGeometry kv;
  kv.shape = kv_cache_shape(c);
  kv.block_size = placement.kv_block_size;
  kv.num_blocks = std::max<int64_t>(1, (placement.num_kv_positions + kv.block_size - 1) / kv.block_size);
  const int threads = std::max(1, placement.num_threads);
  if (m.is_mtp_head) {
    if (placement.device != "cpu") {
      return make_error(ErrorCode::Unsupported,
                        "MTP drafting runs on the CPU backend only, not on " + placement.device);
    }
    PlanOptions options;
    options.is_mtp_head = true;
    Result<std::unique_ptr<CpuForwardBackend>> cpu =
        CpuForwardBackend::create(c, m.weights, kv, threads, kDraftMaxBatch, options);
    if (!cpu) return cpu.status();
    return std::unique_ptr<ForwardBackend>(std::move(*cpu));
  }
  if (placement.device.rfind("cuda:", 0) == 0) {
    EngineOptions o;
    o.device = placement.device;
    o.num_threads = threads;
    o.max_batch_tokens = kDraftMaxBatch;
    o.kv_block_size = kv.block_size;
    o.kv_cache_bytes = kv.num_bytes();
    const int index = std::atoi(placement.device.c_str() + 5);
    return make_cuda_forward_backend(c, m.weights, o, index, kv.num_slots(), {});
  }
  Result<std::unique_ptr<CpuForwardBackend>> cpu = CpuForwardBackend::create(c, m.weights, kv, threads, kDraftMaxBatch);
  if (!cpu) return cpu.status();
  return std::unique_ptr<ForwardBackend>(std::move(*cpu));
}

}  // namespace

Result<std::unique_ptr<ModelDrafter>> ModelDrafter::create(std::unique_ptr<DraftModel> model, std::string name,
                                                           const DraftPlacement& placement) {
  // The backend keeps references to the config and weights: they stay put inside m_model.
  Result<std::unique_ptr<ForwardBackend>> backend = make_draft_backend(*model, placement);
  if (!backend) return backend.status();
  BlockManagerConfig blocks;
  blocks.num_blocks = (*backend)->kv_geometry().num_blocks;
  blocks.block_size = (*backend)->kv_geometry().block_size;
  // One table per target sequence, rolled back in place; a finished sequence's full blocks stay
  // findable, so the next request with the same prefix (a chat's next turn) starts from them
  // as the target's prefix cache lets the target.
  blocks.enable_prefix_caching = true;
  Result<BlockManager> manager = BlockManager::create(blocks);
  if (!manager) return manager.status();
  std::unique_ptr<ModelDrafter> d(new ModelDrafter(std::move(model), std::move(name)));
  d->m_backend = std::move(*backend);
  d->m_blocks = std::make_unique<BlockManager>(std::move(*manager));
  return d;
}

uint64_t ModelDrafter::num_bytes() const {
  MemoryReport backend;
  m_backend->fill_memory_report(&backend);
  return m_model->owned_bytes + m_backend->kv_geometry().num_bytes() + backend.scratch_bytes +
         backend.device_weights_bytes + backend.device_scratch_bytes + m_logits.capacity() * sizeof(float) +
         (m_model->file || m_model->is_mtp_head ? m_model->weights.num_bytes : 0);
}

void ModelDrafter::release(uint64_t key) {
  const auto it = m_sequences.find(key);
  if (it == m_sequences.end()) return;
  if (m_blocks->has_sequence(it->second.id)) (void)m_blocks->free(it->second.id);
  m_sequences.erase(it);
}

bool ModelDrafter::reserve(SequenceState& s, std::span<const int32_t> tokens, uint64_t protect_from,
                           int64_t keep_at_most) {
  const auto n = static_cast<int64_t>(tokens.size());
  int64_t common = 0;
  const int64_t limit = std::min<int64_t>(static_cast<int64_t>(s.computed.size()), keep_at_most);
  while (common < limit && s.computed[static_cast<size_t>(common)] == tokens[static_cast<size_t>(common)]) ++common;
  if (m_blocks->has_sequence(s.id) && !m_blocks->truncate(s.id, common)) return false;
  s.computed.resize(static_cast<size_t>(common));

  // Room: evict the least recently used sequences not drafted in this call.
  const int64_t needed = m_blocks->num_blocks_for(n) - static_cast<int64_t>(m_blocks->block_table(s.id).size());
  while (m_blocks->num_available_blocks() < needed) {
    auto victim = m_sequences.end();
    for (auto it = m_sequences.begin(); it != m_sequences.end(); ++it) {
      if (it->second.last_used >= protect_from || it->second.id == s.id) continue;
      if (victim == m_sequences.end() || it->second.last_used < victim->second.last_used) victim = it;
    }
    if (victim == m_sequences.end()) return false;
    release(victim->first);
  }
  if (!m_blocks->has_sequence(s.id)) {
    Result<int64_t> cached = m_blocks->allocate(s.id, tokens);
    if (!cached) return false;
    const auto reuse = static_cast<size_t>(std::min(*cached, keep_at_most));
    if (static_cast<int64_t>(reuse) < *cached && !m_blocks->truncate(s.id, static_cast<int64_t>(reuse))) return false;
    s.computed.assign(tokens.begin(), tokens.begin() + static_cast<ptrdiff_t>(reuse));
    for (int64_t p = m_blocks->num_tokens(s.id); p < n; ++p) {
      if (!append(s, tokens[static_cast<size_t>(p)])) return false;
    }
    return true;
  }
  for (int64_t p = common; p < n; ++p) {
    if (!append(s, tokens[static_cast<size_t>(p)])) return false;
  }
  return true;
}

bool ModelDrafter::append(SequenceState& s, int32_t token) {
  Result<AppendedSlot> slot = m_blocks->append_slot(s.id, token);
  if (!slot) return false;
  // A block shared from the cache that the sequence writes on in: its own copy first.
  if (slot->copy && !m_backend->copy_blocks({&*slot->copy, 1})) return false;
  return true;
}

void ModelDrafter::mark_computed(SequenceState& s) {
  if (s.is_cacheable) (void)m_blocks->mark_computed(s.id, static_cast<int64_t>(s.computed.size()));
}

Status ModelDrafter::run(const std::vector<Chunk>& chunks) {
  FlatBatch flat;
  for (const Chunk& c : chunks) {
    flat.max_blocks_per_sequence =
        std::max<int64_t>(flat.max_blocks_per_sequence, static_cast<int64_t>(m_blocks->block_table(c.sequence).size()));
  }
  flat.block_tables.assign(chunks.size() * static_cast<size_t>(flat.max_blocks_per_sequence), -1);
  m_hidden_in.clear();
  m_logits_token_rows.clear();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    const std::span<const BlockId> table = m_blocks->block_table(c.sequence);
    std::copy(
        table.begin(), table.end(),
        flat.block_tables.begin() + static_cast<ptrdiff_t>(i * static_cast<size_t>(flat.max_blocks_per_sequence)));
    for (size_t t = 0; t < c.tokens.size(); ++t) {
      const int64_t position = c.first + static_cast<int64_t>(t);
      Result<int64_t> slot = m_blocks->slot(c.sequence, position);
      if (!slot) return slot.status();
      flat.tokens.push_back(c.tokens[t]);
      flat.positions.push_back(static_cast<int32_t>(position));
      flat.slot_mapping.push_back(*slot);
      flat.token_sequences.push_back(static_cast<int32_t>(i));
    }
    flat.sequence_lengths.push_back(static_cast<int32_t>(c.first + static_cast<int64_t>(c.tokens.size())));
    if (c.wants_logits) {
      flat.logits_rows.push_back(static_cast<int32_t>(flat.tokens.size() - 1));
      flat.logits_sequences.push_back(static_cast<int32_t>(i));
    }
    m_hidden_in.insert(m_hidden_in.end(), c.hidden.begin(), c.hidden.end());
  }
  m_logits_token_rows = flat.logits_rows;
  const size_t need = flat.logits_rows.size() * static_cast<size_t>(m_model->config.vocab_size);
  if (m_logits.size() < need) m_logits.resize(need);
  if (!m_model->is_mtp_head) return m_backend->forward(flat, m_logits.data());
  if (m_hidden_in.size() != flat.tokens.size() * static_cast<size_t>(m_model->config.embedding_length)) {
    return make_error(ErrorCode::InvalidArgument, "MTP drafting: a pass without a hidden row per token");
  }
  return m_backend->forward_mtp(flat, m_hidden_in.data(), m_logits.data());
}

std::vector<uint64_t> ModelDrafter::block_keys(std::span<const int32_t> tokens) const {
  // The prefix cache's chained key (hash_block_tokens), one per full block: block j's covers
  // blocks 0..j.
  const auto block = static_cast<size_t>(m_blocks->block_size());
  std::vector<uint64_t> keys;
  BlockHash h = kRootBlockHash;
  for (size_t first = 0; first + block <= tokens.size(); first += block) {
    h = hash_block_tokens(h, tokens.subspan(first, block));
    keys.push_back(h);
  }
  return keys;
}

void ModelDrafter::keep_block_states(std::span<const int32_t> tokens, int64_t first_row, std::span<const float> rows) {
  const auto d = static_cast<size_t>(m_model->config.embedding_length);
  const int64_t block = m_blocks->block_size();
  const auto num_rows = static_cast<int64_t>(rows.size() / d);
  const std::vector<uint64_t> keys = block_keys(tokens.first(static_cast<size_t>(first_row + num_rows)));
  for (int64_t end = (first_row / block + 1) * block; end <= first_row + num_rows; end += block) {
    const float* row = rows.data() + static_cast<size_t>(end - 1 - first_row) * d;
    auto [it, is_new] = m_block_states.try_emplace(keys[static_cast<size_t>(end / block - 1)]);
    it->second.assign(row, row + d);
    if (!is_new) continue;
    m_block_state_order.push_back(it->first);
    // As many as the cache has blocks: a state outlives the blocks it follows by little.
    while (static_cast<int64_t>(m_block_state_order.size()) > m_blocks->num_blocks()) {
      m_block_states.erase(m_block_state_order.front());
      m_block_state_order.pop_front();
    }
  }
}

std::vector<float> ModelDrafter::mtp_inputs(SequenceState& s, std::span<const int32_t> tokens, int64_t from, int64_t to,
                                            int64_t first_row, std::span<const float> rows) const {
  const auto d = static_cast<size_t>(m_model->config.embedding_length);
  std::vector<float> in(static_cast<size_t>(std::max<int64_t>(0, to - from)) * d, 0.0f);
  const auto num_rows = static_cast<int64_t>(rows.size() / d);
  const int64_t block = m_blocks->block_size();
  for (int64_t p = from; p < to; ++p) {
    const int64_t before = p - 1;  // position p reads the target's state of the token before
    const float* row = nullptr;
    if (before >= first_row && before < first_row + num_rows) {
      row = rows.data() + static_cast<size_t>(before - first_row) * d;
    } else if (before == s.pending_position && !s.pending_hidden.empty()) {
      row = s.pending_hidden.data();
    } else if (p > 0 && p % block == 0) {
      // The first position after a prefix the target took from its cache: the state a sequence
      // that computed that prefix left.
      const std::vector<uint64_t> keys = block_keys(tokens.first(static_cast<size_t>(p)));
      if (const auto it = m_block_states.find(keys.back()); it != m_block_states.end()) row = it->second.data();
    }
    if (row != nullptr) {
      std::copy(row, row + d, in.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(p - from) * d));
    } else if (p > 0) {
      s.is_cacheable = false;  // zeros in place of a state: not the head's rows for these tokens
    }
  }
  return in;
}

Status ModelDrafter::catch_up(std::vector<Active>& active, bool wants_logits,
                              const std::function<void(Active&, size_t)>& on_logits) {
  const auto d = static_cast<size_t>(m_model->config.embedding_length);
  const int64_t max_batch = m_backend->max_batch();
  std::vector<size_t> start(active.size()), next(active.size());
  for (size_t a = 0; a < active.size(); ++a) start[a] = next[a] = active[a].state->computed.size();
  for (;;) {
    std::vector<Chunk> chunks;
    std::vector<size_t> owners;  // active index of each chunk that wants logits
    int64_t budget = max_batch;
    for (size_t a = 0; a < active.size() && budget > 0; ++a) {
      const size_t n = active[a].history.size();
      if (next[a] >= n) continue;
      const auto count = static_cast<size_t>(std::min<int64_t>(budget, static_cast<int64_t>(n - next[a])));
      Chunk c{active[a].state->id,
              static_cast<int64_t>(next[a]),
              std::span<const int32_t>(active[a].history).subspan(next[a], count),
              wants_logits && next[a] + count == n,
              {}};
      if (m_model->is_mtp_head) {
        c.hidden = std::span<const float>(active[a].hidden).subspan((next[a] - start[a]) * d, count * d);
      }
      chunks.push_back(c);
      if (c.wants_logits) owners.push_back(a);
      next[a] += count;
      budget -= static_cast<int64_t>(count);
    }
    if (chunks.empty()) break;
    IWB_RETURN_IF_ERROR(run(chunks));
    for (size_t row = 0; row < owners.size(); ++row) on_logits(active[owners[row]], row);
  }
  for (Active& x : active) {
    x.state->computed = x.history;
    mark_computed(*x.state);
  }
  return {};
}

Status ModelDrafter::observe_hidden_states(std::span<const HiddenStates> states) {
  if (!m_model->is_mtp_head) return {};
  const auto d = static_cast<size_t>(m_model->config.embedding_length);
  const uint64_t call_start = ++m_clock;
  std::vector<Active> active;
  active.reserve(states.size());
  for (const HiddenStates& h : states) {
    const auto count = static_cast<int64_t>(h.rows.size() / d);
    const int64_t end = h.first_position + count;
    if (count <= 0 || end > static_cast<int64_t>(h.tokens.size())) continue;
    auto [it, is_new] = m_sequences.try_emplace(h.key);
    SequenceState& s = it->second;
    if (is_new) s.id = m_next_sequence++;
    s.last_used = call_start;
    const std::span<const int32_t> tokens = h.tokens.first(static_cast<size_t>(end));
    // What the head holds of these tokens stays (computed from the same states), and so do
    // blocks another sequence left in the cache.
    if (!reserve(s, tokens, call_start, end)) {
      release(h.key);  // no room: the sequence's next drafts start over
      continue;
    }
    Active x{0, &s, std::vector<int32_t>(tokens.begin(), tokens.end()), {}};
    x.hidden = mtp_inputs(s, tokens, static_cast<int64_t>(s.computed.size()), end, h.first_position, h.rows);
    keep_block_states(tokens, h.first_position, h.rows);
    s.pending_hidden.assign(h.rows.end() - static_cast<ptrdiff_t>(d), h.rows.end());
    s.pending_position = end - 1;
    active.push_back(std::move(x));
  }
  return catch_up(active, false, [](Active&, size_t) {});
}

int32_t ModelDrafter::choose(SequenceState& s, std::span<const float> logits, std::span<const int32_t> history,
                             const SamplingParams& sampling, Draft* draft) {
  Sampler sampler(sampling);
  if (sampling.is_greedy()) return sampler.sample(logits, history);  // argmax after the penalties
  std::vector<TokenProb> candidates = sampler.candidates(logits, history);
  const int32_t token = sample_sparse(candidates, uniform(s.rng));
  draft->probabilities.push_back(std::move(candidates));
  return token;
}

Result<std::vector<Draft>> ModelDrafter::draft(std::span<const DraftRequest> requests) {
  std::vector<Draft> drafts(requests.size());
  const uint64_t call_start = ++m_clock;
  const auto vocab = static_cast<size_t>(m_model->config.vocab_size);
  const auto d = static_cast<size_t>(m_model->config.embedding_length);
  const int64_t max_batch = m_backend->max_batch();
  const bool is_mtp = m_model->is_mtp_head;

  std::vector<Active> active;
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    if (r.num_draft_tokens <= 0 || r.tokens.empty()) continue;
    auto [it, is_new] = m_sequences.try_emplace(r.key);
    SequenceState& s = it->second;
    if (is_new) {
      s.id = m_next_sequence++;
      s.rng.seed(r.sampling.seed ^ (0x9E3779B97F4A7C15ull * (r.key + 1)));
    }
    s.last_used = call_start;
    // The last token is always run (its logits give the first guess).
    if (!reserve(s, r.tokens, call_start, static_cast<int64_t>(r.tokens.size()) - 1)) {
      release(r.key);  // no room even alone: this sequence goes without drafts
      continue;
    }
    Active x{i, &s, std::vector<int32_t>(r.tokens.begin(), r.tokens.end()), {}};
    if (is_mtp)
      x.hidden = mtp_inputs(s, r.tokens, static_cast<int64_t>(s.computed.size()),
                            static_cast<int64_t>(x.history.size()), 0, {});
    active.push_back(std::move(x));
  }

  // The hidden row a guess's next pass reads: the head's own, of the row that made the guess.
  auto keep_chain_row = [&](Active& x, size_t row) {
    const std::span<const float> states = m_backend->hidden_states();
    const size_t token_row = static_cast<size_t>(m_logits_token_rows[row]);
    x.hidden.assign(states.begin() + static_cast<ptrdiff_t>(token_row * d),
                    states.begin() + static_cast<ptrdiff_t>((token_row + 1) * d));
  };
  auto guess = [&](Active& x, size_t row) {
    const DraftRequest& r = requests[x.request];
    if (is_mtp) keep_chain_row(x, row);
    const std::span<const float> logits(m_logits.data() + row * vocab, vocab);
    Draft& d = drafts[x.request];
    const int32_t token = choose(*x.state, logits, x.history, r.sampling, &d);
    if (r.min_probability > 0.0f && top_k_probability(logits, token, 10) < r.min_probability) {
      // Not sure enough: the draft ends here (no more passes for it; its distribution goes too).
      if (d.probabilities.size() > d.tokens.size()) d.probabilities.pop_back();
      return;
    }
    d.tokens.push_back(token);
  };
  // Catch-up: every token the draft cache lacks; the pass that reaches a sequence's last token
  // gives its first guess.
  IWB_RETURN_IF_ERROR(catch_up(active, true, guess));

  // Guesses 2..K: one pass per position, each sequence's latest guess run together.
  for (int32_t j = 1;; ++j) {
    std::vector<Chunk> chunks;
    std::vector<size_t> owners;
    for (size_t a = 0; a < active.size(); ++a) {
      Active& x = active[a];
      Draft& dr = drafts[x.request];
      if (static_cast<int32_t>(dr.tokens.size()) != j || j >= requests[x.request].num_draft_tokens) continue;
      const int32_t last = dr.tokens.back();
      if (last < 0 || last >= m_model->config.vocab_size) continue;
      if (static_cast<int64_t>(chunks.size()) >= max_batch) continue;
      if (!append(*x.state, last)) continue;  // the cache is full: a shorter draft
      x.history.push_back(last);
      chunks.push_back({x.state->id, static_cast<int64_t>(x.history.size()) - 1,
                        std::span<const int32_t>(x.history).subspan(x.history.size() - 1, 1), true,
                        is_mtp ? std::span<const float>(x.hidden) : std::span<const float>()});
      owners.push_back(a);
    }
    if (chunks.empty()) break;
    if (Status st = run(chunks); !st) return st;
    for (size_t row = 0; row < owners.size(); ++row) {
      Active& x = active[owners[row]];
      // A draft model's cache holds its guesses (the next call keeps those the target accepted);
      // an MTP head's guesses read its own state, not the target's: they are run again.
      if (!is_mtp) x.state->computed.push_back(x.history.back());
      guess(x, row);
    }
  }
  return drafts;
}

}  // namespace iwb::spec
