// Errors as values: Status for operations without a result, Result<T> for those with one.
// Exceptions never cross a library or thread boundary; every failure carries a message a
// person can act on.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace iwb {

enum class ErrorCode {
  Ok = 0,
  InvalidArgument,   // the caller passed something unusable
  NotFound,          // file, key or tensor absent
  IoError,           // open/read/mmap failed
  CorruptFile,       // the file is malformed (bad magic, out-of-bounds, overflow...)
  Unsupported,       // valid but not handled (version, tensor type, architecture)
  OutOfMemory,
  DeviceError,       // a GPU call failed
};

class Status {
 public:
  Status() = default;  // ok
  Status(ErrorCode code, std::string message) : m_code(code), m_message(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return m_code == ErrorCode::Ok; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return m_code; }
  const std::string& message() const { return m_message; }

 private:
  ErrorCode m_code = ErrorCode::Ok;
  std::string m_message;
};

inline Status make_error(ErrorCode code, std::string message) { return {code, std::move(message)}; }

template <typename T>
class Result {
 public:
  Result(T value) : m_value(std::move(value)) {}  // NOLINT: implicit on purpose
  Result(Status error) : m_value(std::move(error)) { assert(!std::get<Status>(m_value).is_ok()); }

  bool is_ok() const { return std::holds_alternative<T>(m_value); }
  explicit operator bool() const { return is_ok(); }

  T& value() & { return std::get<T>(m_value); }
  const T& value() const& { return std::get<T>(m_value); }
  T&& value() && { return std::get<T>(std::move(m_value)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // The error; an ok Status when this holds a value.
  Status status() const { return is_ok() ? Status{} : std::get<Status>(m_value); }
  const std::string& error_message() const {
    static const std::string kEmpty;
    return is_ok() ? kEmpty : std::get<Status>(m_value).message();
  }

 private:
  std::variant<T, Status> m_value;
};

}  // namespace iwb

// Propagate an error Status from an expression returning Status.
#define IWB_RETURN_IF_ERROR(expr)            \
  do {                                       \
    ::iwb::Status iwb_status_ = (expr);      \
    if (!iwb_status_.is_ok()) return iwb_status_; \
  } while (0)
