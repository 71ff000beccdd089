// Synthetic model assembly: shape checks, per-architecture GGUF metadata (the keys llama.cpp's
// converter writes), tokenizer, and the streamed tensors.
#include "iwb/engine/synth/synth_model.h"

#include "synth/synth_tensors.h"
#include "synth/synth_tokenizer.h"

#include "iwb/engine/gguf/gguf_writer.h"

#include <chrono>
#include <filesystem>
#include <memory>

namespace iwb::synth {
namespace {

// Phi-3/3.5's chat markers and its tokenizer_config.json chat template (Phi-3.5-mini-instruct).
const std::vector<std::string> kPhi3ChatTokens = {"<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>",
                                                  "<|end|>"};
constexpr const char* kPhi3ChatTemplate =
    "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}"
    "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}"
    "{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";

// gpt-oss's harmony markers (o200k_harmony's special tokens) and a chat template naming them
// (the real chat_template.jinja is 300 lines of tool formatting; this one renders the same
// conversations without tools, and detect_chat_template reads it as harmony).
const std::vector<std::string> kHarmonyChatTokens = {"<|endoftext|>", "<|start|>",  "<|message|>", "<|channel|>",
                                                     "<|end|>",       "<|return|>", "<|call|>",    "<|constrain|>"};
constexpr const char* kHarmonyChatTemplate =
    "{{- '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
    "Channel must be included for every message.<|end|>' }}"
    "{%- for message in messages %}{%- if message['role'] == 'system' %}"
    "{{- '<|start|>developer<|message|># Instructions\n\n' + message['content'] + '\n\n<|end|>' }}"
    "{%- elif message['role'] == 'user' %}{{- '<|start|>user<|message|>' + message['content'] + '<|end|>' }}"
    "{%- else %}{{- '<|start|>assistant<|channel|>final<|message|>' + message['content'] + '<|end|>' }}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}";

Status check_shape(const SynthShape& s) {
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "shape '" + s.name + "': " + what);
  };
  const ArchitectureTraits* arch = find_architecture(s.architecture);
  if (arch == nullptr) {
    std::string list;
    for (const std::string& name : supported_architectures()) list += (list.empty() ? "" : ", ") + name;
    return bad("architecture '" + s.architecture + "' is not one of " + list);
  }
  if (s.embedding_length <= 0 || s.num_layers <= 0 || s.num_heads <= 0 || s.num_kv_heads <= 0 || s.head_dim <= 0 ||
      s.feed_forward_length <= 0 || s.vocab_size <= 0 || s.context_length <= 0) {
    return bad("every dimension must be positive");
  }
  if (s.num_heads % s.num_kv_heads != 0) return bad("the head count is not a multiple of the KV head count");
  if (s.head_dim % 2 != 0) return bad("the head size must be even (RoPE rotates pairs)");
  if (!arch->has_head_dim_key && s.head_dim * s.num_heads != s.embedding_length) {
    // These files carry no key_length: loaders derive the head size from the width.
    return bad("head size x heads must equal the width for " + s.architecture);
  }
  // olmo2 slides only with a window (OLMo 3), and OLMo 2 has none.
  if (arch->sliding_period > 0 && arch->id != ModelArchitecture::Olmo2 && s.sliding_window <= 0) {
    return bad(s.architecture + " needs a sliding window");
  }
  if (s.longrope.is_enabled() &&
      (s.longrope.original_context_length <= 0 || s.longrope.long_factors.size() != s.longrope.short_factors.size() ||
       static_cast<int64_t>(s.longrope.long_factors.size()) != s.head_dim / 2)) {
    return bad("LongRoPE needs an original context and head size / 2 long and short factors");
  }
  if (s.yarn_factor < 0.0f || (s.yarn_factor > 0.0f && s.yarn_original_context <= 0)) {
    return bad("YaRN needs a positive factor and the original context");
  }
  if (arch->is_gemma4 && (s.head_dim_swa <= 0 || s.num_kv_heads_swa <= 0 || s.num_heads % s.num_kv_heads_swa != 0 ||
                          s.partial_rotary_global <= 0.0f || s.partial_rotary_global > 1.0f)) {
    return bad("gemma4 needs the sliding layers' head size and KV heads, and a rotated fraction in (0, 1]");
  }
  if (arch->has_experts || (arch->is_gemma4 && s.num_experts > 0)) {
    if (s.num_experts <= 0 || s.num_experts_used <= 0 || s.expert_feed_forward_length <= 0) {
      return bad(s.architecture + " needs experts: a count, how many each token uses and their width");
    }
    if (s.num_experts_used > s.num_experts) return bad("a token cannot use more experts than there are");
  } else if (s.num_experts > 0) {
    return bad(s.architecture + " has no experts (a mixture of experts needs an architecture that routes them)");
  }
  if (!arch->has_deepseek_routing && !(arch->has_gated_shared_expert && s.num_shared_experts == 1) &&
      (s.num_shared_experts > 0 || s.num_leading_dense_layers > 0)) {
    return bad(s.architecture + " has no shared experts or leading dense layers");
  }
  // Prediction layers: glm4moe's and deepseek2's (expert layers), Qwen 3.5's (attention layers).
  if (!arch->has_deepseek_routing && !arch->has_recurrent_layers && s.num_nextn_layers > 0) {
    return bad(s.architecture + " has no multi-token-prediction layers");
  }
  if (s.num_shared_experts < 0 || s.num_leading_dense_layers < 0 || s.num_nextn_layers < 0 ||
      s.num_leading_dense_layers > s.num_layers) {
    return bad("shared experts, leading dense and prediction layers must be counts within the layers");
  }
  if (s.rope_dimension_count < 0 || s.rope_dimension_count % 2 != 0 || s.rope_dimension_count > s.head_dim) {
    return bad("the rotated part of a head must be even and at most the head size");
  }
  if (arch->has_latent_attention &&
      (s.kv_lora_rank <= 0 || s.q_lora_rank < 0 || s.num_kv_heads != 1 || s.rope_dimension_count <= 0 ||
       s.head_dim != s.kv_lora_rank + s.rope_dimension_count || s.mla_head_dim_k <= s.rope_dimension_count ||
       s.mla_head_dim_v <= 0)) {
    return bad(
        "latent attention needs a key/value latent, one KV head of latent + RoPE values, and per-head "
        "query/key widths above the RoPE values and a value width");
  }
  if (!arch->has_latent_attention && (s.kv_lora_rank > 0 || s.q_lora_rank > 0)) {
    return bad(s.architecture + " has no latent attention");
  }
  if (arch->has_recurrent_layers &&
      (s.full_attention_interval < 2 || s.linear_num_key_heads <= 0 || s.linear_num_value_heads <= 0 ||
       s.linear_num_value_heads % s.linear_num_key_heads != 0 || s.linear_head_dim <= 0 || s.linear_conv_kernel <= 0)) {
    return bad(s.architecture +
               " needs a full-attention interval of at least 2, and the recurrent layers' key and value heads "
               "(values a multiple of keys), head size and convolution taps");
  }
  if (!arch->has_recurrent_layers && s.full_attention_interval > 0)
    return bad(s.architecture + " has no recurrent layers");
  if (s.num_expert_groups > 0 && (s.num_experts % s.num_expert_groups != 0 || s.num_expert_groups_used <= 0 ||
                                  s.num_expert_groups_used > s.num_expert_groups)) {
    return bad("expert groups must split the experts evenly, and a token uses 1 to all of them");
  }
  return {};
}

