// Gemma 4's chat template (gemma4_template.h), reproduced as jinja2 renders it: the macros
// format_parameters, format_function_declaration, format_argument and strip_thinking, then the
// system turn, the turns and the generation prompt.
#include "chat/gemma4_template.h"

#include "chat/python_text.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

namespace iwb::detail {
namespace {

using ordered_json = nlohmann::ordered_json;

// Python's repr() of a float (the 'r' format: the shortest digits that read back, written
// with an exponent below 1e-4 and from 1e16 on, else with a ".0" when whole).
std::string python_float(double value) {
  std::array<char, 64> buffer{};
  const auto [end, error] =
      std::to_chars(buffer.data(), buffer.data() + buffer.size(), value, std::chars_format::scientific);
  if (error != std::errc()) return "nan";
  std::string_view text(buffer.data(), static_cast<size_t>(end - buffer.data()));
  if (text == "inf" || text == "-inf" || text == "nan" || text == "-nan") return std::string(text);
  std::string out;
  if (text.front() == '-') {
    out = "-";
    text.remove_prefix(1);
  }
  const size_t e = text.find('e');
  std::string digits;
  for (const char c : text.substr(0, e)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::atoi(std::string(text.substr(e + 1)).c_str());
  const int point = exponent + 1;  // where the decimal point falls among the digits
  if (point <= -4 || point > 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (point <= 0) return out + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  if (static_cast<size_t>(point) >= digits.size()) {
    return out + digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
}

std::string python_str(const ordered_json& v, bool is_nested = false);

// Jinja's dictsort: the items sorted by their keys without case (stable).
std::vector<std::pair<std::string, const ordered_json*>> dictsort(const ordered_json& object) {
  std::vector<std::pair<std::string, const ordered_json*>> items;
  for (const auto& [key, value] : object.items()) items.emplace_back(key, &value);
  const auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return s;
  };
  std::stable_sort(items.begin(), items.end(),
                   [&](const auto& a, const auto& b) { return lower(a.first) < lower(b.first); });
  return items;
}

// What {{ value }} writes: Python's str() (a string as it is; inside a list or dict, repr()).
std::string python_str(const ordered_json& v, bool is_nested) {
  if (v.is_string()) return is_nested ? python_repr(v.get<std::string>()) : v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_number_float()) return python_float(v.get<double>());
  if (v.is_number()) return v.dump();
  std::string out = v.is_array() ? "[" : "{";
  bool is_first = true;
  for (const auto& [key, value] : v.items()) {
    if (!is_first) out += ", ";
    is_first = false;
    if (v.is_object()) out += python_repr(key) + ": ";
    out += python_str(value, true);
  }
  return out + (v.is_array() ? "]" : "}");
}

// A key of a mapping (nullptr when the value is no mapping or has no such key: Jinja's undefined).
const ordered_json* get(const ordered_json* v, const char* key) {
  if (v == nullptr || !v->is_object()) return nullptr;
  const auto it = v->find(key);
  return it == v->end() ? nullptr : &*it;
}

bool truthy(const ordered_json* v) {
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number()) return v->get<double>() != 0;
  if (v->is_string() || v->is_array() || v->is_object()) return !v->empty();
  return true;
}

// {{ value }} of what may be undefined (written as nothing).
std::string text_of(const ordered_json* v) { return v == nullptr ? std::string() : python_str(*v); }

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return s;
}

std::string quoted(const std::string& s) { return std::string(kGemma4Quote) + s + std::string(kGemma4Quote); }

// required:[<|"|>a<|"|>,<|"|>b<|"|>] (the names as {{ item }} writes them).
std::string required_list(const ordered_json* names) {
  std::string s = "[";
  if (names != nullptr && (names->is_array() || names->is_object())) {
    bool is_first = true;
    for (const auto& [key, value] : names->items()) {
      if (!is_first) s += ",";
      is_first = false;
      s += quoted(names->is_array() ? python_str(value) : key);
    }
  }
  return s + "]";
}

void format_parameters(const ordered_json& properties, std::string* s);

// An array property's items: each key but null ones, in dictsort order.
void format_items(const ordered_json& items, std::string* s) {
  *s += ",items:{";
  bool is_first = true;
  for (const auto& [key, value] : dictsort(items)) {
    if (value->is_null()) continue;
    if (!is_first) *s += ",";
    is_first = false;
    if (key == "properties") {
      *s += "properties:{";
      if (value->is_object()) format_parameters(*value, s);
      *s += "}";
    } else if (key == "required") {
      *s += "required:" + required_list(value);
    } else if (key == "type") {
      ordered_json type;
      if (value->is_string()) {
        type = upper(value->get<std::string>());
      } else {
        type = ordered_json::array();
        for (const auto& t : *value) type.push_back(upper(python_str(t)));
      }
      *s += "type:" + gemma4_argument(type, true);
    } else {
      *s += key + ":" + gemma4_argument(*value, true);
    }
  }
  *s += "}";
}

// The template's format_parameters macro: each property but those named as the schema's own
// keys (description, type, properties, required, nullable), with its commas as it writes them.
void format_parameters(const ordered_json& properties, std::string* s) {
  static constexpr std::array<std::string_view, 5> kStandardKeys = {"description", "type", "properties", "required",
                                                                    "nullable"};
  bool is_first = true;
  for (const auto& [key, value_ptr] : dictsort(properties)) {
    if (std::find(kStandardKeys.begin(), kStandardKeys.end(), key) != kStandardKeys.end()) continue;
    const ordered_json* value = value_ptr;
    if (!is_first) *s += ",";
    is_first = false;
    *s += key + ":{";
    bool add_comma = false;
    const auto comma = [&] {
      if (add_comma) *s += ",";
      add_comma = true;
    };
    if (const ordered_json* d = get(value, "description"); truthy(d)) {
      *s += "description:" + quoted(python_str(*d));
      add_comma = true;
    }
    if (truthy(get(value, "nullable"))) {
      comma();
      *s += "nullable:true";
    }
    const std::string type = upper(text_of(get(value, "type")));
    if (type == "STRING") {
      if (const ordered_json* e = get(value, "enum"); truthy(e)) {
        comma();
        *s += "enum:" + gemma4_argument(*e, true);
      }
    } else if (type == "OBJECT") {
      *s += ",properties:{";
      if (const ordered_json* p = get(value, "properties"); p != nullptr && p->is_object()) {
        format_parameters(*p, s);
      } else if (value->is_object()) {
        format_parameters(*value, s);
      }
      *s += "}";
      if (const ordered_json* r = get(value, "required"); truthy(r)) *s += ",required:" + required_list(r);
    } else if (type == "ARRAY") {
      if (const ordered_json* items = get(value, "items"); items != nullptr && items->is_object() && !items->empty()) {
        format_items(*items, s);
      }
    }
    comma();
    *s += "type:" + quoted(type) + "}";
  }
}

// The template's format_function_declaration macro, trimmed.
std::string declaration(const ordered_json& tool) {
  const ordered_json* function = get(&tool, "function");
  std::string s =
      "declaration:" + text_of(get(function, "name")) + "{description:" + quoted(text_of(get(function, "description")));
  if (const ordered_json* params = get(function, "parameters"); truthy(params)) {
    s += ",parameters:{";
    if (const ordered_json* p = get(params, "properties"); truthy(p)) {
      s += "properties:{";
      if (p->is_object()) format_parameters(*p, &s);
      s += "},";
    }
    if (const ordered_json* r = get(params, "required"); truthy(r)) s += "required:" + required_list(r) + ",";
    if (const ordered_json* t = get(params, "type"); truthy(t)) s += "type:" + quoted(upper(python_str(*t))) + "}";
  }
  if (const ordered_json* response = get(function, "response"); response != nullptr) {
    s += ",response:{";
    if (const ordered_json* d = get(response, "description"); truthy(d))
      s += "description:" + quoted(python_str(*d)) + ",";
    if (const std::string type = upper(text_of(get(response, "type"))); type == "OBJECT") {
      s += "type:" + quoted(type) + "}";
    }
  }
  return python_strip(s + "}");
}

// The template's strip_thinking macro: the text outside <|channel>...<channel|>, trimmed.
std::string strip_thinking(std::string_view text) {
  constexpr std::string_view kOpen = "<|channel>", kClose = "<channel|>";
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t close = text.find(kClose, pos);
    const std::string_view part = text.substr(pos, close == std::string_view::npos ? close : close - pos);
    out += part.substr(0, part.find(kOpen));
    if (close == std::string_view::npos) break;
    pos = close + kClose.size();
  }
  return python_strip(out);
}

