// `iwb synth`: a GGUF model with a real architecture and shape, random weights of realistic
// scale, any supported tensor type (or llama.cpp's Q4_K_M/Q5_K_M mixes) and a real tokenizer,
// written tensor by tensor so even an 8B model never sits in memory. Deterministic per seed.
#pragma once

#include "iwb/engine/status.h"
#include "iwb/engine/synth/quant_mix.h"
#include "iwb/engine/synth/synth_preset.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace iwb::synth {

// Reported once before a tensor is generated (is_done false) and once after (is_done true).
struct SynthProgress {
  int64_t tensor_index = 0;     // 0-based, in file order
  int64_t num_tensors = 0;
  std::string tensor_name;
  GgmlType type = GgmlType::F32;
  bool is_done = false;
  uint64_t bytes_done = 0;      // tensor bytes written so far (including this one when done)
  uint64_t total_bytes = 0;
};

struct SynthOptions {
  SynthShape shape;             // usually *find_synth_preset(name)
  std::string weight_type = "F16";  // parse_weight_type: F32, F16, BF16, Q8_0 ... Q6_K, Q4_K_M, Q5_K_M
  std::string vocab_path;       // GGUF whose tokenizer.* keys are copied; empty: byte-level tokenizer
  uint64_t seed = 0;
  // 0: every row of every tensor is its own random draw. N > 0: each tensor stored in a
  // type other than F32 draws N random rows and repeats them (row r is a copy of a row
  // picked by a hash of r), which writes a 30 B model in minutes instead of the better
  // part of an hour. Speed does not depend on the values, so such a file measures the
  // same; its logits are not worth comparing. F32 tensors (norms, biases, routers) stay
  // all random, so experts are still routed as in a fully random file.
  int64_t distinct_rows = 0;
  int num_threads = 0;          // 0: all cores (OpenMP's default)
  std::string output_path;
  std::function<void(const SynthProgress&)> progress;
};

struct SynthTensorSummary {
  std::string name;
  std::vector<int64_t> shape;
  GgmlType type = GgmlType::F32;
  GgmlType wanted = GgmlType::F32;  // differs from type when the rows did not fit it
  uint64_t num_bytes = 0;
};

struct SynthReport {
  SynthShape shape;             // as written: vocab_size follows a --vocab tokenizer
  WeightTypePlan types;
  std::string tokenizer_note;   // where the tokenizer came from, and any vocab size change
  std::vector<SynthTensorSummary> tensors;
  int64_t num_parameters = 0;
  uint64_t tensor_bytes = 0;
  uint64_t file_bytes = 0;
  double seconds = 0;
};

// Checks the shape, the type and the vocab file, then writes options.output_path (through a
// temporary file, so a failure leaves nothing half-written behind).
Result<SynthReport> synthesize_model(const SynthOptions& options);

// The general.name written into synthetic files, "synthetic <preset>".
std::string synthetic_model_name(const SynthShape& shape);

}  // namespace iwb::synth
