// Unit tests of the `adacomp` program's support library: count parsing,
// atomic output files, the gradient generator, and the bench kernels and
// checks (which must catch wrong results, or the bench verifies nothing).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_ops.h"
#include "cli_util.h"
#include "file_io.h"
#include "gradient_gen.h"

namespace adacomp::tool {
namespace {

namespace fs = std::filesystem;

TEST(ParseCount, DigitsAndExponents) {
  EXPECT_EQ(*ParseCount("0", "x"), 0u);
  EXPECT_EQ(*ParseCount("1000000", "x"), 1000000u);
  EXPECT_EQ(*ParseCount("1e6", "x"), 1000000u);
  EXPECT_EQ(*ParseCount("6.4e7", "x"), 64000000u);
  EXPECT_EQ(*ParseCount("18446744073709551615", "x"), UINT64_MAX);
  for (const char* bad :
       {"", "abc", "1.5", "-3", "1e6x", "inf", "nan", "1e300", "99999999999999999999"}) {
    Result<uint64_t> r = ParseCount(bad, "--elements");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("--elements"), std::string::npos);
    }
  }
  Result<std::vector<uint64_t>> list = ParseCountList("1e4,20,3", "--sizes");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<uint64_t>{10000, 20, 3}));
  EXPECT_FALSE(ParseCountList("1,,2", "--sizes").ok());
  EXPECT_FALSE(ParseCountList("1,", "--sizes").ok());
}

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "adacomp_io_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t CountFiles() const {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  fs::path dir_;
};

TEST_F(FileIoTest, OutputAppearsOnlyOnCommit) {
  const std::string path = (dir_ / "out.bin").string();
  {
    auto f = OutputFile::Create(path);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Write("abc", 3).ok());
    EXPECT_FALSE(fs::exists(path));
    // Destroyed without Commit: nothing left, not even the temporary.
  }
  EXPECT_EQ(CountFiles(), 0u);
  {
    auto f = OutputFile::Create(path);
    ASSERT_TRUE(f.ok());
    float v[2] = {1.5f, -2.0f};
    ASSERT_TRUE((*f)->WriteFloats(v).ok());
    ASSERT_TRUE((*f)->Commit().ok());
  }
  EXPECT_EQ(CountFiles(), 1u);
  EXPECT_EQ(fs::file_size(path), 8u);
  auto in = InputFile::Open(path);
  ASSERT_TRUE(in.ok());
  std::vector<float> back(2);
  ASSERT_TRUE((*in)->ReadFloats(back).ok());
  EXPECT_EQ(back, (std::vector<float>{1.5f, -2.0f}));
  Status past_end = (*in)->ReadFloats(back);
  EXPECT_EQ(past_end.code(), StatusCode::kCorruption);
  EXPECT_NE(past_end.message().find("byte 8"), std::string::npos) << past_end.message();
}

TEST_F(FileIoTest, OpenErrorsNameThePath) {
  auto in = InputFile::Open((dir_ / "missing.f32").string());
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), StatusCode::kNotFound);
  EXPECT_NE(in.status().message().find("missing.f32"), std::string::npos);
  auto m = MappedFile::Open((dir_ / "missing.frames").string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("missing.frames"), std::string::npos);
  auto o = OutputFile::Create((dir_ / "no" / "dir.bin").string());
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("dir.bin"), std::string::npos);
  auto d = InputFile::Open(dir_.string());  // a directory
  EXPECT_FALSE(d.ok());
}

TEST(GradientGen, RangesMatchTheWholeAndAreDeterministic) {
  GradientSpec spec;
  spec.elements = 5000;
  spec.seed = 3;
  std::vector<float> whole(spec.elements), again(spec.elements);
  GenerateGradient(spec, 2, whole);
  GenerateGradient(spec, 2, again);
  EXPECT_EQ(whole, again);
  // Any range, generated alone, equals the same slice of the whole.
  for (uint64_t begin : {0u, 1u, 255u, 256u, 1000u, 4999u}) {
    for (uint64_t count : {1u, 7u, 300u}) {
      if (begin + count > spec.elements) continue;
      std::vector<float> part(count);
      GenerateGradientRange(spec, 2, begin, part);
      for (uint64_t i = 0; i < count; ++i)
        ASSERT_EQ(part[i], whole[begin + i]) << begin << "+" << i;
    }
  }
  GenerateGradient(spec, 3, again);
  EXPECT_NE(whole, again);  // steps differ
  // Units differ in scale: the spread of per-unit RMS covers orders of magnitude.
  double lo = INFINITY, hi = 0;
  for (uint64_t u = 0; u + 256 <= spec.elements; u += 256) {
    double s = 0;
    for (uint64_t j = u; j < u + 256; ++j) s += double(whole[j]) * whole[j];
    lo = std::min(lo, s);
    hi = std::max(hi, s);
  }
  EXPECT_GT(std::sqrt(hi / lo), 30.0);
  EXPECT_GT(LayerScale(1, 0, 1e-3), 0.0);
  EXPECT_NE(LayerScale(1, 0, 1e-3), LayerScale(1, 1, 1e-3));
}

TEST(BenchOps, ReferencePassAdds) {
  std::vector<float> r = {1, 2, 3}, g = {0.5f, -2, 4};
  ReferencePass(r, g);
  EXPECT_EQ(r, (std::vector<float>{1.5f, 0, 7}));
}

