// The forward pass's operations on the device, in CpuForward's order (cpu_forward.cpp is the
// reference): embedding, then per layer norm, q/k/v, q/k norms, RoPE, KV write, paged
// attention, output projection, post-norm, residual; norm, gate/up, activation, down,
// post-norm, residual; then the rows that sample through the output norm and the classifier.
// Every launch is checked; while profiling, each operation gets the CPU's KernelRecord.
#include "backend/cuda/cuda_forward_backend.h"

#include "iwb/kernels/cuda/activations_cuda.h"
#include "iwb/kernels/cuda/elementwise_cuda.h"
#include "iwb/kernels/cuda/embedding_cuda.h"
#include "iwb/kernels/cuda/kv_cache_cuda.h"
#include "iwb/kernels/cuda/norm_cuda.h"
#include "iwb/kernels/cuda/paged_attention_cuda.h"
#include "iwb/kernels/cuda/rope_cuda.h"

namespace iwb::cuda {

Status CudaForwardBackend::run_layers(const StepShape& s) {
  const ModelConfig& c = m_config;
  const int64_t n = s.num_tokens;
  IWB_RETURN_IF_ERROR(op_begin());
  EmbeddingCudaArgs e;
  e.table_type = m_weights.token_embd.type;
  e.table = m_weights.token_embd.data;
  e.vocab_size = c.vocab_size;
  e.dim = c.embedding_length;
  e.tokens = m_meta.tokens;
  e.num_tokens = n;
  e.scale = c.embedding_scale;
  e.output = m_x;
  IWB_RETURN_IF_ERROR(launched(embedding_cuda(e, m_stream.get()), "the embedding lookup", -1));
  if (is_recording()) {
    IWB_RETURN_IF_ERROR(op_end(op_costs::embedding(m_weights.token_embd.type, n, c.embedding_length, c.embedding_scale != 1.0f)));
  }
  for (int64_t il = 0; il < c.num_layers; ++il) {
    IWB_RETURN_IF_ERROR(attention_block(il, s));
    IWB_RETURN_IF_ERROR(ffn_block(il, s));
  }
  return {};
}

Status CudaForwardBackend::attention_block(int64_t il, const StepShape& s) {
  const ModelConfig& c = m_config;
  const DeviceLayer& w = m_weights.layers[static_cast<size_t>(il)];
  const int64_t n = s.num_tokens;
  const int layer = static_cast<int>(il);
  const bool is_sliding = c.is_sliding_layer[static_cast<size_t>(il)];
  cudaStream_t stream = m_stream.get();

  IWB_RETURN_IF_ERROR(op_begin());
  IWB_RETURN_IF_ERROR(launched(rmsnorm_cuda({m_x, w.attn_norm, m_xn, n, c.embedding_length, c.rms_norm_eps}, stream),
                               "the attention norm", il));
  if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::rmsnorm("attn_norm", layer, n, c.embedding_length, n, true)));
  IWB_RETURN_IF_ERROR(matmul("attn_q", il, w.wq, m_xn, n, w.bq, m_q));
  IWB_RETURN_IF_ERROR(matmul("attn_k", il, w.wk, m_xn, n, w.bk, m_k));
  IWB_RETURN_IF_ERROR(matmul("attn_v", il, w.wv, m_xn, n, w.bv, m_v));
  if (c.has_qk_norm) {
    // Per-head norms: every head of every token is one row of head_dim_k values.
    IWB_RETURN_IF_ERROR(op_begin());
    IWB_RETURN_IF_ERROR(launched(rmsnorm_cuda({m_q, w.q_norm, m_q, n * c.num_heads, c.head_dim_k, c.rms_norm_eps}, stream),
                                 "the q norm", il));
    if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::rmsnorm("q_norm", layer, n * c.num_heads, c.head_dim_k, n, true)));
    IWB_RETURN_IF_ERROR(op_begin());
    IWB_RETURN_IF_ERROR(launched(
        rmsnorm_cuda({m_k, w.k_norm, m_k, n * c.num_kv_heads, c.head_dim_k, c.rms_norm_eps}, stream), "the k norm", il));
    if (is_recording()) {
      IWB_RETURN_IF_ERROR(op_end(op_costs::rmsnorm("k_norm", layer, n * c.num_kv_heads, c.head_dim_k, n, true)));
    }
  }
  RopeCudaArgs rope;
  rope.q = m_q;
  rope.num_heads = c.num_heads;
  rope.num_tokens = n;
  rope.head_dim = c.head_dim_k;
  rope.num_rotated = c.rope_num_rotated;
  rope.positions = m_meta.positions;
  rope.layout = c.rope_layout;
  rope.freq_base = is_sliding ? c.rope_freq_base_swa : c.rope_freq_base;
  rope.freq_scale = is_sliding ? c.rope_freq_scale_swa : c.rope_freq_scale;
  rope.freq_factors = m_weights.rope_freqs;
  if (!is_recording()) {
    rope.k = m_k;  // queries and keys in one launch
    rope.num_kv_heads = c.num_kv_heads;
    IWB_RETURN_IF_ERROR(launched(rope_cuda(rope, stream), "RoPE", il));
  } else {
    // One record each, as the CPU makes them.
    IWB_RETURN_IF_ERROR(op_begin());
    IWB_RETURN_IF_ERROR(launched(rope_cuda(rope, stream), "RoPE on queries", il));
    IWB_RETURN_IF_ERROR(op_end(op_costs::rope("rope_q", layer, n, c.num_heads, c.head_dim_k, c.rope_num_rotated)));
    rope.q = m_k;
    rope.num_heads = c.num_kv_heads;
    IWB_RETURN_IF_ERROR(op_begin());
    IWB_RETURN_IF_ERROR(launched(rope_cuda(rope, stream), "RoPE on keys", il));
    IWB_RETURN_IF_ERROR(op_end(op_costs::rope("rope_k", layer, n, c.num_kv_heads, c.head_dim_k, c.rope_num_rotated)));
  }

  IWB_RETURN_IF_ERROR(op_begin());
  WriteKvCudaArgs kv;
  kv.k = m_k;
  kv.v = m_v;
  kv.slot_mapping = m_meta.slot_mapping;
  kv.num_tokens = n;
  kv.k_cache = m_k_pools[static_cast<size_t>(il)];
  kv.v_cache = m_v_pools[static_cast<size_t>(il)];
  kv.num_slots = m_kv.num_slots();
  kv.k_row = c.k_width();
  kv.v_row = c.v_width();
  kv.kv_type = m_kv.type;
  IWB_RETURN_IF_ERROR(launched(write_kv_paged_cuda(kv, stream), "the KV cache write", il));
  if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::kv_write(layer, n, c.num_kv_heads, c.head_dim_k, c.head_dim_v)));

  IWB_RETURN_IF_ERROR(op_begin());
  PagedAttentionCudaArgs a;
  a.q = m_q;
  a.k_cache = m_k_pools[static_cast<size_t>(il)];
  a.v_cache = m_v_pools[static_cast<size_t>(il)];
  a.num_blocks = m_kv.num_blocks;
  a.block_size = m_kv.block_size;
  a.block_tables = m_meta.block_tables;
  a.max_blocks_per_sequence = m_capacity.max_blocks_per_sequence;  // fixed: graphs stay valid as sequences grow
  a.sequence_lengths = m_meta.sequence_lengths;
  a.num_sequences = s.num_sequences;
  a.token_sequences = m_meta.token_sequences;
  a.positions = m_meta.positions;
  a.num_tokens = n;
  a.num_heads = c.num_heads;
  a.num_kv_heads = c.num_kv_heads;
  a.head_dim = c.head_dim_k;
  a.head_dim_v = c.head_dim_v;
  a.scale = c.attention_scale;
  a.sliding_window = is_sliding ? c.sliding_window : 0;
  a.softcap = c.attention_softcap;
  a.output = m_attn;
  a.kv_type = m_kv.type;
  // The tensor-core kernel (prompt chunks) rounds otherwise than the f32 one (decodes): a
  // batch-invariant run keeps every token on the f32 kernel.
  a.allow_tensor_cores = !m_is_batch_invariant;
  a.workspace = m_attention_workspace.data();
  a.workspace_bytes = m_attention_workspace.bytes();
  IWB_RETURN_IF_ERROR(launched(paged_attention_cuda(a, stream), "paged attention", il));
  if (is_recording() && s.batch != nullptr) {
    // Tokens of a sequence are contiguous in the batch, at consecutive positions.
    const FlatBatch& b = *s.batch;
    m_spans.clear();
    for (int64_t t = 0; t < n; ++t) {
      if (t == 0 || b.token_sequences[static_cast<size_t>(t)] != b.token_sequences[static_cast<size_t>(t - 1)]) {
        m_spans.push_back({0, b.positions[static_cast<size_t>(t)]});
      }
      ++m_spans.back().num_tokens;
    }
    IWB_RETURN_IF_ERROR(op_end(op_costs::batched_attention(layer, m_spans, c.num_heads, c.num_kv_heads, c.head_dim_k,
                                                           c.head_dim_v, a.sliding_window)));
  }

  IWB_RETURN_IF_ERROR(matmul("attn_output", il, w.wo, m_attn, n, w.bo, m_proj));
  if (c.has_post_norms) {
    IWB_RETURN_IF_ERROR(op_begin());
    IWB_RETURN_IF_ERROR(launched(
        rmsnorm_cuda({m_proj, w.post_attention_norm, m_proj, n, c.embedding_length, c.rms_norm_eps}, stream),
        "the post-attention norm", il));
    if (is_recording()) {
      IWB_RETURN_IF_ERROR(op_end(op_costs::rmsnorm("post_attention_norm", layer, n, c.embedding_length, n, true)));
    }
  }
  IWB_RETURN_IF_ERROR(op_begin());
  IWB_RETURN_IF_ERROR(launched(add_cuda(m_x, m_proj, n * c.embedding_length, stream), "the attention residual", il));
  if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::add("attn_residual", layer, n, c.embedding_length)));
  return {};
}

