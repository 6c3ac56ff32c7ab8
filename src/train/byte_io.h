// src/train/byte_io.h: the trainer's optimizer-state records, written with
// ByteWriter and read back with ByteReader (core/byte_io.h, which this
// brings in for the trainer's other messages and states). Thread safety:
// values.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "adacomp/status.h"
#include "core/byte_io.h"

namespace adacomp::train {

// Optimizer state as one record: an int64 step count, a uint64 buffer
// count, then every float buffer as PutBytes.
inline std::vector<uint8_t> SaveFloatBuffers(int64_t step,
                                             const std::vector<std::span<const float>>& buffers) {
  ByteWriter w;
  w.Put<int64_t>(step);
  w.Put<uint64_t>(buffers.size());
  for (const auto& b : buffers) {
    w.PutBytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()),
                                        b.size() * sizeof(float)));
  }
  return std::move(w.bytes);
}

// The inverse, checked whole before anything is written: `buffers` are
// the destinations, whose lengths are the expected ones. Corruption naming
// `what` for a truncated record, another count or size, a negative step or
// trailing bytes, with nothing written; else fills every buffer and *step.
inline Status LoadFloatBuffers(std::span<const uint8_t> bytes, const std::string& what,
                               const std::vector<std::span<float>>& buffers, int64_t* step) {
  ByteReader r(bytes, what);
  int64_t read_step = 0;
  uint64_t count = 0;
  ADACOMP_RETURN_IF_ERROR(r.Get(&read_step));
  ADACOMP_RETURN_IF_ERROR(r.Get(&count));
  if (count != buffers.size()) {
    return Status::Corruption(what + " has " + std::to_string(count) + " buffers, expected " +
                              std::to_string(buffers.size()));
  }
  if (read_step < 0) return Status::Corruption(what + ": the step count is negative");
  std::vector<std::span<const uint8_t>> parts(count);
  for (size_t k = 0; k < count; ++k) {
    ADACOMP_RETURN_IF_ERROR(r.GetBytes(&parts[k]));
    if (parts[k].size() != buffers[k].size() * sizeof(float)) {
      return Status::Corruption(what + ": buffer " + std::to_string(k) + " has " +
                                std::to_string(parts[k].size()) + " bytes, expected " +
                                std::to_string(buffers[k].size() * sizeof(float)));
    }
  }
  if (!r.AtEnd()) return Status::Corruption(what + " has trailing bytes");
  for (size_t k = 0; k < count; ++k) {
    if (!parts[k].empty()) std::memcpy(buffers[k].data(), parts[k].data(), parts[k].size());
  }
  *step = read_step;
  return Status::OK();
}

}  // namespace adacomp::train
