// The test's reference forward pass (see reference_forward.h).
#include "reference_forward.h"

#include "iwb/kernels/dequantize.h"

#include <algorithm>
#include <cmath>

namespace iwb::test {
namespace {

// Rows [first, first + count) of a [rows][in] matrix.
std::vector<float> rows_of(const std::vector<float>& w, int64_t in, int64_t first, int64_t count) {
  if (w.size() < static_cast<size_t>((first + count) * in)) return {};
  return std::vector<float>(w.begin() + first * in, w.begin() + (first + count) * in);
}

std::vector<float> load_tensor(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return {};
  std::vector<float> out(static_cast<size_t>(t->num_elements()));
  if (!dequantize_row_ref(t->type, f.tensor_data(*t).data(), out.data(), t->num_elements())) return {};
  return out;
}

// y[o] = sum_i W[o][i] x[i] + b[o]
std::vector<float> linear(const std::vector<float>& w, const std::vector<float>& b, const std::vector<float>& x,
                          int64_t out) {
  const int64_t in = static_cast<int64_t>(x.size());
  std::vector<float> y(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    double s = b.empty() ? 0.0 : b[o];
    for (int64_t i = 0; i < in; ++i) s += static_cast<double>(w[o * in + i]) * x[i];
    y[o] = static_cast<float>(s);
  }
  return y;
}

void rms_norm(float* x, int64_t n, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] * inv * w[i]);
}

// YaRN as ggml computes it (ggml_rope_yarn_corr_dims, rope_yarn): pair i's angle mixes the
// interpolated and the original angle by a ramp between two correction dims, and cos/sin grow
// by 1 + 0.1 ln(1 / scale) (llama.cpp's attn_factor is 1 for gpt-oss).
struct Yarn {
  bool on = false;
  double low = 0, high = 0;
};

Yarn yarn_of(const RefModel& m) {
  Yarn y;
  if (!m.is_yarn) return y;
  y.on = true;
  const auto dim = [&](double rotations) {
    return static_cast<float>(m.n_rot * std::log(m.yarn_original_context / (rotations * 2 * M_PI)) /
                              (2 * std::log(m.rope_base)));
  };
  y.low = std::max(0.0f, std::floor(dim(32.0)));
  y.high = std::min(static_cast<float>(m.n_rot - 1), std::ceil(dim(1.0)));
  return y;
}

void rotate(float* x, int64_t n_rot, int64_t pos, double base, double scale, bool is_neox,
            const std::vector<float>& factors, double mscale, const Yarn& yarn = {}) {
  if (yarn.on) mscale *= 1.0 + 0.1 * std::log(1.0 / scale);
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    double theta = pos * scale * std::pow(base, -2.0 * i / n_rot);
    if (!factors.empty()) theta /= factors[i];
    if (yarn.on) {
      const double extrapolated = theta / scale;
      const double ramp = 1.0 - std::clamp((i - yarn.low) / std::max(0.001, yarn.high - yarn.low), 0.0, 1.0);
      theta = theta * (1.0 - ramp) + extrapolated * ramp;
    }
    const int64_t a = is_neox ? i : 2 * i, b = is_neox ? i + n_rot / 2 : 2 * i + 1;
    const double x0 = x[a], x1 = x[b];
    const double c = std::cos(theta) * mscale, sn = std::sin(theta) * mscale;
    x[a] = static_cast<float>(x0 * c - x1 * sn);
    x[b] = static_cast<float>(x0 * sn + x1 * c);
  }
}

// qwen3moe's FFN for one token (llama.cpp's build_moe_ffn with softmax gating): softmax of the
// router's scores, the n_expert_used best experts (lower id first on ties), their
// probabilities divided by their sum, and the sum of each chosen expert's SwiGLU FFN times its
// weight.
// gpt-oss (SOFTMAX_WEIGHT gating, LLM_FFN_SWIGLU_OAI_MOE): the router's biased logits, the
// n_expert_used largest, weights the softmax over those; each expert's gate/up/down with its
// biases, gate clamped above at 7, up to [-7, 7], out = g sigmoid(1.702 g) (u + 1).
std::vector<float> gpt_oss_ffn(const RefModel& m, const RefLayer& l, const std::vector<float>& h) {
  const int64_t d = m.n_embd, ff = m.n_ff_exp, ne = m.n_expert, k = m.n_expert_used;
  const std::vector<float> logits = linear(l.gate_inp, l.gate_inp_b, h, ne);
  std::vector<int64_t> order(static_cast<size_t>(ne));
  for (int64_t e = 0; e < ne; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  double top = logits[order[0]], total = 0;
  std::vector<double> w(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) total += (w[j] = std::exp(logits[order[j]] - top));
  std::vector<double> y(static_cast<size_t>(d), 0.0);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t e = order[j];
    auto slice = [&](const std::vector<float>& all, int64_t rows, int64_t cols) {
      return std::vector<float>(all.begin() + e * rows * cols, all.begin() + (e + 1) * rows * cols);
    };
    std::vector<float> g = linear(slice(l.gate_exps, ff, d), slice(l.gate_exps_b, ff, 1), h, ff);
    const std::vector<float> u = linear(slice(l.up_exps, ff, d), slice(l.up_exps_b, ff, 1), h, ff);
    for (int64_t i = 0; i < ff; ++i) {
      const double gg = std::min(static_cast<double>(g[i]), 7.0), uu = std::clamp(static_cast<double>(u[i]), -7.0, 7.0);
      g[i] = static_cast<float>(gg / (1.0 + std::exp(-1.702 * gg)) * (uu + 1.0));
    }
    const std::vector<float> down = linear(slice(l.down_exps, d, ff), slice(l.down_exps_b, d, 1), g, d);
    for (int64_t i = 0; i < d; ++i) y[i] += w[j] / total * down[i];
  }
  return std::vector<float>(y.begin(), y.end());
}

