// tools/adacomp/gradient_gen.h: deterministic, gradient-like test data for
// `adacomp gen-gradient`, `adacomp bench` and the Google Benchmark program.
//
// Real gradients are not uniform noise: they are heavy-tailed, their scale
// varies from unit to unit (some units are nearly silent), part of them
// persists from step to step, and the overall scale shrinks as training goes
// on. The generator models exactly that (see kGradientModelHelp for the
// formula). Every element is a pure function of (seed, step, index), so any
// range of any step can be generated independently, in any order, from any
// thread, and the same arguments always give the same bits.
//
// Thread safety: the functions are pure; call them from any thread.
#pragma once

#include <cstdint>
#include <span>

namespace adacomp::tool {

struct GradientSpec {
  uint64_t elements = 0;     // N, elements per step
  uint64_t seed = 1;         // selects the tensor ("layer"); different seeds, independent data
  double scale = 1e-3;       // overall magnitude (typical |g| of an active unit at step 0)
  uint32_t unit_size = 256;  // consecutive elements sharing one activity level (a "unit" / row)
};

// Writes elements [begin, begin + out.size()) of step `step` into out.
// Requires begin + out.size() <= spec.elements.
void GenerateGradientRange(const GradientSpec& spec, uint64_t step, uint64_t begin,
                           std::span<float> out);

// The whole step (out.size() == spec.elements).
inline void GenerateGradient(const GradientSpec& spec, uint64_t step, std::span<float> out) {
  GenerateGradientRange(spec, step, 0, out);
}

// A per-layer scale for tensor `layer` of a multi-tensor model: log-normal
// around `base` (sigma 1), deterministic in (seed, layer).
double LayerScale(uint64_t seed, uint64_t layer, double base);

// The model, in words, for --help texts.
extern const char kGradientModelHelp[];

}  // namespace adacomp::tool
