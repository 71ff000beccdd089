// The tests' Gemma 4 reference forward pass (see reference_gemma4.h).
#include "reference_gemma4.h"

#include "reference_math.h"

#include "iwb/kernels/dequantize.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace iwb::test {
namespace {

using namespace ref;  // the shared blocks of reference_math.h

double gelu(double z) { return 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z))); }

// NeoX RoPE of one head: pairs (i, i + n_rot / 2) for i < n_rot / 2 turn by
// pos * scale * base^(-2i / n_rot) / divisors[i]; values from n_rot on stay.
void rope_neox(double* x, int64_t n_rot, int64_t pos, double base, double scale, const float* divisors) {
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    double theta = static_cast<double>(pos) * scale * std::pow(base, -2.0 * static_cast<double>(i) / n_rot);
    if (divisors != nullptr) theta /= divisors[i];
    const double c = std::cos(theta), s = std::sin(theta);
    const double x0 = x[i], x1 = x[i + n_rot / 2];
    x[i] = x0 * c - x1 * s;
    x[i + n_rot / 2] = x0 * s + x1 * c;
  }
}

// The experts beside the dense FFN for one token's attention output `h` (llama.cpp's
// build_moe_ffn with a precomputed router logit, softmax gating, weights renormalised, GELU).
Vec expert_ffn(const RefGemma4& m, const RefGemma4Layer& l, const Vec& h) {
  const int64_t d = m.n_embd, ne = m.n_expert, ff = l.n_ff_exp;
  // The router reads rmsnorm(h) / sqrt(n_embd) * ffn_gate_inp.scale.
  Vec r = normed(h, {}, m.eps);
  for (int64_t i = 0; i < d; ++i) r[i] *= l.gate_inp_scale[i] / std::sqrt(static_cast<double>(d));
  const Vec logits = matvec(l.gate_inp, r, ne);
  const double top = *std::max_element(logits.begin(), logits.end());
  Vec p(static_cast<size_t>(ne));
  for (int64_t e = 0; e < ne; ++e) p[e] = std::exp(logits[e] - top);
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& e : p) e /= total;
  std::vector<int64_t> order(static_cast<size_t>(ne));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  double chosen = 0;
  for (int64_t j = 0; j < m.n_expert_used; ++j) chosen += p[order[j]];
  const Vec x = normed(h, l.pre_ffw_norm_2, m.eps);
  Vec y(static_cast<size_t>(d), 0.0);
  for (int64_t j = 0; j < m.n_expert_used; ++j) {
    const int64_t e = order[j];
    Vec g = matvec(l.gate_exps, x, ff, e * ff);
    const Vec u = matvec(l.up_exps, x, ff, e * ff);
    for (int64_t i = 0; i < ff; ++i) g[i] = gelu(g[i]) * u[i];
    const Vec down = matvec(l.down_exps, g, d, e * d);
    const double w = p[e] / chosen * l.down_exps_scale[e];
    for (int64_t i = 0; i < d; ++i) y[i] += w * down[i];
  }
  return normed(y, l.post_ffw_norm_2, m.eps);
}

Vec dense_ffn(const RefGemma4& m, const RefGemma4Layer& l, const Vec& h) {
  const Vec x = normed(h, l.ffn_norm, m.eps);
  Vec g = matvec(l.gate, x, l.n_ff);
  const Vec u = matvec(l.up, x, l.n_ff);
  for (int64_t i = 0; i < l.n_ff; ++i) g[i] = gelu(g[i]) * u[i];
  return matvec(l.down, g, m.n_embd);
}

// Each position's per-layer inputs [n_layer * ple] (llama.cpp's project_per_layer_inputs): the
// token's per-layer embedding * sqrt(ple) plus the normed projection of the scaled embedding
// / sqrt(n_embd), all / sqrt(2).
std::vector<Vec> per_layer_inputs(const RefGemma4& m, const std::vector<int32_t>& tokens, const std::vector<Vec>& x) {
  const int64_t ple = m.n_ple, width = m.n_layer * ple;
  std::vector<Vec> out;
  for (size_t t = 0; t < tokens.size(); ++t) {
    Vec proj = matvec(m.ple_model_proj, x[t], width);
    for (double& v : proj) v /= std::sqrt(static_cast<double>(m.n_embd));
    for (int64_t il = 0; il < m.n_layer; ++il) rms_norm(proj.data() + il * ple, ple, m.ple_proj_norm.data(), m.eps);
    const float* row = m.ple_token_embd.data() + static_cast<int64_t>(tokens[t]) * width;
    for (int64_t i = 0; i < width; ++i) {
      proj[i] = (proj[i] + row[i] * std::sqrt(static_cast<double>(ple))) / std::sqrt(2.0);
    }
    out.push_back(std::move(proj));
  }
  return out;
}

