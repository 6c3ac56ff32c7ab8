// Fuzz target: compressor round trip and conservation.
//
// From the input it derives a codec and its settings (bin size 1..600, value
// mode, density, tau, seed), a tensor id, a size N (0..4096), a number of
// steps (1..6) and one gradient per step (finite floats drawn from raw bits,
// small dyadic values, signed zeros, denormals, values near FLT_MAX,
// gradient-like values, a mix per element, or mostly zeros with a few of the
// others). Each step is compressed and every property below is checked;
// any violation aborts.
//
//  1. Compress succeeds, or (only when residue + gradient can overflow
//     float32) fails with InvalidArgument leaving the output vector and the
//     residue bit-for-bit unchanged.
//  2. The frame is appended after the bytes already in the vector (which stay
//     untouched); stats match the frame.
//  3. The decoder accepts exactly what the encoder wrote: InspectFrame with
//     max_frame_bytes == the frame's size, max_elements == N and the right
//     tensor id accepts it; one byte less, a flipped bit (CRC32C catches every
//     single-bit error), a wrong id or a wrong dst size are rejected with dst
//     untouched. DecodeFrame -> EncodeFrame gives identical bytes.
//  4. Semantics, by independent scalar references: dense sends the gradient
//     bit-for-bit; adacomp's selection, signs and scale follow docs/algorithm.md section 2
//     exactly (same float operations, so equality is exact); fp16 values are
//     a nearest half of clamp(G); fp32 values are G; topk sends the k largest
//     |G| (ties to the lower index) with their exact values; threshold sends
//     +-tau exactly where |G| >= tau; onebit sends the sign of G and the means
//     of both sides; terngrad sends 0 for zero gradients, +-s with the
//     gradient's sign otherwise, s = max|g|, and always sends |g| == s.
//  5. Conservation (codecs with a residue): for every element,
//     q + R_new == R_old + g within 1/2 ulp(G) + 1/2 ulp(R_new) (+ 2^-50
//     relative slack for evaluating the check itself in double). Why this
//     bound: the compressor rounds twice, G = fl(R_old + g) (error <= 1/2 ulp
//     of G) and R_new = fl(G - q) (error <= 1/2 ulp of R_new); any larger
//     difference means a value was lost or invented. Unselected elements must
//     keep G exactly (q = 0, R_new = G).
//  6. Determinism and state: a compressor restored with LoadState from
//     SaveState at a fuzzed step produces identical frames from then on; a
//     state with one byte flipped is rejected and changes nothing.
//  7. All frames of all steps, back to back in one buffer, walk correctly.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "adacomp/codec.h"
#include "compress/common.h"
#include "fuzz_util.h"
#include "wire/frame.h"