// One SwiGLU FFN: down(silu(gate . h) * (up . h)).
std::vector<float> swiglu_ffn(const std::vector<float>& gate, const std::vector<float>& up,
                              const std::vector<float>& down, const std::vector<float>& h, int64_t ff, int64_t d) {
  std::vector<float> g = linear(gate, {}, h, ff);
  const std::vector<float> u = linear(up, {}, h, ff);
  for (int64_t i = 0; i < ff; ++i)
    g[i] = static_cast<float>(g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i]);
  return linear(down, {}, g, d);
}

// glm4moe (DeepSeek V3's routing, llama.cpp's build_moe_ffn with SIGMOID gating and
// exp_probs_b): p = sigmoid of the router's scores; the n_expert_used largest p + bias chosen;
// weights the chosen p divided by their sum, times the scale; plus the shared experts' FFN.
// deepseek2 as well: softmax scores where the file says so (V2), renormalisation only where it
// says so, and V3's groups: a group's score is the sum of its two best biased scores, and only
// the n_group_used best groups' experts can be chosen.
std::vector<float> glm_ffn(const RefModel& m, const RefLayer& l, const std::vector<float>& h) {
  const int64_t d = m.n_embd, ff = m.n_ff_exp, ne = m.n_expert, k = m.n_expert_used;
  const std::vector<float> scores = linear(l.gate_inp, {}, h, ne);
  std::vector<double> p(static_cast<size_t>(ne)), chosen_by(static_cast<size_t>(ne));
  const double top_score = *std::max_element(scores.begin(), scores.end());
  double softmax_sum = 0;
  for (int64_t e = 0; e < ne; ++e) softmax_sum += std::exp(scores[e] - top_score);
  for (int64_t e = 0; e < ne; ++e) {
    p[e] = m.is_expert_sigmoid ? 1.0 / (1.0 + std::exp(-static_cast<double>(scores[e])))
                               : std::exp(scores[e] - top_score) / softmax_sum;
    chosen_by[e] = p[e] + (l.exp_probs_b.empty() ? 0.0 : l.exp_probs_b[e]);
  }
  if (m.n_expert_groups > 1) {
    const int64_t per = ne / m.n_expert_groups;
    std::vector<std::pair<double, int64_t>> groups;
    for (int64_t g = 0; g < m.n_expert_groups; ++g) {
      std::vector<double> in(chosen_by.begin() + g * per, chosen_by.begin() + (g + 1) * per);
      std::sort(in.rbegin(), in.rend());
      groups.push_back({-(in[0] + in[1]), g});  // ascending: best first, lower group on ties
    }
    std::sort(groups.begin(), groups.end());
    for (size_t j = static_cast<size_t>(m.n_group_used); j < groups.size(); ++j) {
      for (int64_t e = groups[j].second * per; e < (groups[j].second + 1) * per; ++e) chosen_by[e] = -INFINITY;
    }
  }
  std::vector<int64_t> order(static_cast<size_t>(ne));
  for (int64_t e = 0; e < ne; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return chosen_by[a] > chosen_by[b]; });
  double total = 0;
  for (int64_t j = 0; j < k; ++j) total += p[order[j]];
  if (!m.is_expert_norm) total = 1.0;
  std::vector<double> y(static_cast<size_t>(d), 0.0);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t e = order[j];
    auto slice = [&](const std::vector<float>& all, int64_t rows, int64_t cols) {
      return std::vector<float>(all.begin() + e * rows * cols, all.begin() + (e + 1) * rows * cols);
    };
    const std::vector<float> down =
        swiglu_ffn(slice(l.gate_exps, ff, d), slice(l.up_exps, ff, d), slice(l.down_exps, d, ff), h, ff, d);
    for (int64_t i = 0; i < d; ++i) y[i] += p[e] / total * m.expert_weights_scale * down[i];
  }
  if (m.n_shared_expert > 0) {
    const std::vector<float> shared = swiglu_ffn(l.gate_shexp, l.up_shexp, l.down_shexp, h, ff * m.n_shared_expert, d);
    for (int64_t i = 0; i < d; ++i) y[i] += shared[i];
  }
  return std::vector<float>(y.begin(), y.end());
}

