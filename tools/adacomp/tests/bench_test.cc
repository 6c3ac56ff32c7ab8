// Runs `adacomp bench` on tiny sizes and checks that its JSON is well-formed
// and has every expected row with consistent fields.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

namespace {

namespace fs = std::filesystem;

class BenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "adacomp_bench_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  int Run(const std::string& args, std::string* out = nullptr) {
    fs::path o = dir_ / "stdout.txt";
    std::string cmd = std::string("'") + ADACOMP_TOOL_PATH + "' " + args + " >'" + o.string() +
                      "' 2>&1 </dev/null";
    int raw = std::system(cmd.c_str());
    if (out) {
      std::ifstream f(o);
      std::stringstream ss;
      ss << f.rdbuf();
      *out = ss.str();
    }
    return (raw != -1 && WIFEXITED(raw)) ? WEXITSTATUS(raw) : -1;
  }
  fs::path dir_;
};

TEST_F(BenchTest, TinyRunWritesExpectedRows) {
  fs::path json_path = dir_ / "bench.json";
  std::string out;
  ASSERT_EQ(Run("bench --sizes 1000,3001 --bin-sizes 50,500 --threads 1,2 --frames 1,4 "
                "--repeats 3 --min-time 0.001 --json '" +
                    json_path.string() + "'",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("x_ref"), std::string::npos) << out;  // the table
  std::ifstream f(json_path);
  ASSERT_TRUE(f.good());
  nlohmann::json j = nlohmann::json::parse(f);  // throws (test fails) if malformed
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("rows") && j["rows"].is_array());
  const bool torch = j.value("torch", false);

  // (op, codec, elements, bin_size, threads, frames) -> row
  using Key = std::tuple<std::string, std::string, uint64_t, uint64_t, uint64_t, uint64_t>;
  std::map<Key, nlohmann::json> rows;
  for (const auto& r : j["rows"]) {
    for (const char* field : {"op", "codec"}) ASSERT_TRUE(r.at(field).is_string()) << r;
    for (const char* field : {"elements", "bin_size", "threads", "frames", "frame_bytes"}) {
      ASSERT_TRUE(r.at(field).is_number_unsigned()) << field << " in " << r;
    }
    for (const char* field : {"seconds", "elements_per_second", "ratio_to_reference", "density"}) {
      ASSERT_TRUE(r.at(field).is_number()) << field << " in " << r;
    }
    double seconds = r["seconds"];
    double eps = r["elements_per_second"];
    uint64_t elements = r["elements"];
    EXPECT_GT(seconds, 0) << r;
    EXPECT_NEAR(eps * seconds, static_cast<double>(elements), 1e-6 * elements) << r;
    Key key{r["op"], r["codec"], elements, r["bin_size"], r["threads"], r["frames"]};
    EXPECT_TRUE(rows.emplace(key, r).second) << "duplicate row " << r;
  }

  size_t expected = 0;
  for (uint64_t n : {1000u, 3001u}) {
    for (uint64_t t : {1u, 2u}) {
      auto ref = rows.find({"reference", "none", n, 0, t, 0});
      ASSERT_NE(ref, rows.end()) << "reference " << n << " " << t;
      EXPECT_DOUBLE_EQ(ref->second["ratio_to_reference"].get<double>(), 1.0);
      const double ref_seconds = ref->second["seconds"];
      ++expected;
      auto check = [&](const Key& key) {
        auto it = rows.find(key);
        ASSERT_NE(it, rows.end()) << std::get<0>(key) << " " << std::get<1>(key) << " " << n << " L"
                                  << std::get<3>(key) << " T" << t << " P" << std::get<5>(key);
        ++expected;
        const auto& r = it->second;
        // A paired ratio (reference timed beside each repeat): positive and
        // finite. Its value depends on the machine's load, so no band is
        // asserted (a shared CI machine can stall one repeat by milliseconds);
        // the throughput column must follow from the row's own fields.
        const double ratio = r["ratio_to_reference"].get<double>();
        EXPECT_GT(ratio, 0) << r;
        EXPECT_TRUE(std::isfinite(ratio)) << r;
        const double seconds = r["seconds"].get<double>();
        EXPECT_GT(seconds, 0) << r;
        EXPECT_GT(ref_seconds, 0) << r;
        EXPECT_NEAR(r["elements_per_second"].get<double>() * seconds,
                    static_cast<double>(r["elements"].get<uint64_t>()),
                    1e-6 * static_cast<double>(r["elements"].get<uint64_t>()))
            << r;
        if (r["op"] == "compress" || r["op"] == "compress_marked" ||
            r["op"] == "decode_accumulate") {
          EXPECT_GT(r["frame_bytes"].get<uint64_t>(), 0u) << r;
          EXPECT_GT(r["density"].get<double>(), 0) << r;
          EXPECT_LE(r["density"].get<double>(), 1) << r;
        }
      };
      for (uint64_t l : {50u, 500u}) {
        check({"compress", "adacomp", n, l, t, 1});
        check({"compress_marked", "adacomp", n, l, t, 1});
        check({"decode_accumulate", "adacomp", n, l, t, 1});
        check({"decode_accumulate", "adacomp", n, l, t, 4});
        check({"compress", "topk_nth_element", n, l, t, 1});
        check({"compress", "topk", n, l, t, 1});
        if (torch) check({"compress", "topk_torch", n, l, t, 1});
        // top-k rows use the density AdaComp chose at that L_T (k rounded
        // per part: at most half an element per part off).
        const Key topk_key{"compress", "topk_nth_element", n, l, t, 1};
        const Key adacomp_key{"compress", "adacomp", n, l, t, 1};
        EXPECT_NEAR(rows[topk_key]["density"].get<double>(),
                    rows[adacomp_key]["density"].get<double>(),
                    (0.5 * static_cast<double>(t) + 1e-9) / static_cast<double>(n));
        // Decoded frames are steady-state frames after the compress row's
        // warm-up: with P = 1 (learner 0, not rotated) the very same frame.
        const Key decode_key{"decode_accumulate", "adacomp", n, l, t, 1};
        EXPECT_DOUBLE_EQ(rows[decode_key]["density"].get<double>(),
                         rows[adacomp_key]["density"].get<double>());
      }
      check({"compress", "onebit", n, 0, t, 1});
    }
  }
  EXPECT_EQ(rows.size(), expected);
}

