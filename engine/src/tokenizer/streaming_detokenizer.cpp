// Streaming detokenizer: appends each token's bytes to a pending buffer and releases the
// longest prefix that ends on a character boundary.
#include "iwb/engine/tokenizer/streaming_detokenizer.h"

#include "tokenizer/utf8.h"

namespace iwb::tokenizer {

StreamingDetokenizer::StreamingDetokenizer(Tokenizer tokenizer, bool render_special, bool strip_leading_space)
    : m_tokenizer(std::move(tokenizer)),
      m_render_special(render_special),
      m_strip_leading_space(strip_leading_space && m_tokenizer.vocab().add_space_prefix) {}

std::string StreamingDetokenizer::push(TokenId id) {
  std::string piece = m_tokenizer.token_to_piece(id, m_render_special);
  if (piece.empty()) return {};
  if (m_is_first && m_strip_leading_space && piece[0] == ' ') piece.erase(0, 1);
  m_is_first = false;
  m_pending += piece;
  const size_t complete = utf8::complete_prefix_length(m_pending);
  // The released part can still hold a sequence that was cut off by a later lead byte (a
  // model emitting half a character, then something else): it becomes U+FFFD, never raw bytes.
  std::string ready = utf8::sanitize(std::string_view(m_pending).substr(0, complete));
  m_pending.erase(0, complete);
  return ready;
}

std::string StreamingDetokenizer::flush() {
  // Whatever is left can never complete: make it valid UTF-8 (each stray byte -> U+FFFD).
  std::string rest = utf8::sanitize(m_pending);
  reset();
  return rest;
}

void StreamingDetokenizer::reset() {
  m_pending.clear();
  m_is_first = true;
}

}  // namespace iwb::tokenizer
