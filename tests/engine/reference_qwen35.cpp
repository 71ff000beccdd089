// The tests' Qwen 3.5 reference forward pass (see reference_qwen35.h).
#include "reference_qwen35.h"

#include "reference_math.h"

#include "iwb/kernels/dequantize.h"

#include <algorithm>
#include <cmath>

namespace iwb::test {
namespace {

using namespace ref;  // the shared blocks of reference_math.h

// llama.cpp's build_gdn_l2_norm: rms_norm with eps / n, then / sqrt(n), which is
// x / sqrt(sum(x^2) + eps).
void l2_norm(double* x, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
// ggml's softplus, which takes x itself past 20.
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// ggml's IMROPE (ggml_mrope_cache_init with is_imrope) on one head: pair i < n_rot / 2 is
// (i, i + n_rot / 2), turned by pos_of(sector) * scale * base^(-2i / n_rot), its sector
// i % sum(sections) taking the t, h or w position in turn (sector % 3) while within three times
// that section, else the extra one. llama.cpp feeds text tokens t = h = w = pos and extra = 0,
// so a sector that falls to the extra component stays unrotated.
void rope_imrope(double* x, int64_t n_rot, int64_t pos, double base, double scale,
                 const std::array<int64_t, 4>& sections) {
  const int64_t sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const int64_t sector = i % sect_dims;
    const bool is_thw = (sector % 3 == 1 && sector < 3 * sections[1]) ||
                        (sector % 3 == 2 && sector < 3 * sections[2]) || (sector % 3 == 0 && sector < 3 * sections[0]);
    const double p = is_thw ? static_cast<double>(pos) : 0.0;
    const double theta = p * scale * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
    const double c = std::cos(theta), s = std::sin(theta);
    const double x0 = x[i], x1 = x[i + n_rot / 2];
    x[i] = x0 * c - x1 * s;
    x[i + n_rot / 2] = x0 * s + x1 * c;
  }
}

Vec swiglu_ffn(const RefQwen35& m, const RefQwen35Layer& l, const Vec& x) {
  Vec g = matvec(l.gate, x, l.n_ff);
  const Vec u = matvec(l.up, x, l.n_ff);
  for (int64_t i = 0; i < l.n_ff; ++i) g[i] = silu(g[i]) * u[i];
  return matvec(l.down, g, m.n_embd);
}

// One full-attention layer over every position's normed input `h`: the layer's output before the
// residual.
std::vector<Vec> attention_layer(const RefQwen35& m, const RefQwen35Layer& l, const std::vector<Vec>& h,
                                 bool is_kv_f16) {
  const int64_t n = static_cast<int64_t>(h.size()), hd = m.head_dim, nh = m.n_head, nkv = m.n_kv_head;
  std::vector<Vec> q(static_cast<size_t>(n)), gate(static_cast<size_t>(n)), keys(static_cast<size_t>(n)),
      values(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    // attn_q's rows per head: head_dim of query, then head_dim of gate.
    const Vec qg = matvec(l.wq, h[t], 2 * nh * hd);
    q[t].resize(static_cast<size_t>(nh * hd));
    gate[t].resize(static_cast<size_t>(nh * hd));
    for (int64_t hh = 0; hh < nh; ++hh) {
      std::copy_n(qg.begin() + 2 * hh * hd, hd, q[t].begin() + hh * hd);
      std::copy_n(qg.begin() + (2 * hh + 1) * hd, hd, gate[t].begin() + hh * hd);
      rms_norm(&q[t][hh * hd], hd, l.q_norm.data(), m.eps);
      rope_imrope(&q[t][hh * hd], m.n_rot, t, m.rope_base, m.rope_scale, m.rope_sections);
    }
    keys[t] = matvec(l.wk, h[t], nkv * hd);
    values[t] = matvec(l.wv, h[t], nkv * hd);
    for (int64_t g = 0; g < nkv; ++g) {
      rms_norm(&keys[t][g * hd], hd, l.k_norm.data(), m.eps);
      rope_imrope(&keys[t][g * hd], m.n_rot, t, m.rope_base, m.rope_scale, m.rope_sections);
    }
    if (is_kv_f16) {
      for (double& e : keys[t]) e = round_f16(e);
      for (double& e : values[t]) e = round_f16(e);
    }
  }
  // qwen35 reads no attention.scale: q.k / sqrt(head_dim), causal, query head hh on KV head
  // hh / (n_head / n_kv_head).
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const int64_t group = nh / nkv;
  std::vector<Vec> out(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    Vec attn(static_cast<size_t>(nh * hd), 0.0);
    for (int64_t hh = 0; hh < nh; ++hh) {
      const int64_t g = hh / group;
      Vec s(static_cast<size_t>(t + 1));
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < hd; ++i) dot += q[t][hh * hd + i] * keys[j][g * hd + i];
        s[j] = dot * scale;
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t j = 0; j <= t; ++j) {
        for (int64_t i = 0; i < hd; ++i) attn[hh * hd + i] += s[j] / sum * values[j][g * hd + i];
      }
    }
    for (int64_t i = 0; i < nh * hd; ++i) attn[i] *= sigmoid(gate[t][i]);
    out[t] = matvec(l.wo, attn, m.n_embd);
  }
  return out;
}

