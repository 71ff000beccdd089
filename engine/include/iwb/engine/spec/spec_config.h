// Speculative decoding settings: which drafter guesses the next tokens (a smaller draft model,
// prompt lookup over the sequence's own text, a lower-precision copy of the target, or the
// target's own multi-token-prediction head) and how
// many tokens it guesses per step. Plain values, passed from the UI or the command line.
#pragma once

#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace iwb::spec {

enum class DrafterKind { None, DraftModel, PromptLookup, SelfDraft, Mtp };

// "none", "draft", "lookup", "self", "mtp" (also read: llama.cpp's --spec-type names
// draft-simple, ngram-simple, draft-mtp).
const char* drafter_kind_name(DrafterKind kind);
Result<DrafterKind> parse_drafter_kind(std::string_view name);

inline constexpr int32_t kMaxDraftTokens = 32;

struct SpeculativeConfig {
  DrafterKind kind = DrafterKind::None;
  // DraftModel: a GGUF with the target's vocabulary; Mtp: the head's own mtp- file (empty: the
  // target's file holds the head).
  std::string draft_model_path;
  int32_t num_draft_tokens = 4;  // K: tokens guessed per step, 1..kMaxDraftTokens
  // Adaptive K: after every step of a request, K moves toward the length that the measured
  // acceptance rate makes best (within 1..num_draft_tokens).
  bool is_adaptive = false;
  // llama.cpp's --spec-draft-p-min: a model drafter's draft ends before a guess it is less sure
  // of (its probability among its 10 most likely tokens); 0: off, llama.cpp's default.
  float draft_min_probability = 0.0f;
  // PromptLookup: the longest and shortest suffix n-gram searched for in the earlier text.
  int32_t lookup_max_ngram = 3;
  int32_t lookup_min_ngram = 1;
  // SelfDraft: the type the target's matrices are requantized to in memory on load.
  GgmlType self_draft_type = GgmlType::Q4_0;

  bool is_enabled() const { return kind != DrafterKind::None; }
};

// Checks the numbers (K range, n-gram range, a path for DraftModel, a type the reference
// quantizers produce for SelfDraft); the message names the bad field.
Status validate(const SpeculativeConfig& config);

}  // namespace iwb::spec
