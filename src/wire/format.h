// The adacomp frame format, version 1, at the byte level (docs/wire-format.md
// is the normative description): the header and parameter-block layout, the
// validating header parser, and the writer's BeginFrame / FinishFrame that a
// compressor uses to write a frame in place. Internal to adacomp_core.
//
// The payload is read by wire/payload_walker.h (general) and
// wire/fast_reader.h (sparse fast path), written with wire/index_code.h; the
// decoded structure Frame is in wire/frame.h.
//
// Every function that reads bytes treats them as untrusted: it checks bounds
// before every read and returns a Status naming the field and byte offset.
// Thread safety: all functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/status.h"

namespace adacomp::wire {

inline constexpr uint8_t kMagic0 = 0x41;  // 'A'
inline constexpr uint8_t kMagic1 = 0x43;  // 'C'
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kCrcBytes = 4;
inline constexpr int kMaxCodeK = 31;
inline constexpr uint64_t kMaxElements = 0xFFFFFFFFull;  // indices are 32-bit
inline constexpr uint8_t kMaxCodecId = 5;
// Smallest possible frame: magic, version, codec, 3 one-byte varints, params
// length, checksum.
inline constexpr size_t kMinFrameBytes = 2 + 1 + 1 + 1 + 1 + 1 + 1 + kCrcBytes;

// The code of the gaps between selected indices (sparse codecs). Stored in
// one byte: bits 0-4 k, bit 5 family, bits 6-7 reserved (zero).
enum class IndexFamily : uint8_t {
  kRice = 0,       // q = g >> k in unary (q zeros, a one), then k low bits of g
  kExpGolomb = 1,  // v = (g >> k) + 1 = 1bbb (b+1 bits): b zeros, a one, the b
                   // low bits of v, then k low bits of g
};
struct IndexCode {
  IndexFamily family = IndexFamily::kRice;
  uint8_t k = 0;  // 0..31
  uint8_t Byte() const { return static_cast<uint8_t>(k | (static_cast<uint8_t>(family) << 5)); }
  friend bool operator==(const IndexCode&, const IndexCode&) = default;
};

// Codec parameter block, the union of every codec's fields (docs/wire-format.md).
struct Params {
  ValueMode values = ValueMode::kTernary;  // adacomp
  IndexCode code;                          // adacomp, topk, threshold
  uint32_t bin_size = 0;                   // adacomp
  uint64_t selected = 0;                   // adacomp, topk, threshold: entries in payload
  float scale = 0.0f;   // adacomp ternary scale, threshold tau, terngrad s, onebit positive mean
  float scale2 = 0.0f;  // onebit negative mean
};

// Bytes of the encoded parameter block of `codec`.
size_t ParamsBytes(Codec codec, const Params& params);

// Header fields found by ParseFrame.
struct Header {
  uint8_t version = 0;
  Codec codec = Codec::kDense;
  uint32_t tensor_id = 0;
  uint64_t elements = 0;
  size_t params_offset = 0;
  size_t params_bytes = 0;
  size_t payload_offset = 0;
  size_t payload_bytes = 0;
  size_t frame_bytes = 0;
  uint32_t crc32c = 0;
};

// ---- Writing (no allocation beyond growing *out) --------------------------

// Appends the header and parameter block of a frame whose payload will be
// exactly `payload_bytes` long, and grows *out to hold payload and checksum.
// Returns the offset in *out where the payload starts.
size_t BeginFrame(std::vector<uint8_t>* out, Codec codec, uint32_t tensor_id, uint64_t elements,
                  const Params& params, size_t payload_bytes);
// Writes the checksum of the frame that starts at out[frame_start] into the
// last four bytes of *out.
void FinishFrame(std::vector<uint8_t>* out, size_t frame_start);
// ---- Reading ---------------------------------------------------------------

// Parses and validates the frame at bytes[0]: framing, limits, checksum,
// header fields and the parameter block (not the payload).
Status ParseFrame(std::span<const uint8_t> bytes, const DecodeOptions& options, Header* header,
                  Params* params);

// The codec of the frame at bytes[0] from its fixed header alone (magic,
// version, codec id; no checksum, nothing else read), or nullopt when those
// four bytes are not a frame's. For a caller that needs only the codec of a
// frame it made itself; anything read from a peer goes through ParseFrame.
inline std::optional<Codec> PeekCodec(std::span<const uint8_t> bytes) {
  if (bytes.size() < 4 || bytes[0] != kMagic0 || bytes[1] != kMagic1 || bytes[2] != kVersion ||
      bytes[3] > kMaxCodecId) {
    return std::nullopt;
  }
  return static_cast<Codec>(bytes[3]);
}

// ---- Shared by the readers and the writers of this folder ----------------

inline bool IsSparse(Codec c) {
  return c == Codec::kAdaComp || c == Codec::kTopK || c == Codec::kThreshold;
}
// Whether each sparse entry carries a sign bit.
inline bool HasSigns(Codec c, const Params& p) {
  return (c == Codec::kAdaComp && p.values == ValueMode::kTernary) || c == Codec::kThreshold;
}
// Bytes of the value each sparse entry carries (0: none, the value follows
// from the sign and the scale).
inline int ValueBytes(Codec c, const Params& p) {
  if (c == Codec::kTopK) return 4;
  if (c == Codec::kAdaComp) {
    if (p.values == ValueMode::kFp16) return 2;
    if (p.values == ValueMode::kFp32) return 4;
  }
  return 0;
}
inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// Corruption("byte <offset>: <what>"), the form of every format error.
Status CorruptAt(size_t offset, const std::string& what);
// The semantic rules of a parameter block: an empty string if valid, else
// a message naming the field.
std::string CheckParams(Codec codec, uint64_t elements, const Params& p);
// Payload size of the codecs whose payload size follows from the header
// alone (dense, onebit, terngrad); 0 with *fixed false for sparse codecs.
uint64_t FixedPayloadBytes(Codec codec, uint64_t elements, bool* fixed);

}  // namespace adacomp::wire