// One gated delta net layer over every position's normed input `h`, token by token from a zero
// convolution history and zero states: the layer's output before the residual.
std::vector<Vec> recurrent_layer(const RefQwen35& m, const RefQwen35Layer& l, const std::vector<Vec>& h) {
  const int64_t n = static_cast<int64_t>(h.size()), d = m.d_state, cd = m.conv_dim(), kt = m.conv_kernel;
  const int64_t key_width = m.n_group * d;
  std::vector<Vec> mixed(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) mixed[t] = matvec(l.wqkv, h[t], cd);
  // Each value head's state S[i][j] (key index i, value index j).
  std::vector<Vec> state(static_cast<size_t>(m.dt_rank), Vec(static_cast<size_t>(d * d), 0.0));
  std::vector<Vec> out(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    // ggml_ssm_conv: tap k reads position t - (kt - 1) + k, zeros before the sequence; then SiLU.
    Vec x(static_cast<size_t>(cd), 0.0);
    for (int64_t c = 0; c < cd; ++c) {
      double s = 0;
      for (int64_t k = 0; k < kt; ++k) {
        const int64_t src = t - (kt - 1) + k;
        if (src >= 0) s += static_cast<double>(l.conv[c * kt + k]) * mixed[src][c];
      }
      x[c] = silu(s);
    }
    // x = [q (n_group heads of d_state) | k (same) | v (dt_rank heads of d_state)].
    for (int64_t g = 0; g < m.n_group; ++g) {
      l2_norm(&x[g * d], d, m.eps);
      l2_norm(&x[key_width + g * d], d, m.eps);
    }
    const Vec beta = matvec(l.beta, h[t], m.dt_rank);
    const Vec alpha = matvec(l.alpha, h[t], m.dt_rank);
    const Vec z = matvec(l.wz, h[t], m.d_inner);
    Vec o(static_cast<size_t>(m.d_inner));
    for (int64_t vh = 0; vh < m.dt_rank; ++vh) {
      // ggml_repeat tiles the key heads over the value heads: value head vh reads key/query head
      // vh % n_group (the converter reorders the value heads to match).
      const double* q = &x[(vh % m.n_group) * d];
      const double* k = &x[key_width + (vh % m.n_group) * d];
      const double* v = &x[2 * key_width + vh * d];
      const double b = sigmoid(beta[vh]);
      const double decay = std::exp(softplus(alpha[vh] + l.dt_bias[vh]) * l.ssm_a[vh]);
      Vec& s = state[vh];
      for (double& e : s) e *= decay;
      for (int64_t j = 0; j < d; ++j) {
        double sk = 0;
        for (int64_t i = 0; i < d; ++i) sk += s[i * d + j] * k[i];
        const double delta = (v[j] - sk) * b;
        for (int64_t i = 0; i < d; ++i) s[i * d + j] += k[i] * delta;
      }
      double* oh = &o[vh * d];
      for (int64_t j = 0; j < d; ++j) {
        double sq = 0;
        for (int64_t i = 0; i < d; ++i) sq += s[i * d + j] * q[i];
        oh[j] = sq / std::sqrt(static_cast<double>(d));
      }
      // The gated norm: rms_norm(o) * ssm_norm * silu(z), per head.
      rms_norm(oh, d, l.ssm_norm.data(), m.eps);
      for (int64_t j = 0; j < d; ++j) oh[j] *= silu(z[vh * d + j]);
    }
    out[t] = matvec(l.ssm_out, o, m.n_embd);
  }
  return out;
}

