// The settings llama.cpp derives rather than reads: defaults per tokenizer model and
// pre-tokenizer, and token roles recognised by their text (end-of-turn markers and the like).
#pragma once

#include "iwb/engine/status.h"
#include "iwb/engine/tokenizer/vocab.h"

#include <string_view>

namespace iwb::tokenizer {

// Sets kind from vocab->model and the defaults for that kind and vocab->pre: default special
// ids, add_bos/add_eos/add_sep, add_space_prefix, clean_spaces, ignore_merges, normaliser.
// Unsupported for an unknown model or (BPE) pre-tokenizer name.
Status apply_model_defaults(Vocab* vocab);

// After tokens, types and special ids are known: finds eot/eom/FIM tokens by their text where
// the file did not name them, marks control-looking tokens as Control, builds
// end_of_generation, and the whitespace-stripping special tokens of Phi-3 (`general_name`).
void apply_text_rules(Vocab* vocab, std::string_view general_name);

}  // namespace iwb::tokenizer
