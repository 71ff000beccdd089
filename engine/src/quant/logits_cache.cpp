// Logits cache files. Layout (little-endian): "IWBLOGP1", u32 key length, key bytes, i64 vocab,
// i64 row count (written last), then rows of { f32 low, f32 step, i32 argmax, f32 log p(next),
// u16 codes[vocab] } with log p = low + code * step.
#include "iwb/engine/quant/logits_cache.h"

#include "iwb/kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

namespace iwb::quant {
namespace {

constexpr char kMagic[8] = {'I', 'W', 'B', 'L', 'O', 'G', 'P', '1'};
constexpr float kRangeNats = 40.0f;

template <typename T>
void put(std::ofstream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}
template <typename T>
bool get(std::ifstream& in, T* v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(v), sizeof *v));
}

}  // namespace

std::string hash_text(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

std::string logits_cache_key(const std::string& base_identity, const std::string& text_hash, int64_t context,
                             int64_t stride, int64_t num_chunks) {
  return base_identity + "|text=" + text_hash + "|ctx=" + std::to_string(context) +
         "|stride=" + std::to_string(stride) + "|chunks=" + std::to_string(num_chunks) + "|v1";
}

std::string logits_cache_path(const std::string& key) {
  std::filesystem::path dir;
  if (const char* env = std::getenv("IWB_LOGITS_CACHE"); env && *env)
    dir = env;
  else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    dir = std::filesystem::path(xdg) / "inference-workbench/logits";
  else if (const char* home = std::getenv("HOME"); home && *home)
    dir = std::filesystem::path(home) / ".cache/inference-workbench/logits";
  else
    dir = std::filesystem::temp_directory_path() / "inference-workbench-logits";
  return (dir / (hash_text(key) + ".logp")).string();
}

Result<LogitsCacheWriter> LogitsCacheWriter::create(const std::string& path, const std::string& key, int64_t vocab) {
  if (vocab <= 0) return make_error(ErrorCode::InvalidArgument, "a logits cache needs a vocabulary");
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  LogitsCacheWriter w;
  w.m_path = path;
  w.m_tmp = path + ".partial";
  w.m_vocab = vocab;
  w.m_out.open(w.m_tmp, std::ios::binary | std::ios::trunc);
  if (!w.m_out) return make_error(ErrorCode::IoError, "cannot create the logits cache '" + w.m_tmp + "'");
  w.m_out.write(kMagic, sizeof kMagic);
  put(w.m_out, static_cast<uint32_t>(key.size()));
  w.m_out.write(key.data(), static_cast<std::streamsize>(key.size()));
  put(w.m_out, vocab);
  put(w.m_out, int64_t{0});  // the row count, filled in by finish()
  w.m_codes.resize(static_cast<size_t>(vocab));
  w.m_log_probs.resize(static_cast<size_t>(vocab));
  return w;
}

LogitsCacheWriter::LogitsCacheWriter(LogitsCacheWriter&& other) noexcept
    : m_path(std::move(other.m_path)),
      m_tmp(std::exchange(other.m_tmp, {})),
      m_out(std::move(other.m_out)),
      m_vocab(other.m_vocab),
      m_num_rows(other.m_num_rows),
      m_codes(std::move(other.m_codes)),
      m_log_probs(std::move(other.m_log_probs)) {}

LogitsCacheWriter& LogitsCacheWriter::operator=(LogitsCacheWriter&& other) noexcept {
  if (this != &other) {
    discard();
    m_path = std::move(other.m_path);
    m_tmp = std::exchange(other.m_tmp, {});
    m_out = std::move(other.m_out);
    m_vocab = other.m_vocab;
    m_num_rows = other.m_num_rows;
    m_codes = std::move(other.m_codes);
    m_log_probs = std::move(other.m_log_probs);
  }
  return *this;
}

LogitsCacheWriter::~LogitsCacheWriter() { discard(); }

void LogitsCacheWriter::discard() {
  if (m_tmp.empty()) return;
  m_out.close();
  std::error_code ec;
  std::filesystem::remove(m_tmp, ec);
  m_tmp.clear();
}

Status LogitsCacheWriter::add(std::span<const float> logits, int32_t next_token) {
  if (static_cast<int64_t>(logits.size()) != m_vocab || next_token < 0 || next_token >= m_vocab) {
    return make_error(ErrorCode::InvalidArgument, "a logits row does not match the cache's vocabulary");
  }
  const auto argmax = static_cast<int32_t>(argmax_f32(logits.data(), m_vocab));
  const float max_logit = logits[static_cast<size_t>(argmax)];
  double sum = 0;
  for (const float z : logits) sum += std::exp(static_cast<double>(z - max_logit));
  const float lse = max_logit + static_cast<float>(std::log(sum));
  float lo = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    m_log_probs[i] = logits[i] - lse;
    lo = std::min(lo, m_log_probs[i]);
  }
  const float hi = max_logit - lse;
  lo = std::max(lo, hi - kRangeNats);
  const float step = hi > lo ? (hi - lo) / 65535.0f : 1.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float q = std::round((std::max(m_log_probs[i], lo) - lo) / step);
    m_codes[i] = static_cast<uint16_t>(std::clamp(q, 0.0f, 65535.0f));
  }
  put(m_out, lo);
  put(m_out, step);
  put(m_out, argmax);
  put(m_out, m_log_probs[static_cast<size_t>(next_token)]);
  m_out.write(reinterpret_cast<const char*>(m_codes.data()), static_cast<std::streamsize>(m_codes.size() * 2));
  if (!m_out) return make_error(ErrorCode::IoError, "writing the logits cache '" + m_tmp + "' failed (disk full?)");
  ++m_num_rows;
  return {};
}