TEST(BenchOps, TopKSendsTheKLargestWithTies) {
  // |G| = 5, 1, 3, 3, 0, 3 ; k = 3: 5 and the first two 3s.
  std::vector<float> residue = {0, 0, 1, 0, 0, 0};
  std::vector<float> grad = {-5, 1, 2, -3, 0, 3};
  TopKScratch s;
  ASSERT_EQ(TopKNthElement(residue, grad, 3, &s), 3u);
  EXPECT_EQ(s.indices, (std::vector<uint32_t>{0, 2, 3}));
  EXPECT_EQ(s.values, (std::vector<float>{-5, 3, -3}));
  EXPECT_EQ(residue, (std::vector<float>{0, 1, 0, 0, 0, 3}));
  // k = 0 keeps everything; k > N sends everything.
  std::vector<float> r2 = {1, 2};
  EXPECT_EQ(TopKNthElement(r2, std::vector<float>{1, 1}, 0, &s), 0u);
  EXPECT_EQ(r2, (std::vector<float>{2, 3}));
  EXPECT_EQ(TopKNthElement(r2, std::vector<float>{1, 1}, 9, &s), 2u);
  EXPECT_EQ(r2, (std::vector<float>{0, 0}));
  EXPECT_EQ(s.values, (std::vector<float>{3, 4}));
}

TEST(BenchOps, TopKOnRandomDataMatchesASort) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  for (int trial = 0; trial < 20; ++trial) {
    size_t n = 1 + rng() % 3000;
    uint64_t k = rng() % (n + 1);
    std::vector<float> residue(n), grad(n);
    for (size_t j = 0; j < n; ++j) residue[j] = d(rng), grad[j] = d(rng);
    std::vector<float> g(n);
    for (size_t j = 0; j < n; ++j) g[j] = residue[j] + grad[j];
    std::vector<float> sorted(n);
    for (size_t j = 0; j < n; ++j) sorted[j] = std::fabs(g[j]);
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    TopKScratch s;
    std::vector<float> old = residue;
    ASSERT_EQ(TopKNthElement(residue, grad, k, &s), k);
    std::vector<float> sent(n, 0.0f);
    for (size_t m = 0; m < k; ++m) sent[s.indices[m]] = s.values[m];
    EXPECT_TRUE(CheckConservation(old, grad, sent, residue).ok());
    std::vector<float> got;
    for (float v : s.values) got.push_back(std::fabs(v));
    std::sort(got.begin(), got.end(), std::greater<float>());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), sorted.begin()));
  }
}

TEST(BenchOps, ScalarAdaCompByHand) {
  // L_T = 3, bins {0,1,2} {3,4,5} {6}. Zero residue, so H = 2G.
  std::vector<float> old(7, 0.0f);
  std::vector<float> grad = {1, -4, 2.5f, 0, 0, 0, -1};
  std::vector<float> deq(7), res(7);
  float scale = 0;
  // bin maxima 4, 0, 1 -> s = 5/3. Bin 0: |2G| >= 4 for -4 and 2.5 (5 >= 4),
  // not 1 (2 < 4). Bin 1 all zero: nothing. Bin 2: -1 (2 >= 1).
  EXPECT_EQ(AdaCompScalarReference(old, grad, 3, deq, res, &scale), 3u);
  const float s = static_cast<float>(5.0 / 3.0);
  EXPECT_FLOAT_EQ(scale, s);
  EXPECT_EQ(deq, (std::vector<float>{0, -s, s, 0, 0, 0, -s}));
  for (size_t j = 0; j < 7; ++j) EXPECT_FLOAT_EQ(res[j], grad[j] - deq[j]) << j;
  // With a residue, H = R + 2 dW favours the new gradient: element 0 has
  // G = 3 + 1 = 4 = gmax, H = 5 >= 4: selected; element 1 has G = -4 + 4 = 0: not.
  std::vector<float> old2 = {3, -4, 0};
  std::vector<float> grad2 = {1, 4, 0.5f};
  std::vector<float> deq2(3), res2(3);
  EXPECT_EQ(AdaCompScalarReference(old2, grad2, 3, deq2, res2, &scale), 1u);
  EXPECT_EQ(scale, 4.0f);
  EXPECT_EQ(deq2, (std::vector<float>{4, 0, 0}));
}

TEST(BenchOps, ChecksCatchWrongResults) {
  std::vector<float> old = {1, 2, 3}, grad = {1, 1, 1}, deq = {2, 0, 0}, res = {0, 3, 4};
  EXPECT_TRUE(CheckConservation(old, grad, deq, res).ok());
  res[1] = 3.001f;
  Status s = CheckConservation(old, grad, deq, res);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("element 1"), std::string::npos) << s.message();
  EXPECT_TRUE(CheckClose(std::vector<float>{1, 2}, std::vector<float>{1, 2}, 0, 0, "x").ok());
  EXPECT_FALSE(
      CheckClose(std::vector<float>{1, 2}, std::vector<float>{1, 2.1f}, 1e-3, 0, "x").ok());
  EXPECT_FALSE(CheckClose(std::vector<float>{1}, std::vector<float>{NAN}, 1, 1, "x").ok());
}

}  // namespace
}  // namespace adacomp::tool