// A past turn after llama.cpp's rewrite: its calls, their results and the answer after them.
struct ModelTurn {
  const ChatMessage* message = nullptr;
  std::vector<std::pair<std::string, ordered_json>> responses;  // (name, response)
  std::optional<std::string> answer;                            // the content; none: no content key
};

// llama.cpp's convert_tool_responses_gemma4: each assistant message with calls, the tool results
// after it and a following answer (an assistant message with text and no calls) become one turn.
std::vector<ModelTurn> model_turns(const std::vector<ChatMessage>& messages) {
  std::vector<ModelTurn> turns;
  for (size_t i = 0; i < messages.size();) {
    ModelTurn turn{&messages[i], {}, messages[i].content};
    if (messages[i].role != "assistant" || messages[i].tool_calls.empty()) {
      turns.push_back(std::move(turn));
      ++i;
      continue;
    }
    const ChatMessage& call_turn = messages[i];
    turn.answer.reset();
    for (++i; i < messages.size() && messages[i].role == "tool"; ++i) {
      const size_t k = turn.responses.size();
      std::string name = k < call_turn.tool_calls.size() ? call_turn.tool_calls[k].name : std::string();
      if (name.empty()) name = messages[i].tool_call_id;
      ordered_json response = ordered_json::parse(messages[i].content, nullptr, /*allow_exceptions=*/false);
      if (response.is_discarded()) response = messages[i].content;
      turn.responses.emplace_back(std::move(name), std::move(response));
    }
    if (i < messages.size() && messages[i].role == "assistant" && messages[i].tool_calls.empty() &&
        !messages[i].content.empty()) {
      turn.answer = messages[i].content;
      ++i;
    }
    turns.push_back(std::move(turn));
  }
  return turns;
}