// The residual stream of every position after the last layer.
std::vector<Vec> run_layers(const RefGemma4& m, const std::vector<int32_t>& tokens, bool is_kv_f16) {
  const int64_t n = static_cast<int64_t>(tokens.size()), d = m.n_embd;
  std::vector<Vec> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    x[t].resize(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) x[t][i] = m.embd[tokens[t] * d + i] * std::sqrt(static_cast<double>(d));
  }
  const std::vector<Vec> ple_in = m.n_ple > 0 ? per_layer_inputs(m, tokens, x) : std::vector<Vec>{};
  // Every layer's cached keys and values [position][n_kv_head * head_dim] (a shared layer reads
  // its source's).
  std::vector<std::vector<Vec>> keys(static_cast<size_t>(m.n_layer)), values(static_cast<size_t>(m.n_layer));
  for (int64_t il = 0; il < m.n_layer; ++il) {
    const RefGemma4Layer& l = m.layers[il];
    const int64_t hd = l.head_dim, nh = l.n_head;
    const bool has_kv = l.kv_source == il;
    const float* divisors = !l.is_sliding && m.has_rope_freqs && !m.rope_freqs.empty() ? m.rope_freqs.data() : nullptr;
    std::vector<Vec> q(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const Vec h = normed(x[t], l.attn_norm, m.eps);
      q[t] = matvec(l.wq, h, nh * hd);
      for (int64_t hh = 0; hh < nh; ++hh) {
        rms_norm(&q[t][hh * hd], hd, l.q_norm.data(), m.eps);
        rope_neox(&q[t][hh * hd], l.n_rot, t, l.rope_base, l.rope_scale, divisors);
      }
      if (!has_kv) continue;
      Vec k = matvec(l.wk, h, l.n_kv_head * hd);
      Vec v = l.wv.empty() ? k : matvec(l.wv, h, l.n_kv_head * hd);
      for (int64_t g = 0; g < l.n_kv_head; ++g) {
        rms_norm(&k[g * hd], hd, l.k_norm.data(), m.eps);
        if (m.has_value_norm) rms_norm(&v[g * hd], hd, nullptr, m.eps);
        rope_neox(&k[g * hd], l.n_rot, t, l.rope_base, l.rope_scale, divisors);
      }
      if (is_kv_f16) {
        for (double& e : k) e = round_f16(e);
        for (double& e : v) e = round_f16(e);
      }
      keys[il].push_back(std::move(k));
      values[il].push_back(std::move(v));
    }
    const std::vector<Vec>& K = keys[l.kv_source];
    const std::vector<Vec>& V = values[l.kv_source];
    const int64_t group = nh / l.n_kv_head;
    for (int64_t t = 0; t < n; ++t) {
      // Scale 1 (the norms scale q.k); causal; a sliding layer sees keys less than the window back.
      const int64_t first =
          l.is_sliding && m.has_sliding_window ? std::max<int64_t>(0, t - m.sliding_window + 1) : int64_t{0};
      Vec attn(static_cast<size_t>(nh * hd), 0.0);
      for (int64_t hh = 0; hh < nh; ++hh) {
        const int64_t g = hh / group;
        Vec s;
        for (int64_t j = first; j <= t; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += q[t][hh * hd + i] * K[j][g * hd + i];
          s.push_back(dot);
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = first; j <= t; ++j) {
          const double w = s[j - first] / sum;
          for (int64_t i = 0; i < hd; ++i) attn[hh * hd + i] += w * V[j][g * hd + i];
        }
      }
      Vec o = normed(matvec(l.wo, attn, d), l.post_attention_norm, m.eps);
      Vec h = x[t];
      for (int64_t i = 0; i < d; ++i) h[i] += o[i];  // attn_out
      Vec y = dense_ffn(m, l, h);
      if (l.has_experts()) {
        y = normed(y, l.post_ffw_norm_1, m.eps);
        const Vec e = expert_ffn(m, l, h);
        for (int64_t i = 0; i < d; ++i) y[i] += e[i];
      }
      y = normed(y, l.post_ffw_norm, m.eps);
      for (int64_t i = 0; i < d; ++i) h[i] += y[i];
      if (m.n_ple > 0) {  // the layer's per-layer input gates its own small FFN
        const int64_t ple = m.n_ple;
        Vec g = matvec(l.ple_inp_gate, h, ple);
        for (int64_t i = 0; i < ple; ++i) g[i] = gelu(g[i]) * ple_in[t][il * ple + i];
        const Vec p = normed(matvec(l.ple_proj, g, d), l.ple_post_norm, m.eps);
        for (int64_t i = 0; i < d; ++i) h[i] += p[i];
      }
      for (double& e : h) e *= l.out_scale;
      x[t] = std::move(h);
    }
  }
  return x;
}

