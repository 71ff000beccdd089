// Turns generated token ids, one at a time, into text that is always whole UTF-8: bytes of a
// character split across tokens (an emoji as four <0xNN> tokens) are held back until the
// character completes, so a chat view never shows half a character.
#pragma once

#include "iwb/engine/tokenizer/tokenizer.h"

#include <string>

namespace iwb::tokenizer {

class StreamingDetokenizer {
 public:
  // strip_leading_space: drop the SPM space-prefix space at the start of the stream (useful
  // when the stream is the whole text; a reply continuing a prompt wants its space kept).
  explicit StreamingDetokenizer(Tokenizer tokenizer, bool render_special = false,
                                bool strip_leading_space = false);

  // Adds one token; returns the text that became complete (possibly empty).
  std::string push(TokenId id);
  // Returns what is still held back. Bytes that never completed a character come out as
  // U+FFFD each, so the result is valid UTF-8. Resets the detokenizer for a new stream.
  std::string flush();
  void reset();

  size_t num_pending_bytes() const { return m_pending.size(); }

 private:
  Tokenizer m_tokenizer;
  bool m_render_special;
  bool m_strip_leading_space;
  bool m_is_first = true;
  std::string m_pending;  // bytes of an incomplete UTF-8 sequence
};

}  // namespace iwb::tokenizer
