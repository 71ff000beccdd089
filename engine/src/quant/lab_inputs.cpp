// The lab queue's inputs: texts read once, the base chosen (a quantized source is dequantized
// to F16 so errors are measured against real numbers), file names, and progress shares.
#include "quant/lab_inputs.h"

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_info.h"
#include "iwb/engine/quant/evaluation.h"
#include "iwb/engine/quant/logits_cache.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace iwb::quant::lab {
namespace {

namespace fs = std::filesystem;

// The text at `path`, or the built-in text when the path is empty.
Status read_text(const std::string& path, std::string* text, std::string* name) {
  if (path.empty()) {
    *text = builtin_eval_text();
    *name = "built-in";
    return {};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::IoError, "cannot read the text '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  *text = bytes.str();
  *name = fs::path(path).filename().string();
  return {};
}

// The source's quantized type when it holds quantized 2-D weights, empty when it is float.
std::string quantized_type_of(const gguf::GgufFile& file) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.shape.size() >= 2 && t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16) {
      const auto ftype = file.get_int("general.file_type");
      return ftype ? file_type_name(*ftype) : std::string(ggml_type_name(t.type));
    }
  }
  return {};
}

std::string stem_of(const LabSettings& s) { return fs::path(s.source_path).stem().string(); }

}  // namespace

Result<Texts> read_texts(const LabSettings& s) {
  Texts t;
  IWB_RETURN_IF_ERROR(read_text(s.eval_text_path, &t.eval, &t.eval_name));
  const std::string& calibration = s.calibration_text_path.empty() ? s.eval_text_path : s.calibration_text_path;
  IWB_RETURN_IF_ERROR(read_text(calibration, &t.calibration, &t.calibration_name));
  return t;
}

Result<Base> plan_base(const LabSettings& s) {
  Result<std::unique_ptr<gguf::GgufFile>> source = gguf::GgufFile::open(s.source_path);
  if (!source) return source.status();
  Base base;
  base.path = s.source_path;
  const std::string source_type = quantized_type_of(**source);
  if (source_type.empty()) return base;
  base.path = (fs::path(s.output_dir) / (stem_of(s) + "-f16.gguf")).string();
  base.note = "base: F16 dequantized from " + fs::path(s.source_path).filename().string() + " (" + source_type +
              "), the only file at hand: errors are measured against that";
  std::error_code ec;
  base.needs_dequantize = !fs::exists(base.path, ec);
  return base;
}

std::string base_weight_type(const std::string& base_path) {
  Result<std::unique_ptr<gguf::GgufFile>> base = gguf::GgufFile::open(base_path);
  const auto ftype = base ? (*base)->get_int("general.file_type") : std::nullopt;
  return ftype ? file_type_name(*ftype) : "F16";
}

std::string imatrix_path(const LabSettings& s, const std::string& calibration_text) {
  // Keyed by the text's hash: another calibration text never reuses this one's statistics.
  const std::string name = stem_of(s) + "-" + hash_text(calibration_text).substr(0, 8) + ".imatrix";
  return (fs::path(s.output_dir) / name).string();
}

std::string quantized_path(const LabSettings& s, const LabItem& item) {
  // The KV cache type does not change the file; each still gets its own ("-kv8" for q8_0 as before).
  std::string kv;
  if (item.kv_cache_type == "q8_0") kv = "-kv8";
  else if (item.kv_cache_type != "f16") {
    kv = "-kv-" + item.kv_cache_type;
    std::replace(kv.begin(), kv.end(), '/', '-');
  }
  const std::string name = stem_of(s) + "-" + item.type + (item.is_imatrix ? "-im" : "") + kv + ".gguf";
  return (fs::path(s.output_dir) / name).string();
}

void ProgressShares::report(LabStage stage, int item, double within_step, std::string message) {
  const double within = std::clamp(within_step, 0.0, 1.0);
  m_last = std::max(m_last, std::min(1.0, (m_step + within) / std::max(1, m_num_steps)));
  if (m_observer.progress) m_observer.progress({stage, item, m_last, std::move(message)});
}

void ProgressShares::finish(bool was_cancelled) {
  m_last = 1.0;
  if (m_observer.progress) m_observer.progress({LabStage::Finished, -1, 1.0, was_cancelled ? "Cancelled" : "Done"});
}

}  // namespace iwb::quant::lab