// What llama.cpp's Qwen3_5 converter writes beyond qwen3's keys: the rotated part of each head
// and its M-RoPE sections (text positions make them plain NeoX RoPE), the gated delta net's
// sizes (its ssm.* keys) and the full-attention interval.
void set_qwen35_metadata(const SynthShape& s, gguf::GgufWriter* w) {
  const std::string& a = s.architecture;
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  const int64_t rotated = s.rope_dimension_count > 0 ? s.rope_dimension_count : s.head_dim;
  w->set_u32(a + ".rope.dimension_count", u32(rotated));
  // Qwen 3.5's mrope_section [11, 11, 10] of 32 pairs, in proportion for other widths.
  const int64_t pairs = rotated / 2, t = (pairs * 11 + 16) / 32, h = t;
  gguf::Array sections{gguf::ValueType::Int32, {}};
  for (const int64_t n : {t, h, pairs - t - h, int64_t{0}})
    sections.items.push_back(gguf::Value::i32(static_cast<int32_t>(n)));
  w->set(a + ".rope.dimension_sections", gguf::Value::array(std::move(sections)));
  w->set_u32(a + ".ssm.conv_kernel", u32(s.linear_conv_kernel));
  w->set_u32(a + ".ssm.state_size", u32(s.linear_head_dim));
  w->set_u32(a + ".ssm.group_count", u32(s.linear_num_key_heads));
  w->set_u32(a + ".ssm.time_step_rank", u32(s.linear_num_value_heads));
  w->set_u32(a + ".ssm.inner_size", u32(s.linear_value_width()));
  w->set_u32(a + ".full_attention_interval", u32(s.full_attention_interval));
  if (s.num_nextn_layers > 0) w->set_u32(a + ".nextn_predict_layers", u32(s.num_nextn_layers));
  if (s.num_shared_experts > 0) {  // qwen35moe's shared expert (Qwen3_5Moe's converter)
    w->set_u32(a + ".expert_shared_feed_forward_length", u32(s.expert_feed_forward_length * s.num_shared_experts));
  }
}

