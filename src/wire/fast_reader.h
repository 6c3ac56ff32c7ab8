// The fast reader of sparse payloads (adacomp, topk, threshold): decodes a
// payload into (index, value) entries with 64-bit peeks, specialized on the
// code family, value bytes and sign bit. It answers "valid, entries written"
// or "not taken" (an error); then the caller runs the general walker
// (wire/payload_walker.h), which names the error.
// Internal to adacomp_core. Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <span>

#include "wire/format.h"
#include "wire/payload_walker.h"

namespace adacomp::wire {

// Decodes the sparse payload of a frame that ParseFrame accepted into
// out[0, params.selected). Returns true only if the payload is valid by
// every rule WalkPayload checks and every entry was written (codes longer
// than its 64-bit window included: those are read bit by bit); false on an
// error, or for a value layout it has no specialization for (none today),
// with out[] in an unspecified state.
bool FastSparseEntries(std::span<const uint8_t> frame, const Header& h, const Params& p,
                       Entry* out);

// The largest element count whose indices leave bit 31 free for a sign.
inline constexpr uint64_t kMaxSignedElements = uint64_t{1} << 31;

// Whether a payload's entries are +-scale with a sign bit each (ternary
// AdaComp, threshold) and the frame has at most kMaxSignedElements
// elements: FastSignedIndices takes it.
bool IsSignedLayout(const Header& h, const Params& p);

// FastSparseEntries for a payload IsSignedLayout accepts, in half the
// bytes: out[j] is entry j's index with bit 31 set when its value is
// -scale (+scale otherwise: the value's bits are the scale's with bit 31
// ORed in). Same answers as FastSparseEntries; false as well for a payload
// IsSignedLayout refuses.
bool FastSignedIndices(std::span<const uint8_t> frame, const Header& h, const Params& p,
                       uint32_t* out);

}  // namespace adacomp::wire
