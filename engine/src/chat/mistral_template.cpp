// Mistral's chat templates, each release's as its Jinja text writes it (checked with jinja2:
// docs/tool-calling.md): Nemo's ("v3-tekken": the system text in the last user turn, tools as
// a hand-written JSON list, calls as one JSON list with ids, results as {"content", "call_id"}),
// Small 3.2's ("v7": [SYSTEM_PROMPT] with a default text, tools as tojson before the last user
// turn, calls as name[CALL_ID]id[ARGS]arguments, results as id[TOOL_CONTENT]content) and
// Devstral's (Unsloth's copy: tools after the system prompt, text then name[ARGS]arguments).
#include "chat/mistral_template.h"

#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/clock_text.h"

#include <nlohmann/json.hpp>

namespace iwb::detail {
namespace {

using ordered_json = nlohmann::ordered_json;
using Calls = MistralFormat::Calls;

// Nemo's tool list: {"type": "function", "function": {...}} written key by key, a string value
// between quotes as it is (not escaped), any other value as tojson, the "return" key left out.
std::string nemo_tool(const std::string& tool_json) {
  const ordered_json tool = ordered_json::parse(tool_json, nullptr, /*allow_exceptions=*/false);
  std::string s = "{\"type\": \"function\", \"function\": {";
  bool first = true;
  if (tool.is_object() && tool.contains("function") && tool["function"].is_object()) {
    for (const auto& [key, value] : tool["function"].items()) {
      if (key == "return") continue;
      if (!first) s += ", ";
      first = false;
      s += "\"" + key +
           "\": " + (value.is_string() ? "\"" + value.get<std::string>() + "\"" : template_tojson(value.dump()));
    }
  }
  return s + "}}";
}

std::string available_tools(const ChatRenderOptions& o) {
  std::string s = "[AVAILABLE_TOOLS][";
  for (size_t i = 0; i < o.tools.size(); ++i) {
    if (i > 0) s += ", ";
    s += o.mistral->calls == Calls::JsonList ? nemo_tool(o.tools[i]) : template_tojson(o.tools[i]);
  }
  return s + "][/AVAILABLE_TOOLS]";
}

std::string assistant_turn(const ChatMessage& m, const ChatRenderOptions& o) {
  if (m.tool_calls.empty()) return m.content + o.eos_text;
  std::string s;
  switch (o.mistral->calls) {
    case Calls::JsonList:  // tool_call.function|tojson without its "}", then the id
      s = "[TOOL_CALLS][";
      for (size_t i = 0; i < m.tool_calls.size(); ++i) {
        const ChatToolCall& call = m.tool_calls[i];
        if (i > 0) s += ", ";
        s += "{\"name\": " + template_tojson_string(call.name) + ", \"arguments\": " + template_tojson(call.arguments) +
             ", \"id\": \"" + call.id + "\"}";
      }
      return s + "]" + o.eos_text;
    case Calls::NamedWithId:
      for (const ChatToolCall& call : m.tool_calls) {
        s += "[TOOL_CALLS]" + call.name + "[CALL_ID]" + call.id + "[ARGS]" + template_tojson(call.arguments);
      }
      return s + o.eos_text;
    case Calls::Named:
      s = m.content;
      for (const ChatToolCall& call : m.tool_calls) {
        s += "[TOOL_CALLS]" + call.name + "[ARGS]" + template_tojson(call.arguments);
      }
      return s + o.eos_text;
  }
  return s;
}

std::string tool_result(const ChatMessage& m, Calls calls) {
  switch (calls) {
    case Calls::JsonList:  // content|string: the text as it is, not quoted
      return "[TOOL_RESULTS]{\"content\": " + m.content + ", \"call_id\": \"" + m.tool_call_id + "\"}[/TOOL_RESULTS]";
    case Calls::NamedWithId:
      return "[TOOL_RESULTS]" + m.tool_call_id + "[TOOL_CONTENT]" + m.content + "[/TOOL_RESULTS]";
    case Calls::Named: return "[TOOL_RESULTS]" + m.content + "[/TOOL_RESULTS]";
  }
  return {};
}

// A Jinja string literal at `at` (a quote): its text, Python's escapes read; `at` moves past it.
std::optional<std::string> read_literal(std::string_view t, size_t* at) {
  const char quote = t[*at];
  std::string out;
  for (size_t i = *at + 1; i < t.size(); ++i) {
    char c = t[i];
    if (c == quote) {
      *at = i + 1;
      return out;
    }
    if (c == '\\' && i + 1 < t.size()) {
      c = t[++i];
      switch (c) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        default: break;  // \\, \', \" and any other: the character itself
      }
    }
    out += c;
  }
  return std::nullopt;
}

// The date a variable holds when the template sets it with strftime_now("FORMAT").
std::optional<std::string> strftime_variable(std::string_view t, std::string_view name) {
  const std::string set = "set " + std::string(name) + " = strftime_now(";
  const size_t at = t.find(set);
  if (at == std::string_view::npos) return std::nullopt;
  size_t quote = at + set.size();
  if (quote >= t.size() || (t[quote] != '"' && t[quote] != '\'')) return std::nullopt;
  const std::optional<std::string> format = read_literal(t, &quote);
  if (!format) return std::nullopt;
  return now_as_text(format->c_str(), ClockZone::Local);
}

// Whether two user turns are equal as the template compares them (message == user_messages[-1]
// compares the dicts: the role and the text).
bool is_last_user_text(const ChatMessage& m, const std::vector<ChatMessage>& messages) {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (it->role == "user") return m.role == "user" && m.content == it->content;
  }
  return false;
}