namespace adacomp::fuzz {
namespace {

constexpr uint32_t kMaxN = 4096;

float DrawFloat(ByteSource& in, int mode) {
  switch (mode) {
    case 0: {  // raw bits, non-finite replaced
      const float f = std::bit_cast<float>(in.U32());
      return std::isfinite(f) ? f : 0.0f;
    }
    case 1:  // small dyadic values
      return static_cast<float>(static_cast<int8_t>(in.U8())) * std::ldexp(1.0f, -(in.U8() % 24));
    case 2:
      return (in.U8() & 1) ? -0.0f : 0.0f;
    case 3:  // denormals (and zeros)
      return std::bit_cast<float>(in.U32() & 0x807FFFFFu);
    case 4: {  // near FLT_MAX
      const float f = FLT_MAX * (1.0f - static_cast<float>(in.U8()) / 512.0f);
      return (in.U8() & 1) ? -f : f;
    }
    case 5:  // gradient-like magnitudes
      return static_cast<float>(static_cast<int16_t>(in.U16())) * 1e-7f;
    default:
      return 0.0f;
  }
}

// Nearest-half check, independent of core/half.h: |q - x| <= half an ulp of
// the half format at x (ulp = 2^(max(e, -14) - 10), e = floor(log2|x|)).
bool IsNearestHalf(float q, float x) {
  if (x == 0.0f) return q == 0.0f;
  int e = 0;
  std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1
  const double ulp = std::ldexp(1.0, std::max(e - 1, -14) - 10);
  return std::fabs(static_cast<double>(q) - static_cast<double>(x)) <= ulp / 2 &&
         (q == 0.0f || std::signbit(q) == std::signbit(x));
}

double Ulp(float v) {
  const float a = std::fabs(v);
  if (a == FLT_MAX) return std::ldexp(1.0, 104);
  return static_cast<double>(std::nextafter(a, INFINITY)) - static_cast<double>(a);
}

bool HasResidue(Codec c) {
  return c == Codec::kAdaComp || c == Codec::kTopK || c == Codec::kThreshold || c == Codec::kOneBit;
}

void CheckRejects(std::span<const uint8_t> bytes, size_t n, const DecodeOptions& o,
                  const char* what) {
  std::vector<float> dst(n), before(n);
  FillPattern(dst, 7);
  before = dst;
  const Status s = DecodeAccumulate(bytes, dst, nullptr, o);
  FUZZ_CHECK(!s.ok(), "%s: accepted", what);
  FUZZ_CHECK(FirstBitDifference(dst, before) < 0, "%s: rejected frame changed dst", what);
}

// Checks the frame of one successful step against the references; q receives
// the dequantized values.
void CheckFrame(const CodecConfig& cfg, uint32_t id, std::span<const uint8_t> bytes,
                std::span<const float> r_old, std::span<const float> grad,
                std::span<const float> r_new, const CompressStats& st, std::vector<float>* q_out,
                size_t step) {
  const size_t n = grad.size();
  DecodeOptions tight;
  tight.max_frame_bytes = bytes.size();
  tight.max_elements = n;
  tight.expected_tensor_id = id;
  FrameInfo info;
  Status s = InspectFrame(bytes, &info, tight);
  FUZZ_CHECK(s.ok(), "step %zu: the decoder rejects the encoder's frame: %s", step,
             s.ToString().c_str());
  FUZZ_CHECK(info.frame_bytes == bytes.size() && info.codec == cfg.codec && info.tensor_id == id &&
                 info.elements == n,
             "step %zu: header fields differ", step);
  FUZZ_CHECK(st.frame_bytes == bytes.size() && st.elements == n && st.selected == info.selected,
             "step %zu: stats (bytes %llu selected %llu) differ from the frame (%zu, %llu)", step,
             static_cast<unsigned long long>(st.frame_bytes),
             static_cast<unsigned long long>(st.selected), bytes.size(),
             static_cast<unsigned long long>(info.selected));

  // Decode -> encode identity.
  wire::Frame f;
  s = wire::DecodeFrame(bytes, tight, &f);
  FUZZ_CHECK(s.ok(), "DecodeFrame: %s", s.ToString().c_str());
  std::vector<uint8_t> again;
  s = wire::EncodeFrame(f, &again);
  FUZZ_CHECK(s.ok() && again.size() == bytes.size() &&
                 std::equal(again.begin(), again.end(), bytes.begin()),
             "step %zu: re-encoding differs", step);

  // Dequantize by accumulating into zeros.
  std::vector<float>& q = *q_out;
  q.assign(n, 0.0f);
  s = DecodeAccumulate(bytes, q, nullptr, tight);
  FUZZ_CHECK(s.ok(), "DecodeAccumulate: %s", s.ToString().c_str());

  // Rejections.
  std::vector<uint8_t> bad(bytes.begin(), bytes.end());
  CheckRejects(std::span(bad).first(bad.size() - 1), n, DecodeOptions{}, "truncated by one byte");
  const size_t bit = (step * 2654435761u + n) % (8 * bad.size());
  bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  CheckRejects(bad, n, DecodeOptions{}, "one bit flipped");
  DecodeOptions o = tight;
  o.max_frame_bytes = bytes.size() - 1;
  CheckRejects(bytes, n, o, "max_frame_bytes one short");
  o = tight;
  o.expected_tensor_id = id + 1;
  CheckRejects(bytes, n, o, "other tensor id");
  CheckRejects(bytes, n + 1, tight, "dst one long");
  if (n > 0) {
    o = tight;
    o.max_elements = n - 1;
    CheckRejects(bytes, n, o, "max_elements one short");
  }

  // G as the compressor forms it.
  std::vector<float> g(n);
  for (size_t j = 0; j < n; ++j) g[j] = HasResidue(cfg.codec) ? r_old[j] + grad[j] : grad[j];

  switch (cfg.codec) {
    case Codec::kDense:
      for (size_t j = 0; j < n; ++j) {
        FUZZ_CHECK(std::bit_cast<uint32_t>(f.values[j]) == std::bit_cast<uint32_t>(grad[j]),
                   "dense value %zu", j);
      }
      break;
    case Codec::kAdaComp: {
      const size_t bin = cfg.bin_size;
      const size_t bins = n == 0 ? 0 : (n - 1) / bin + 1;
      std::vector<uint32_t> sel;
      double sum = 0.0, group = 0.0;
      for (size_t b = 0; b < bins; ++b) {
        const size_t lo = b * bin, hi = std::min(n, lo + bin);
        float m = 0.0f;
        for (size_t j = lo; j < hi; ++j) {
          if (std::fabs(g[j]) > m) m = std::fabs(g[j]);
        }
        group += m;  // s: sums by groups of kScaleGroupBins bins, then of the groups
        if ((b + 1) % internal::kScaleGroupBins == 0 || b + 1 == bins) {
          sum += group;
          group = 0.0;
        }
        size_t c = 0;
        for (size_t j = lo; j < hi; ++j) {
          const float h = g[j] + grad[j];
          if (std::fabs(h) >= m && g[j] != 0.0f) {
            sel.push_back(static_cast<uint32_t>(j));
            ++c;
          }
        }
        (void)c;
      }
      uint64_t hist_bins = 0;
      for (uint64_t h : st.bin_histogram) hist_bins += h;
      FUZZ_CHECK(st.bins == bins && hist_bins == bins,
                 "adacomp bins %llu, histogram %llu, want %zu",
                 static_cast<unsigned long long>(st.bins),
                 static_cast<unsigned long long>(hist_bins), bins);
      FUZZ_CHECK(f.indices == sel, "adacomp selection differs (%zu vs %zu selected)",
                 f.indices.size(), sel.size());
      FUZZ_CHECK(f.params.bin_size == cfg.bin_size && f.params.values == cfg.values,
                 "adacomp params");
      const float scale = bins ? static_cast<float>(sum / static_cast<double>(bins)) : 0.0f;
      for (size_t e = 0; e < sel.size(); ++e) {
        const float gj = g[sel[e]];
        const float qj = q[sel[e]];
        switch (cfg.values) {
          case ValueMode::kTernary:
            FUZZ_CHECK(std::bit_cast<uint32_t>(f.params.scale) == std::bit_cast<uint32_t>(scale),
                       "adacomp scale %.9g, want %.9g", f.params.scale, scale);
            FUZZ_CHECK(qj == (gj < 0.0f ? -scale : scale), "adacomp ternary value %u", sel[e]);
            break;
          case ValueMode::kFp16:
            FUZZ_CHECK(IsNearestHalf(qj, std::clamp(gj, -65504.0f, 65504.0f)),
                       "adacomp fp16 value %.9g for G %.9g", qj, gj);
            break;
          case ValueMode::kFp32:
            FUZZ_CHECK(std::bit_cast<uint32_t>(qj) == std::bit_cast<uint32_t>(gj + 0.0f),
                       "adacomp fp32 value");
            break;
        }
      }
      break;
    }
    case Codec::kTopK: {
      const size_t k =
          n == 0 ? 0
                 : std::min<size_t>(
                       n, std::max<size_t>(
                              1, static_cast<size_t>(std::ceil(cfg.density * double(n)))));
      FUZZ_CHECK(f.indices.size() == k, "topk sent %zu, want k = %zu", f.indices.size(), k);
      std::vector<uint8_t> is_sel(n, 0);
      float min_sel = INFINITY;
      uint32_t max_idx_at_min = 0;
      for (size_t e = 0; e < k; ++e) {
        const uint32_t j = f.indices[e];
        is_sel[j] = 1;
        FUZZ_CHECK(std::bit_cast<uint32_t>(f.values[e]) == std::bit_cast<uint32_t>(g[j]),
                   "topk value of %u", j);
        const float a = std::fabs(g[j]);
        if (a < min_sel || (a == min_sel && j > max_idx_at_min)) {
          min_sel = a;
          max_idx_at_min = j;
        }
      }
      for (size_t j = 0; j < n; ++j) {
        if (is_sel[j]) continue;
        const float a = std::fabs(g[j]);
        FUZZ_CHECK(a < min_sel || (a == min_sel && j > max_idx_at_min),
                   "topk skipped %zu (|G| %.9g) but sent |G| %.9g", j, a, min_sel);
      }
      break;
    }
    case Codec::kThreshold:
      for (size_t j = 0, e = 0; j < n; ++j) {
        const bool want = std::fabs(g[j]) >= cfg.tau;
        const bool got = e < f.indices.size() && f.indices[e] == j;
        FUZZ_CHECK(want == got, "threshold selection at %zu", j);
        if (got) {
          FUZZ_CHECK(q[j] == (g[j] < 0.0f ? -cfg.tau : cfg.tau), "threshold value at %zu", j);
          ++e;
        }
      }
      break;
    case Codec::kOneBit: {
      double ps = 0, ns = 0;
      uint64_t pn = 0, nn = 0;
      for (size_t j = 0; j < n; ++j) {
        if (g[j] < 0.0f) {
          ns += g[j];
          ++nn;
        } else {
          ps += g[j];
          ++pn;
        }
      }
      const float pm = pn ? static_cast<float>(ps / double(pn)) : 0.0f;
      const float nm = nn ? static_cast<float>(ns / double(nn)) : 0.0f;
      FUZZ_CHECK(f.params.scale == pm && f.params.scale2 == nm,
                 "onebit means %.9g %.9g, want %.9g %.9g", f.params.scale, f.params.scale2, pm, nm);
      for (size_t j = 0; j < n; ++j) {
        FUZZ_CHECK(f.symbols[j] == (g[j] < 0.0f ? 1 : 0), "onebit sign bit %zu", j);
      }
      break;
    }
    case Codec::kTernGrad: {
      float s_max = 0.0f;
      for (float v : grad) s_max = std::max(s_max, std::fabs(v));
      FUZZ_CHECK(f.params.scale == s_max, "terngrad s %.9g, want %.9g", f.params.scale, s_max);
      for (size_t j = 0; j < n; ++j) {
        const uint8_t t = f.symbols[j];
        if (grad[j] == 0.0f) FUZZ_CHECK(t == 0, "terngrad sent a zero gradient at %zu", j);
        if (t != 0) FUZZ_CHECK((t == 2) == (grad[j] < 0.0f), "terngrad sign at %zu", j);
        if (grad[j] != 0.0f && std::fabs(grad[j]) == s_max) {
          FUZZ_CHECK(t != 0, "terngrad dropped |g| == s at %zu (probability 1)", j);
        }
      }
      break;
    }
  }

  // Conservation.
  if (HasResidue(cfg.codec)) {
    FUZZ_CHECK(r_new.size() == n, "residue size");
    for (size_t j = 0; j < n; ++j) {
      const double lhs = double(q[j]) + double(r_new[j]);
      const double rhs = double(r_old[j]) + double(grad[j]);
      const double tol = Ulp(g[j]) / 2 + Ulp(r_new[j]) / 2 +
                         std::ldexp(std::fabs(q[j]) + std::fabs(r_new[j]) + std::fabs(r_old[j]) +
                                        std::fabs(grad[j]),
                                    -50);
      FUZZ_CHECK(std::fabs(lhs - rhs) <= tol,
                 "step %zu element %zu: q %.9g + R_new %.9g != R_old %.9g + g %.9g (diff %.3g, "
                 "tolerance %.3g)",
                 step, j, q[j], r_new[j], r_old[j], grad[j], std::fabs(lhs - rhs), tol);
      if (q[j] == 0.0f && !(cfg.codec == Codec::kOneBit)) {
        // Not sent: R_new must be G exactly (the value of -0 vs +0 aside).
        FUZZ_CHECK(r_new[j] == g[j], "element %zu not sent but residue %.9g != G %.9g", j, r_new[j],
                   g[j]);
      }
    }
  } else {
    FUZZ_CHECK(r_new.empty(), "codec without residue has one");
  }
}

}  // namespace
}  // namespace adacomp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adacomp;
  using namespace adacomp::fuzz;
  ByteSource in(data, size);
  CodecConfig cfg;
  cfg.codec = static_cast<Codec>(in.U8() % 6);
  cfg.bin_size = 1 + in.U16() % 600;
  cfg.values = static_cast<ValueMode>(in.U8() % 3);
  const uint8_t d = in.U8();
  cfg.density = d == 0 ? 1e-6 : d / 255.0;
  cfg.tau = std::ldexp(1.0f + in.U8() / 256.0f, static_cast<int>(in.U8() % 64) - 40);
  cfg.seed = in.U64();
  const uint32_t id = in.U32();
  const uint16_t n_raw = in.U16();  // half the inputs small (fast), half up to kMaxN
  const uint32_t n = (n_raw & 0x8000) ? n_raw % (kMaxN + 1) : n_raw % 129;
  const int steps = 1 + in.U8() % 6;
  const int save_at = in.U8() % (steps + 1);  // == steps: never
  FUZZ_CHECK(cfg.Validate().ok(), "derived an invalid config");

  auto made = Compressor::Create(cfg, id, n);
  FUZZ_CHECK(made.ok(), "Create: %s", made.status().ToString().c_str());
  std::unique_ptr<Compressor> comp = std::move(made).value();
  std::unique_ptr<Compressor> twin;  // restored from comp's state at save_at

  std::vector<uint8_t> prefix(in.U8() % 8);
  for (auto& b : prefix) b = in.U8();
  std::vector<uint8_t> out = prefix, twin_out = prefix, stream;
  std::vector<size_t> frame_sizes;
  std::vector<float> grad(n), r_old, q;
  float prev_gmax = 0.0f;  // max |G| of the last successful step (adacomp's bound)

  for (int step = 0; step < steps; ++step) {
    if (step == save_at) {
      const std::vector<uint8_t> state = comp->SaveState();
      auto t = Compressor::Create(cfg, id, n);
      FUZZ_CHECK(t.ok(), "Create twin");
      twin = std::move(t).value();
      std::vector<uint8_t> broken = state;
      if (!broken.empty())
        broken[in.U16() % broken.size()] ^= static_cast<uint8_t>(1 + in.U8() % 255);
      const std::vector<float> fresh(twin->residue().begin(), twin->residue().end());
      FUZZ_CHECK(!twin->LoadState(broken).ok(), "a corrupted state was accepted");
      FUZZ_CHECK(FirstBitDifference(twin->residue(), fresh) < 0,
                 "a rejected state changed the residue");
      const Status ls = twin->LoadState(state);
      FUZZ_CHECK(ls.ok(), "LoadState(SaveState()): %s", ls.ToString().c_str());
      FUZZ_CHECK(FirstBitDifference(twin->residue(), comp->residue()) < 0,
                 "restored residue differs");
    }
    const uint8_t mode_byte = in.U8();
    const int mode = mode_byte % 8;  // 0-5 one kind, 6 a mix, 7 mostly zeros
    for (uint32_t j = 0; j < n; ++j) {
      int kind = mode;
      if (mode == 6) kind = in.U8() % 6;
      if (mode == 7) {
        const uint8_t b = in.U8();
        kind = (b & 7) ? 2 : (b >> 3) % 6;
      }
      grad[j] = DrawFloat(in, kind);
    }

    r_old.assign(comp->residue().begin(), comp->residue().end());
    const size_t before = out.size();
    const std::vector<uint8_t> out_before = out;
    CompressStats st;
    const Status s = comp->Compress(grad, &out, &st);
    if (twin) {
      const size_t tb = twin_out.size();
      const Status ts = twin->Compress(grad, &twin_out, nullptr);
      if (ts.ok() != s.ok()) {
        // Allowed only at the overflow guard: adacomp bounds |R| by last
        // step's max |G|, a restored compressor by max |R| (tighter), so near
        // FLT_MAX the original may refuse a step the restored one takes. The
        // refusal itself is checked below; the two then part ways.
        FUZZ_CHECK(cfg.codec == Codec::kAdaComp && !s.ok(),
                   "restored compressor: %s vs original %s", ts.ToString().c_str(),
                   s.ToString().c_str());
        twin.reset();
      } else {
        FUZZ_CHECK(!s.ok() || (twin_out.size() - tb == out.size() - before &&
                               std::equal(out.begin() + before, out.end(), twin_out.begin() + tb)),
                   "restored compressor's frame differs at step %d", step);
      }
    }
    if (!s.ok()) {
      // Only overflow of residue + gradient may fail (every input is finite).
      double gmax = 0, rmax = prev_gmax;
      for (float v : grad) gmax = std::max(gmax, double(std::fabs(v)));
      for (float v : r_old) rmax = std::max(rmax, double(std::fabs(v)));
      FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument && gmax + rmax > FLT_MAX,
                 "step %d failed without a possible overflow: %s", step, s.ToString().c_str());
      FUZZ_CHECK(out == out_before, "a failed Compress changed the output");
      FUZZ_CHECK(FirstBitDifference(comp->residue(), r_old) < 0,
                 "a failed Compress changed the residue");
      continue;
    }
    FUZZ_CHECK(std::equal(prefix.begin(), prefix.end(), out.begin()) &&
                   std::equal(out_before.begin(), out_before.end(), out.begin()),
               "Compress changed bytes before its frame");
    const std::span<const uint8_t> frame(out.data() + before, out.size() - before);
    CheckFrame(cfg, id, frame, r_old, grad, comp->residue(), st, &q, static_cast<size_t>(step));
    if (cfg.codec == Codec::kAdaComp) {
      prev_gmax = 0.0f;
      for (uint32_t j = 0; j < n; ++j)
        prev_gmax = std::max(prev_gmax, std::fabs(r_old[j] + grad[j]));
    }
    frame_sizes.push_back(frame.size());
    stream.insert(stream.end(), frame.begin(), frame.end());
    out.resize(before + (in.U8() & 1 ? 0 : frame.size()));  // sometimes keep appending
  }

  // Walk the back-to-back frames.
  size_t off = 0;
  for (size_t i = 0; i < frame_sizes.size(); ++i) {
    FrameInfo info;
    DecodeOptions o;
    o.expected_tensor_id = id;
    const Status s = InspectFrame(std::span(stream).subspan(off), &info, o);
    FUZZ_CHECK(s.ok() && info.frame_bytes == frame_sizes[i], "walking frame %zu: %s", i,
               s.ToString().c_str());
    off += info.frame_bytes;
  }
  FUZZ_CHECK(off == stream.size(), "stream length");
  return 0;
}
