// Scaled dot-product attention of one or many query positions over an f16 KV cache, with
// grouped-query sharing (query head h reads KV head h / (num_heads / num_kv_heads)), a causal
// mask, an optional sliding window and optional logit soft-capping (gemma 2 style).
#pragma once

#include "iwb/kernels/op_cost.h"

#include <cstdint>

namespace iwb {

struct AttentionArgs {
  const float* q = nullptr;         // [num_tokens x num_heads x head_dim]
  const uint16_t* k = nullptr;      // f16; key of position p, KV head g at k + p*k_row_stride + g*head_dim
  const uint16_t* v = nullptr;      // f16; value at v + p*v_row_stride + g*head_dim_v
  int64_t k_row_stride = 0;         // elements between consecutive positions (>= num_kv_heads*head_dim)
  int64_t v_row_stride = 0;
  int64_t num_kv = 0;               // positions 0..num_kv-1 hold valid keys and values
  const int32_t* positions = nullptr;  // [num_tokens]: the position of each query (< num_kv)
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;         // divides num_heads
  int64_t head_dim = 0;
  int64_t head_dim_v = 0;
  float scale = 1.0f;               // multiplies q.k (1/sqrt(head_dim) for most models)
  int64_t sliding_window = 0;       // > 0: query at p sees keys p - window < key <= p
  float softcap = 0.0f;             // > 0: score = softcap * tanh(score / softcap)
  float* output = nullptr;          // [num_tokens x num_heads x head_dim_v]
  int num_threads = 0;              // 0: OpenMP's default
};

bool attention(const AttentionArgs& args);
bool attention_ref(const AttentionArgs& args);  // f16 -> double, one thread
OpCost attention_cost(const AttentionArgs& args);

}  // namespace iwb
