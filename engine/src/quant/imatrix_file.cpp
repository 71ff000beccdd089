// llama.cpp's legacy imatrix file: written so llama-quantize accepts it, read defensively (a
// truncated or hostile file gets a message naming the entry, never a huge allocation).
#include "iwb/engine/quant/imatrix.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace iwb::quant {
namespace {

constexpr int32_t kMaxNameLength = 1 << 12;
constexpr int32_t kMaxValues = 1 << 26;  // channels of one matrix (or experts x channels)

void put_i32(std::ofstream& out, int32_t v) { out.write(reinterpret_cast<const char*>(&v), sizeof v); }

bool get_i32(std::ifstream& in, int32_t* v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(v), sizeof *v));
}

}  // namespace

std::vector<float> Imatrix::importance(const std::string& tensor_name) const {
  const auto it = entries.find(tensor_name);
  if (it == entries.end() || it->second.num_rows <= 0) return {};
  const ImatrixEntry& e = it->second;
  std::vector<float> out(e.sum_squares.size());
  if (!e.expert_rows.empty()) {
    const size_t features = out.size() / e.expert_rows.size();
    for (size_t j = 0; j < out.size(); ++j) {
      const int64_t rows = e.expert_rows[j / features];
      out[j] = rows > 0 ? static_cast<float>(e.sum_squares[j] / static_cast<double>(rows)) : 1.0f;
    }
    return out;
  }
  for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(e.sum_squares[j] / static_cast<double>(e.num_rows));
  return out;
}

Status write_imatrix_file(const Imatrix& imatrix, const std::string& path) {
  int32_t num_entries = 0;
  for (const auto& [name, e] : imatrix.entries) num_entries += e.num_rows > 0 && !e.sum_squares.empty();
  if (num_entries == 0) return make_error(ErrorCode::InvalidArgument, "the importance matrix is empty: nothing to write");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(ErrorCode::IoError, "cannot write '" + tmp + "'");
    put_i32(out, num_entries);
    for (const auto& [name, e] : imatrix.entries) {
      if (e.num_rows <= 0 || e.sum_squares.empty()) continue;
      put_i32(out, static_cast<int32_t>(name.size()));
      out.write(name.data(), static_cast<std::streamsize>(name.size()));
      const int32_t ncall = std::max<int32_t>(1, e.num_calls);
      put_i32(out, ncall);
      put_i32(out, static_cast<int32_t>(e.sum_squares.size()));
      // The readers divide by ncall: store the mean times ncall, as llama.cpp does (experts:
      // each expert's mean, 1 for an expert no row reached, as llama-imatrix writes them).
      std::vector<float> values = imatrix.importance(name);
      for (float& v : values) v *= static_cast<float>(ncall);
      out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
    }
    put_i32(out, imatrix.num_chunks);
    put_i32(out, static_cast<int32_t>(imatrix.dataset.size()));
    out.write(imatrix.dataset.data(), static_cast<std::streamsize>(imatrix.dataset.size()));
    if (!out.flush()) return make_error(ErrorCode::IoError, "writing '" + tmp + "' failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return make_error(ErrorCode::IoError, "cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  return {};
}

Result<Imatrix> read_imatrix_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::IoError, "cannot read the importance matrix '" + path + "'");
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "'" + path + "' is not an imatrix file: " + what);
  };
  int32_t num_entries = 0;
  if (!get_i32(in, &num_entries) || num_entries < 1 || num_entries > (1 << 20)) return bad("bad entry count");
  Imatrix m;
  for (int32_t i = 0; i < num_entries; ++i) {
    const std::string where = "entry " + std::to_string(i);
    int32_t len = 0;
    if (!get_i32(in, &len) || len < 1 || len > kMaxNameLength) return bad(where + ": bad name length");
    std::string name(static_cast<size_t>(len), '\0');
    if (!in.read(name.data(), len)) return bad(where + ": truncated name");
    int32_t ncall = 0, nval = 0;
    if (!get_i32(in, &ncall) || !get_i32(in, &nval)) return bad(where + " (" + name + "): truncated header");
    if (nval < 1 || nval > kMaxValues) return bad(where + " (" + name + "): bad value count " + std::to_string(nval));
    std::vector<float> values(static_cast<size_t>(nval));
    if (!in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)))) {
      return bad(where + " (" + name + "): truncated values");
    }
    ImatrixEntry e;
    e.num_calls = ncall;
    e.num_rows = 1;
    e.sum_squares.resize(values.size());
    for (size_t j = 0; j < values.size(); ++j) {
      const double v = ncall > 0 ? static_cast<double>(values[j]) / ncall : values[j];
      if (!std::isfinite(v) || v < 0) return bad(where + " (" + name + "): a negative or non-finite value");
      e.sum_squares[j] = v;
    }
    m.entries[name] = std::move(e);
  }
  // Optional trailer: the chunk count and the calibration file's name.
  int32_t chunks = 0, dataset_len = 0;
  if (get_i32(in, &chunks) && get_i32(in, &dataset_len) && dataset_len >= 0 && dataset_len <= kMaxNameLength) {
    m.num_chunks = chunks;
    m.dataset.resize(static_cast<size_t>(dataset_len));
    if (dataset_len > 0 && !in.read(m.dataset.data(), dataset_len)) m.dataset.clear();
  }
  return m;
}

}  // namespace iwb::quant
