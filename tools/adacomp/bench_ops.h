// tools/adacomp/bench_ops.h: the kernels and checks that `adacomp bench` and
// the Google Benchmark program (bench/) time and verify besides the library's
// own compressors:
//   - the reference pass R += dW (the memory-bound floor of any residual
//     compressor: it reads and writes what they all must);
//   - residual top-k done with std::nth_element (the baseline "sort-ish"
//     compressor: G = R + dW, keep the k largest |G|, R = G - sent);
//   - a deliberately simple scalar AdaComp (docs/algorithm.md section 2) to verify the
//     library's output before anything is timed;
//   - conservation and sum checks.
// Thread safety: pure functions on caller-owned buffers; TopKScratch is per thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/status.h"

namespace adacomp::tool {

// residue[i] += grad[i].
void ReferencePass(std::span<float> residue, std::span<const float> grad);

struct TopKScratch {
  std::vector<float> magnitude;   // |G|, permuted by nth_element
  std::vector<uint32_t> indices;  // the message: selected indices ...
  std::vector<float> values;      // ... and their values (float32)
};

// Residual top-k: G = residue + grad; sends exactly min(k, N) elements of
// largest |G| (ties broken by position) into scratch->indices/values, and
// leaves residue = G - sent. Returns the number sent.
uint64_t TopKNthElement(std::span<float> residue, std::span<const float> grad, uint64_t k,
                        TopKScratch* scratch);

#ifdef ADACOMP_BENCH_HAVE_TORCH
// The same residual top-k with torch::topk on |G| (bench_torch.cc; LibTorch
// builds only). Uses one intra-op thread.
uint64_t TopKTorch(std::span<float> residue, std::span<const float> grad, uint64_t k,
                   TopKScratch* scratch);
#endif

// Scalar AdaComp, ternary values, written from docs/algorithm.md section 2 alone: given
// the old residue and the gradient, fills the dequantized values (N), the new
// residue (N) and returns the number selected; *scale receives s.
uint64_t AdaCompScalarReference(std::span<const float> old_residue, std::span<const float> grad,
                                uint32_t bin_size, std::span<float> dequantized,
                                std::span<float> new_residue, float* scale);

// Conservation: dequantized + new_residue == old_residue + grad for every
// element, to float rounding. The error names the first element that is off.
Status CheckConservation(std::span<const float> old_residue, std::span<const float> grad,
                         std::span<const float> dequantized, std::span<const float> new_residue);

// a == b element by element within |a - b| <= rel * (|a| + |b|) + abs.
Status CheckClose(std::span<const float> a, std::span<const float> b, double rel, double abs,
                  const char* what);

}  // namespace adacomp::tool
