// Multi-head latent attention's own ops on the CPU (deepseek2; see forward_plan.h's LatentKv and
// HeadMatmuls): the key/value latent normed into the cache's rows, and the per-head products
// that take each head's query into the latent space (attn_k_b) and its output out of it
// (attn_v_b). Attention itself is the ordinary paged kernel with one KV head.
#include "backend/cpu/cpu_forward.h"
#include "iwb/kernels/matmul.h"
#include "iwb/kernels/rmsnorm.h"
#include "plan/plan_weights.h"

#include <algorithm>
#include <string>

namespace iwb {

// V = rmsnorm(latent) * attn_kv_a_norm, K = [V, the key's RoPE values] per token (llama.cpp's
// kv_cmpr normed and concatenated with k_pe; RoPE runs on K's last values afterwards).
Status CpuForward::run_latent_kv(const PlanOp& op, int64_t n) {
  const ModelConfig& c = m_config;
  const int64_t latent = c.kv_lora_rank, row = c.latent_kv_width(), k_row = c.k_width();
  for (int64_t t = 0; t < n; ++t) {
    const float* from = m_kv_latent.data() + t * row;
    std::copy(from, from + latent, m_v.data() + t * latent);
  }
  const std::vector<float>& weight = norm_weight(op);
  if (!rmsnorm({m_v.data(), weight.data(), m_v.data(), n, latent, c.rms_norm_eps, m_num_threads})) {
    return make_error(ErrorCode::InvalidArgument,
                      "the key/value latent's norm refused its arguments in layer " + std::to_string(op.layer));
  }
  for (int64_t t = 0; t < n; ++t) {
    const float* normed = m_v.data() + t * latent;
    const float* roped = m_kv_latent.data() + t * row + latent;
    float* k = m_k.data() + t * k_row;
    std::copy(normed, normed + latent, k);
    std::copy(roped, roped + (row - latent), k + latent);
  }
  record(op, 0, n);
  return {};
}

// Head h of every token: output_h[0, out) = W_h . input_h[0, in), then input_h's remaining values
// copied behind it. One matmul per head over the step's tokens, its rows gathered first.
Status CpuForward::run_head_matmuls(const PlanOp& op, int64_t n) {
  const int64_t il = op.layer;
  const PlanProduct& p = op.products[0];
  const ExpertMatrices& heads = plan::layer_head_matrices(m_weights.layers[static_cast<size_t>(il)], p.matrix);
  const float* input = buffer(op.input, nullptr);
  float* output = buffer(p.output, nullptr);
  const int64_t num_heads = op.rows_per_token;
  const int64_t in_row = p.in_features, out_row = p.out_features;
  // Heads of the query before absorption (QHeads), or of the attention's latent outputs (Attn).
  const int64_t in_width =
      op.input == PlanBuffer::QHeads ? m_config.q_heads_width() : m_config.attention_output_width();
  const int64_t in_head = in_width / num_heads;
  const int64_t out_head = out_row + (in_head - in_row);
  for (int64_t h = 0; h < num_heads; ++h) {
    for (int64_t t = 0; t < n; ++t) {
      const float* from = input + (t * num_heads + h) * in_head;
      std::copy(from, from + in_row, m_head_in.data() + t * in_row);
    }
    const WeightMatrix w = heads.expert(h);
    MatmulArgs args{w.type, w.data,  w.in_features,     w.out_features, m_head_in.data(),
                    n,      nullptr, m_head_out.data(), m_num_threads};
    args.scratch = m_matmul_scratch.data();
    args.scratch_bytes = m_matmul_scratch.size();
    args.is_exact = m_is_batch_invariant;
    if (m_observer != nullptr)
      m_observer->observe_expert_matmul_input(p.name, il, h, num_heads, m_head_in.data(), n, in_row);
    if (!iwb::matmul(args)) {
      return make_error(ErrorCode::InvalidArgument, std::string("the ") + p.name + " matmul of head " +
                                                        std::to_string(h) + " refused its arguments in layer " +
                                                        std::to_string(il));
    }
    for (int64_t t = 0; t < n; ++t) {
      const float* from = input + (t * num_heads + h) * in_head;
      float* to = output + (t * num_heads + h) * out_head;
      std::copy(m_head_out.data() + t * out_row, m_head_out.data() + (t + 1) * out_row, to);
      std::copy(from + in_row, from + in_head, to + out_row);
    }
  }
  record(op, 0, n);
  return {};
}

}  // namespace iwb
