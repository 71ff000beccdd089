// Qwen 3.5's linear-attention layers (llama.cpp's gated delta net, ggml's ssm_conv and
// gated_delta_net): a causal depthwise convolution over each channel's last few inputs, then the
// gated delta rule, a recurrence over a fixed-size state per value head instead of a KV cache.
// Both run over one sequence's tokens in order and carry that sequence's state from call to call.
#pragma once

#include "iwb/kernels/op_cost.h"

#include <cstdint>

namespace iwb {

// output = silu(sum over taps i of window[t + i] * weight[c][i]) per channel c, where the
// window is the state's kernel - 1 earlier inputs (oldest first) followed by this call's inputs;
// tap kernel - 1 multiplies the current token. The state becomes the window's last kernel - 1
// inputs (zeros before a sequence's first token).
struct ShortConvArgs {
  const float* input = nullptr;   // [num_tokens x channels]
  float* output = nullptr;        // [num_tokens x channels]; not the input
  float* state = nullptr;         // [(kernel - 1) x channels], updated
  const float* weight = nullptr;  // [channels x kernel] (ssm_conv1d)
  int64_t num_tokens = 0;
  int64_t channels = 0;
  int64_t kernel = 0;
  int num_threads = 0;  // 0: the engine's default; channels split among them
};

bool short_conv_silu(const ShortConvArgs& args);
bool short_conv_silu_ref(const ShortConvArgs& args);  // double accumulation
OpCost short_conv_cost(const ShortConvArgs& args);

// The gated delta rule, per token t and value head h, reading key head h % num_key_heads (ggml
// tiles the key heads over the value heads):
//   q, k = L2-normalised (x / sqrt(sum x^2 + eps)) query and key heads of the conv's output
//   decay = exp(softplus(alpha[h] + dt_bias[h]) * a[h]),  b = sigmoid(beta[h])
//   S = S * decay;  delta = (v - S k) * b;  S += delta k^T;  out = S q / sqrt(head_dim)
// with S the head's head_dim (values) x head_dim (keys) state, stored by key: row i holds every
// value's weight of key i (the transpose of ggml's rows), so the fast path's passes over it are
// multiply-adds across the values.
struct DeltaNetArgs {
  // The conv's output: every query head, then every key head, then every value head, each
  // head_dim wide: [num_tokens x (2 * num_key_heads + num_value_heads) * head_dim].
  const float* qkv = nullptr;
  const float* alpha = nullptr;    // [num_tokens x num_value_heads] (ssm_alpha's output)
  const float* beta = nullptr;     // [num_tokens x num_value_heads] (ssm_beta's output)
  const float* dt_bias = nullptr;  // [num_value_heads] (ssm_dt.bias)
  const float* a = nullptr;        // [num_value_heads] (ssm_a: -exp(A_log), negative)
  float* state = nullptr;          // [num_value_heads x head_dim (keys) x head_dim (values)], updated
  float* output = nullptr;         // [num_tokens x num_value_heads * head_dim]
  int64_t num_tokens = 0;
  int64_t num_key_heads = 0;
  int64_t num_value_heads = 0;  // a multiple of num_key_heads
  int64_t head_dim = 0;
  float eps = 1e-6f;    // the L2 norms' (the model's RMS epsilon)
  int num_threads = 0;  // 0: the engine's default; value heads split among them
};

bool delta_net(const DeltaNetArgs& args);
bool delta_net_ref(const DeltaNetArgs& args);  // double precision, state kept in float between tokens
OpCost delta_net_cost(const DeltaNetArgs& args);

// Floats of one sequence's state per recurrent layer.
inline int64_t short_conv_state_floats(int64_t channels, int64_t kernel) { return (kernel - 1) * channels; }
inline int64_t delta_net_state_floats(int64_t num_value_heads, int64_t head_dim) {
  return num_value_heads * head_dim * head_dim;
}

}  // namespace iwb
