// tools/adacomp/bench_baselines.cc: the baseline rows of `adacomp bench`
// (Bench, bench_runner.h): residual top-k with std::nth_element and, in
// LibTorch builds, torch::topk; the library's topk codec; onebit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "bench_checks.h"
#include "bench_ops.h"
#include "bench_runner.h"

namespace adacomp::tool::bench_detail {

// Top-k at the density AdaComp chose at bin size l on the same data, part by
// part: nth_element, torch::topk (LibTorch builds) and the library's codec.
Status Bench::TopKRows(Case& c, uint32_t l, double density) {
  std::vector<Part>& parts = c.data.parts;
  std::vector<uint64_t> selected(c.threads);
  for (int t = 0; t < c.threads; ++t) {
    selected[t] = static_cast<uint64_t>(std::llround(density * static_cast<double>(parts[t].size)));
  }
  if (Want("topk_nth")) {
    ADACOMP_RETURN_IF_ERROR(TopKFnRow(parts, selected, l, "topk_nth_element", &TopKNthElement));
  }
#ifdef ADACOMP_BENCH_HAVE_TORCH
  if (Want("topk_torch")) {
    ADACOMP_RETURN_IF_ERROR(TopKFnRow(parts, selected, l, "topk_torch", &TopKTorch));
  }
#endif
  if (Want("topk")) ADACOMP_RETURN_IF_ERROR(TopKCodecRow(c, l, density, selected));
  return Status::OK();
}

// The library's topk codec, to finished frames, selected[t] elements of
// part t.
Status Bench::TopKCodecRow(Case& c, uint32_t l, double density,
                           const std::vector<uint64_t>& selected) {
  std::vector<Part>& parts = c.data.parts;
  std::vector<std::unique_ptr<Compressor>> tk(c.threads);
  std::vector<std::vector<uint8_t>> tk_frame(c.threads);
  uint64_t tk_bytes = 0;
  for (int t = 0; t < c.threads; ++t) {
    CodecConfig cc;
    cc.codec = Codec::kTopK;
    cc.density = std::clamp(static_cast<double>(selected[t]) / parts[t].size, 1e-9, 1.0);
    ADACOMP_ASSIGN_OR_RETURN(tk[t], Compressor::Create(cc, t, parts[t].size));
    std::vector<float> decoded;
    CompressStats stats;
    ADACOMP_RETURN_IF_ERROR(CompressAndCheck(*tk[t], parts[t].grad, &tk_frame[t], &stats, &decoded)
                                .WithContext(c.Where("topk")));
    float min_sent = INFINITY, max_kept = 0;
    for (uint64_t j = 0; j < parts[t].size; ++j) {
      if (decoded[j] != 0)
        min_sent = std::min(min_sent, std::fabs(decoded[j]));
      else
        max_kept = std::max(max_kept, std::fabs(tk[t]->residue()[j]));
    }
    if (stats.selected > 0 && max_kept > min_sent) {
      return Status::Internal(c.Where("topk codec: kept |G| above a sent |G|"));
    }
    tk_bytes += tk_frame[t].size();
  }
  Time(c.threads, [&](int t) {
    tk_frame[t].clear();
    Status st = tk[t]->Compress(parts[t].grad, &tk_frame[t]);
    if (!st.ok()) failure_.Set(st.ToString());
  });
  if (failure_.failed()) return Status::Internal(c.Where("topk: " + failure_.message()));
  Add({.op = "compress",
       .codec = "topk",
       .elements = c.elements,
       .bin_size = l,
       .threads = c.threads,
       .frames = 1,
       .density = density,
       .frame_bytes = tk_bytes});
  return Status::OK();
}

// onebit, one part per thread.
Status Bench::OneBitRow(Case& c) {
  std::vector<Part>& parts = c.data.parts;
  std::vector<std::unique_ptr<Compressor>> ob(c.threads);
  std::vector<std::vector<uint8_t>> frame(c.threads);
  uint64_t bytes = 0;
  for (int t = 0; t < c.threads; ++t) {
    CodecConfig cc;
    cc.codec = Codec::kOneBit;
    ADACOMP_ASSIGN_OR_RETURN(ob[t], Compressor::Create(cc, t, parts[t].size));
    std::vector<float> decoded;
    CompressStats stats;
    for (int step = 0; step < 2; ++step) {
      ADACOMP_RETURN_IF_ERROR(CompressAndCheck(*ob[t], parts[t].grad, &frame[t], &stats, &decoded)
                                  .WithContext(c.Where("onebit")));
    }
    bytes += frame[t].size();
  }
  Time(c.threads, [&](int t) {
    frame[t].clear();
    Status st = ob[t]->Compress(parts[t].grad, &frame[t]);
    if (!st.ok()) failure_.Set(st.ToString());
  });
  if (failure_.failed()) return Status::Internal(c.Where("onebit: " + failure_.message()));
  Add({.op = "compress",
       .codec = "onebit",
       .elements = c.elements,
       .threads = c.threads,
       .frames = 1,
       .density = 1.0,
       .frame_bytes = bytes});
  return Status::OK();
}

// One row of a residual top-k function (nth_element or torch::topk),
// selected[t] elements of part t.
Status Bench::TopKFnRow(std::vector<Part>& parts, const std::vector<uint64_t>& selected,
                        uint32_t bin_size, const char* codec, TopKFn fn) {
  const int threads = static_cast<int>(parts.size());
  uint64_t elements = 0, k_total = 0;
  std::vector<std::vector<float>> residue(threads);
  std::vector<TopKScratch> scratch(threads);
  for (int t = 0; t < threads; ++t) {
    elements += parts[t].size;
    k_total += selected[t];
    residue[t].assign(parts[t].size, 0.0f);
    for (int step = 0; step < 2; ++step) {
      std::vector<float> old = residue[t];
      fn(residue[t], parts[t].grad, selected[t], &scratch[t]);
      ADACOMP_RETURN_IF_ERROR(CheckTopK(old, parts[t].grad, residue[t], scratch[t],
                                        std::min(selected[t], parts[t].size))
                                  .WithContext(std::string(codec) + " (" +
                                               std::to_string(parts[t].size) + " elements, k " +
                                               std::to_string(selected[t]) + ")"));
    }
  }
  Time(threads, [&](int t) { fn(residue[t], parts[t].grad, selected[t], &scratch[t]); });
  Add({.op = "compress",
       .codec = codec,
       .elements = elements,
       .bin_size = bin_size,
       .threads = threads,
       .frames = 1,
       .density = static_cast<double>(k_total) / elements,
       .frame_bytes = k_total * 8});  // 32-bit index + float32 value per element
  return Status::OK();
}

}  // namespace adacomp::tool::bench_detail
