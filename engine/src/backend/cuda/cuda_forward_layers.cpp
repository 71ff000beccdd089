// The forward plan's ops on the device: the same walk as the CPU backend (plan/forward_plan.h
// is the one description of the pass), each op through the launchers of kernels/cuda. Every
// launch is checked; while profiling, each kernel gets an event pair and the plan's record.
#include "backend/cuda/cuda_forward_backend.h"

#include "iwb/kernels/cuda/activations_cuda.h"
#include "iwb/kernels/cuda/elementwise_cuda.h"
#include "iwb/kernels/cuda/embedding_cuda.h"
#include "iwb/kernels/cuda/kv_cache_cuda.h"
#include "iwb/kernels/cuda/norm_cuda.h"
#include "iwb/kernels/cuda/paged_attention_cuda.h"
#include "iwb/kernels/cuda/rope_cuda.h"
#include "plan/plan_weights.h"

#include <string>
#include <utility>

namespace iwb::cuda {

float* CudaForwardBackend::buffer(PlanBuffer b) const {
  switch (b) {
    case PlanBuffer::X: return m_x;
    case PlanBuffer::Xn: return m_xn;
    case PlanBuffer::Q: return m_q;
    case PlanBuffer::K: return m_k;
    case PlanBuffer::V: return m_v;
    case PlanBuffer::Attn: return m_attn;
    case PlanBuffer::Proj: return m_proj;
    case PlanBuffer::Gate: return m_gate;
    case PlanBuffer::Up: return m_up;
    case PlanBuffer::Final: return m_final;
    case PlanBuffer::Logits: return m_logits;
    case PlanBuffer::RouterLogits: return m_router_logits;
    case PlanBuffer::ExpertIn: return m_xn;  // routed row t * k + j reads token t's normed row
    case PlanBuffer::ExpertGate: return m_expert_gate;
    case PlanBuffer::ExpertUp: return m_expert_up;
    case PlanBuffer::ExpertOut: return m_expert_out;
    case PlanBuffer::SharedGate: return m_shared_gate;
    case PlanBuffer::SharedUp: return m_shared_up;
    case PlanBuffer::QLatent:
    case PlanBuffer::KvLatent:
    case PlanBuffer::QHeads:
    case PlanBuffer::AttnHeads:
    case PlanBuffer::Hidden:
    case PlanBuffer::HiddenIn:
    case PlanBuffer::Joined:
    case PlanBuffer::MoeOut:
    case PlanBuffer::PleProj:
    case PlanBuffer::PleIn:
    case PlanBuffer::PleGate:
    case PlanBuffer::QGate:
    case PlanBuffer::AttnGate:
    case PlanBuffer::LinearMixed:
    case PlanBuffer::LinearConv:
    case PlanBuffer::LinearGate:
    case PlanBuffer::LinearBeta:
    case PlanBuffer::LinearAlpha:
    case PlanBuffer::LinearOut:
      break;  // no latent-attention, MTP, Gemma 4 or recurrent ops on the device
              // (check_cuda_plan_support)
  }
  return nullptr;
}

const float* CudaForwardBackend::norm_weight(const PlanOp& op) const {
  if (op.norm == PlanNorm::OutputNorm) return m_weights.output_norm;
  return plan::layer_norm(m_weights.layers[static_cast<size_t>(op.layer)], op.norm);
}

Status CudaForwardBackend::run_layers(const StepShape& s) {
  // The attention records' spans come from the host copy of the batch (eager steps only:
  // graphs are never captured while recording).
  if (is_recording() && s.batch != nullptr) plan::attention_spans(*s.batch, m_spans);
  const std::vector<PlanOp>& ops = m_plan.body;
  m_q8_prepared = m_activation_q8 = false;  // nothing carries over from an earlier (failed) step
  if (m_expert_counts.data() != nullptr) {
    IWB_RETURN_IF_ERROR(fail(cudaMemsetAsync(m_expert_counts.data(), 0, m_expert_counts.bytes(), m_stream.get()),
                             "clearing the expert counts"));
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    // A residual add and the token norm of its sum in one launch (not while profiling: the
    // plan records each op apart).
    if (!is_recording() && i + 1 < ops.size() && ops[i].kind == PlanOpKind::ResidualAdd &&
        ops[i].output == PlanBuffer::X && ops[i].input == PlanBuffer::Proj && ops[i + 1].kind == PlanOpKind::RmsNorm &&
        ops[i + 1].input == PlanBuffer::X && ops[i + 1].rows_per_token == 1) {
      const PlanOp& norm = ops[i + 1];
      const int64_t n = s.num_tokens;
      const RmsNormCudaArgs args{m_x, norm_weight(norm), buffer(norm.output), n, norm.width, m_config.rms_norm_eps};
      // The norm's output as int8 activations too, when the next products read them.
      const PlanOp* next = i + 2 < ops.size() ? &ops[i + 2] : nullptr;
      const bool is_q8 = next != nullptr && next->kind == PlanOpKind::Matmuls && next->input == norm.output &&
                         norm.width % 32 == 0 && products_take_q8(*next, n);
      if (is_q8) {
        IWB_RETURN_IF_ERROR(launched(add_rmsnorm_q8_cuda(m_x, m_proj, args, m_x_q8.as<int8_t>(), m_x_q8_scale,
                                                         m_stream.get(), m_config.residual_scale),
                                     norm.name, norm.layer));
        prepared_q8(args.output, n);
      } else {
        IWB_RETURN_IF_ERROR(launched(add_rmsnorm_cuda(m_x, m_proj, args, m_stream.get(), m_config.residual_scale),
                                     norm.name, norm.layer));
      }
      ++i;
      continue;
    }
    // RoPE and the KV write after it in one launch, for f16 caches (not while profiling: the plan
    // records each op apart).
    if (!is_recording() && i + 1 < ops.size() && ops[i].kind == PlanOpKind::Rope &&
        ops[i + 1].kind == PlanOpKind::KvWrite && ops[i + 1].layer == ops[i].layer && m_kv.type.k == GgmlType::F16 &&
        m_kv.type.v == GgmlType::F16) {
      m_q8_prepared = false;
      IWB_RETURN_IF_ERROR(run_rope(ops[i], s.num_tokens, /*with_kv_write=*/true));
      ++i;
      continue;
    }
    // The FFN activation's output as int8 activations too, when the down product reads them.
    const PlanOp* next = i + 1 < ops.size() ? &ops[i + 1] : nullptr;
    m_activation_q8 = !is_recording() && ops[i].kind == PlanOpKind::GatedActivation && next != nullptr &&
                      next->kind == PlanOpKind::Matmuls && next->input == ops[i].output && ops[i].rows_per_token == 1 &&
                      ops[i].width % 32 == 0 && products_take_q8(*next, s.num_tokens);
    IWB_RETURN_IF_ERROR(run_op(ops[i], s, s.num_tokens, 0));
  }
  return {};
}

Status CudaForwardBackend::copy_expert_counts() {
  if (m_expert_counts.data() == nullptr) return {};
  return fail(cudaMemcpyAsync(m_expert_counts_host.data(), m_expert_counts.data(), m_expert_counts.bytes(),
                              cudaMemcpyDeviceToHost, m_stream.get()),
              "copying the expert counts to the host");
}

void CudaForwardBackend::prepared_q8(const float* x, int64_t n) {
  m_q8_source = x;
  m_q8_tokens = n;
  m_q8_prepared = true;
}

Status CudaForwardBackend::compute_logits(const StepShape& s, int64_t first_row, int64_t num_rows) {
  if (num_rows <= 0) return {};
  m_q8_prepared = m_activation_q8 = false;  // the body's int8 copy is not the logits section's input
  for (const PlanOp& op : m_plan.logits) IWB_RETURN_IF_ERROR(run_op(op, s, num_rows, first_row));
  return {};
}

Status CudaForwardBackend::run_op(const PlanOp& op, const StepShape& s, int64_t n, int64_t first_row) {
  // An int8 copy prepared for the next Matmuls op is stale once any other op runs (the
  // activation below prepares its own after this).
  if (op.kind != PlanOpKind::Matmuls) m_q8_prepared = false;
  const ModelConfig& c = m_config;
  const int64_t il = op.layer;
  cudaStream_t stream = m_stream.get();
  switch (op.kind) {
    case PlanOpKind::Embedding: {
      IWB_RETURN_IF_ERROR(op_begin());
      EmbeddingCudaArgs e;
      e.table_type = m_weights.token_embd.type;
      e.table = m_weights.token_embd.data;
      e.is_split = m_weights.token_embd.is_split;
      e.vocab_size = c.vocab_size;
      e.dim = c.embedding_length;
      e.tokens = m_meta.tokens;
      e.num_tokens = n;
      e.scale = c.embedding_scale;
      e.output = m_x;
      IWB_RETURN_IF_ERROR(launched(embedding_cuda(e, stream), "the embedding lookup", -1));
      return op_end(op, 0, n);
    }
    case PlanOpKind::RmsNorm:
      IWB_RETURN_IF_ERROR(op_begin());
      IWB_RETURN_IF_ERROR(launched(rmsnorm_cuda({buffer(op.input), norm_weight(op), buffer(op.output),
                                                 n * op.rows_per_token, op.width, c.rms_norm_eps},
                                                stream),
                                   op.name, il));
      return op_end(op, 0, n);
    case PlanOpKind::Matmuls: {
      const float* input = buffer(op.input);
      // A new op: its input is not quantized yet, unless the op before wrote it (prepared_q8).
      if (!m_q8_prepared) m_q8_source = nullptr;
      m_q8_prepared = false;
      m_x16_source = nullptr;  // an earlier op may have rewritten the f32 input since
      if (can_group_products(op, n)) return matmul_group(op, input, n);
      for (int i = 0; i < op.num_products; ++i) {
        IWB_RETURN_IF_ERROR(matmul(op, i, input, n, buffer(op.products[static_cast<size_t>(i)].output)));
      }
      return {};
    }
    case PlanOpKind::Rope: return run_rope(op, n);
    case PlanOpKind::KvWrite: {
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
      kv.k_type = m_kv.type.k;
      kv.v_type = m_kv.type.v;
      kv.num_kv_heads = c.num_kv_heads;
      kv.k_scale = m_kv_scales.as<float>() + il;
      kv.v_scale = m_kv_scales.as<float>() + c.num_layers + il;
      // vLLM's calculate_kv_scales: the layer's first write sets its FP8 scales (on the device).
      kv.calculate_scales = m_kv.type.calculate_scales && !m_is_scale_calibrated[static_cast<size_t>(il)];
      IWB_RETURN_IF_ERROR(launched(write_kv_paged_cuda(kv, stream), "the KV cache write", il));
      if (kv.calculate_scales) m_is_scale_calibrated[static_cast<size_t>(il)] = true;
      return op_end(op, 0, n);
    }
    case PlanOpKind::Attention: return run_attention(op, s);
    case PlanOpKind::GatedActivation: {
      IWB_RETURN_IF_ERROR(op_begin());
      // The dense FFN's, the shared experts' or every routed row's (k a token).
      GatedActivationCudaArgs act;
      act.gate = buffer(op.input);
      act.up = buffer(op.multiplier);
      act.output = buffer(op.output);
      act.num_rows = n * op.rows_per_token;
      act.row_length = op.width;
      act.kind = c.ffn_activation;
      const bool is_q8 = std::exchange(m_activation_q8, false);
      if (is_q8) {
        act.q8 = m_x_q8.as<int8_t>();
        act.q8_scale = m_x_q8_scale;
      }
      IWB_RETURN_IF_ERROR(launched(gated_activation_cuda(act, stream), "the FFN activation", il));
      if (is_q8) prepared_q8(act.output, n);
      return op_end(op, 0, n);
    }
    case PlanOpKind::ResidualAdd:
      IWB_RETURN_IF_ERROR(op_begin());
      IWB_RETURN_IF_ERROR(
          launched(add_cuda(buffer(op.output), buffer(op.input), n * c.embedding_length, stream, c.residual_scale),
                   op.name, il));
      return op_end(op, 0, n);
    case PlanOpKind::GatherRows:
      // Only the rows that sample go on (the last FFN, the classifier), gathered first (not a
      // recorded kernel, as on the CPU). X stays whole: each chunk of rows gathers its own.
      return launched(gather_rows_cuda(buffer(op.input), c.embedding_length, m_meta.logits_rows + first_row, n,
                                       buffer(op.output), stream),
                      "gathering the rows that sample", -1);
    case PlanOpKind::Softcap:
      IWB_RETURN_IF_ERROR(op_begin());
      IWB_RETURN_IF_ERROR(launched(softcap_cuda(m_logits, n * c.vocab_size, c.final_logit_softcap, stream),
                                   "the logit soft-capping", -1));
      return op_end(op, 0, n);
    case PlanOpKind::ExpertRouting: return run_expert_routing(op, n);
    case PlanOpKind::ExpertMatmuls: return run_expert_matmuls(op, n);
    case PlanOpKind::ExpertCombine: return run_expert_combine(op, n);
    case PlanOpKind::LatentKv:
    case PlanOpKind::HeadMatmuls:
    case PlanOpKind::Concat:
    case PlanOpKind::LayerScale:
    case PlanOpKind::PerLayerInputs:
    case PlanOpKind::SplitQueryGate:
    case PlanOpKind::OutputGate:
    case PlanOpKind::ShortConv:
    case PlanOpKind::DeltaNet:
    case PlanOpKind::SharedExpertGate: return check_cuda_plan_support(m_plan);  // refused at load already
  }
  return make_error(ErrorCode::InvalidArgument, "an op the CUDA backend does not know");
}

Status CudaForwardBackend::run_rope(const PlanOp& op, int64_t n, bool with_kv_write) {
  const ModelConfig& c = m_config;
  const int64_t il = op.layer;
  cudaStream_t stream = m_stream.get();
  RopeCudaArgs rope;
  rope.q = m_q;
  rope.num_heads = c.num_heads;
  rope.num_tokens = n;
  rope.head_dim = c.head_dim_k;
  rope.num_rotated = c.rope_num_rotated;
  rope.positions = m_meta.positions;
  rope.layout = c.rope_layout;
  rope.freq_base = op.is_sliding ? c.rope_freq_base_swa : c.rope_freq_base;
  rope.freq_scale = op.is_sliding ? c.rope_freq_scale_swa : c.rope_freq_scale;
  rope.freq_factors = m_weights.rope_freqs;
  // YaRN (gpt-oss: every layer; OLMo 3: the global layers only), as the CPU's forward pass.
  const bool is_unscaled = op.is_sliding && c.is_sliding_rope_unscaled;
  rope.ext_factor = is_unscaled ? 0.0f : c.rope_ext_factor;
  rope.attn_factor = is_unscaled ? 1.0f : c.rope_yarn_attn_factor;
  rope.beta_fast = c.rope_beta_fast;
  rope.beta_slow = c.rope_beta_slow;
  rope.original_context = c.rope_yarn_original_context;
  if (!is_recording()) {
    rope.k = m_k;  // queries and keys in one launch
    rope.num_kv_heads = c.num_kv_heads;
    if (with_kv_write) {
      rope.v = m_v;
      rope.v_row = c.v_width();
      rope.k_cache = m_k_pools[static_cast<size_t>(il)];
      rope.v_cache = m_v_pools[static_cast<size_t>(il)];
      rope.slot_mapping = m_meta.slot_mapping;
      rope.num_slots = m_kv.num_slots();
      return launched(rope_cuda(rope, stream), "RoPE and the KV cache write", il);
    }
    return launched(rope_cuda(rope, stream), "RoPE", il);
  }
  // One record each, as the plan lists them.
  IWB_RETURN_IF_ERROR(op_begin());
  IWB_RETURN_IF_ERROR(launched(rope_cuda(rope, stream), "RoPE on queries", il));
  IWB_RETURN_IF_ERROR(op_end(op, 0, n));
  rope.q = m_k;
  rope.num_heads = c.num_kv_heads;
  IWB_RETURN_IF_ERROR(op_begin());
  IWB_RETURN_IF_ERROR(launched(rope_cuda(rope, stream), "RoPE on keys", il));
  return op_end(op, 1, n);
}

Status CudaForwardBackend::run_attention(const PlanOp& op, const StepShape& s) {
  const ModelConfig& c = m_config;
  const int64_t il = op.layer;
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
  a.num_tokens = s.num_tokens;
  a.num_heads = c.num_heads;
  a.num_kv_heads = c.num_kv_heads;
  a.head_dim = c.head_dim_k;
  a.head_dim_v = c.head_dim_v;
  a.scale = c.attention_scale;
  a.sliding_window = op.is_sliding ? c.sliding_window : 0;
  a.softcap = c.attention_softcap;
  a.sinks = m_weights.layers[static_cast<size_t>(il)].attn_sinks;
  a.output = m_attn;
  a.k_type = m_kv.type.k;
  a.v_type = m_kv.type.v;
  a.k_scale = m_kv_scales.as<float>() + il;
  a.v_scale = m_kv_scales.as<float>() + c.num_layers + il;
  // The tensor-core kernel (prompt chunks) rounds otherwise than the f32 one (decodes): a
  // batch-invariant run keeps every token on the f32 kernel.
  a.allow_tensor_cores = !m_is_batch_invariant;
  a.workspace = m_attention_workspace.data();
  a.workspace_bytes = m_attention_workspace.bytes();
  IWB_RETURN_IF_ERROR(launched(paged_attention_cuda(a, m_stream.get()), "paged attention", il));
  return op_end(op, 0, s.num_tokens);
}

}  // namespace iwb::cuda
