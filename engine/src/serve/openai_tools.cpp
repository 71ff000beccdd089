// Tool calling fields, with OpenAI's names, shapes and limits: tools (functions with a name of
// letters, digits, '_' and '-' up to 64 characters, a description and a JSON Schema of their
// parameters), tool_choice, parallel_tool_calls.
#include "openai_tools.h"

#include <algorithm>
#include <set>

namespace iwb::serve {
namespace {

using json = nlohmann::json;

bool is_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::optional<ApiError> read_tool_list(const json& tools, const nlohmann::ordered_json* ordered,
                                       const RequestLimits& limits, std::vector<ToolDefinition>* out) {
  if (!tools.is_array() || tools.size() > limits.max_tools) {
    return invalid_request("'tools' must be a list of at most " + std::to_string(limits.max_tools) +
                               " {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": {...}}}",
                           "tools");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string param = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
        !t["function"].is_object()) {
      return invalid_request(
          param + " must be {\"type\": \"function\", \"function\": {...}} (only functions are supported)", param);
    }
    const json& f = t["function"];
    const auto name = f.find("name");
    if (name == f.end() || !name->is_string() || !is_function_name(name->get<std::string>())) {
      return invalid_request(param + ".function.name must be 1 to 64 letters, digits, '_' or '-'",
                             param + ".function.name");
    }
    if (!names.insert(name->get<std::string>()).second) {
      return invalid_request(param + ".function.name '" + name->get<std::string>() + "' is given twice",
                             param + ".function.name");
    }
    if (const auto d = f.find("description"); d != f.end() && !d->is_null() && !d->is_string()) {
      return invalid_request(param + ".function.description must be a string", param + ".function.description");
    }
    ToolDefinition tool;
    tool.name = name->get<std::string>();
    if (const auto p = f.find("parameters"); p != f.end() && !p->is_null()) {
      if (!p->is_object()) {
        return invalid_request(param + ".function.parameters must be a JSON Schema object",
                               param + ".function.parameters");
      }
      tool.parameters_json = p->dump();
    }
    if (const auto s = f.find("strict"); s != f.end() && !s->is_null()) {
      if (!s->is_boolean())
        return invalid_request(param + ".function.strict must be true or false", param + ".function.strict");
      tool.is_strict = s->get<bool>();
    }
    // As the template shows it: the client's own key order where the body could be read again.
    tool.json = ordered != nullptr ? (*ordered)[i].dump() : t.dump();
    out->push_back(std::move(tool));
  }
  return std::nullopt;
}

// Arguments are JSON inside a string, so the body's depth limit does not reach them, and the
// template writer recurses.
constexpr int kMaxArgumentsDepth = 64;

}  // namespace

std::optional<ApiError> read_message_tool_calls(const json& calls, const std::string& param,
                                                std::vector<ChatToolCall>* out) {
  const std::string bad = param +
                          ".tool_calls must be a list of {\"id\", \"type\": \"function\", \"function\": "
                          "{\"name\", \"arguments\"}}";
  if (!calls.is_array()) return invalid_request(bad, param + ".tool_calls");
  for (const json& c : calls) {
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
      return invalid_request(bad, param + ".tool_calls");
    }
    const json& f = c["function"];
    const auto name = f.find("name");
    if (name == f.end() || !name->is_string()) return invalid_request(bad, param + ".tool_calls");
    ChatToolCall call;
    call.name = name->get<std::string>();
    if (const auto id = c.find("id"); id != c.end() && id->is_string()) call.id = id->get<std::string>();
    const auto arguments = f.find("arguments");
    if (arguments == f.end() || arguments->is_null()) {
      call.arguments = "{}";
    } else if (arguments->is_string()) {
      call.arguments = arguments->get<std::string>();
    } else if (arguments->is_object()) {
      call.arguments = arguments->dump();
    } else {
      return invalid_request(param + ".tool_calls: 'arguments' must be a JSON text (a string)", param + ".tool_calls");
    }
    if (json_nesting_depth(call.arguments) > kMaxArgumentsDepth) {
      return invalid_request(
          param + ".tool_calls: 'arguments' nests deeper than " + std::to_string(kMaxArgumentsDepth) + " levels",
          param + ".tool_calls");
    }
    out->push_back(std::move(call));
  }
  return std::nullopt;
}

