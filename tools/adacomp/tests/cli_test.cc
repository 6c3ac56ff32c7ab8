// Tests of the `adacomp` program from the outside: runs the built binary on
// files this test writes with its own generator, and checks what it writes,
// prints and returns. The expectations are computed here independently
// (conservation: the sum over steps of what the frames carry, plus the final
// residue, equals the sum of the inputs).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "adacomp/version.h"

namespace {

namespace fs = std::filesystem;

struct RunResult {
  int status = -1;  // exit status, or -1 if killed by a signal
  std::string out;
  std::string err;
};

std::string ReadText(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int CountLines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

std::vector<float> ReadFloats(const fs::path& p) {
  std::string bytes = ReadText(p);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

void WriteBytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void WriteFloats(const fs::path& p, const std::vector<float>& v) {
  WriteBytes(p, std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
}

// Heavy-tailed steps: Student-t(3) values times a per-block scale, times a
// per-step scale; written independently of the tool's own generator.
std::vector<float> MakeSteps(size_t n, size_t steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::student_t_distribution<double> t3(3.0);
  std::lognormal_distribution<double> block_scale(0.0, 1.0);
  std::vector<float> v(n * steps);
  for (size_t k = 0; k < steps; ++k) {
    double step_scale = 1e-2 / (1.0 + 0.3 * static_cast<double>(k));
    double scale = 0;
    for (size_t j = 0; j < n; ++j) {
      if (j % 64 == 0) scale = block_scale(rng);
      v[k * n + j] = static_cast<float>(step_scale * scale * t3(rng));
    }
  }
  return v;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "adacomp_cli_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path P(const std::string& name) const { return dir_ / name; }

  // Runs `adacomp <args>`; stdout and stderr captured separately.
  RunResult Run(const std::string& args) {
    fs::path out = P("stdout.txt"), err = P("stderr.txt");
    std::string cmd = std::string("'") + ADACOMP_TOOL_PATH + "' " + args + " >'" + out.string() +
                      "' 2>'" + err.string() + "' </dev/null";
    int raw = std::system(cmd.c_str());
    RunResult r;
    r.status = (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
    r.out = ReadText(out);
    r.err = ReadText(err);
    fs::remove(out);
    fs::remove(err);
    return r;
  }

  // The files in the test directory other than `keep`.
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  // Expects a usage or data error: the status, one line on stderr that
  // contains every string in `needles`.
  void ExpectError(const RunResult& r, int status, const std::vector<std::string>& needles) {
    EXPECT_EQ(r.status, status) << "stdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    for (const std::string& s : needles) EXPECT_NE(r.err.find(s), std::string::npos) << r.err;
  }

  fs::path dir_;
};

std::string Q(const fs::path& p) { return "'" + p.string() + "'"; }

// ------------------------------------------------------------------- basics

TEST_F(CliTest, HelpAndVersionExitZero) {
  RunResult r = Run("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"compress", "decompress", "inspect", "gen-gradient"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  r = Run("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find(std::string("adacomp ") + adacomp::kVersion), std::string::npos) << r.out;
  for (const char* sub : {"compress", "decompress", "inspect", "gen-gradient"}) {
    r = Run(std::string(sub) + " --help");
    EXPECT_EQ(r.status, 0) << sub;
    EXPECT_NE(r.out.find("Exit status"), std::string::npos) << sub << "\n" << r.out;
  }
  r = Run("gen-gradient --help");
  EXPECT_NE(r.out.find("Laplace"), std::string::npos) << "generator is described in --help";
}

TEST_F(CliTest, BadUsageExitsTwo) {
  WriteFloats(P("g.f32"), MakeSteps(100, 1, 1));
  std::string io = Q(P("g.f32")) + " " + Q(P("o.frames"));
  ExpectError(Run(""), 2, {});
  ExpectError(Run("frobnicate"), 2, {});
  ExpectError(Run("compress --codec nosuch --elements 100 " + io), 2, {"nosuch"});
  ExpectError(Run("compress --codec adacomp " + io), 2, {"--elements"});
  ExpectError(Run("compress --codec adacomp --elements abc " + io), 2, {"--elements", "abc"});
  ExpectError(Run("compress --codec adacomp --elements 1.5 " + io), 2, {"--elements"});
  ExpectError(Run("compress --codec adacomp --elements 0 " + io), 2, {"--elements"});
  ExpectError(Run("compress --codec adacomp --elements 100 --bin-size 0 " + io), 2, {"bin"});
  ExpectError(Run("compress --codec adacomp --elements 100 --values fp8 " + io), 2, {"fp8"});
  ExpectError(Run("compress --codec topk --elements 100 --density 2 " + io), 2, {"density"});
  ExpectError(Run("compress --codec adacomp --elements 100 --density 0.1 " + io), 2,
              {"--density", "topk"});
  ExpectError(
      Run("compress --codec dense --elements 100 --residue-out " + Q(P("r.f32")) + " " + io), 2,
      {"residue"});
  ExpectError(Run("compress --codec adacomp --elements 100 --no-such-option " + io), 2, {});
  ExpectError(Run("compress --codec terngrad --seed -5 --elements 100 " + io), 2, {"--seed"});
  ExpectError(Run("compress --codec adacomp --tensor-id -1 --elements 100 " + io), 2,
              {"--tensor-id"});
  ExpectError(Run("compress --codec adacomp --elements 100 " + Q(P("g.f32"))), 2, {"output"});
  ExpectError(Run("inspect"), 2, {});
  ExpectError(Run("gen-gradient --elements 0 " + Q(P("x.f32"))), 2, {"--elements"});
  // Nothing was written by any of these.
  EXPECT_EQ(Files(), std::vector<std::string>{"g.f32"});
}

TEST_F(CliTest, CountsAcceptExponentForm) {
  WriteFloats(P("g.f32"), MakeSteps(1000, 2, 2));
  RunResult r =
      Run("compress --codec adacomp --elements 1e3 " + Q(P("g.f32")) + " " + Q(P("o.frames")));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("1000 elements x 2 steps"), std::string::npos) << r.out;
}

// ------------------------------------------------- round trip, conservation

struct CodecCase {
  const char* name;     // for the test name
  const char* options;  // codec options
  bool residue;         // codec keeps a residue
};

void PrintTo(const CodecCase& c, std::ostream* os) { *os << c.name; }

class CliRoundTrip : public CliTest, public ::testing::WithParamInterface<CodecCase> {};

TEST_P(CliRoundTrip, ConservationFromTheOutside) {
  const CodecCase& c = GetParam();
  constexpr size_t kN = 1003, kSteps = 4;
  std::vector<float> in = MakeSteps(kN, kSteps, 7);
  WriteFloats(P("g.f32"), in);
  std::string residue_opt = c.residue ? " --residue-out " + Q(P("r.f32")) : "";
  RunResult r = Run(std::string("compress ") + c.options + " --elements " + std::to_string(kN) +
                    " " + Q(P("g.f32")) + " " + Q(P("g.frames")) + residue_opt);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("compression rate"), std::string::npos) << r.out;

  r = Run("decompress " + Q(P("g.frames")) + " " + Q(P("d.f32")));
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<float> dec = ReadFloats(P("d.f32"));
  ASSERT_EQ(dec.size(), kN * kSteps);

  // Frame bytes printed by compress add up to the file size.
  EXPECT_NE(r.out.find("decompressed 4 frames"), std::string::npos) << r.out;

  std::string codec = std::string(c.options).substr(std::string(c.options).find("--codec ") + 8);
  codec = codec.substr(0, codec.find(' '));
  if (codec == "dense") {
    for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(dec[i], in[i]) << i;
  } else if (c.residue) {
    std::vector<float> res = ReadFloats(P("r.f32"));
    ASSERT_EQ(res.size(), kN);
    size_t bad = 0;
    for (size_t j = 0; j < kN; ++j) {
      double sum_in = 0, sum_out = res[j], mag = std::fabs(res[j]);
      for (size_t k = 0; k < kSteps; ++k) {
        sum_in += in[k * kN + j];
        sum_out += dec[k * kN + j];
        mag += std::fabs(in[k * kN + j]) + std::fabs(dec[k * kN + j]);
      }
      double tol = 1e-6 * mag + 1e-30;
      if (std::fabs(sum_in - sum_out) > tol && ++bad < 5) {
        ADD_FAILURE() << "element " << j << ": inputs sum to " << sum_in
                      << ", decoded + residue to " << sum_out;
      }
    }
    EXPECT_EQ(bad, 0u);
  } else {  // terngrad: each step's values are 0 or +-max|g|
    for (size_t k = 0; k < kSteps; ++k) {
      float s = 0;
      for (size_t j = 0; j < kN; ++j) s = std::max(s, std::fabs(in[k * kN + j]));
      for (size_t j = 0; j < kN; ++j) {
        float v = dec[k * kN + j];
        ASSERT_TRUE(v == 0 || std::fabs(v) == s) << "step " << k << " element " << j << ": " << v;
      }
    }
  }

  // Ternary adacomp: every sent value is +-scale, the scale printed by inspect.
  r = Run("inspect " + Q(P("g.frames")));
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  size_t frames = 0;
  uint64_t bytes_sum = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("frame ", 0) != 0) continue;
    EXPECT_NE(line.find("frame " + std::to_string(frames) + " "), std::string::npos) << line;
    EXPECT_NE(line.find("codec " + codec + " "), std::string::npos) << line;
    EXPECT_NE(line.find("elements " + std::to_string(kN) + " "), std::string::npos) << line;
    size_t at = line.find(" bytes ");
    ASSERT_NE(at, std::string::npos);
    bytes_sum += std::stoull(line.substr(at + 7));
    if (codec == "adacomp" && line.find("values ternary") != std::string::npos) {
      at = line.find(" scale ");
      ASSERT_NE(at, std::string::npos) << line;
      float scale = std::stof(line.substr(at + 7));
      size_t nonzero = 0;
      for (size_t j = 0; j < kN; ++j) {
        float v = dec[frames * kN + j];
        if (v != 0) {
          ++nonzero;
          ASSERT_EQ(std::fabs(v), scale) << "frame " << frames << " element " << j;
        }
      }
      at = line.find(" selected ");
      EXPECT_EQ(std::stoull(line.substr(at + 10)), nonzero) << line;
    }
    ++frames;
  }
  EXPECT_EQ(frames, kSteps) << r.out;
  EXPECT_EQ(bytes_sum, fs::file_size(P("g.frames")));
  EXPECT_NE(r.out.find("total: 4 frames"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, CliRoundTrip,
    ::testing::Values(CodecCase{"adacomp50", "--codec adacomp --bin-size 50", true},
                      CodecCase{"adacomp500", "--codec adacomp --bin-size 500", true},
                      CodecCase{"adacomp_fp16", "--codec adacomp --values fp16", true},
                      CodecCase{"adacomp_fp32", "--codec adacomp --values fp32 --bin-size 7", true},
                      CodecCase{"topk", "--codec topk --density 0.05", true},
                      CodecCase{"threshold", "--codec threshold --tau 0.01", true},
                      CodecCase{"onebit", "--codec onebit", true},
                      CodecCase{"dense", "--codec dense", false},
                      CodecCase{"terngrad", "--codec terngrad --seed 3", false}),
    [](const ::testing::TestParamInfo<CodecCase>& info) { return std::string(info.param.name); });

// ------------------------------------------------------------ bad frames

class CliBadFrames : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    WriteFloats(P("g.f32"), MakeSteps(kN, 3, 11));
    RunResult r = Run("compress --codec adacomp --bin-size 50 --elements " + std::to_string(kN) +
                      " " + Q(P("g.f32")) + " " + Q(P("good.frames")));
    ASSERT_EQ(r.status, 0) << r.err;
    good_ = ReadText(P("good.frames"));
    // Frame offsets from inspect.
    r = Run("inspect " + Q(P("good.frames")));
    ASSERT_EQ(r.status, 0) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("frame ", 0) != 0) continue;
      size_t at = line.find(" offset ");
      ASSERT_NE(at, std::string::npos);
      offsets_.push_back(std::stoull(line.substr(at + 8)));
    }
    ASSERT_EQ(offsets_.size(), 3u);
  }

  // Both readers reject `bytes` naming frame `frame` at its offset, and
  // decompress leaves no output behind.
  void ExpectRejected(const std::string& bytes, size_t frame, const std::string& what) {
    SCOPED_TRACE(what);
    WriteBytes(P("bad.frames"), bytes);
    std::vector<std::string> needles = {"bad.frames", "frame " + std::to_string(frame),
                                        "offset " + std::to_string(offsets_[frame])};
    RunResult r = Run("inspect " + Q(P("bad.frames")));
    ExpectError(r, 1, needles);
    r = Run("decompress " + Q(P("bad.frames")) + " " + Q(P("out.f32")));
    ExpectError(r, 1, needles);
    EXPECT_FALSE(fs::exists(P("out.f32")));
    for (const std::string& f : Files()) EXPECT_EQ(f.find(".tmp."), std::string::npos) << f;
  }

  static constexpr size_t kN = 2000;
  std::string good_;
  std::vector<uint64_t> offsets_;
};

