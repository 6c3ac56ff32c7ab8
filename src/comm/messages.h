// src/comm/messages.h: wording shared by the communicators' error messages,
// so that in-process and MPI runs describe the same failure the same way.
// Internal header; plain functions, thread-safe.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace adacomp::comm_internal {

// "0.2", "30", "1e+09": seconds as a person would write them.
inline std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

// "rank 3" or "ranks 1, 2".
inline std::string RankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

}  // namespace adacomp::comm_internal
