// adacomp_bench: Google Benchmark program for the compressor kernels, on the
// gradient-like data of `adacomp gen-gradient` (tools/adacomp/gradient_gen.h).
//
//   BM_Reference/N                 R += dW, the memory-bound floor
//   BM_AdaCompCompress/N/L         AdaComp (ternary) to finished frame bytes, a new
//                                  gradient each call
//   BM_DecodeAccumulate/N/L/P      validate + add P frames into one dense buffer
//                                  (steady-state frames, one DecodeAccumulateAll)
//   BM_TopKNthElement/N/L          residual top-k with std::nth_element at the
//                                  density AdaComp chose at L_T on the same data
//   BM_TopKCodec/N/L               the library's topk codec at that density
//   BM_OneBitCompress/N            the library's onebit codec
// With threads T (".../threads:2"), each thread owns a tensor of N/T elements.
// items_per_second is elements per second over all threads. Every benchmark
// checks its result once before timing (and skips with an error if wrong).
//
// `adacomp bench` runs the same measurements with ratios to the reference in
// one table and JSON; use this program for Google Benchmark's tooling
// (--benchmark_format=json, --benchmark_repetitions, compare.py).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include "adacomp/codec.h"
#include "bench_ops.h"
#include "gradient_gen.h"

namespace adacomp::tool {
namespace {

// This thread's tensor: N / threads elements of gradient-like data, at
// generator step `step` (AdaComp is timed on steps 1..kNextSteps in turn, as
// in training: one gradient compressed again and again piles the residue up
// at the same places and selects 2-3x more).
constexpr int kNextSteps = 3;
std::vector<float> MakePart(const benchmark::State& state, int64_t elements, uint64_t step = 0) {
  const int64_t parts = state.threads();
  const int64_t size = elements / parts + (state.thread_index() < elements % parts ? 1 : 0);
  GradientSpec spec;
  spec.elements = static_cast<uint64_t>(size);
  spec.seed = 1000 + state.thread_index();
  spec.scale = LayerScale(1, state.thread_index(), 1e-3);
  std::vector<float> grad(spec.elements);
  GenerateGradient(spec, step, grad);
  return grad;
}

CodecConfig AdaComp(int64_t bin_size) {
  CodecConfig c;
  c.codec = Codec::kAdaComp;
  c.bin_size = static_cast<uint32_t>(bin_size);
  return c;
}

// Compresses one step and checks conservation from the decoded frame.
bool CompressChecked(Compressor& c, const std::vector<float>& grad, std::vector<uint8_t>* frame,
                     CompressStats* stats, benchmark::State& state) {
  std::vector<float> old(c.residue().begin(), c.residue().end());
  frame->clear();
  Status s = c.Compress(grad, frame, stats);
  std::vector<float> decoded(grad.size(), 0.0f);
  if (s.ok()) s = DecodeAccumulate(*frame, decoded);
  if (s.ok() && !c.residue().empty()) s = CheckConservation(old, grad, decoded, c.residue());
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  return s.ok();
}

// The number of elements AdaComp selects at bin size L on this data (second step).
uint64_t AdaCompSelected(const std::vector<float>& grad, int64_t bin_size,
                         benchmark::State& state) {
  auto c = Compressor::Create(AdaComp(bin_size), 0, grad.size());
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return 0;
  }
  std::vector<uint8_t> frame;
  CompressStats stats;
  for (int step = 0; step < 2; ++step) {
    if (!CompressChecked(**c, grad, &frame, &stats, state)) return 0;
  }
  return stats.selected;
}

void BM_Reference(benchmark::State& state) {
  std::vector<float> grad = MakePart(state, state.range(0));
  std::vector<float> r(grad.size(), 0.0f);
  ReferencePass(r, grad);
  if (r != grad) state.SkipWithError("reference pass: R != dW after one pass from zero");
  for (auto _ : state) {
    ReferencePass(r, grad);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(grad.size()));
}

void BM_AdaCompCompress(benchmark::State& state) {
  std::vector<float> grad = MakePart(state, state.range(0));
  auto c = Compressor::Create(AdaComp(state.range(1)), 0, grad.size());
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return;
  }
  std::vector<uint8_t> frame;
  CompressStats stats;
  if (!CompressChecked(**c, grad, &frame, &stats, state)) return;
  // The scalar reference of docs/algorithm.md section 2 on the next step.
  std::vector<float> old((*c)->residue().begin(), (*c)->residue().end());
  std::vector<float> ref_deq(grad.size()), ref_res(grad.size());
  float scale = 0;
  uint64_t ref_selected = AdaCompScalarReference(old, grad, static_cast<uint32_t>(state.range(1)),
                                                 ref_deq, ref_res, &scale);
  if (!CompressChecked(**c, grad, &frame, &stats, state)) return;
  if (stats.selected + 1 < ref_selected || stats.selected > ref_selected + 1) {
    state.SkipWithError("selected count differs from the scalar reference");
    return;
  }
  std::vector<std::vector<float>> next;
  for (int k = 1; k <= kNextSteps; ++k) {
    next.push_back(MakePart(state, state.range(0), k));
    if (!CompressChecked(**c, next.back(), &frame, &stats, state)) return;  // warm-up
  }
  uint64_t bytes = 0;
  size_t call = 0;
  for (auto _ : state) {
    frame.clear();
    Status s = (*c)->Compress(next[call++ % kNextSteps], &frame);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    bytes += frame.size();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(grad.size()));
  state.counters["density"] = benchmark::Counter(static_cast<double>(stats.selected) / grad.size(),
                                                 benchmark::Counter::kAvgThreads);
  state.counters["frame_bytes"] =
      benchmark::Counter(static_cast<double>(bytes),
                         benchmark::Counter::kAvgIterations | benchmark::Counter::kAvgThreads);
}