std::vector<float> moe_ffn(const RefModel& m, const RefLayer& l, const std::vector<float>& h) {
  if (m.arch == "gpt-oss") return gpt_oss_ffn(m, l, h);
  if (m.arch == "glm4moe" || m.arch == "deepseek2") return glm_ffn(m, l, h);
  const int64_t d = m.n_embd, ff = m.n_ff_exp, ne = m.n_expert;
  const std::vector<float> scores = linear(l.gate_inp, {}, h, ne);
  const double top = *std::max_element(scores.begin(), scores.end());
  std::vector<double> p(static_cast<size_t>(ne));
  double total = 0;
  for (int64_t e = 0; e < ne; ++e) total += (p[e] = std::exp(scores[e] - top));
  for (double& v : p) v /= total;
  std::vector<int64_t> order(static_cast<size_t>(ne));
  for (int64_t e = 0; e < ne; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  double chosen = 0;
  for (int64_t j = 0; j < m.n_expert_used; ++j) chosen += p[order[j]];
  std::vector<double> y(static_cast<size_t>(d), 0.0);
  for (int64_t j = 0; j < m.n_expert_used; ++j) {
    const int64_t e = order[j];
    const double w = p[e] / chosen;
    auto slice = [&](const std::vector<float>& all, int64_t rows, int64_t cols) {
      return std::vector<float>(all.begin() + e * rows * cols, all.begin() + (e + 1) * rows * cols);
    };
    std::vector<float> g = linear(slice(l.gate_exps, ff, d), {}, h, ff);
    const std::vector<float> u = linear(slice(l.up_exps, ff, d), {}, h, ff);
    for (int64_t i = 0; i < ff; ++i)
      g[i] = static_cast<float>(g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i]);
    const std::vector<float> down = linear(slice(l.down_exps, d, ff), {}, g, d);
    for (int64_t i = 0; i < d; ++i) y[i] += w * down[i];
  }
  return std::vector<float>(y.begin(), y.end());
}

// deepseek2's keys: the latent widths, DeepSeek routing, and YaRN's attention scale as
// DeepSeek's modeling code computes it: softmax_scale = mla_k^-0.5 * mscale^2 with mscale =
// 0.1 * mscale_all_dim * ln(factor) + 1 (the file's log multiplier is 0.1 * mscale_all_dim), and
// RoPE's cos and sin left at magnitude 1.
void load_deepseek2_keys(const gguf::GgufFile& f, RefModel* m) {
  const std::string a = m->arch + ".";
  m->kv_lora = f.get_int(a + "attention.kv_lora_rank").value_or(0);
  m->q_lora = f.get_int(a + "attention.q_lora_rank").value_or(0);
  m->mla_k = f.get_int(a + "attention.key_length_mla").value_or(0);
  m->mla_v = f.get_int(a + "attention.value_length_mla").value_or(0);
  m->is_expert_sigmoid = f.get_int(a + "expert_gating_func").value_or(1) == 2;
  m->is_expert_norm = f.get_bool(a + "expert_weights_norm").value_or(false);
  m->n_expert_groups = f.get_int(a + "expert_group_count").value_or(0);
  m->n_group_used = f.get_int(a + "expert_group_used_count").value_or(0);
  const double factor = m->rope_scale < 1.0 ? 1.0 / m->rope_scale : 1.0;
  const double mscale_all_dim = f.get_float(a + "rope.scaling.yarn_log_multiplier").value_or(0.0) / 0.1;
  const double mscale = m->is_yarn ? 0.1 * mscale_all_dim * std::log(factor) + 1.0 : 1.0;
  m->attn_scale = mscale * mscale / std::sqrt(static_cast<double>(m->mla_k));
  if (m->is_yarn) m->rope_mscale = 1.0 / (1.0 + 0.1 * std::log(factor));  // rotate() grows it back to 1
}

void load_latent_layer(const gguf::GgufFile& f, const std::string& p, RefLayer* l) {
  l->wq = load_tensor(f, p + (f.find_tensor(p + "attn_q_b.weight") ? "attn_q_b.weight" : "attn_q.weight"));
  l->wq_a = load_tensor(f, p + "attn_q_a.weight");
  l->q_a_norm = load_tensor(f, p + "attn_q_a_norm.weight");
  l->wkv_a = load_tensor(f, p + "attn_kv_a_mqa.weight");
  l->kv_a_norm = load_tensor(f, p + "attn_kv_a_norm.weight");
  l->wk_b = load_tensor(f, p + "attn_k_b.weight");
  l->wv_b = load_tensor(f, p + "attn_v_b.weight");
}

