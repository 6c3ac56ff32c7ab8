// Golden frames in testdata/golden: frames that must decode to known values
// and frames that must fail with a known error. The expected values below are
// written by hand from the frame contents (see the comments), not computed by
// the library. The test also checks that today's encoder still produces the
// checked-in bytes (format stability).
//
// To regenerate the files after an intended format change (bump the format
// version first!): ADACOMP_REGENERATE_GOLDEN=1 ./adacomp_core_test --gtest_filter='Golden*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "core/crc32c.h"
#include "core/endian.h"
#include "wire/frame.h"
#include "wire/frame_test_util.h"

namespace adacomp::wire {
namespace {

struct Golden {
  std::string name;
  std::vector<uint8_t> bytes;
  bool ok;
  std::vector<float> expected;  // ok: the dequantized values
  std::string error;            // !ok: a substring of the error message
};

std::vector<uint8_t> Enc(const Frame& f) {
  std::vector<uint8_t> out;
  const Status s = EncodeFrame(f, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

using testing::AdaCompTernary;
using testing::Reseal;

Frame Dense3() {
  Frame f;
  f.codec = Codec::kDense;
  f.tensor_id = 1;
  f.elements = 3;
  f.values = {1.5f, -2.0f, 0.25f};
  return f;
}

Frame AdaTernary10() { return AdaCompTernary(2, 10, 5, 1, {1, 4, 9}, {0, 1, 0}); }

std::vector<Golden> Cases() {
  std::vector<Golden> g;
  // `f` with byte `at` set to `value` and the checksum made right again.
  auto patched = [&](const char* name, const Frame& f, size_t at, uint8_t value,
                     const char* error) {
    auto b = Enc(f);
    b[at] = value;
    Reseal(&b);
    g.push_back({name, b, false, {}, error});
  };
  g.push_back({"dense_3", Enc(Dense3()), true, {1.5f, -2.0f, 0.25f}, ""});
  g.push_back({"adacomp_ternary_10",
               Enc(AdaTernary10()),
               true,
               {0, 0.5f, 0, 0, -0.5f, 0, 0, 0, 0, 0.5f},
               ""});
  {
    Frame f;
    f.codec = Codec::kAdaComp;
    f.elements = 6;
    f.params.values = ValueMode::kFp16;
    f.params.bin_size = 3;
    f.indices = {0, 5};
    f.half_values = {0x3C00, 0xC000};  // 1.0, -2.0
    f.params.selected = 2;
    f.params.code = {IndexFamily::kExpGolomb, 0};
    g.push_back({"adacomp_fp16_6", Enc(f), true, {1.0f, 0, 0, 0, 0, -2.0f}, ""});
  }
  {
    Frame f;
    f.codec = Codec::kAdaComp;
    f.elements = 4;
    f.params.values = ValueMode::kFp32;
    f.params.bin_size = 500;
    f.indices = {2};
    f.values = {3.25f};
    f.params.selected = 1;
    g.push_back({"adacomp_fp32_4", Enc(f), true, {0, 0, 3.25f, 0}, ""});
  }
  {
    Frame f;
    f.codec = Codec::kTopK;
    f.elements = 8;
    f.indices = {0, 7};
    f.values = {-1.25f, 4.0f};
    f.params.selected = 2;
    f.params.code = {IndexFamily::kRice, 2};
    g.push_back({"topk_8", Enc(f), true, {-1.25f, 0, 0, 0, 0, 0, 0, 4.0f}, ""});
  }
  {
    Frame f;
    f.codec = Codec::kThreshold;
    f.elements = 5;
    f.params.scale = 0.125f;
    f.indices = {2, 3};
    f.negative = {1, 0};
    f.params.selected = 2;
    g.push_back({"threshold_5", Enc(f), true, {0, 0, -0.125f, 0.125f, 0}, ""});
  }
  {
    Frame f;
    f.codec = Codec::kOneBit;
    f.elements = 10;
    f.params.scale = 0.75f;
    f.params.scale2 = -0.5f;
    f.symbols = {0, 1, 1, 0, 0, 0, 0, 0, 1, 0};
    g.push_back({"onebit_10",
                 Enc(f),
                 true,
                 {0.75f, -0.5f, -0.5f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, -0.5f, 0.75f},
                 ""});
  }
  {
    Frame f;
    f.codec = Codec::kTernGrad;
    f.elements = 7;
    f.params.scale = 2.0f;
    f.symbols = {0, 1, 2, 0, 0, 2, 1};
    g.push_back({"terngrad_7", Enc(f), true, {0, 2, -2, 0, 0, -2, 2}, ""});
  }
  {
    // A compressor's own frame for the example worked by hand in
    // adacomp_test.cc (L_T = 3): s = (0.4 + 0 + 1) / 3, elements 1, 2, 6 sent.
    CodecConfig cfg;
    cfg.bin_size = 3;
    auto comp = std::move(Compressor::Create(cfg, 9, 7).value());
    std::vector<float> dw = {0.1f, -0.4f, 0.3f, 0, 0, 0, 1.0f};
    std::vector<uint8_t> frame;
    EXPECT_TRUE(comp->Compress(dw, &frame).ok());
    const float s = static_cast<float>((double{0.4f} + 1.0) / 3.0);
    g.push_back({"adacomp_compressed_7", frame, true, {0, -s, s, 0, 0, 0, s}, ""});
  }
  {
    Frame f;
    f.codec = Codec::kAdaComp;
    f.params.bin_size = 50;
    g.push_back({"adacomp_empty", Enc(f), true, {}, ""});
  }
  // Frames that must fail.
  {
    auto b = Enc(Dense3());
    b[0] = 'X';
    g.push_back({"bad_magic", b, false, {}, "bad magic"});
  }
  {
    auto b = Enc(Dense3());
    b.back() ^= 0x01;
    g.push_back({"bad_crc", b, false, {}, "checksum mismatch"});
  }
  patched("bad_version", Dense3(), 2, 7, "unsupported format version 7");
  patched("unknown_codec", Dense3(), 3, 6, "unknown codec id 6");
  {
    auto b = Enc(AdaTernary10());
    b.resize(b.size() - 3);
    g.push_back({"truncated", b, false, {}, "truncated"});
  }
  // Elements claimed: 9 (byte 5), but the last index is 9.
  patched("index_out_of_range", AdaTernary10(), 5, 9, "out of range");
  {
    auto b = Enc(AdaTernary10());
    b[b.size() - 5] |= 0x80;  // a padding bit of the last payload byte
    Reseal(&b);
    g.push_back({"nonzero_padding", b, false, {}, "payload continues after the last entry"});
  }
  // Byte 7, the value mode: reserved bit 2 set.
  patched("reserved_bits", AdaTernary10(), 7, 0x04, "reserved bits");
  patched("bin_size_zero", AdaTernary10(), 9, 0, "bin_size is 0");  // byte 9: bin_size
  // Byte 10, the selected count: 11 > 10 elements.
  patched("selected_exceeds_elements", AdaTernary10(), 10, 11, "selected count 11 exceeds");
  {
    auto b = Enc(AdaTernary10());
    internal::StoreF32(&b[11], std::numeric_limits<float>::infinity());
    Reseal(&b);
    g.push_back({"nonfinite_scale", b, false, {}, "is not a finite"});
  }
  {
    Frame f;
    f.codec = Codec::kTernGrad;
    f.elements = 5;
    f.params.scale = 1.0f;
    f.symbols = {0, 0, 0, 0, 0};
    auto b = Enc(f);
    b[b.size() - 5] = 243;
    Reseal(&b);
    g.push_back({"trit_out_of_range", b, false, {}, "trit byte 243"});
  }
  g.push_back({"empty_file", {}, false, {}, "truncated"});
  return g;
}

std::string Dir() { return std::string(ADACOMP_TESTDATA_DIR) + "/golden/"; }

std::vector<uint8_t> ReadFile(const std::string& path, bool* found) {
  std::ifstream in(path, std::ios::binary);
  *found = static_cast<bool>(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GoldenTest, FilesMatchTheEncoder) {
  const auto cases = Cases();
  if (std::getenv("ADACOMP_REGENERATE_GOLDEN")) {
    std::ofstream manifest(Dir() + "MANIFEST.txt");
    manifest.precision(9);
    manifest << "# Golden frames (docs/wire-format.md). Generated by src/wire/golden_test.cc.\n"
             << "# name  ok|error  expected values or error substring\n";
    for (const Golden& g : cases) {
      std::ofstream out(Dir() + g.name + ".frame", std::ios::binary);
      out.write(reinterpret_cast<const char*>(g.bytes.data()),
                static_cast<std::streamsize>(g.bytes.size()));
      manifest << g.name << ".frame " << (g.ok ? "ok" : "error");
      if (g.ok) {
        for (float v : g.expected) manifest << ' ' << v;
      } else {
        manifest << ' ' << g.error;
      }
      manifest << '\n';
    }
  }
  for (const Golden& g : cases) {
    bool found = false;
    const auto bytes = ReadFile(Dir() + g.name + ".frame", &found);
    ASSERT_TRUE(found) << g.name;
    EXPECT_EQ(bytes, g.bytes) << g.name << ": the encoder no longer produces the golden bytes";
  }
}

TEST(GoldenTest, DecodeOrFailAsExpected) {
  for (const Golden& g : Cases()) {
    SCOPED_TRACE(g.name);
    bool found = false;
    const auto bytes = ReadFile(Dir() + g.name + ".frame", &found);
    ASSERT_TRUE(found);
    FrameInfo info;
    if (g.ok) {
      ASSERT_TRUE(InspectFrame(bytes, &info).ok());
      EXPECT_EQ(info.frame_bytes, bytes.size());
      std::vector<float> dst(info.elements, 0.0f);
      const Status s = DecodeAccumulate(bytes, dst);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(dst, g.expected);
      Frame f;
      ASSERT_TRUE(DecodeFrame(bytes, {}, &f).ok());
      std::vector<uint8_t> again;
      ASSERT_TRUE(EncodeFrame(f, &again).ok());
      EXPECT_EQ(again, bytes);
    } else {
      std::vector<float> dst(10, 1.0f);
      const Status s = InspectFrame(bytes, &info);
      ASSERT_FALSE(s.ok());
      EXPECT_NE(s.message().find(g.error), std::string::npos) << s.ToString();
      EXPECT_FALSE(DecodeAccumulate(bytes, dst).ok());
      for (float v : dst) EXPECT_EQ(v, 1.0f);
    }
  }
}

}  // namespace
}  // namespace adacomp::wire
