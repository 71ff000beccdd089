// Token-level structured output (token_constraint.h).
#include "iwb/engine/sampling/token_constraint.h"

#include "iwb/engine/sampling/pattern_walk.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "sampling/text_end.h"
#include "sampling/utf8_lead.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iwb {

namespace {

// The characters of `bytes` when a JSON string takes them all as they are (`is_raw`: when raw
// text does: any byte but NUL), else -1. The UTF-8 rule is the matcher's own (utf8_lead.h), so a
// token counted here is one the matcher would take.
int32_t plain_chars(const std::string& bytes, bool is_raw = false) {
  int32_t chars = 0;
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    int follow = 0;
    uint8_t low = 0x80, high = 0xBF;
    if (b < 0x80) {
      if (is_raw ? b == 0 : (b < 0x20 || b == '"' || b == '\\')) return -1;
    } else {
      const detail::Utf8Lead lead = detail::utf8_lead(b);
      if (lead.follow < 0) return -1;
      follow = lead.follow;
      low = lead.low;
      high = lead.high;
    }
    if (i + 1 + static_cast<size_t>(follow) > bytes.size()) return -1;  // a character cut off
    for (int k = 1; k <= follow; ++k) {
      const auto c = static_cast<uint8_t>(bytes[i + static_cast<size_t>(k)]);
      if (c < (k == 1 ? low : 0x80) || c > (k == 1 ? high : 0xBF)) return -1;
    }
    i += 1 + static_cast<size_t>(follow);
    ++chars;
  }
  return chars;
}

// The automaton of a raw text's end: from state s (the end's first s bytes end the text so far),
// byte b leads to the longest start of the end that the text then ends with. Empty for an end
// too long for a byte of state.
std::vector<std::array<uint8_t, 256>> end_automaton(std::string_view end) {
  std::vector<std::array<uint8_t, 256>> steps;
  if (end.empty() || end.size() >= 255) return steps;
  steps.resize(end.size());
  for (size_t s = 0; s < end.size(); ++s) {
    for (int b = 0; b < 256; ++b) {
      steps[s][static_cast<size_t>(b)] =
          static_cast<uint8_t>(detail::end_matched_after(end, s, static_cast<uint8_t>(b)));
    }
  }
  return steps;
}

// Whether `bytes`, from state `state`, complete the end (the text would be over inside them).
bool completes(const std::vector<std::array<uint8_t, 256>>& steps, int64_t state, const std::string& bytes) {
  auto s = static_cast<size_t>(state);
  for (const char c : bytes) {
    s = steps[s][static_cast<uint8_t>(c)];
    if (s == steps.size()) return true;
  }
  return false;
}

}  // namespace

TokenBytes::TokenBytes(const tokenizer::Tokenizer& tok, bool render_special) {
  const size_t n = tok.num_tokens();
  m_bytes.reserve(n);
  m_ends.resize(n);
  m_controls.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<tokenizer::TokenId>(i);
    m_bytes.push_back(tok.token_to_piece(id, /*render_special=*/false));
    m_ends[i] = tok.is_end_of_generation(id);
    if (render_special && m_bytes.back().empty() && !m_ends[i]) {
      m_bytes.back() = tok.token_to_piece(id, /*render_special=*/true);
      m_controls[i] = !m_bytes.back().empty();
    }
  }
  classify();
}

TokenBytes::TokenBytes(std::vector<std::string> bytes, std::vector<bool> ends, std::vector<bool> controls)
    : m_bytes(std::move(bytes)), m_ends(std::move(ends)), m_controls(std::move(controls)) {
  m_ends.resize(m_bytes.size());
  m_controls.resize(m_bytes.size());
  classify();
}

void TokenBytes::classify() {
  m_plain_chars.resize(m_bytes.size());
  m_whole_text.resize(m_bytes.size());
  for (size_t i = 0; i < m_bytes.size(); ++i) {
    m_plain_chars[i] = m_controls[i] ? -1 : plain_chars(m_bytes[i]);
    m_whole_text[i] = !m_controls[i] && !m_bytes[i].empty() && plain_chars(m_bytes[i], /*is_raw=*/true) >= 0;
  }
}

