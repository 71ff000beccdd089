// Qwen3-Coder's tool calls (ToolCallFormat::QwenXml): <tool_call> blocks of tags whose argument
// values are text, turned into OpenAI's calls with JSON arguments.
#include "chat/tool_call_text.h"
#include "iwb/engine/chat/tool_calls.h"
#include "tokenizer/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace iwb {
namespace {

using ordered_json = nlohmann::ordered_json;
using detail::argument_json;
using detail::CallBlock;
using detail::kWhitespace;
using detail::starts_with_part_of;

// What ends a parameter's value: the template writes VALUE + "\n</parameter>\n".
constexpr std::string_view kXmlValueEnd = "\n</parameter>\n";
constexpr std::string_view kXmlValueEndCut = kXmlValueEnd.substr(0, kXmlValueEnd.size() - 1);

ArgumentText argument_text(const JsonGrammar& g, int32_t node) {
  const JsonGrammar::Node& n = g.node(node);
  if (!n.literals.empty()) {
    size_t strings = 0;
    for (const std::string& literal : n.literals) strings += literal[0] == '"' ? 1 : 0;
    if (strings == n.literals.size()) return ArgumentText::String;
    return strings == 0 ? ArgumentText::Json : ArgumentText::JsonOrString;
  }
  const uint8_t types = g.types_of(node);
  if ((types & JsonGrammar::kString) == 0) return ArgumentText::Json;
  return types == JsonGrammar::kString ? ArgumentText::String : ArgumentText::JsonOrString;
}

// One <tool_call> block's call, read from `at` (after the opening tag) as far as it is written.
// Returns where the block ends (npos while it does not), or nullopt in `call` when the block is
// no call (or may yet be one: `is_undecided`).
CallBlock read_xml_call(std::string_view reply, size_t at, bool is_streaming, const ToolArgumentTypes* types) {
  CallBlock out;
  size_t i = reply.find_first_not_of(kWhitespace, at);
  if (i == std::string_view::npos || !reply.substr(i).starts_with(kXmlFunctionOpen)) {
    out.is_undecided = i == std::string_view::npos || starts_with_part_of(reply.substr(i), kXmlFunctionOpen);
    return out;
  }
  i += kXmlFunctionOpen.size();
  const size_t name_end = reply.find('>', i);
  if (name_end == std::string_view::npos || name_end == i) {
    out.is_undecided = name_end == std::string_view::npos;
    return out;
  }
  ParsedToolCall call;
  call.name = std::string(reply.substr(i, name_end - i));
  call.arguments = "{";
  i = name_end + 1;
  bool is_first = true;
  const auto add_key = [&](std::string_view key) {
    call.arguments += (is_first ? "" : ",") + ordered_json(std::string(key)).dump() + ":";
    is_first = false;
  };
  while (true) {
    const size_t next = reply.find_first_not_of(kWhitespace, i);
    const std::string_view rest = reply.substr(next == std::string_view::npos ? reply.size() : next);
    if (rest.starts_with(kXmlFunctionClose)) {
      call.arguments += "}";
      const size_t after = next + kXmlFunctionClose.size();
      const size_t close = reply.find_first_not_of(kWhitespace, after);
      const std::string_view tail = reply.substr(close == std::string_view::npos ? reply.size() : close);
      if (tail.starts_with(kToolCallClose)) {
        out.end = close + kToolCallClose.size();
      } else if (!is_streaming || !starts_with_part_of(tail, kToolCallClose)) {
        out.end = after;  // (while streaming, a block's end still being written waits)
      }
      break;
    }
    if (!rest.starts_with(kXmlParameterOpen)) {
      // Unfinished: the call so far. In a finished reply, not the format: the call ends here.
      if (!is_streaming && !rest.empty() && !starts_with_part_of(rest, kXmlFunctionClose)) {
        call.arguments += "}";
        const size_t close = reply.find(kToolCallClose, next);
        if (close != std::string_view::npos) out.end = close + kToolCallClose.size();
      }
      break;
    }
    const size_t key_at = next + kXmlParameterOpen.size();
    const size_t key_end = reply.find('>', key_at);
    if (key_end == std::string_view::npos) break;
    const std::string_view key = reply.substr(key_at, key_end - key_at);
    const ArgumentText kind = types != nullptr ? types->of(call.name, key) : ArgumentText::String;
    size_t value_at = key_end + 1;
    if (value_at < reply.size() && reply[value_at] == '\n') ++value_at;
    // The value ends at the first "\n</parameter>\n", as the grammar holds it (so a string's text
    // may hold any other tag); a finished reply may end right after "\n</parameter>".
    size_t value_end = reply.find(kXmlValueEnd, value_at);
    if (value_end == std::string_view::npos && !is_streaming && reply.ends_with(kXmlValueEndCut) &&
        reply.size() - kXmlValueEndCut.size() >= value_at) {
      value_end = reply.size() - kXmlValueEndCut.size();
    }
    // (The end's last newline is white space the next step skips.)
    const size_t resume = value_end == std::string_view::npos ? value_end : value_end + kXmlValueEndCut.size();
    if (value_end == std::string_view::npos) {
      // Unfinished: a string's text so far (no closing quote: the reply may end here, cut off),
      // without what may become its end; other values wait until whole.
      if (kind != ArgumentText::String) break;
      std::string_view text = reply.substr(value_at);
      if (is_streaming) {
        text.remove_suffix(detail::partial_marker(text, kXmlValueEnd));
        text = text.substr(0, tokenizer::utf8::complete_prefix_length(text));  // a character still coming
      }
      add_key(key);
      const std::string quoted = argument_json(text, ArgumentText::String);
      call.arguments += std::string_view(quoted).substr(0, quoted.size() - 1);
      break;
    }
    const std::string_view text = reply.substr(value_at, value_end - value_at);
    add_key(key);
    call.arguments += argument_json(text, kind);
    i = resume;
  }
  out.call = std::move(call);
  return out;
}

}  // namespace