// What llama.cpp's Gemma4Model converter writes beyond gemma3's keys: the sliding layers' head
// size and RoPE width, KV heads and the sliding pattern per layer, the sliding layers' base,
// the final soft-cap, no shared KV layers or per-layer embeddings, and the experts.
void set_gemma4_metadata(const SynthShape& s, gguf::GgufWriter* w) {
  const std::string& a = s.architecture;
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w->set_u32(a + ".attention.key_length_swa", u32(s.head_dim_swa));
  w->set_u32(a + ".attention.value_length_swa", u32(s.head_dim_swa));
  w->set_u32(a + ".rope.dimension_count", u32(s.head_dim));
  w->set_u32(a + ".rope.dimension_count_swa", u32(s.head_dim_swa));
  w->set_f32(a + ".rope.freq_base_swa", 10000.0f);
  gguf::Array kv_heads{gguf::ValueType::Int32, {}}, pattern{gguf::ValueType::Bool, {}};
  for (int64_t il = 0; il < s.num_layers; ++il) {
    kv_heads.items.push_back(gguf::Value::i32(static_cast<int32_t>(s.layer_kv_heads(il))));
    pattern.items.push_back(gguf::Value::boolean(s.is_gemma4_sliding(il)));
  }
  w->set(a + ".attention.head_count_kv", gguf::Value::array(std::move(kv_heads)));
  w->set(a + ".attention.sliding_window_pattern", gguf::Value::array(std::move(pattern)));
  if (s.final_logit_softcap > 0.0f) w->set_f32(a + ".final_logit_softcapping", s.final_logit_softcap);
  w->set_u32(a + ".attention.shared_kv_layers", u32(s.num_kv_shared_layers));
  w->set_u32(a + ".embedding_length_per_layer_input", u32(s.per_layer_embedding_length));
  if (s.has_double_wide_shared_ffn) {  // the converter's use_double_wide_mlp: one width per layer
    gguf::Array ff{gguf::ValueType::Int32, {}};
    for (int64_t il = 0; il < s.num_layers; ++il)
      ff.items.push_back(gguf::Value::i32(static_cast<int32_t>(s.layer_ff(il))));
    w->set(a + ".feed_forward_length", gguf::Value::array(std::move(ff)));
  }
  if (s.num_experts > 0) {
    w->set_u32(a + ".expert_count", u32(s.num_experts));
    w->set_u32(a + ".expert_used_count", u32(s.num_experts_used));
    w->set_u32(a + ".expert_feed_forward_length", u32(s.expert_feed_forward_length));
  }
}

