// llama2.c checkpoint reader: header validation, exact-size check, and views of each weight
// array inside the read-only mapping.
#include "iwb/engine/convert/llama2c.h"

#include "gguf/mapped_file.h"

#include <cstring>
#include <string>

namespace iwb::convert {
namespace {

// Upper bounds far above any real llama2.c model; they keep the size arithmetic in range and
// turn a garbage header into a message instead of a multi-terabyte expectation.
constexpr int64_t kMaxDim = int64_t{1} << 16;
constexpr int64_t kMaxHidden = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxVocab = int64_t{1} << 22;
constexpr int64_t kMaxSeqLen = int64_t{1} << 24;

// export.py --version 1 and later start with this magic ("ak42") and a version number.
constexpr uint32_t kVersionedExportMagic = 0x616b3432;

std::string describe(const Llama2cConfig& c) {
  return "dim " + std::to_string(c.dim) + ", hidden " + std::to_string(c.hidden_dim) + ", layers " +
         std::to_string(c.num_layers) + ", heads " + std::to_string(c.num_heads) + ", KV heads " +
         std::to_string(c.num_kv_heads) + ", vocab " + std::to_string(c.vocab_size) + ", seq_len " +
         std::to_string(c.seq_len);
}

Status check_range(const char* what, int64_t value, int64_t max) {
  if (value <= 0) {
    return make_error(ErrorCode::CorruptFile, std::string("llama2.c header: ") + what + " is " +
                                                  std::to_string(value) + ", must be positive");
  }
  if (value > max) {
    return make_error(ErrorCode::CorruptFile, std::string("llama2.c header: ") + what + " is " +
                                                  std::to_string(value) + ", more than the plausible " +
                                                  std::to_string(max) + " (not a llama2.c checkpoint?)");
  }
  return {};
}

// Float counts of each array, in file order.
struct Layout {
  uint64_t embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis, classifier;
};

Layout layout_of(const Llama2cConfig& c) {
  const auto dim = static_cast<uint64_t>(c.dim);
  const auto hidden = static_cast<uint64_t>(c.hidden_dim);
  const auto layers = static_cast<uint64_t>(c.num_layers);
  const auto kv_dim = static_cast<uint64_t>(c.kv_dim());
  const auto vocab = static_cast<uint64_t>(c.vocab_size);
  Layout l{};
  l.embedding = vocab * dim;
  l.rms_att = layers * dim;
  l.wq = layers * dim * dim;
  l.wk = layers * kv_dim * dim;
  l.wv = layers * kv_dim * dim;
  l.wo = layers * dim * dim;
  l.rms_ffn = layers * dim;
  l.w1 = layers * hidden * dim;
  l.w2 = layers * dim * hidden;
  l.w3 = layers * hidden * dim;
  l.rms_final = dim;
  // freq_cis_real and freq_cis_imag, [seq_len, head_size / 2] each; unused (RoPE is recomputed).
  l.freq_cis = 2 * static_cast<uint64_t>(c.seq_len) * static_cast<uint64_t>(c.head_size() / 2);
  l.classifier = c.is_classifier_shared ? 0 : vocab * dim;
  return l;
}

}  // namespace

Result<Llama2cConfig> parse_llama2c_header(std::span<const uint8_t> header) {
  if (header.size() < kLlama2cHeaderBytes) {
    return make_error(ErrorCode::CorruptFile, "llama2.c header needs " + std::to_string(kLlama2cHeaderBytes) +
                                                  " bytes, got " + std::to_string(header.size()));
  }
  int32_t h[7];
  std::memcpy(h, header.data(), sizeof(h));
  if (static_cast<uint32_t>(h[0]) == kVersionedExportMagic) {
    return make_error(ErrorCode::Unsupported,
                      "this is a versioned llama2.c export (magic 'ak42', version " + std::to_string(h[1]) +
                          "); only the legacy format is supported: re-export with export.py --version 0");
  }
  Llama2cConfig c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.num_layers = h[2];
  c.num_heads = h[3];
  c.num_kv_heads = h[4];
  c.vocab_size = h[5] < 0 ? -int64_t{h[5]} : int64_t{h[5]};
  c.is_classifier_shared = h[5] > 0;
  c.seq_len = h[6];

  IWB_RETURN_IF_ERROR(check_range("dim", c.dim, kMaxDim));
  IWB_RETURN_IF_ERROR(check_range("hidden_dim", c.hidden_dim, kMaxHidden));
  IWB_RETURN_IF_ERROR(check_range("n_layers", c.num_layers, kMaxLayers));
  IWB_RETURN_IF_ERROR(check_range("n_heads", c.num_heads, kMaxDim));
  IWB_RETURN_IF_ERROR(check_range("n_kv_heads", c.num_kv_heads, kMaxDim));
  IWB_RETURN_IF_ERROR(check_range("|vocab_size|", c.vocab_size, kMaxVocab));
  IWB_RETURN_IF_ERROR(check_range("seq_len", c.seq_len, kMaxSeqLen));
  // Divisibility also rules out more heads than dims and more KV heads than heads.
  if (c.dim % c.num_heads != 0) {
    return make_error(ErrorCode::CorruptFile, "llama2.c header: n_heads " + std::to_string(c.num_heads) +
                                                  " does not divide dim " + std::to_string(c.dim));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return make_error(ErrorCode::CorruptFile, "llama2.c header: n_kv_heads " + std::to_string(c.num_kv_heads) +
                                                  " does not divide n_heads " + std::to_string(c.num_heads));
  }
  if (c.head_size() % 2 != 0) {
    return make_error(ErrorCode::CorruptFile, "llama2.c header: head size " + std::to_string(c.head_size()) +
                                                  " is odd; RoPE rotates pairs of dimensions");
  }
  return c;
}

uint64_t llama2c_checkpoint_bytes(const Llama2cConfig& config) {
  const Layout l = layout_of(config);
  const uint64_t floats = l.embedding + l.rms_att + l.wq + l.wk + l.wv + l.wo + l.rms_ffn + l.w1 + l.w2 + l.w3 +
                          l.rms_final + l.freq_cis + l.classifier;
  return kLlama2cHeaderBytes + floats * sizeof(float);
}

Llama2cCheckpoint::~Llama2cCheckpoint() = default;

Result<std::unique_ptr<Llama2cCheckpoint>> Llama2cCheckpoint::open(const std::string& path) {
  auto mapping = gguf::MappedFile::open(path);
  if (!mapping) return mapping.status();
  const std::span<const uint8_t> bytes = (*mapping)->bytes();
  if (bytes.size() < kLlama2cHeaderBytes) {
    return make_error(ErrorCode::CorruptFile, "checkpoint '" + path + "' has " + std::to_string(bytes.size()) +
                                                  " bytes, too short for the " + std::to_string(kLlama2cHeaderBytes) +
                                                  "-byte llama2.c header");
  }
  auto config = parse_llama2c_header(bytes.first(kLlama2cHeaderBytes));
  if (!config) return make_error(config.status().code(), "checkpoint '" + path + "': " + config.error_message());

  const uint64_t expected = llama2c_checkpoint_bytes(*config);
  const uint64_t actual = bytes.size();
  if (actual < expected) {
    return make_error(ErrorCode::CorruptFile, "checkpoint '" + path + "' is truncated: its header (" +
                                                  describe(*config) + ") implies " + std::to_string(expected) +
                                                  " bytes, the file has " + std::to_string(actual));
  }
  if (actual > expected) {
    return make_error(ErrorCode::CorruptFile,
                      "checkpoint '" + path + "' has " + std::to_string(actual) + " bytes, " +
                          std::to_string(actual - expected) + " more than the " + std::to_string(expected) +
                          " its header (" + describe(*config) +
                          ") implies: wrong vocab_size sign, or not a legacy llama2.c export");
  }

  std::unique_ptr<Llama2cCheckpoint> ckpt(new Llama2cCheckpoint());
  ckpt->m_path = path;
  ckpt->m_config = *config;
  // The header is 28 bytes and mappings are page aligned, so every float is 4-byte aligned.
  ckpt->m_floats = reinterpret_cast<const float*>(bytes.data() + kLlama2cHeaderBytes);
  ckpt->m_mapping = std::move(*mapping);

  const Layout l = layout_of(*config);
  uint64_t off = l.embedding;
  ckpt->m_off_rms_att = off;   off += l.rms_att;
  ckpt->m_off_wq = off;        off += l.wq;
  ckpt->m_off_wk = off;        off += l.wk;
  ckpt->m_off_wv = off;        off += l.wv;
  ckpt->m_off_wo = off;        off += l.wo;
  ckpt->m_off_rms_ffn = off;   off += l.rms_ffn;
  ckpt->m_off_w1 = off;        off += l.w1;
  ckpt->m_off_w2 = off;        off += l.w2;
  ckpt->m_off_w3 = off;        off += l.w3;
  ckpt->m_off_rms_final = off; off += l.rms_final;
  off += l.freq_cis;
  ckpt->m_off_classifier = config->is_classifier_shared ? 0 : off;
  return ckpt;
}

std::span<const float> Llama2cCheckpoint::layer_slice(uint64_t base, uint64_t per_layer, int64_t layer) const {
  if (layer < 0 || layer >= m_config.num_layers) return {};
  return {m_floats + base + static_cast<uint64_t>(layer) * per_layer, static_cast<size_t>(per_layer)};
}

std::span<const float> Llama2cCheckpoint::token_embedding() const {
  return {m_floats, static_cast<size_t>(m_config.vocab_size * m_config.dim)};
}

std::span<const float> Llama2cCheckpoint::rms_att(int64_t layer) const {
  return layer_slice(m_off_rms_att, m_config.dim, layer);
}
std::span<const float> Llama2cCheckpoint::wq(int64_t layer) const {
  return layer_slice(m_off_wq, m_config.dim * m_config.dim, layer);
}
std::span<const float> Llama2cCheckpoint::wk(int64_t layer) const {
  return layer_slice(m_off_wk, m_config.kv_dim() * m_config.dim, layer);
}
std::span<const float> Llama2cCheckpoint::wv(int64_t layer) const {
  return layer_slice(m_off_wv, m_config.kv_dim() * m_config.dim, layer);
}
std::span<const float> Llama2cCheckpoint::wo(int64_t layer) const {
  return layer_slice(m_off_wo, m_config.dim * m_config.dim, layer);
}
std::span<const float> Llama2cCheckpoint::rms_ffn(int64_t layer) const {
  return layer_slice(m_off_rms_ffn, m_config.dim, layer);
}
std::span<const float> Llama2cCheckpoint::w1(int64_t layer) const {
  return layer_slice(m_off_w1, m_config.hidden_dim * m_config.dim, layer);
}
std::span<const float> Llama2cCheckpoint::w2(int64_t layer) const {
  return layer_slice(m_off_w2, m_config.dim * m_config.hidden_dim, layer);
}
std::span<const float> Llama2cCheckpoint::w3(int64_t layer) const {
  return layer_slice(m_off_w3, m_config.hidden_dim * m_config.dim, layer);
}
std::span<const float> Llama2cCheckpoint::rms_final() const {
  return {m_floats + m_off_rms_final, static_cast<size_t>(m_config.dim)};
}
std::span<const float> Llama2cCheckpoint::classifier() const {
  if (m_config.is_classifier_shared) return token_embedding();
  return {m_floats + m_off_classifier, static_cast<size_t>(m_config.vocab_size * m_config.dim)};
}

}  // namespace iwb::convert
