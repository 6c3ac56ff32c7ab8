#include "cli_util.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace adacomp::tool {

int Fail(std::string_view command, int exit_code, std::string_view message) {
  std::string line;
  line.reserve(message.size());
  for (size_t i = 0; i < message.size(); ++i) {
    char c = message[i];
    if (c == '\r') continue;
    if (c == '\n') {
      if (i + 1 < message.size()) line += "; ";
      continue;
    }
    line += c;
  }
  std::fprintf(stderr, "adacomp %.*s: error: %s\n", static_cast<int>(command.size()),
               command.data(), line.c_str());
  std::fflush(stderr);
  return exit_code;
}

Result<uint64_t> ParseCount(std::string_view text, std::string_view what) {
  std::string s(text);
  auto bad = [&](const char* why) {
    return Status::InvalidArgument(std::string(what) + ": '" + s + "' " + why);
  };
  if (s.empty()) return bad("is empty");
  bool digits_only = true;
  for (char c : s) digits_only &= (c >= '0' && c <= '9');
  if (digits_only) {
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
    if (errno == ERANGE) return bad("is too large");
    return static_cast<uint64_t>(v);
  }
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !std::isfinite(v)) return bad("is not a number");
  if (v < 0) return bad("is negative");
  if (v != std::floor(v)) return bad("is not a whole number");
  if (v > 9007199254740992.0) return bad("is too large");
  return static_cast<uint64_t>(v);
}

Result<std::vector<uint64_t>> ParseCountList(std::string_view text, std::string_view what) {
  std::vector<uint64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    ADACOMP_ASSIGN_OR_RETURN(uint64_t v, ParseCount(text.substr(start, comma - start), what));
    out.push_back(v);
    start = comma + 1;
  }
  return out;
}

std::string FormatDouble(double value, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
  return buf;
}

}  // namespace adacomp::tool