// The templates' check of an id: `id|length != 9` (characters; letters and digits is what they
// ask for, and what ids made here are).
bool has_nine_characters(const std::string& id) {
  size_t characters = 0;
  for (const char c : id) characters += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return characters == 9;
}

}  // namespace

std::string render_mistral(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  const MistralFormat& f = *o.mistral;
  std::string s = o.bos_text;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const size_t first = has_system ? 1 : 0;
  if (f.has_system_prompt) {
    s += "[SYSTEM_PROMPT]" + (has_system ? messages[0].content : o.default_system) + "[/SYSTEM_PROMPT]";
    if (f.are_tools_after_system && !o.tools.empty()) s += available_tools(o);
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      if (!o.tools.empty() && !f.are_tools_after_system && is_last_user_text(m, messages)) s += available_tools(o);
      // Nemo: the system text joins the user turn that is the conversation's last message.
      const bool joins_system = !f.has_system_prompt && has_system && i + 1 == messages.size();
      s += "[INST]" + (joins_system ? messages[0].content + "\n\n" : std::string()) + m.content + "[/INST]";
    } else if (m.role == "assistant") {
      s += assistant_turn(m, o);
    } else if (m.role == "tool") {
      s += tool_result(m, f.calls);
    } else if (m.role == "system") {  // a later system message (Nemo's template refuses it)
      s += "[SYSTEM_PROMPT]" + m.content + "[/SYSTEM_PROMPT]";
    }
  }
  return s;
}

std::optional<std::string> mistral_refusal(const std::vector<ChatMessage>& messages, const MistralFormat& f) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  // Devstral's template (Unsloth's) checks nothing.
  if (f.calls == Calls::Named) return std::nullopt;
  int index = 0;
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" && !f.has_system_prompt) {
      return "Mistral Nemo's template takes one system message, the first";
    }
    for (const ChatToolCall& call : m.tool_calls) {
      if (!has_nine_characters(call.id)) {
        return "Mistral's template takes tool call ids of 9 letters and digits; this call's is '" + call.id + "'";
      }
    }
    if (m.role == "tool" && !has_nine_characters(m.tool_call_id)) {
      return "Mistral's template takes tool call ids of 9 letters and digits; this result's tool_call_id is '" +
             m.tool_call_id + "'";
    }
    if (m.role == "tool" || !m.tool_calls.empty()) continue;
    if ((m.role == "user") != (index % 2 == 0)) {
      return "Mistral's template: after the optional system message, conversation roles must alternate "
             "user/assistant/user/assistant/...";
    }
    ++index;
  }
  return std::nullopt;
}

std::string jinja_default_system_message(std::string_view t) {
  constexpr std::string_view kSet = "set default_system_message = ";
  size_t at = t.find(kSet);
  if (at == std::string_view::npos) return {};
  at += kSet.size();
  std::string out;
  while (at < t.size()) {
    while (at < t.size() && (t[at] == ' ' || t[at] == '\n')) ++at;
    if (at >= t.size()) return {};
    if (t[at] == '"' || t[at] == '\'') {
      const std::optional<std::string> literal = read_literal(t, &at);
      if (!literal) return {};
      out += *literal;
    } else {
      const size_t end = t.find_first_not_of("abcdefghijklmnopqrstuvwxyz_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", at);
      const std::optional<std::string> date = strftime_variable(t, t.substr(at, end - at));
      if (!date || end == at) return {};  // not a text this reader can write
      out += *date;
      at = end;
    }
    while (at < t.size() && (t[at] == ' ' || t[at] == '\n')) ++at;
    if (at < t.size() && t[at] == '+') {
      ++at;
      continue;
    }
    return t.substr(at, 2) == "%}" || t.substr(at, 3) == "-%}" ? out : std::string();
  }
  return {};
}

}  // namespace iwb::detail
