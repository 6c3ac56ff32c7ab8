// src/train/test_files.h: helpers for tests that write tiny data files
// (IDX raw or gzip, CIFAR-10 batches, text) into a fresh temporary directory.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace adacomp::train::testing {

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    auto base = std::filesystem::temp_directory_path();
    for (int i = 0;; ++i) {
      path_ =
          base / ("adacomp-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(i));
      if (std::filesystem::create_directory(path_)) break;
    }
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Path(const std::string& name = "") const {
    return name.empty() ? path_.string() : (path_ / name).string();
  }

 private:
  std::filesystem::path path_;
};

inline void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
}

inline std::vector<uint8_t> IdxBytes(const std::vector<uint32_t>& dims,
                                     const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// A learnable synthetic MNIST-layout set: class k lights a 6x6 block whose
// position depends on k, over deterministic noise.
inline void WriteSyntheticMnist(const std::string& dir, const std::string& prefix, int count,
                                bool gzip, uint32_t seed = 1, int classes = 10) {
  std::vector<uint8_t> images(static_cast<size_t>(count) * 28 * 28);
  std::vector<uint8_t> labels(static_cast<size_t>(count));
  uint32_t s = seed * 2654435761u + 12345u;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return s >> 8;
  };
  for (int i = 0; i < count; ++i) {
    int k = static_cast<int>(next() % static_cast<uint32_t>(classes));
    labels[static_cast<size_t>(i)] = static_cast<uint8_t>(k);
    uint8_t* img = images.data() + static_cast<size_t>(i) * 784;
    for (int p = 0; p < 784; ++p) img[p] = static_cast<uint8_t>(next() % 64);
    // One bright patch per class: a 2 x 5 grid for 10 classes, 5 x 6 beyond.
    int y0 = 2 + (k / 5) * 12, x0 = 2 + (k % 5) * 5;
    if (classes > 10) y0 = 1 + (k / 6) * 5, x0 = 1 + (k % 6) * 4;
    for (int y = y0; y < y0 + 6 && y < 28; ++y) {
      for (int x = x0; x < x0 + 4 && x < 28; ++x) img[y * 28 + x] = 255;
    }
  }
  std::string ext = gzip ? ".gz" : "";
  WriteBytes(dir + "/" + prefix + "-images-idx3-ubyte" + ext,
             IdxBytes({static_cast<uint32_t>(count), 28, 28}, images), gzip);
  WriteBytes(dir + "/" + prefix + "-labels-idx1-ubyte" + ext,
             IdxBytes({static_cast<uint32_t>(count)}, labels), gzip);
}

}  // namespace adacomp::train::testing
