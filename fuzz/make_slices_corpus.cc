// Writes the seed corpus of fuzz_slices (checked in under fuzz/corpus/;
// rerun after a format change):
//   fuzz_make_slices_corpus OUT_DIR
// OUT_DIR/fuzz_slices/: owners' messages for 1, 2 and 3 slices (sparse and
// dense slices, float32 and float16 values) and a failure message, behind a
// control byte 0 / 2 / 4 and the slice sizes; frames of every codec (sizes
// 1, 7, 300) behind control bytes that cut them into 1, 3 and 8 pieces.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/slices.h"

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

std::vector<float> Values(size_t n, uint32_t salt, bool sparse) {
  std::vector<float> v(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    if (sparse && (i * 7 + salt) % 5 != 0) continue;
    v[i] = static_cast<float>((static_cast<int>((i * 37 + salt) % 17) - 8)) / 64.0f;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_slices_corpus OUT_DIR\n");
    return 2;
  }
  const fs::path dir = fs::path(argv[1]) / "fuzz_slices";
  fs::create_directories(dir);
  int count = 0;
  for (int k = 1; k <= 3; ++k) {
    for (ValueMode mode : {ValueMode::kFp32, ValueMode::kFp16}) {
      std::vector<uint8_t> in = {static_cast<uint8_t>(2 * (k - 1))};
      std::vector<uint8_t> m;
      StartSlicesMessage(&m);
      for (int i = 0; i < k; ++i) {
        const uint8_t size = static_cast<uint8_t>(i == 1 ? 200 : 20 + 30 * i);
        in.push_back(size);
        PutSliceStats({100u + static_cast<uint64_t>(i), 5u}, &m);
      }
      for (int i = 0; i < k; ++i) {
        const std::vector<float> v =
            Values(1 + in[1 + static_cast<size_t>(i)], static_cast<uint32_t>(i), i != 2);
        if (!EncodeSummedSlice(static_cast<uint32_t>(i), v, &m, mode).ok()) {
          return 1;
        }
      }
      in.insert(in.end(), m.begin(), m.end());
      Write(dir / ("owner_k" + std::to_string(k) + (mode == ValueMode::kFp16 ? "_fp16" : "")), in);
      ++count;
    }
  }
  std::vector<uint8_t> failed = {0, 10};
  std::vector<uint8_t> m;
  SlicesFailedMessage(Status::OutOfRange("a sum overflowed"), &m);
  failed.insert(failed.end(), m.begin(), m.end());
  Write(dir / "owner_failed", failed);
  ++count;
  const Codec codecs[] = {Codec::kAdaComp, Codec::kTopK,   Codec::kThreshold,
                          Codec::kDense,   Codec::kOneBit, Codec::kTernGrad};
  for (Codec codec : codecs) {
    for (uint64_t n : {uint64_t{1}, uint64_t{7}, uint64_t{300}}) {
      CodecConfig c;
      c.codec = codec;
      c.bin_size = 8;
      c.density = 0.1;
      auto comp = Compressor::Create(c, 3, n);
      if (!comp.ok()) return 1;
      std::vector<uint8_t> frame;
      if (!(*comp)->Compress(Values(n, 5, false), &frame).ok()) return 1;
      for (uint8_t pieces : {1, 3, 8}) {
        std::vector<uint8_t> in = {static_cast<uint8_t>(1 | ((pieces - 1) << 2))};
        in.insert(in.end(), frame.begin(), frame.end());
        Write(dir / ("cut_" + std::string(CodecName(codec)) + "_" + std::to_string(n) + "_p" +
                     std::to_string(pieces)),
              in);
        ++count;
      }
    }
  }
  std::printf("wrote %d seeds to %s\n", count, dir.c_str());
  return 0;
}
