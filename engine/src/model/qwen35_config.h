// Qwen 3.5's keys beyond qwen3's (model_config.cpp calls this for rows with recurrent layers).
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/status.h"

namespace iwb::qwen35 {

// The gated delta net's sizes (ssm.conv_kernel, group_count, time_step_rank, state_size,
// inner_size), which layers are recurrent (attention.recurrent_layers, else every layer but each
// full_attention_interval-th, 4 by default), the multi-token-prediction layers stored after the
// trunk (nextn_predict_layers), and no KV heads for the recurrent layers.
Status read_keys(const gguf::GgufFile& file, ModelConfig* c);

}  // namespace iwb::qwen35
