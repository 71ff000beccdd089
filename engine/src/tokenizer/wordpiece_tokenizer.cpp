// WordPiece (tokenizer.ggml.model = "bert"), llama.cpp's algorithm: normalise (lowercase, strip
// accents via the first codepoint of the canonical decomposition), split on whitespace and
// around punctuation and CJK ideographs, then take the longest vocabulary match from the left
// of "▁word" repeatedly; a word that cannot be covered becomes [UNK]. Unicode properties come
// from ICU, so no character tables live here.
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/utf16.h>

namespace iwb::tokenizer {
namespace {

// The ideograph blocks BERT's BasicTokenizer isolates (HF's list, including its 0x2B920 start).
bool is_cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool is_general_category(uint32_t cp, uint32_t mask) {
  return (U_MASK(u_charType(static_cast<UChar32>(cp))) & mask) != 0;
}

constexpr uint32_t kPunctuationMask = U_GC_P_MASK;
constexpr uint32_t kSymbolMask = U_GC_S_MASK;
constexpr uint32_t kMarkMask = U_GC_M_MASK;
constexpr uint32_t kControlMask = U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK | U_GC_CS_MASK;

// First codepoint of the canonical decomposition ("é" -> "e"); the codepoint itself if none.
uint32_t decomposition_base(const UNormalizer2* nfd, uint32_t cp) {
  if (nfd == nullptr) return cp;
  UChar buffer[32];
  UErrorCode status = U_ZERO_ERROR;
  const int32_t length = unorm2_getDecomposition(nfd, static_cast<UChar32>(cp), buffer, 32, &status);
  if (U_FAILURE(status) || length <= 0) return cp;
  UChar32 first = 0;
  int32_t at = 0;
  U16_NEXT(buffer, at, length, first);
  return static_cast<uint32_t>(first);
}

// BERT's BasicTokenizer: normalised words; punctuation, ASCII symbols and CJK characters are
// words of their own.
std::vector<std::string> split_words(const Vocab& vocab, std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* nfd = vocab.strip_accents ? unorm2_getNFDInstance(&status) : nullptr;
  if (U_FAILURE(status)) nfd = nullptr;

  std::vector<std::string> words(1);
  size_t offset = 0;
  while (offset < text.size()) {
    uint32_t cp = utf8::decode(text, &offset);
    if (vocab.strip_accents) cp = decomposition_base(nfd, cp);
    if (u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == utf8::kReplacementChar || is_general_category(cp, kControlMask)) continue;
    if (vocab.strip_accents && is_general_category(cp, kMarkMask)) continue;
    const uint32_t out_cp = vocab.lowercase ? static_cast<uint32_t>(u_tolower(static_cast<UChar32>(cp))) : cp;
    const bool is_alone = is_general_category(cp, kPunctuationMask) ||
                          (cp < 0x7F && is_general_category(cp, kSymbolMask)) || is_cjk_ideograph(cp);
    if (is_alone) {
      if (!words.back().empty()) words.emplace_back();
      utf8::append(&words.back(), out_cp);
      words.emplace_back();
    } else {
      utf8::append(&words.back(), out_cp);
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void wordpiece_encode(const TokenizerImpl& tok, std::string_view text, std::vector<TokenId>* out) {
  const TokenId unk = tok.vocab.special.unk;
  for (const std::string& word : split_words(tok.vocab, text)) {
    // Word-initial pieces carry the ▁ the GGUF converter put in place of BERT's missing "##".
    const std::string marked = "\xE2\x96\x81" + word;
    const size_t n = marked.size();
    const size_t first_token = out->size();
    for (size_t i = 0; i < n; ++i) {
      bool is_matched = false;
      for (size_t j = std::min(n, i + tok.max_token_bytes + 1); j > i; --j) {
        const TokenId id = tok.find(std::string_view(marked).substr(i, j - i));
        if (id != kNoToken) {
          out->push_back(id);
          is_matched = true;
          i = j - 1;
          break;
        }
      }
      if (!is_matched) {  // one uncovered position discards the whole word
        out->resize(first_token);
        break;
      }
    }
    if (out->size() == first_token && unk != kNoToken) out->push_back(unk);
  }
}

}  // namespace iwb::tokenizer
