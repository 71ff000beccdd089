// Model summary from GGUF metadata and tensors, and the memory estimate for a context size.
#include "iwb/engine/model/model_info.h"

#include "iwb/engine/model/architecture.h"
#include "iwb/engine/model/model_config.h"
#include "model/qwen35_config.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace iwb {
namespace {

// Reads "<arch>.<suffix>" as an integer; per-layer arrays (some architectures vary heads or
// FFN width by layer) are summarised by their largest entry.
int64_t arch_int(const gguf::GgufFile& f, const std::string& arch, const char* suffix) {
  const std::string key = arch + "." + suffix;
  const gguf::Value* v = f.find(key);
  if (!v) return 0;
  if (auto i = v->as_int()) return *i;
  if (const gguf::Array* a = v->as_array()) {
    int64_t best = 0;
    for (const gguf::Value& item : a->items) best = std::max(best, item.as_int().value_or(0));
    return best;
  }
  return 0;
}

// Gemma 4's layers differ in their KV rows: head_count_kv per layer, and the sliding layers
// (attention.sliding_window_pattern, one bool per layer) with key_length_swa / value_length_swa.
void read_layer_kv(const gguf::GgufFile& f, const std::string& arch, ModelHyperParams* h) {
  const gguf::Value* kv_heads = f.find(arch + ".attention.head_count_kv");
  const gguf::Array* heads = kv_heads != nullptr ? kv_heads->as_array() : nullptr;
  const gguf::Value* pattern_value = f.find(arch + ".attention.sliding_window_pattern");
  const gguf::Array* pattern = pattern_value != nullptr ? pattern_value->as_array() : nullptr;
  const int64_t key_swa = arch_int(f, arch, "attention.key_length_swa");
  const int64_t value_swa = arch_int(f, arch, "attention.value_length_swa");
  const bool has_swa_heads = key_swa > 0 && pattern != nullptr;
  if (heads == nullptr && !has_swa_heads && arch_int(f, arch, "attention.shared_kv_layers") <= 0) return;
  const int64_t n = h->trunk_layers();
  const int64_t shared = arch_int(f, arch, "attention.shared_kv_layers");  // the last layers store nothing
  for (int64_t il = 0; il < n; ++il) {
    ModelHyperParams::LayerKv l{h->head_count_kv, h->key_length, h->value_length};
    if (heads != nullptr && static_cast<size_t>(il) < heads->items.size()) {
      l.head_count_kv = heads->items[static_cast<size_t>(il)].as_int().value_or(0);
    }
    if (il >= n - shared) l.head_count_kv = 0;
    const bool is_sliding = has_swa_heads && static_cast<size_t>(il) < pattern->items.size() &&
                            pattern->items[static_cast<size_t>(il)].as_bool().value_or(false);
    if (is_sliding) {
      l.key_length = key_swa;
      l.value_length = value_swa > 0 ? value_swa : key_swa;
    }
    l.is_sliding = is_sliding;
    h->layer_kv.push_back(l);
  }
}

// Qwen 3.5's recurrent layers, read by the loader's own reader (qwen35::read_keys) so that
// which layers recur and the state's size are the engine's. A file whose keys the loader
// refuses is summarised without them: loading it says what is wrong.
void read_recurrent_layers(const gguf::GgufFile& f, const std::string& arch, ModelHyperParams* h) {
  const ArchitectureTraits* traits = find_architecture(arch);
  // Per-layer tables are sized by the count: a corrupt one past llama.cpp's 512 layers is left
  // to the loader's refusal.
  constexpr int64_t kMaxLayers = 512;
  if (traits == nullptr || !traits->has_recurrent_layers || h->block_count <= 0 || h->block_count > kMaxLayers) return;
  ModelConfig c;
  c.architecture_name = arch;
  c.num_layers = h->block_count;
  c.num_kv_heads = h->head_count_kv;
  if (!qwen35::read_keys(f, &c) || c.num_layers != h->trunk_layers()) return;
  h->linear_conv_kernel = c.linear_conv_kernel;
  h->linear_num_key_heads = c.linear_num_key_heads;
  h->linear_num_value_heads = c.linear_num_value_heads;
  h->linear_head_dim = c.linear_head_dim;
  h->recurrent_state_bytes_per_sequence = c.recurrent_state_bytes();
  if (h->layer_kv.empty()) {
    h->layer_kv.assign(static_cast<size_t>(c.num_layers), {h->head_count_kv, h->key_length, h->value_length});
  }
  for (int64_t il = 0; il < c.num_layers; ++il) {
    ModelHyperParams::LayerKv& l = h->layer_kv[static_cast<size_t>(il)];
    l.is_recurrent = c.is_recurrent(il);
    if (l.is_recurrent) l.head_count_kv = 0;
  }
}

double arch_float(const gguf::GgufFile& f, const std::string& arch, const char* suffix) {
  return f.get_float(arch + "." + suffix).value_or(0.0);
}

// The tensor type holding most weight bytes, for files without general.file_type.
std::string dominant_type(const ModelSummary& m) {
  std::string best;
  uint64_t best_bytes = 0;
  for (const auto& [name, totals] : m.totals_by_type) {
    if (totals.num_bytes > best_bytes) {
      best_bytes = totals.num_bytes;
      best = name;
    }
  }
  return best;
}

}  // namespace

