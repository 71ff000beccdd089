// GuardedStream: poll()-based reads and writes with header, size and time limits, buffered
// (httplib reads request lines a byte at a time).
#include "guarded_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace iwb::serve {
namespace {

using Clock = std::chrono::steady_clock;

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

}  // namespace

GuardedStream::GuardedStream(socket_t sock, const StreamLimits& limits)
    : m_sock(sock),
      m_limits(limits),
      m_header_deadline(Clock::now() + limits.read_timeout),
      m_request_deadline(Clock::now() + limits.request_timeout) {}

bool GuardedStream::wait(short events, std::chrono::milliseconds timeout, Clock::time_point deadline) const {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const auto wait_ms = std::min(timeout, left).count();
    if (wait_ms <= 0) return false;
    pollfd p{m_sock, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(wait_ms));
    if (n > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

bool GuardedStream::is_readable() const {
  if (m_buffer_begin < m_buffer_end) return true;
  return wait(POLLIN, m_limits.read_timeout, m_is_header_complete ? m_request_deadline : m_header_deadline);
}

bool GuardedStream::is_writable() const {
  if (!wait(POLLOUT, m_limits.write_timeout, Clock::now() + m_limits.write_timeout)) return false;
  // Writable, but is the client still there? A closed peer reads as end of stream.
  char byte;
  const ssize_t n = ::recv(m_sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

void GuardedStream::account(const char* data, size_t size) {
  m_num_read += size;
  for (size_t i = 0; i < size && !m_is_header_complete; ++i) {
    m_last_bytes = (m_last_bytes << 8) | static_cast<unsigned char>(data[i]);
    if (m_last_bytes == 0x0D0A0D0A) m_is_header_complete = true;  // "\r\n\r\n"
  }
}

ssize_t GuardedStream::read(char* ptr, size_t size) {
  const size_t limit = m_is_header_complete ? m_limits.max_request_bytes : m_limits.max_header_bytes;
  if (m_num_read >= limit) return -1;  // too large: httplib answers what it can and closes
  size = std::min(size, limit - m_num_read);
  if (m_buffer_begin == m_buffer_end) {
    if (!wait(POLLIN, m_limits.read_timeout, m_is_header_complete ? m_request_deadline : m_header_deadline)) return -1;
    ssize_t n;
    do {
      n = ::recv(m_sock, m_buffer, sizeof m_buffer, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    m_buffer_begin = 0;
    m_buffer_end = static_cast<size_t>(n);
  }
  // Up to the end of the header block at most, so the body gets the body's limit.
  size_t n = std::min(size, m_buffer_end - m_buffer_begin);
  if (!m_is_header_complete) {
    for (size_t i = 0; i < n; ++i) {
      account(m_buffer + m_buffer_begin + i, 1);
      if (m_is_header_complete) {
        n = i + 1;
        break;
      }
    }
  } else {
    account(m_buffer + m_buffer_begin, n);
  }
  std::memcpy(ptr, m_buffer + m_buffer_begin, n);
  m_buffer_begin += n;
  return static_cast<ssize_t>(n);
}

ssize_t GuardedStream::write(const char* ptr, size_t size) {
  if (!wait(POLLOUT, m_limits.write_timeout, Clock::now() + m_limits.write_timeout)) return -1;
  ssize_t n;
  do {
    n = ::send(m_sock, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void GuardedStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(m_sock, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

void GuardedStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(m_sock, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  bool is_closed = false;
  bool is_ok;
  {
    GuardedStream stream(sock, limits);
    is_ok = process_request(stream, /*close_connection=*/true, is_closed, nullptr);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return is_ok;
}

}  // namespace iwb::serve
