// Writes the seed corpora of the fuzz targets (checked in under fuzz/corpus/;
// rerun after a format change):
//   fuzz_make_corpus GOLDEN_DIR OUT_DIR
// OUT_DIR/fuzz_decode/: every golden frame of GOLDEN_DIR behind a control
//   byte 0 (no reseal), frames made by the compressors for every codec and
//   value mode (sizes 0, 1, 7, 64, 1000), and back-to-back streams of them;
// OUT_DIR/fuzz_roundtrip/: one input per codec and value mode for each
//   gradient kind of fuzz_roundtrip.cc.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "adacomp/codec.h"

namespace fs = std::filesystem;
using namespace adacomp;

namespace {

void Write(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", p.c_str());
    std::exit(1);
  }
}

std::vector<float> Gradient(size_t n, uint32_t seed) {
  std::vector<float> g(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    g[i] = (x % 7 == 0) ? 0.0f : static_cast<float>(static_cast<int32_t>(x % 2001) - 1000) * 1e-4f;
  }
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s GOLDEN_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  const fs::path golden(argv[1]);
  const fs::path dec = fs::path(argv[2]) / "fuzz_decode";
  const fs::path rt = fs::path(argv[2]) / "fuzz_roundtrip";
  fs::create_directories(dec);
  fs::create_directories(rt);
  int count = 0;

  for (const auto& e : fs::directory_iterator(golden)) {
    if (e.path().extension() != ".frame") continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::vector<uint8_t> bytes{0};
    bytes.insert(bytes.end(), std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    Write(dec / ("golden_" + e.path().stem().string()), bytes);
    ++count;
  }

  struct Setting {
    const char* name;
    CodecConfig cfg;
  };
  std::vector<Setting> settings;
  auto add = [&](const char* name, Codec c, ValueMode v = ValueMode::kTernary) {
    CodecConfig cfg;
    cfg.codec = c;
    cfg.values = v;
    cfg.bin_size = 50;
    cfg.density = 0.05;
    cfg.tau = 0.05f;
    cfg.seed = 42;
    settings.push_back({name, cfg});
  };
  add("dense", Codec::kDense);
  add("adacomp_ternary", Codec::kAdaComp, ValueMode::kTernary);
  add("adacomp_fp16", Codec::kAdaComp, ValueMode::kFp16);
  add("adacomp_fp32", Codec::kAdaComp, ValueMode::kFp32);
  add("topk", Codec::kTopK);
  add("threshold", Codec::kThreshold);
  add("onebit", Codec::kOneBit);
  add("terngrad", Codec::kTernGrad);

  std::vector<uint8_t> stream{0};
  for (const Setting& s : settings) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{1000}}) {
      auto c = Compressor::Create(s.cfg, static_cast<uint32_t>(n + 3), n);
      if (!c.ok()) return 1;
      std::vector<uint8_t> frames{0};
      for (int step = 0; step < 2; ++step) {
        const Status st = (*c)->Compress(Gradient(n, static_cast<uint32_t>(step + n)), &frames);
        if (!st.ok()) return 1;
      }
      Write(dec / (std::string(s.name) + "_" + std::to_string(n) + "_x2"), frames);
      if (n == 7) stream.insert(stream.end(), frames.begin() + 1, frames.end());
      ++count;
    }
  }
  Write(dec / "stream_all_codecs_7", stream);
  ++count;

  // fuzz_roundtrip inputs: codec, bin_size u16, values, density, tau (2),
  // seed u64, tensor id u32, n u16, steps, save_at, prefix length, then the
  // gradient mode byte of step 0 (the rest comes from the generator).
  const uint8_t codec_values[][2] = {{0, 0}, {1, 0}, {1, 1}, {1, 2},
                                     {2, 0}, {3, 0}, {4, 0}, {5, 0}};
  for (const auto& cv : codec_values) {
    for (uint8_t mode = 0; mode < 8; ++mode) {
      std::vector<uint8_t> in = {cv[0], 50, 0, cv[1], 12, 0, 37};
      for (int i = 0; i < 8; ++i) in.push_back(static_cast<uint8_t>(i + 1));
      in.insert(in.end(), {5, 0, 0, 0});  // tensor id
      // n: 100 + mode, or (for the mixed kinds) 0x8800 % 4097 = 2040.
      if (mode >= 6) {
        in.insert(in.end(), {0x00, 0x88});
      } else {
        in.insert(in.end(), {static_cast<uint8_t>(100 + mode), 0});
      }
      in.insert(in.end(), {3, 1, 0, mode});  // 4 steps, state saved at step 1, no prefix
      Write(rt / ("codec" + std::to_string(cv[0]) + "_values" + std::to_string(cv[1]) + "_mode" +
                  std::to_string(mode)),
            in);
      ++count;
    }
  }
  std::printf("wrote %d corpus files\n", count);
  return 0;
}