Status CudaForwardBackend::ffn_block(int64_t il, const StepShape& s) {
  const ModelConfig& c = m_config;
  const DeviceLayer& w = m_weights.layers[static_cast<size_t>(il)];
  const int64_t n = s.num_tokens;
  const int layer = static_cast<int>(il);
  cudaStream_t stream = m_stream.get();
  IWB_RETURN_IF_ERROR(op_begin());
  IWB_RETURN_IF_ERROR(launched(rmsnorm_cuda({m_x, w.ffn_norm, m_xn, n, c.embedding_length, c.rms_norm_eps}, stream),
                               "the FFN norm", il));
  if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::rmsnorm("ffn_norm", layer, n, c.embedding_length, n, true)));
  IWB_RETURN_IF_ERROR(matmul("ffn_gate", il, w.ffn_gate, m_xn, n, nullptr, m_gate));
  IWB_RETURN_IF_ERROR(matmul("ffn_up", il, w.ffn_up, m_xn, n, nullptr, m_up));
  IWB_RETURN_IF_ERROR(op_begin());
  GatedActivationCudaArgs act;
  act.gate = m_gate;
  act.up = m_up;
  act.output = m_gate;
  act.num_rows = n;
  act.row_length = c.feed_forward_length;
  act.kind = c.ffn_activation;
  IWB_RETURN_IF_ERROR(launched(gated_activation_cuda(act, stream), "the FFN activation", il));
  if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::activation(layer, n, c.feed_forward_length, c.ffn_activation)));
  IWB_RETURN_IF_ERROR(matmul("ffn_down", il, w.ffn_down, m_gate, n, nullptr, m_proj));
  if (c.has_post_norms) {
    IWB_RETURN_IF_ERROR(op_begin());
    IWB_RETURN_IF_ERROR(launched(
        rmsnorm_cuda({m_proj, w.post_ffw_norm, m_proj, n, c.embedding_length, c.rms_norm_eps}, stream),
        "the post-FFN norm", il));
    if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::rmsnorm("post_ffw_norm", layer, n, c.embedding_length, n, true)));
  }
  IWB_RETURN_IF_ERROR(op_begin());
  IWB_RETURN_IF_ERROR(launched(add_cuda(m_x, m_proj, n * c.embedding_length, stream), "the FFN residual", il));
  if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::add("ffn_residual", layer, n, c.embedding_length)));
  return {};
}

