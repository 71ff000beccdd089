// Special-token partitioning, as llama.cpp's tokenizer_st_partition: each special token, longest
// first, splits every text fragment that contains it; the pieces around it stay text.
#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <unordered_set>

namespace iwb::tokenizer {
namespace {

// ASCII whitespace as C's isspace in the "C" locale; the strip rules only trim these.
bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

void split_fragment(std::string_view text, const Fragment& fragment, const SpecialToken& special,
                    std::vector<Fragment>* out) {
  size_t base = fragment.offset;
  size_t length = fragment.length;
  while (length > 0) {
    const size_t found = text.substr(base, length).find(special.text);
    if (found == std::string_view::npos) break;
    size_t left_length = found;
    if (special.is_lstrip) {
      while (left_length > 0 && is_ascii_space(text[base + left_length - 1])) --left_length;
    }
    if (left_length > 0) out->push_back({kNoToken, base, left_length});
    out->push_back({special.id, base + found, special.text.size()});
    size_t right = base + found + special.text.size();
    size_t right_length = base + length - right;
    if (special.is_rstrip) {
      while (right_length > 0 && is_ascii_space(text[right])) {
        ++right;
        --right_length;
      }
    }
    base = right;
    length = right_length;
  }
  if (length > 0) out->push_back({kNoToken, base, length});
}

}  // namespace

std::vector<SpecialToken> collect_special_tokens(const Vocab& vocab) {
  const std::unordered_set<TokenId> lstrip(vocab.lstrip_tokens.begin(), vocab.lstrip_tokens.end());
  const std::unordered_set<TokenId> rstrip(vocab.rstrip_tokens.begin(), vocab.rstrip_tokens.end());
  std::vector<SpecialToken> specials;
  for (size_t i = 0; i < vocab.types.size(); ++i) {
    const TokenType type = vocab.types[i];
    const bool is_parse_only = type == TokenType::Control || type == TokenType::Unknown;
    if (!is_parse_only && type != TokenType::UserDefined) continue;
    if (vocab.tokens[i].empty()) continue;
    const auto id = static_cast<TokenId>(i);
    specials.push_back({id, vocab.tokens[i], is_parse_only, lstrip.count(id) != 0, rstrip.count(id) != 0});
  }
  std::stable_sort(specials.begin(), specials.end(), [](const SpecialToken& a, const SpecialToken& b) {
    return a.text.size() > b.text.size();
  });
  return specials;
}

std::vector<Fragment> partition_special(std::string_view text, const std::vector<SpecialToken>& specials,
                                        bool parse_special) {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (const SpecialToken& special : specials) {
    if (special.is_parse_only && !parse_special) continue;
    // Most special tokens do not occur at all: check the whole text once before rebuilding.
    if (text.find(special.text) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& fragment : fragments) {
      if (fragment.is_text()) {
        split_fragment(text, fragment, special, &next);
      } else {
        next.push_back(fragment);
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace iwb::tokenizer