// <|tool_call>call:NAME{key:value,...}<tool_call|>: an object's keys sorted, a string written as
// it is, anything else as nothing.
std::string render_call(const ChatToolCall& call) {
  std::string s = "<|tool_call>call:" + call.name + "{";
  const ordered_json arguments = ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (arguments.is_object()) {
    bool is_first = true;
    for (const auto& [key, value] : dictsort(arguments)) {
      if (!is_first) s += ",";
      is_first = false;
      s += key + ":" + gemma4_argument(*value, false);
    }
  } else if (arguments.is_string()) {
    s += arguments.get<std::string>();
  } else if (arguments.is_discarded()) {
    s += call.arguments;  // not JSON: the text as a client's string
  }
  return s + "}<tool_call|>";
}

std::string render_response(const std::string& name, const ordered_json& response) {
  std::string s = "<|tool_response>response:" + name + "{";
  if (response.is_object()) {
    bool is_first = true;
    for (const auto& [key, value] : dictsort(response)) {
      if (!is_first) s += ",";
      is_first = false;
      s += key + ":" + gemma4_argument(*value, false);
    }
  } else {
    s += "value:" + gemma4_argument(response, false);
  }
  return s + "}<tool_response|>";
}

}  // namespace

std::string gemma4_argument(const ordered_json& value, bool escape_keys) {
  if (value.is_string()) return quoted(value.get<std::string>());
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_object()) {
    std::string s = "{";
    bool is_first = true;
    for (const auto& [key, item] : dictsort(value)) {
      if (!is_first) s += ",";
      is_first = false;
      s += (escape_keys ? quoted(key) : key) + ":" + gemma4_argument(*item, escape_keys);
    }
    return s + "}";
  }
  if (value.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < value.size(); ++i) s += (i > 0 ? "," : "") + gemma4_argument(value[i], escape_keys);
    return s + "]";
  }
  return python_str(value);
}

std::string render_gemma4(const std::vector<ChatMessage>& messages, const ChatRenderOptions& o) {
  const bool is_thinking = o.enable_thinking.value_or(false);
  enum class Last : uint8_t { None, Other, ToolResponse } last = Last::None;
  std::string s = o.bos_text;
  const bool has_system =
      !messages.empty() && (messages.front().role == "system" || messages.front().role == "developer");
  if (is_thinking || !o.tools.empty() || has_system) {
    s += "<|turn>system\n";
    if (is_thinking) s += "<|think|>";
    if (has_system) s += python_strip(messages.front().content);
    for (const std::string& tool : o.tools) {
      const ordered_json parsed = ordered_json::parse(tool, nullptr, /*allow_exceptions=*/false);
      s += "<|tool>" + declaration(parsed) + "<tool|>";
    }
    s += "<turn|>\n";
  }
  const std::vector<ChatMessage> rest(messages.begin() + (has_system ? 1 : 0), messages.end());
  for (const ModelTurn& turn : model_turns(rest)) {
    const ChatMessage& m = *turn.message;
    last = Last::Other;
    const bool is_model = m.role == "assistant";
    s += "<|turn>" + (is_model ? std::string("model") : m.role) + "\n";
    for (const ChatToolCall& call : m.tool_calls) s += render_call(call);
    for (const auto& [name, response] : turn.responses) s += render_response(name, response);
    if (!turn.responses.empty()) last = Last::ToolResponse;
    const std::string answer = turn.answer.value_or("");
    if (turn.answer) s += is_model ? strip_thinking(answer) : python_strip(answer);
    if (turn.responses.empty() || !answer.empty()) s += "<turn|>\n";
  }
  if (o.add_generation_prompt) {
    if (last != Last::ToolResponse) s += "<|turn>model\n";
    if (!is_thinking) s += "<|channel>thought\n<channel|>";
    // llama.cpp's: a prompt that ends with a turn's end opens the model's.
    if (s.ends_with("<turn|>\n")) s += "<|turn>model\n";
  }
  return s;
}

}  // namespace iwb::detail