TEST_F(CliBadFrames, Truncated) {
  ExpectRejected(good_.substr(0, good_.size() - 1), 2, "last byte cut");
  ExpectRejected(good_.substr(0, offsets_[2] + 3), 2, "3 bytes of the last frame");
  ExpectRejected(good_.substr(0, offsets_[1] - 5), 0, "first frame cut");
  ExpectRejected(good_.substr(0, 1), 0, "one byte");
}

TEST_F(CliBadFrames, FlippedBytes) {
  for (size_t frame = 0; frame < 3; ++frame) {
    uint64_t begin = offsets_[frame];
    uint64_t end = frame + 1 < offsets_.size() ? offsets_[frame + 1] : good_.size();
    for (uint64_t at : {begin, begin + 5, (begin + end) / 2, end - 1}) {
      std::string bad = good_;
      bad[at] = static_cast<char>(bad[at] ^ 0x10);
      ExpectRejected(bad, frame, "byte " + std::to_string(at) + " flipped");
    }
  }
}

TEST_F(CliBadFrames, GarbageAndEmpty) {
  std::string garbage(300, '\0');
  std::mt19937 rng(5);
  for (char& c : garbage) c = static_cast<char>(rng());
  ExpectRejected(garbage, 0, "random bytes");
  offsets_.push_back(good_.size());  // trailing bytes after three good frames: "frame 3"
  ExpectRejected(good_ + garbage.substr(0, 40), 3, "trailing garbage");
}