// One deepseek2 layer's attention output (after attn_output) for every token: each head's key
// [k_nope = W_kb c, k_pe] and value W_vb c decompressed from the token's normed latent c, as
// DeepSeek's modeling code does (the engine absorbs W_kb into the query instead).
std::vector<std::vector<float>> latent_attention(const RefModel& m, const RefLayer& l,
                                                 const std::vector<std::vector<float>>& x, bool is_kv_f16) {
  const int64_t n = static_cast<int64_t>(x.size()), d = m.n_embd, heads = m.n_head, r = m.kv_lora;
  const int64_t rope = m.n_rot, nope = m.mla_k - rope, dv = m.mla_v;
  const Yarn yarn = yarn_of(m);
  std::vector<std::vector<float>> q(n), latent(n), k_pe(n), out(n);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> h = x[t];
    rms_norm(h.data(), d, l.attn_norm, m.eps);
    if (!l.wq_a.empty()) {
      std::vector<float> qa = linear(l.wq_a, {}, h, m.q_lora);
      rms_norm(qa.data(), m.q_lora, l.q_a_norm, m.eps);
      q[t] = linear(l.wq, {}, qa, heads * m.mla_k);
    } else {
      q[t] = linear(l.wq, {}, h, heads * m.mla_k);
    }
    for (int64_t hh = 0; hh < heads; ++hh) {
      rotate(&q[t][hh * m.mla_k + nope], rope, t, m.rope_base, m.rope_scale, false, {}, m.rope_mscale, yarn);
    }
    const std::vector<float> kv = linear(l.wkv_a, {}, h, r + rope);
    latent[t].assign(kv.begin(), kv.begin() + r);
    rms_norm(latent[t].data(), r, l.kv_a_norm, m.eps);
    k_pe[t].assign(kv.begin() + r, kv.end());
    rotate(k_pe[t].data(), rope, t, m.rope_base, m.rope_scale, false, {}, m.rope_mscale, yarn);
    if (is_kv_f16) {  // the engine's cache holds the latent and the roped key part in f16
      for (float& e : latent[t]) e = fp16_to_f32(f32_to_fp16(e));
      for (float& e : k_pe[t]) e = fp16_to_f32(f32_to_fp16(e));
    }
  }
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> attn(static_cast<size_t>(heads * dv));
    for (int64_t hh = 0; hh < heads; ++hh) {
      const float* wk = l.wk_b.data() + hh * r * nope;  // [r][nope]
      const float* wv = l.wv_b.data() + hh * dv * r;    // [dv][r]
      std::vector<double> s;
      for (int64_t j = 0; j <= t; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < nope; ++i) {
          double k_nope = 0;
          for (int64_t c = 0; c < r; ++c) k_nope += static_cast<double>(wk[c * nope + i]) * latent[j][c];
          dot += k_nope * q[t][hh * m.mla_k + i];
        }
        for (int64_t i = 0; i < rope; ++i) dot += static_cast<double>(q[t][hh * m.mla_k + nope + i]) * k_pe[j][i];
        s.push_back(dot * m.attn_scale);
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t o = 0; o < dv; ++o) {
        double acc = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double value = 0;
          for (int64_t c = 0; c < r; ++c) value += static_cast<double>(wv[o * r + c]) * latent[j][c];
          acc += s[j] / sum * value;
        }
        attn[hh * dv + o] = static_cast<float>(acc);
      }
    }
    out[t] = linear(l.wo, {}, attn, d);
  }
  return out;
}

}  // namespace