TEST_F(BenchTest, BadUsage) {
  EXPECT_EQ(Run("bench --sizes 0"), 2);
  EXPECT_EQ(Run("bench --sizes abc"), 2);
  EXPECT_EQ(Run("bench --ops nope --sizes 1000"), 2);
  EXPECT_EQ(Run("bench --threads 0 --sizes 1000"), 2);
  EXPECT_EQ(Run("bench --sizes 1e9 --max-elements 1e6"), 2);
  std::string out;
  EXPECT_EQ(Run("bench --help", &out), 0);
  EXPECT_NE(out.find("Laplace"), std::string::npos) << "the data model is described";
}

// `adacomp bench exchange-bytes`: the rows' figures hang together (SimulateStep
// itself is checked against the communicators in adacomp_exchange_test).
TEST_F(BenchTest, ExchangeBytesWritesConsistentRows) {
  fs::path json_path = dir_ / "bytes.json";
  std::string out;
  ASSERT_EQ(Run("bench exchange-bytes --elements 3000,1 --learners 2,5 --bin-size 50 --json '" +
                    json_path.string() + "'",
                &out),
            0)
      << out;
  std::ifstream f(json_path);
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["summed_values"], "fp32");
  ASSERT_EQ(j["rows"].size(), 4u);
  for (const auto& r : j["rows"]) {
    const double p = r["learners"];
    const double n = r["elements"];
    // The float32 ring's received bytes: 2 (P-1)/P of the tensor (to a
    // chunk's rounding), plus the agreement and two collectives' headers.
    const double ring = r["ring_fp32"]["received"];
    const double overhead = (p - 1) * (16 + 2 * 32);
    EXPECT_NEAR(ring - overhead, 2 * (p - 1) / p * 4 * n, 8 * p) << r;
    EXPECT_NEAR(static_cast<double>(r["ring_fp16"]["received"]) - overhead, 2 * (p - 1) / p * 2 * n,
                4 * p)
        << r;
    // The all-gather brings the other learners' frames, on average (P-1)/P of
    // all of them.
    const double frames = r["frame_bytes"];
    EXPECT_NEAR(static_cast<double>(r["allgather"]["received"]) - overhead, frames * (p - 1) / p,
                1.0)
        << r;
    const std::string pick = r["auto_picks"];
    const double a = r["allgather"]["received"], rs = r["reduce_scatter"]["received"];
    EXPECT_EQ(static_cast<double>(r["auto"]["received"]), pick == "allgather" ? a : rs) << r;
    EXPECT_GE(static_cast<double>(r["piece_bytes"]), frames) << r;
  }
  EXPECT_EQ(Run("bench exchange-bytes --learners 1"), 2);
  EXPECT_EQ(Run("bench exchange-bytes --summed-values fp8"), 2);
  EXPECT_EQ(Run("bench exchange-bytes --elements x"), 2);
}

}  // namespace
