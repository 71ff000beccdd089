// What a GGUF model is: architecture, hyper-parameters, parameter count, file type, and the
// memory it needs at a given context (weights + GQA-aware KV cache + scratch estimate, and a
// recurrent model's state per sequence).
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace iwb {

struct ModelHyperParams {
  int64_t context_length = 0;    // trained context (n_ctx_train)
  int64_t embedding_length = 0;  // model dim
  int64_t feed_forward_length = 0;
  int64_t block_count = 0;  // layers
  int64_t head_count = 0;
  int64_t head_count_kv = 0;  // == head_count without GQA
  int64_t key_length = 0;     // per-head K dim
  int64_t value_length = 0;   // per-head V dim
  int64_t vocab_size = 0;
  double rope_freq_base = 0;
  double rms_norm_eps = 0;
  // Mixture of experts (0 for a dense model). tensor_bytes and the memory estimate count every
  // expert's weights; a token reads only expert_used_count of them per layer.
  int64_t expert_count = 0;
  int64_t expert_used_count = 0;
  int64_t expert_feed_forward_length = 0;
  int64_t expert_shared_count = 0;  // shared experts every token uses (glm4moe)
  // The shared expert's width where the file gives it (qwen35moe's gated shared expert, which
  // has no expert_shared_count key).
  int64_t expert_shared_feed_forward_length = 0;
  int64_t leading_dense_block_count = 0;  // first layers with a dense FFN (glm4moe)
  // Multi-token-prediction layers stored after the trunk, counted in block_count (glm4moe); the
  // forward pass and the KV cache leave them out.
  int64_t nextn_predict_layers = 0;
  // Multi-head latent attention (deepseek2): the key/value latent each token stores (the one
  // KV head of key_length = kv_lora_rank + RoPE values, value_length = kv_lora_rank), the query's
  // latent (0: none), and each head's query/key and value widths once decompressed.
  int64_t kv_lora_rank = 0;
  int64_t q_lora_rank = 0;
  int64_t key_length_mla = 0;
  int64_t value_length_mla = 0;
  // Each trunk layer's KV heads and head sizes where layers differ (Gemma 4: head_count_kv per
  // layer, the sliding layers' key_length_swa / value_length_swa); empty when all are alike.
  struct LayerKv {
    int64_t head_count_kv = 0;  // 0: a shared KV layer (it reads an earlier layer's cache)
    int64_t key_length = 0;
    int64_t value_length = 0;
    bool is_sliding = false;
    bool is_recurrent = false;  // a recurrent layer (Qwen 3.5): no KV cache, head_count_kv 0
  };
  std::vector<LayerKv> layer_kv;
  // Qwen 3.5's recurrent layers (a gated delta net instead of attention; layer_kv marks which):
  // a state per running sequence in place of a KV cache, of these sizes (ModelConfig's linear_*,
  // from <arch>.ssm.*). 0 for a model without recurrent layers.
  int64_t linear_conv_kernel = 0;      // ssm.conv_kernel: taps of the causal convolution
  int64_t linear_num_key_heads = 0;    // ssm.group_count (query heads too)
  int64_t linear_num_value_heads = 0;  // ssm.time_step_rank
  int64_t linear_head_dim = 0;         // ssm.state_size
  // One sequence's state over every recurrent layer, f32 (ModelConfig::recurrent_state_bytes,
  // what the engine allocates per running sequence).
  uint64_t recurrent_state_bytes_per_sequence = 0;
  int64_t trunk_layers() const { return block_count - nextn_predict_layers; }
  int64_t num_recurrent_layers() const;
  int64_t num_attention_layers() const { return trunk_layers() - num_recurrent_layers(); }
  // N when the attention layers are exactly every Nth (layers N-1, 2N-1, ...) between recurrent
  // ones, as Qwen 3.5's full_attention_interval places them; 0 otherwise.
  int64_t attention_layer_interval() const;
  // f16 values one position stores over every trunk layer's keys and values (latent attention:
  // the keys alone; recurrent layers store none).
  int64_t kv_values_per_position() const;
};

struct ModelSummary {
  std::string path;
  std::string architecture;  // general.architecture ("llama", "qwen2", ...)
  std::string name;          // general.name, or the file name
  uint32_t gguf_version = 0;
  uint64_t file_size = 0;
  uint64_t num_params = 0;  // elements over all tensors
  uint64_t tensor_bytes = 0;
  std::string file_type;        // "Q4_K_M", from general.file_type or the dominant type
  int64_t file_type_id = -1;    // general.file_type (llama.cpp's llama_ftype); -1 when absent
  std::string tokenizer_model;  // tokenizer.ggml.model ("llama", "gpt2", ...) or empty
  std::string tokenizer_pre;    // tokenizer.ggml.pre
  int64_t tokenizer_vocab_size = 0;
  bool has_chat_template = false;
  bool is_vocab_only = false;  // no tensors: a tokenizer file
  ModelHyperParams hparams;
  // Per tensor type: count of tensors, elements and bytes.
  struct TypeTotals {
    int64_t num_tensors = 0;
    uint64_t num_elements = 0;
    uint64_t num_bytes = 0;
  };
  std::map<std::string, TypeTotals> totals_by_type;
  // Filled by Engine::load (empty from summarize_model): where the forward pass runs ("cpu",
  // "cuda:0"), a line describing it ("cuda:0 (NVIDIA H100 80GB HBM3)", "cpu (8 threads)"), and
  // why the CPU runs it when the device was "auto" (no CUDA device, or the device failed).
  std::string device;
  std::string device_description;
  std::string device_fallback_reason;
  // Where the weights live and why (EngineOptions::load_mode): "read into memory, 1,010 of
  // 1,011 MiB in 2 MiB pages", "mapped from the file (the GPU has its own copy)".
  std::string weights_memory;
  // Filled by Engine::load: seconds from opening the file to ready (reading or mapping the
  // weights, the KV pool, the backend; on a GPU the upload).
  double load_seconds = 0;
};

struct MemoryEstimate {
  int64_t context = 0;
  uint64_t weight_bytes = 0;
  uint64_t kv_cache_bytes = 0;  // f16 K and V for every layer, GQA-aware
  uint64_t scratch_bytes = 0;   // activations and logits for one token step (estimate)
  // The recurrent layers' state of the one sequence the KV cache above holds (Qwen 3.5); 0
  // for other models.
  uint64_t recurrent_state_bytes = 0;
  uint64_t total() const { return weight_bytes + kv_cache_bytes + scratch_bytes + recurrent_state_bytes; }
};

Result<ModelSummary> summarize_model(const gguf::GgufFile& file);
MemoryEstimate estimate_memory(const ModelSummary& model, int64_t context);

// "Q4_K_M" etc. for a llama.cpp general.file_type value; empty when unknown.
std::string file_type_name(int64_t llama_ftype);
// "Q4_K - Medium" etc., llama.cpp's llama_ftype_name text; empty when unknown.
std::string file_type_description(int64_t llama_ftype);
// "1.10 B", "260 K"; "1.2 GiB".
std::string format_count(uint64_t n);
std::string format_bytes(uint64_t n);

}  // namespace iwb
