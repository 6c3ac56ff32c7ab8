// The bench's data and result checks (see bench_checks.h).
#include "bench_checks.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

#include "gradient_gen.h"

namespace adacomp::tool {

Data MakeData(uint64_t elements, int threads, uint64_t seed) {
  Data d;
  d.grad.resize(elements);
  d.next.assign(kNextSteps, std::vector<float>(elements));
  std::vector<Part>& parts = d.parts;
  parts.resize(threads);
  const uint64_t base = elements / threads;
  const uint64_t extra = elements % threads;
  uint64_t offset = 0;
  for (int t = 0; t < threads; ++t) {
    parts[t].size = base + (static_cast<uint64_t>(t) < extra ? 1 : 0);
    parts[t].seed = seed * 1000 + t;
    parts[t].offset = offset;
    parts[t].grad = std::span<const float>(d.grad.data() + offset, parts[t].size);
    for (int k = 0; k < kNextSteps; ++k) {
      parts[t].next.emplace_back(d.next[k].data() + offset, parts[t].size);
    }
    offset += parts[t].size;
  }
  // Generate in parallel chunks (the generator is a pure function of the index).
  const unsigned workers = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  for (int t = 0; t < threads; ++t) {
    GradientSpec spec;
    spec.elements = parts[t].size;
    spec.seed = parts[t].seed;
    spec.scale = LayerScale(seed, t, 1e-3);
    const uint64_t chunk = (spec.elements + workers - 1) / workers;
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < workers; ++w) {
      uint64_t begin = w * chunk;
      if (begin >= spec.elements) break;
      uint64_t count = std::min(chunk, spec.elements - begin);
      pool.emplace_back([&, begin, count, spec] {
        const uint64_t at = parts[t].offset + begin;
        GenerateGradientRange(spec, 0, begin, std::span<float>(d.grad.data() + at, count));
        for (int k = 0; k < kNextSteps; ++k) {
          GenerateGradientRange(spec, k + 1, begin, std::span<float>(d.next[k].data() + at, count));
        }
      });
    }
    for (auto& th : pool) th.join();
  }
  return d;
}

CodecConfig AdaCompConfig(uint32_t bin_size, int threads) {
  CodecConfig c;
  c.codec = Codec::kAdaComp;
  c.bin_size = bin_size;
  c.values = ValueMode::kTernary;
  c.threads = threads;
  return c;
}

// Compresses one step with `c` and checks it from the outside: the frame
// decodes, sent + new residue == old residue + gradient. Returns the decoded
// values in *decoded.
Status CompressAndCheck(Compressor& c, std::span<const float> grad, std::vector<uint8_t>* frame,
                        CompressStats* stats, std::vector<float>* decoded) {
  std::vector<float> old(c.residue().begin(), c.residue().end());
  frame->clear();
  ADACOMP_RETURN_IF_ERROR(c.Compress(grad, frame, stats));
  if (stats->frame_bytes != frame->size()) {
    return Status::Internal("stats say " + std::to_string(stats->frame_bytes) +
                            " frame bytes, the frame has " + std::to_string(frame->size()));
  }
  decoded->assign(grad.size(), 0.0f);
  ADACOMP_RETURN_IF_ERROR(DecodeAccumulate(*frame, *decoded).WithContext("decoding own frame"));
  uint64_t nonzero = 0;
  for (float v : *decoded) nonzero += v != 0.0f;
  if (nonzero > stats->selected) {
    return Status::Internal("frame carries " + std::to_string(nonzero) +
                            " non-zero values, stats say " + std::to_string(stats->selected) +
                            " selected");
  }
  if (!c.residue().empty()) {
    ADACOMP_RETURN_IF_ERROR(CheckConservation(old, grad, *decoded, c.residue()));
  }
  return Status::OK();
}

// Checks one AdaComp step against the scalar reference of docs/algorithm.md section 2.
Status CheckAdaCompStep(Compressor& c, std::span<const float> grad, uint32_t bin_size,
                        std::vector<uint8_t>* frame, CompressStats* stats) {
  std::vector<float> old(c.residue().begin(), c.residue().end());
  std::vector<float> decoded;
  ADACOMP_RETURN_IF_ERROR(CompressAndCheck(c, grad, frame, stats, &decoded));
  std::vector<float> ref_deq(grad.size()), ref_res(grad.size());
  float ref_scale = 0;
  uint64_t ref_selected = AdaCompScalarReference(old, grad, bin_size, ref_deq, ref_res, &ref_scale);
  // The same selection and signs (a rounding tie may flip a handful of
  // elements if the library forms H in another order), the same scale.
  uint64_t mismatches = 0;
  for (size_t j = 0; j < grad.size(); ++j) {
    bool a = decoded[j] != 0, b = ref_deq[j] != 0;
    if (a != b || (a && std::signbit(decoded[j]) != std::signbit(ref_deq[j]))) {
      ++mismatches;
    } else if (a && std::fabs(std::fabs(decoded[j]) - ref_scale) > 1e-5 * ref_scale) {
      return Status::Internal("element " + std::to_string(j) + " is sent as " +
                              std::to_string(decoded[j]) + ", reference scale is " +
                              std::to_string(ref_scale));
    }
  }
  if (mismatches > 1 + grad.size() / 1'000'000) {
    return Status::Internal(std::to_string(mismatches) +
                            " elements differ from the scalar reference in selection or sign "
                            "(library selected " +
                            std::to_string(stats->selected) + ", reference " +
                            std::to_string(ref_selected) + ")");
  }
  return Status::OK();
}

// Checks a residual top-k result: exactly k sent, conservation, and every
// sent |G| >= every kept |G|.
Status CheckTopK(std::span<const float> old_residue, std::span<const float> grad,
                 std::span<const float> new_residue, const TopKScratch& s, uint64_t k) {
  if (s.indices.size() != k || s.values.size() != k) {
    return Status::Internal("sent " + std::to_string(s.indices.size()) + " elements, expected " +
                            std::to_string(k));
  }
  std::vector<float> sent(grad.size(), 0.0f);
  float min_sent = INFINITY;
  for (size_t m = 0; m < k; ++m) {
    if (s.indices[m] >= grad.size()) return Status::Internal("index out of range");
    if (sent[s.indices[m]] != 0.0f) return Status::Internal("index sent twice");
    sent[s.indices[m]] = s.values[m];
    min_sent = std::min(min_sent, std::fabs(s.values[m]));
  }
  ADACOMP_RETURN_IF_ERROR(CheckConservation(old_residue, grad, sent, new_residue));
  float max_kept = 0;
  for (size_t j = 0; j < grad.size(); ++j) {
    if (s.values.size() && sent[j] == 0.0f)
      max_kept = std::max(max_kept, std::fabs(new_residue[j]));
  }
  if (k > 0 && max_kept > min_sent) {
    return Status::Internal("kept |G| " + std::to_string(max_kept) + " above sent |G| " +
                            std::to_string(min_sent));
  }
  return Status::OK();
}

}  // namespace adacomp::tool
