// `iwb quantize`: rewrite a GGUF model with its weights in another type — the single block
// types or llama-quantize's Q4_K_M/Q5_K_M mixes (synth/quant_mix.h decides each tensor's type),
// optionally weighting the rounding error by an importance matrix. Metadata is copied;
// general.file_type says the new type. Each tensor's relative quantization error is measured
// on the way (the quantization lab's per-layer view).
#pragma once

#include "iwb/engine/quant/imatrix.h"
#include "iwb/engine/status.h"
#include "iwb/engine/synth/quant_mix.h"
#include "iwb/kernels/ggml_type.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace iwb::quant {

struct QuantizeProgress {
  int64_t tensor_index = 0;
  int64_t num_tensors = 0;
  std::string tensor_name;
  GgmlType type = GgmlType::F32;
  uint64_t bytes_done = 0;   // output bytes written so far
  uint64_t total_bytes = 0;  // output tensor bytes in all
};

struct QuantizeOptions {
  std::string source_path;
  std::string output_path;
  std::string type = "Q4_K_M";       // synth::weight_type_names()
  bool keep_output_f16 = false;      // the classifier (output.weight, or tied embeddings) as F16
  const Imatrix* imatrix = nullptr;  // weights the rounding error where it has the tensor
  std::string imatrix_path;          // recorded in the file's metadata when imatrix is set
  int num_threads = 0;               // 0: all cores
  std::function<void(const QuantizeProgress&)> progress;
  const std::atomic<bool>* cancel = nullptr;  // set to stop: the output is not written
};

struct QuantizedTensor {
  std::string name;
  std::vector<int64_t> shape;        // ggml order
  std::string kind;                  // "attn_q", "ffn_down", "token_embd", "norm" ...
  int64_t layer = -1;                // -1 outside the blocks
  GgmlType source_type = GgmlType::F32;
  GgmlType type = GgmlType::F32;     // as written
  GgmlType wanted = GgmlType::F32;   // what the rules asked for (differs on a fallback)
  bool is_fallback = false;
  bool used_imatrix = false;
  uint64_t num_bytes = 0;
  // sqrt(sum (x - dequant(quant(x)))^2 / sum x^2) over the tensor; 0 for unchanged tensors.
  double relative_rmse = 0;
};

struct QuantizeReport {
  synth::WeightTypePlan plan;
  std::vector<QuantizedTensor> tensors;
  std::vector<std::string> warnings;  // quantized source, missing imatrix entries ...
  bool is_source_quantized = false;   // the source held quantized tensors (dequantized first)
  uint64_t source_bytes = 0;
  uint64_t file_bytes = 0;
  int64_t num_parameters = 0;
  double seconds = 0;
};

Result<QuantizeReport> quantize_model(const QuantizeOptions& options);

// What a tensor name says about its role (blk.N.<kind>.weight): kind and layer.
struct TensorName {
  std::string kind;
  int64_t layer = -1;
};
TensorName parse_tensor_name(const std::string& name);

}  // namespace iwb::quant
