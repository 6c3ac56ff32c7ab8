// Fuzz target: arbitrary bytes -> the IDX reader of src/train/data.h
// (ReadMaybeGzip, gzip or raw; ParseIdx; ReadIdxPair).
//
// Input layout: one control byte, then the file bytes.
//   bit 0: expected rank 1 (labels) instead of 3 (images)
//   bit 1: go through a file: ReadMaybeGzip of an in-memory file holding the
//          bytes, then ParseIdx of what it returns (else ParseIdx directly)
//   bit 2: gzip the bytes first (a valid stream around fuzzed content;
//          without it the bytes may still be a fuzzed gzip stream)
//   bit 3: pair mode: the bytes are u16 length L (little-endian), L bytes of
//          an image file, then a label file; both go through files (gzipped
//          when bit 2) and ReadIdxPair
//
// Properties checked (abort on violation):
//  - never a crash, out-of-bounds access, UB or an allocation beyond the
//    limit (run with -malloc_limit_mb);
//  - ReadMaybeGzip returns raw bytes unchanged, a gzip stream made here
//    exactly as it went in, never more than its max_bytes, and rejects with
//    Corruption / OutOfRange naming the file;
//  - ParseIdx accepts exactly what an independent reading of the IDX rules
//    accepts (magic 00 00 08 rank, nonzero dimensions, dimensions after the
//    first at most 4096, exact payload size), and then returns the header's
//    dimensions and the payload; a rejection is Corruption naming the file;
//  - ReadIdxPair accepts exactly when both files parse, the counts agree and
//    then returns the parsed pixels and labels and one class more than the
//    largest label (any u8 label is a class).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "file_fuzz_util.h"
#include "train/data.h"

