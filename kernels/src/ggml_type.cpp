// Block layouts of every GGUF tensor type (sizes from ggml's type table).
#include "iwb/kernels/ggml_type.h"

#include <array>
#include <cctype>

namespace iwb {
namespace {

struct Entry {
  uint32_t id;
  GgmlTypeTraits traits;
};

constexpr std::array kTypes = {
    Entry{0, {"F32", 1, 4, false}},        Entry{1, {"F16", 1, 2, false}},
    Entry{2, {"Q4_0", 32, 18, true}},      Entry{3, {"Q4_1", 32, 20, true}},
    Entry{6, {"Q5_0", 32, 22, true}},      Entry{7, {"Q5_1", 32, 24, true}},
    Entry{8, {"Q8_0", 32, 34, true}},      Entry{9, {"Q8_1", 32, 36, true}},
    Entry{10, {"Q2_K", 256, 84, true}},    Entry{11, {"Q3_K", 256, 110, true}},
    Entry{12, {"Q4_K", 256, 144, true}},   Entry{13, {"Q5_K", 256, 176, true}},
    Entry{14, {"Q6_K", 256, 210, true}},   Entry{15, {"Q8_K", 256, 292, true}},
    Entry{16, {"IQ2_XXS", 256, 66, true}}, Entry{17, {"IQ2_XS", 256, 74, true}},
    Entry{18, {"IQ3_XXS", 256, 98, true}}, Entry{19, {"IQ1_S", 256, 50, true}},
    Entry{20, {"IQ4_NL", 32, 18, true}},   Entry{21, {"IQ3_S", 256, 110, true}},
    Entry{22, {"IQ2_S", 256, 82, true}},   Entry{23, {"IQ4_XS", 256, 136, true}},
    Entry{24, {"I8", 1, 1, false}},        Entry{25, {"I16", 1, 2, false}},
    Entry{26, {"I32", 1, 4, false}},       Entry{27, {"I64", 1, 8, false}},
    Entry{28, {"F64", 1, 8, false}},       Entry{29, {"IQ1_M", 256, 56, true}},
    Entry{30, {"BF16", 1, 2, false}},      Entry{34, {"TQ1_0", 256, 54, true}},
    Entry{35, {"TQ2_0", 256, 66, true}},   Entry{39, {"MXFP4", 32, 17, true}},
};

const Entry* find_entry(uint32_t id) {
  for (const Entry& e : kTypes) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id) {
  const Entry* e = find_entry(type_id);
  if (!e) return std::nullopt;
  return e->traits;
}

const GgmlTypeTraits& ggml_type_traits(GgmlType type) {
  static const GgmlTypeTraits kInvalid{"invalid", 1, 0, false};
  const Entry* e = find_entry(static_cast<uint32_t>(type));
  return e ? e->traits : kInvalid;
}

std::string_view ggml_type_name(GgmlType type) { return ggml_type_traits(type).name; }

std::optional<GgmlType> ggml_type_from_name(std::string_view name) {
  for (const Entry& e : kTypes) {
    if (iequals(e.traits.name, name)) return static_cast<GgmlType>(e.id);
  }
  return std::nullopt;
}

std::optional<size_t> ggml_row_bytes(GgmlType type, int64_t num_elements) {
  const GgmlTypeTraits& t = ggml_type_traits(type);
  if (t.bytes_per_block == 0 || num_elements < 0 || num_elements % t.block_size != 0) return std::nullopt;
  return static_cast<size_t>(num_elements / t.block_size) * t.bytes_per_block;
}

bool ggml_can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0: case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::MXFP4: return true;
    default:
      return false;
  }
}

size_t ggml_data_alignment(GgmlType type) { return type == GgmlType::F32 || type == GgmlType::MXFP4 ? 1 : 2; }

}  // namespace iwb
