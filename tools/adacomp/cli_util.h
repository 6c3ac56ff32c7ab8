// tools/adacomp/cli_util.h: small helpers shared by the `adacomp` subcommands:
// exit codes, one-line error reporting, and parsing of counts such as "1e6".
// Thread safety: pure functions (Fail writes to stderr).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "adacomp/status.h"

namespace adacomp::tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadData = 1;   // malformed or unreadable input, I/O failure, failed run
inline constexpr int kExitBadUsage = 2;  // bad options or arguments

// Prints "adacomp <command>: error: <message>" as ONE line on stderr (any
// newline in message becomes "; ") and returns exit_code.
int Fail(std::string_view command, int exit_code, std::string_view message);

// Parses a non-negative whole number written as digits ("1000000") or in
// exponent form with an integral value ("1e6", "6.4e7"). `what` names the
// option in the error ("--elements: '1.5' is not a whole number").
Result<uint64_t> ParseCount(std::string_view text, std::string_view what);

// Parses a comma-separated list of counts ("1e4,1e5,1e6").
Result<std::vector<uint64_t>> ParseCountList(std::string_view text, std::string_view what);

// CLI11 check for unsigned options: rejects a leading '-' (CLI11 would
// otherwise wrap "-5" around to a huge unsigned value).
inline CLI::Validator NotNegative() {
  return CLI::Validator(
      [](std::string& s) {
        return (!s.empty() && s[0] == '-') ? std::string("must not be negative") : std::string();
      },
      "", "NOT_NEGATIVE");
}

// "%.6g"-style formatting of a double, for messages.
std::string FormatDouble(double value, int precision = 6);

}  // namespace adacomp::tool
