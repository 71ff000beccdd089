// Reader for karpathy/llama2.c checkpoints (legacy "version 0" export) and tokenizer files,
// and their conversion to a llama-architecture GGUF that llama.cpp and this engine both load.
#pragma once

#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace iwb::gguf {
class MappedFile;
}

namespace iwb::convert {

inline constexpr size_t kLlama2cHeaderBytes = 7 * sizeof(int32_t);
// llama2.c's rmsnorm() adds this before the square root; its RoPE uses base 10000.
inline constexpr float kLlama2cRmsEps = 1e-5f;
inline constexpr float kLlama2cRopeBase = 10000.0f;

// The seven int32 of the checkpoint header, validated.
struct Llama2cConfig {
  int64_t dim = 0;           // model width
  int64_t hidden_dim = 0;    // feed-forward width
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // < num_heads with grouped-query attention
  int64_t vocab_size = 0;    // always positive here; the sign on disk is is_classifier_shared
  int64_t seq_len = 0;       // trained context length
  bool is_classifier_shared = true;  // false: a separate classifier follows the weights

  int64_t head_size() const { return dim / num_heads; }
  int64_t kv_dim() const { return dim * num_kv_heads / num_heads; }
};

// Parses the 28-byte header and checks every dimension (positive, not absurd, heads dividing
// the width, KV heads dividing the heads, an even head size for RoPE pairs).
Result<Llama2cConfig> parse_llama2c_header(std::span<const uint8_t> header);
// The exact size in bytes of a checkpoint with this header (header included).
uint64_t llama2c_checkpoint_bytes(const Llama2cConfig& config);

// A checkpoint mapped read-only; the spans stay valid while the object lives.
class Llama2cCheckpoint {
 public:
  ~Llama2cCheckpoint();
  Llama2cCheckpoint(const Llama2cCheckpoint&) = delete;
  Llama2cCheckpoint& operator=(const Llama2cCheckpoint&) = delete;

  // Maps the file, validates the header and that the size matches it exactly.
  static Result<std::unique_ptr<Llama2cCheckpoint>> open(const std::string& path);

  const Llama2cConfig& config() const { return m_config; }
  const std::string& path() const { return m_path; }

  // Row-major arrays as llama2.c stores them ([rows, cols]: cols contiguous).
  std::span<const float> token_embedding() const;        // [vocab, dim]
  std::span<const float> rms_att(int64_t layer) const;   // [dim]
  std::span<const float> wq(int64_t layer) const;        // [dim, dim]
  std::span<const float> wk(int64_t layer) const;        // [kv_dim, dim]
  std::span<const float> wv(int64_t layer) const;        // [kv_dim, dim]
  std::span<const float> wo(int64_t layer) const;        // [dim, dim]
  std::span<const float> rms_ffn(int64_t layer) const;   // [dim]
  std::span<const float> w1(int64_t layer) const;        // [hidden, dim] (gate)
  std::span<const float> w2(int64_t layer) const;        // [dim, hidden] (down)
  std::span<const float> w3(int64_t layer) const;        // [hidden, dim] (up)
  std::span<const float> rms_final() const;              // [dim]
  std::span<const float> classifier() const;             // [vocab, dim]; the embedding when shared

 private:
  Llama2cCheckpoint() = default;
  // The slice `layer` of a per-layer array that starts at `base` floats after the header.
  std::span<const float> layer_slice(uint64_t base, uint64_t per_layer, int64_t layer) const;

  std::string m_path;
  Llama2cConfig m_config;
  std::unique_ptr<gguf::MappedFile> m_mapping;
  const float* m_floats = nullptr;  // first float after the header
  // Offsets in floats from m_floats, in file order.
  uint64_t m_off_rms_att = 0, m_off_wq = 0, m_off_wk = 0, m_off_wv = 0, m_off_wo = 0;
  uint64_t m_off_rms_ffn = 0, m_off_w1 = 0, m_off_w2 = 0, m_off_w3 = 0, m_off_rms_final = 0;
  uint64_t m_off_classifier = 0;
};

// llama.cpp's token types (llama_token_type / tokenizer.ggml.token_type values).
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct Llama2cToken {
  std::string raw;    // bytes as stored in the llama2.c file (space, not U+2581)
  std::string piece;  // SentencePiece form as written to GGUF
  float score = 0;
  TokenType type = TokenType::Normal;
};

struct Llama2cTokenizer {
  int32_t max_token_length = 0;
  std::vector<Llama2cToken> tokens;
};

// Special ids every llama2.c tokenizer uses (SentencePiece defaults; run.c hard-codes 1 and 2).
inline constexpr int32_t kLlama2cUnkId = 0;
inline constexpr int32_t kLlama2cBosId = 1;
inline constexpr int32_t kLlama2cEosId = 2;

// Parses a llama2.c tokenizer file and checks it holds exactly expected_vocab_size tokens.
Result<Llama2cTokenizer> load_llama2c_tokenizer(const std::string& path, int64_t expected_vocab_size);
Result<Llama2cTokenizer> parse_llama2c_tokenizer(std::span<const uint8_t> bytes, int64_t expected_vocab_size);

struct Llama2cConvertOptions {
  GgmlType weight_type = GgmlType::F32;  // F32 or F16 for the 2-D weights; norms stay F32
  std::string name;                      // general.name; empty: "llama2c"
};

struct Llama2cConvertSummary {
  Llama2cConfig config;
  int64_t num_tensors = 0;
  uint64_t num_parameters = 0;
  uint64_t tensor_bytes = 0;  // sum of tensor data sizes, padding excluded
  uint64_t file_bytes = 0;    // size of the written file
};

// Fills a writer with the llama metadata, tokenizer and tensors. The writer reads the
// checkpoint's mapping while writing, so the checkpoint must outlive it.
Status build_llama2c_gguf(const Llama2cCheckpoint& checkpoint, const Llama2cTokenizer& tokenizer,
                          const Llama2cConvertOptions& options, gguf::GgufWriter* writer,
                          Llama2cConvertSummary* summary);

// The whole conversion: open both inputs, validate, write out_path.
Result<Llama2cConvertSummary> convert_llama2c_to_gguf(const std::string& checkpoint_path,
                                                       const std::string& tokenizer_path,
                                                       const std::string& out_path,
                                                       const Llama2cConvertOptions& options);

}  // namespace iwb::convert
