// src/train/sha256.h: a small, dependency-free SHA-256 (FIPS 180-4).
//
// Used to fingerprint model weights (weights_sha256 in the run summary) so
// that runs and replicas can be compared bit for bit. Not constant-time; not
// meant for secrets. Thread safety: a Sha256 object is a value used by one
// thread; the free function is thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace adacomp::train {

class Sha256 {
 public:
  Sha256();
  void Update(std::span<const uint8_t> bytes);
  void Update(const void* data, size_t size) {
    Update(std::span<const uint8_t>(static_cast<const uint8_t*>(data), size));
  }
  // Finishes the hash; the object must not be updated afterwards.
  std::array<uint8_t, 32> Digest();
  // Lower-case hex of Digest().
  std::string HexDigest();

 private:
  void Block(const uint8_t* block);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string Sha256Hex(std::span<const uint8_t> bytes);
std::string ToHex(std::span<const uint8_t> bytes);

}  // namespace adacomp::train