// The residual stream of every position after the last layer.
std::vector<Vec> run_layers(const RefQwen35& m, const std::vector<int32_t>& tokens, bool is_kv_f16) {
  const int64_t n = static_cast<int64_t>(tokens.size()), d = m.n_embd;
  std::vector<Vec> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) x[t].assign(m.embd.begin() + tokens[t] * d, m.embd.begin() + (tokens[t] + 1) * d);
  for (const RefQwen35Layer& l : m.layers) {
    std::vector<Vec> h(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) h[t] = normed(x[t], l.attn_norm, m.eps);
    const std::vector<Vec> a = l.is_recurrent ? recurrent_layer(m, l, h) : attention_layer(m, l, h, is_kv_f16);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < d; ++i) x[t][i] += a[t][i];
      const Vec y = swiglu_ffn(m, l, normed(x[t], l.post_attention_norm, m.eps));
      for (int64_t i = 0; i < d; ++i) x[t][i] += y[i];
    }
  }
  return x;
}

// Checks one layer's tensors against the model's shape; empty when they agree.
std::string check_layer(const RefQwen35& m, const RefQwen35Layer& l, int64_t il) {
  const int64_t d = m.n_embd;
  auto is = [](const std::vector<float>& w, int64_t n) { return static_cast<int64_t>(w.size()) == n; };
  std::string bad;
  auto need = [&](bool ok, const char* what) {
    if (!ok && bad.empty()) bad = "reference: qwen35 layer " + std::to_string(il) + ": " + what;
  };
  need(is(l.attn_norm, d) && is(l.post_attention_norm, d), "attn_norm or post_attention_norm");
  if (l.is_recurrent) {
    const int64_t cd = m.conv_dim(), nv = m.dt_rank;
    need(is(l.wqkv, cd * d) && is(l.wz, m.d_inner * d), "attn_qkv or attn_gate");
    need(is(l.conv, cd * m.conv_kernel), "ssm_conv1d");
    need(is(l.beta, nv * d) && is(l.alpha, nv * d) && is(l.dt_bias, nv) && is(l.ssm_a, nv),
         "ssm_beta, ssm_alpha, ssm_dt.bias or ssm_a");
    need(is(l.ssm_norm, m.d_state) && is(l.ssm_out, d * m.d_inner), "ssm_norm or ssm_out");
  } else {
    const int64_t q = m.n_head * m.head_dim, kv = m.n_kv_head * m.head_dim;
    need(is(l.wq, 2 * q * d) && is(l.wk, kv * d) && is(l.wv, kv * d), "attn_q (query and gate), attn_k or attn_v");
    need(is(l.wo, d * q) && is(l.q_norm, m.head_dim) && is(l.k_norm, m.head_dim),
         "attn_output, attn_q_norm or attn_k_norm");
  }
  need(l.n_ff > 0 && is(l.gate, l.n_ff * d) && is(l.up, l.n_ff * d) && is(l.down, d * l.n_ff), "FFN");
  return bad;
}

