// Names of the small enums (codec, value mode, layer type, status code,
// model, optimizer, exchange, collective): each enum keeps one table of its
// names, indexed by value minus the enum's first value, and these two
// helpers read it both ways, so a name and its parser cannot disagree.
// Header-only, no state; safe from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "adacomp/status.h"

namespace adacomp::names {

// The name of `value`, or `unknown` for a value outside the table.
template <typename E, size_t N>
constexpr std::string_view Of(E value, const std::array<std::string_view, N>& table,
                              std::string_view unknown, int64_t first = 0) {
  const int64_t i = static_cast<int64_t>(value) - first;
  return i >= 0 && i < static_cast<int64_t>(N) ? table[static_cast<size_t>(i)] : unknown;
}

// The value named `name`, or nothing when no entry of the table is `name`.
template <typename E, size_t N>
constexpr std::optional<E> Find(std::string_view name, const std::array<std::string_view, N>& table,
                                int64_t first = 0) {
  for (size_t i = 0; i < N; ++i) {
    if (table[i] == name) return static_cast<E>(static_cast<int64_t>(i) + first);
  }
  return std::nullopt;
}

// Find, or InvalidArgument "<before>'<name>'<after>" when no entry is `name`.
template <typename E, size_t N>
Result<E> Parse(std::string_view name, const std::array<std::string_view, N>& table,
                std::string_view before, std::string_view after, int64_t first = 0) {
  if (auto value = Find<E>(name, table, first)) return *value;
  return Status::InvalidArgument(std::string(before) + "'" + std::string(name) + "'" +
                                 std::string(after));
}

}  // namespace adacomp::names