// Checks one layer's tensors against its shape; empty when they agree.
std::string check_layer(const RefGemma4& m, const RefGemma4Layer& l, int64_t il) {
  const int64_t d = m.n_embd, q = l.n_head * l.head_dim, kv = l.n_kv_head * l.head_dim;
  auto is = [](const std::vector<float>& w, int64_t n) { return static_cast<int64_t>(w.size()) == n; };
  std::string bad;
  auto need = [&](bool ok, const char* what) {
    if (!ok && bad.empty()) bad = "reference: gemma4 layer " + std::to_string(il) + ": " + what;
  };
  need(l.n_head > 0 && l.n_kv_head > 0 && l.n_head % l.n_kv_head == 0, "head counts");
  need(l.head_dim > 0 && l.n_rot > 0 && l.n_rot <= l.head_dim && l.n_rot % 2 == 0, "head size or RoPE width");
  need(is(l.attn_norm, d) && is(l.post_attention_norm, d) && is(l.ffn_norm, d) && is(l.post_ffw_norm, d), "norms");
  need(is(l.wq, d * q) && is(l.wo, q * d) && is(l.q_norm, l.head_dim), "attn_q, attn_output or attn_q_norm");
  if (l.kv_source == il) {
    need(is(l.wk, d * kv) && is(l.k_norm, l.head_dim) && (l.wv.empty() || is(l.wv, d * kv)), "attn_k/v or k_norm");
  } else {
    const RefGemma4Layer& src = m.layers[l.kv_source];
    need(src.head_dim == l.head_dim && src.n_kv_head == l.n_kv_head,
         "a shared KV layer's shape differs from its source's");
  }
  need(l.n_ff > 0 && is(l.gate, d * l.n_ff) && is(l.up, d * l.n_ff) && is(l.down, d * l.n_ff), "dense FFN");
  if (l.has_experts()) {
    const int64_t ne = m.n_expert, ff = l.n_ff_exp;
    need(ne > 0 && m.n_expert_used > 0 && m.n_expert_used <= ne && is(l.gate_inp, ne * d), "router");
    need(is(l.gate_inp_scale, d) && is(l.down_exps_scale, ne), "router or expert scales");
    need(is(l.pre_ffw_norm_2, d) && is(l.post_ffw_norm_1, d) && is(l.post_ffw_norm_2, d), "expert norms");
    need(ff > 0 && is(l.gate_exps, ne * ff * d) && is(l.up_exps, ne * ff * d) && is(l.down_exps, ne * d * ff),
         "expert matrices");
  }
  if (m.n_ple > 0) {
    need(is(l.ple_inp_gate, m.n_ple * d) && is(l.ple_proj, d * m.n_ple) && is(l.ple_post_norm, d),
         "per-layer embedding tensors");
  }
  return bad;
}

}  // namespace

