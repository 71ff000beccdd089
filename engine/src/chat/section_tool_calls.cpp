// DeepSeek V3.1's and Kimi K2's tool calls (ToolCallFormat::DeepSeekV31, KimiK2): a section of
// special tokens around each call's name and JSON arguments, read whole or as it streams, and
// the grammar that holds a section to the tools' schemas.
#include "chat/tool_call_text.h"
#include "iwb/engine/chat/tool_calls.h"

#include <algorithm>

namespace iwb::detail {
namespace {

const CallSectionMarkers& markers_of(ToolCallFormat format) {
  return format == ToolCallFormat::KimiK2 ? kKimiMarkers : kDeepSeekMarkers;
}

constexpr std::string_view kKimiNamePrefix = "functions.";

// A call's head (the text between its marker and the arguments marker) as its name and id:
// DeepSeek's is the name; Kimi's functions.NAME:INDEX, the whole its id. Nullopt when it is no
// name (empty, or holding white space or a tag: prose, not a call).
std::optional<ParsedToolCall> read_head(std::string_view head, ToolCallFormat format) {
  head = trim(head);
  ParsedToolCall call;
  std::string_view name = head;
  if (format == ToolCallFormat::KimiK2) {
    if (name.starts_with(kKimiNamePrefix)) name.remove_prefix(kKimiNamePrefix.size());
    const size_t colon = name.rfind(':');
    const std::string_view index = colon == std::string_view::npos ? std::string_view() : name.substr(colon + 1);
    if (!index.empty() && std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      name = name.substr(0, colon);
      if (head.starts_with(kKimiNamePrefix)) call.id = std::string(head);
    }
  }
  if (name.empty() || name.find_first_of(" \t\r\n<>") != std::string_view::npos) return std::nullopt;
  call.name = std::string(name);
  return call;
}

// Where the first of the two openings is, and which (npos when neither).
size_t find_opening(std::string_view reply, size_t pos, const CallSectionMarkers& m) {
  return std::min(reply.find(m.section_begin, pos), reply.find(m.call_begin, pos));
}

// Whether `rest` is, or may still become (a marker cut by the stream), one of the markers.
bool is_marker_start(std::string_view rest, const CallSectionMarkers& m) {
  for (const std::string_view marker : {m.section_begin, m.call_begin, m.call_end, m.section_end}) {
    if (starts_with_part_of(rest, marker)) return true;
  }
  return false;
}

}  // namespace

ToolReply split_section_calls(std::string_view reply, bool is_streaming, ToolCallFormat format) {
  const CallSectionMarkers& m = markers_of(format);
  ToolReply out;
  const size_t opening = find_opening(reply, 0, m);
  if (opening == std::string_view::npos) {
    std::string_view text = reply;
    if (is_streaming)
      text.remove_suffix(std::max(partial_marker(text, m.section_begin), partial_marker(text, m.call_begin)));
    out.content = std::string(text);
    trim_trailing_space(&out, is_streaming);
    return out;
  }
  out.content = std::string(reply.substr(0, opening));
  // Where reading stopped on text that is no call (npos: it did not): a finished reply keeps it
  // as text from there, a streamed one holds it back (it may be told apart only at the end).
  size_t unread = std::string_view::npos;
  size_t pos = opening;
  while (true) {
    const size_t at = std::min(reply.find_first_not_of(kWhitespace, pos), reply.size());
    const std::string_view rest = reply.substr(at);
    if (rest.starts_with(m.section_begin)) {  // (a second section too)
      pos = at + m.section_begin.size();
      continue;
    }
    if (rest.starts_with(m.call_end) || rest.starts_with(m.section_end)) {  // ends are optional
      pos = at + (rest.starts_with(m.call_end) ? m.call_end : m.section_end).size();
      continue;
    }
    if (!rest.starts_with(m.call_begin)) {
      // The reply's end, a marker still being written, or text after the calls (or instead).
      if (!rest.empty() && !(is_streaming && is_marker_start(rest, m))) unread = out.calls.empty() ? opening : at;
      break;
    }
    const size_t head_at = at + m.call_begin.size();
    const size_t arguments_at = reply.find(m.arguments_begin, head_at);
    std::optional<ParsedToolCall> call = arguments_at == std::string_view::npos
                                             ? std::nullopt
                                             : read_head(reply.substr(head_at, arguments_at - head_at), format);
    const size_t object = arguments_at == std::string_view::npos
                              ? arguments_at
                              : reply.find_first_not_of(kWhitespace, arguments_at + m.arguments_begin.size());
    if (!call || object == std::string_view::npos || reply[object] != '{') {
      // Its head or arguments still coming, or no call: held back while streaming (it may be
      // told apart only at the end); a finished reply keeps it as text.
      if (!is_streaming) unread = out.calls.empty() ? opening : at;
      break;
    }
    const size_t end = read_compact_json(reply, object, &call->arguments);
    out.calls.push_back(std::move(*call));
    if (end == std::string_view::npos) break;  // still growing, or cut off: the call so far
    pos = end;
  }
  if (unread != std::string_view::npos && !is_streaming) {
    // Text after the calls joins the text before them; a section that could not be read stays
    // whole, from its first marker on: nothing is lost.
    const std::string_view text = reply.substr(unread);
    out.content += out.calls.empty() ? text : trim(text);
  }
  trim_trailing_space(&out, is_streaming);
  return out;
}

std::vector<JsonGrammar::Piece> section_call_pieces(ToolCallFormat format, const std::string& name,
                                                    std::shared_ptr<const JsonGrammar> arguments) {
  const CallSectionMarkers& m = markers_of(format);
  if (format == ToolCallFormat::KimiK2) {
    // functions.NAME:INDEX, the index as the model counts (its template counts the calls).
    static const std::shared_ptr<const JsonGrammar> index = *JsonGrammar::from_regex("[0-9]{1,4}");
    return {{std::string(m.call_begin) + std::string(kKimiNamePrefix) + name + ":", nullptr},
            {"", index},
            {std::string(m.arguments_begin), nullptr},
            {"", std::move(arguments)},
            {std::string(m.call_end), nullptr}};
  }
  return {{std::string(m.call_begin) + name + std::string(m.arguments_begin), nullptr},
          {"", std::move(arguments)},
          {std::string(m.call_end), nullptr}};
}

std::shared_ptr<const JsonGrammar> section_calls_grammar(ToolCallFormat format,
                                                         const std::vector<std::vector<JsonGrammar::Piece>>& calls,
                                                         bool allows_several) {
  // The grammars compose by value (JsonGrammar::sequences copies a value's nodes), so "a call,
  // then the end or another" nests one level per call: the last level only ends. Each level
  // copies one call and the level below once: the size grows linearly with kMaxSectionCalls.
  const std::shared_ptr<const JsonGrammar> call = JsonGrammar::sequences(calls, "a call of the tools");
  const std::string end(markers_of(format).section_end);
  std::shared_ptr<const JsonGrammar> section = JsonGrammar::sequences({{{"", call}, {end, nullptr}}}, "");
  for (int level = 1; allows_several && level < kMaxSectionCalls; ++level) {
    const std::shared_ptr<const JsonGrammar> rest = JsonGrammar::sequences({{{end, nullptr}}, {{"", section}}}, "");
    section = JsonGrammar::sequences({{{"", call}, {"", rest}}}, "");
  }
  return JsonGrammar::framed(*section, "", "", "a call of the tools");
}

}  // namespace iwb::detail
