// Fuzz target: arbitrary bytes -> the checkpoint reader (CheckpointView::Parse,
// Get / GetU64 / GetString, ReadWholeFile), src/train/checkpoint.h.
//
// Input layout: one control byte, then the file image. Control bit 0: write
// the image's own length into the header's total-length field; bit 1:
// recompute the SHA-256 trailer (without both, almost every mutation dies at
// the length or checksum check and never reaches the record parser); bit 2:
// read the image back through a file (ReadWholeFile) before parsing.
//
// Properties checked (abort on violation):
//  - never a crash, out-of-bounds access, UB or an allocation beyond the
//    limit (run with -malloc_limit_mb);
//  - Parse accepts exactly the images that an independent reading of the
//    layout of checkpoint.h accepts (magic, version 1, total length,
//    checksum, records that end exactly at the trailer, distinct names);
//  - a rejected image is Corruption with a message starting "<origin>: ";
//  - an accepted image holds exactly the records the independent reading
//    finds (Has / Get / GetU64 / GetString agree with the record bytes), a
//    name that is not there is reported missing, and CheckpointBuilder
//    rebuilds the identical image from the records in file order;
//  - the image without its last byte is rejected.
#include <cstdint>
#include <cstring>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "file_fuzz_util.h"
#include "train/checkpoint.h"
#include "train/sha256.h"

namespace adacomp::fuzz {
namespace {

constexpr char kOrigin[] = "fuzz.ckpt";

uint64_t Le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

struct Record {
  std::string name;
  std::vector<uint8_t> data;
};

// The independent reading: true and the records in file order when the
// image is a well-formed checkpoint.
bool Reference(std::span<const uint8_t> b, std::vector<Record>* records) {
  records->clear();
  if (b.size() < 56) return false;
  static const uint8_t kMagic[8] = {'A', 'D', 'A', 'C', 'K', 'P', 'T', 0};
  if (std::memcmp(b.data(), kMagic, 8) != 0) return false;
  if (Le(b.data() + 8, 4) != 1) return false;
  if (Le(b.data() + 16, 8) != b.size()) return false;
  train::Sha256 h;
  h.Update(b.first(b.size() - 32));
  const auto digest = h.Digest();
  if (std::memcmp(digest.data(), b.data() + b.size() - 32, 32) != 0) return false;
  const uint64_t count = Le(b.data() + 12, 4);
  const uint64_t end = b.size() - 32;
  uint64_t pos = 24;
  std::set<std::string> seen;
  for (uint64_t r = 0; r < count; ++r) {
    if (pos + 4 > end) return false;
    const uint64_t name_len = Le(b.data() + pos, 4);
    pos += 4;
    if (pos + name_len + 8 > end) return false;
    Record rec;
    rec.name.assign(reinterpret_cast<const char*>(b.data() + pos), name_len);
    pos += name_len;
    const uint64_t len = Le(b.data() + pos, 8);
    pos += 8;
    if (len > end - pos) return false;
    rec.data.assign(b.begin() + static_cast<std::ptrdiff_t>(pos),
                    b.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
    if (!seen.insert(rec.name).second) return false;  // a name twice
    records->push_back(std::move(rec));
  }
  return pos == end;
}

void CheckImage(std::span<const uint8_t> image) {
  std::vector<Record> expected;
  const bool want = Reference(image, &expected);
  auto view = train::CheckpointView::Parse(image, kOrigin);
  FUZZ_CHECK(view.ok() == want, "Parse %s an image the reference %s (%s)",
             view.ok() ? "accepted" : "rejected", want ? "accepts" : "rejects",
             view.ok() ? "" : view.status().ToString().c_str());
  if (!view.ok()) {
    ExpectRejected(view.status(), {StatusCode::kCorruption}, kOrigin);
    return;
  }
  FUZZ_CHECK(view->origin() == kOrigin, "origin changed");
  train::CheckpointBuilder rebuilt;
  std::string absent = "absent";
  for (const Record& r : expected) {
    FUZZ_CHECK(view->Has(r.name), "record missing");
    auto got = view->Get(r.name);
    FUZZ_CHECK(got.ok(), "Get failed: %s", got.status().ToString().c_str());
    FUZZ_CHECK(got->size() == r.data.size() && std::equal(got->begin(), got->end(), r.data.begin()),
               "record bytes differ");
    auto u64 = view->GetU64(r.name);
    FUZZ_CHECK(u64.ok() == (r.data.size() == 8), "GetU64 accepts a %zu-byte record", r.data.size());
    if (u64.ok()) FUZZ_CHECK(*u64 == Le(r.data.data(), 8), "GetU64 value differs");
    if (!u64.ok()) ExpectRejected(u64.status(), {StatusCode::kCorruption}, kOrigin);
    auto str = view->GetString(r.name);
    FUZZ_CHECK(str.ok() && *str == std::string(r.data.begin(), r.data.end()), "GetString differs");
    rebuilt.Add(r.name, r.data);
    while (absent == r.name) absent += "!";
  }
  bool absent_is_present = false;
  for (const Record& r : expected) absent_is_present = absent_is_present || r.name == absent;
  if (!absent_is_present) {
    FUZZ_CHECK(!view->Has(absent), "Has invents a record");
    auto missing = view->Get(absent);
    ExpectRejected(missing.status(), {StatusCode::kCorruption}, kOrigin);
  }
  const std::vector<uint8_t> again = rebuilt.Serialize();
  FUZZ_CHECK(again.size() == image.size() && std::equal(again.begin(), again.end(), image.begin()),
             "the builder does not rebuild the accepted image");
  auto shorter = train::CheckpointView::Parse(image.first(image.size() - 1), kOrigin);
  FUZZ_CHECK(!shorter.ok(), "a truncated image is accepted");
}

}  // namespace
}  // namespace adacomp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adacomp;
  using namespace adacomp::fuzz;
  if (size < 1) return 0;
  const uint8_t control = data[0];
  std::vector<uint8_t> image(data + 1, data + size);
  if ((control & 1) && image.size() >= 24) {
    const uint64_t n = image.size();
    for (int i = 0; i < 8; ++i) image[16 + i] = static_cast<uint8_t>(n >> (8 * i));
  }
  if ((control & 2) && image.size() >= 56) {
    train::Sha256 h;
    h.Update(std::span<const uint8_t>(image).first(image.size() - 32));
    const auto digest = h.Digest();
    std::memcpy(image.data() + image.size() - 32, digest.data(), 32);
  }
  if (control & 4) {
    static MemFile file("fuzz_checkpoint");
    auto read = train::ReadWholeFile(file.Set(image));
    FUZZ_CHECK(read.ok() && *read == image, "ReadWholeFile does not return the file's bytes");
  }
  CheckImage(image);
  return 0;
}
