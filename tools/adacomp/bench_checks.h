// tools/adacomp/bench_checks.h: the data `adacomp bench` times on and the
// checks every result passes before its time is reported: gradient-like
// tensors split into per-thread parts (with further steps, so AdaComp is
// timed on a new gradient each call), and the checks of a compressed step
// (the frame decodes, conservation, AdaComp against the scalar reference of
// docs/algorithm.md, top-k's order property). Thread safety: a Part is
// owned by one thread; the checks are reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/status.h"
#include "bench_ops.h"

namespace adacomp::tool {

// One tensor of the split: each thread owns one. The parts lie back to back
// in one Data, whose whole arrays are the tensor AdaComp spreads over the
// threads inside the library (CodecConfig::threads, DecodeOptions::threads).
struct Part {
  uint64_t size = 0;
  uint64_t offset = 0;  // in Data's arrays
  uint64_t seed = 0;
  std::span<const float> grad;  // generator step 0
  // Generator steps 1..kNextSteps: AdaComp is timed on a new step each call,
  // as in training, so that the residue does not pile up at the same places
  // (compressing one gradient again and again selects 2-3x more elements).
  std::vector<std::span<const float>> next;
  size_t calls = 0;  // timed calls so far (which next step comes)
  // The same for the reference pass timed beside AdaComp compress, which
  // streams over the same next steps (see Bench::ReferenceRow).
  size_t ref_calls = 0;
};
inline constexpr int kNextSteps = 3;

struct Data {
  std::vector<float> grad;               // every part's step 0, back to back
  std::vector<std::vector<float>> next;  // steps 1..kNextSteps, likewise
  std::vector<Part> parts;
};

// The gradients of `elements` floats in `threads` parts, from `seed`.
Data MakeData(uint64_t elements, int threads, uint64_t seed);

// AdaComp, ternary, with bin size L_T and `threads` threads per call.
CodecConfig AdaCompConfig(uint32_t bin_size, int threads = 1);

// Compresses one step with `c` and checks it from the outside: the frame
// decodes, sent + new residue == old residue + gradient. Returns the decoded
// values in *decoded.
Status CompressAndCheck(Compressor& c, std::span<const float> grad, std::vector<uint8_t>* frame,
                        CompressStats* stats, std::vector<float>* decoded);

// Checks one AdaComp step against the scalar reference of docs/algorithm.md section 2.
Status CheckAdaCompStep(Compressor& c, std::span<const float> grad, uint32_t bin_size,
                        std::vector<uint8_t>* frame, CompressStats* stats);

// Checks a residual top-k result: exactly k sent, conservation, and every
// sent |G| >= every kept |G|.
Status CheckTopK(std::span<const float> old_residue, std::span<const float> grad,
                 std::span<const float> new_residue, const TopKScratch& s, uint64_t k);

}  // namespace adacomp::tool
