// llama-quantize's per-tensor type rules for the file types `iwb synth` writes (see
// llama_tensor_get_type in llama.cpp's src/llama-quant.cpp): the subset that applies to
// dense llama/qwen2/gemma3 models without an imatrix.
#include "iwb/engine/synth/quant_mix.h"

#include <cctype>

namespace iwb::synth {
namespace {

// llama.cpp's llama_ftype values (include/llama.h), written as general.file_type.
struct TypeEntry {
  const char* name;
  GgmlType base;
  bool is_medium_mix;
  uint32_t file_type;
};

constexpr TypeEntry kTypes[] = {
    {"F32", GgmlType::F32, false, 0},
    {"F16", GgmlType::F16, false, 1},
    {"BF16", GgmlType::BF16, false, 32},
    {"Q8_0", GgmlType::Q8_0, false, 7},
    {"Q4_0", GgmlType::Q4_0, false, 2},
    {"Q4_1", GgmlType::Q4_1, false, 3},
    {"Q5_0", GgmlType::Q5_0, false, 8},
    {"Q5_1", GgmlType::Q5_1, false, 9},
    {"Q2_K", GgmlType::Q2_K, false, 10},
    {"Q3_K", GgmlType::Q3_K, false, 11},
    {"Q4_K", GgmlType::Q4_K, false, 14},
    {"Q5_K", GgmlType::Q5_K, false, 16},
    {"Q6_K", GgmlType::Q6_K, false, 18},
    {"Q4_K_M", GgmlType::Q4_K, true, 15},
    {"Q5_K_M", GgmlType::Q5_K, true, 17},
    // llama.cpp has no all-MXFP4 file type: its only one, MOSTLY_MXFP4_MOE (38), puts the experts
    // in MXFP4 and the rest in Q8_0. Here every 2-D weight is MXFP4 but the classifier, which
    // keeps that file type's Q8_0; the label is the nearest llama.cpp prints ("MXFP4 MoE").
    {"MXFP4", GgmlType::MXFP4, false, 38},
};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool fits(GgmlType type, int64_t row_length) { return ggml_row_bytes(type, row_length).has_value(); }

bool is_plain_float(GgmlType type) {
  return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
}

// llama.cpp's replacement when a K-quant does not fit the row: a 32-element type of about the
// same size. Q2_K/Q3_K go to IQ4_NL there, which has no writer here; Q4_0 is the same size.
GgmlType k_quant_fallback(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K: case GgmlType::Q3_K: return GgmlType::Q4_0;
    case GgmlType::Q4_K: return GgmlType::Q5_0;
    case GgmlType::Q5_K: return GgmlType::Q5_1;
    case GgmlType::Q6_K: return GgmlType::Q8_0;
    default: return GgmlType::F16;
  }
}

}  // namespace

Result<WeightTypePlan> parse_weight_type(std::string_view name) {
  const std::string wanted = upper(name);
  for (const TypeEntry& e : kTypes) {
    if (wanted == e.name) return WeightTypePlan{e.name, e.base, e.is_medium_mix, e.file_type};
  }
  std::string list;
  for (const std::string& n : weight_type_names()) list += (list.empty() ? "" : ", ") + n;
  return make_error(ErrorCode::InvalidArgument, "unknown weight type '" + std::string(name) + "' (one of: " + list + ")");
}

const std::vector<std::string>& weight_type_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const TypeEntry& e : kTypes) names.emplace_back(e.name);
    return names;
  }();
  return kNames;
}

bool uses_more_bits(int64_t layer, int64_t num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

TensorTypeChoice choose_tensor_type(const WeightTypePlan& plan, const TensorTypeQuery& q) {
  // Only 2-D weights are quantized: norms, biases and RoPE factors stay F32 in every file, and
  // so does an experts' router (llama-quantize skips ffn_gate_inp; the converter writes it F32).
  if (q.role == TensorRole::Norm || q.role == TensorRole::Bias || q.role == TensorRole::RopeFactors ||
      q.role == TensorRole::Router) {
    return {GgmlType::F32, false, GgmlType::F32};
  }
  if (is_plain_float(plan.base_type)) return {plan.base_type, false, plan.base_type};

  GgmlType type = plan.base_type;
  if (q.is_classifier) {
    // The output projection is the most sensitive matrix: Q6_K unless the file is Q8_0, and
    // Q8_0 when the file's own type does not fit its rows.
    if (!fits(plan.base_type, q.row_length) || plan.base_type == GgmlType::MXFP4) {
      type = GgmlType::Q8_0;
    } else if (plan.base_type != GgmlType::Q8_0) {
      type = GgmlType::Q6_K;
    }
  } else if (plan.is_medium_mix && (q.role == TensorRole::AttnV || q.role == TensorRole::FfnDown) &&
             uses_more_bits(q.layer, q.num_layers)) {
    type = GgmlType::Q6_K;
  } else if (q.has_imatrix && q.role == TensorRole::FfnDown && q.layer < q.num_layers / 8 &&
             (plan.base_type == GgmlType::Q4_0 || plan.base_type == GgmlType::Q5_0) && !plan.is_medium_mix) {
    // llama.cpp guards the first ffn_down layers of imatrix Q4_0/Q5_0 files with the "_1" types.
    type = plan.base_type == GgmlType::Q4_0 ? GgmlType::Q4_1 : GgmlType::Q5_1;
  }

  TensorTypeChoice choice{type, false, type};
  if (!fits(type, q.row_length)) {
    choice.is_fallback = true;
    choice.type = k_quant_fallback(type);
    if (!fits(choice.type, q.row_length)) choice.type = GgmlType::F16;
  }
  return choice;
}

}  // namespace iwb::synth
