// llama.cpp's model description for the architectures iwb runs. The size classes follow each
// architecture's load_arch_hparams in llama.cpp (src/models/<arch>.cpp of October 2026), the
// file type names its llama_ftype_name, the guess its model loader (the type most tensors have).
#include "iwb/engine/model/llama_model_desc.h"

#include <string_view>

namespace iwb {
namespace {

std::string llama_size_class(const ModelSummary& m) {
  const ModelHyperParams& h = m.hparams;
  const int64_t layers = h.block_count, embd = h.embedding_length;
  const std::string_view arch = m.architecture;
  if (arch == "llama") {
    if (h.expert_count == 8) {
      if (layers == 32) return "8x7B";
      if (layers == 56) return "8x22B";
      return {};
    }
    const int64_t vocab = h.vocab_size > 0 ? h.vocab_size : m.tokenizer_vocab_size;
    switch (layers) {
      case 16:
      case 22: return "1B";
      case 26:
      case 28: return "3B";
      case 30: return "256M";
      case 32: return vocab == 49152 ? "3B" : vocab < 40000 ? "7B" : "8B";
      case 36: return "8B";
      case 40: return "13B";
      case 48: return "34B";
      case 60: return "30B";
      case 80: return h.head_count == h.head_count_kv ? "65B" : "70B";
      default: return {};
    }
  }
  if (arch == "qwen2") {
    switch (layers) {
      case 24: return embd == 1024 ? "0.5B" : "1B";
      case 28: return embd == 1536 ? "1.5B" : "7B";
      case 32: return "7B";
      case 36: return "3B";
      case 40: return h.head_count == 20 ? "4B" : "13B";
      case 48: return "14B";
      case 64: return "32B";
      case 80: return "70B";
      default: return {};
    }
  }
  if (arch == "qwen3") {
    switch (layers) {
      case 28: return embd == 1024 ? "0.6B" : "1.7B";
      case 36: return embd == 2560 ? "4B" : "8B";
      case 40: return "14B";
      case 64: return "32B";
      default: return {};
    }
  }
  if (arch == "glm4moe") {  // llama.cpp counts the trunk's layers
    switch (h.trunk_layers()) {
      case 46: return "106B.A12B";
      case 48: return "102B.A12B";
      case 92: return "355B.A32B";
      default: return {};
    }
  }
  if (arch == "deepseek2") {  // llama.cpp's deepseek2 loader: by layers alone
    switch (h.trunk_layers()) {
      case 27: return "16B";
      case 47: return "30B.A3B";
      case 60: return "236B";
      case 61: return "671B";
      default: return {};
    }
  }
  if (arch == "qwen3moe") {
    if (layers == 48) return "30B.A3B";
    if (layers == 94) return "235B.A22B";
    return {};
  }
  if (arch == "gemma3") {
    switch (layers) {
      case 18: return "270M";
      case 26: return "1B";
      case 32: return "8B";
      case 34: return "4B";
      case 48: return "12B";
      case 62: return "27B";
      default: return {};
    }
  }
  if (arch == "gemma2") {
    switch (layers) {
      case 26: return "2B";
      case 42: return "9B";
      case 46: return "27B";
      default: return {};
    }
  }
  if (arch == "smollm3") return layers == 36 ? "3B" : std::string();
  if (arch == "granite") {
    if (layers == 32) return "3B";
    if (layers == 40) return embd == 2048 ? "2B" : embd == 2560 ? "3B" : embd == 4096 ? "8B" : std::string();
    return layers == 64 ? "30B" : std::string();
  }
  if (arch == "phi3") {
    switch (layers) {
      case 24: return "1B";
      case 32: return "3B";
      case 40: return "14B";
      default: return {};
    }
  }
  return {};
}

// The llama_ftype llama.cpp's loader guesses from the type most tensors have (all F32 where it
// has no guess). Ties go to the type whose name sorts first, where llama.cpp takes the type that
// reached the count first in tensor order.
int64_t guessed_ftype(const ModelSummary& m) {
  std::string most;
  int64_t most_tensors = 0;
  for (const auto& [name, totals] : m.totals_by_type) {
    if (totals.num_tensors > most_tensors) {
      most_tensors = totals.num_tensors;
      most = name;
    }
  }
  static const std::pair<std::string_view, int64_t> kGuesses[] = {
      {"F32", 0},   {"F16", 1},   {"BF16", 32}, {"Q4_0", 2},  {"Q4_1", 3},  {"Q5_0", 8},   {"Q5_1", 9},  {"Q8_0", 7},
      {"Q2_K", 10}, {"Q3_K", 12}, {"Q4_K", 15}, {"Q5_K", 17}, {"Q6_K", 18}, {"TQ1_0", 36}, {"TQ2_0", 37}};
  for (const auto& [type, ftype] : kGuesses) {
    if (most == type) return ftype;
  }
  return 0;
}

}  // namespace

std::string llama_size_label(const ModelSummary& model) {
  const std::string label = llama_size_class(model);
  return label.empty() ? "?B" : label;
}

std::string llama_file_type_description(const ModelSummary& model) {
  if (model.file_type_id < 0) return "(guessed) " + file_type_description(guessed_ftype(model));
  const std::string name = file_type_description(model.file_type_id);
  return name.empty() ? "unknown, may not work" : name;
}

std::string llama_model_description(const ModelSummary& model) {
  return model.architecture + " " + llama_size_label(model) + " " + llama_file_type_description(model);
}

}  // namespace iwb
