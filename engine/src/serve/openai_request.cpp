// Request bodies of /v1/chat/completions and /v1/completions: field by field, with OpenAI's
// names and ranges (and llama-server's extras: top_k, min_p, repeat_penalty, repeat_last_n).
// A missing or null field keeps the server's default.
#include "openai_request.h"

#include "iwb/engine/serve/http_server.h"

#include "openai_tools.h"

#include <cmath>
#include <limits>

namespace iwb::serve {
namespace {

using json = nlohmann::json;

// nlohmann's own DOM builder, stopped once arrays and objects nest deeper than a limit (values
// are later dumped into messages, and dumping recurses). The parser's callback variant does the
// same but slows to seconds on bodies of many small objects.
class DepthLimitedBuilder {
 public:
  DepthLimitedBuilder(json& result, int max_depth) : m_builder(result, true), m_max_depth(max_depth) {}

  bool null() { return m_builder.null(); }
  bool boolean(bool v) { return m_builder.boolean(v); }
  bool number_integer(json::number_integer_t v) { return m_builder.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return m_builder.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return m_builder.number_float(v, s); }
  bool string(json::string_t& v) { return m_builder.string(v); }
  bool binary(json::binary_t& v) { return m_builder.binary(v); }
  bool key(json::string_t& v) { return m_builder.key(v); }
  bool start_object(std::size_t n) { return enter() && m_builder.start_object(n); }
  bool end_object() { return --m_depth, m_builder.end_object(); }
  bool start_array(std::size_t n) { return enter() && m_builder.start_array(n); }
  bool end_array() { return --m_depth, m_builder.end_array(); }
  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    return m_builder.parse_error(position, token, e);
  }
  bool is_too_deep() const { return m_is_too_deep; }

 private:
  bool enter() {
    if (++m_depth <= m_max_depth) return true;
    m_is_too_deep = true;
    return false;
  }
  nlohmann::detail::json_sax_dom_parser<json> m_builder;
  int m_max_depth;
  int m_depth = 0;
  bool m_is_too_deep = false;
};

// A short rendering of a bad value for messages.
std::string value_text(const json& value) {
  std::string text = dump_json(value);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string number_text(double v) {
  std::string s = std::to_string(v);
  while (s.find('.') != std::string::npos && (s.back() == '0' || s.back() == '.')) {
    const bool is_dot = s.back() == '.';
    s.pop_back();
    if (is_dot) break;
  }
  return s;
}

class FieldReader {
 public:
  explicit FieldReader(const json& body) : m_body(body) {}

  std::optional<ApiError> error;

  // The field, or null when absent or null.
  const json* find(const char* name) const {
    const auto it = m_body.find(name);
    return it == m_body.end() || it->is_null() ? nullptr : &*it;
  }

  void fail(const char* name, std::string message) {
    if (!error) error = invalid_request(std::move(message), name);
  }

  template <typename T>
  void number(const char* name, double min, double max, T* out) {
    const json* v = find(name);
    if (v == nullptr || error) return;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < min || v->get<double>() > max) {
      fail(name, std::string("'") + name + "' must be a number from " + number_text(min) + " to " + number_text(max) +
                     ", not " + value_text(*v));
      return;
    }
    *out = static_cast<T>(v->get<double>());
  }

  // A whole number within [min, max]; with `clamp_above`, larger whole numbers become max.
  bool integer(const char* name, int64_t min, int64_t max, int64_t* out, bool clamp_above = false) {
    const json* v = find(name);
    if (v == nullptr || error) return false;
    const std::string range = "from " + std::to_string(min) + (clamp_above ? " up" : " to " + std::to_string(max));
    if (!v->is_number_integer()) {
      fail(name, std::string("'") + name + "' must be a whole number " + range + ", not " + value_text(*v));
      return false;
    }
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(max)) {
        if (!clamp_above) {
          fail(name, std::string("'") + name + "' must be a whole number " + range + ", not " + value_text(*v));
          return false;
        }
        *out = max;
        return true;
      }
      if (static_cast<int64_t>(u) < min) {
        fail(name, std::string("'") + name + "' must be a whole number " + range + ", not " + value_text(*v));
        return false;
      }
      *out = static_cast<int64_t>(u);
      return true;
    }
    const int64_t i = v->get<int64_t>();
    if (i < min || (i > max && !clamp_above)) {
      fail(name, std::string("'") + name + "' must be a whole number " + range + ", not " + value_text(*v));
      return false;
    }
    *out = std::min(i, max);
    return true;
  }

  void boolean(const char* name, bool* out) {
    const json* v = find(name);
    if (v == nullptr || error) return;
    if (!v->is_boolean()) {
      fail(name, std::string("'") + name + "' must be true or false, not " + value_text(*v));
      return;
    }
    *out = v->get<bool>();
  }

 private:
  const json& m_body;
};

