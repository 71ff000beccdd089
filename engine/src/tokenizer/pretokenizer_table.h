// Which regexes split text before byte-level BPE, per tokenizer.ggml.pre name, and the
// settings llama.cpp ties to each name. The table itself lives in pretokenizer_table.cpp.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace iwb::tokenizer {

struct PreTokenizerFamily {
  std::string_view family;                // e.g. "llama3": names sharing behaviour
  std::vector<std::string_view> regexes;  // applied in order; each splits the previous pieces
  bool ignore_merges = false;             // a pre-token that is a whole token skips merging
  bool clean_spaces = true;               // decode cleanup default for this family
  std::optional<bool> add_bos;            // default for add_bos when the GGUF does not say
  bool add_sep = false;
  bool has_bos = true;  // false: the family has no BOS (chatglm)
  // true: words are written in GPT-2's byte alphabet before merging. false: SPM-style BPE
  // (Gemma 4): raw UTF-8 with every space written as U+2581 '▁' before splitting, '▁' read
  // back as a space, and characters without a token falling back to <0xNN> byte tokens.
  bool is_byte_level = true;
  bool keeps_newline_runs = false;  // a word of newlines only that is one token stays whole (Gemma 4)
  bool is_add_bos_forced = false;   // add_bos whatever tokenizer.ggml.add_bos_token says (Gemma 4)
};

// The family for a tokenizer.ggml.pre value; empty names mean "default". nullptr if unknown.
const PreTokenizerFamily* find_pre_tokenizer(std::string_view pre);

}  // namespace iwb::tokenizer
