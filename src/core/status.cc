// Implementation of adacomp::Status (include/adacomp/status.h).
#include "adacomp/status.h"

#include <array>

#include "core/names.h"

namespace adacomp {

namespace {

constexpr std::array<std::string_view, 9> kStatusCodeNames = {
    "OK",         "InvalidArgument", "Corruption", "NotFound", "IOError",
    "OutOfRange", "Unavailable",     "Aborted",    "Internal"};

}  // namespace

std::string_view StatusCodeName(StatusCode code) {
  return names::Of(code, kStatusCodeNames, "Unknown");
}

Status::Status(StatusCode code, std::string message) {
  // An OK code never carries a message: keep the OK path a null pointer.
  if (code != StatusCode::kOk) state_ = std::make_unique<State>(State{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string* const kEmpty = new std::string();
  return state_ ? state_->message : *kEmpty;
}

std::string Status::ToString() const {
  if (!state_) return "OK";
  std::string out(StatusCodeName(state_->code));
  out += ": ";
  out += state_->message;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (!state_) return Status();
  std::string msg(context);
  msg += ": ";
  msg += state_->message;
  return Status(state_->code, std::move(msg));
}

}  // namespace adacomp
