// A model described as llama.cpp describes it (llama_model_desc: "qwen2 1.5B Q4_K - Medium"), so
// `iwb bench -o json` rows group with llama-bench's in the same scripts and spreadsheets.
#pragma once

#include "iwb/engine/model/model_info.h"

#include <string>

namespace iwb {

// llama.cpp's size class of the architecture from its layer count (and width, heads, vocabulary
// where llama.cpp looks at them): "1.5B", "270M", "30B.A3B"; "?B" where llama.cpp has no class.
std::string llama_size_label(const ModelSummary& model);

// llama.cpp's name of the file type: "Q4_K - Medium", "all F32"; without general.file_type, the
// type of most tensors, prefixed "(guessed) " as llama.cpp does.
std::string llama_file_type_description(const ModelSummary& model);

// "<architecture> <size label> <file type description>".
std::string llama_model_description(const ModelSummary& model);

}  // namespace iwb