namespace {

// llama.cpp's llama_ftype values: our short name ("Q4_K_M", as llama-quantize takes it) and
// llama_ftype_name's description ("Q4_K - Medium", as llama-bench prints it).
struct FileType {
  int64_t id;
  const char* name;
  const char* description;
};
constexpr FileType kFileTypes[] = {
    {0, "F32", "all F32"},
    {1, "F16", "F16"},
    {2, "Q4_0", "Q4_0"},
    {3, "Q4_1", "Q4_1"},
    {7, "Q8_0", "Q8_0"},
    {8, "Q5_0", "Q5_0"},
    {9, "Q5_1", "Q5_1"},
    {10, "Q2_K", "Q2_K - Medium"},
    {11, "Q3_K_S", "Q3_K - Small"},
    {12, "Q3_K_M", "Q3_K - Medium"},
    {13, "Q3_K_L", "Q3_K - Large"},
    {14, "Q4_K_S", "Q4_K - Small"},
    {15, "Q4_K_M", "Q4_K - Medium"},
    {16, "Q5_K_S", "Q5_K - Small"},
    {17, "Q5_K_M", "Q5_K - Medium"},
    {18, "Q6_K", "Q6_K"},
    {19, "IQ2_XXS", "IQ2_XXS - 2.0625 bpw"},
    {20, "IQ2_XS", "IQ2_XS - 2.3125 bpw"},
    {21, "Q2_K_S", "Q2_K - Small"},
    {22, "IQ3_XS", "IQ3_XS - 3.3 bpw"},
    {23, "IQ3_XXS", "IQ3_XXS - 3.0625 bpw"},
    {24, "IQ1_S", "IQ1_S - 1.5625 bpw"},
    {25, "IQ4_NL", "IQ4_NL - 4.5 bpw"},
    {26, "IQ3_S", "IQ3_S - 3.4375 bpw"},
    {27, "IQ3_M", "IQ3_S mix - 3.66 bpw"},
    {28, "IQ2_S", "IQ2_S - 2.5 bpw"},
    {29, "IQ2_M", "IQ2_M - 2.7 bpw"},
    {30, "IQ4_XS", "IQ4_XS - 4.25 bpw"},
    {31, "IQ1_M", "IQ1_M - 1.75 bpw"},
    {32, "BF16", "BF16"},
    {36, "TQ1_0", "TQ1_0 - 1.69 bpw ternary"},
    {37, "TQ2_0", "TQ2_0 - 2.06 bpw ternary"},
    {38, "MXFP4_MOE", "MXFP4 MoE"},
};

const FileType* find_file_type(int64_t id) {
  for (const FileType& t : kFileTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

}  // namespace

std::string file_type_name(int64_t ftype) {
  const FileType* t = find_file_type(ftype);
  return t != nullptr ? t->name : std::string();
}

std::string file_type_description(int64_t ftype) {
  const FileType* t = find_file_type(ftype);
  return t != nullptr ? t->description : std::string();
}

std::string format_count(uint64_t n) {
  char buf[32];
  const double d = static_cast<double>(n);
  if (n >= 1'000'000'000ULL)
    std::snprintf(buf, sizeof buf, "%.2f B", d / 1e9);
  else if (n >= 1'000'000ULL)
    std::snprintf(buf, sizeof buf, "%.1f M", d / 1e6);
  else if (n >= 1'000ULL)
    std::snprintf(buf, sizeof buf, "%.1f K", d / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  return buf;
}

std::string format_bytes(uint64_t n) {
  char buf[32];
  const double d = static_cast<double>(n);
  if (n >= (1ULL << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", d / (1ULL << 30));
  else if (n >= (1ULL << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", d / (1ULL << 20));
  else if (n >= (1ULL << 10))
    std::snprintf(buf, sizeof buf, "%.1f KiB", d / (1ULL << 10));
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  return buf;
}

Result<ModelSummary> summarize_model(const gguf::GgufFile& f) {
  ModelSummary m;
  m.path = f.path();
  m.gguf_version = f.version();
  m.file_size = f.file_size();
  m.architecture = f.get_string("general.architecture").value_or("");
  m.name = f.get_string("general.name").value_or(std::filesystem::path(f.path()).filename().string());
  m.tokenizer_model = f.get_string("tokenizer.ggml.model").value_or("");
  m.tokenizer_pre = f.get_string("tokenizer.ggml.pre").value_or("");
  if (const gguf::Array* tokens = f.get_array("tokenizer.ggml.tokens")) {
    m.tokenizer_vocab_size = static_cast<int64_t>(tokens->items.size());
  }
  m.has_chat_template = f.find("tokenizer.chat_template") != nullptr;
  m.is_vocab_only = f.tensors().empty();

  for (const gguf::TensorInfo& t : f.tensors()) {
    const uint64_t elements = static_cast<uint64_t>(t.num_elements());
    m.num_params += elements;
    m.tensor_bytes += t.num_bytes;
    auto& totals = m.totals_by_type[std::string(ggml_type_name(t.type))];
    totals.num_tensors += 1;
    totals.num_elements += elements;
    totals.num_bytes += t.num_bytes;
  }

  if (auto ftype = f.get_int("general.file_type")) {
    m.file_type_id = *ftype;
    m.file_type = file_type_name(*ftype);
  }
  if (m.file_type.empty()) m.file_type = dominant_type(m);

  ModelHyperParams& h = m.hparams;
  const std::string& a = m.architecture;
  if (!a.empty()) {
    h.context_length = arch_int(f, a, "context_length");
    h.embedding_length = arch_int(f, a, "embedding_length");
    h.feed_forward_length = arch_int(f, a, "feed_forward_length");
    h.block_count = arch_int(f, a, "block_count");
    h.head_count = arch_int(f, a, "attention.head_count");
    h.head_count_kv = arch_int(f, a, "attention.head_count_kv");
    if (h.head_count_kv == 0) h.head_count_kv = h.head_count;  // no GQA key: one KV head per head
    const int64_t head_dim = h.head_count ? h.embedding_length / h.head_count : 0;
    h.key_length = arch_int(f, a, "attention.key_length");
    h.value_length = arch_int(f, a, "attention.value_length");
    if (h.key_length == 0) h.key_length = head_dim;
    if (h.value_length == 0) h.value_length = head_dim;
    h.vocab_size = arch_int(f, a, "vocab_size");
    h.rope_freq_base = arch_float(f, a, "rope.freq_base");
    h.rms_norm_eps = arch_float(f, a, "attention.layer_norm_rms_epsilon");
    h.expert_count = arch_int(f, a, "expert_count");
    h.expert_used_count = arch_int(f, a, "expert_used_count");
    h.expert_feed_forward_length = arch_int(f, a, "expert_feed_forward_length");
    h.expert_shared_count = arch_int(f, a, "expert_shared_count");
    h.expert_shared_feed_forward_length = arch_int(f, a, "expert_shared_feed_forward_length");
    h.leading_dense_block_count = arch_int(f, a, "leading_dense_block_count");
    h.nextn_predict_layers = std::clamp<int64_t>(arch_int(f, a, "nextn_predict_layers"), 0, h.block_count);
    h.kv_lora_rank = arch_int(f, a, "attention.kv_lora_rank");
    h.q_lora_rank = arch_int(f, a, "attention.q_lora_rank");
    h.key_length_mla = arch_int(f, a, "attention.key_length_mla");
    h.value_length_mla = arch_int(f, a, "attention.value_length_mla");
    read_layer_kv(f, a, &h);
    read_recurrent_layers(f, a, &h);
  }
  if (h.vocab_size == 0) h.vocab_size = m.tokenizer_vocab_size;
  if (h.vocab_size == 0) {
    if (const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight"); embd && embd->shape.size() == 2) {
      h.vocab_size = embd->shape[1];
    }
  }
  return m;
}

int64_t ModelHyperParams::num_recurrent_layers() const {
  return std::count_if(layer_kv.begin(), layer_kv.end(), [](const LayerKv& l) { return l.is_recurrent; });
}

int64_t ModelHyperParams::attention_layer_interval() const {
  const int64_t attention = num_attention_layers();
  if (num_recurrent_layers() == 0 || attention <= 0 || trunk_layers() % attention != 0) return 0;
  const int64_t interval = trunk_layers() / attention;
  for (int64_t il = 0; il < static_cast<int64_t>(layer_kv.size()); ++il) {
    if (layer_kv[static_cast<size_t>(il)].is_recurrent == ((il + 1) % interval == 0)) return 0;
  }
  return interval;
}

int64_t ModelHyperParams::kv_values_per_position() const {
  if (!layer_kv.empty()) {
    int64_t values = 0;
    for (const LayerKv& l : layer_kv) values += l.head_count_kv * (l.key_length + l.value_length);
    return values;
  }
  const int64_t stored = kv_lora_rank > 0 ? key_length : key_length + value_length;
  return head_count_kv * stored * trunk_layers();
}

MemoryEstimate estimate_memory(const ModelSummary& m, int64_t context) {
  const ModelHyperParams& h = m.hparams;
  MemoryEstimate e;
  e.context = context;
  e.weight_bytes = m.tensor_bytes;
  // f16 K and V per layer: only the KV heads are cached (GQA/MQA share them across query heads);
  // latent attention's values are the key rows' first values, so only the keys are stored.
  e.kv_cache_bytes = 2 * static_cast<uint64_t>(h.kv_values_per_position()) * static_cast<uint64_t>(context);
  // Scratch: f32 activations for a prompt chunk of up to 512 tokens (residual, normed input,
  // Q/K/V, attention output, FFN gate/up), one token's attention scores over the whole context
  // per head, and one row of logits.
  const uint64_t batch = static_cast<uint64_t>(std::clamp<int64_t>(context, 1, 512));
  const uint64_t q_dim = static_cast<uint64_t>(h.head_count * h.key_length);
  const uint64_t kv_dim = static_cast<uint64_t>(h.head_count_kv * (h.key_length + h.value_length));
  // A recurrent layer's projections (the convolution's channels and the output gate) take the
  // place of Q/K/V where they are wider.
  const uint64_t recurrent_dim =
      static_cast<uint64_t>((2 * h.linear_num_key_heads + 2 * h.linear_num_value_heads) * h.linear_head_dim);
  const uint64_t per_token = 3 * static_cast<uint64_t>(h.embedding_length) + std::max(q_dim + kv_dim, recurrent_dim) +
                             2 * static_cast<uint64_t>(h.feed_forward_length);
  e.scratch_bytes = 4 * (batch * per_token + static_cast<uint64_t>(h.head_count) * static_cast<uint64_t>(context) +
                         static_cast<uint64_t>(h.vocab_size));
  e.recurrent_state_bytes = h.recurrent_state_bytes_per_sequence;
  if (m.is_vocab_only) {
    e.kv_cache_bytes = 0;
    e.scratch_bytes = 0;
    e.recurrent_state_bytes = 0;
  }
  return e;
}

}  // namespace iwb
