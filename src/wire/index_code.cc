// The sparse index code: cost, choice, and the dispatched sign-of writer.
#include "wire/index_code.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/cpu.h"
#include "core/simd.h"

namespace adacomp::wire {

uint64_t IndexCodeBits(std::span<const uint32_t> indices, IndexCode code) {
  const int k = code.k;
  const uint64_t bits = static_cast<uint64_t>(indices.size()) * (1 + static_cast<uint64_t>(k));
  if (code.family == IndexFamily::kRice) {
    return bits + internal::RiceSum(indices.data(), indices.size(), k);
  }
  return bits + 2 * internal::EgSum(indices.data(), indices.size(), k);
}

uint64_t IndexCodeBitsFrom(std::span<const uint32_t> indices, IndexCode code, uint64_t next0) {
  uint64_t bits = IndexCodeBits(indices, code);
  if (indices.empty() || next0 == 0) return bits;
  // IndexCodeBits took the first gap from 0; it is from next0.
  auto len = [&](uint64_t gap) -> uint64_t {
    const uint64_t q = gap >> code.k;
    return code.family == IndexFamily::kRice ? q
                                             : 2 * static_cast<uint64_t>(std::bit_width(q + 1) - 1);
  };
  return bits - len(indices[0]) + len(indices[0] - next0);
}

IndexCode ChooseIndexCode(std::span<const uint32_t> indices, uint64_t* code_bits) {
  if (code_bits) *code_bits = 0;
  if (indices.empty()) return {};
  // Start points: log2 of the mean gap (Rice), of the geometric mean
  // (Exp-Golomb); then descend. The Rice cost is convex in k (each step up
  // in k saves sum(ceil((g >> k) / 2)) bits, which shrinks as k grows, and
  // costs C bits), so its descent ends at the exact optimum; for
  // Exp-Golomb it ends at a local optimum, in practice the optimum.
  const internal::GapStats gs = internal::SumGaps(indices.data(), indices.size());
  const uint64_t gap_sum = gs.sum, width_sum = gs.width_sum, max_gap = gs.max;
  const uint64_t count = indices.size();
  const int k_max = std::min(kMaxCodeK, static_cast<int>(std::bit_width(max_gap)));
  auto descend = [&](IndexFamily family, int k) {
    k = std::clamp(k, 0, k_max);
    uint64_t cost = IndexCodeBits(indices, {family, static_cast<uint8_t>(k)});
    bool moved = false;
    while (k > 0) {  // down while not worse (prefers the smaller k on ties)
      const uint64_t c = IndexCodeBits(indices, {family, static_cast<uint8_t>(k - 1)});
      if (c > cost) break;
      cost = c;
      --k;
      moved = true;
    }
    while (!moved && k < k_max) {  // else up while strictly better
      const uint64_t c = IndexCodeBits(indices, {family, static_cast<uint8_t>(k + 1)});
      if (c >= cost) break;
      cost = c;
      ++k;
    }
    return std::pair<IndexCode, uint64_t>{{family, static_cast<uint8_t>(k)}, cost};
  };
  const int rice_start = static_cast<int>(std::bit_width(gap_sum / count));
  const int eg_start = static_cast<int>(width_sum / count) - 1;
  const auto rice = descend(IndexFamily::kRice, rice_start);
  const auto eg = descend(IndexFamily::kExpGolomb, eg_start);
  const auto& best = eg.second < rice.second ? eg : rice;
  if (code_bits) *code_bits = best.second;
  return best.first;
}

namespace {
void WriteSignOfPlain(uint8_t* begin, uint8_t* end, std::span<const uint32_t> indices,
                      IndexCode code, const float* values, uint64_t next0, int fill0) {
  WriteSparseBits(
      begin, end, indices, code, true, [values](size_t j) { return std::signbit(values[j]); },
      next0, fill0);
}
#if ADACOMP_X86_SIMD
// The same code with BMI2's flag-free variable shifts (shlx/shrx), which
// take about a sixth off the writer's time per entry.
ADACOMP_TARGET_BMI2 void WriteSignOfBmi2(uint8_t* begin, uint8_t* end,
                                         std::span<const uint32_t> indices, IndexCode code,
                                         const float* values, uint64_t next0, int fill0) {
  WriteSparseBits(
      begin, end, indices, code, true, [values](size_t j) { return std::signbit(values[j]); },
      next0, fill0);
}
#endif
}  // namespace

void WriteSparseBitsSignOf(uint8_t* begin, uint8_t* end, std::span<const uint32_t> indices,
                           IndexCode code, const float* values, uint64_t next0, int fill0) {
#if ADACOMP_X86_SIMD
  if (internal::CpuHasBmi2())
    return WriteSignOfBmi2(begin, end, indices, code, values, next0, fill0);
#endif
  WriteSignOfPlain(begin, end, indices, code, values, next0, fill0);
}

size_t SparsePayloadBytes(uint64_t count, uint64_t code_bits, bool signs, int value_bytes) {
  return static_cast<size_t>(count * value_bytes + CeilDiv(code_bits + (signs ? count : 0), 8));
}

}  // namespace adacomp::wire