RefModel load_reference_model(const gguf::GgufFile& f, std::string* error, int64_t context_length, bool is_mtp_head) {
  RefModel m;
  m.arch = f.get_string("general.architecture").value_or("");
  if (m.arch == "gemma4") {
    std::shared_ptr<RefGemma4> g = load_reference_gemma4(f, error);
    if (g == nullptr) return m;
    m.n_embd = g->n_embd;
    m.n_layer = g->n_layer;
    m.vocab = g->vocab;
    m.gemma4 = std::move(g);
    return m;
  }
  const std::string a = m.arch + ".";
  m.n_embd = f.get_int(a + "embedding_length").value_or(0);
  m.n_layer = f.get_int(a + "block_count").value_or(0);
  m.n_head = f.get_int(a + "attention.head_count").value_or(0);
  m.n_kv_head = f.get_int(a + "attention.head_count_kv").value_or(m.n_head);
  m.head_dim = f.get_int(a + "attention.key_length").value_or(m.n_head ? m.n_embd / m.n_head : 0);
  m.n_ff = f.get_int(a + "feed_forward_length").value_or(0);
  m.n_rot = f.get_int(a + "rope.dimension_count").value_or(m.head_dim);
  m.eps = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5);
  m.rope_base = f.get_float(a + "rope.freq_base").value_or(10000.0);
  const double factor = f.get_float(a + "rope.scaling.factor").value_or(0.0);
  m.rope_scale = factor > 0 ? 1.0 / factor : 1.0;
  m.sliding_window = f.get_int(a + "attention.sliding_window").value_or(0);
  if (const gguf::Value* v = f.find(a + "attention.sliding_window_pattern"); v != nullptr && v->as_array()) {
    for (const gguf::Value& b : v->as_array()->items) m.sliding_pattern.push_back(b.as_bool().value_or(false));
  }
  if (m.arch == "granite") {  // 0 or absent: off, as llama.cpp reads them
    const auto scale_or = [&](const char* key, double off) {
      const double v = f.get_float(a + key).value_or(0.0);
      return v != 0.0 ? v : off;
    };
    m.embd_scale = scale_or("embedding_scale", 1.0);
    m.residual_scale = scale_or("residual_scale", 1.0);
    m.attn_scale = scale_or("attention.scale", 0.0);
    m.logit_scale = scale_or("logit_scale", 1.0);
  }
  if (m.arch == "gemma2") {  // llama.cpp's defaults where the file gives no caps or window
    m.attn_softcap = f.get_float(a + "attn_logit_softcapping").value_or(50.0);
    m.final_softcap = f.get_float(a + "final_logit_softcapping").value_or(30.0);
    m.sliding_window = f.get_int(a + "attention.sliding_window").value_or(4096);
  }
  m.n_expert = f.get_int(a + "expert_count").value_or(0);
  m.n_expert_used = f.get_int(a + "expert_used_count").value_or(0);
  m.n_ff_exp = f.get_int(a + "expert_feed_forward_length").value_or(0);
  m.is_yarn = f.get_string(a + "rope.scaling.type").value_or("") == "yarn";
  if (m.arch == "glm4moe" || m.arch == "deepseek2") {  // the prediction layers come after the trunk, not run
    m.n_layer -= f.get_int(a + "nextn_predict_layers").value_or(0);
    m.n_shared_expert = f.get_int(a + "expert_shared_count").value_or(0);
    m.n_dense_lead = f.get_int(a + "leading_dense_block_count").value_or(0);
    const double scale = f.get_float(a + "expert_weights_scale").value_or(0.0);
    m.expert_weights_scale = scale != 0.0 ? scale : 1.0;
  }
  m.yarn_original_context =
      f.get_int(a + "rope.scaling.original_context_length").value_or(f.get_int(a + "context_length").value_or(0));
  if (m.arch == "deepseek2") load_deepseek2_keys(f, &m);

  m.embd = load_tensor(f, "token_embd.weight");
  m.vocab = m.n_embd ? static_cast<int64_t>(m.embd.size()) / m.n_embd : 0;
  m.output_norm = load_tensor(f, "output_norm.weight");
  m.output = load_tensor(f, "output.weight");
  if (m.output.empty()) m.output = m.embd;
  m.rope_freqs = load_tensor(f, "rope_freqs.weight");
  if (m.arch == "phi3") {
    // LongRoPE as llama.cpp runs it: the long factors above the original context, and cos/sin
    // scaled by the attention factor whichever set is used.
    const int64_t train = f.get_int(a + "context_length").value_or(0);
    const int64_t original = f.get_int(a + "rope.scaling.original_context_length").value_or(train);
    const int64_t context = context_length > 0 ? context_length : std::min<int64_t>(train, 4096);
    m.rope_freqs = load_tensor(f, context > original ? "rope_factors_long.weight" : "rope_factors_short.weight");
    m.rope_mscale = f.get_float(a + "rope.scaling.attn_factor").value_or(1.0);
  }
  // An MTP head: the first block after the trunk, alone.
  const int64_t first_layer = is_mtp_head ? m.n_layer : 0;
  const int64_t end_layer = is_mtp_head ? m.n_layer + 1 : m.n_layer;
  for (int64_t il = first_layer; il < end_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    RefLayer l;
    l.attn_norm = load_tensor(f, p + "attn_norm.weight");
    l.wq = load_tensor(f, p + "attn_q.weight");
    l.wk = load_tensor(f, p + "attn_k.weight");
    l.wv = load_tensor(f, p + "attn_v.weight");
    l.wo = load_tensor(f, p + "attn_output.weight");
    l.bq = load_tensor(f, p + "attn_q.bias");
    l.bk = load_tensor(f, p + "attn_k.bias");
    l.bv = load_tensor(f, p + "attn_v.bias");
    l.bo = load_tensor(f, p + "attn_output.bias");
    l.q_norm = load_tensor(f, p + "attn_q_norm.weight");
    l.k_norm = load_tensor(f, p + "attn_k_norm.weight");
    l.post_attention_norm = load_tensor(f, p + "post_attention_norm.weight");
    l.ffn_norm = load_tensor(f, p + "ffn_norm.weight");
    if (m.arch == "glm4moe") {  // the pre-FFN norm under the post-attention name, as gpt-oss's
      l.ffn_norm = l.post_attention_norm;
      l.post_attention_norm.clear();
      l.exp_probs_b = load_tensor(f, p + "exp_probs_b.bias");
      l.gate_shexp = load_tensor(f, p + "ffn_gate_shexp.weight");
      l.up_shexp = load_tensor(f, p + "ffn_up_shexp.weight");
      l.down_shexp = load_tensor(f, p + "ffn_down_shexp.weight");
    }
    if (m.arch == "gpt-oss") {  // the pre-FFN norm under gemma's post-attention name
      l.ffn_norm = l.post_attention_norm;
      l.sinks = load_tensor(f, p + "attn_sinks.weight");
      l.gate_inp_b = load_tensor(f, p + "ffn_gate_inp.bias");
      l.gate_exps_b = load_tensor(f, p + "ffn_gate_exps.bias");
      l.up_exps_b = load_tensor(f, p + "ffn_up_exps.bias");
      l.down_exps_b = load_tensor(f, p + "ffn_down_exps.bias");
      if (l.sinks.empty() || l.gate_inp_b.empty() || l.gate_exps_b.empty() || l.up_exps_b.empty() ||
          l.down_exps_b.empty()) {
        *error = "reference: gpt-oss layer " + std::to_string(il) + " lacks its sinks or expert biases";
        return m;
      }
    }
    if (m.arch == "deepseek2") {
      load_latent_layer(f, p, &l);
      l.exp_probs_b = load_tensor(f, p + "exp_probs_b.bias");
      l.gate_shexp = load_tensor(f, p + "ffn_gate_shexp.weight");
      l.up_shexp = load_tensor(f, p + "ffn_up_shexp.weight");
      l.down_shexp = load_tensor(f, p + "ffn_down_shexp.weight");
    }
    l.gate = load_tensor(f, p + "ffn_gate.weight");
    l.up = load_tensor(f, p + "ffn_up.weight");
    if (m.arch == "phi3") {
      // q, k, v stacked in attn_qkv; gate then up stacked in ffn_up.
      const std::vector<float> qkv = load_tensor(f, p + "attn_qkv.weight");
      const int64_t q = m.n_head * m.head_dim, kv = m.n_kv_head * m.head_dim;
      l.wq = rows_of(qkv, m.n_embd, 0, q);
      l.wk = rows_of(qkv, m.n_embd, q, kv);
      l.wv = rows_of(qkv, m.n_embd, q + kv, kv);
      const std::vector<float> gate_up = l.up;
      l.gate = rows_of(gate_up, m.n_embd, 0, m.n_ff);
      l.up = rows_of(gate_up, m.n_embd, m.n_ff, m.n_ff);
    }
    l.down = load_tensor(f, p + "ffn_down.weight");
    l.post_ffw_norm = load_tensor(f, p + "post_ffw_norm.weight");
    l.gate_inp = load_tensor(f, p + "ffn_gate_inp.weight");
    l.gate_exps = load_tensor(f, p + "ffn_gate_exps.weight");
    l.up_exps = load_tensor(f, p + "ffn_up_exps.weight");
    l.down_exps = load_tensor(f, p + "ffn_down_exps.weight");
    const bool is_expert_layer = m.n_expert > 0 && il >= m.n_dense_lead;
    const bool has_ffn = is_expert_layer
                             ? !l.gate_inp.empty() && !l.gate_exps.empty() && !l.up_exps.empty() && !l.down_exps.empty()
                             : !l.gate.empty() && !l.up.empty() && !l.down.empty();
    const bool has_norms = m.arch == "olmo2" ? !l.q_norm.empty() && !l.post_attention_norm.empty()
                                             : !l.attn_norm.empty() && !l.ffn_norm.empty();
    const bool has_attention = m.arch == "deepseek2"
                                   ? !l.wkv_a.empty() && !l.kv_a_norm.empty() && !l.wk_b.empty() && !l.wv_b.empty()
                                   : !l.wk.empty() && !l.wv.empty();
    if (l.wq.empty() || !has_attention || l.wo.empty() || !has_ffn || !has_norms) {
      *error = "reference: layer " + std::to_string(il) + " is incomplete";
      return m;
    }
    m.layers.push_back(std::move(l));
  }
  if (m.embd.empty() || m.output_norm.empty() || m.n_layer == 0) *error = "reference: model is incomplete";
  if (is_mtp_head) {
    const std::string p = "blk." + std::to_string(m.n_layer) + ".nextn.";
    m.n_dense_lead = m.n_layer >= m.n_dense_lead ? 0 : 1;
    m.n_layer = 1;
    m.nextn_enorm = load_tensor(f, p + "enorm.weight");
    m.nextn_hnorm = load_tensor(f, p + "hnorm.weight");
    m.nextn_eh_proj = load_tensor(f, p + "eh_proj.weight");
    // Its own embedding table, head norm and classifier where the file has them.
    for (auto [name, dst] :
         {std::pair{"embed_tokens.weight", &m.embd}, std::pair{"shared_head_norm.weight", &m.output_norm},
          std::pair{"shared_head_head.weight", &m.output}}) {
      std::vector<float> own = load_tensor(f, p + name);
      if (!own.empty()) *dst = std::move(own);
    }
    if (m.nextn_enorm.empty() || m.nextn_hnorm.empty() || m.nextn_eh_proj.empty()) {
      *error = "reference: the model has no complete prediction layer";
    }
  }
  return m;
}