// logit_bias: {"token id": bias, ...}, biases from -100 to 100 (OpenAI's range). Whether the ids
// are in the vocabulary is the route's to check (it knows the model).
void read_logit_bias(FieldReader& r, const RequestLimits& limits, SamplingParams* sampling) {
  const json* bias = r.find("logit_bias");
  if (bias == nullptr || bias->is_null() || r.error) return;
  const std::string bad = "'logit_bias' must be an object of at most " + std::to_string(limits.max_logit_bias) +
                          " token ids (as strings) to numbers from -100 to 100, such as {\"15043\": -100}";
  if (!bias->is_object() || bias->size() > limits.max_logit_bias) return r.fail("logit_bias", bad);
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, value] : bias->items()) {
    const bool is_id = !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!is_id || !value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
      return r.fail("logit_bias", bad + " (not: \"" + key.substr(0, 32) + "\": " + value.dump().substr(0, 32) + ")");
    }
    out.emplace_back(std::stoi(key), value.get<float>());
  }
  sampling->logit_bias = std::move(out);
}

// Structured output, in each server's words: response_format (OpenAI): {"type": "text"},
// {"type": "json_object"} or {"type": "json_schema", "json_schema": {"name": ..., "schema":
// {...}, "strict": ...}}; llama-server's top-level "json_schema" field and its {"type":
// "json_object", "schema": {...}}; vLLM's guided_json, guided_choice, guided_regex and
// structured_outputs.
void read_response_format(FieldReader& r, CompletionParams* p) {
  // Grammars in other formats would be silently ignored as unknown fields: refused by name.
  for (const char* name : {"grammar", "guided_grammar", "guided_whitespace_pattern"}) {
    if (r.find(name) != nullptr) {
      return r.fail(name, std::string("'") + name +
                              "' is not supported by this server (JSON Schema is: response_format, json_schema, "
                              "guided_json, guided_choice; regexes: guided_regex)");
    }
  }
  // One way of saying it at a time.
  std::vector<std::string> given;
  for (const char* name : {"json_schema", "guided_json", "guided_choice", "guided_regex", "structured_outputs"}) {
    if (r.find(name) != nullptr) given.emplace_back(name);
  }
  if (const json* f = r.find("response_format");
      f != nullptr && !(f->is_object() && f->value("type", json()) == "text")) {
    given.emplace_back("response_format");
  }
  if (given.size() > 1) {
    return r.fail(given[1].c_str(),
                  "give one of 'response_format', 'json_schema', 'guided_json', 'guided_choice', "
                  "'guided_regex' and 'structured_outputs', not '" +
                      given[0] + "' and '" + given[1] + "'");
  }
  const auto compile = [&](const json& schema, const char* param) {
    // vLLM takes a schema as an object or as its JSON text.
    const std::string text = schema.is_string() ? schema.get<std::string>() : schema.dump();
    Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_schema(text);
    if (!g) return r.fail(param, "'" + std::string(param) + "': " + g.error_message());
    p->json_grammar = *g;
  };
  const auto choose = [&](const json& choices, const char* param) {
    const std::string bad = "'" + std::string(param) + "' must be a non-empty list of non-empty strings";
    if (!choices.is_array()) return r.fail(param, bad);
    std::vector<std::string> list;
    for (const json& c : choices) {
      if (!c.is_string()) return r.fail(param, bad);
      list.push_back(c.get<std::string>());
    }
    Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_choices(list);
    if (!g) return r.fail(param, bad);
    p->json_grammar = *g;
  };
  const auto match = [&](const json& pattern, const char* param) {
    if (!pattern.is_string()) return r.fail(param, "'" + std::string(param) + "' must be a string (a regex)");
    Result<std::shared_ptr<const JsonGrammar>> g = JsonGrammar::from_regex(pattern.get<std::string>());
    if (!g) return r.fail(param, "'" + std::string(param) + "': " + g.error_message());
    p->json_grammar = *g;
  };
  if (r.error) return;
  if (const json* schema = r.find("json_schema")) return compile(*schema, "json_schema");  // llama-server
  if (const json* schema = r.find("guided_json")) return compile(*schema, "guided_json");  // vLLM
  if (const json* choices = r.find("guided_choice")) return choose(*choices, "guided_choice");
  if (const json* pattern = r.find("guided_regex")) return match(*pattern, "guided_regex");
  if (const json* outputs = r.find("structured_outputs")) {  // vLLM 0.10+
    if (outputs->is_object() && outputs->contains("json")) return compile((*outputs)["json"], "structured_outputs");
    if (outputs->is_object() && outputs->contains("choice")) return choose((*outputs)["choice"], "structured_outputs");
    if (outputs->is_object() && outputs->contains("regex")) return match((*outputs)["regex"], "structured_outputs");
    return r.fail("structured_outputs",
                  "'structured_outputs' is supported with \"json\" (a schema), \"choice\" (a "
                  "list) or \"regex\" (a regex)");
  }
  const json* format = r.find("response_format");
  if (format == nullptr) return;
  const std::string bad =
      "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or {\"type\": \"json_schema\", "
      "\"json_schema\": {\"name\": ..., \"schema\": {...}}}";
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string()) {
    return r.fail("response_format", bad);
  }
  const std::string type = (*format)["type"].get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    if (format->contains("schema")) return compile((*format)["schema"], "response_format");
    p->json_grammar = JsonGrammar::any_object();
    return;
  }
  if (type != "json_schema") return r.fail("response_format", bad);
  const auto spec = format->find("json_schema");
  if (spec == format->end() || !spec->is_object() || !spec->contains("schema")) {
    return r.fail("response_format",
                  "'response_format' of type json_schema needs \"json_schema\": {\"schema\": {...}}");
  }
  compile((*spec)["schema"], "response_format");
}

