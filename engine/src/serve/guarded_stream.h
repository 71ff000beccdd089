// The socket stream the server hands cpp-httplib for each connection, with the limits httplib
// 0.11 lacks: it reads any number of header lines, each within its own read timeout, so one
// client could grow the server without bound or hold a thread a byte at a time. Here a
// request's header block must fit max_header_bytes and arrive within the read timeout, and the
// whole request must fit max_request_bytes and arrive within request_timeout; past that, reads
// fail and httplib drops the connection. One request per connection.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace iwb::serve {

struct StreamLimits {
  size_t max_header_bytes = size_t{64} << 10;
  size_t max_request_bytes = (size_t{8} << 20) + (size_t{128} << 10);
  std::chrono::milliseconds read_timeout{10000};      // each wait for bytes, and the whole header block
  std::chrono::milliseconds write_timeout{10000};     // each wait for room to write
  std::chrono::milliseconds request_timeout{120000};  // the whole request, headers and body
};

class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(socket_t sock, const StreamLimits& limits);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return m_sock; }

 private:
  // Waits until the socket is readable (or writable), at most `timeout` and never past
  // `deadline`; false on timeout or error.
  bool wait(short events, std::chrono::milliseconds timeout, std::chrono::steady_clock::time_point deadline) const;
  // Notes the bytes handed to httplib: where the header block ends.
  void account(const char* data, size_t size);

  socket_t m_sock;
  StreamLimits m_limits;
  std::chrono::steady_clock::time_point m_header_deadline;
  std::chrono::steady_clock::time_point m_request_deadline;
  char m_buffer[4096];
  size_t m_buffer_begin = 0;
  size_t m_buffer_end = 0;
  size_t m_num_read = 0;  // bytes handed to httplib
  bool m_is_header_complete = false;
  uint32_t m_last_bytes = 0;  // the last four bytes handed over, to find "\r\n\r\n"
};

// HTTP server that serves each connection's one request through a GuardedStream.
class GuardedServer : public httplib::Server {
 public:
  StreamLimits limits;

 private:
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace iwb::serve
