// Fuzz target: arbitrary bytes -> the text corpus reader of src/train/data.h
// (AddTextFile for each file of a corpus; LoadTextCorpus on one file, raw or
// gzip).
//
// Input layout: one control byte, one test-fraction byte, then the files:
// each a u16 length (little-endian) and that many bytes (the last one takes
// what is left).
//   control bit 0: skip binary files (as when reading a directory)
//   control bit 1: LoadTextCorpus on an in-memory file holding the first
//                  file (the others unused)
//   control bit 2: gzip that file first (with bit 1)
//   fraction byte f: f / 200 for f <= 200 (0 .. 1 inclusive), else one of
//                  -0, -0.25, 1.5, NaN, +-inf, 1e-300, just below 1, huge
//
// Properties checked (abort on violation):
//  - never a crash, out-of-bounds access, UB or an allocation beyond the
//    limit (run with -malloc_limit_mb);
//  - a test fraction outside [0, 1) (NaN included) is InvalidArgument and
//    leaves the corpus unchanged;
//  - a file with a NUL byte is skipped (bit 0) or Corruption naming the file
//    with the corpus unchanged; an empty file is skipped;
//  - otherwise the file's first size - floor(size * f) bytes are appended to
//    train, the rest to test, and its name to files;
//  - LoadTextCorpus returns the same as AddTextFile on the bytes the file
//    holds, NotFound when no text is left, the error otherwise.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "file_fuzz_util.h"
#include "train/data.h"

