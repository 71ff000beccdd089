// GLM-4.5/4.6/4.7's tool calls (ToolCallFormat::GlmXml, Glm47Xml): <tool_call> blocks of the
// function's name and <arg_key>/<arg_value> tags whose values are text, turned into OpenAI's
// calls with JSON arguments, typed by the tools' schemas as Qwen3-Coder's are.
#include "chat/tool_call_text.h"
#include "iwb/engine/chat/tool_calls.h"
#include "tokenizer/utf8.h"

#include <nlohmann/json.hpp>

namespace iwb::detail {
namespace {

using ordered_json = nlohmann::ordered_json;

// One block's call, read from `at` (after <tool_call>) as far as it is written.
CallBlock read_glm_call(std::string_view reply, size_t at, bool is_streaming, const ToolArgumentTypes* types,
                        bool is_compact) {
  // A value ends where the grammar ends it: at the first "</arg_value>" and, for 4.5/4.6, the
  // newline the template writes after it (so a string's text may hold the tag on its own).
  const std::string value_end = std::string(kGlmValueClose) + (is_compact ? "" : "\n");
  CallBlock out;
  // The name: up to the newline (4.5/4.6) or the first tag (4.7, or a call without arguments).
  const size_t name_at = reply.find_first_not_of(kWhitespace, at);
  const size_t name_end = name_at == std::string_view::npos ? name_at : reply.find_first_of("\n<", name_at);
  if (name_end == std::string_view::npos) {
    out.is_undecided = true;
    return out;
  }
  const std::string_view name = trim(reply.substr(name_at, name_end - name_at));
  if (name.empty() || name.find_first_of(" \t\r") != std::string_view::npos) return out;  // prose, not a name
  ParsedToolCall call;
  call.name = std::string(name);
  call.arguments = "{";
  bool is_first = true;
  // The block ends without being the format's: a finished reply's call ends there, at its
  // </tool_call> (while streaming, what is not yet the format may still become it).
  const auto close_unformatted = [&](size_t from) {
    call.arguments += "}";
    const size_t close = reply.find(kToolCallClose, from);
    if (close != std::string_view::npos) out.end = close + kToolCallClose.size();
  };
  size_t i = name_end;
  while (true) {
    const size_t next = reply.find_first_not_of(kWhitespace, i);
    const std::string_view rest = reply.substr(next == std::string_view::npos ? reply.size() : next);
    if (rest.starts_with(kToolCallClose)) {
      call.arguments += "}";
      out.end = next + kToolCallClose.size();
      break;
    }
    if (!rest.starts_with(kGlmKeyOpen)) {
      const bool may_grow =
          rest.empty() || starts_with_part_of(rest, kToolCallClose) || starts_with_part_of(rest, kGlmKeyOpen);
      if (!is_streaming && !may_grow) close_unformatted(next);
      break;  // unfinished: the call so far (a finished reply cut here: its arguments end here)
    }
    const size_t key_at = next + kGlmKeyOpen.size();
    const size_t key_end = reply.find(kGlmKeyClose, key_at);
    if (key_end == std::string_view::npos) break;
    const std::string_view key = reply.substr(key_at, key_end - key_at);
    const size_t value_tag = reply.find_first_not_of(kWhitespace, key_end + kGlmKeyClose.size());
    const std::string_view after_key = reply.substr(value_tag == std::string_view::npos ? reply.size() : value_tag);
    if (!after_key.starts_with(kGlmValueOpen)) {
      if (!is_streaming && !after_key.empty() && !starts_with_part_of(after_key, kGlmValueOpen))
        close_unformatted(value_tag);
      break;
    }
    const size_t value_at = value_tag + kGlmValueOpen.size();
    size_t value_stop = reply.find(value_end, value_at);
    // A finished reply may end right after "</arg_value>", without 4.5/4.6's newline.
    if (value_stop == std::string_view::npos && !is_streaming && reply.ends_with(kGlmValueClose) &&
        reply.size() - kGlmValueClose.size() >= value_at) {
      value_stop = reply.size() - kGlmValueClose.size();
    }
    const ArgumentText kind = types != nullptr ? types->of(call.name, key) : ArgumentText::String;
    const auto add_key = [&] {
      call.arguments += (is_first ? "" : ",") + ordered_json(std::string(key)).dump() + ":";
      is_first = false;
    };
    if (value_stop == std::string_view::npos) {
      // Unfinished: a string's text so far (no closing quote: the reply may end here, cut off),
      // without what may become its end; other values wait until whole.
      if (kind != ArgumentText::String) break;
      std::string_view text = reply.substr(value_at);
      if (is_streaming) {
        text.remove_suffix(partial_marker(text, value_end));
        text = text.substr(0, tokenizer::utf8::complete_prefix_length(text));  // a character still coming
      }
      add_key();
      const std::string quoted = argument_json(text, ArgumentText::String);
      call.arguments += std::string_view(quoted).substr(0, quoted.size() - 1);
      break;
    }
    add_key();
    call.arguments += argument_json(reply.substr(value_at, value_stop - value_at), kind);
    i = std::min(reply.size(), value_stop + value_end.size());
  }
  out.call = std::move(call);
  return out;
}

}  // namespace

ToolReply split_glm_calls(std::string_view reply, bool is_streaming, const ToolArgumentTypes* types, bool is_compact) {
  ToolReply out;
  size_t pos = 0;
  while (pos <= reply.size()) {
    const size_t open = append_text_before(reply, pos, kToolCallOpen, is_streaming, &out.content);
    if (open == std::string_view::npos) break;
    const size_t body = open + kToolCallOpen.size();
    pos = take_call_block(reply, open, body, read_glm_call(reply, body, is_streaming, types, is_compact), is_streaming,
                          &out);
    if (pos == std::string_view::npos) break;
  }
  trim_trailing_space(&out, is_streaming);
  return out;
}

}  // namespace iwb::detail