std::shared_ptr<RefGemma4> load_reference_gemma4(const gguf::GgufFile& f, std::string* error) {
  auto m = std::make_shared<RefGemma4>();
  const std::string a = "gemma4.";
  m->n_embd = f.get_int(a + "embedding_length").value_or(0);
  m->n_layer = f.get_int(a + "block_count").value_or(0);
  m->eps = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-6);
  m->sliding_window = f.get_int(a + "attention.sliding_window").value_or(0);
  // llama.cpp's default of 30 where the file has no key.
  m->final_softcap = f.get_float(a + "final_logit_softcapping").value_or(30.0);
  m->n_expert = f.get_int(a + "expert_count").value_or(0);
  m->n_expert_used = f.get_int(a + "expert_used_count").value_or(0);
  m->n_ple = f.get_int(a + "embedding_length_per_layer_input").value_or(0);
  m->n_shared_kv_layers = f.get_int(a + "attention.shared_kv_layers").value_or(0);
  const int64_t key_length = f.get_int(a + "attention.key_length").value_or(0);
  const int64_t key_length_swa = f.get_int(a + "attention.key_length_swa").value_or(key_length);
  const int64_t n_rot = f.get_int(a + "rope.dimension_count").value_or(key_length);
  const int64_t n_rot_swa = f.get_int(a + "rope.dimension_count_swa").value_or(n_rot);
  const double base = f.get_float(a + "rope.freq_base").value_or(10000.0);
  const double base_swa = f.get_float(a + "rope.freq_base_swa").value_or(10000.0);
  const double factor = f.get_float(a + "rope.scaling.factor").value_or(0.0);
  if (f.get_int(a + "attention.value_length").value_or(key_length) != key_length ||
      f.get_int(a + "attention.value_length_swa").value_or(key_length_swa) != key_length_swa) {
    *error = "reference: gemma4 needs equal key and value head sizes";
    return nullptr;
  }
  std::vector<bool> sliding;
  if (const gguf::Value* v = f.find(a + "attention.sliding_window_pattern"); v != nullptr && v->as_array()) {
    for (const gguf::Value& b : v->as_array()->items) sliding.push_back(b.as_bool().value_or(false));
  }
  if (m->n_embd <= 0 || m->n_layer <= 0 || static_cast<int64_t>(sliding.size()) != m->n_layer) {
    *error = "reference: gemma4 needs its width, layer count and a sliding pattern of one entry per layer";
    return nullptr;
  }
  m->embd = load(f, "token_embd.weight");
  m->vocab = static_cast<int64_t>(m->embd.size()) / m->n_embd;
  m->output = load(f, "output.weight");
  if (m->output.empty()) m->output = m->embd;
  m->output_norm = load(f, "output_norm.weight");
  m->rope_freqs = load(f, "rope_freqs.weight");
  if (m->n_ple > 0) {
    m->ple_token_embd = load(f, "per_layer_token_embd.weight");
    m->ple_model_proj = load(f, "per_layer_model_proj.weight");
    m->ple_proj_norm = load(f, "per_layer_proj_norm.weight");
    const int64_t width = m->n_layer * m->n_ple;
    if (static_cast<int64_t>(m->ple_token_embd.size()) != m->vocab * width ||
        static_cast<int64_t>(m->ple_model_proj.size()) != width * m->n_embd ||
        static_cast<int64_t>(m->ple_proj_norm.size()) != m->n_ple) {
      *error = "reference: gemma4's per-layer embedding tensors are missing or of the wrong size";
      return nullptr;
    }
  }
  const int64_t first_shared = m->n_layer - m->n_shared_kv_layers;
  for (int64_t il = 0; il < m->n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    RefGemma4Layer l;
    l.is_sliding = sliding[static_cast<size_t>(il)];
    l.n_head = per_layer(f, a + "attention.head_count", il, 0);
    l.n_kv_head = per_layer(f, a + "attention.head_count_kv", il, l.n_head);
    l.head_dim = l.is_sliding ? key_length_swa : key_length;
    l.n_rot = l.is_sliding ? n_rot_swa : n_rot;
    l.rope_base = l.is_sliding ? base_swa : base;
    l.rope_scale = !l.is_sliding && factor > 0 ? 1.0 / factor : 1.0;
    // llama.cpp's reuse rule: the last layer with KV of the same kind (first_shared - 2 sliding,
    // first_shared - 1 global).
    l.kv_source = il < first_shared ? il : first_shared - (l.is_sliding ? 2 : 1);
    l.attn_norm = load(f, p + "attn_norm.weight");
    if (const std::vector<float> qkv = load(f, p + "attn_qkv.weight"); !qkv.empty()) {
      const int64_t q = l.n_head * l.head_dim * m->n_embd, kv = l.n_kv_head * l.head_dim * m->n_embd;
      l.wq.assign(qkv.begin(), qkv.begin() + q);
      l.wk.assign(qkv.begin() + q, qkv.begin() + q + kv);
      l.wv.assign(qkv.begin() + q + kv, qkv.end());
    } else {
      l.wq = load(f, p + "attn_q.weight");
      l.wk = load(f, p + "attn_k.weight");
      l.wv = load(f, p + "attn_v.weight");
    }
    l.wo = load(f, p + "attn_output.weight");
    l.q_norm = load(f, p + "attn_q_norm.weight");
    l.k_norm = load(f, p + "attn_k_norm.weight");
    l.post_attention_norm = load(f, p + "post_attention_norm.weight");
    if (const std::vector<float> s = load(f, p + "layer_output_scale.weight"); !s.empty()) l.out_scale = s[0];
    l.ffn_norm = load(f, p + "ffn_norm.weight");
    l.gate = load(f, p + "ffn_gate.weight");
    l.up = load(f, p + "ffn_up.weight");
    l.down = load(f, p + "ffn_down.weight");
    l.n_ff = static_cast<int64_t>(l.down.size()) / m->n_embd;
    if (per_layer(f, a + "feed_forward_length", il, l.n_ff) != l.n_ff) {
      *error = "reference: gemma4 layer " + std::to_string(il) + "'s ffn_down differs from feed_forward_length";
      return nullptr;
    }
    l.post_ffw_norm = load(f, p + "post_ffw_norm.weight");
    l.gate_inp = load(f, p + "ffn_gate_inp.weight");
    if (l.has_experts()) {
      l.gate_inp_scale = load(f, p + "ffn_gate_inp.scale");
      l.pre_ffw_norm_2 = load(f, p + "pre_ffw_norm_2.weight");
      l.post_ffw_norm_1 = load(f, p + "post_ffw_norm_1.weight");
      l.post_ffw_norm_2 = load(f, p + "post_ffw_norm_2.weight");
      l.down_exps = load(f, p + "ffn_down_exps.weight");
      l.n_ff_exp = m->n_expert > 0 ? static_cast<int64_t>(l.down_exps.size()) / (m->n_expert * m->n_embd) : 0;
      if (const std::vector<float> gu = load(f, p + "ffn_gate_up_exps.weight"); !gu.empty()) {
        // Each expert's rows: its n_ff_exp gate rows, then its n_ff_exp up rows.
        const int64_t block = l.n_ff_exp * m->n_embd;
        for (int64_t e = 0; e < m->n_expert && static_cast<int64_t>(gu.size()) == 2 * block * m->n_expert; ++e) {
          l.gate_exps.insert(l.gate_exps.end(), gu.begin() + 2 * e * block, gu.begin() + (2 * e + 1) * block);
          l.up_exps.insert(l.up_exps.end(), gu.begin() + (2 * e + 1) * block, gu.begin() + (2 * e + 2) * block);
        }
      } else {
        l.gate_exps = load(f, p + "ffn_gate_exps.weight");
        l.up_exps = load(f, p + "ffn_up_exps.weight");
      }
      l.down_exps_scale = load(f, p + "ffn_down_exps.scale");
      if (l.down_exps_scale.empty()) l.down_exps_scale.assign(static_cast<size_t>(m->n_expert), 1.0f);
    }
    if (m->n_ple > 0) {
      l.ple_inp_gate = load(f, p + "inp_gate.weight");
      l.ple_proj = load(f, p + "proj.weight");
      l.ple_post_norm = load(f, p + "post_norm.weight");
    }
    m->layers.push_back(std::move(l));
  }
  for (int64_t il = 0; il < m->n_layer; ++il) {
    const RefGemma4Layer& l = m->layers[static_cast<size_t>(il)];
    if (l.kv_source < 0 || l.kv_source > il || m->layers[static_cast<size_t>(l.kv_source)].kv_source != l.kv_source) {
      *error = "reference: gemma4 layer " + std::to_string(il) + " shares the KV of a layer without its own";
      return nullptr;
    }
    if (std::string bad = check_layer(*m, l, il); !bad.empty()) {
      *error = bad;
      return nullptr;
    }
    if (!l.is_sliding && !m->rope_freqs.empty() && static_cast<int64_t>(m->rope_freqs.size()) < l.n_rot / 2) {
      *error = "reference: gemma4's rope_freqs is shorter than the global layers' RoPE pairs";
      return nullptr;
    }
  }
  if (m->vocab <= 0 || static_cast<int64_t>(m->output.size()) != m->vocab * m->n_embd ||
      static_cast<int64_t>(m->output_norm.size()) != m->n_embd) {
    *error = "reference: gemma4's embedding, classifier or output norm is missing";
    return nullptr;
  }
  return m;
}

std::vector<std::vector<float>> gemma4_hidden_states(const RefGemma4& m, const std::vector<int32_t>& tokens) {
  return ref::hidden_rows(run_layers(m, tokens, false), m.output_norm, m.eps);
}

std::vector<std::vector<float>> gemma4_logits(const RefGemma4& m, const std::vector<int32_t>& tokens, bool is_kv_f16) {
  return ref::logit_rows(run_layers(m, tokens, is_kv_f16), m.output, m.output_norm, m.eps, m.vocab, m.final_softcap);
}

}  // namespace iwb::test