bool is_token_allowed(const JsonMatcher& matcher, const TokenBytes& tokens, int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= tokens.size()) return false;
  if (tokens.ends_generation(token)) return matcher.is_complete();
  const std::string& bytes = tokens.bytes(token);
  return !bytes.empty() && matcher.can_feed(bytes, tokens.is_control(token));
}

size_t mask_disallowed_tokens(const JsonMatcher& matcher, const TokenBytes& tokens, std::span<float> logits) {
  const std::bitset<256> first = matcher.next_bytes();
  const bool is_complete = matcher.is_complete();
  const int64_t room = matcher.string_room();  // -1: not inside a string's text
  // Inside a tagged parameter's raw text: a whole text that does not complete the text's end is
  // taken, read through the end's automaton (built once here) from where the text stands.
  const std::optional<JsonMatcher::RawText> raw = matcher.raw_text();
  const std::vector<std::array<uint8_t, 256>> raw_steps = raw ? end_automaton(raw->end) : decltype(raw_steps){};
  // Inside a pattern's text: every token walked from here through the pattern's DFA, built as
  // the tokens need it.
  std::optional<PatternWalk> walk;
  if (std::optional<JsonMatcher::PatternPlace> place = matcher.pattern_place()) walk.emplace(std::move(*place));
  // Outside strings few bytes may come first, and most tokens that pass the first byte fail at
  // the second (" the" after a space that allows no more whitespace): the bytes that may follow
  // each first byte, computed once, rule them out without feeding the whole token.
  std::vector<std::bitset<256>> second;
  if (room < 0 && first.count() <= 32) {
    second.resize(256);
    for (size_t b = 0; b < 256; ++b) {
      if (!first.test(b)) continue;
      JsonMatcher after = matcher;
      const char c = static_cast<char>(b);
      if (after.feed(std::string_view(&c, 1))) second[b] = after.next_bytes();
    }
  }
  // Control tokens may only write raw markers. Whether a marker can take a first byte at all is
  // asked once per byte, so that where none can (inside a string) a vocabulary's many control
  // tokens (Mistral's 1,000) are ruled out without a feed each.
  std::array<int8_t, 256> raw_takes_first;
  raw_takes_first.fill(-1);
  size_t num_allowed = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    bool allowed = false;
    if (i < tokens.size()) {
      const auto id = static_cast<int32_t>(i);
      const std::string& bytes = tokens.bytes(id);
      if (tokens.ends_generation(id)) {
        allowed = is_complete;
      } else if (tokens.is_control(id)) {
        const auto b = static_cast<uint8_t>(bytes[0]);
        if (raw_takes_first[b] < 0) raw_takes_first[b] = first.test(b) && matcher.can_feed(bytes.substr(0, 1), true);
        allowed = raw_takes_first[b] == 1 && matcher.can_feed(bytes, /*is_raw_only=*/true);
      } else if (!bytes.empty() && first.test(static_cast<uint8_t>(bytes[0]))) {
        const int32_t chars = tokens.plain_string_chars(id);
        if (!raw_steps.empty() && tokens.is_whole_text(id) && !completes(raw_steps, raw->matched, bytes)) {
          allowed = true;
        } else if (room >= 0 && chars >= 0) {
          allowed = chars <= room;  // plain text inside a string: only its length matters
        } else if (bytes.size() == 1) {
          allowed = true;
        } else if (const std::optional<bool> fits = walk ? walk->takes(bytes) : std::nullopt) {
          allowed = *fits;  // a pattern's text: the pattern's DFA alone, no copy of the matcher
        } else if (!second.empty() && !second[static_cast<uint8_t>(bytes[0])].test(static_cast<uint8_t>(bytes[1]))) {
          allowed = false;
        } else {
          allowed = (bytes.size() == 2 && !second.empty()) || matcher.can_feed(bytes);
        }
      }
    }
    if (allowed) {
      ++num_allowed;
    } else {
      logits[i] = -INFINITY;
    }
  }
  return num_allowed;
}

}  // namespace iwb
