// split_reply: harmony channels, a leading <think> block or Gemma 4's thought channels, tolerant
// of a reply cut anywhere.
#include "iwb/engine/chat/reply_parts.h"

#include <array>

namespace iwb {
namespace {

constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";  // the last three end a message
constexpr std::array<std::string_view, 7> kHarmonyMarkers = {kChannel, kMessage, kStart, kConstrain,
                                                             kEnd,     kReturn,  kCall};
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
// Gemma 4's channels: <|channel>thought\n...<channel|> (user-defined tokens: shown in the text).
constexpr std::string_view kGemmaChannelOpen = "<|channel>";
constexpr std::string_view kGemmaChannelClose = "<channel|>";
constexpr std::string_view kGemmaThought = "thought";
constexpr std::string_view kSpace = " \t\r\n";

// Length of the longest suffix of `text` that is a proper prefix of `marker`: text a stream
// may complete into the marker, which must not flash on screen as ordinary text.
size_t partial_marker_length(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

// The first harmony marker at or after `pos` (npos when none), one pass over the text: every
// marker starts with "<|".
size_t next_marker(std::string_view raw, size_t pos, std::string_view* marker) {
  for (size_t at = raw.find("<|", pos); at != std::string_view::npos; at = raw.find("<|", at + 1)) {
    for (std::string_view m : kHarmonyMarkers) {
      if (raw.substr(at, m.size()) == m) {
        *marker = m;
        return at;
      }
    }
  }
  return std::string_view::npos;
}

void append_part(std::string* part, std::string_view text, bool is_new_message) {
  if (text.empty()) return;
  if (is_new_message && !part->empty()) *part += "\n\n";
  *part += text;
}

ReplyParts split_harmony(std::string_view raw, bool is_streaming) {
  ReplyParts parts;
  enum class State { Message, Header, Outside } state = State::Message;  // a reply opens inside a message
  std::string channel;  // the header's channel name ("analysis", "final", "commentary")
  bool is_new_message = true;
  size_t pos = 0;
  while (pos < raw.size()) {
    std::string_view marker;
    const size_t next = next_marker(raw, pos, &marker);

    std::string_view text = raw.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    if (next == std::string_view::npos && is_streaming) {
      size_t held = 0;
      for (std::string_view m : kHarmonyMarkers) held = std::max(held, partial_marker_length(text, m));
      text.remove_suffix(held);
    }
    if (state == State::Message) {
      append_part(channel == "analysis" ? &parts.reasoning : &parts.content, text, is_new_message);
      if (!text.empty()) is_new_message = false;
    } else if (state == State::Header && channel.empty()) {
      // The channel name is the header's first word; what follows it ("to=functions.f", a
      // content type) is addressing, not text.
      channel = std::string(text.substr(0, text.find_first_of(" \t\n")));
    }
    if (next == std::string_view::npos) break;
    pos = next + marker.size();
    if (marker == kChannel) {
      state = State::Header;
      channel.clear();
    } else if (marker == kMessage) {
      state = State::Message;
      is_new_message = true;
    } else if (marker == kStart) {
      state = State::Outside;  // the role name ("assistant") follows, then a channel
    } else if (marker == kConstrain) {
      if (state != State::Message) state = State::Header;
    } else {  // a message end
      state = State::Outside;
    }
  }
  parts.is_reasoning = state == State::Message && channel == "analysis";
  return parts;
}

ReplyParts split_think(std::string_view raw, size_t open_at, bool is_streaming) {
  ReplyParts parts;
  std::string_view rest = raw.substr(open_at + kThinkOpen.size());
  const size_t close = rest.find(kThinkClose);
  if (close == std::string_view::npos) {
    if (is_streaming) rest.remove_suffix(partial_marker_length(rest, kThinkClose));
    parts.reasoning = std::string(rest);
    parts.is_reasoning = true;
  } else {
    parts.reasoning = std::string(rest.substr(0, close));
    std::string_view answer = rest.substr(close + kThinkClose.size());
    answer.remove_prefix(std::min(answer.find_first_not_of(" \t\r\n"), answer.size()));
    parts.content = std::string(answer);
  }
  // The model's own line breaks around its thoughts are not part of them. While streaming, the
  // trailing ones of an open block wait for what follows: they may be those before </think>
  // (Qwen3.5 writes "\n</think>"), which the finished reply drops, so the reasoning only grows.
  const size_t first = parts.reasoning.find_first_not_of(" \t\r\n");
  parts.reasoning.erase(0, std::min(first, parts.reasoning.size()));
  if (!parts.is_reasoning || is_streaming) parts.reasoning.erase(parts.reasoning.find_last_not_of(" \t\r\n") + 1);
  return parts;
}

// Gemma 4: every <|channel>thought ...<channel|> block is reasoning (a reply opens with one when
// thinking is on; Gemma 4 may also end its answer with an empty one, as llama.cpp notes), the
// text around them the answer; a stray <channel|> is dropped. While streaming the parts only
// grow: trailing white space of an open thought waits for what follows it.
ReplyParts split_gemma4(std::string_view raw, bool is_streaming) {
  ReplyParts parts;
  size_t pos = 0;
  while (true) {
    const size_t open = raw.find(kGemmaChannelOpen, pos);
    std::string_view text = raw.substr(pos, open == std::string_view::npos ? open : open - pos);
    if (open == std::string_view::npos && is_streaming) {
      text.remove_suffix(
          std::max(partial_marker_length(text, kGemmaChannelOpen), partial_marker_length(text, kGemmaChannelClose)));
    }
    for (size_t stray = text.find(kGemmaChannelClose); !text.empty(); stray = text.find(kGemmaChannelClose)) {
      std::string_view piece = text.substr(0, stray);
      if (parts.content.empty()) piece.remove_prefix(std::min(piece.find_first_not_of(kSpace), piece.size()));
      parts.content += piece;
      if (stray == std::string_view::npos) break;
      text.remove_prefix(stray + kGemmaChannelClose.size());
    }
    if (open == std::string_view::npos) break;
    const size_t body = open + kGemmaChannelOpen.size();
    const size_t close = raw.find(kGemmaChannelClose, body);
    std::string_view thought = raw.substr(body, close == std::string_view::npos ? close : close - body);
    if (thought.starts_with(kGemmaThought)) {
      thought.remove_prefix(kGemmaThought.size());
    } else if (close == std::string_view::npos && is_streaming && kGemmaThought.starts_with(thought)) {
      thought = {};  // the channel's name still being written
    }
    thought.remove_prefix(std::min(thought.find_first_not_of(kSpace), thought.size()));
    if (close == std::string_view::npos && is_streaming) {
      thought.remove_suffix(partial_marker_length(thought, kGemmaChannelClose));
    }
    if (close != std::string_view::npos || is_streaming) {
      thought = thought.substr(0, thought.find_last_not_of(kSpace) + 1);  // npos + 1: empty
    }
    if (!thought.empty()) parts.reasoning += std::string(parts.reasoning.empty() ? "" : "\n\n") += thought;
    if (close == std::string_view::npos) {
      parts.is_reasoning = true;
      break;
    }
    pos = close + kGemmaChannelClose.size();
  }
  return parts;
}

}  // namespace

ReplyParts split_reply(std::string_view raw, bool is_streaming) {
  // Only a reply that opens with a marker is split: an answer that merely mentions
  // "<|message|>" or "<think>" further on is text.
  const size_t first = raw.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && raw.substr(first, kChannel.size()) == kChannel) {
    return split_harmony(raw.substr(first), is_streaming);
  }
  if (first != std::string_view::npos && raw.substr(first, kThinkOpen.size()) == kThinkOpen) {
    return split_think(raw, first, is_streaming);
  }
  // Gemma 4's thought channel: its markers are tokens of their own, so they are read anywhere.
  if (raw.find(kGemmaChannelOpen) != std::string_view::npos || raw.find(kGemmaChannelClose) != std::string_view::npos) {
    return split_gemma4(raw, is_streaming);
  }
  ReplyParts parts;
  std::string_view text = raw;
  // A stream that has written only "<", "<th", "<|chan"...: it may be opening a thought or a
  // harmony header.
  if (is_streaming && first != std::string_view::npos) {
    const std::string_view head = raw.substr(first);
    for (std::string_view opener : {kThinkOpen, kChannel, kGemmaChannelOpen}) {
      if (head.size() < opener.size() && opener.substr(0, head.size()) == head) text = raw.substr(0, first);
    }
  }
  parts.content = std::string(text);
  return parts;
}

}  // namespace iwb