Status LogitsCacheWriter::finish() {
  // The row count sits right before the rows: seek back over them.
  const auto rows_bytes = static_cast<std::streamoff>(m_num_rows) * static_cast<std::streamoff>(16 + 2 * m_vocab);
  m_out.seekp(-(rows_bytes + static_cast<std::streamoff>(sizeof(int64_t))), std::ios::end);
  put(m_out, m_num_rows);
  m_out.flush();
  const bool is_written = static_cast<bool>(m_out);
  m_out.close();
  if (!is_written || !m_out) {
    const std::string tmp = m_tmp;
    discard();
    return make_error(ErrorCode::IoError, "writing the logits cache '" + tmp + "' failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(m_tmp, m_path, ec);
  if (ec) {
    discard();
    return make_error(ErrorCode::IoError, "cannot move the logits cache into place: " + ec.message());
  }
  m_tmp.clear();
  return {};
}

Result<LogitsCacheReader> LogitsCacheReader::open(const std::string& path, const std::string& key) {
  LogitsCacheReader r;
  r.m_in.open(path, std::ios::binary);
  if (!r.m_in) return make_error(ErrorCode::NotFound, "no logits cache at '" + path + "'");
  char magic[8];
  uint32_t key_length = 0;
  if (!r.m_in.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0 || !get(r.m_in, &key_length) ||
      key_length > (1u << 16)) {
    return make_error(ErrorCode::CorruptFile, "'" + path + "' is not a logits cache");
  }
  std::string stored(key_length, '\0');
  if (!r.m_in.read(stored.data(), key_length) || stored != key) {
    return make_error(ErrorCode::CorruptFile,
                      "the logits cache '" + path + "' belongs to another model, text or setting");
  }
  if (!get(r.m_in, &r.m_vocab) || !get(r.m_in, &r.m_num_rows) || r.m_vocab <= 0 || r.m_vocab > (1 << 24) ||
      r.m_num_rows < 0) {
    return make_error(ErrorCode::CorruptFile, "the logits cache '" + path + "' has a bad header");
  }
  r.m_codes.resize(static_cast<size_t>(r.m_vocab));
  return r;
}

Status LogitsCacheReader::next(BaseRow* row) {
  if (m_next >= m_num_rows) return make_error(ErrorCode::InvalidArgument, "the logits cache has no more rows");
  float lo = 0, step = 0;
  if (!get(m_in, &lo) || !get(m_in, &step) || !get(m_in, &row->argmax) || !get(m_in, &row->log_prob_next) ||
      !m_in.read(reinterpret_cast<char*>(m_codes.data()), static_cast<std::streamsize>(m_codes.size() * 2))) {
    return make_error(ErrorCode::CorruptFile, "the logits cache is truncated at row " + std::to_string(m_next));
  }
  if (row->argmax < 0 || row->argmax >= m_vocab)
    return make_error(ErrorCode::CorruptFile, "a cached argmax is out of range");
  row->log_probs.resize(static_cast<size_t>(m_vocab));
  // Decoding rounds every log-probability by up to step/2; renormalising removes the first-
  // order effect of that on KL divergence (what is left is of the order of step^2).
  double sum = 0;
  for (size_t i = 0; i < m_codes.size(); ++i) {
    row->log_probs[i] = lo + static_cast<float>(m_codes[i]) * step;
    sum += std::exp(static_cast<double>(row->log_probs[i]));
  }
  const auto shift = static_cast<float>(std::log(sum));
  for (float& v : row->log_probs) v -= shift;
  ++m_next;
  return {};
}

}  // namespace iwb::quant