// ------------------------------------------------------------ bad inputs

TEST_F(CliTest, WrongSizeInput) {
  std::vector<float> v = MakeSteps(100, 2, 3);
  std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  WriteBytes(P("g.f32"), bytes + "abc");  // 803 bytes
  RunResult r =
      Run("compress --codec adacomp --elements 100 " + Q(P("g.f32")) + " " + Q(P("o.frames")));
  ExpectError(r, 1, {"g.f32", "803"});
  EXPECT_EQ(Files(), std::vector<std::string>{"g.f32"});
  WriteBytes(P("g.f32"), "");
  r = Run("compress --codec adacomp --elements 100 " + Q(P("g.f32")) + " " + Q(P("o.frames")));
  ExpectError(r, 1, {"g.f32", "empty"});
  WriteBytes(P("e.frames"), "");
  ExpectError(Run("inspect " + Q(P("e.frames"))), 1, {"e.frames", "empty"});
}

TEST_F(CliTest, MissingFiles) {
  RunResult r =
      Run("compress --codec adacomp --elements 100 " + Q(P("nope.f32")) + " " + Q(P("o.frames")));
  ExpectError(r, 1, {"nope.f32"});
  ExpectError(Run("decompress " + Q(P("nope.frames")) + " " + Q(P("o.f32"))), 1, {"nope.frames"});
  ExpectError(Run("inspect " + Q(P("nope.frames"))), 1, {"nope.frames"});
  WriteFloats(P("g.f32"), MakeSteps(100, 1, 1));
  r = Run("compress --codec adacomp --elements 100 " + Q(P("g.f32")) + " " +
          Q(P("no/such/dir/o.frames")));
  ExpectError(r, 1, {"no/such/dir/o.frames"});
  EXPECT_EQ(Files(), std::vector<std::string>{"g.f32"});
}

