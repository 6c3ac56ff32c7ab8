// Fuzz target: arbitrary bytes -> the frame decoder (InspectFrame,
// DecodeAccumulate, and the internal DecodeFrame / EncodeFrame).
//
// Input layout: one control byte, then a stream of (possibly back-to-back)
// frames. Control bit 0: recompute each frame's CRC32C before decoding
// ("reseal"; without it almost every mutation dies at the checksum). Control
// bits 1-2: how the destination of a rejected frame is sized (the element
// count the header claims, +1, -1, or 0).
//
// Properties checked on every frame of the stream (abort on violation):
//  - never a crash, out-of-bounds access or UB (ASan/UBSan), never an
//    allocation beyond the small limits (run with -malloc_limit_mb);
//  - InspectFrame, DecodeFrame and DecodeAccumulate agree on accept/reject;
//    the small limits (1 MiB, 2^20 elements) and the defaults agree whenever
//    the frame is within both;
//  - a rejected frame returns Corruption or OutOfRange and leaves dst and
//    *info bit-for-bit untouched;
//  - an accepted frame re-encodes (EncodeFrame of the DecodeFrame result) to
//    the identical bytes (the encoding is canonical), and DecodeAccumulate
//    adds exactly the values an independent scalar dequantizer computes from
//    the decoded structure;
//  - limits (issue 7 item 5): the same accepted frame is rejected, with dst
//    untouched, when max_frame_bytes is one byte short, max_elements is one
//    short, the expected tensor id differs, or dst has one element more or
//    less; any strict prefix of it is rejected.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "adacomp/codec.h"
#include "fuzz_util.h"
#include "wire/frame.h"