// The fields both endpoints share (logprobs differs and is read by each).
void read_common(FieldReader& r, const SamplingParams& defaults, const RequestLimits& limits, CompletionParams* p) {
  p->sampling = defaults;
  r.number("temperature", 0.0, 2.0, &p->sampling.temperature);
  r.number("top_p", 0.0, 1.0, &p->sampling.top_p);
  r.number("min_p", 0.0, 1.0, &p->sampling.min_p);
  r.number("presence_penalty", -2.0, 2.0, &p->sampling.presence_penalty);
  r.number("frequency_penalty", -2.0, 2.0, &p->sampling.frequency_penalty);
  r.number("repeat_penalty", 0.01, 10.0, &p->sampling.repeat_penalty);
  int64_t i = 0;
  if (r.integer("top_k", 0, 1 << 20, &i)) p->sampling.top_k = static_cast<int32_t>(i);
  if (r.integer("repeat_last_n", -1, 1 << 20, &i)) p->sampling.penalty_last_n = static_cast<int32_t>(i);
  if (r.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &i, true)) {
    // -1 asks for a random seed, as in llama-server.
    if (i != -1) {
      p->sampling.seed = static_cast<uint64_t>(i);
      p->has_seed = true;
    }
  }
  // max_completion_tokens is the newer name; -1 means "up to the context" (llama-server's n_predict).
  for (const char* name : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    if (r.integer(name, -1, std::numeric_limits<int64_t>::max(), &i, true)) {
      if (i == 0) r.fail(name, std::string("'") + name + "' must be at least 1 (or -1: up to the context)");
      p->max_tokens = i < 0 ? std::nullopt : std::optional<int64_t>(i);
    }
  }
  if (r.integer("n", 1, limits.max_choices, &i)) p->n = static_cast<int32_t>(i);
  r.boolean("stream", &p->is_stream);
  r.boolean("ignore_eos", &p->ignore_eos);
  r.boolean("return_token_ids", &p->return_token_ids);
  if (const json* options = r.find("stream_options"); options != nullptr && !r.error) {
    if (!options->is_object()) {
      r.fail("stream_options", "'stream_options' must be an object such as {\"include_usage\": true}");
    } else {
      FieldReader o(*options);
      o.boolean("include_usage", &p->include_usage);
      if (o.error) r.fail("stream_options", o.error->message);
    }
  }
  if (const json* stop = r.find("stop"); stop != nullptr && !r.error) {
    const std::string bad = "'stop' must be a string or a list of at most " + std::to_string(limits.max_stop_strings) +
                            " strings of at most " + std::to_string(limits.max_stop_bytes) + " bytes";
    std::vector<std::string> stops;
    if (stop->is_string()) {
      stops.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= static_cast<size_t>(limits.max_stop_strings)) {
      for (const json& s : *stop) {
        if (!s.is_string()) {
          stops.clear();
          r.fail("stop", bad);
          break;
        }
        stops.push_back(s.get<std::string>());
      }
    } else {
      r.fail("stop", bad);
    }
    for (const std::string& s : stops) {
      if (s.size() > limits.max_stop_bytes) r.fail("stop", bad);
      if (!s.empty()) p->stop.push_back(s);
    }
  }
  read_logit_bias(r, limits, &p->sampling);
  read_response_format(r, p);
}