// Which trunk layers are recurrent: attention.recurrent_layers where given, else every layer but
// each full_attention_interval-th (default 4), as llama_model_qwen35::load_arch_hparams reads it.
std::vector<bool> recurrent_pattern(const gguf::GgufFile& f, int64_t n_layer) {
  std::vector<bool> out(static_cast<size_t>(n_layer), false);
  if (const gguf::Value* v = f.find("qwen35.attention.recurrent_layers"); v != nullptr && v->as_array()) {
    const auto& items = v->as_array()->items;
    for (int64_t il = 0; il < n_layer && static_cast<size_t>(il) < items.size(); ++il) {
      out[il] = items[static_cast<size_t>(il)].as_bool().value_or(false);
    }
    return out;
  }
  const int64_t interval = f.get_int("qwen35.full_attention_interval").value_or(4);
  for (int64_t il = 0; il < n_layer; ++il) out[il] = interval <= 0 || (il + 1) % interval != 0;
  return out;
}

// An attention layer's tensors under prefix p: attn_q (each head's query and gate), attn_k and
// attn_v, or llama.cpp's fused attn_qkv (every head's query and gate, then the keys, then the
// values); the output and the q/k norms.
void load_attention(const gguf::GgufFile& f, const std::string& p, const RefQwen35& m, RefQwen35Layer* l) {
  if (const std::vector<float> qkv = load(f, p + "attn_qkv.weight"); !qkv.empty()) {
    const int64_t q = 2 * m.n_head * m.head_dim * m.n_embd, kv = m.n_kv_head * m.head_dim * m.n_embd;
    if (static_cast<int64_t>(qkv.size()) == q + 2 * kv) {
      l->wq.assign(qkv.begin(), qkv.begin() + q);
      l->wk.assign(qkv.begin() + q, qkv.begin() + q + kv);
      l->wv.assign(qkv.begin() + q + kv, qkv.end());
    }
  } else {
    l->wq = load(f, p + "attn_q.weight");
    l->wk = load(f, p + "attn_k.weight");
    l->wv = load(f, p + "attn_v.weight");
  }
  l->wo = load(f, p + "attn_output.weight");
  l->q_norm = load(f, p + "attn_q_norm.weight");
  l->k_norm = load(f, p + "attn_k_norm.weight");
}

void load_ffn(const gguf::GgufFile& f, const std::string& p, int64_t n_embd, RefQwen35Layer* l) {
  l->gate = load(f, p + "ffn_gate.weight");
  l->up = load(f, p + "ffn_up.weight");
  l->down = load(f, p + "ffn_down.weight");
  l->n_ff = static_cast<int64_t>(l->down.size()) / n_embd;
}

}  // namespace