namespace adacomp::fuzz {
namespace {

constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxElements = uint64_t{1} << 17;  // covers onebit frames up to -max_len
constexpr int kMaxFramesPerInput = 16;

DecodeOptions SmallOptions() {
  DecodeOptions o;
  o.max_frame_bytes = kMaxFrameBytes;
  o.max_elements = kMaxElements;
  return o;
}

// IEEE half -> float, written independently of core/half.h.
float HalfBitsToFloat(uint16_t h) {
  const int exp = (h >> 10) & 31;
  const int mant = h & 1023;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return static_cast<float>((h & 0x8000) ? -v : v);
}

bool SameInfo(const FrameInfo& a, const FrameInfo& b) {
  return a.version == b.version && a.codec == b.codec && a.tensor_id == b.tensor_id &&
         a.elements == b.elements && a.params_bytes == b.params_bytes &&
         a.payload_bytes == b.payload_bytes && a.frame_bytes == b.frame_bytes &&
         a.crc32c == b.crc32c && a.selected == b.selected && a.bin_size == b.bin_size &&
         a.values == b.values &&
         std::bit_cast<uint32_t>(a.scale) == std::bit_cast<uint32_t>(b.scale) &&
         std::bit_cast<uint32_t>(a.scale2) == std::bit_cast<uint32_t>(b.scale2);
}

// What DecodeAccumulate must do to dst, computed from the decoded structure
// by plain loops: dst[i] = dst[i] + value for every element the frame carries
// a value for, nothing elsewhere.
void ReferenceAccumulate(const wire::Frame& f, std::span<float> dst) {
  const wire::Params& p = f.params;
  switch (f.codec) {
    case Codec::kDense:
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = dst[i] + f.values[i];
      break;
    case Codec::kAdaComp:
    case Codec::kTopK:
    case Codec::kThreshold:
      for (size_t j = 0; j < f.indices.size(); ++j) {
        float v = 0.0f;
        if (f.codec == Codec::kThreshold ||
            (f.codec == Codec::kAdaComp && p.values == ValueMode::kTernary)) {
          v = f.negative[j] ? -p.scale : p.scale;
        } else if (f.codec == Codec::kAdaComp && p.values == ValueMode::kFp16) {
          v = HalfBitsToFloat(f.half_values[j]);
        } else {
          v = f.values[j];
        }
        dst[f.indices[j]] = dst[f.indices[j]] + v;
      }
      break;
    case Codec::kOneBit:
      for (size_t i = 0; i < dst.size(); ++i) {
        dst[i] = dst[i] + (f.symbols[i] ? p.scale2 : p.scale);
      }
      break;
    case Codec::kTernGrad:
      for (size_t i = 0; i < dst.size(); ++i) {
        if (f.symbols[i] == 1) dst[i] = dst[i] + p.scale;
        if (f.symbols[i] == 2) dst[i] = dst[i] + -p.scale;
      }
      break;
  }
}

// Decodes with `options` into a fresh pattern-filled dst of `dst_size`
// elements and checks that the call fails with one of the allowed codes and
// leaves dst and *info untouched.
void ExpectRejected(std::span<const uint8_t> bytes, size_t dst_size, const DecodeOptions& options,
                    std::initializer_list<StatusCode> allowed, const char* what) {
  std::vector<float> dst(dst_size), before(dst_size);
  FillPattern(dst, static_cast<uint32_t>(dst_size));
  before = dst;
  FrameInfo info;
  info.tensor_id = 0xDEADBEEF;
  const Status s = DecodeAccumulate(bytes, dst, &info, options);
  FUZZ_CHECK(!s.ok(), "%s: DecodeAccumulate accepted it", what);
  bool code_ok = false;
  for (StatusCode c : allowed) code_ok |= s.code() == c;
  FUZZ_CHECK(code_ok, "%s: unexpected status %s", what, s.ToString().c_str());
  FUZZ_CHECK(!s.message().empty(), "%s: empty error message", what);
  const long d = FirstBitDifference(dst, before);
  FUZZ_CHECK(d < 0, "%s: rejected frame changed dst[%ld] (%s)", what, d, s.ToString().c_str());
  FUZZ_CHECK(info.tensor_id == 0xDEADBEEF, "%s: rejected frame wrote *info", what);
  // The multi-frame calls reject two copies of it too, with the same status,
  // naming the first, dst untouched.
  const std::span<const uint8_t> two[] = {bytes, bytes};
  size_t bad = 99;
  const Status sa = DecodeAccumulateAll(two, dst, {}, options, &bad);
  FUZZ_CHECK(sa.ToString() == s.ToString() && bad == 0,
             "%s: DecodeAccumulateAll said %s (frame %zu)", what, sa.ToString().c_str(), bad);
  const Status sv = DecodeAverageAll(two, dst, {}, options);
  FUZZ_CHECK(!sv.ok(), "%s: DecodeAverageAll accepted it", what);
  FUZZ_CHECK(FirstBitDifference(dst, before) < 0, "%s: the multi-frame calls changed dst", what);
}

// Checks one frame at bytes[0]; returns its length if accepted, else 0.
size_t CheckFrame(std::span<const uint8_t> bytes, uint8_t control,
                  const std::optional<LightFrame>& light) {
  const DecodeOptions small = SmallOptions();
  FrameInfo info;
  const Status s = InspectFrame(bytes, &info, small);
  FrameInfo info_default;
  const Status s_default = InspectFrame(bytes, &info_default, DecodeOptions{});
  wire::Frame frame;
  size_t frame_len = 0;
  const Status s_frame = wire::DecodeFrame(bytes, DecodeOptions{}, &frame, &frame_len);

  FUZZ_CHECK(s_default.ok() == s_frame.ok(), "InspectFrame (%s) and DecodeFrame (%s) disagree",
             s_default.ToString().c_str(), s_frame.ToString().c_str());
  if (s.ok()) {
    FUZZ_CHECK(s_default.ok(), "accepted with small limits, rejected with defaults: %s",
               s_default.ToString().c_str());
    FUZZ_CHECK(SameInfo(info, info_default), "FrameInfo depends on the limits");
  } else if (s_default.ok()) {
    FUZZ_CHECK(
        s.code() == StatusCode::kOutOfRange &&
            (info_default.frame_bytes > kMaxFrameBytes || info_default.elements > kMaxElements),
        "a frame within the small limits was rejected only with them: %s", s.ToString().c_str());
  }

  if (!s.ok()) {
    FUZZ_CHECK(s.code() == StatusCode::kCorruption || s.code() == StatusCode::kOutOfRange,
               "unexpected status for a bad frame: %s", s.ToString().c_str());
    // DecodeAccumulate must reject it too, whatever the destination size,
    // before touching the destination.
    uint64_t n = light ? std::min<uint64_t>(light->elements, kMaxElements) : 0;
    switch ((control >> 1) & 3) {
      case 1:
        n += 1;
        break;
      case 2:
        n = n ? n - 1 : 0;
        break;
      case 3:
        n = 0;
        break;
      default:
        break;
    }
    ExpectRejected(bytes, static_cast<size_t>(n), small,
                   {StatusCode::kCorruption, StatusCode::kOutOfRange, StatusCode::kInvalidArgument},
                   "bad frame");
    return 0;
  }

  // ---- Accepted frame ----
  const size_t len = static_cast<size_t>(info.frame_bytes);
  FUZZ_CHECK(len >= wire::kMinFrameBytes && len <= bytes.size(), "frame_bytes %zu of %zu", len,
             bytes.size());
  FUZZ_CHECK(info.elements <= kMaxElements, "elements beyond max_elements accepted");
  FUZZ_CHECK(info.version == wire::kVersion, "version");
  FUZZ_CHECK(frame_len == len, "DecodeFrame length %zu != %zu", frame_len, len);
  FUZZ_CHECK(frame.codec == info.codec && frame.tensor_id == info.tensor_id &&
                 frame.elements == info.elements,
             "DecodeFrame header differs from InspectFrame");
  if (light) {
    FUZZ_CHECK(
        light->end == len && light->elements == info.elements && light->tensor_id == info.tensor_id,
        "the frame layout differs from the documented one");
  }
  const std::span<const uint8_t> exact = bytes.first(len);

  // Canonical encoding: decode -> encode gives the same bytes.
  std::vector<uint8_t> again;
  const Status enc = wire::EncodeFrame(frame, &again);
  FUZZ_CHECK(enc.ok(), "EncodeFrame rejects a decoded frame: %s", enc.ToString().c_str());
  FUZZ_CHECK(again.size() == len && std::equal(again.begin(), again.end(), exact.begin()),
             "re-encoding differs (%zu vs %zu bytes)", again.size(), len);

  // selected as reported.
  uint64_t selected = 0;
  switch (frame.codec) {
    case Codec::kDense:
    case Codec::kOneBit:
      selected = frame.elements;
      break;
    case Codec::kTernGrad:
      for (uint8_t t : frame.symbols) selected += t != 0;
      break;
    default:
      selected = frame.indices.size();
      break;
  }
  FUZZ_CHECK(info.selected == selected, "selected %llu, structure has %llu",
             static_cast<unsigned long long>(info.selected),
             static_cast<unsigned long long>(selected));

  // Accumulate into a pattern and compare with the scalar reference.
  const size_t n = static_cast<size_t>(info.elements);
  std::vector<float> dst(n), expected(n);
  FillPattern(dst, control);
  expected = dst;
  ReferenceAccumulate(frame, expected);
  DecodeOptions with_id = small;
  with_id.expected_tensor_id = info.tensor_id;
  FrameInfo info2;
  const Status sa = DecodeAccumulate(bytes, dst, &info2, with_id);
  FUZZ_CHECK(sa.ok(), "InspectFrame accepted, DecodeAccumulate rejected: %s",
             sa.ToString().c_str());
  FUZZ_CHECK(SameInfo(info, info2), "DecodeAccumulate's info differs");
  const long d = FirstBitDifference(dst, expected);
  FUZZ_CHECK(d < 0, "dequantized element %ld differs from the reference", d);
  // Two copies at once: the same as adding it twice, frame after frame.
  {
    std::vector<float> twice = dst;
    ReferenceAccumulate(frame, twice);
    std::vector<float> all(n);
    FillPattern(all, control);
    std::vector<FrameInfo> infos(2);
    const std::span<const uint8_t> two[] = {bytes, bytes};
    const Status s2 = DecodeAccumulateAll(two, all, infos, with_id);
    FUZZ_CHECK(s2.ok(), "DecodeAccumulateAll rejected an accepted frame: %s",
               s2.ToString().c_str());
    FUZZ_CHECK(SameInfo(infos[1], info), "DecodeAccumulateAll's info differs");
    FUZZ_CHECK(FirstBitDifference(all, twice) < 0, "DecodeAccumulateAll differs from twice");
  }

  // Limits: each must reject the otherwise good frame before dst is touched.
  DecodeOptions o = small;
  o.max_frame_bytes = len - 1;
  ExpectRejected(bytes, n, o, {StatusCode::kOutOfRange}, "max_frame_bytes one short");
  if (n > 0) {
    o = small;
    o.max_elements = n - 1;
    ExpectRejected(bytes, n, o, {StatusCode::kOutOfRange}, "max_elements one short");
    ExpectRejected(bytes, n - 1, small, {StatusCode::kInvalidArgument}, "dst one short");
  }
  ExpectRejected(bytes, n + 1, small, {StatusCode::kInvalidArgument}, "dst one long");
  o = small;
  o.expected_tensor_id = info.tensor_id ^ 1u;
  ExpectRejected(bytes, n, o, {StatusCode::kInvalidArgument, StatusCode::kNotFound},
                 "other tensor id");
  // Strict prefixes (cut inside the payload/checksum, and inside the header).
  ExpectRejected(exact.first(len - 1 - (control % len)), n, small,
                 {StatusCode::kCorruption, StatusCode::kOutOfRange}, "truncated frame");
  return len;
}

}  // namespace
}  // namespace adacomp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adacomp::fuzz;
  if (size == 0) {
    adacomp::FrameInfo info;
    FUZZ_CHECK(!adacomp::InspectFrame({}, &info).ok(), "empty input accepted");
    return 0;
  }
  const uint8_t control = data[0];
  std::vector<uint8_t> buf(data + 1, data + size);
  const bool reseal = control & 1;
  size_t off = 0;
  for (int i = 0; i < kMaxFramesPerInput && off < buf.size(); ++i) {
    std::span<uint8_t> rest(buf.data() + off, buf.size() - off);
    const std::optional<LightFrame> light = LightParse(rest);
    if (reseal && light) Reseal(rest, *light);
    size_t next = CheckFrame(rest, control, light);
    if (next == 0) {
      if (!light) break;
      next = light->end;  // keep walking past a bad frame whose length is readable
    }
    off += next;
  }
  return 0;
}
