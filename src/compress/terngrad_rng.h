// The counter-based generator of the terngrad codec (internal): a SplitMix64
// finalizer applied to a per-step key and the element index. Pure functions,
// so draws can be reproduced and tested.
#pragma once

#include <cstdint>

namespace adacomp::internal {

inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Key of one (seed, tensor, step).
inline uint64_t TernGradStepKey(uint64_t seed, uint32_t tensor_id, uint64_t step) {
  return Mix64(Mix64(seed ^ 0x6A09E667F3BCC909ull) ^ Mix64((uint64_t{tensor_id} << 1) | 1) ^
               Mix64(step + 0x3C6EF372FE94F82Bull));
}

// Uniform in [0, 1) with 53 random bits for element j.
inline double TernGradUniform(uint64_t key, uint64_t j) {
  return static_cast<double>(Mix64(key + (j + 1) * 0x9E3779B97F4A7C15ull) >> 11) *
         (1.0 / 9007199254740992.0);
}

}  // namespace adacomp::internal