std::shared_ptr<RefQwen35> load_reference_qwen35(const gguf::GgufFile& f, std::string* error) {
  auto m = std::make_shared<RefQwen35>();
  const std::string a = "qwen35.";
  m->n_embd = f.get_int(a + "embedding_length").value_or(0);
  // The trunk: block_count less the multi-token-prediction layers stored after it.
  m->n_layer = f.get_int(a + "block_count").value_or(0) - f.get_int(a + "nextn_predict_layers").value_or(0);
  m->eps = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-6);
  m->head_dim = f.get_int(a + "attention.key_length").value_or(0);
  m->n_rot = f.get_int(a + "rope.dimension_count").value_or(m->head_dim);
  m->rope_base = f.get_float(a + "rope.freq_base").value_or(10000.0);
  const double factor = f.get_float(a + "rope.scaling.factor").value_or(0.0);
  m->rope_scale = factor > 0 ? 1.0 / factor : 1.0;
  m->d_state = f.get_int(a + "ssm.state_size").value_or(0);
  m->n_group = f.get_int(a + "ssm.group_count").value_or(0);
  m->dt_rank = f.get_int(a + "ssm.time_step_rank").value_or(0);
  m->d_inner = f.get_int(a + "ssm.inner_size").value_or(0);
  m->conv_kernel = f.get_int(a + "ssm.conv_kernel").value_or(0);
  if (const std::string type = f.get_string(a + "rope.scaling.type").value_or("linear");
      type != "linear" && type != "none") {
    *error = "reference: qwen35 with rope.scaling.type " + type + " is not supported";
    return nullptr;
  }
  if (f.get_int(a + "attention.value_length").value_or(m->head_dim) != m->head_dim) {
    *error = "reference: qwen35 needs equal key and value head sizes";
    return nullptr;
  }
  const gguf::Value* sections = f.find(a + "rope.dimension_sections");
  const gguf::Array* sections_array = sections != nullptr ? sections->as_array() : nullptr;
  if (sections_array == nullptr || sections_array->items.size() < 3) {
    *error = "reference: qwen35 needs rope.dimension_sections";
    return nullptr;
  }
  for (size_t i = 0; i < 4 && i < sections_array->items.size(); ++i) {
    m->rope_sections[i] = sections_array->items[i].as_int().value_or(0);
  }
  const int64_t sect_dims = m->rope_sections[0] + m->rope_sections[1] + m->rope_sections[2] + m->rope_sections[3];
  if (m->n_embd <= 0 || m->n_layer <= 0 || m->head_dim <= 0 || m->n_rot <= 0 || m->n_rot > m->head_dim ||
      m->n_rot % 2 != 0 || sect_dims <= 0 || sect_dims > m->head_dim) {
    *error = "reference: qwen35 needs its width, layer count, head size, RoPE width and sections";
    return nullptr;
  }
  if (m->d_state <= 0 || m->n_group <= 0 || m->dt_rank <= 0 || m->dt_rank % m->n_group != 0 ||
      m->d_inner != m->dt_rank * m->d_state || m->conv_kernel <= 0) {
    *error = "reference: qwen35's ssm keys (state size, groups, time step rank, inner size, conv kernel) disagree";
    return nullptr;
  }
  m->embd = load(f, "token_embd.weight");
  m->vocab = static_cast<int64_t>(m->embd.size()) / m->n_embd;
  m->output = load(f, "output.weight");
  if (m->output.empty()) m->output = m->embd;  // tied
  m->output_norm = load(f, "output_norm.weight");
  const std::vector<bool> recurrent = recurrent_pattern(f, m->n_layer);
  for (int64_t il = 0; il < m->n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    RefQwen35Layer l;
    l.is_recurrent = recurrent[static_cast<size_t>(il)];
    l.attn_norm = load(f, p + "attn_norm.weight");
    l.post_attention_norm = load(f, p + "post_attention_norm.weight");
    if (l.is_recurrent) {
      l.wqkv = load(f, p + "attn_qkv.weight");
      l.wz = load(f, p + "attn_gate.weight");
      l.conv = load(f, p + "ssm_conv1d.weight");
      l.beta = load(f, p + "ssm_beta.weight");
      l.alpha = load(f, p + "ssm_alpha.weight");
      l.dt_bias = load(f, p + "ssm_dt.bias");
      l.ssm_a = load(f, p + "ssm_a");
      l.ssm_norm = load(f, p + "ssm_norm.weight");
      l.ssm_out = load(f, p + "ssm_out.weight");
    } else {
      m->n_head = per_layer(f, a + "attention.head_count", il, 0);
      m->n_kv_head = per_layer(f, a + "attention.head_count_kv", il, m->n_head);
      if (m->n_head <= 0 || m->n_kv_head <= 0 || m->n_head % m->n_kv_head != 0) {
        *error = "reference: qwen35 layer " + std::to_string(il) + "'s head counts";
        return nullptr;
      }
      load_attention(f, p, *m, &l);
    }
    load_ffn(f, p, m->n_embd, &l);
    m->layers.push_back(std::move(l));
  }
  if (f.get_int(a + "nextn_predict_layers").value_or(0) > 0) {
    const std::string p = "blk." + std::to_string(m->n_layer) + ".";
    const std::string nextn = p + "nextn.";
    RefQwen35Layer& l = m->mtp;  // an attention layer (llama.cpp's load_block_mtp)
    l.attn_norm = load(f, p + "attn_norm.weight");
    l.post_attention_norm = load(f, p + "post_attention_norm.weight");
    load_attention(f, p, *m, &l);
    load_ffn(f, p, m->n_embd, &l);
    m->nextn_enorm = load(f, nextn + "enorm.weight");
    m->nextn_hnorm = load(f, nextn + "hnorm.weight");
    m->nextn_eh_proj = load(f, nextn + "eh_proj.weight");
    m->mtp_head_norm = load(f, nextn + "shared_head_norm.weight");
    if (m->mtp_head_norm.empty()) m->mtp_head_norm = m->output_norm;
    if (std::string bad = check_layer(*m, l, m->n_layer); !bad.empty()) {
      *error = bad;
      return nullptr;
    }
    const auto d = static_cast<size_t>(m->n_embd);
    if (m->nextn_enorm.size() != d || m->nextn_hnorm.size() != d || m->nextn_eh_proj.size() != 2 * d * d) {
      *error = "reference: qwen35's prediction layer has no complete nextn.enorm, hnorm and eh_proj";
      return nullptr;
    }
    m->has_mtp = true;
  }
  // Every attention layer shares one head shape (the rest of the reference assumes it).
  for (int64_t il = 0; il < m->n_layer; ++il) {
    if (!recurrent[static_cast<size_t>(il)] &&
        (per_layer(f, a + "attention.head_count", il, 0) != m->n_head ||
         per_layer(f, a + "attention.head_count_kv", il, m->n_head) != m->n_kv_head)) {
      *error = "reference: qwen35's attention layers have different head counts";
      return nullptr;
    }
    if (std::string bad = check_layer(*m, m->layers[static_cast<size_t>(il)], il); !bad.empty()) {
      *error = bad;
      return nullptr;
    }
  }
  if (m->vocab <= 0 || static_cast<int64_t>(m->output.size()) != m->vocab * m->n_embd ||
      static_cast<int64_t>(m->output_norm.size()) != m->n_embd) {
    *error = "reference: qwen35's embedding, classifier or output norm is missing";
    return nullptr;
  }
  return m;
}

