// FLOPs and minimum bytes of each kernel kind from its shape, as KernelRecords (no timing).
// The profiler fills its records through these from the forward pass's real arguments and
// the cost model from a model's configuration, so measured and predicted points pair up.
// Minimum traffic: every input read once, every output written once, weights at their
// stored (quantized) size, activations f32, the KV cache f16.
#pragma once

#include "iwb/engine/profile/kernel_record.h"
#include "iwb/kernels/activations.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <span>

namespace iwb::op_costs {

// y[tokens x out] = x[tokens x in] . W[out x in]^T (+ bias[out]): 2*tokens*in*out FLOPs
// (+ tokens*out for the bias); bytes = W as stored + x + y (+ bias). kind: Matmul or Logits.
KernelRecord matmul(OpKind kind, const char* name, int layer, GgmlType weight_type, int64_t in_features,
                    int64_t out_features, int64_t num_tokens, bool has_bias);

// rows x dim: sum of squares, then scale and weight: 4 FLOPs per element; bytes = in + out
// (+ the f32 weight vector, read once).
KernelRecord rmsnorm(const char* name, int layer, int64_t num_rows, int64_t dim, int64_t num_tokens, bool has_weight);

// In place over [tokens x heads x head_dim]; 3 FLOPs per rotated element; bytes = read and
// write every element (the pass-through ones too: the kernel streams whole rows).
KernelRecord rope(const char* name, int layer, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
                  int64_t num_rotated);

// f32 keys [tokens x kv_heads x head_dim] and values [.. x head_dim_v] read, f16 written. No FLOPs.
// is_value_in_key: the values are the keys' first values (latent attention): keys only.
KernelRecord kv_write(int layer, int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim, int64_t head_dim_v,
                      bool is_value_in_key = false);

// Queries at positions first_position.. first_position+tokens-1 over a causal (optionally
// sliding-window) cache. FLOPs per (query head, visible key): 2*head_dim (q.k) +
// 2*head_dim_v (p*v) + 5 (scale, max, exp, sum, normalise). Bytes: q read and output written
// once (f32), and each visible K/V row read once per KV head (f16): positions from the
// first one any query sees to the last one (the K row alone when is_value_in_key: latent
// attention's values are read with the keys).
KernelRecord attention(int layer, int64_t num_tokens, int64_t first_position, int64_t num_heads, int64_t num_kv_heads,
                       int64_t head_dim, int64_t head_dim_v, int64_t sliding_window, bool is_value_in_key = false);

// One sequence's part of a batched (paged) attention call: its queries at positions
// first_position.. first_position+num_tokens-1 over its own cache.
struct AttentionSpan {
  int64_t num_tokens = 0;
  int64_t first_position = 0;
};
// One attention call over several sequences: FLOPs and bytes are the sums of attention() over
// the spans (each sequence reads its own keys and values); the shape counts every query token
// and, as num_kv, the longest context. For a single span it equals attention().
KernelRecord batched_attention(int layer, std::span<const AttentionSpan> spans, int64_t num_heads, int64_t num_kv_heads,
                               int64_t head_dim, int64_t head_dim_v, int64_t sliding_window,
                               bool is_value_in_key = false);

// out = act(gate) * up over tokens x n_ff: SiLU 5 FLOPs per element (negate, exp, add, divide,
// multiply by up), GELU-tanh 9; bytes = gate + up + out.
KernelRecord activation(int layer, int64_t num_tokens, int64_t n_ff, GatedActivation kind);

// x += y over tokens x dim: 1 FLOP per element; bytes = read x and y, write x.
KernelRecord add(const char* name, int layer, int64_t num_tokens, int64_t dim);

// One stored row per token (+ the token ids); 1 FLOP per element when scaled (gemma).
KernelRecord embedding(GgmlType table_type, int64_t num_tokens, int64_t dim, bool is_scaled);

// logits = c * tanh(logits / c) over num_rows rows of the vocabulary: 3 FLOPs per element
// (tanh counted once).
KernelRecord softcap(int64_t vocab_size, int64_t num_rows = 1);

// Mixture of experts, the expert matrices of one product (gate, up or down) over a step: each
// of num_tokens tokens goes through num_experts_used experts, so 2*tokens*k*in*out FLOPs; the
// bytes are the matrices of the experts the tokens were routed to, num_active_experts of them
// (fractional for a prediction's expected count), as stored, + the tokens' rows in and out.
KernelRecord expert_matmul(const char* name, int layer, GgmlType weight_type, int64_t in_features, int64_t out_features,
                           int64_t num_tokens, int64_t num_experts_used, double num_active_experts);

// Top-k gating over num_experts router logits per token (OpKind::Softmax): the softmax's 5
// FLOPs per logit and 2 per routed row (renormalise, weight); bytes = logits read, expert ids
// and weights written, and the token rows copied once per routed expert (grouped by expert).
KernelRecord expert_gating(int layer, int64_t num_tokens, int64_t num_experts, int64_t num_experts_used, int64_t dim);

// The weighted sum of each token's num_experts_used expert outputs (OpKind::Add): 2 FLOPs per
// routed element; bytes = the routed rows and weights read, one row per token written.
KernelRecord expert_combine(int layer, int64_t num_tokens, int64_t num_experts_used, int64_t dim);

// Qwen 3.5's attention output gate, x *= sigmoid(gate) over tokens x width (OpKind::Activation):
// 5 FLOPs per element; bytes = x and gate read, x written.
KernelRecord output_gate(int layer, int64_t num_tokens, int64_t width);

// Qwen 3.5 MoE's shared expert gate over tokens x dim (OpKind::Activation): a dot product of the
// token's row with the gate's weights, a sigmoid, the shared expert's row scaled; bytes = the row,
// the weights, the shared expert's row read and written.
KernelRecord shared_expert_gate(int layer, int64_t num_tokens, int64_t dim);

// A recurrent layer's causal convolution and SiLU over num_tokens tokens of num_sequences
// sequences (OpKind::Recurrent; delta_net.h's short_conv_cost): each sequence's state read and
// written once.
KernelRecord short_conv(int layer, int64_t num_tokens, int64_t num_sequences, int64_t channels, int64_t kernel);

// The gated delta rule (OpKind::Recurrent; delta_net.h's delta_net_cost): 7 head_dim^2 FLOPs per
// token and value head; each sequence's state read and written once, the tokens' rows once.
KernelRecord delta_net(int layer, int64_t num_tokens, int64_t num_sequences, int64_t num_key_heads,
                       int64_t num_value_heads, int64_t head_dim);

}  // namespace iwb::op_costs
