// Gemma 4's keys beyond gemma3's (model_config.cpp calls these for the gemma4 row).
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/status.h"

namespace iwb::gemma4 {

// <arch>.attention.head_count_kv: one count, or one per layer (the sliding and global layers
// differ). Sets num_kv_heads (the global layers' count) and layer_kv_heads where they differ.
Status read_kv_heads(const gguf::GgufFile& file, ModelConfig* c);

// <arch>.feed_forward_length as one width per layer (E2B's shared layers are twice as wide):
// layer_ff, and feed_forward_length the widest. A single width is left to model_config.cpp.
Status read_ffn_widths(const gguf::GgufFile& file, ModelConfig* c);

// After the sliding layers are known: the sliding layers' head sizes and RoPE width, the final
// soft-cap, the shared KV layers and per-layer embeddings (E2B / E4B).
Status read_keys(const gguf::GgufFile& file, ModelConfig* c);

}  // namespace iwb::gemma4
