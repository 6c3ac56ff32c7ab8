// Bit-level writer and reader for frame payloads (internal to adacomp_core).
//
// Bit order: bit i of a stream is bit (i % 8) of byte i / 8 (least significant
// bit first), so a value written with Put(v, n) occupies the next n stream
// bits, its least significant bit first. The writer writes into a caller-sized
// buffer (the encoder computes the exact size first); the reader never reads
// outside its span and reports how many bits it consumed.
#pragma once

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>

namespace adacomp::internal {

class BitWriter {
 public:
  // Writes into [begin, end). The encoder sizes the range exactly; running
  // past it is a programmer error (asserted).
  BitWriter(uint8_t* begin, uint8_t* end) : p_(begin), end_(end) {}

  // Appends the low n bits of v (n <= 32; the other bits of v must be zero).
  void Put(uint64_t v, int n) {
    assert(n >= 0 && n <= 32);
    assert(n == 64 || (v >> n) == 0);
    acc_ |= v << fill_;
    fill_ += n;
    if (fill_ >= 32) Spill32();
  }
  // Appends n zero bits (any n).
  void PutZeros(uint64_t n) {
    while (n > 32) {
      Put(0, 32);
      n -= 32;
    }
    Put(0, static_cast<int>(n));
  }
  // Flushes the remaining bits, padding the last byte with zero bits; returns
  // the end of the written bytes.
  uint8_t* Finish() {
    while (fill_ > 0) {
      assert(p_ < end_);
      *p_++ = static_cast<uint8_t>(acc_);
      acc_ >>= 8;
      fill_ = fill_ > 8 ? fill_ - 8 : 0;
    }
    return p_;
  }

 private:
  void Spill32() {
    assert(end_ - p_ >= 4);
    for (int i = 0; i < 4; ++i) p_[i] = static_cast<uint8_t>(acc_ >> (8 * i));
    p_ += 4;
    acc_ >>= 32;
    fill_ -= 32;
  }

  uint8_t* p_;
  uint8_t* end_;
  uint64_t acc_ = 0;
  int fill_ = 0;
};

class BitReader {
 public:
  BitReader(const uint8_t* begin, const uint8_t* end) : p_(begin), end_(end) {}

  // Reads n bits (n <= 32) into *v. Returns false (and consumes nothing
  // meaningful) if fewer than n bits remain.
  bool Get(int n, uint32_t* v) {
    assert(n >= 0 && n <= 32);
    if (fill_ < n) Refill();
    if (fill_ < n) return false;
    *v = n == 0 ? 0u : static_cast<uint32_t>(acc_ & ((uint64_t{1} << n) - 1));
    Consume(n);
    return true;
  }
  // Reads a unary code: q zero bits then a one bit. Fails if the stream ends
  // first or q would exceed max_q.
  enum class UnaryResult { kOk, kTruncated, kTooLong };
  UnaryResult GetUnary(uint64_t max_q, uint64_t* q) {
    uint64_t count = 0;
    for (;;) {
      if (fill_ == 0) Refill();
      if (fill_ == 0) return UnaryResult::kTruncated;
      if (acc_ == 0) {
        count += static_cast<uint64_t>(fill_);
        Consume(fill_);
        if (count > max_q) return UnaryResult::kTooLong;
        continue;
      }
      const int z = std::countr_zero(acc_);
      count += static_cast<uint64_t>(z);
      if (count > max_q) return UnaryResult::kTooLong;
      Consume(z + 1);
      *q = count;
      return UnaryResult::kOk;
    }
  }
  // Bits consumed so far.
  uint64_t position() const { return consumed_; }
  // True if every bit not yet consumed in the current byte is zero and no
  // whole byte is left unread.
  bool AtZeroPaddedEnd() const {
    const int partial = static_cast<int>((8 - consumed_ % 8) % 8);
    if (fill_ > partial) return false;  // buffered whole bytes remain
    if (p_ != end_) return false;
    return acc_ == 0;
  }

 private:
  void Refill() {
    if (end_ - p_ >= 8) {  // whole bytes that fit in the accumulator, at once
      uint64_t word = 0;
      for (int i = 0; i < 8; ++i) word |= static_cast<uint64_t>(p_[i]) << (8 * i);
      const int take = (64 - fill_) / 8;
      if (take == 0) return;
      acc_ |= (take == 8 ? word : word & ((uint64_t{1} << (8 * take)) - 1)) << fill_;
      p_ += take;
      fill_ += 8 * take;
      return;
    }
    while (fill_ <= 56 && p_ < end_) {
      acc_ |= static_cast<uint64_t>(*p_++) << fill_;
      fill_ += 8;
    }
  }
  void Consume(int n) {
    acc_ = n >= 64 ? 0 : acc_ >> n;
    fill_ -= n;
    consumed_ += static_cast<uint64_t>(n);
  }

  const uint8_t* p_;
  const uint8_t* end_;
  uint64_t acc_ = 0;
  int fill_ = 0;
  uint64_t consumed_ = 0;
};

}  // namespace adacomp::internal
