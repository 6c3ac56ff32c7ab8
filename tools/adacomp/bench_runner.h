// tools/adacomp/bench_runner.h: class Bench, the runner of `adacomp bench`'s
// rows (internal to adacomp-bench): the rows of each size and thread count,
// their timing beside the reference pass, and the table it prints. Its
// member functions: bench_command.cc (the reference, AdaComp and decode rows)
// and bench_baselines.cc (the top-k and onebit rows). Thread safety: one
// Bench per run; Time() runs the timed functions on its own threads.
#pragma once

#include <atomic>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "adacomp/status.h"
#include "bench_checks.h"
#include "bench_command.h"
#include "bench_harness.h"
#include "bench_ops.h"
#include "cli_util.h"

namespace adacomp::tool::bench_detail {

struct Row {
  std::string op;     // reference | compress | decode_accumulate
  std::string codec;  // none | adacomp | onebit | topk | topk_nth_element | topk_torch
  uint64_t elements = 0;
  uint32_t bin_size = 0;  // adacomp's L_T; for topk rows the L_T whose density they use
  int threads = 1;
  int frames = 0;      // frames decoded per part (decode), 1 (compress), 0 (reference)
  double seconds = 0;  // median over repeats, per operation on all `elements`
  double elements_per_second = 0;
  double ratio_to_reference = 0;  // seconds / reference seconds (same elements and threads)
  // selected / elements: compress rows; decode rows: summed over the P
  // frames of each part and over parts (selected / (elements x P)).
  double density = 0;
  uint64_t frame_bytes = 0;  // bytes of one operation's frames, summed over parts
};

using TopKFn = uint64_t (*)(std::span<float>, std::span<const float>, uint64_t, TopKScratch*);

class Bench {
 public:
  explicit Bench(const BenchArgs& a) : a_(a) {}

  Status Run(const std::vector<uint64_t>& sizes, const std::vector<uint64_t>& bin_sizes,
             const std::vector<uint64_t>& threads, const std::vector<uint64_t>& frames,
             const std::set<std::string>& ops);
  const std::vector<Row>& rows() const { return rows_; }

 private:
  bool Want(const std::string& op) const { return ops_.count("all") || ops_.count(op); }
  // Adds a row timed by the last call of Time().
  void Add(Row row) {
    row.seconds = last_.seconds;
    row.elements_per_second = row.seconds > 0 ? row.elements / row.seconds : 0;
    row.ratio_to_reference = last_.ratio;
    PrintRow(row);
    rows_.push_back(std::move(row));
  }
  static void PrintRow(const Row& r) {
    std::string l = r.bin_size ? std::to_string(r.bin_size) : "-";
    std::string p = r.frames ? std::to_string(r.frames) : "-";
    std::string d = r.density > 0 ? FormatDouble(r.density, 4) : "-";
    std::printf("%-18s %-17s %10" PRIu64 " %5s %3d %3s %9s %12.4e %12.2f %8.3f\n", r.op.c_str(),
                r.codec.c_str(), r.elements, l.c_str(), r.threads, p.c_str(), d.c_str(), r.seconds,
                r.elements_per_second / 1e6, r.ratio_to_reference);
    std::fflush(stdout);
  }
  // How an operation and the reference pass paired with it are timed.
  enum class Mode {
    kBackToBack,   // calls back to back; the reference pass over the same tensors each call
    kNewGradient,  // the same, the reference pass over a new gradient each call (as fn)
    kCold,         // call by call from cold caches, the reference pass too (see EvictCaches)
  };
  // Times fn on `parts` threads (and, paired with it, the current reference
  // pass on ref_parts threads; 0: parts).
  void Time(int parts, const std::function<void(int)>& fn, Mode mode = Mode::kBackToBack,
            int ref_parts = 0) {
    const std::function<void(int)>& ref = mode == Mode::kNewGradient ? reference_next_ : reference_;
    std::function<void(int)> evict;
    if (mode == Mode::kCold) evict = [this](int) { EvictCaches(); };
    last_ = TimeOp(parts, ref_parts ? ref_parts : parts, a_.repeats, a_.min_time, fn,
                   ref ? &ref : nullptr, mode == Mode::kCold ? &evict : nullptr);
  }
  // Reads kEvictBytes of other data (one load per 64-byte line), so that
  // what the next call touches is no longer in any cache level. Threads may
  // call it at once (the buffer is only read).
  static constexpr size_t kEvictBytes = size_t{256} << 20;  // above any one L3 of today's CPUs
  void EvictCaches() {
    uint64_t sum = 0;
    for (size_t i = 0; i < evict_buf_.size(); i += 8) sum += evict_buf_[i];
    evict_sink_.fetch_add(sum, std::memory_order_relaxed);  // keeps the loads
  }
  // One size and thread count: the data its rows read.
  struct Case {
    Case(uint64_t n, int t, uint64_t seed);
    Case(const Case&) = delete;  // whole's spans point into data
    Case& operator=(const Case&) = delete;
    // "what (N elements, T threads)", the context of an error.
    std::string Where(const std::string& what) const;

    uint64_t elements;
    int threads;
    Data data;   // data.parts: one per thread (the reference pass, the baselines)
    Part whole;  // all parts back to back: the one tensor AdaComp spreads over the threads
    std::vector<std::vector<float>> ref_r;  // the reference pass's R, one per part
  };
  Status RunOne(uint64_t elements, int threads, const std::vector<uint64_t>& bin_sizes,
                const std::vector<uint64_t>& frames);
  Status ReferenceRow(Case& c);
  Status AdaCompRow(Case& c, uint32_t l, double* density);
  Status DecodeRows(Case& c, uint32_t l, const std::vector<uint64_t>& frames);
  Status TopKRows(Case& c, uint32_t l, double density);
  Status TopKFnRow(std::vector<Part>& parts, const std::vector<uint64_t>& selected,
                   uint32_t bin_size, const char* codec, TopKFn fn);
  Status TopKCodecRow(Case& c, uint32_t l, double density, const std::vector<uint64_t>& selected);
  Status OneBitRow(Case& c);

  const BenchArgs& a_;
  std::set<std::string> ops_;
  std::vector<Row> rows_;
  std::function<void(int)> reference_;       // the reference pass of the current size and threads
  std::function<void(int)> reference_next_;  // the same over generator steps 1..kNextSteps in turn
  Timing last_;
  Failure failure_;
  std::vector<uint64_t> evict_buf_;  // EvictCaches' data (allocated when decode rows are wanted)
  std::atomic<uint64_t> evict_sink_{0};
};

}  // namespace adacomp::tool::bench_detail
