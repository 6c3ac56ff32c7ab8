// `adacomp bench`: times AdaComp and its baselines against the reference pass
// R += dW on gradient-like tensors, after verifying every result, and prints
// a table (and JSON with --json). Its options and help: bench_cli.cc. This
// file: the command (option checks, JSON) and Bench's reference, AdaComp and
// decode_accumulate rows; Bench itself: bench_runner.h; its baseline rows
// (top-k, onebit): bench_baselines.cc.
#include "bench_command.h"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/version.h"
#include "bench_checks.h"
#include "bench_harness.h"
#include "bench_ops.h"
#include "bench_runner.h"
#include "cli_util.h"
#include "commands.h"
#include "file_io.h"
#include "gradient_gen.h"

namespace adacomp::tool {
namespace bench_detail {

Status Bench::Run(const std::vector<uint64_t>& sizes, const std::vector<uint64_t>& bin_sizes,
                  const std::vector<uint64_t>& threads, const std::vector<uint64_t>& frames,
                  const std::set<std::string>& ops) {
  ops_ = ops;
  std::printf("%-18s %-17s %10s %5s %3s %3s %9s %12s %12s %8s\n", "op", "codec", "elements", "L_T",
              "thr", "P", "density", "seconds", "Melem/s", "x_ref");
  for (uint64_t n : sizes) {
    for (uint64_t t : threads) {
      ADACOMP_RETURN_IF_ERROR(RunOne(n, static_cast<int>(t), bin_sizes, frames));
    }
  }
  return Status::OK();
}

Bench::Case::Case(uint64_t n, int t, uint64_t seed)
    : elements(n), threads(t), data(MakeData(n, t, seed)) {
  whole.size = elements;
  whole.grad = data.grad;
  for (const auto& v : data.next) whole.next.emplace_back(v);
}

std::string Bench::Case::Where(const std::string& what) const {
  return what + " (" + std::to_string(elements) + " elements, " + std::to_string(threads) +
         " threads)";
}

// The rows of one size and thread count: the reference pass; per bin size
// AdaComp compress, its decode_accumulate rows and the top-k baselines at
// the density AdaComp chose; then onebit.
Status Bench::RunOne(uint64_t elements, int threads, const std::vector<uint64_t>& bin_sizes,
                     const std::vector<uint64_t>& frames) {
  Case c(elements, threads, a_.seed);
  struct ClearReference {
    Bench* b;
    ~ClearReference() {
      b->reference_ = nullptr;
      b->reference_next_ = nullptr;
    }
  } clear_reference{this};  // the reference closures refer to c
  ADACOMP_RETURN_IF_ERROR(ReferenceRow(c));
  for (uint64_t l64 : bin_sizes) {
    const uint32_t l = static_cast<uint32_t>(l64);
    double density = 0;
    ADACOMP_RETURN_IF_ERROR(AdaCompRow(c, l, &density));
    if (Want("decode")) ADACOMP_RETURN_IF_ERROR(DecodeRows(c, l, frames));
    ADACOMP_RETURN_IF_ERROR(TopKRows(c, l, density));
  }
  if (Want("onebit")) ADACOMP_RETURN_IF_ERROR(OneBitRow(c));
  return Status::OK();
}

// The reference pass R += dW, verified and timed; then kept (reference_,
// reference_next_) to be timed again beside every operation.
Status Bench::ReferenceRow(Case& c) {
  std::vector<Part>& parts = c.data.parts;
  c.ref_r.resize(c.threads);
  for (int t = 0; t < c.threads; ++t) {
    c.ref_r[t].assign(parts[t].size, 0.0f);
    ReferencePass(c.ref_r[t], parts[t].grad);
    ADACOMP_RETURN_IF_ERROR(CheckClose(c.ref_r[t], parts[t].grad, 0, 0, "reference pass")
                                .WithContext(c.Where("reference")));
  }
  reference_ = nullptr;
  auto reference = [&c](int t) { ReferencePass(c.ref_r[t], c.data.parts[t].grad); };
  Time(c.threads, reference);
  Add({.op = "reference", .codec = "none", .elements = c.elements, .threads = c.threads});
  reference_ = reference;
  // The reference pass paired with AdaComp compress reads what compress
  // reads: a new gradient each call (steps 1..kNextSteps in turn), so that
  // both stream R and kNextSteps gradients instead of the reference pass
  // keeping one gradient hot.
  reference_next_ = [&c](int t) {
    Part& p = c.data.parts[t];
    ReferencePass(c.ref_r[t], p.next[p.ref_calls++ % kNextSteps]);
  };
  return Status::OK();
}

// AdaComp at bin size l. With T threads AdaComp spreads one tensor (all
// parts, back to back) over T threads inside the library
// (CodecConfig::threads, DecodeOptions::threads): one compressor, one frame
// per learner. The reference pass paired with it runs the T parts on T
// threads (the same elements); the baselines run one part per thread.
// Verifies two steps and warms up on the next steps (as training does)
// whether or not the row is wanted: *density, the last step's, is the one
// the top-k rows take.
Status Bench::AdaCompRow(Case& c, uint32_t l, double* density) {
  const std::string lt = " L_T=" + std::to_string(l);
  Part& whole = c.whole;
  std::vector<uint8_t> frame;
  uint64_t sel = 0;
  ADACOMP_ASSIGN_OR_RETURN(auto comp,
                           Compressor::Create(AdaCompConfig(l, c.threads), 0, c.elements));
  // Two verified steps: from a zero residue, then from a non-zero one.
  for (int step = 0; step < 2; ++step) {
    CompressStats stats;
    ADACOMP_RETURN_IF_ERROR(
        CheckAdaCompStep(*comp, whole.grad, l, &frame, &stats)
            .WithContext(c.Where("adacomp" + lt + " step " + std::to_string(step))));
    sel = stats.selected;
  }
  // Then, as in training, a new gradient each step: one pass over the
  // next steps before timing; density and frame bytes are the last one's.
  for (const auto& g : whole.next) {
    CompressStats stats;
    frame.clear();
    ADACOMP_RETURN_IF_ERROR(comp->Compress(g, &frame, &stats));
    sel = stats.selected;
  }
  const uint64_t bytes = frame.size();
  *density = c.elements ? static_cast<double>(sel) / c.elements : 0.0;
  if (!Want("adacomp")) return Status::OK();
  // The compression after Mark() (the DDP hook's step: Mark() before,
  // KeepSinceMark() after, so the new residue goes to the second buffer) is
  // verified first: a twin loaded with the same state compresses the same
  // gradient unmarked; the frames and the states must be the same bytes.
  {
    ADACOMP_ASSIGN_OR_RETURN(auto twin,
                             Compressor::Create(AdaCompConfig(l, c.threads), 0, c.elements));
    ADACOMP_RETURN_IF_ERROR(twin->LoadState(comp->SaveState()));
    const auto& g = whole.next[whole.calls++ % kNextSteps];
    std::vector<uint8_t> marked_frame, twin_frame;
    comp->Mark();
    ADACOMP_RETURN_IF_ERROR(comp->Compress(g, &marked_frame));
    comp->KeepSinceMark();
    ADACOMP_RETURN_IF_ERROR(twin->Compress(g, &twin_frame));
    if (marked_frame != twin_frame || comp->SaveState() != twin->SaveState()) {
      return Status::Internal(
          c.Where("adacomp" + lt + ": the compression after Mark() differs from the unmarked one"));
    }
  }
  for (const bool marked : {false, true}) {
    Time(
        1,
        [&](int) {
          frame.clear();
          const auto& g = whole.next[whole.calls++ % kNextSteps];
          if (marked) comp->Mark();
          Status st = comp->Compress(g, &frame);
          if (marked) comp->KeepSinceMark();
          if (!st.ok()) failure_.Set(st.ToString());
        },
        Mode::kNewGradient, c.threads);
    if (failure_.failed()) return Status::Internal(c.Where("adacomp: " + failure_.message()));
    Add({.op = marked ? "compress_marked" : "compress",
         .codec = "adacomp",
         .elements = c.elements,
         .bin_size = l,
         .threads = c.threads,
         .frames = 1,
         .density = *density,
         .frame_bytes = bytes});
  }
  return Status::OK();
}

// Decode-and-accumulate of P frames (P learners' frames of the tensor) into
// one dense buffer with one DecodeAccumulateAll call, one row per P in
// `frames`. Each learner's frame is a steady-state one: its compressor goes
// through the same steps as AdaCompRow's (step 0 twice, then steps
// 1..kNextSteps, residue carried) and the last step's frame is kept, as the
// compress row's density is the last step's. The row reports the frames'
// density: selected summed over frames / (elements x P).
Status Bench::DecodeRows(Case& c, uint32_t l, const std::vector<uint64_t>& frames) {
  if (evict_buf_.empty()) evict_buf_.assign(kEvictBytes / sizeof(uint64_t), 1);
  const uint64_t n = c.elements;
  const Part& whole = c.whole;
  for (uint64_t p64 : frames) {
    const int p = static_cast<int>(p64);
    std::vector<std::vector<uint8_t>> learner_frames;
    uint64_t frame_bytes = 0, frame_selected = 0;
    std::vector<float> expected(n, 0.0f), one(n), rotated(n), dst(n, 0.0f);
    for (int q = 0; q < p; ++q) {
      // Learner q's gradients: the tensor's gradients rotated (cheap,
      // still gradient-like); learner 0's are the tensor's own, so with
      // P = 1 the decoded frame is the compress row's last warm-up frame.
      uint64_t shift = n ? (static_cast<uint64_t>(q) * (n / p + 7919)) % n : 0;
      ADACOMP_ASSIGN_OR_RETURN(auto comp, Compressor::Create(AdaCompConfig(l, c.threads), 0, n));
      std::vector<uint8_t> f;
      CompressStats stats;
      auto step = [&](std::span<const float> g) -> Status {
        std::rotate_copy(g.begin(), g.begin() + shift, g.end(), rotated.begin());
        f.clear();
        return comp->Compress(rotated, &f, &stats);
      };
      for (int s = 0; s < 2; ++s) ADACOMP_RETURN_IF_ERROR(step(whole.grad));
      for (const auto& g : whole.next) ADACOMP_RETURN_IF_ERROR(step(g));
      std::fill(one.begin(), one.end(), 0.0f);
      ADACOMP_RETURN_IF_ERROR(DecodeAccumulate(f, one).WithContext(c.Where("decode")));
      for (uint64_t j = 0; j < n; ++j) expected[j] += one[j];  // the scalar sum
      frame_bytes += f.size();
      frame_selected += stats.selected;
      learner_frames.push_back(std::move(f));
    }
    const std::vector<std::span<const uint8_t>> spans(learner_frames.begin(), learner_frames.end());
    DecodeOptions opts;
    opts.threads = c.threads;
    ADACOMP_RETURN_IF_ERROR(
        DecodeAccumulateAll(spans, dst, {}, opts).WithContext(c.Where("decode")));
    ADACOMP_RETURN_IF_ERROR(CheckClose(dst, expected, 1e-6, 0, "decode_accumulate")
                                .WithContext(c.Where("decode P=" + std::to_string(p))));
    // Timed from cold caches, call by call (Mode::kCold), and so is the
    // reference pass paired with it: in training a whole step's other work
    // runs between two decodes of a tensor, so its dst is not in cache,
    // whereas back to back the lines of dst the frames touch (about 1/8 of
    // them at 0.83 % density) stay in the last-level cache.
    Time(
        1,
        [&](int) {
          Status st = DecodeAccumulateAll(spans, dst, {}, opts);
          if (!st.ok()) failure_.Set(st.ToString());
        },
        Mode::kCold, c.threads);
    if (failure_.failed()) return Status::Internal(c.Where("decode: " + failure_.message()));
    Add({.op = "decode_accumulate",
         .codec = "adacomp",
         .elements = c.elements,
         .bin_size = l,
         .threads = c.threads,
         .frames = p,
         .density = static_cast<double>(frame_selected) / (static_cast<double>(c.elements) * p),
         .frame_bytes = frame_bytes});
  }
  return Status::OK();
}

}  // namespace bench_detail

namespace {

using bench_detail::Bench;
using bench_detail::Row;

constexpr const char* kCmd = "bench";

#ifdef ADACOMP_BENCH_HAVE_TORCH
constexpr bool kHaveTorch = true;
#else
constexpr bool kHaveTorch = false;
#endif

nlohmann::json ToJson(const std::vector<Row>& rows, const BenchArgs& a,
                      const std::vector<uint64_t>& sizes) {
  nlohmann::json j;
  j["tool"] = std::string("adacomp ") + kVersion;
  j["hardware_threads"] = std::thread::hardware_concurrency();
  j["repeats"] = a.repeats;
  j["min_time_per_repeat"] = a.min_time;
  j["seed"] = a.seed;
  j["sizes"] = sizes;
  j["torch"] = kHaveTorch;
  j["seconds_is"] = "median over repeats of the time of one operation on all elements";
  j["ratio_to_reference_is"] =
      "median over repeats of (operation time / time of the reference pass R += dW on the same "
      "tensors and threads, measured just before it in the same repeat; beside compress adacomp "
      "the reference pass too takes a new gradient each call, generator steps 1..3 in turn; "
      "decode_accumulate and its reference pass are timed call by call from cold caches)";
  j["density_is"] =
      "selected / elements; for decode_accumulate rows summed over the P frames "
      "(selected / (elements x P)); 0 for reference rows";
  j["threads_is"] =
      "adacomp rows (compress, decode_accumulate): one tensor spread over this many threads "
      "inside the library (CodecConfig::threads, DecodeOptions::threads); reference and "
      "baseline rows: one part of elements/threads per thread, all at once";
  nlohmann::json list = nlohmann::json::array();
  for (const Row& r : rows) {
    list.push_back({{"op", r.op},
                    {"codec", r.codec},
                    {"elements", r.elements},
                    {"bin_size", r.bin_size},
                    {"threads", r.threads},
                    {"frames", r.frames},
                    {"seconds", r.seconds},
                    {"elements_per_second", r.elements_per_second},
                    {"ratio_to_reference", r.ratio_to_reference},
                    {"density", r.density},
                    {"frame_bytes", r.frame_bytes}});
  }
  j["rows"] = std::move(list);
  return j;
}

}  // namespace

int RunBench(const BenchArgs& a) {
  Result<std::vector<uint64_t>> sizes = ParseCountList(a.sizes, "--sizes");
  if (!sizes.ok()) return Fail(kCmd, kExitBadUsage, sizes.status().message());
  Result<uint64_t> max_elements = ParseCount(a.max_elements, "--max-elements");
  if (!max_elements.ok()) return Fail(kCmd, kExitBadUsage, max_elements.status().message());
  Result<std::vector<uint64_t>> bin_sizes = ParseCountList(a.bin_sizes, "--bin-sizes");
  if (!bin_sizes.ok()) return Fail(kCmd, kExitBadUsage, bin_sizes.status().message());
  Result<std::vector<uint64_t>> threads = ParseCountList(a.threads, "--threads");
  if (!threads.ok()) return Fail(kCmd, kExitBadUsage, threads.status().message());
  Result<std::vector<uint64_t>> frames = ParseCountList(a.frames, "--frames");
  if (!frames.ok()) return Fail(kCmd, kExitBadUsage, frames.status().message());
  std::vector<uint64_t> use;
  for (uint64_t n : *sizes) {
    if (n == 0) return Fail(kCmd, kExitBadUsage, "--sizes: sizes must be at least 1");
    if (n <= *max_elements) use.push_back(n);
  }
  if (use.empty()) {
    return Fail(kCmd, kExitBadUsage,
                "no size in --sizes is at most --max-elements " + a.max_elements);
  }
  for (uint64_t l : *bin_sizes) {
    if (l == 0 || l > UINT32_MAX)
      return Fail(kCmd, kExitBadUsage, "--bin-sizes: each must be >= 1");
  }
  for (uint64_t t : *threads) {
    if (t == 0 || t > 256) return Fail(kCmd, kExitBadUsage, "--threads: each must be 1..256");
    for (uint64_t n : use) {
      if (n < t) return Fail(kCmd, kExitBadUsage, "--threads: more threads than elements");
    }
  }
  for (uint64_t p : *frames) {
    if (p == 0 || p > 1024) return Fail(kCmd, kExitBadUsage, "--frames: each must be 1..1024");
  }
  if (a.repeats < 1) return Fail(kCmd, kExitBadUsage, "--repeats: must be at least 1");
  if (!(a.min_time >= 0) || a.min_time > 60) {
    return Fail(kCmd, kExitBadUsage, "--min-time: must be 0..60 seconds");
  }
  std::set<std::string> ops;
  const std::set<std::string> known = {"all",  "adacomp",  "decode",    "onebit",
                                       "topk", "topk_nth", "topk_torch"};
  {
    std::string s = a.ops;
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      if (comma == std::string::npos) comma = s.size();
      std::string op = s.substr(start, comma - start);
      if (!known.count(op)) {
        return Fail(kCmd, kExitBadUsage,
                    "--ops: unknown '" + op +
                        "' (expected all, adacomp, decode, onebit, topk, topk_nth, topk_torch)");
      }
      if (op == "topk_torch" && !kHaveTorch) {
        return Fail(kCmd, kExitBadUsage, "--ops: topk_torch needs a build with LibTorch");
      }
      ops.insert(op);
      start = comma + 1;
    }
  }
  std::unique_ptr<OutputFile> json_out;
  if (!a.json.empty()) {
    Result<std::unique_ptr<OutputFile>> f = OutputFile::Create(a.json);
    if (!f.ok()) return Fail(kCmd, kExitBadData, f.status().message());
    json_out = std::move(*f);
  }

  std::printf(
      "adacomp bench: %u hardware threads; repeats %d (median), >= %.3g s each; "
      "gradient-like data, seed %" PRIu64 "%s\n",
      std::thread::hardware_concurrency(), a.repeats, a.min_time, a.seed,
      kHaveTorch ? "" : "; torch::topk not built");
  Bench bench(a);
  Status s = bench.Run(use, *bin_sizes, *threads, *frames, ops);
  if (!s.ok()) return Fail(kCmd, kExitBadData, "verification failed: " + s.ToString());
  if (json_out) {
    std::string text = ToJson(bench.rows(), a, use).dump(2) + "\n";
    if (Status w = json_out->Write(text.data(), text.size()); !w.ok()) {
      return Fail(kCmd, kExitBadData, w.message());
    }
    if (Status c = json_out->Commit(); !c.ok()) return Fail(kCmd, kExitBadData, c.message());
    std::printf("wrote %s (%zu rows)\n", a.json.c_str(), bench.rows().size());
  }
  return kExitOk;
}

}  // namespace adacomp::tool
