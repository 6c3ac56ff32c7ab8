// adacomp/status.h: the error type used across every layer of adacomp.
//
// A Status is either OK or carries a code and a message a person can act on
// ("frame 3, byte 41: payload length 900 exceeds the 512 bytes left").
// The OK path holds a null pointer and costs nothing to create or copy.
// Result<T> is a value or a non-OK Status.
//
// Data- and peer-dependent failures (bad frames, missing files, a peer that
// left) are returned as Status; programmer errors are assertions.
// Thread safety: Status and Result are values; distinct objects may be used
// from distinct threads freely.
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace adacomp {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // a caller-supplied value is wrong (shape, option, NaN)
  kCorruption = 2,       // bytes that should follow a format do not
  kNotFound = 3,         // a file, tensor id or key does not exist
  kIOError = 4,          // the OS failed a read or write
  kOutOfRange = 5,       // a size or count exceeds a configured limit
  kUnavailable = 6,      // a peer left or timed out
  kAborted = 7,          // the job was stopped (another rank failed)
  kInternal = 8,         // a bug: an invariant did not hold
};

std::string_view StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);
  Status(const Status& other)
      : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return Status(StatusCode::kInvalidArgument, std::move(msg));
  }
  static Status Corruption(std::string msg) {
    return Status(StatusCode::kCorruption, std::move(msg));
  }
  static Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(StatusCode::kIOError, std::move(msg)); }
  static Status OutOfRange(std::string msg) {
    return Status(StatusCode::kOutOfRange, std::move(msg));
  }
  static Status Unavailable(std::string msg) {
    return Status(StatusCode::kUnavailable, std::move(msg));
  }
  static Status Aborted(std::string msg) { return Status(StatusCode::kAborted, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // The message alone (empty when OK).
  const std::string& message() const;
  // "Corruption: frame 3, byte 41: ..." or "OK".
  std::string ToString() const;
  // Returns a copy whose message is "context: message" (OK stays OK).
  Status WithContext(std::string_view context) const;

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

// A value of type T, or the Status that says why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "Result constructed from an OK status without a value");
    if (status_.ok()) status_ = Status::Internal("Result built from OK status without a value");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace adacomp

#define ADACOMP_CONCAT_INNER_(a, b) a##b
#define ADACOMP_CONCAT_(a, b) ADACOMP_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define ADACOMP_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::adacomp::Status adacomp_status_ = (expr);        \
    if (!adacomp_status_.ok()) return adacomp_status_; \
  } while (0)

// ADACOMP_ASSIGN_OR_RETURN(auto x, MakeX()): binds the value or returns the status.
#define ADACOMP_ASSIGN_OR_RETURN(lhs, expr) \
  ADACOMP_ASSIGN_OR_RETURN_IMPL_(ADACOMP_CONCAT_(adacomp_result_, __LINE__), lhs, expr)
#define ADACOMP_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
