// Fuzz target: arbitrary bytes -> the CIFAR-10 batch reader of
// src/train/data.h (ParseCifarBatch, and ReadMaybeGzip before it the way
// LoadCifarDir reads a batch).
//
// Input layout: one control byte, then the batch bytes.
//   bit 0: go through a file (ReadMaybeGzip of an in-memory file) first
//   bit 1: gzip the bytes first (implies bit 0)
//   bit 2: parse into a set that already holds one record (appending)
//
// Properties checked (abort on violation):
//  - never a crash, out-of-bounds access, UB or an allocation beyond the
//    limit (run with -malloc_limit_mb);
//  - ParseCifarBatch accepts exactly a non-empty whole number of 3073-byte
//    records whose label bytes are all below 10; a rejection is Corruption
//    naming the file and leaves the set bit-for-bit unchanged;
//  - an accepted batch appends exactly its records: count grows by the
//    record count, labels by the label bytes, pixels by the 3072 bytes after
//    each label, and the shape fields are not touched.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "file_fuzz_util.h"
#include "train/data.h"

namespace adacomp::fuzz {
namespace {

constexpr size_t kRecord = 3073;

bool SameSet(const train::ImageSet& a, const train::ImageSet& b) {
  return a.count == b.count && a.channels == b.channels && a.height == b.height &&
         a.width == b.width && a.classes == b.classes && a.pixels == b.pixels &&
         a.labels == b.labels;
}

void Check(const std::vector<uint8_t>& bytes, const std::string& path, bool prefilled) {
  train::ImageSet set;
  set.channels = 3;
  set.height = 32;
  set.width = 32;
  if (prefilled) {
    set.count = 1;
    set.labels = {7};
    set.pixels.assign(kRecord - 1, 0x5a);
  }
  const train::ImageSet before = set;
  bool want = !bytes.empty() && bytes.size() % kRecord == 0;
  for (size_t r = 0; want && r < bytes.size() / kRecord; ++r) want = bytes[r * kRecord] < 10;
  Status st = train::ParseCifarBatch(bytes, path, &set);
  FUZZ_CHECK(st.ok() == want, "ParseCifarBatch %s a batch the reference %s (%s)",
             st.ok() ? "accepted" : "rejected", want ? "accepts" : "rejects",
             st.ToString().c_str());
  if (!st.ok()) {
    ExpectRejected(st, {StatusCode::kCorruption}, path);
    FUZZ_CHECK(SameSet(set, before), "a rejected batch changed the set");
    return;
  }
  const size_t n = bytes.size() / kRecord;
  FUZZ_CHECK(set.count == before.count + static_cast<int64_t>(n), "count is wrong");
  FUZZ_CHECK(set.channels == 3 && set.height == 32 && set.width == 32 && set.classes == 10,
             "shape fields changed");
  FUZZ_CHECK(set.labels.size() == before.labels.size() + n &&
                 set.pixels.size() == before.pixels.size() + n * (kRecord - 1),
             "sizes are wrong");
  FUZZ_CHECK(std::equal(before.labels.begin(), before.labels.end(), set.labels.begin()) &&
                 std::equal(before.pixels.begin(), before.pixels.end(), set.pixels.begin()),
             "existing records changed");
  for (size_t r = 0; r < n; ++r) {
    const uint8_t* rec = bytes.data() + r * kRecord;
    FUZZ_CHECK(set.labels[before.labels.size() + r] == rec[0], "label %zu differs", r);
    FUZZ_CHECK(std::equal(rec + 1, rec + kRecord,
                          set.pixels.begin() + static_cast<std::ptrdiff_t>(before.pixels.size() +
                                                                           r * (kRecord - 1))),
               "pixels of record %zu differ", r);
  }
}

}  // namespace
}  // namespace adacomp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adacomp;
  using namespace adacomp::fuzz;
  if (size < 1) return 0;
  const uint8_t control = data[0];
  std::vector<uint8_t> bytes(data + 1, data + size);
  std::string path = "fuzz_batch.bin";
  if (control & 3) {
    static MemFile file("fuzz_cifar");
    const std::vector<uint8_t> plain = bytes;
    if (control & 2) bytes = Gzip(bytes);
    path = file.Set(bytes);
    constexpr uint64_t kMax = uint64_t{1} << 20;
    auto read = train::ReadMaybeGzip(path, kMax);
    if (!read.ok()) {
      ExpectRejected(read.status(), {StatusCode::kCorruption, StatusCode::kOutOfRange}, path);
      FUZZ_CHECK(!(control & 2) && IsGzipMagic(bytes), "a valid file is unreadable: %s",
                 read.status().ToString().c_str());
      return 0;
    }
    if (control & 2) FUZZ_CHECK(*read == plain, "gzip round trip differs");
    if (!(control & 2) && !IsGzipMagic(bytes)) FUZZ_CHECK(*read == bytes, "raw bytes changed");
    bytes = std::move(*read);
  }
  Check(bytes, path, control & 4);
  return 0;
}