ArgumentText ToolArgumentTypes::of(std::string_view tool, std::string_view parameter) const {
  const auto t = by_tool.find(tool);
  if (t == by_tool.end()) return ArgumentText::String;
  const auto p = t->second.find(parameter);
  return p == t->second.end() ? ArgumentText::String : p->second;
}

ToolArgumentTypes tool_argument_types(const std::vector<ToolDefinition>& tools) {
  ToolArgumentTypes out;
  for (const ToolDefinition& tool : tools) {
    auto& parameters = out.by_tool[tool.name];  // every tool's name is known
    if (tool.parameters_json.empty()) continue;
    Result<std::shared_ptr<const JsonGrammar>> grammar = JsonGrammar::from_schema(tool.parameters_json);
    if (!grammar) continue;  // a schema not compiled here: every value a string
    const JsonGrammar& g = **grammar;
    for (const JsonGrammar::Property& property : g.node(g.root()).properties) {
      const std::string name = ordered_json::parse(property.key_json).get<std::string>();
      parameters[name] = argument_text(g, property.node);
    }
  }
  return out;
}

namespace detail {

std::string argument_json(std::string_view text, ArgumentText kind) {
  if (kind != ArgumentText::String) {
    const std::string_view trimmed = detail::trim(text);
    const ordered_json value = ordered_json::parse(trimmed, nullptr, /*allow_exceptions=*/false);
    if (!value.is_discarded() && !(kind == ArgumentText::JsonOrString && value.is_string())) {
      return value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    }
    // Python's words, as a model that saw the template's own rendering of past calls may write.
    if (kind == ArgumentText::Json && (trimmed == "True" || trimmed == "False" || trimmed == "None")) {
      return trimmed == "True" ? "true" : trimmed == "False" ? "false" : "null";
    }
  }
  return ordered_json(std::string(text)).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

bool starts_with_part_of(std::string_view text, std::string_view marker) {
  return text.size() < marker.size() ? marker.starts_with(text) : text.starts_with(marker);
}

size_t take_call_block(std::string_view reply, size_t open, size_t body, CallBlock read, bool is_streaming,
                       ToolReply* out) {
  if (read.call) {
    out->calls.push_back(std::move(*read.call));
    return read.end;  // npos: still being written, or cut off
  }
  if (is_streaming && read.is_undecided) return std::string_view::npos;  // held back until it tells
  const size_t close = reply.find(kToolCallClose, body);
  if (close == std::string_view::npos) {
    if (!is_streaming) out->content += reply.substr(open);  // cut off: the text as written
    return std::string_view::npos;
  }
  out->content += reply.substr(open, close + kToolCallClose.size() - open);
  return close + kToolCallClose.size();
}

namespace {

// Where the next call begins at or after `pos`: its <tool_call>, or (`is_bare`) its
// <function=NAME> for a tool the request has — Qwen3-Coder now and then leaves the block's tag
// out, as llama.cpp notes; npos with neither.
size_t next_call(std::string_view reply, size_t pos, const ToolArgumentTypes* types, bool* is_bare) {
  size_t open = reply.find(kToolCallOpen, pos);
  *is_bare = false;
  if (types == nullptr) return open;
  for (size_t at = reply.find(kXmlFunctionOpen, pos); at < open; at = reply.find(kXmlFunctionOpen, at + 1)) {
    const size_t name = at + kXmlFunctionOpen.size();
    const size_t end = reply.find('>', name);
    if (end != std::string_view::npos && types->by_tool.contains(reply.substr(name, end - name))) {
      *is_bare = true;
      return at;
    }
  }
  return open;
}

// While streaming: how many bytes at the end of the text may begin a call (part of <tool_call>,
// or of <function=NAME> for a tool the request has), held back until they tell.
size_t held_start(std::string_view text, const ToolArgumentTypes* types) {
  size_t held = partial_marker(text, kToolCallOpen);
  if (types == nullptr) return held;
  const size_t lt = text.rfind('<');
  if (lt == std::string_view::npos) return held;
  const std::string_view tail = text.substr(lt);
  for (const auto& [name, parameters] : types->by_tool) {
    const std::string start = std::string(kXmlFunctionOpen) + name + ">";
    if (tail.size() < start.size() && std::string_view(start).starts_with(tail)) return std::max(held, tail.size());
  }
  return held;
}

}  // namespace

ToolReply split_xml_calls(std::string_view reply, bool is_streaming, const ToolArgumentTypes* types) {
  ToolReply out;
  size_t pos = 0;
  while (pos <= reply.size()) {
    bool is_bare = false;
    const size_t open = next_call(reply, pos, types, &is_bare);
    std::string_view text = reply.substr(pos, open == std::string_view::npos ? open : open - pos);
    if (open == std::string_view::npos && is_streaming) text.remove_suffix(held_start(text, types));
    out.content += text;
    if (open == std::string_view::npos) break;
    const size_t body = is_bare ? open : open + kToolCallOpen.size();
    pos = take_call_block(reply, open, body, read_xml_call(reply, body, is_streaming, types), is_streaming, &out);
    if (pos == std::string_view::npos) break;
  }
  trim_trailing_space(&out, is_streaming);
  return out;
}

}  // namespace detail
}  // namespace iwb
