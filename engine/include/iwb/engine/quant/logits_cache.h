// The base model's output distributions on an evaluation text, stored once on disk so every
// quantized variant is compared against them without running the base model again.
// Compact: per scored position, the log-probabilities as 16-bit steps over the top 40 nats
// (probabilities below e^-40 of the top are clamped; steps of 6e-4 nats leave a KL of a model
// against its own cache near 1e-8), plus the exact argmax and log-probability of the next token. Files are keyed by base file identity, text hash,
// context, stride and chunk count (logits_cache_key).
#pragma once

#include "iwb/engine/status.h"

#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace iwb::quant {

// One scored position, decoded.
struct BaseRow {
  int32_t argmax = 0;              // the base's top-1 token
  float log_prob_next = 0;         // exact log p(next token)
  std::vector<float> log_probs;    // [vocab], renormalised after decoding
};

class LogitsCacheWriter {
 public:
  // Creates `path` (through a temporary name: a cache is complete or absent).
  static Result<LogitsCacheWriter> create(const std::string& path, const std::string& key, int64_t vocab_size);
  LogitsCacheWriter(LogitsCacheWriter&& other) noexcept;
  LogitsCacheWriter& operator=(LogitsCacheWriter&& other) noexcept;
  // An unfinished cache (a write error, a full disk, an eval that stopped) leaves no partial file.
  ~LogitsCacheWriter();
  // Appends the row of raw logits for one scored position; `next_token` is the token it predicts.
  Status add(std::span<const float> logits, int32_t next_token);
  Status finish();  // writes the row count and renames the file into place
  int64_t num_rows() const { return m_num_rows; }

 private:
  LogitsCacheWriter() = default;
  void discard();  // closes and removes the temporary file

  std::string m_path, m_tmp;  // m_tmp empty: nothing to clean up (finished, or moved from)
  std::ofstream m_out;
  int64_t m_vocab = 0;
  int64_t m_num_rows = 0;
  std::vector<uint16_t> m_codes;
  std::vector<float> m_log_probs;
};

class LogitsCacheReader {
 public:
  // Opens a cache and checks its key; NotFound when absent, CorruptFile when it does not match.
  static Result<LogitsCacheReader> open(const std::string& path, const std::string& key);
  int64_t vocab_size() const { return m_vocab; }
  int64_t num_rows() const { return m_num_rows; }
  // The next row in order.
  Status next(BaseRow* row);

 private:
  std::ifstream m_in;
  int64_t m_vocab = 0;
  int64_t m_num_rows = 0;
  int64_t m_next = 0;
  std::vector<uint16_t> m_codes;
};

// "<identity>|text=<hash>|ctx=<c>|stride=<s>|chunks=<n>|v1": what the cached rows depend on.
std::string logits_cache_key(const std::string& base_identity, const std::string& text_hash, int64_t context,
                             int64_t stride, int64_t num_chunks);
// ${IWB_LOGITS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/inference-workbench/logits}/<hash of key>.logp
std::string logits_cache_path(const std::string& key);
// 16 hex digits of the 64-bit FNV-1a hash of `bytes`.
std::string hash_text(std::string_view bytes);

}  // namespace iwb::quant