void BM_DecodeAccumulate(benchmark::State& state) {
  std::vector<std::vector<float>> steps;
  for (int k = 0; k <= kNextSteps; ++k) steps.push_back(MakePart(state, state.range(0), k));
  const int64_t p = state.range(2);
  const size_t n = steps[0].size();
  std::vector<std::vector<uint8_t>> frames;
  std::vector<float> expected(n, 0.0f), one(n), rotated(n);
  uint64_t selected = 0;
  for (int64_t q = 0; q < p; ++q) {  // learner q: the gradients rotated
    // A steady-state frame, as in training: steps 0, 0, 1, 2, 3, residue
    // carried; the last one is decoded.
    size_t shift = n ? (static_cast<size_t>(q) * (n / p + 7919)) % n : 0;
    auto c = Compressor::Create(AdaComp(state.range(1)), 0, n);
    if (!c.ok()) return state.SkipWithError(c.status().ToString().c_str());
    std::vector<uint8_t> f;
    CompressStats stats;
    for (int k : {0, 0, 1, 2, 3}) {
      std::rotate_copy(steps[k].begin(), steps[k].begin() + shift, steps[k].end(), rotated.begin());
      if (!CompressChecked(**c, rotated, &f, &stats, state)) return;
    }
    selected += stats.selected;
    std::fill(one.begin(), one.end(), 0.0f);
    if (!DecodeAccumulate(f, one).ok()) return state.SkipWithError("decode failed");
    for (size_t j = 0; j < n; ++j) expected[j] += one[j];
    frames.push_back(std::move(f));
  }
  // All P frames with one call, as a learner decodes a tensor.
  const std::vector<std::span<const uint8_t>> spans(frames.begin(), frames.end());
  std::vector<float> dst(n, 0.0f);
  if (!DecodeAccumulateAll(spans, dst).ok()) return state.SkipWithError("decode failed");
  if (Status s = CheckClose(dst, expected, 1e-6, 0, "decode_accumulate"); !s.ok()) {
    return state.SkipWithError(s.ToString().c_str());
  }
  // Back to back, so the touched lines of dst may stay in cache between
  // iterations: `adacomp bench` times decode from cold caches instead, as
  // in training.
  for (auto _ : state) {
    if (!DecodeAccumulateAll(spans, dst).ok()) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.counters["density"] =
      benchmark::Counter(static_cast<double>(selected) / (static_cast<double>(n) * p),
                         benchmark::Counter::kAvgThreads);
}

void BM_TopKNthElement(benchmark::State& state) {
  std::vector<float> grad = MakePart(state, state.range(0));
  const uint64_t k = AdaCompSelected(grad, state.range(1), state);
  if (k == 0) {
    if (!state.error_occurred()) state.SkipWithError("AdaComp selected nothing");
    return;
  }
  std::vector<float> residue(grad.size(), 0.0f);
  TopKScratch scratch;
  std::vector<float> old = residue;
  TopKNthElement(residue, grad, k, &scratch);
  std::vector<float> sent(grad.size(), 0.0f);
  for (size_t m = 0; m < scratch.indices.size(); ++m) sent[scratch.indices[m]] = scratch.values[m];
  if (scratch.indices.size() != k || !CheckConservation(old, grad, sent, residue).ok()) {
    return state.SkipWithError("top-k result is wrong");
  }
  for (auto _ : state) {
    TopKNthElement(residue, grad, k, &scratch);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(grad.size()));
  state.counters["density"] =
      benchmark::Counter(static_cast<double>(k) / grad.size(), benchmark::Counter::kAvgThreads);
}

void CodecBench(benchmark::State& state, const CodecConfig& config,
                const std::vector<float>& grad) {
  auto c = Compressor::Create(config, 0, grad.size());
  if (!c.ok()) return state.SkipWithError(c.status().ToString().c_str());
  std::vector<uint8_t> frame;
  CompressStats stats;
  if (!CompressChecked(**c, grad, &frame, &stats, state)) return;
  for (auto _ : state) {
    frame.clear();
    if (!(*c)->Compress(grad, &frame).ok()) {
      state.SkipWithError("compress failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(grad.size()));
}

void BM_TopKCodec(benchmark::State& state) {
  std::vector<float> grad = MakePart(state, state.range(0));
  const uint64_t k = AdaCompSelected(grad, state.range(1), state);
  if (k == 0) {
    if (!state.error_occurred()) state.SkipWithError("AdaComp selected nothing");
    return;
  }
  CodecConfig config;
  config.codec = Codec::kTopK;
  config.density = static_cast<double>(k) / grad.size();
  CodecBench(state, config, grad);
}

void BM_OneBitCompress(benchmark::State& state) {
  std::vector<float> grad = MakePart(state, state.range(0));
  CodecConfig config;
  config.codec = Codec::kOneBit;
  CodecBench(state, config, grad);
}

const std::vector<int64_t> kSizes = {10'000, 100'000, 1'000'000, 4'000'000, 16'000'000, 64'000'000};

void SizesAndBins(benchmark::internal::Benchmark* b) {
  for (int64_t n : kSizes) {
    for (int64_t l : {50, 500}) b->Args({n, l});
  }
}

void SizesBinsFrames(benchmark::internal::Benchmark* b) {
  for (int64_t n : kSizes) {
    for (int64_t l : {50, 500}) {
      for (int64_t p : {1, 4, 16}) b->Args({n, l, p});
    }
  }
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : kSizes) b->Arg(n);
}

BENCHMARK(BM_Reference)->Apply(Sizes)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(BM_AdaCompCompress)->Apply(SizesAndBins)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(BM_DecodeAccumulate)->Apply(SizesBinsFrames)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(BM_TopKNthElement)->Apply(SizesAndBins)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(BM_TopKCodec)->Apply(SizesAndBins)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(BM_OneBitCompress)->Apply(Sizes)->ThreadRange(1, 2)->UseRealTime();

}  // namespace
}  // namespace adacomp::tool

BENCHMARK_MAIN();