std::optional<ApiError> read_tools(const json& body, std::string_view raw_body, const RequestLimits& limits,
                                   ChatCompletionRequest* request) {
  const auto tools = body.find("tools");
  const bool has_tools = tools != body.end() && !tools->is_null() && !(tools->is_array() && tools->empty());
  if (has_tools) {
    nlohmann::ordered_json ordered;
    if (!raw_body.empty()) {
      ordered = nlohmann::ordered_json::parse(raw_body, nullptr, /*allow_exceptions=*/false);
      if (!ordered.is_object() || !ordered.contains("tools") || ordered["tools"].size() != tools->size()) {
        ordered = nlohmann::ordered_json();
      }
    }
    const nlohmann::ordered_json* ordered_tools = ordered.is_object() ? &ordered["tools"] : nullptr;
    if (std::optional<ApiError> e = read_tool_list(*tools, ordered_tools, limits, &request->tools)) return e;
  }

  request->tool_choice = has_tools ? ToolChoice::Auto : ToolChoice::None;
  std::optional<std::string> only;
  if (const auto choice = body.find("tool_choice"); choice != body.end() && !choice->is_null()) {
    const std::string bad =
        "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": "
        "...}}";
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none") {
        request->tool_choice = ToolChoice::None;
      } else if (c == "auto") {
        request->tool_choice = ToolChoice::Auto;
      } else if (c == "required") {
        request->tool_choice = ToolChoice::Required;
      } else {
        return invalid_request(bad, "tool_choice");
      }
    } else if (choice->is_object() && choice->value("type", json()) == "function" && choice->contains("function") &&
               (*choice)["function"].is_object() && (*choice)["function"].value("name", json()).is_string()) {
      request->tool_choice = ToolChoice::Function;
      only = (*choice)["function"]["name"].get<std::string>();
    } else {
      return invalid_request(bad, "tool_choice");
    }
    if (!has_tools && request->tool_choice != ToolChoice::None) {
      return invalid_request("'tool_choice' needs 'tools' (the functions the model may call)", "tool_choice");
    }
  }
  bool is_parallel = true;
  if (const auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) return invalid_request("'parallel_tool_calls' must be true or false", "parallel_tool_calls");
    is_parallel = p->get<bool>();
  }
  request->is_parallel_tool_calls = is_parallel;
  request->tool_choice_name = only.value_or("");
  if (request->tool_choice == ToolChoice::None) return std::nullopt;
  if (request->params.json_grammar) {
    return invalid_request(
        "give 'tools' or a structured reply format ('response_format', 'json_schema', 'guided_json', ...), not both "
        "(or 'tool_choice': \"none\")",
        "tools");
  }
  // The tools' schemas are compiled by hold_tool_calls, once the model's format is known.
  if (only && std::none_of(request->tools.begin(), request->tools.end(),
                           [&](const ToolDefinition& t) { return t.name == *only; })) {
    return invalid_request("'tool_choice': no tool is named '" + *only + "'", "tool_choice");
  }
  return std::nullopt;
}

std::optional<ApiError> hold_tool_calls(ChatCompletionRequest* request, ToolCallFormat format) {
  if (request->tool_choice == ToolChoice::None || request->tools.empty()) return std::nullopt;
  const std::optional<std::string> only = request->tool_choice == ToolChoice::Function
                                              ? std::optional<std::string>(request->tool_choice_name)
                                              : std::nullopt;
  Result<ToolGrammar> grammar = tool_call_grammar(request->tools, only, format, request->is_parallel_tool_calls);
  if (!grammar) return invalid_request("'tools': " + grammar.error_message(), "tools");
  const ToolCallSyntax syntax = tool_call_syntax(format);
  CompletionParams& params = request->params;
  params.json_grammar = std::move(grammar->grammar);
  params.grammar_trigger = syntax.trigger;
  params.grammar_separator = syntax.separator;
  params.is_trigger_in_grammar = syntax.is_trigger_in_grammar;
  params.is_trigger_at_start = syntax.is_trigger_at_start;
  params.is_grammar_trigger_forced = request->tool_choice != ToolChoice::Auto;
  params.ends_after_grammar = !request->is_parallel_tool_calls || !syntax.allows_several;
  params.tool_format = format;
  if (format == ToolCallFormat::QwenXml || format == ToolCallFormat::GlmXml || format == ToolCallFormat::Glm47Xml) {
    params.tool_argument_types = std::make_shared<const ToolArgumentTypes>(tool_argument_types(request->tools));
  }
  return std::nullopt;
}

const std::string& chat_template_for(const ServedModel& model, const ChatCompletionRequest& chat) {
  bool has_tools = chat.tool_choice != ToolChoice::None && !chat.tools.empty();
  for (const ChatMessage& m : chat.messages) has_tools = has_tools || m.role == "tool" || !m.tool_calls.empty();
  return has_tools && !model.chat_template_tool_use.empty() ? model.chat_template_tool_use : model.chat_template;
}

}  // namespace iwb::serve
