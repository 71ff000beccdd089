// Importance matrices: per input channel of each weight matrix, the mean squared activation
// seen while running the model on calibration text, stored in llama.cpp's legacy imatrix
// format (.dat / .imatrix) so `llama-quantize --imatrix` reads our files and we read its.
#pragma once

#include "iwb/engine/status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace iwb::quant {

// The accumulating form, as the collector fills it: sums over every token row that went
// through the matrix, and how many rows and calls.
struct ImatrixEntry {
  std::vector<double> sum_squares;  // [in_features], or [num_experts x in_features] for experts
  int64_t num_rows = 0;             // token rows accumulated (every channel sees every row)
  int32_t num_calls = 0;            // matmul calls (llama.cpp's ncall, kept for the file)
  // An expert tensor as the collector fills it: the rows routed to each expert, each
  // expert's channels averaged over its own rows; an expert no row reached gets importance 1
  // (llama-imatrix's "partial data" rule). Empty for dense matrices and for entries read from
  // a file (already means: num_rows 1 covers them all).
  std::vector<int64_t> expert_rows;
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight tensor name ("blk.0.attn_q.weight")
  int32_t num_chunks = 0;                       // calibration chunks the statistics came from
  std::string dataset;                          // the calibration text's file name

  // Mean squared activation per channel of `tensor_name`; empty when absent. An expert
  // tensor's is [num_experts x in_features], expert e's channels at e * in_features.
  std::vector<float> importance(const std::string& tensor_name) const;
};

// Legacy format, little-endian (llama.cpp's examples/imatrix save_imatrix / quantize's
// load_imatrix):
//   int32 n_entries
//   n_entries x { int32 name_len; char name[name_len]; int32 ncall; int32 nval;
//                 float values[nval] }      values = mean(x^2) * ncall (readers divide by ncall)
//   int32 last_chunk; int32 dataset_len; char dataset[dataset_len]   (optional trailer)
Status write_imatrix_file(const Imatrix& imatrix, const std::string& path);
// Reads the same; entries come back with num_rows = 1 and sum_squares = mean(x^2).
Result<Imatrix> read_imatrix_file(const std::string& path);

}  // namespace iwb::quant