namespace adacomp::fuzz {
namespace {

double Fraction(uint8_t f) {
  if (f <= 200) return f / 200.0;
  static const double kOdd[] = {-0.0,
                                -0.25,
                                1.5,
                                std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                1e-300,
                                std::nextafter(1.0, 0.0),
                                std::numeric_limits<double>::max()};
  return kOdd[(f - 201) % (sizeof(kOdd) / sizeof(kOdd[0]))];
}

bool Same(const train::TextCorpus& a, const train::TextCorpus& b) {
  return a.train == b.train && a.test == b.test && a.files == b.files;
}

// The expected outcome of AddTextFile: 0 added, 1 skipped, 2 rejected.
int Expect(std::span<const uint8_t> bytes, double fraction, bool skip_binary, size_t* test_bytes) {
  if (!(fraction >= 0.0 && fraction < 1.0)) return 2;
  bool nul = false;
  for (uint8_t b : bytes) nul = nul || b == 0;
  if (nul) return skip_binary ? 1 : 2;
  if (bytes.empty()) return 1;
  *test_bytes = static_cast<size_t>(std::floor(static_cast<double>(bytes.size()) * fraction));
  return 0;
}

// AddTextFile against Expect; returns its status.
Status CheckAdd(std::span<const uint8_t> bytes, const std::string& path, double fraction,
                bool skip_binary, train::TextCorpus* corpus) {
  const train::TextCorpus before = *corpus;
  size_t test_bytes = 0;
  const int want = Expect(bytes, fraction, skip_binary, &test_bytes);
  Status st = train::AddTextFile(bytes, path, fraction, skip_binary, corpus);
  FUZZ_CHECK(st.ok() == (want != 2), "AddTextFile: %s, expected outcome %d", st.ToString().c_str(),
             want);
  if (want != 0) {
    FUZZ_CHECK(Same(*corpus, before), "a skipped or rejected file changed the corpus");
    if (want == 2 && !(fraction >= 0.0 && fraction < 1.0)) {
      FUZZ_CHECK(st.code() == StatusCode::kInvalidArgument, "bad fraction: %s",
                 st.ToString().c_str());
    } else if (want == 2) {
      ExpectRejected(st, {StatusCode::kCorruption}, path);
    }
    return st;
  }
  FUZZ_CHECK(test_bytes <= bytes.size(), "reference split out of range");
  const size_t split = bytes.size() - test_bytes;
  FUZZ_CHECK(corpus->train.size() == before.train.size() + split &&
                 corpus->test.size() == before.test.size() + test_bytes,
             "split sizes are wrong (%zu + %zu expected)", split, test_bytes);
  FUZZ_CHECK(std::equal(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(split),
                        corpus->train.begin() + static_cast<std::ptrdiff_t>(before.train.size())),
             "train bytes differ");
  FUZZ_CHECK(std::equal(bytes.begin() + static_cast<std::ptrdiff_t>(split), bytes.end(),
                        corpus->test.begin() + static_cast<std::ptrdiff_t>(before.test.size())),
             "test bytes differ");
  FUZZ_CHECK(std::equal(before.train.begin(), before.train.end(), corpus->train.begin()) &&
                 std::equal(before.test.begin(), before.test.end(), corpus->test.begin()),
             "earlier text changed");
  FUZZ_CHECK(corpus->files.size() == before.files.size() + 1 && corpus->files.back() == path,
             "file list is wrong");
  return st;
}

}  // namespace
}  // namespace adacomp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adacomp;
  using namespace adacomp::fuzz;
  if (size < 2) return 0;
  const uint8_t control = data[0];
  const double fraction = Fraction(data[1]);
  std::span<const uint8_t> in(data + 2, size - 2);
  std::vector<std::vector<uint8_t>> files;
  while (!in.empty() && files.size() < 16) {
    size_t len = in.size() >= 2 ? (in[0] | (size_t{in[1]} << 8)) : 0;
    in = in.subspan(std::min<size_t>(2, in.size()));
    len = std::min(len, in.size());
    files.emplace_back(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(len));
    in = in.subspan(len);
  }
  if (files.empty()) files.emplace_back();
  const bool skip_binary = control & 1;

  if (control & 2) {
    static MemFile file("fuzz_text");
    const std::vector<uint8_t>& plain = files[0];
    const bool gzip = control & 4;
    const std::vector<uint8_t> stored = gzip ? Gzip(plain) : plain;
    const std::string& path = file.Set(stored);
    auto corpus = train::LoadTextCorpus(path, fraction);
    if (!(fraction >= 0.0 && fraction < 1.0)) {
      FUZZ_CHECK(!corpus.ok() && corpus.status().code() == StatusCode::kInvalidArgument,
                 "a bad fraction is not InvalidArgument: %s", corpus.status().ToString().c_str());
      return 0;
    }
    auto read = train::ReadMaybeGzip(path, uint64_t{1} << 30);
    if (!read.ok()) {
      FUZZ_CHECK(!gzip && IsGzipMagic(stored), "a valid file is unreadable: %s",
                 read.status().ToString().c_str());
      FUZZ_CHECK(!corpus.ok() && corpus.status().code() == read.status().code(),
                 "LoadTextCorpus reads a file ReadMaybeGzip rejects");
      return 0;
    }
    if (gzip) FUZZ_CHECK(*read == plain, "gzip round trip differs");
    if (!gzip && !IsGzipMagic(stored)) FUZZ_CHECK(*read == stored, "raw bytes changed");
    train::TextCorpus want;
    Status st = CheckAdd(*read, path, fraction, /*skip_binary=*/false, &want);
    if (!st.ok()) {
      FUZZ_CHECK(!corpus.ok() && corpus.status().code() == st.code(),
                 "LoadTextCorpus: %s, AddTextFile: %s", corpus.status().ToString().c_str(),
                 st.ToString().c_str());
      return 0;
    }
    if (want.train.empty()) {
      FUZZ_CHECK(!corpus.ok() && corpus.status().code() == StatusCode::kNotFound, "no text, yet %s",
                 corpus.status().ToString().c_str());
      return 0;
    }
    FUZZ_CHECK(corpus.ok() && Same(*corpus, want), "LoadTextCorpus differs from AddTextFile");
    return 0;
  }

  train::TextCorpus corpus;
  for (size_t i = 0; i < files.size(); ++i) {
    Status st =
        CheckAdd(files[i], "file" + std::to_string(i) + ".txt", fraction, skip_binary, &corpus);
    if (!st.ok()) break;
  }
  return 0;
}