TEST_F(CliTest, NonFiniteInputLeavesNoOutput) {
  std::vector<float> v = MakeSteps(100, 3, 4);
  v[1 * 100 + 42] = std::nanf("");
  WriteFloats(P("g.f32"), v);
  RunResult r = Run("compress --codec adacomp --elements 100 --residue-out " + Q(P("r.f32")) + " " +
                    Q(P("g.f32")) + " " + Q(P("o.frames")));
  ExpectError(r, 1, {"g.f32", "step 1", "element 42", "byte offset 568"});
  EXPECT_EQ(Files(), std::vector<std::string>{"g.f32"});  // no output, no temporary left
}

// ------------------------------------------------------------ gen-gradient

TEST_F(CliTest, GenGradientIsDeterministicAndHeavyTailed) {
  constexpr size_t kN = 50000;
  ASSERT_EQ(Run("gen-gradient --elements 5e4 --steps 2 --seed 9 " + Q(P("a.f32"))).status, 0);
  ASSERT_EQ(Run("gen-gradient --elements 50000 --steps 2 --seed 9 " + Q(P("b.f32"))).status, 0);
  ASSERT_EQ(Run("gen-gradient --elements 50000 --steps 2 --seed 10 " + Q(P("c.f32"))).status, 0);
  std::string a = ReadText(P("a.f32"));
  EXPECT_EQ(a.size(), kN * 2 * 4);
  EXPECT_EQ(a, ReadText(P("b.f32")));
  EXPECT_NE(a, ReadText(P("c.f32")));
  std::vector<float> v = ReadFloats(P("a.f32"));
  double m2 = 0, m4 = 0;
  size_t zeros = 0;
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(std::isfinite(v[i]));
    zeros += v[i] == 0;
    double x = v[i];
    m2 += x * x;
    m4 += x * x * x * x;
  }
  m2 /= kN;
  m4 /= kN;
  EXPECT_LT(zeros, 10u);
  EXPECT_GT(m4 / (m2 * m2), 6.0) << "kurtosis of a heavy-tailed gradient";
  // Steps differ but are correlated (a persistent part).
  double dot = 0, n0 = 0, n1 = 0;
  for (size_t i = 0; i < kN; ++i) {
    dot += double(v[i]) * v[kN + i];
    n0 += double(v[i]) * v[i];
    n1 += double(v[kN + i]) * v[kN + i];
  }
  double corr = dot / std::sqrt(n0 * n1);
  EXPECT_GT(corr, 0.05);
  EXPECT_LT(corr, 0.9);
}

}  // namespace