// A message's content: a string, null, or a list of {"type": "text", "text": ...} parts.
std::optional<std::string> message_text(const json& content, std::string* problem) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    *problem = "must be a string or a list of text parts";
    return std::nullopt;
  }
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      *problem = "parts must be {\"type\": \"text\", \"text\": \"...\"} (only text is supported)";
      return std::nullopt;
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

std::optional<ApiError> read_messages(const json& body, std::vector<ChatMessage>* out) {
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return invalid_request("'messages' must be a non-empty list of {\"role\", \"content\"} objects", "messages");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return invalid_request(param + " must be an object with 'role' and 'content'", param);
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return invalid_request(param + ".role must be a string", param + ".role");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return invalid_request(param + ".role '" + role->get<std::string>() +
                                 "' is not supported (system, developer, user, assistant or tool)",
                             param + ".role");
    }
    ChatMessage message;
    message.role = std::move(r);
    // An assistant turn that called tools may have no content (null or absent).
    const auto calls = m.find("tool_calls");
    const bool has_calls = message.role == "assistant" && calls != m.end() && !calls->is_null();
    if (has_calls) {
      if (std::optional<ApiError> e = read_message_tool_calls(*calls, param, &message.tool_calls)) return e;
    }
    const auto content = m.find("content");
    if (content == m.end() && !has_calls) return invalid_request(param + " has no 'content'", param + ".content");
    if (content != m.end()) {
      std::string problem;
      std::optional<std::string> text = message_text(*content, &problem);
      if (!text) return invalid_request(param + ".content " + problem, param + ".content");
      message.content = std::move(*text);
    }
    // vLLM's and llama-server's field for an assistant turn's reasoning sent back.
    if (const auto r = m.find("reasoning_content"); message.role == "assistant" && r != m.end() && !r->is_null()) {
      if (!r->is_string()) {
        return invalid_request(param + ".reasoning_content must be a string", param + ".reasoning_content");
      }
      message.reasoning_content = r->get<std::string>();
    }
    if (const auto id = m.find("tool_call_id"); message.role == "tool" && id != m.end() && id->is_string()) {
      message.tool_call_id = id->get<std::string>();
    }
    out->push_back(std::move(message));
  }
  return std::nullopt;
}

// A prompt: text or token ids; `prompt` may also be a list of either.
std::optional<ApiError> read_prompts(const json& body, std::vector<PromptInput>* out) {
  const std::string bad = "'prompt' must be a string, a list of token ids, or a list of those";
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return invalid_request("'prompt' is required", "prompt");
  auto read_ids = [](const json& list, std::vector<int32_t>* ids) {
    for (const json& t : list) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return false;
      }
      ids->push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return true;
  };
  const json& p = *it;
  if (p.is_string()) {
    out->push_back(p.get<std::string>());
    return std::nullopt;
  }
  if (!p.is_array() || p.empty()) return invalid_request(bad, "prompt");
  if (p.front().is_number()) {
    std::vector<int32_t> ids;
    if (!read_ids(p, &ids)) return invalid_request(bad + " (token ids are whole numbers >= 0)", "prompt");
    out->push_back(std::move(ids));
    return std::nullopt;
  }
  for (const json& item : p) {
    if (item.is_string()) {
      out->push_back(item.get<std::string>());
    } else if (item.is_array() && !item.empty()) {
      std::vector<int32_t> ids;
      if (!read_ids(item, &ids)) return invalid_request(bad + " (token ids are whole numbers >= 0)", "prompt");
      out->push_back(std::move(ids));
    } else {
      return invalid_request(bad, "prompt");
    }
  }
  return std::nullopt;
}