Status CudaForwardBackend::compute_logits(const StepShape& s, int64_t first_row, int64_t num_rows) {
  const ModelConfig& c = m_config;
  const int64_t d = c.embedding_length;
  cudaStream_t stream = m_stream.get();
  if (num_rows <= 0) return {};
  // Only the rows that sample go through the classifier, gathered first (not a recorded kernel,
  // as on the CPU).
  IWB_RETURN_IF_ERROR(launched(gather_rows_cuda(m_x, d, m_meta.logits_rows + first_row, num_rows, m_xn, stream),
                               "gathering the rows that sample", -1));
  IWB_RETURN_IF_ERROR(op_begin());
  IWB_RETURN_IF_ERROR(launched(rmsnorm_cuda({m_xn, m_weights.output_norm, m_final, num_rows, d, c.rms_norm_eps}, stream),
                               "the output norm", -1));
  if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::rmsnorm("output_norm", -1, num_rows, d, num_rows, true)));
  IWB_RETURN_IF_ERROR(matmul("output", -1, m_weights.output, m_final, num_rows, nullptr, m_logits, OpKind::Logits));
  if (c.final_logit_softcap > 0.0f) {
    IWB_RETURN_IF_ERROR(op_begin());
    IWB_RETURN_IF_ERROR(launched(softcap_cuda(m_logits, num_rows * c.vocab_size, c.final_logit_softcap, stream),
                                 "the logit soft-capping", -1));
    if (is_recording()) IWB_RETURN_IF_ERROR(op_end(op_costs::softcap(c.vocab_size, num_rows)));
  }
  (void)s;
  return {};
}

}  // namespace iwb::cuda