namespace {

// The residual stream of every position after the last layer: x holds each position's input
// rows (the embeddings, or an MTP head's joined inputs).
std::vector<std::vector<float>> run_layers(const RefModel& m, std::vector<std::vector<float>> x, bool is_kv_f16) {
  const bool is_gemma = m.arch == "gemma3" || m.arch == "gemma2";
  const bool is_neox = m.arch != "llama" && m.arch != "smollm3" && m.arch != "granite";
  // Per-head q/k norms before RoPE: gemma3's, and qwen3's (which has nothing else of gemma's).
  const bool has_qk_norm = m.arch == "gemma3" || m.arch == "qwen3" || m.arch == "qwen3moe";
  // glm4moe: per-head q/k norms where the file has them (GLM-4.5 355B has, Air has not).
  const bool has_optional_qk_norm = m.arch == "glm4moe";
  // olmo2: no norms before attention or the FFN, q and k normed over each token's whole width,
  // and gemma's norms of both blocks' outputs.
  const bool is_olmo2 = m.arch == "olmo2";
  const bool has_post_norms = is_gemma || is_olmo2;
  const int64_t n = static_cast<int64_t>(x.size()), d = m.n_embd, hd = m.head_dim;
  const int64_t group = m.n_head / m.n_kv_head;
  for (int64_t il = 0; il < m.n_layer; ++il) {
    const RefLayer& l = m.layers[il];
    // gemma3: five sliding-window layers (RoPE base 10000, no scaling), then a global one.
    // gpt-oss, gemma2: the even layers slide, with the same RoPE as the others.
    const bool is_alternating = m.arch == "gpt-oss" || m.arch == "gemma2";
    const bool is_gemma3 = m.arch == "gemma3";
    // olmo2 (OLMo 3): the file's pattern, rotating with the global base and no scaling.
    const bool is_sliding =
        m.sliding_window > 0 &&
        (!m.sliding_pattern.empty() ? static_cast<bool>(m.sliding_pattern[static_cast<size_t>(il)])
                                    : (is_gemma3 && il % 6 != 5) || (is_alternating && il % 2 == 0));
    const bool is_local_rope = is_sliding && is_gemma3;
    const double base = is_local_rope ? 10000.0 : m.rope_base;
    const double scale = is_local_rope || (is_sliding && is_olmo2) ? 1.0 : m.rope_scale;
    const Yarn yarn = yarn_of(m);
    // smollm3: layers 3, 7, 11, ... leave q and k unrotated.
    const bool is_rope_layer = m.arch != "smollm3" || (il + 1) % 4 != 0;
    if (m.arch == "deepseek2") {
      const std::vector<std::vector<float>> o = latent_attention(m, l, x, is_kv_f16);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t i = 0; i < d; ++i) x[t][i] += o[t][i];
        std::vector<float> h = x[t];
        rms_norm(h.data(), d, l.ffn_norm, m.eps);
        const std::vector<float> y =
            il >= m.n_dense_lead ? moe_ffn(m, l, h) : swiglu_ffn(l.gate, l.up, l.down, h, m.n_ff, d);
        for (int64_t i = 0; i < d; ++i) x[t][i] += y[i];
      }
      continue;
    }
    std::vector<std::vector<float>> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> h = x[t];
      if (!is_olmo2) rms_norm(h.data(), d, l.attn_norm, m.eps);
      q[t] = linear(l.wq, l.bq, h, m.n_head * hd);
      k[t] = linear(l.wk, l.bk, h, m.n_kv_head * hd);
      v[t] = linear(l.wv, l.bv, h, m.n_kv_head * hd);
      if (is_olmo2) {
        rms_norm(q[t].data(), m.n_head * hd, l.q_norm, m.eps);
        rms_norm(k[t].data(), m.n_kv_head * hd, l.k_norm, m.eps);
      }
      for (int64_t hh = 0; hh < m.n_head; ++hh) {
        if (has_qk_norm || (has_optional_qk_norm && !l.q_norm.empty())) rms_norm(&q[t][hh * hd], hd, l.q_norm, m.eps);
        if (is_rope_layer) rotate(&q[t][hh * hd], m.n_rot, t, base, scale, is_neox, m.rope_freqs, m.rope_mscale, yarn);
      }
      for (int64_t g = 0; g < m.n_kv_head; ++g) {
        if (has_qk_norm || (has_optional_qk_norm && !l.k_norm.empty())) rms_norm(&k[t][g * hd], hd, l.k_norm, m.eps);
        if (is_rope_layer) rotate(&k[t][g * hd], m.n_rot, t, base, scale, is_neox, m.rope_freqs, m.rope_mscale, yarn);
      }
      if (is_kv_f16) {
        for (float& e : k[t]) e = fp16_to_f32(f32_to_fp16(e));
        for (float& e : v[t]) e = fp16_to_f32(f32_to_fp16(e));
      }
    }
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> attn(static_cast<size_t>(m.n_head * hd));
      for (int64_t hh = 0; hh < m.n_head; ++hh) {
        const int64_t g = hh / group;
        const int64_t first = is_sliding ? std::max<int64_t>(0, t - m.sliding_window + 1) : 0;
        std::vector<double> s;
        for (int64_t j = first; j <= t; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += static_cast<double>(q[t][hh * hd + i]) * k[j][g * hd + i];
          const double score = m.attn_scale != 0 ? dot * m.attn_scale : dot / std::sqrt(static_cast<double>(hd));
          s.push_back(m.attn_softcap > 0 ? m.attn_softcap * std::tanh(score / m.attn_softcap) : score);
        }
        // gpt-oss's sink: one more logit in the denominator, with no value.
        const double sink = l.sinks.empty() ? -INFINITY : l.sinks[hh];
        const double mx = std::max(sink, *std::max_element(s.begin(), s.end()));
        double sum = l.sinks.empty() ? 0.0 : std::exp(sink - mx);
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t i = 0; i < hd; ++i) {
          double acc = 0;
          for (int64_t j = first; j <= t; ++j) acc += s[j - first] / sum * v[j][g * hd + i];
          attn[hh * hd + i] = static_cast<float>(acc);
        }
      }
      std::vector<float> o = linear(l.wo, l.bo, attn, d);
      if (has_post_norms) rms_norm(o.data(), d, l.post_attention_norm, m.eps);
      for (int64_t i = 0; i < d; ++i) x[t][i] += static_cast<float>(m.residual_scale * o[i]);
      std::vector<float> h = x[t];
      if (!is_olmo2) rms_norm(h.data(), d, l.ffn_norm, m.eps);
      if (m.n_expert > 0 && il >= m.n_dense_lead) {
        const std::vector<float> moe = moe_ffn(m, l, h);
        for (int64_t i = 0; i < d; ++i) x[t][i] += moe[i];
        continue;
      }
      std::vector<float> g = linear(l.gate, {}, h, m.n_ff), u = linear(l.up, {}, h, m.n_ff);
      for (int64_t i = 0; i < m.n_ff; ++i) {
        const double z = g[i];
        const double act = is_gemma ? 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)))
                                    : z / (1.0 + std::exp(-z));
        g[i] = static_cast<float>(act * u[i]);
      }
      std::vector<float> down = linear(l.down, {}, g, d);
      if (has_post_norms) rms_norm(down.data(), d, l.post_ffw_norm, m.eps);
      for (int64_t i = 0; i < d; ++i) x[t][i] += static_cast<float>(m.residual_scale * down[i]);
    }
  }
  return x;
}