void set_metadata(const SynthShape& s, const WeightTypePlan& types, uint64_t seed, int64_t distinct_rows,
                  gguf::GgufWriter* w) {
  const std::string& a = s.architecture;
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w->set_string("general.architecture", a);
  w->set_string("general.name", synthetic_model_name(s));
  const std::string repeated =
      distinct_rows > 0 ? ", " + std::to_string(distinct_rows) + " distinct rows per quantized tensor" : "";
  w->set_string("general.description", "random weights in the shape of " + s.description +
                                           ", written by iwb synth (seed " + std::to_string(seed) + repeated + ")");
  w->set_u32("general.file_type", types.file_type);
  if (types.base_type != GgmlType::F32 && types.base_type != GgmlType::F16 && types.base_type != GgmlType::BF16) {
    w->set_u32("general.quantization_version", 2);  // ggml's current block layouts
  }
  w->set_u32(a + ".context_length", u32(s.context_length));
  w->set_u32(a + ".embedding_length", u32(s.embedding_length));
  w->set_u32(a + ".block_count", u32(s.num_layers + s.num_nextn_layers));
  w->set_u32(a + ".feed_forward_length", u32(s.feed_forward_length));
  w->set_u32(a + ".attention.head_count", u32(s.num_heads));
  w->set_u32(a + ".attention.head_count_kv", u32(s.num_kv_heads));
  w->set_f32(a + ".rope.freq_base", s.rope_freq_base);
  w->set_f32(a + ".attention.layer_norm_rms_epsilon", s.rms_norm_eps);
  if (a == "llama") {
    w->set_u32("llama.vocab_size", u32(s.vocab_size));
    w->set_u32("llama.rope.dimension_count", u32(s.head_dim));
  }
  const ArchitectureTraits& arch = *find_architecture(a);  // check_shape found it
  if (arch.has_head_dim_key) {
    // The head size need not be width / heads (gemma 3 270M: 640 / 4 != 256).
    w->set_u32(a + ".attention.key_length", u32(s.head_dim));
    w->set_u32(a + ".attention.value_length", u32(s.head_dim));
  }
  if (arch.sliding_period > 0 && s.sliding_window > 0) {
    w->set_u32(a + ".attention.sliding_window", u32(s.sliding_window));
  }
  if (arch.id == ModelArchitecture::Olmo2 && s.sliding_window > 0) {
    // OLMo 3, as llama.cpp's Olmo2Model converter writes it: one bool per layer, all but every
    // fourth layer sliding.
    gguf::Array pattern{gguf::ValueType::Bool, {}};
    for (int64_t il = 0; il < s.num_layers; ++il) pattern.items.push_back(gguf::Value::boolean((il + 1) % 4 != 0));
    w->set(a + ".attention.sliding_window_pattern", gguf::Value::array(std::move(pattern)));
  }
  if (arch.has_granite_scales) {
    if (s.granite_embedding_scale != 0.0f) w->set_f32(a + ".embedding_scale", s.granite_embedding_scale);
    if (s.granite_residual_scale != 0.0f) w->set_f32(a + ".residual_scale", s.granite_residual_scale);
    if (s.granite_attention_scale != 0.0f) w->set_f32(a + ".attention.scale", s.granite_attention_scale);
    w->set_f32(a + ".logit_scale", s.granite_logit_scale != 0.0f ? s.granite_logit_scale : 1.0f);  // required
  }
  if (arch.has_logit_softcaps) {
    if (s.attention_softcap > 0.0f) w->set_f32(a + ".attn_logit_softcapping", s.attention_softcap);
    if (s.final_logit_softcap > 0.0f) w->set_f32(a + ".final_logit_softcapping", s.final_logit_softcap);
  }
  if (arch.id == ModelArchitecture::Phi3) {
    // What llama.cpp's Phi3MiniModel converter writes (conversion/phi.py).
    w->set_u32(a + ".rope.dimension_count", u32(s.head_dim));
    w->set_u32(a + ".attention.sliding_window", u32(s.sliding_window));
    if (s.longrope.is_enabled()) {
      w->set_u32(a + ".rope.scaling.original_context_length", u32(s.longrope.original_context_length));
      w->set_f32(a + ".rope.scaling.attn_factor", longrope_attn_factor(s));
    }
  }
  if (s.yarn_factor > 0.0f) {
    w->set_string(a + ".rope.scaling.type", "yarn");
    w->set_f32(a + ".rope.scaling.factor", s.yarn_factor);
    w->set_u32(a + ".rope.scaling.original_context_length", u32(s.yarn_original_context));
  }
  if (arch.id == ModelArchitecture::GptOss) {
    w->set_u32(a + ".rope.dimension_count", u32(s.head_dim));  // as the converter writes (width / heads is not it)
  }
  if (arch.has_experts) {
    w->set_u32(a + ".expert_count", u32(s.num_experts));
    w->set_u32(a + ".expert_used_count", u32(s.num_experts_used));
    w->set_u32(a + ".expert_feed_forward_length", u32(s.expert_feed_forward_length));
  }
  if (arch.has_deepseek_routing) {  // what llama.cpp's Glm4MoeModel and DeepseekV2Model converters write
    w->set_u32(a + ".rope.dimension_count", u32(s.rope_dimension_count > 0 ? s.rope_dimension_count : s.head_dim));
    w->set_u32(a + ".expert_shared_count", u32(s.num_shared_experts));
    w->set_u32(a + ".leading_dense_block_count", u32(s.num_leading_dense_layers));
    w->set_u32(a + ".expert_gating_func", u32(s.expert_gating_func));
    if (s.expert_weights_scale != 0.0f) w->set_f32(a + ".expert_weights_scale", s.expert_weights_scale);
    // DeepseekV2Model writes the key only when config.json's norm_topk_prob is true.
    if (!arch.has_latent_attention || s.is_expert_weight_normalized) {
      w->set_bool(a + ".expert_weights_norm", s.is_expert_weight_normalized);
    }
    if (s.num_nextn_layers > 0) w->set_u32(a + ".nextn_predict_layers", u32(s.num_nextn_layers));
    if (s.num_expert_groups > 0) {
      w->set_u32(a + ".expert_group_count", u32(s.num_expert_groups));
      w->set_u32(a + ".expert_group_used_count", u32(s.num_expert_groups_used));
    }
  }
  if (arch.is_gemma4) set_gemma4_metadata(s, w);
  if (arch.has_recurrent_layers) set_qwen35_metadata(s, w);
  if (arch.has_latent_attention) {  // DeepseekV2Model (conversion/deepseek.py): MLA as MQA of one KV head
    w->set_u32(a + ".vocab_size", u32(s.vocab_size));
    if (s.q_lora_rank > 0) w->set_u32(a + ".attention.q_lora_rank", u32(s.q_lora_rank));
    w->set_u32(a + ".attention.kv_lora_rank", u32(s.kv_lora_rank));
    w->set_u32(a + ".attention.key_length", u32(s.kv_lora_rank + s.rope_dimension_count));
    w->set_u32(a + ".attention.value_length", u32(s.kv_lora_rank));
    w->set_u32(a + ".attention.key_length_mla", u32(s.mla_head_dim_k));
    w->set_u32(a + ".attention.value_length_mla", u32(s.mla_head_dim_v));
    if (s.yarn_mscale_all_dim != 0.0f) {
      w->set_f32(a + ".rope.scaling.yarn_log_multiplier", 0.1f * s.yarn_mscale_all_dim);
    }
  }
}

}  // namespace

