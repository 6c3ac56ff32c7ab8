// The fast sparse reader (see wire/fast_reader.h).
#include "wire/fast_reader.h"

#include <array>
#include <bit>
#include <cmath>
#include <type_traits>

#include "core/cpu.h"

#if ADACOMP_X86_SIMD
#include <emmintrin.h>  // SSE2, part of x86-64
#endif

#include "core/bit_io.h"
#include "core/endian.h"
#include "core/half.h"

namespace adacomp::wire {
namespace {

using internal::LoadF32;
using internal::LoadU16;

// One entry's code at the start of the window w (bit 0 is the next bit of
// the stream; bits past the stream are zero), for a code family, k and
// sign bit. Returns false if the code is not one the fast path takes (no
// one bit, longer than 57 bits, an Exp-Golomb prefix out of range) or the
// index is not below n; otherwise sets its length in bits, index and sign.
template <bool kRice, bool kSigns>
[[gnu::always_inline]] inline bool DecodeCode(uint64_t w, int k, uint64_t low_mask, uint64_t next,
                                              uint64_t n, uint64_t* bits, uint64_t* index,
                                              uint32_t* negative) {
  if (w == 0) return false;
  const int z = std::countr_zero(w);
  uint64_t q, len;
  if constexpr (kRice) {
    q = static_cast<uint64_t>(z);
    len = q + 1;
  } else {
    if (2 * z + 1 > 57) return false;
    const uint64_t v = (uint64_t{1} << z) | ((w >> (z + 1)) & ((uint64_t{1} << z) - 1));
    q = v - 1;
    if (q > (n >> k)) return false;
    len = 2 * static_cast<uint64_t>(z) + 1;
  }
  const uint64_t total = len + static_cast<uint64_t>(k) + (kSigns ? 1 : 0);
  if (total > 57) return false;
  *index = next + ((q << k) | ((w >> len) & low_mask));
  if (*index >= n) return false;
  *bits = total;
  *negative = kSigns ? static_cast<uint32_t>((w >> (len + k)) & 1) : 0u;
  return true;
}

// One entry whose code the 64-bit window does not hold (a run of zero bits
// longer than the window: a gap far above the code's k), or one that breaks
// a rule: read bit by bit from bit `pos` of the stream by the walker's own
// reader (ReadEntryCode, wire/payload_walker.h). Returns false if the entry
// breaks a rule, and the caller gives up (the walker then names the error);
// otherwise sets its length in bits, index and sign, as DecodeCode does.
template <bool kRice, bool kSigns>
[[gnu::noinline]] bool LongCode(const uint8_t* bs, size_t nbytes, uint64_t pos, int k,
                                uint64_t next, uint64_t n, uint64_t* bits, uint64_t* index,
                                uint32_t* negative) {
  if ((pos >> 3) >= nbytes) return false;
  internal::BitReader r(bs + (pos >> 3), bs + nbytes);
  const int skip = static_cast<int>(pos & 7);
  uint32_t ignored = 0;
  if (skip && !r.Get(skip, &ignored)) return false;
  if (ReadEntryCode(r, kRice, k, kSigns, MaxUnaryRun(n, k, kRice), next, n, index, negative) !=
      CodeStatus::kOk) {
    return false;
  }
  *bits = r.position() - static_cast<uint64_t>(skip);
  return true;
}

// Ternary Rice payloads (the default AdaComp frame) are read a table lookup
// at a time: the next kGroupBits bits of the stream index a table, built
// once per k, that holds up to 4 whole codes found in them. Entry i of a
// group is (index, sign) = (next - 1 + delta_i, sign_i), delta_i being the
// sum of (q << k | low) + 1 over codes 0..i. A 64-bit table entry holds
// four 16-bit lanes: bits [0, kAuxShift) delta_i (lanes past the last code
// repeat it, so lane 3 holds the group's whole delta), bit 15 sign_i, and
// from bit kAuxShift of lane 0 the number of codes and of lane 1 the bits
// they take. A group's delta is below 2^(kGroupBits - 1) for every k.
// Against one count of zeros per code, a lookup takes 2-3 codes at once
// (ResNet-18's frames: 4 bits a code); 11 bits measured faster than 10.
constexpr int kGroupBits = 11;
constexpr int kGroupMaxK = kGroupBits - 2;  // the shortest code: a 1, k bits, a sign
constexpr int kAuxShift = kGroupBits;
constexpr uint32_t kDeltaMask = (1u << kAuxShift) - 1;
static_assert(kAuxShift + 4 <= 15, "a lane holds the delta, a 4-bit count and the sign bit");

using GroupTable = std::array<uint64_t, size_t{1} << kGroupBits>;

GroupTable MakeGroupTable(int k) {
  GroupTable table{};
  for (uint32_t bits = 0; bits < table.size(); ++bits) {
    uint64_t lanes[4] = {0, 0, 0, 0};
    int at = 0, codes = 0;
    uint32_t delta = 0;
    while (codes < 4) {
      int q = 0;
      while (at + q < kGroupBits && ((bits >> (at + q)) & 1) == 0) ++q;
      const int len = q + 1 + k + 1;
      if (at + len > kGroupBits) break;  // no whole code left in the bits
      const uint32_t low = (bits >> (at + q + 1)) & ((1u << k) - 1);
      const uint32_t sign = (bits >> (at + q + 1 + k)) & 1;
      delta += ((static_cast<uint32_t>(q) << k) | low) + 1;
      lanes[codes] = delta | (sign << 15);
      ++codes;
      at += len;
    }
    for (int i = codes; i < 4; ++i) lanes[i] = delta;
    lanes[0] |= static_cast<uint64_t>(codes) << kAuxShift;
    lanes[1] |= static_cast<uint64_t>(at) << kAuxShift;
    table[bits] = lanes[0] | (lanes[1] << 16) | (lanes[2] << 32) | (lanes[3] << 48);
  }
  return table;
}

const GroupTable& GroupTableFor(int k) {
  static const std::array<GroupTable, kGroupMaxK + 1> tables = [] {
    std::array<GroupTable, kGroupMaxK + 1> t;
    for (int k = 0; k <= kGroupMaxK; ++k) t[static_cast<size_t>(k)] = MakeGroupTable(k);
    return t;
  }();
  return tables[static_cast<size_t>(k)];
}

// Reads groups of whole codes (MakeGroupTable) from the stream bs[0, nbytes)
// at bit *pos into out[*j...], while 8 bytes can be loaded and 4 more
// entries are owed, and moves *pos, *next and *j past them. Stops at a code
// a group does not hold (longer than its bits; the caller reads it), and
// returns false at an index not below n.
bool ReadRiceSignedGroups(const uint8_t* bs, size_t nbytes, int k, uint64_t n, uint64_t count,
                          uint32_t* out, uint64_t* pos, uint64_t* next, uint64_t* j) {
  const GroupTable& table = GroupTableFor(k);
  constexpr uint64_t kMask = (uint64_t{1} << kGroupBits) - 1;
  uint64_t p = *pos, nx = *next, jj = *j;
  while (jj + 4 <= count && (p >> 3) + 8 <= nbytes) {
    const uint64_t shift = p & 7;
    uint64_t w = internal::LoadU64(bs + (p >> 3)) >> shift;  // 64 - shift valid bits
    const uint64_t avail = 64 - shift;
    uint64_t used = 0;
    while (used + kGroupBits <= avail && jj + 4 <= count) {
      const uint64_t e = table[w & kMask];
      const uint64_t codes = (e >> kAuxShift) & 7;
      if (codes == 0) break;
      const uint64_t last = nx + ((e >> 48) & kDeltaMask) - 1;
      // (The stream's last code is read code by code, and indices increase,
      // so an index past n would be refused there too; this says it first.)
      if (last >= n) return false;
      const uint32_t base = static_cast<uint32_t>(nx - 1);
#if ADACOMP_X86_SIMD
      const __m128i lanes =
          _mm_unpacklo_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(e)), _mm_setzero_si128());
      const __m128i delta = _mm_and_si128(lanes, _mm_set1_epi32(kDeltaMask));
      const __m128i sign = _mm_slli_epi32(_mm_and_si128(lanes, _mm_set1_epi32(0x8000)), 16);
      _mm_storeu_si128(
          reinterpret_cast<__m128i*>(out + jj),
          _mm_or_si128(_mm_add_epi32(delta, _mm_set1_epi32(static_cast<int>(base))), sign));
#else
      for (int i = 0; i < 4; ++i) {
        const uint32_t lane = static_cast<uint32_t>(e >> (16 * i));
        out[jj + static_cast<uint64_t>(i)] =
            (base + (lane & kDeltaMask)) | ((lane & 0x8000u) << 16);
      }
#endif
      const uint64_t bits = (e >> (16 + kAuxShift)) & 15;
      nx = last + 1;
      jj += codes;
      w >>= bits;
      used += bits;
    }
    p += used;
    if (used == 0) break;  // the next code is not a group's
  }
  *pos = p;
  *next = nx;
  *j = jj;
  return true;
}

