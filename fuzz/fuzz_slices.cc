// Fuzz target: arbitrary bytes -> the reduce-scatter's two messages
// (src/exchange/slice_messages.h).
//
// Input layout: control byte c, then bytes b.
//   c bit 0 = 0: b is an owner's message for k = 1 + (c >> 1) % 3 slices of
//     1 + b_i elements (the first k bytes of b; tensor ids 0 .. k-1); the rest
//     is the message. ReadSlicesMessage with decode on.
//   c bit 0 = 1: b is a frame (its checksum recomputed when c bit 1 is set),
//     cut into p = 1 + (c >> 2) % 8 pieces when the decoder accepts it.
// Properties (abort on violation):
//  - never a crash, out-of-bounds access or UB (ASan/UBSan);
//  - a refused owner's message leaves every destination bit for bit as it
//    was, and names a slice index <= k; an accepted one reads the same
//    statistics again with decode off;
//  - an accepted frame always cuts; every piece is one whole frame that
//    dequantizes bit for bit to the frame's values over its slice, and empty
//    slices get no piece.
#include <cstdint>
#include <span>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/slices.h"
#include "fuzz_util.h"

namespace adacomp::fuzz {
namespace {

constexpr uint64_t kMaxElements = uint64_t{1} << 16;

void OwnerMessage(uint8_t control, std::span<const uint8_t> b) {
  const size_t k = 1 + (control >> 1) % 3;
  if (b.size() < k) return;
  std::vector<std::vector<float>> dst(k), before(k);
  std::vector<MessageTensor> slices;
  for (size_t i = 0; i < k; ++i) {
    dst[i].resize(1 + b[i]);
    FillPattern(dst[i], static_cast<uint32_t>(i));
    before[i] = dst[i];
  }
  for (size_t i = 0; i < k; ++i) slices.push_back({static_cast<uint32_t>(i), dst[i]});
  const std::span<const uint8_t> m = b.subspan(k);
  std::vector<SliceStats> stats(k);
  size_t bad = 12345;
  const Status st = ReadSlicesMessage(m, slices, stats, true, &bad);
  if (!st.ok()) {
    FUZZ_CHECK(bad <= k, "bad slice %zu of %zu", bad, k);
    for (size_t i = 0; i < k; ++i) {
      FUZZ_CHECK(FirstBitDifference(dst[i], before[i]) < 0,
                 "slice %zu written by a refused message", i);
    }
    return;
  }
  std::vector<SliceStats> again(k);
  FUZZ_CHECK(ReadSlicesMessage(m, slices, again, false).ok(),
             "accepted, then refused without decoding");
  for (size_t i = 0; i < k; ++i) {
    FUZZ_CHECK(again[i].bytes == stats[i].bytes && again[i].selected == stats[i].selected,
               "statistics of slice %zu differ", i);
  }
}

void Cut(uint8_t control, std::span<const uint8_t> in) {
  std::vector<uint8_t> b(in.begin(), in.end());
  if (control & 2) {
    if (auto lf = LightParse(b); lf && lf->end <= b.size()) Reseal(b, *lf);
  }
  FrameInfo info;
  DecodeOptions o;
  o.max_elements = kMaxElements;
  o.max_frame_bytes = 1 << 20;
  if (!InspectFrame(b, &info, o).ok()) return;
  const std::span<const uint8_t> frame(b.data(), info.frame_bytes);
  std::vector<float> whole(info.elements, 0.0f);
  FUZZ_CHECK(DecodeAccumulate(frame, whole, nullptr, o).ok(), "inspected but not decoded");
  const int p = 1 + (control >> 2) % 8;
  std::vector<std::vector<uint8_t>> pieces(p);
  const Status st = CutFrame(frame, p, &pieces);
  FUZZ_CHECK(st.ok(), "an accepted frame did not cut: %s", st.ToString().c_str());
  size_t begin = 0;
  for (int d = 0; d < p; ++d) {
    const size_t len = info.elements / p + (static_cast<uint64_t>(d) < info.elements % p ? 1 : 0);
    if (len == 0) {
      FUZZ_CHECK(pieces[d].empty(), "empty slice %d got a piece", d);
      continue;
    }
    std::vector<float> part(len, 0.0f);
    FrameInfo pi;
    const Status ps = DecodeAccumulate(pieces[d], part, &pi);
    FUZZ_CHECK(ps.ok(), "piece %d does not decode: %s", d, ps.ToString().c_str());
    FUZZ_CHECK(pi.frame_bytes == pieces[d].size(), "piece %d is not one whole frame", d);
    FUZZ_CHECK(FirstBitDifference(part, std::span<const float>(whole).subspan(begin, len)) < 0,
               "piece %d differs from the frame's slice", d);
    begin += len;
  }
  FUZZ_CHECK(begin == info.elements, "slices cover %zu of %llu elements", begin,
             static_cast<unsigned long long>(info.elements));
}

}  // namespace
}  // namespace adacomp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> b(data + 1, size - 1);
  if (data[0] & 1) {
    adacomp::fuzz::Cut(data[0], b);
  } else {
    adacomp::fuzz::OwnerMessage(data[0], b);
  }
  return 0;
}
