// src/core/byte_io.h: small state records in host byte order (checkpoints
// and digests assume a little-endian host): a writer of fixed-size values
// and length-prefixed byte strings, and the bounds-checked reader that is
// its inverse. The trainer's messages and states and the auto codec's
// chooser state use them. Thread safety: values; one object per thread.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "adacomp/status.h"

namespace adacomp {

static_assert(std::endian::native == std::endian::little,
              "checkpoints and digests assume a little-endian host");

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  // A uint64 length, then the bytes.
  void PutBytes(std::span<const uint8_t> b) {
    Put<uint64_t>(b.size());
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  std::vector<uint8_t> bytes;
};

// Reads what ByteWriter wrote; Corruption("<what> is truncated") past the end.
class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> b, std::string what) : b_(b), what_(std::move(what)) {}
  template <typename T>
  Status Get(T* v) {
    if (b_.size() - pos_ < sizeof(T)) return Status::Corruption(what_ + " is truncated");
    std::memcpy(v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::OK();
  }
  Status GetBytes(std::span<const uint8_t>* out) {
    uint64_t n = 0;
    ADACOMP_RETURN_IF_ERROR(Get(&n));
    if (b_.size() - pos_ < n) return Status::Corruption(what_ + " is truncated");
    *out = b_.subspan(pos_, n);
    pos_ += n;
    return Status::OK();
  }
  bool AtEnd() const { return pos_ == b_.size(); }

 private:
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace adacomp