std::string synthetic_model_name(const SynthShape& shape) { return "synthetic " + shape.name; }

Result<SynthReport> synthesize_model(const SynthOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.output_path.empty()) return make_error(ErrorCode::InvalidArgument, "no output file given");
  auto types = parse_weight_type(options.weight_type);
  if (!types) return types.status();

  SynthReport report;
  report.shape = options.shape;
  report.types = *types;
  SynthShape& shape = report.shape;

  // The tokenizer decides the vocabulary size: a real tokenizer cannot be cut or padded
  // without changing what its ids mean, so the embedding follows it.
  auto writer = std::make_unique<gguf::GgufWriter>();
  if (!options.vocab_path.empty()) {
    auto num_tokens = detail::copy_tokenizer(options.vocab_path, writer.get());
    if (!num_tokens) return num_tokens.status();
    const std::string source = std::filesystem::path(options.vocab_path).filename().string();
    if (*num_tokens != shape.vocab_size) {
      report.tokenizer_note = "tokenizer from " + source + ": " + std::to_string(*num_tokens) +
                              " tokens, so the vocabulary changes from the preset's " +
                              std::to_string(shape.vocab_size) + " to " + std::to_string(*num_tokens);
      shape.vocab_size = *num_tokens;
    } else {
      report.tokenizer_note = "tokenizer from " + source + ": " + std::to_string(*num_tokens) + " tokens";
    }
  } else {
    const bool is_phi3 = shape.architecture == "phi3", is_gpt_oss = shape.architecture == "gpt-oss";
    IWB_RETURN_IF_ERROR(detail::add_byte_level_tokenizer(shape.vocab_size, writer.get(),
                                                         is_phi3      ? kPhi3ChatTokens
                                                         : is_gpt_oss ? kHarmonyChatTokens
                                                                      : std::vector<std::string>{}));
    report.tokenizer_note = std::string("byte-level tokenizer (3 special, 256 byte and a space token") +
                            (is_phi3 ? ", Phi-3's 5 chat tokens" : "") +
                            (is_gpt_oss ? ", gpt-oss's 8 harmony tokens" : "") + ", padded to the preset's " +
                            std::to_string(shape.vocab_size) + ")";
    // The chat format goes with the architecture here (a --vocab file brings its own template).
    if (is_phi3) writer->set_string("tokenizer.chat_template", kPhi3ChatTemplate);
    if (is_gpt_oss) writer->set_string("tokenizer.chat_template", kHarmonyChatTemplate);
  }
  IWB_RETURN_IF_ERROR(check_shape(shape));
  set_metadata(shape, report.types, options.seed, options.distinct_rows, writer.get());

  // Shared by the fillers, which the writer calls one after another.
  struct Stream {
    std::vector<detail::TensorPlan> tensors;
    uint64_t total_bytes = 0;
    uint64_t bytes_done = 0;
  };
  auto stream = std::make_shared<Stream>();
  stream->tensors = detail::plan_tensors(shape, report.types);
  for (const detail::TensorPlan& t : stream->tensors) {
    stream->total_bytes += t.num_bytes();
    report.tensors.push_back({t.name, t.shape, t.type.type, t.type.wanted, t.num_bytes()});
  }
  report.tensor_bytes = stream->total_bytes;
  report.num_parameters = shape.num_parameters();

  const int64_t num_tensors = static_cast<int64_t>(stream->tensors.size());
  for (int64_t i = 0; i < num_tensors; ++i) {
    const detail::TensorPlan& t = stream->tensors[static_cast<size_t>(i)];
    auto filler = [stream, i, num_tensors, &options](std::span<uint8_t> dst) -> Status {
      const detail::TensorPlan& plan = stream->tensors[static_cast<size_t>(i)];
      SynthProgress p{i, num_tensors, plan.name, plan.type.type, false, stream->bytes_done, stream->total_bytes};
      if (options.progress) options.progress(p);
      IWB_RETURN_IF_ERROR(detail::fill_tensor(plan, options.seed, options.distinct_rows, options.num_threads, dst));
      stream->bytes_done += dst.size();
      p.is_done = true;
      p.bytes_done = stream->bytes_done;
      if (options.progress) options.progress(p);
      return {};
    };
    IWB_RETURN_IF_ERROR(writer->add_tensor(t.name, t.shape, t.type.type, filler));
  }

  IWB_RETURN_IF_ERROR(writer->write_file(options.output_path));
  std::error_code ec;
  report.file_bytes = std::filesystem::file_size(options.output_path, ec);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace iwb::synth
