// POST /v1/chat/completions and /v1/completions: the body read into a request, prompts
// rendered and tokenized, max_tokens clamped to the context, n requests submitted to the core,
// then a chunked response that streams (or collects) their tokens. A client that goes away
// aborts its requests: a failed write, or the socket found closed while waiting.
#include "http_server_impl.h"

#include "iwb/engine/chat/chat_prompt.h"
#include "openai_tools.h"

#include <algorithm>

namespace iwb::serve {
namespace {

using json = nlohmann::json;

// Text longer than this many bytes per context position cannot fit and is refused before
// tokenizing (a token covers at least one byte; tokenizing megabytes only to refuse them is
// what a hostile client would like).
constexpr size_t kMaxPromptBytesPerPosition = 64;

ApiError context_error(size_t num_prompt_tokens, int64_t context_length) {
  return invalid_request("the prompt is " + std::to_string(num_prompt_tokens) +
                             " tokens, and this model's context holds " + std::to_string(context_length) +
                             " (prompt and completion together): shorten the prompt",
                         "messages", "context_length_exceeded");
}

// Requests in flight, counted while a completion is being answered.
class InFlight {
 public:
  InFlight(std::atomic<int64_t>& counter, int64_t count) : m_counter(counter), m_count(count) {}
  ~InFlight() { m_counter.fetch_sub(m_count); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int64_t>& m_counter;
  int64_t m_count;
};

// Everything a chunked response needs after the handler returns.
struct ActiveCompletion {
  std::unique_ptr<CompletionSession> session;
  std::shared_ptr<ResponseChannel> channel;
  Submission submission;
  std::unique_ptr<InFlight> in_flight;
  std::chrono::steady_clock::time_point start;
  bool is_started = false;
  bool is_done = false;
  RequestLogEntry log;
};

// A chat request's prompt as the model sees it: the served template family (--chat-template),
// and the tools unless tool_choice is "none" (the model is then not to call them).
// `defaults`: the server's --chat-template-kwargs, for a request that gives no thinking controls.
std::variant<ChatPrompt, ApiError> chat_prompt(const ServedModel& model, const ChatCompletionRequest& chat,
                                               const ServeOptions& defaults) {
  ChatPromptOptions options;
  options.family = model.chat_template_family;
  options.enable_thinking = chat.enable_thinking ? chat.enable_thinking : defaults.default_enable_thinking;
  options.reasoning_effort = chat.reasoning_effort.empty() ? defaults.default_reasoning_effort : chat.reasoning_effort;
  options.clear_thinking = chat.clear_thinking ? chat.clear_thinking : defaults.default_clear_thinking;
  if (chat.tool_choice != ToolChoice::None) {
    for (const ToolDefinition& t : chat.tools) options.tools.push_back(t.json);
  }
  size_t num_bytes = 0;
  for (const std::string& t : options.tools) num_bytes += t.size();
  for (const ChatMessage& m : chat.messages) {
    num_bytes += m.content.size() + m.role.size();
    for (const ChatToolCall& c : m.tool_calls) num_bytes += c.name.size() + c.arguments.size();
  }
  const size_t max_bytes = static_cast<size_t>(model.context_length) * kMaxPromptBytesPerPosition;
  if (num_bytes > max_bytes) {
    return invalid_request("the messages are " + std::to_string(num_bytes) +
                               " bytes, far more than this model's context of " + std::to_string(model.context_length) +
                               " tokens holds",
                           "messages", "context_length_exceeded");
  }
  Result<ChatPrompt> prompt =
      build_chat_prompt(model.tokenizer, chat_template_for(model, chat), chat.messages, options);
  if (!prompt) return invalid_request(prompt.error_message(), options.tools.empty() ? "messages" : "tools");
  return std::move(*prompt);
}

}  // namespace

// llama-server's POST /apply-template: a chat request's prompt text, without generating.
void HttpServer::Impl::handle_apply_template(const httplib::Request& req, httplib::Response& res) {
  const std::shared_ptr<const ServedModel> model = core.model();
  if (model == nullptr) return send_error(res, loading_error());
  std::variant<json, ApiError> body = parse_body(req.body);
  if (const ApiError* e = std::get_if<ApiError>(&body)) return send_error(res, *e);
  std::variant<ChatCompletionRequest, ApiError> read =
      read_chat_request(std::get<json>(body), options.default_sampling, limits, req.body);
  if (const ApiError* e = std::get_if<ApiError>(&read)) return send_error(res, *e);
  std::variant<ChatPrompt, ApiError> prompt = chat_prompt(*model, std::get<ChatCompletionRequest>(read), options);
  if (const ApiError* e = std::get_if<ApiError>(&prompt)) return send_error(res, *e);
  send_json(res, {{"prompt", std::get<ChatPrompt>(prompt).text}});
}

void HttpServer::Impl::handle_completion(const httplib::Request& req, httplib::Response& res, CompletionKind kind) {
  const auto start = std::chrono::steady_clock::now();
  const std::shared_ptr<const ServedModel> model = core.model();
  if (model == nullptr) return send_error(res, loading_error());
  std::variant<json, ApiError> body = parse_body(req.body);
  if (const ApiError* e = std::get_if<ApiError>(&body)) return send_error(res, *e);

  const int64_t context = model->context_length;
  const size_t max_prompt_bytes = static_cast<size_t>(context) * kMaxPromptBytesPerPosition;
  CompletionParams params;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> stops;
  bool renders_special_tokens = false;  // a harmony chat: its channels are control tokens
  std::string reasoning_close;          // ChatPrompt::reasoning_close: written before a required call
  if (kind == CompletionKind::Chat) {
    std::variant<ChatCompletionRequest, ApiError> read =
        read_chat_request(std::get<json>(body), options.default_sampling, limits, req.body);
    if (const ApiError* e = std::get_if<ApiError>(&read)) return send_error(res, *e);
    ChatCompletionRequest& chat = std::get<ChatCompletionRequest>(read);
    std::variant<ChatPrompt, ApiError> prompt = chat_prompt(*model, chat, options);
    if (const ApiError* e = std::get_if<ApiError>(&prompt)) return send_error(res, *e);
    if (const std::optional<ToolCallFormat> format = std::get<ChatPrompt>(prompt).tool_format) {
      if (std::optional<ApiError> e = hold_tool_calls(&chat, *format)) return send_error(res, *e);
    }
    params = std::move(chat.params);
    ChatPrompt& chat_prompt = std::get<ChatPrompt>(prompt);
    params.is_reply_in_reasoning = chat_prompt.opens_reasoning;
    reasoning_close = std::move(chat_prompt.reasoning_close);
    prompts.push_back(std::move(chat_prompt.tokens));
    stops = std::move(chat_prompt.stop_strings);
    renders_special_tokens = chat_prompt.renders_special_tokens;
  } else {
    std::variant<TextCompletionRequest, ApiError> read =
        read_completion_request(std::get<json>(body), options.default_sampling, limits);
    if (const ApiError* e = std::get_if<ApiError>(&read)) return send_error(res, *e);
    TextCompletionRequest& text = std::get<TextCompletionRequest>(read);
    params = std::move(text.params);
    for (PromptInput& p : text.prompts) {
      if (std::string* s = std::get_if<std::string>(&p)) {
        if (s->size() > max_prompt_bytes) {
          return send_error(res, invalid_request("the prompt is " + std::to_string(s->size()) +
                                                     " bytes, far more than this model's context of " +
                                                     std::to_string(context) + " tokens holds",
                                                 "prompt", "context_length_exceeded"));
        }
        tokenizer::EncodeOptions encode;
        encode.parse_special = true;  // as `iwb run -p` and llama-server do
        prompts.push_back(model->tokenizer.encode(*s, encode));
      } else {
        prompts.push_back(std::move(std::get<std::vector<int32_t>>(p)));
      }
    }
  }
  stops.insert(stops.end(), params.stop.begin(), params.stop.end());
  const auto vocab_size = static_cast<int32_t>(model->tokenizer.num_tokens());
  for (const auto& [id, bias] : params.sampling.logit_bias) {
    if (id >= vocab_size) {
      return send_error(res, invalid_request("'logit_bias' names token " + std::to_string(id) +
                                                 ", outside the vocabulary (" + std::to_string(vocab_size) + " tokens)",
                                             "logit_bias"));
    }
  }

  // max_tokens is clamped to the room the context leaves after the prompt; without it the
  // completion may fill that room (or the server's -n). A prompt that leaves no room is refused.
  std::vector<GenerationRequest> requests;
  std::vector<int32_t> prompt_sizes;
  for (std::vector<int32_t>& tokens : prompts) {
    if (tokens.empty()) return send_error(res, invalid_request("the prompt is empty", "prompt"));
    if (static_cast<int64_t>(tokens.size()) >= context) {
      ApiError e = context_error(tokens.size(), context);
      if (kind == CompletionKind::Text) e.param = "prompt";
      return send_error(res, e);
    }
    const int64_t room = context - static_cast<int64_t>(tokens.size());
    // A request without max_tokens takes the server's -n (llama-server's n_predict) when set.
    const std::optional<int64_t> asked =
        params.max_tokens
            ? params.max_tokens
            : (options.default_max_tokens >= 0 ? std::optional<int64_t>(options.default_max_tokens) : std::nullopt);
    const int64_t max_new = asked ? std::min(*asked, room) : room;
    prompt_sizes.push_back(static_cast<int32_t>(tokens.size()));
    for (int32_t i = 0; i < params.n; ++i) {
      GenerationRequest r;
      r.prompt_tokens = tokens;
      r.sampling = params.sampling;
      // Choices of one request differ by seed: the given one plus the choice's index.
      // Without one, the server's --seed (llama-server's -s) when given, else a fresh seed.
      if (params.has_seed)
        r.sampling.seed = params.sampling.seed + static_cast<uint64_t>(i);
      else if (options.has_default_seed)
        r.sampling.seed = options.default_sampling.seed + static_cast<uint64_t>(i);
      else
        r.sampling.seed = random_seed();
      r.max_new_tokens = static_cast<int32_t>(max_new);
      r.stop_strings = stops;
      r.stop_at_end_of_generation = !params.ignore_eos;
      r.num_top_logprobs = params.num_top_logprobs;
      r.json_grammar = params.json_grammar;
      r.grammar_trigger = params.grammar_trigger;
      r.grammar_separator = params.grammar_separator;
      r.is_grammar_trigger_forced = params.is_grammar_trigger_forced;
      // A required call is the answer's: the open think block is closed first, as the template
      // closes one.
      if (params.is_reply_in_reasoning) r.forced_trigger_lead = reasoning_close;
      r.ends_after_grammar = params.ends_after_grammar;
      r.is_trigger_in_grammar = params.is_trigger_in_grammar;
      r.is_trigger_at_start = params.is_trigger_at_start;
      r.render_special_tokens = renders_special_tokens;
      requests.push_back(std::move(r));
    }
  }

  const auto num_requests = static_cast<int64_t>(requests.size());
  if (num_in_flight.fetch_add(num_requests) + num_requests > options.max_requests_in_flight) {
    num_in_flight.fetch_sub(num_requests);
    ApiError e;
    e.status = 503;
    e.type = "server_busy";
    e.message = "the server is at its limit of " + std::to_string(options.max_requests_in_flight) +
                " requests in flight; retry shortly";
    e.code = "server_busy";
    return send_error(res, e);
  }
  auto active = std::make_shared<ActiveCompletion>();
  active->in_flight = std::make_unique<InFlight>(num_in_flight, num_requests);
  active->channel = std::make_shared<ResponseChannel>();
  Result<Submission> submission = core.submit(std::move(requests), active->channel);
  if (!submission) {
    ApiError e = invalid_request(submission.error_message(), kind == CompletionKind::Chat ? "messages" : "prompt");
    if (submission.status().code() != ErrorCode::InvalidArgument) {
      e.status = 503;
      e.type = "unavailable_error";
      e.param.clear();
    }
    return send_error(res, e);
  }
  active->submission = std::move(*submission);
  active->session = std::make_unique<CompletionSession>(kind, model, params, std::move(prompt_sizes));
  if (params.return_token_ids) active->session->set_prompt_token_ids(std::move(prompts));
  active->start = start;
  active->log.method = req.method;
  active->log.path = req.path;
  active->log.remote_address = req.remote_addr;
  active->log.status = 200;

  const char* content_type = params.is_stream ? "text/event-stream" : "application/json";
  if (params.is_stream) res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      content_type,
      [active](size_t, httplib::DataSink& sink) {
        CompletionSession& session = *active->session;
        auto write = [&](const std::string& text) { return text.empty() || sink.write(text.data(), text.size()); };
        if (!active->is_started) {
          active->is_started = true;
          if (session.is_stream() && !write(session.stream_start())) return false;
        }
        if (session.is_finished()) {
          if (!write(session.finish_text())) return false;
          active->is_done = true;
          sink.done();
          return true;
        }
        std::vector<ServeEvent> events = active->channel->take(std::chrono::milliseconds(100));
        // Nothing to send (or a body that is sent only at the end): is the client still there?
        if ((events.empty() || !session.is_stream()) && !sink.is_writable()) return false;
        return write(session.add(std::move(events)));
      },
      [this, active](bool) {
        CompletionSession& session = *active->session;
        if (!active->is_done) core.abort(active->submission.requests);
        RequestLogEntry entry = std::move(active->log);
        entry.num_prompt_tokens = session.num_prompt_tokens();
        entry.num_generated_tokens = session.num_generated_tokens();
        entry.seconds = seconds_since(active->start);
        entry.outcome =
            active->is_done ? (session.first_error().empty() ? "done" : session.first_error()) : "disconnected";
        log(entry);
        active->in_flight.reset();
      });
}

}  // namespace iwb::serve