namespace adacomp::fuzz {
namespace {

constexpr uint64_t kMaxBytes = uint64_t{1} << 20;

struct Idx {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

bool Reference(std::span<const uint8_t> b, int rank, Idx* out) {
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (b.size() < header || b[0] != 0 || b[1] != 0 || b[2] != 8 || b[3] != rank) return false;
  out->dims.clear();
  unsigned __int128 total = 1;
  for (int d = 0; d < rank; ++d) {
    const uint8_t* p = b.data() + 4 + 4 * d;
    const uint64_t v =
        (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | uint64_t{p[3]};
    if (v == 0 || (d > 0 && v > 4096)) return false;
    total *= v;
    out->dims.push_back(static_cast<int64_t>(v));
  }
  if (total != b.size() - header) return false;
  out->data.assign(b.begin() + static_cast<std::ptrdiff_t>(header), b.end());
  return true;
}

// ParseIdx of bytes against the reference; true when accepted.
bool CheckParse(const std::vector<uint8_t>& bytes, int rank, const std::string& path, Idx* got) {
  Idx want;
  const bool ok = Reference(bytes, rank, &want);
  Status st = train::ParseIdx(bytes, rank, path, &got->dims, &got->data);
  FUZZ_CHECK(st.ok() == ok, "ParseIdx %s a file the reference %s (%s)",
             st.ok() ? "accepted" : "rejected", ok ? "accepts" : "rejects", st.ToString().c_str());
  if (!st.ok()) {
    ExpectRejected(st, {StatusCode::kCorruption}, path);
    return false;
  }
  FUZZ_CHECK(got->dims == want.dims, "dimensions differ");
  FUZZ_CHECK(got->data == want.data, "payload differs");
  return true;
}

// ReadMaybeGzip of a file holding `stored`; `plain` is what went into the
// gzip stream when this target made it (else null).
Result<std::vector<uint8_t>> CheckRead(MemFile* file, const std::vector<uint8_t>& stored,
                                       const std::vector<uint8_t>* plain, uint64_t max_bytes) {
  const std::string& path = file->Set(stored);
  auto read = train::ReadMaybeGzip(path, max_bytes);
  if (!read.ok()) {
    ExpectRejected(read.status(), {StatusCode::kCorruption, StatusCode::kOutOfRange}, path);
    if (plain != nullptr) {
      FUZZ_CHECK(plain->size() > max_bytes, "a valid gzip stream is rejected: %s",
                 read.status().ToString().c_str());
    }
    if (plain == nullptr && !IsGzipMagic(stored)) {
      FUZZ_CHECK(stored.size() > max_bytes, "a raw file is rejected: %s",
                 read.status().ToString().c_str());
    }
    return read;
  }
  FUZZ_CHECK(read->size() <= max_bytes, "more than max_bytes returned");
  if (plain != nullptr) FUZZ_CHECK(*read == *plain, "gzip round trip differs");
  if (plain == nullptr && !IsGzipMagic(stored)) FUZZ_CHECK(*read == stored, "raw bytes changed");
  return read;
}

void PairMode(std::span<const uint8_t> in, bool gzip) {
  if (in.size() < 2) return;
  size_t len = in[0] | (size_t{in[1]} << 8);
  in = in.subspan(2);
  if (len > in.size()) len = in.size();
  std::vector<uint8_t> images(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(len));
  std::vector<uint8_t> labels(in.begin() + static_cast<std::ptrdiff_t>(len), in.end());
  const std::vector<uint8_t> plain_images = images, plain_labels = labels;
  if (gzip) {
    images = Gzip(images);
    labels = Gzip(labels);
  }
  static MemFile image_file("fuzz_idx_images");
  static MemFile label_file("fuzz_idx_labels");
  // The reference: each file on its own, read with ReadIdxPair's own limit
  // (the same bytes, so the same outcome).
  constexpr uint64_t kPairMax = uint64_t{1} << 31;
  auto ib = CheckRead(&image_file, images, gzip ? &plain_images : nullptr, kPairMax);
  auto lb = CheckRead(&label_file, labels, gzip ? &plain_labels : nullptr, kPairMax);
  Idx ii, li;
  const bool iok = ib.ok() && CheckParse(*ib, 3, image_file.path(), &ii);
  const bool lok = lb.ok() && CheckParse(*lb, 1, label_file.path(), &li);
  const bool want = iok && lok && ii.dims[0] == li.dims[0];
  int classes = 0;  // the reference: one more than the largest label
  for (uint8_t label : li.data) classes = label + 1 > classes ? label + 1 : classes;
  auto set = train::ReadIdxPair(image_file.path(), label_file.path());
  FUZZ_CHECK(set.ok() == want, "ReadIdxPair %s a pair the reference %s (%s)",
             set.ok() ? "accepted" : "rejected", want ? "accepts" : "rejects",
             set.ok() ? "" : set.status().ToString().c_str());
  if (!set.ok()) {
    FUZZ_CHECK(set.status().code() == StatusCode::kCorruption ||
                   set.status().code() == StatusCode::kOutOfRange,
               "unexpected status %s", set.status().ToString().c_str());
    return;
  }
  FUZZ_CHECK(set->count == ii.dims[0] && set->height == ii.dims[1] && set->width == ii.dims[2] &&
                 set->channels == 1 && set->classes == classes,
             "shape differs");
  FUZZ_CHECK(set->pixels == ii.data && set->labels == li.data, "contents differ");
  FUZZ_CHECK(static_cast<int64_t>(set->pixels.size()) == set->count * set->image_bytes(),
             "pixel count does not match the shape");
}

}  // namespace
}  // namespace adacomp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adacomp;
  using namespace adacomp::fuzz;
  if (size < 1) return 0;
  const uint8_t control = data[0];
  std::span<const uint8_t> in(data + 1, size - 1);
  const bool gzip = control & 4;
  if (control & 8) {
    PairMode(in, gzip);
    return 0;
  }
  const int rank = (control & 1) ? 1 : 3;
  std::vector<uint8_t> bytes(in.begin(), in.end());
  if ((control & 2) || gzip) {
    static MemFile file("fuzz_idx");
    const std::vector<uint8_t> plain = bytes;
    if (gzip) bytes = Gzip(bytes);
    // A small limit on some inputs, so the OutOfRange path is reached too.
    const uint64_t max_bytes = (control & 16) ? 64 : kMaxBytes;
    auto read = CheckRead(&file, bytes, gzip ? &plain : nullptr, max_bytes);
    if (!read.ok()) return 0;
    bytes = std::move(*read);
  }
  Idx got;
  CheckParse(bytes, rank, "fuzz.idx", &got);
  return 0;
}