std::vector<std::vector<float>> embeddings(const RefModel& m, const std::vector<int32_t>& tokens) {
  const bool is_gemma = m.arch == "gemma3" || m.arch == "gemma2";
  const int64_t n = static_cast<int64_t>(tokens.size()), d = m.n_embd;
  std::vector<std::vector<float>> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    x[t].assign(m.embd.begin() + tokens[t] * d, m.embd.begin() + (tokens[t] + 1) * d);
    if (is_gemma) {
      for (float& v : x[t]) v *= std::sqrt(static_cast<float>(d));
    }
    for (float& v : x[t]) v = static_cast<float>(v * m.embd_scale);
  }
  return x;
}

// The output norm, the classifier and its scale and soft-cap, of one final residual row.
std::vector<float> logits_of(const RefModel& m, std::vector<float> h) {
  rms_norm(h.data(), m.n_embd, m.output_norm, m.eps);
  std::vector<float> logits = linear(m.output, {}, h, m.vocab);
  for (float& z : logits) z = static_cast<float>(z / m.logit_scale);
  if (m.final_softcap > 0) {
    for (float& z : logits) z = static_cast<float>(m.final_softcap * std::tanh(z / m.final_softcap));
  }
  return logits;
}

}  // namespace

std::vector<float> reference_logits(const RefModel& m, const std::vector<int32_t>& tokens, bool is_kv_f16) {
  if (m.gemma4 != nullptr) return gemma4_logits(*m.gemma4, tokens, is_kv_f16).back();
  return logits_of(m, run_layers(m, embeddings(m, tokens), is_kv_f16).back());
}

