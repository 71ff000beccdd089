// Prompt lookup (n-gram) drafting: when the last n tokens of a sequence occurred earlier in it
// (its prompt or its own output), the tokens that followed that occurrence are a good guess,
// and cost nothing to make. Code edits and summaries repeat long spans of the prompt.
#include "iwb/engine/spec/drafter.h"

#include <algorithm>

namespace iwb::spec {
namespace {

class PromptLookupDrafter final : public Drafter {
 public:
  PromptLookupDrafter(int32_t max_ngram, int32_t min_ngram)
      : m_max_ngram(std::max(1, max_ngram)), m_min_ngram(std::clamp(min_ngram, 1, std::max(1, max_ngram))) {}

  std::string name() const override { return "prompt lookup"; }

  Result<std::vector<Draft>> draft(std::span<const DraftRequest> requests) override {
    std::vector<Draft> drafts(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) drafts[i].tokens = lookup(requests[i].tokens, requests[i].num_draft_tokens);
    return drafts;
  }

 private:
  // The latest earlier occurrence of the longest matching suffix wins: recent text is the
  // likeliest to be repeated next.
  std::vector<int32_t> lookup(std::span<const int32_t> tokens, int32_t k) const {
    const auto size = static_cast<int64_t>(tokens.size());
    if (k <= 0) return {};
    for (int64_t n = std::min<int64_t>(m_max_ngram, size - 1); n >= m_min_ngram; --n) {
      const auto suffix = tokens.subspan(static_cast<size_t>(size - n));
      // Start positions of earlier occurrences, the latest first; the occurrence must leave at
      // least one following token before the suffix itself.
      for (int64_t start = size - n - 1; start >= 0; --start) {
        if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
        const int64_t from = start + n;
        const int64_t count = std::min<int64_t>(k, size - from);
        if (count <= 0) continue;
        return {tokens.begin() + from, tokens.begin() + from + count};
      }
    }
    return {};
  }

  int32_t m_max_ngram;
  int32_t m_min_ngram;
};

}  // namespace

std::unique_ptr<Drafter> make_prompt_lookup_drafter(int32_t max_ngram, int32_t min_ngram) {
  return std::make_unique<PromptLookupDrafter>(max_ngram, min_ngram);
}

}  // namespace iwb::spec