std::vector<std::vector<float>> qwen35_hidden_states(const RefQwen35& m, const std::vector<int32_t>& tokens) {
  return ref::hidden_rows(run_layers(m, tokens, false), m.output_norm, m.eps);
}

std::vector<std::vector<float>> qwen35_logits(const RefQwen35& m, const std::vector<int32_t>& tokens, bool is_kv_f16) {
  return ref::logit_rows(run_layers(m, tokens, is_kv_f16), m.output, m.output_norm, m.eps, m.vocab);
}

std::vector<std::vector<float>> qwen35_mtp_logits(const RefQwen35& m, const std::vector<int32_t>& tokens,
                                                  const std::vector<std::vector<float>>& hidden) {
  const int64_t n = static_cast<int64_t>(tokens.size()), d = m.n_embd;
  std::vector<Vec> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    Vec joined =
        normed(Vec(m.embd.begin() + tokens[t] * d, m.embd.begin() + (tokens[t] + 1) * d), m.nextn_enorm, m.eps);
    const Vec h = normed(t > 0 ? Vec(hidden[t - 1].begin(), hidden[t - 1].end()) : Vec(static_cast<size_t>(d), 0.0),
                         m.nextn_hnorm, m.eps);
    joined.insert(joined.end(), h.begin(), h.end());
    x[t] = matvec(m.nextn_eh_proj, joined, d);
  }
  std::vector<Vec> h(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) h[t] = normed(x[t], m.mtp.attn_norm, m.eps);
  const std::vector<Vec> a = attention_layer(m, m.mtp, h, false);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < d; ++i) x[t][i] += a[t][i];
    const Vec y = swiglu_ffn(m, m.mtp, normed(x[t], m.mtp.post_attention_norm, m.eps));
    for (int64_t i = 0; i < d; ++i) x[t][i] += y[i];
  }
  return ref::logit_rows(x, m.output, m.mtp_head_norm, m.eps, m.vocab);
}

}  // namespace iwb::test