std::vector<std::vector<float>> reference_logits_all(const RefModel& m, const std::vector<int32_t>& tokens,
                                                     bool is_kv_f16) {
  if (m.gemma4 != nullptr) return gemma4_logits(*m.gemma4, tokens, is_kv_f16);
  std::vector<std::vector<float>> out;
  for (std::vector<float>& h : run_layers(m, embeddings(m, tokens), is_kv_f16))
    out.push_back(logits_of(m, std::move(h)));
  return out;
}

std::vector<std::vector<float>> reference_hidden_states(const RefModel& m, const std::vector<int32_t>& tokens) {
  if (m.gemma4 != nullptr) return gemma4_hidden_states(*m.gemma4, tokens);
  std::vector<std::vector<float>> x = run_layers(m, embeddings(m, tokens), false);
  for (std::vector<float>& row : x) rms_norm(row.data(), m.n_embd, m.output_norm, m.eps);
  return x;
}

std::vector<float> reference_mtp_logits(const RefModel& head, const std::vector<int32_t>& tokens,
                                        const std::vector<std::vector<float>>& hidden,
                                        std::vector<float>* head_hidden) {
  const int64_t d = head.n_embd;
  std::vector<std::vector<float>> x = embeddings(head, tokens);
  for (size_t t = 0; t < x.size(); ++t) {
    std::vector<float> joined = x[t];
    rms_norm(joined.data(), d, head.nextn_enorm, head.eps);
    std::vector<float> h = t > 0 ? hidden[t - 1] : std::vector<float>(static_cast<size_t>(d), 0.0f);
    rms_norm(h.data(), d, head.nextn_hnorm, head.eps);
    joined.insert(joined.end(), h.begin(), h.end());
    x[t] = linear(head.nextn_eh_proj, {}, joined, d);
  }
  std::vector<float> last = run_layers(head, std::move(x), false).back();
  if (head_hidden != nullptr) {
    *head_hidden = last;
    rms_norm(head_hidden->data(), d, head.output_norm, head.eps);
  }
  return logits_of(head, std::move(last));
}

}  // namespace iwb::test
