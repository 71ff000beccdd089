// The transformer forward pass on the CPU for llama, qwen2 and gemma3: embeddings, then per
// layer attention (optional biases, per-head q/k norms, RoPE, sliding windows) and a gated FFN
// (optional post-norms), then the final norm and the classifier. Scratch buffers are sized
// once for a batch of `max_batch` tokens; longer inputs run in batches of that size.
#pragma once

#include "iwb/engine/model/model_config.h"
#include "iwb/engine/profile/profiler.h"
#include "iwb/engine/runtime/kv_cache.h"
#include "iwb/engine/status.h"
#include "model/model_weights.h"

#include <cstdint>
#include <span>
#include <vector>

namespace iwb {

class CpuForward {
 public:
  CpuForward(const ModelConfig& config, const ModelWeights& weights, int num_threads, int64_t max_batch = 128);

  // Runs `tokens` at positions first_position.. (first_position == kv.num_positions(): the
  // cache holds everything before them), stores their keys and values in `kv`, and writes the
  // vocabulary logits of the last token to `logits` [vocab_size] when it is not null.
  Status forward(std::span<const int32_t> tokens, int64_t first_position, KvCache& kv, float* logits);

  int num_threads() const { return m_num_threads; }
  void set_num_threads(int n) { m_num_threads = n; }
  int64_t max_batch() const { return m_max_batch; }

  // Active while the engine profiles a step: every kernel call then adds a KernelRecord.
  KernelRecorder& recorder() { return m_recorder; }

 private:
  Status run_batch(const int32_t* tokens, int64_t num_tokens, int64_t first_position, KvCache& kv);
  Status attention_block(int64_t layer, int64_t num_tokens, int64_t first_position, KvCache& kv);
  Status ffn_block(int64_t layer, int64_t num_tokens);
  Status matmul(const char* name, int64_t layer, const WeightMatrix& w, const float* input, int64_t num_tokens,
                const std::vector<float>& bias, float* output, OpKind kind = OpKind::Matmul);
  Status compute_logits(const float* hidden, float* logits);

  const ModelConfig& m_config;
  const ModelWeights& m_weights;
  int m_num_threads;
  int64_t m_max_batch;
  KernelRecorder m_recorder;

  // Scratch, [max_batch x width] each.
  std::vector<float> m_x;        // residual stream [n_embd]
  std::vector<float> m_xn;       // normalised input of a block [n_embd]
  std::vector<float> m_q, m_k, m_v;
  std::vector<float> m_attn;     // attention output [num_heads * head_dim_v]
  std::vector<float> m_proj;     // block output before the residual add [n_embd]
  std::vector<float> m_gate, m_up;  // [n_ff]
  std::vector<int32_t> m_positions;
  std::vector<float> m_final;    // the last token's normalised hidden state [n_embd]
};

}  // namespace iwb
