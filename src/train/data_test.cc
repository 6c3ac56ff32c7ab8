#include "data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "test_files.h"

namespace adacomp::train {
namespace {

using testing::IdxBytes;
using testing::TempDir;
using testing::WriteBytes;

std::vector<uint8_t> Ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + 7);
  return v;
}

void ExpectError(const Status& st, StatusCode code, const std::string& file,
                 const std::string& what) {
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_NE(st.message().find(file), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find(what), std::string::npos) << st.ToString();
}

TEST(Idx, ReadsRawAndGzipPairs) {
  for (bool gz : {false, true}) {
    TempDir dir("idx");
    auto pixels = Ramp(3 * 28 * 28);
    std::vector<uint8_t> labels = {3, 0, 9};
    std::string ext = gz ? ".gz" : "";
    WriteBytes(dir.Path("train-images-idx3-ubyte" + ext), IdxBytes({3, 28, 28}, pixels), gz);
    WriteBytes(dir.Path("train-labels-idx1-ubyte" + ext), IdxBytes({3}, labels), gz);
    auto set = LoadMnistDir(dir.Path(), true);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_EQ(set->count, 3);
    EXPECT_EQ(set->height, 28);
    EXPECT_EQ(set->width, 28);
    EXPECT_EQ(set->channels, 1);
    EXPECT_EQ(set->pixels, pixels);
    EXPECT_EQ(set->labels, labels);
  }
}

TEST(Idx, MissingFileIsNamed) {
  TempDir dir("idx");
  auto set = LoadMnistDir(dir.Path(), false);
  ExpectError(set.status(), StatusCode::kNotFound, "t10k-images-idx3-ubyte", "no such file");
}

TEST(Idx, MalformedFilesAreRejectedWithTheReason) {
  TempDir dir("idx");
  std::string img = dir.Path("i"), lab = dir.Path("l");
  auto good_labels = IdxBytes({2}, {1, 2});
  WriteBytes(lab, good_labels, false);
  struct Case {
    std::vector<uint8_t> bytes;
    std::string what;
  };
  auto good = IdxBytes({2, 28, 28}, Ramp(2 * 784));
  std::vector<Case> cases;
  cases.push_back({{0, 0}, "too short"});
  auto magic = good;
  magic[0] = 1;
  cases.push_back({magic, "magic"});
  auto type = good;
  type[2] = 0x0D;
  cases.push_back({type, "element type 0x0d"});
  auto rank = good;
  rank[3] = 2;
  cases.push_back({rank, "rank 2, expected 3"});
  cases.push_back({std::vector<uint8_t>(good.begin(), good.begin() + 10), "truncated IDX header"});
  cases.push_back({std::vector<uint8_t>(good.begin(), good.end() - 5), "truncated"});
  auto extra = good;
  extra.push_back(0);
  cases.push_back({extra, "1 unexpected bytes"});
  cases.push_back({IdxBytes({0, 28, 28}, {}), "dimension 0 is zero"});
  cases.push_back({IdxBytes({1, 100000, 28}, {}), "implausibly large"});
  for (const auto& c : cases) {
    WriteBytes(img, c.bytes, false);
    auto set = ReadIdxPair(img, lab);
    ExpectError(set.status(), StatusCode::kCorruption, img, c.what);
  }
}

TEST(Idx, LabelProblemsAreNamed) {
  TempDir dir("idx");
  std::string img = dir.Path("i"), lab = dir.Path("l");
  WriteBytes(img, IdxBytes({2, 28, 28}, Ramp(2 * 784)), false);
  WriteBytes(lab, IdxBytes({3}, {1, 2, 3}), false);
  ExpectError(ReadIdxPair(img, lab).status(), StatusCode::kCorruption, lab, "3 labels for the 2");
}

TEST(Idx, ClassCountIsTheLargestLabelPlusOne) {
  TempDir dir("idx");
  std::string img = dir.Path("i"), lab = dir.Path("l");
  WriteBytes(img, IdxBytes({3, 28, 28}, Ramp(3 * 784)), false);
  for (auto [labels, classes] : {std::pair<std::vector<uint8_t>, int>{{3, 0, 9}, 10},
                                 {{1, 26, 5}, 27},
                                 {{255, 0, 0}, 256},
                                 {{1, 0, 1}, 2}}) {
    WriteBytes(lab, IdxBytes({3}, labels), false);
    auto set = ReadIdxPair(img, lab);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_EQ(set->classes, classes);
    EXPECT_EQ(set->labels, labels);
  }
}

TEST(Idx, WrongImageSizeForMnistDir) {
  TempDir dir("idx");
  WriteBytes(dir.Path("train-images-idx3-ubyte"), IdxBytes({1, 20, 20}, Ramp(400)), false);
  WriteBytes(dir.Path("train-labels-idx1-ubyte"), IdxBytes({1}, {0}), false);
  ExpectError(LoadMnistDir(dir.Path(), true).status(), StatusCode::kCorruption,
              "train-images-idx3-ubyte", "expected 28x28");
}

