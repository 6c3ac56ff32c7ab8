// Uses the installed adacomp: compresses a few steps of a small tensor with
// AdaComp, decodes every frame, checks conservation (sum of what was sent +
// final residue == sum of the gradients), and, when the communicator library
// is installed, sums the frames of two in-process learners.
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/communicator.h"
#include "adacomp/version.h"

int main() {
  constexpr size_t kN = 1000;
  constexpr int kSteps = 3;
  adacomp::CodecConfig config;
  config.codec = adacomp::Codec::kAdaComp;
  config.bin_size = 50;
  auto made = adacomp::Compressor::Create(config, /*tensor_id=*/7, kN);
  if (!made.ok()) {
    std::fprintf(stderr, "consumer: %s\n", made.status().ToString().c_str());
    return 1;
  }
  auto& compressor = **made;
  std::vector<double> sum_in(kN, 0.0), sum_out(kN, 0.0);
  std::vector<float> grad(kN);
  std::vector<uint8_t> frame;
  for (int k = 0; k < kSteps; ++k) {
    for (size_t j = 0; j < kN; ++j) {
      grad[j] = static_cast<float>(std::sin(0.37 * j + k) * std::exp(-0.002 * j));
      sum_in[j] += grad[j];
    }
    frame.clear();
    adacomp::Status s = compressor.Compress(grad, &frame);
    if (!s.ok()) {
      std::fprintf(stderr, "consumer: compress: %s\n", s.ToString().c_str());
      return 1;
    }
    std::vector<float> dense(kN, 0.0f);
    adacomp::FrameInfo info;
    s = adacomp::DecodeAccumulate(frame, dense, &info);
    if (!s.ok() || info.tensor_id != 7 || info.elements != kN) {
      std::fprintf(stderr, "consumer: decode: %s\n", s.ToString().c_str());
      return 1;
    }
    for (size_t j = 0; j < kN; ++j) sum_out[j] += dense[j];
  }
  for (size_t j = 0; j < kN; ++j) {
    double total = sum_out[j] + compressor.residue()[j];
    if (std::fabs(total - sum_in[j]) > 1e-5 * (1.0 + std::fabs(sum_in[j]))) {
      std::fprintf(stderr, "consumer: conservation fails at %zu: %g vs %g\n", j, total, sum_in[j]);
      return 1;
    }
  }
  // The communicator library, through the same package.
  auto group = adacomp::CreateInProcessGroup(1);
  if (group.size() != 1 || group[0]->size() != 1) {
    std::fprintf(stderr, "consumer: in-process group of 1 has the wrong size\n");
    return 1;
  }
  std::printf("consumer OK: adacomp %s, %d steps of %zu elements, last frame %zu bytes\n",
              adacomp::kVersion, kSteps, kN, frame.size());
  return 0;
}
