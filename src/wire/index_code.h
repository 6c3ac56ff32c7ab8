// The sparse index code of the adacomp, topk and threshold frames: its
// cost, the choice of code (family and k), and the bit writer (a template
// inlined into the compressors, and a BMI2-dispatched instance for the
// AdaComp ternary frame). docs/wire-format.md specifies the code; the
// reader is in wire/payload_walker.h and wire/fast_reader.h. Internal to
// adacomp_core. Thread safety: all functions are reentrant.
#pragma once

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/endian.h"
#include "wire/format.h"

namespace adacomp::wire {

// ---- The sparse index code (adacomp, topk, threshold) ---------------------
// Entry j has index i_j (strictly increasing). Gap g_0 = i_0, g_j = i_j -
// i_{j-1} - 1. Each gap is coded with the frame's IndexCode, then comes one
// sign bit (1 = negative) when the codec sends signs.

// Total bits of the codes of the gaps of `indices` (sign bits excluded).
uint64_t IndexCodeBits(std::span<const uint32_t> indices, IndexCode code);
// A code with few IndexCodeBits: the best Rice k exactly, the best
// Exp-Golomb k found by descent from an estimate (a local optimum); the
// cheaper of the two, Rice on ties. *code_bits (optional) receives its
// IndexCodeBits, so the caller need not compute them again.
IndexCode ChooseIndexCode(std::span<const uint32_t> indices, uint64_t* code_bits = nullptr);
// IndexCodeBits of a piece of a frame's indices whose first gap is taken
// from next0 (the previous entry's index + 1), not from 0.
uint64_t IndexCodeBitsFrom(std::span<const uint32_t> indices, IndexCode code, uint64_t next0);
// Bytes of a sparse payload: values first (value_bytes each), then the
// bitstream padded to a whole byte.
size_t SparsePayloadBytes(uint64_t count, uint64_t rice_bits, bool signs, int value_bytes);

// Writes the sparse bitstream (gaps, and sign bits when `signs`; negative(j)
// says whether entry j is negative) into [begin, end), zero-padding the last
// byte. The range must be exactly ceil((rice_bits + signs*count) / 8) bytes.
namespace detail {
// Appends the low n bits of v (n <= 56) to the stream at *p / *acc / *fill
// (fewer than 8 pending bits in *acc between calls), byte by byte near the
// end of [*p, end).
inline void PutBitsCareful(uint64_t v, int n, uint8_t** p, uint64_t* acc, int* fill, uint8_t* end) {
  *acc |= v << *fill;
  *fill += n;
  const int bytes = *fill >> 3;
  if (end - *p >= 8) {
    internal::StoreU64(*p, *acc);
  } else {
    for (int i = 0; i < bytes; ++i) (*p)[i] = static_cast<uint8_t>(*acc >> (8 * i));
  }
  *p += bytes;
  *acc = bytes == 8 ? 0 : *acc >> (8 * bytes);
  *fill &= 7;
}
}  // namespace detail

// next0: the smallest index indices[0] may have (0 for a whole frame; for a
// piece of one, the previous entry's index + 1); fill0: bits of begin[0]
// that belong to what comes before (written as zeros, for the caller to OR
// in).
template <typename NegativeFn>
[[gnu::always_inline]] inline void WriteSparseBits(uint8_t* begin, uint8_t* end,
                                                   std::span<const uint32_t> indices,
                                                   IndexCode code, bool signs, NegativeFn negative,
                                                   uint64_t next0 = 0, int fill0 = 0) {
  // Each entry's code (unary part, low bits, sign) is assembled into one
  // word when it is at most 56 bits long (nearly always) and appended with
  // one unaligned 8-byte store; longer codes and the last bytes go through
  // the careful path. acc holds fewer than 8 pending bits between entries.
  const int k = code.k;
  const uint64_t low_mask = (uint64_t{1} << k) - 1;
  const bool rice = code.family == IndexFamily::kRice;
  const uint64_t sign_bits = signs ? 1 : 0;
  uint8_t* p = begin;
  uint64_t acc = 0;
  int fill = fill0;
  uint64_t next = next0;  // smallest index the next entry may have
  const size_t count = indices.size();
  const uint32_t* idx = indices.data();
  for (size_t j = 0; j < count; ++j) {
    const uint64_t gap = idx[j] - next;
    next = uint64_t{idx[j]} + 1;
    // Branch-free (the signs are random); negative(j) is only called when
    // the codec sends signs.
    const uint64_t sign = signs ? static_cast<uint64_t>(static_cast<bool>(negative(j))) : 0;
    uint64_t prefix_len, prefix;  // the part before the k low bits
    int b = 0;
    if (rice) {
      prefix_len = (gap >> k) + 1;
      prefix = uint64_t{1} << ((prefix_len - 1) & 63);
    } else {
      const uint64_t v = (gap >> k) + 1;
      b = std::bit_width(v) - 1;
      prefix_len = 2 * static_cast<uint64_t>(b) + 1;
      prefix = ((v & ((uint64_t{1} << b) - 1)) << (b + 1)) | (uint64_t{1} << b);
    }
    const uint64_t total = prefix_len + static_cast<uint64_t>(k) + sign_bits;
    if (total <= 56 && end - p >= 8) [[likely]] {
      acc |= (prefix | ((gap & low_mask) << prefix_len) | (sign << (prefix_len + k))) << fill;
      fill += static_cast<int>(total);
      internal::StoreU64(p, acc);
      p += fill >> 3;
      acc >>= fill & 56;  // fill <= 63
      fill &= 7;
      continue;
    }
    if (total <= 56) {
      detail::PutBitsCareful(prefix | ((gap & low_mask) << prefix_len) | (sign << (prefix_len + k)),
                             static_cast<int>(total), &p, &acc, &fill, end);
      continue;
    }
    // Long code: the same bits in pieces.
    if (rice) {
      for (uint64_t z = prefix_len - 1; z > 0;) {
        const int piece = static_cast<int>(z < 56 ? z : 56);
        detail::PutBitsCareful(0, piece, &p, &acc, &fill, end);
        z -= static_cast<uint64_t>(piece);
      }
      detail::PutBitsCareful(1, 1, &p, &acc, &fill, end);
    } else {
      const uint64_t v = (gap >> k) + 1;
      detail::PutBitsCareful(0, b, &p, &acc, &fill, end);  // b <= 32
      detail::PutBitsCareful(1, 1, &p, &acc, &fill, end);
      detail::PutBitsCareful(v & ((uint64_t{1} << b) - 1), b, &p, &acc, &fill, end);
    }
    detail::PutBitsCareful(gap & low_mask, k, &p, &acc, &fill, end);  // k <= 31
    if (signs) detail::PutBitsCareful(sign, 1, &p, &acc, &fill, end);
  }
  if (fill > 0) *p++ = static_cast<uint8_t>(acc);
  assert(p == end);
  (void)end;
}

// WriteSparseBits with signs, entry j negative iff std::signbit(values[j])
// (the AdaComp ternary frame from the compressor's G values); compiled
// with BMI2 shifts as well, used where the CPU has them (same bits).
void WriteSparseBitsSignOf(uint8_t* begin, uint8_t* end, std::span<const uint32_t> indices,
                           IndexCode code, const float* values, uint64_t next0 = 0, int fill0 = 0);

}  // namespace adacomp::wire