// Options we do not offer are refused rather than silently ignored.
// Chat takes tools (openai_tools.cpp); the legacy `functions` are refused with the way to say
// it now, and text completions take neither.
std::optional<ApiError> refuse_unsupported(const FieldReader& r, bool is_chat) {
  for (const char* name : {"tools", "functions", "tool_choice", "function_call", "suffix"}) {
    const std::string_view n = name;
    if (is_chat && (n == "tools" || n == "tool_choice")) continue;
    if (const json* v = r.find(name);
        v != nullptr && !(v->is_array() && v->empty()) && !(v->is_object() && v->empty())) {
      const bool is_legacy = n == "functions" || n == "function_call";
      return invalid_request(
          std::string("'") + name + "' is not supported by this server" +
              (is_legacy && is_chat                 ? " (give 'tools' and 'tool_choice')"
               : n == "tools" || n == "tool_choice" ? " on /v1/completions (use /v1/chat/completions)"
                                                    : ""),
          name, "unsupported_parameter");
    }
  }
  if (const json* echo = r.find("echo"); echo != nullptr && *echo != json(false)) {
    return invalid_request("'echo' is not supported by this server", "echo", "unsupported_parameter");
  }
  if (const json* best_of = r.find("best_of"); best_of != nullptr && *best_of != json(1)) {
    return invalid_request("'best_of' is not supported by this server (use n)", "best_of", "unsupported_parameter");
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json error_json(const ApiError& e) {
  json inner = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) inner["param"] = e.param;
  if (!e.code.empty()) inner["code"] = e.code;
  return json{{"error", inner}};
}

ApiError invalid_request(std::string message, std::string param, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::variant<nlohmann::json, ApiError> parse_body(std::string_view body, int max_depth) {
  json value;
  DepthLimitedBuilder builder(value, max_depth);
  try {
    const bool is_parsed = json::sax_parse(body, &builder);
    if (builder.is_too_deep()) {
      return invalid_request("the request body nests deeper than " + std::to_string(max_depth) + " levels", "",
                             "invalid_json");
    }
    if (!is_parsed) return invalid_request("the request body is not valid JSON", "", "invalid_json");
  } catch (const json::exception& e) {
    return invalid_request(std::string("the request body is not valid JSON: ") + e.what(), "", "invalid_json");
  }
  if (!value.is_object()) return invalid_request("the request body must be a JSON object", "", "invalid_json");
  return value;
}

// reasoning_effort and chat_template_kwargs: what the templates here read of them, checked.
std::optional<ApiError> read_thinking_controls(const json& body, ChatCompletionRequest* request) {
  const auto read_effort = [&](const json& value, const std::string& param) -> std::optional<ApiError> {
    if (value.is_null()) return std::nullopt;
    const std::string effort = value.is_string() ? value.get<std::string>() : std::string();
    if (effort != "low" && effort != "medium" && effort != "high") {
      return invalid_request("'" + param + "' must be \"low\", \"medium\" or \"high\"", param);
    }
    request->reasoning_effort = effort;
    return std::nullopt;
  };
  if (const auto effort = body.find("reasoning_effort"); effort != body.end()) {
    if (std::optional<ApiError> e = read_effort(*effort, "reasoning_effort")) return e;
  }
  const auto kwargs = body.find("chat_template_kwargs");
  if (kwargs == body.end() || kwargs->is_null()) return std::nullopt;
  if (!kwargs->is_object()) return invalid_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
  std::optional<bool> thinking;  // DeepSeek V3.1's name for enable_thinking
  for (const auto& [key, value] : kwargs->items()) {
    if (key == "enable_thinking" || key == "thinking") {
      if (!value.is_boolean()) {
        return invalid_request("'chat_template_kwargs." + key + "' must be true or false", "chat_template_kwargs");
      }
      (key == "thinking" ? thinking : request->enable_thinking) = value.get<bool>();
    } else if (key == "reasoning_effort") {
      if (std::optional<ApiError> e = read_effort(value, "chat_template_kwargs")) return e;
    } else if (key == "clear_thinking") {
      if (!value.is_boolean()) {
        return invalid_request("'chat_template_kwargs.clear_thinking' must be true or false", "chat_template_kwargs");
      }
      request->clear_thinking = value.get<bool>();
    } else {
      // The templates are not run by a Jinja interpreter: a variable nothing here reads would
      // be dropped without a word.
      return invalid_request(
          "'chat_template_kwargs." + key +
              "' is not read by the chat templates here (enable_thinking, thinking, reasoning_effort and "
              "clear_thinking are)",
          "chat_template_kwargs");
    }
  }
  // Templates read one or the other (DeepSeek V3.1 `thinking` first): two that disagree would
  // mean different things to different templates.
  if (thinking && request->enable_thinking && *thinking != *request->enable_thinking) {
    return invalid_request("'chat_template_kwargs.thinking' and 'enable_thinking' disagree", "chat_template_kwargs");
  }
  if (thinking) request->enable_thinking = thinking;
  return std::nullopt;
}

Status set_default_chat_template_kwargs(std::string_view json_text, ServeOptions* options) {
  const json kwargs = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (kwargs.is_discarded()) return make_error(ErrorCode::InvalidArgument, "--chat-template-kwargs is not JSON");
  ChatCompletionRequest read;
  if (std::optional<ApiError> e = read_thinking_controls(json{{"chat_template_kwargs", kwargs}}, &read)) {
    return make_error(ErrorCode::InvalidArgument, "--chat-template-kwargs: " + e->message);
  }
  options->default_enable_thinking = read.enable_thinking;
  options->default_reasoning_effort = read.reasoning_effort;
  options->default_clear_thinking = read.clear_thinking;
  return {};
}

std::variant<ChatCompletionRequest, ApiError> read_chat_request(const nlohmann::json& body,
                                                                const SamplingParams& defaults,
                                                                const RequestLimits& limits,
                                                                std::string_view raw_body) {
  ChatCompletionRequest request;
  FieldReader r(body);
  if (std::optional<ApiError> e = read_messages(body, &request.messages)) return *e;
  if (std::optional<ApiError> e = refuse_unsupported(r, /*is_chat=*/true)) return *e;
  read_common(r, defaults, limits, &request.params);
  if (r.error) return *r.error;
  if (std::optional<ApiError> e = read_tools(body, raw_body, limits, &request)) return *e;
  if (std::optional<ApiError> e = read_thinking_controls(body, &request)) return *e;
  bool wants_logprobs = false;
  r.boolean("logprobs", &wants_logprobs);
  int64_t top = 0;
  const bool has_top = r.integer("top_logprobs", 0, limits.max_top_logprobs, &top);
  if (has_top && !wants_logprobs) r.fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (wants_logprobs) request.params.num_top_logprobs = static_cast<int32_t>(top);
  if (r.error) return *r.error;
  return request;
}

std::variant<TextCompletionRequest, ApiError> read_completion_request(const nlohmann::json& body,
                                                                      const SamplingParams& defaults,
                                                                      const RequestLimits& limits) {
  TextCompletionRequest request;
  FieldReader r(body);
  if (std::optional<ApiError> e = read_prompts(body, &request.prompts)) return *e;
  if (std::optional<ApiError> e = refuse_unsupported(r, /*is_chat=*/false)) return *e;
  read_common(r, defaults, limits, &request.params);
  int64_t top = 0;
  if (r.integer("logprobs", 0, limits.max_top_logprobs, &top))
    request.params.num_top_logprobs = static_cast<int32_t>(top);
  if (r.error) return *r.error;
  if (request.prompts.size() * static_cast<size_t>(request.params.n) > static_cast<size_t>(limits.max_choices)) {
    return invalid_request("n times the number of prompts is " +
                               std::to_string(request.prompts.size() * static_cast<size_t>(request.params.n)) +
                               "; this server takes at most " + std::to_string(limits.max_choices) + " choices",
                           "n");
  }
  return request;
}

}  // namespace iwb::serve