// Fast decoder of a sparse payload into entries: 64-bit peeks, one
// count-trailing-zeros per unary code, specialized on the code family,
// value bytes and sign bit. Returns true only if the payload is valid by
// every rule WalkPayload checks and every entry was written; a code longer
// than the window is read bit by bit (LongCode) and the fast loop goes on.
// On an error it returns false, and the caller runs WalkPayload, which gives
// the answer and the error message.
//
// The bit position is a dependency chain from one entry to the next (load,
// shift, count zeros, add). While 8 bytes can be loaded, each load serves
// two entries when both fit in the 57-64 bits it brings (nearly always:
// codes average 6-10 bits), which shortens that chain per entry.
//
// OutT is Entry, or for ternary payloads (kVb 0, signs) uint32_t: the index
// with the sign in bit 31 (FastSignedIndices).
template <bool kRice, int kVb, bool kSigns, class OutT = Entry>
[[gnu::noinline]] bool FastSparseEntriesT(std::span<const uint8_t> frame, const Header& h,
                                          const Params& p, OutT* out) {
  static_assert(std::is_same_v<OutT, Entry> || (kVb == 0 && kSigns));
  const uint64_t count = p.selected;
  const uint64_t n = h.elements;
  const int k = p.code.k;
  const uint8_t* payload = frame.data() + h.payload_offset;
  const size_t bits_offset = static_cast<size_t>(count) * kVb;  // <= payload (ParseParams)
  const uint8_t* bs = payload + bits_offset;
  const size_t nbytes = h.payload_bytes - bits_offset;
  const uint64_t total_bits = uint64_t{nbytes} * 8;
  const uint64_t low_mask = (uint64_t{1} << k) - 1;
  const uint32_t scale_bits = std::bit_cast<uint32_t>(p.scale);
  // Entry j's value; false if it is not finite (fp32, fp16).
  auto value = [&](uint64_t j, uint32_t negative, float* v) {
    if constexpr (kVb == 4) {
      *v = LoadF32(payload + 4 * j);
      return std::isfinite(*v);
    } else if constexpr (kVb == 2) {
      const uint16_t half = LoadU16(payload + 2 * j);
      *v = internal::HalfToFloat(half);
      return internal::HalfIsFinite(half);
    } else {
      // +-scale, branch-free (the sign is random; -scale flips the sign bit).
      *v = std::bit_cast<float>(scale_bits | (negative << 31));
      return true;
    }
  };
  // Writes entry j (its value v is +-scale when OutT is packed).
  auto store = [out](uint64_t j, uint64_t index, [[maybe_unused]] uint32_t negative,
                     [[maybe_unused]] float v) {
    if constexpr (std::is_same_v<OutT, Entry>) {
      out[j] = Entry{static_cast<uint32_t>(index), v};
    } else {
      out[j] = static_cast<uint32_t>(index) | (negative << 31);
    }
  };
  uint64_t pos = 0, next = 0, j = 0;
  if constexpr (kRice && std::is_same_v<OutT, uint32_t>) {
    // Groups of whole codes while they come; what they leave (a long code,
    // the last entries) goes on below, and groups resume after a long code.
    while (k <= kGroupMaxK) {
      if (!ReadRiceSignedGroups(bs, nbytes, k, n, count, out, &pos, &next, &j)) return false;
      if (j + 4 > count || (pos >> 3) + 8 > nbytes) break;
      // The code the groups stopped at.
      const uint64_t w = internal::LoadU64(bs + (pos >> 3)) >> (pos & 7);
      uint64_t t, index;
      uint32_t negative;
      if (!DecodeCode<kRice, kSigns>(w, k, low_mask, next, n, &t, &index, &negative) &&
          !LongCode<kRice, kSigns>(bs, nbytes, pos, k, next, n, &t, &index, &negative)) {
        return false;
      }
      store(j, index, negative, 0.0f);
      pos += t;
      next = index + 1;
      j += 1;
    }
  }
  while (j + 1 < count && (pos >> 3) + 8 <= nbytes) {
    const uint64_t shift = pos & 7;
    const uint64_t w = internal::LoadU64(bs + (pos >> 3)) >> shift;  // 64 - shift valid bits
    uint64_t ta, ia, tb, ib;
    uint32_t na, nb;
    float va, vb;
    if (!DecodeCode<kRice, kSigns>(w, k, low_mask, next, n, &ta, &ia, &na)) [[unlikely]] {
      if (!LongCode<kRice, kSigns>(bs, nbytes, pos, k, next, n, &ta, &ia, &na)) return false;
      if (!value(j, na, &va)) return false;
      store(j, ia, na, va);
      pos += ta;
      next = ia + 1;
      j += 1;
      continue;
    }
    if (!value(j, na, &va)) return false;
    store(j, ia, na, va);
    // The second entry is taken only if it lies wholly in the window;
    // otherwise (or if it is bad) the next round reads it as the first.
    if (DecodeCode<kRice, kSigns>(w >> ta, k, low_mask, ia + 1, n, &tb, &ib, &nb) &&
        ta + tb <= 64 - shift) [[likely]] {
      if (!value(j + 1, nb, &vb)) return false;
      store(j + 1, ib, nb, vb);
      pos += ta + tb;
      next = ib + 1;
      j += 2;
    } else {
      pos += ta;
      next = ia + 1;
      j += 1;
    }
  }
  for (; j < count; ++j) {
    if (pos > total_bits) return false;
    const size_t byte = static_cast<size_t>(pos >> 3);
    uint64_t w;
    if (nbytes - byte >= 8) {
      w = internal::LoadU64(bs + byte);
    } else {
      w = 0;
      for (size_t i = byte; i < nbytes; ++i) w |= uint64_t{bs[i]} << (8 * (i - byte));
    }
    w >>= pos & 7;  // at least 57 bits of the stream (zeros past its end)
    uint64_t t, index;
    uint32_t negative;
    if (!DecodeCode<kRice, kSigns>(w, k, low_mask, next, n, &t, &index, &negative) &&
        !LongCode<kRice, kSigns>(bs, nbytes, pos, k, next, n, &t, &index, &negative)) {
      return false;
    }
    float v;
    if (!value(j, negative, &v)) return false;
    store(j, index, negative, v);
    pos += t;
    next = index + 1;
  }
  // Ends exactly in the last byte, padding bits zero.
  if (pos > total_bits || (pos + 7) / 8 != nbytes) return false;
  if ((pos & 7) && (bs[pos >> 3] >> (pos & 7)) != 0) return false;
  return true;
}

}  // namespace