TEST(Idx, TruncatedGzipIsDetected) {
  TempDir dir("idx");
  std::string path = dir.Path("x.gz");
  WriteBytes(path, IdxBytes({50, 28, 28}, Ramp(50 * 784)), true);
  auto full = ReadMaybeGzip(path);
  ASSERT_TRUE(full.ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  ExpectError(ReadMaybeGzip(path).status(), StatusCode::kCorruption, path, "");
}

std::vector<uint8_t> CifarRecords(int n, int first_label) {
  std::vector<uint8_t> b;
  for (int r = 0; r < n; ++r) {
    b.push_back(static_cast<uint8_t>((first_label + r) % 10));
    for (int k = 0; k < 3072; ++k) b.push_back(static_cast<uint8_t>(r * 3 + k));
  }
  return b;
}

TEST(Cifar, ReadsBatches) {
  TempDir dir("cifar");
  for (int i = 1; i <= 5; ++i) {
    WriteBytes(dir.Path("data_batch_" + std::to_string(i) + ".bin"), CifarRecords(2, i), false);
  }
  WriteBytes(dir.Path("test_batch.bin"), CifarRecords(3, 0), false);
  EXPECT_TRUE(LooksLikeCifarDir(dir.Path()));
  auto train = LoadCifarDir(dir.Path(), true);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ(train->count, 10);
  EXPECT_EQ(train->channels, 3);
  EXPECT_EQ(train->height, 32);
  EXPECT_EQ(train->labels[0], 1);
  EXPECT_EQ(train->labels[2], 2);
  EXPECT_EQ(train->pixels[3072 + 5], static_cast<uint8_t>(3 + 5));
  auto test = LoadCifarDir(dir.Path(), false);
  ASSERT_TRUE(test.ok());
  EXPECT_EQ(test->count, 3);
}

TEST(Cifar, MalformedBatches) {
  TempDir dir("cifar");
  for (int i = 1; i <= 5; ++i) {
    WriteBytes(dir.Path("data_batch_" + std::to_string(i) + ".bin"), CifarRecords(1, 0), false);
  }
  // Missing test batch.
  ExpectError(LoadCifarDir(dir.Path(), false).status(), StatusCode::kNotFound, "test_batch.bin",
              "no such file");
  // Not a whole number of records.
  auto b = CifarRecords(2, 0);
  b.pop_back();
  WriteBytes(dir.Path("data_batch_3.bin"), b, false);
  ExpectError(LoadCifarDir(dir.Path(), true).status(), StatusCode::kCorruption, "data_batch_3.bin",
              "3073-byte");
  // A bad label.
  b = CifarRecords(2, 0);
  b[3073] = 10;
  WriteBytes(dir.Path("data_batch_3.bin"), b, false);
  ExpectError(LoadCifarDir(dir.Path(), true).status(), StatusCode::kCorruption, "data_batch_3.bin",
              "record 1 has label 10");
}

TEST(Cifar, ParseCifarBatchAppendsOrLeavesTheSetAlone) {
  ImageSet set;
  ASSERT_TRUE(ParseCifarBatch(CifarRecords(2, 4), "a.bin", &set).ok());
  ASSERT_TRUE(ParseCifarBatch(CifarRecords(1, 9), "b.bin", &set).ok());
  EXPECT_EQ(set.count, 3);
  EXPECT_EQ(set.labels, (std::vector<uint8_t>{4, 5, 9}));
  EXPECT_EQ(set.pixels.size(), 3u * 3072u);
  auto bad = CifarRecords(3, 0);
  bad[2 * 3073] = 10;  // the last record's label
  const ImageSet before = set;
  ExpectError(ParseCifarBatch(bad, "c.bin", &set), StatusCode::kCorruption, "c.bin",
              "record 2 has label 10");
  EXPECT_EQ(set.count, before.count);
  EXPECT_EQ(set.labels, before.labels);
  EXPECT_EQ(set.pixels, before.pixels);
  ExpectError(ParseCifarBatch({}, "d.bin", &set), StatusCode::kCorruption, "d.bin",
              "0 bytes is not a whole number");
}

TEST(Pad, PadsAndRepeatsChannels) {
  ImageSet in;
  in.count = 1;
  in.height = in.width = 28;
  in.pixels = Ramp(784);
  in.labels = {4};
  ImageSet out = PadTo32x32x3(in);
  EXPECT_EQ(out.channels, 3);
  EXPECT_EQ(out.height, 32);
  ASSERT_EQ(out.pixels.size(), 3u * 32 * 32);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(out.pixels[(c * 32 + 0) * 32 + 0], 0);
    EXPECT_EQ(out.pixels[(c * 32 + 1) * 32 + 31], 0);
    EXPECT_EQ(out.pixels[(c * 32 + 2) * 32 + 2], in.pixels[0]);
    EXPECT_EQ(out.pixels[(c * 32 + 29) * 32 + 29], in.pixels[27 * 28 + 27]);
  }
  EXPECT_EQ(out.labels, in.labels);
}

