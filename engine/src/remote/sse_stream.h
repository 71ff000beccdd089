// The two layers under OpenAiClient::stream that need no HTTP: server-sent events cut out of
// bytes that arrive in arbitrary pieces, and the OpenAI completion chunks those events carry
// folded into a StreamedCompletion (content timing, finish reason, usage, timings, errors).
#pragma once

#include "iwb/engine/remote/openai_client.h"

#include <functional>
#include <string>
#include <string_view>

namespace iwb::remote {

// Server-sent events (the WHATWG event-stream format): lines end in \n, \r\n or \r, which may be
// split across feeds; "data:" lines accumulate, a blank line dispatches; comments and other
// fields are ignored.
class SseParser {
 public:
  // Called with each event's data; returning false stops parsing (feed then returns false).
  using EventHandler = std::function<bool(const std::string& data)>;
  explicit SseParser(EventHandler on_event) : m_on_event(std::move(on_event)) {}

  bool feed(std::string_view bytes);
  // End of the stream: an event without its closing blank line is dispatched (servers that close
  // right after the last data line). Returns what the handler returned.
  bool finish();
  // Bytes that were not part of any line yet (for "not an event stream" diagnostics).
  size_t num_bytes_seen() const { return m_num_bytes_seen; }
  size_t num_events() const { return m_num_events; }

 private:
  bool take_line(std::string_view line);
  bool dispatch();

  EventHandler m_on_event;
  std::string m_line;
  std::string m_data;
  bool m_has_data = false;
  bool m_last_was_cr = false;
  size_t m_num_bytes_seen = 0;
  size_t m_num_events = 0;
};

// Folds the events of one streamed chat or text completion into `out`. feed/finish return false
// once the stream must stop (a server error, malformed JSON, or on_content asking to cancel).
class CompletionStreamDecoder {
 public:
  using ContentHandler = std::function<bool(std::string_view delta, double seconds)>;
  CompletionStreamDecoder(StreamedCompletion* out, ContentHandler on_content);

  bool feed(std::string_view bytes, double seconds);
  // The body ended (cleanly, as far as the transport knows) at `seconds`: a stream without
  // [DONE] and without a finish_reason is Dropped; bytes that held no event are Malformed.
  void finish(double seconds);
  bool is_done() const { return m_is_done; }
  bool has_failed() const { return m_out->error.kind != RemoteErrorKind::None; }

 private:
  bool on_event(const std::string& data);
  void fail(RemoteErrorKind kind, std::string message);

  StreamedCompletion* m_out;
  ContentHandler m_on_content;
  SseParser m_parser;
  double m_now = 0;
  bool m_is_in_reasoning = false;  // on_content has been given "<think>" and no "</think>" yet
  bool m_is_done = false;
  std::string m_head;  // the first bytes, quoted when the body is not an event stream
};

// The message inside an OpenAI-shaped error body ({"error": {"message": ...}}), else the body
// itself shortened; for HttpError messages.
std::string server_error_message(std::string_view body);

}  // namespace iwb::remote