bool FastSparseEntries(std::span<const uint8_t> frame, const Header& h, const Params& p,
                       Entry* out) {
  const int vb = ValueBytes(h.codec, p);
  const bool signs = HasSigns(h.codec, p);
  const bool rice = p.code.family == IndexFamily::kRice;
  if (vb == 0 && signs) {
    return rice ? FastSparseEntriesT<true, 0, true>(frame, h, p, out)
                : FastSparseEntriesT<false, 0, true>(frame, h, p, out);
  }
  if (vb == 4 && !signs) {
    return rice ? FastSparseEntriesT<true, 4, false>(frame, h, p, out)
                : FastSparseEntriesT<false, 4, false>(frame, h, p, out);
  }
  if (vb == 2 && !signs) {
    return rice ? FastSparseEntriesT<true, 2, false>(frame, h, p, out)
                : FastSparseEntriesT<false, 2, false>(frame, h, p, out);
  }
  return false;  // no such codec today; the walker handles it
}

bool IsSignedLayout(const Header& h, const Params& p) {
  return ValueBytes(h.codec, p) == 0 && HasSigns(h.codec, p) && h.elements <= kMaxSignedElements;
}

bool FastSignedIndices(std::span<const uint8_t> frame, const Header& h, const Params& p,
                       uint32_t* out) {
  if (!IsSignedLayout(h, p)) return false;
  return p.code.family == IndexFamily::kRice
             ? FastSparseEntriesT<true, 0, true, uint32_t>(frame, h, p, out)
             : FastSparseEntriesT<false, 0, true, uint32_t>(frame, h, p, out);
}

}  // namespace adacomp::wire