TEST(Text, DirectorySkipsDatU8HiddenAndBinaryFiles) {
  TempDir dir("text");
  auto text = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  WriteBytes(dir.Path("b"), text("0123456789"), false);
  WriteBytes(dir.Path("a"), text("abcdefghijklmnopqrst"), false);
  WriteBytes(dir.Path("a.dat"), text("SHOULD NOT APPEAR"), false);
  WriteBytes(dir.Path("a.u8"), text("SHOULD NOT APPEAR"), false);
  WriteBytes(dir.Path(".hidden"), text("SHOULD NOT APPEAR"), false);
  WriteBytes(dir.Path("bin"), {'x', 0, 'y'}, false);
  std::filesystem::create_directory(dir.Path("sub"));
  auto corpus = LoadTextCorpus(dir.Path(), 0.1);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  ASSERT_EQ(corpus->files.size(), 2u);
  EXPECT_EQ(std::string(corpus->train.begin(), corpus->train.end()), "abcdefghijklmnopqr012345678");
  EXPECT_EQ(std::string(corpus->test.begin(), corpus->test.end()), "st9");
}

TEST(Text, SingleFileErrors) {
  TempDir dir("text");
  WriteBytes(dir.Path("bin"), {'x', 0, 'y'}, false);
  ExpectError(LoadTextCorpus(dir.Path("bin")).status(), StatusCode::kCorruption, "bin", "NUL");
  WriteBytes(dir.Path("empty"), {}, false);
  ExpectError(LoadTextCorpus(dir.Path("empty")).status(), StatusCode::kNotFound, "empty",
              "no text");
  ExpectError(LoadTextCorpus(dir.Path("nope")).status(), StatusCode::kNotFound, "nope",
              "no such file");
}

// A test fraction outside [0, 1) used to make the split point wrap around
// (1.5: bytes.begin() + a huge offset, out of bounds; NaN: an undefined
// float-to-integer conversion). Now InvalidArgument, before any file is read.
TEST(Text, TestFractionOutsideZeroToOneIsRejected) {
  TempDir dir("text");
  WriteBytes(dir.Path("a.txt"), {'h', 'e', 'l', 'l', 'o'}, false);
  for (double f : {1.0, 1.5, -0.25, std::nan(""), HUGE_VAL}) {
    auto corpus = LoadTextCorpus(dir.Path("a.txt"), f);
    ASSERT_FALSE(corpus.ok()) << f;
    EXPECT_EQ(corpus.status().code(), StatusCode::kInvalidArgument) << f;
    EXPECT_NE(corpus.status().message().find("test fraction"), std::string::npos);
    TextCorpus c;
    const std::vector<uint8_t> text = {'a', 'b'};
    EXPECT_EQ(AddTextFile(text, "t", f, false, &c).code(), StatusCode::kInvalidArgument) << f;
    EXPECT_TRUE(c.train.empty() && c.test.empty() && c.files.empty());
  }
  auto ok = LoadTextCorpus(dir.Path("a.txt"), 0.4);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->train, (std::vector<uint8_t>{'h', 'e', 'l'}));
  EXPECT_EQ(ok->test, (std::vector<uint8_t>{'l', 'o'}));
}

TEST(Text, AddTextFileSplitsSkipsAndRejects) {
  TextCorpus c;
  const std::vector<uint8_t> a = {'a', 'b', 'c', 'd'}, bin = {'x', 0};
  ASSERT_TRUE(AddTextFile(a, "a", 0.5, false, &c).ok());
  ASSERT_TRUE(AddTextFile(bin, "bin", 0.5, true, &c).ok());    // skipped
  ASSERT_TRUE(AddTextFile({}, "empty", 0.5, false, &c).ok());  // skipped
  EXPECT_EQ(c.train, (std::vector<uint8_t>{'a', 'b'}));
  EXPECT_EQ(c.test, (std::vector<uint8_t>{'c', 'd'}));
  EXPECT_EQ(c.files, (std::vector<std::string>{"a"}));
  ExpectError(AddTextFile(bin, "bin", 0.5, false, &c), StatusCode::kCorruption, "bin", "NUL");
  EXPECT_EQ(c.files.size(), 1u);
}

TEST(Text, RealFortunesIfInstalled) {
  if (!std::filesystem::is_directory("/usr/share/games/fortunes")) GTEST_SKIP();
  auto corpus = LoadTextCorpus("/usr/share/games/fortunes");
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_GT(corpus->train.size(), 100000u);
  EXPECT_GT(corpus->test.size(), 10000u);
  for (const auto& f : corpus->files) {
    EXPECT_EQ(f.find(".dat"), std::string::npos);
    EXPECT_EQ(f.find(".u8"), std::string::npos);
  }
}

}  // namespace
}  // namespace adacomp::train
