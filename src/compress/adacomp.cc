// AdaComp (docs/algorithm.md section 2): adaptive residual gradient compression.
//
// Fast path (docs/performance.md), when the gradient is finite and no sum
// R + dW can overflow (|dW| and the tracked bound on |R| both below 2^126):
//   check pass over dW (read only; CheckGradient, which also gives max |dW|);
//   one fused pass, bin by bin with the bin in L1 (compress/fused.h): gmax_i
//           = max |R + dW|, R = G = R + dW, select iff |G + dW| >= gmax_i and
//           G != 0, compaction of the selected (index, G) into scratch arrays,
//           branch-free and 8 lanes at a time with AVX2;
//   scale s = mean of gmax_i over all bins;
//   ternary: R = G - sign(G) s at the selected indices is deferred: the
//           selected indices and s are kept, and the next step's fused pass
//           applies the correction to each bin just before reading it (in
//           L1), so no extra sparse pass touches memory; residue(),
//           SaveState() and the two-pass path apply the pending corrections
//           first (Materialize). fp modes need no s and do theirs per chunk
//           while it is in cache.
// Nothing is written before the check pass has accepted dW (or, after
// Mark(), into the marked residue), so a rejected gradient leaves the state
// unchanged. Otherwise (values near the float
// range) the two-pass path runs: pass A (read only) computes the maxima and
// notices any non-finite G, pass B selects and updates (compress/kernels.h).
// No allocation once the buffers have grown. The results are bit-identical
// to the plain definition (adacomp_test.cc and fused_test.cc check it).
// residue() and SaveState() are const but apply pending corrections (mutable
// members): like every call, they must not run concurrently on one object.
//
// Mark() copies nothing: the first fast-path compression after it reads the
// marked residue and writes the new one into a second buffer (ternary: the
// kernel reads the marked residue, materializing its corrections there, and
// each chunk's G goes to the second buffer with streaming stores; fp modes:
// each chunk is copied there while in cache and the fused pass runs on the
// copy), then swaps the two, keeping the marked pending corrections (if
// any are left) beside them; UndoToMark() swaps back. As the marked residue stays intact, that
// compression runs without the check pass: a non-finite G shows in the
// fused pass's maxima, and the pass is then discarded and the checked path
// runs (and names the element). The two-pass path copies the whole residue
// instead (it is rare: values near the float range).
#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "compress/common.h"
#include "compress/fused.h"
#include "compress/kernels.h"
#include "core/endian.h"
#include "core/half.h"
#include "core/parallel.h"
#include "core/simd.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class AdaCompCompressor final : public Compressor {
 public:
  AdaCompCompressor(const CodecConfig& c, uint32_t id, uint64_t n)
      : Compressor(c, id, n),
        bin_size_(c.bin_size),
        residue_(n, 0.0f),
        gmax_(n == 0 ? 0 : (n - 1) / c.bin_size + 1),
        sel_words_((std::min<uint64_t>(n, c.bin_size) + 63) / 64, 0),
        neg_words_(sel_words_.size(), 0),
        fused_(BestFusedSelect()),
        fused_no_store_(BestFusedSelectNoStore()) {}

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    float max_dw = 0.0f;
    const int workers = Workers();
    if (marked_ && !moved_ && residue_bound_ < kSafeBound && grad.size() == elements()) {
      // The first compression after Mark() writes the new residue into the
      // second buffer and leaves the marked one as it was, so it needs no
      // check pass first: the fused pass sees a non-finite G in its maxima
      // and is then discarded, and the checked path below names the cause.
      bool non_finite = false;
      Status done = CompressFast(grad, frame, stats, workers, &non_finite);
      if (!non_finite) return done;
    }
    if (workers > 1 && grad.size() == elements()) {
      // The check pass spread over the threads (each walks its slice).
      std::vector<uint32_t> part(static_cast<size_t>(workers), 0);
      const size_t n = grad.size();
      RunWorkers(workers, [&](int w) {
        const size_t a = n * static_cast<size_t>(w) / static_cast<size_t>(workers);
        const size_t b = n * static_cast<size_t>(w + 1) / static_cast<size_t>(workers);
        part[static_cast<size_t>(w)] = MaxAbsBits(grad.data() + a, b - a);
      });
      const uint32_t bits = *std::max_element(part.begin(), part.end());
      if (bits >= 0x7F800000u) return CheckGradient(grad, elements());  // names the element
      max_dw = std::bit_cast<float>(bits);
    } else {
      ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements(), &max_dw));
    }
    if (max_dw < kSafeBound && residue_bound_ < kSafeBound) {
      return CompressFast(grad, frame, stats, workers);
    }
    return CompressTwoPass(grad, frame, stats);
  }

  std::span<const float> residue() const override {
    Materialize();
    return residue_;
  }

  std::vector<uint8_t> SaveState() const override {
    Materialize();
    return SaveStateBytes(Codec::kAdaComp, config().values, elements(), step_, residue_);
  }
  Status LoadState(std::span<const uint8_t> state) override {
    Materialize();  // on error the state stays as it was, corrections applied
    ADACOMP_RETURN_IF_ERROR(
        LoadStateBytes(state, Codec::kAdaComp, config().values, elements(), &step_, residue_));
    residue_bound_ = MaxAbs(residue_);
    marked_ = moved_ = false;
    return Status::OK();
  }
  Status SetBinSize(uint32_t bin_size) override {
    if (bin_size == 0) return Status::InvalidArgument("bin size must be >= 1");
    if (bin_size == bin_size_) return Status::OK();
    // The deferred corrections name absolute indices, so the fused pass could
    // still apply them under the new bins; applying them here keeps a size
    // change independent of that pass's bookkeeping (it is rare: a schedule).
    Materialize();
    const uint64_t n = elements();
    bin_size_ = bin_size;
    set_bin_size(bin_size);
    gmax_.assign(n == 0 ? 0 : (n - 1) / bin_size + 1, 0.0f);
    sel_words_.assign((std::min<uint64_t>(n, bin_size) + 63) / 64, 0);
    neg_words_.assign(sel_words_.size(), 0);
    return Status::OK();
  }
  void Snapshot(CompressorSnapshot* s) const override {
    Materialize();
    SnapshotState(step_, residue_, s);
  }
  Status Restore(const CompressorSnapshot& s) override {
    Materialize();  // on error the state stays as it was, corrections applied
    ADACOMP_RETURN_IF_ERROR(RestoreState(s, &step_, residue_));
    residue_bound_ = MaxAbs(residue_);
    marked_ = moved_ = false;
    return Status::OK();
  }

  void Mark() override {
    marked_ = true;
    moved_ = false;
    mark_step_ = step_;
    mark_bound_ = residue_bound_;
  }
  Status UndoToMark() override {
    if (!marked_) return Status::InvalidArgument("UndoToMark: no mark (call Mark() first)");
    if (moved_) {
      residue_.swap(spare_);
      pending_.swap(mark_pending_);
      pending_count_ = mark_pending_count_;
      pending_scale_ = mark_pending_scale_;
    }
    step_ = mark_step_;
    residue_bound_ = mark_bound_;
    marked_ = moved_ = false;
    return Status::OK();
  }
  void KeepSinceMark() override { marked_ = moved_ = false; }

 private:
  // Below this, |R| + |dW| cannot overflow float32 (2^126 + 2^126 = 2^127).
  static constexpr float kSafeBound = 0x1p126f;
  // Bins per call of the fused kernel (about 64K elements): the scratch
  // arrays are grown before each call to hold every element of the call.
  size_t BinsPerChunk() const { return std::max<size_t>(1, (size_t{1} << 16) / bin_size_); }

  // Applies the deferred corrections of the last step (see the top).
  void Materialize() const {
    float* r = residue_.data();
    for (size_t e = 0; e < pending_count_; ++e) {
      const uint32_t j = pending_[e];
      r[j] = ApplyScale(r[j], pending_scale_);
    }
    pending_count_ = 0;
  }

  // Threads for this tensor: config().threads, but one below 2^18 elements
  // (starting threads would cost more than they save) and at most one per
  // group of bins of the scale sum.
  int Workers() const {
    const size_t groups = (gmax_.size() + kScaleGroupBins - 1) / kScaleGroupBins;
    if (config().threads <= 1 || elements() < (uint64_t{1} << 18) || groups < 2) return 1;
    return static_cast<int>(std::min<size_t>(static_cast<size_t>(config().threads), groups));
  }

  // One worker's share of the fast path: bins [b0, b1), whole groups of the
  // scale sum, with the pending corrections [p0, p1) that fall in them;
  // appends the selected (index, G) to idx/val (grown as needed) and sets
  // group_sums_ of its groups.
  // With `from` (the marked residue):
  //   ternary: the kernel reads `from`, applying the deferred corrections to
  //     it in place (the marked residue materialized, the same values), and
  //     stores nothing; each chunk's G = from + dW is then written to the
  //     residue with streaming stores while the chunk is in cache (12 bytes
  //     per element from memory, no read of the new residue's lines);
  //   fp modes (which then change the selected elements): each chunk is
  //     first copied from it into the residue, with the
  //     kFusedCorrectionsAhead elements after it (where the kernel may apply
  //     corrections early; never past the worker's bins, which another
  //     worker may be writing), and the fused pass updates the copy in place.
  size_t RunBins(size_t b0, size_t b1, const uint32_t* p0, const uint32_t* p1, const float* g,
                 std::vector<uint32_t>& idx, std::vector<float>& val, float* top, uint64_t* hist,
                 float* from) {
    const size_t n = residue_.size();
    float* r = residue_.data();
    const ValueMode mode = config().values;
    const size_t per_chunk = BinsPerChunk();
    const bool stream = from != nullptr && mode == ValueMode::kTernary;
    const uint32_t* pend = p0;
    size_t count = 0;
    size_t copied = b0 * bin_size_;  // from: r holds from's elements below this
    const size_t copy_end = std::min(n, b1 * bin_size_);
    for (size_t b = b0; b < b1;) {
      const size_t group = b / kScaleGroupBins;
      const size_t group_end = std::min(b1, (group + 1) * kScaleGroupBins);
      double sum = 0.0;
      while (b < group_end) {
        const size_t last = std::min(group_end, b + per_chunk);
        const size_t span = std::min(n, last * bin_size_) - b * bin_size_;
        if (idx.size() < count + span + 8) {
          const size_t want = std::max(idx.size() * 2, count + span + 8);
          idx.resize(want);
          val.resize(want);
        }
        if (from && !stream) {
          const size_t upto = std::min(copy_end, last * bin_size_ + kFusedCorrectionsAhead);
          if (upto > copied) {
            std::memcpy(r + copied, from + copied, (upto - copied) * sizeof(float));
            copied = upto;
          }
        }
        const size_t added = (stream ? fused_no_store_ : fused_)(
            stream ? from : r, g, n, bin_size_, b, last, &pend, p1, pending_scale_, gmax_.data(),
            &sum, top, idx.data() + count, val.data() + count, hist);
        if (stream) {
          const size_t at = b * bin_size_;
          AddStream(from + at, g + at, r + at, span);
        }
        if (mode != ValueMode::kTernary) {
          // fp modes: send G rounded to the value type, keep the rounding
          // error (the chunk is still in cache).
          for (size_t e = count; e < count + added; ++e) {
            const float gj = val[e];
            float q = gj;
            if (mode == ValueMode::kFp16) {
              q = HalfToFloat(FloatToHalf(std::clamp(gj, -kHalfMax, kHalfMax)));
            }
            val[e] = q;
            r[idx[e]] = gj - q;
          }
        }
        count += added;
        b = last;
      }
      group_sums_[group] = sum;
    }
    assert(pend == p1);
    (void)p1;
    if (stream) StreamFence();
    return count;
  }

  // With `non_finite` (only for the first compression after Mark(), whose
  // gradient was not checked): a non-finite G sets *non_finite and undoes
  // the pass (the marked residue was not written; nothing else changed).
  Status CompressFast(std::span<const float> grad, std::vector<uint8_t>* frame,
                      CompressStats* stats, int workers, bool* non_finite = nullptr) {
    const size_t n = residue_.size();
    const size_t bins = gmax_.size();
    const float* g = grad.data();
    CompressStats st;
    st.elements = n;
    st.bins = bins;
    group_sums_.resize((bins + kScaleGroupBins - 1) / kScaleGroupBins);
    float gmax_top = 0.0f;
    size_t count = 0;
    const uint32_t* pend_begin = pending_.data();
    const uint32_t* const pend_end = pend_begin + pending_count_;
    // The first compression after Mark(): the new residue goes into the
    // spare buffer, the marked one (with its pending corrections) is kept.
    const bool move = marked_ && !moved_;
    if (move) {
      residue_.swap(spare_);
      residue_.resize(n);  // allocates once; every chunk is written before it is read
    }
    assert(!non_finite || move);
    float* from = move ? spare_.data() : nullptr;
    // Ternary: the pass applies every marked correction to the marked residue
    // itself (RunBins), which then has none pending.
    const bool from_materialized = move && config().values == ValueMode::kTernary;
    bool finite = true;
    if (workers <= 1) {
      count = RunBins(0, bins, pend_begin, pend_end, g, idx_, val_, &gmax_top,
                      st.bin_histogram.data(), from);
      finite = std::isfinite(gmax_top);
    } else {
      // Worker w takes a contiguous run of groups; worker 0 appends to
      // idx_/val_, the others to their own scratch, appended after.
      if (extra_.size() < static_cast<size_t>(workers - 1)) extra_.resize(workers - 1);
      const size_t groups = group_sums_.size();
      std::vector<size_t> counts(static_cast<size_t>(workers));
      std::vector<float> tops(static_cast<size_t>(workers), 0.0f);
      std::vector<std::array<uint64_t, 17>> hists(static_cast<size_t>(workers));
      RunWorkers(workers, [&](int w) {
        const size_t uw = static_cast<size_t>(w), uws = static_cast<size_t>(workers);
        const size_t b0 = std::min(bins, groups * uw / uws * kScaleGroupBins);
        const size_t b1 = std::min(bins, groups * (uw + 1) / uws * kScaleGroupBins);
        auto at = [&](size_t bin) {  // first pending correction at or after the bin
          const uint32_t e = static_cast<uint32_t>(std::min(n, bin * bin_size_));
          return std::lower_bound(pend_begin, pend_end, e);
        };
        hists[uw].fill(0);
        auto& idx = w == 0 ? idx_ : extra_[uw - 1].idx;
        auto& val = w == 0 ? val_ : extra_[uw - 1].val;
        counts[uw] = RunBins(b0, b1, at(b0), b1 == bins ? pend_end : at(b1), g, idx, val, &tops[uw],
                             hists[uw].data(), from);
      });
      count = counts[0];
      size_t total = count;
      for (size_t w = 1; w < counts.size(); ++w) total += counts[w];
      if (idx_.size() < total + 8) {
        idx_.resize(total + 8);
        val_.resize(total + 8);
      }
      for (size_t w = 0; w < counts.size(); ++w) {
        if (w > 0) {
          std::memcpy(idx_.data() + count, extra_[w - 1].idx.data(), counts[w] * sizeof(uint32_t));
          std::memcpy(val_.data() + count, extra_[w - 1].val.data(), counts[w] * sizeof(float));
          count += counts[w];
        }
        gmax_top = std::max(gmax_top, tops[w]);
        finite = finite && std::isfinite(tops[w]);
        for (size_t k = 0; k < 17; ++k) st.bin_histogram[k] += hists[w][k];
      }
    }
    if (non_finite && !finite) {
      residue_.swap(spare_);  // the marked residue back; the pass is discarded
      if (from_materialized) pending_count_ = 0;
      *non_finite = true;
      return Status::OK();
    }
    if (move) {
      pending_.swap(mark_pending_);
      mark_pending_count_ = from_materialized ? 0 : pending_count_;
      mark_pending_scale_ = pending_scale_;
      moved_ = true;
    }
    const float scale = ScaleOf(bins);
    const ValueMode mode = config().values;
    pending_count_ = 0;
    residue_bound_ = NextBound(gmax_top, scale);
    const std::span<const uint32_t> selected(idx_.data(), count);
    const Status written = WriteFrame(
        selected, [&](size_t e) { return std::signbit(val_[e]); },
        [&](size_t e) { return val_[e]; }, scale, st, frame, stats, val_.data(), workers);
    if (mode == ValueMode::kTernary) {
      // R = G - sign(G) s at the selected elements, deferred to the next
      // pass (R holds G there now).
      idx_.swap(pending_);
      pending_count_ = count;
      pending_scale_ = scale;
    }
    return written;
  }

  // s = mean of gmax over all bins, from group_sums_ (docs/algorithm.md
  // section 2, step 5: in double, each group of kScaleGroupBins bins summed
  // in order, then the group sums in order), rounded to float.
  float ScaleOf(size_t bins) const {
    if (bins == 0) return 0.0f;
    double total = 0.0;
    for (double v : group_sums_) total += v;
    return static_cast<float>(total / static_cast<double>(bins));
  }

  // |R| after a step is at most max gmax + s (selected: |G - sign(G) s|; fp
  // modes: at most |G|), with room for rounding.
  static float NextBound(float gmax_top, float scale) { return 1.25f * (gmax_top + scale); }

  // Appends the frame of this step's selection. Ternary: entry e is negative
  // iff negative(e), or iff std::signbit(sign_of[e]) when sign_of is given.
  // With sign_of and workers > 1, a large selection's bits are written by
  // `workers` threads (WriteBitsParallel).
  template <typename NegFn, typename ValFn>
  Status WriteFrame(std::span<const uint32_t> selected, NegFn negative, ValFn value, float scale,
                    CompressStats& st, std::vector<uint8_t>* frame, CompressStats* stats,
                    const float* sign_of = nullptr, int workers = 1) {
    const ValueMode mode = config().values;
    const size_t n = residue_.size();
    const size_t count = selected.size();
    wire::Params p;
    p.values = mode;
    p.bin_size = static_cast<uint32_t>(bin_size_);
    p.selected = count;
    uint64_t code_bits = 0;
    p.code = wire::ChooseIndexCode(selected, &code_bits);
    p.scale = mode == ValueMode::kTernary ? scale : 0.0f;
    const bool signs = mode == ValueMode::kTernary;
    const int vb = mode == ValueMode::kFp16 ? 2 : mode == ValueMode::kFp32 ? 4 : 0;
    const size_t payload = wire::SparsePayloadBytes(count, code_bits, signs, vb);
    const size_t start = frame->size();
    const size_t at = wire::BeginFrame(frame, Codec::kAdaComp, tensor_id(), n, p, payload);
    uint8_t* dst = frame->data() + at;
    if (vb == 4) {
      for (size_t e = 0; e < count; ++e) StoreF32(dst + 4 * e, value(e));
    } else if (vb == 2) {
      for (size_t e = 0; e < count; ++e) StoreU16(dst + 2 * e, FloatToHalf(value(e)));
    }
    if (signs && sign_of && workers > 1 && count >= kMinParallelEntries) {
      WriteBitsParallel(dst + count * vb, dst + payload, selected, p.code, sign_of, workers);
    } else if (signs && sign_of) {
      wire::WriteSparseBitsSignOf(dst + count * vb, dst + payload, selected, p.code, sign_of);
    } else {
      wire::WriteSparseBits(dst + count * vb, dst + payload, selected, p.code, signs, negative);
    }
    wire::FinishFrame(frame, start);
    ++step_;
    st.selected = count;
    st.frame_bytes = frame->size() - start;
    if (stats) *stats = st;
    return Status::OK();
  }

  // Below this many selected entries one thread writes the frame's bits.
  static constexpr size_t kMinParallelEntries = 16384;

  // The index-and-sign bits of a ternary frame (what WriteSparseBitsSignOf
  // writes into [begin, end), bit for bit), by `workers` threads: worker w
  // takes a contiguous run of entries, whose length in bits it counts from
  // the chosen code (the first gap taken from the previous entry); the
  // prefix sums place each run at its bit offset; each worker writes its run
  // into scratch of its own starting at that offset's bit within its first
  // byte; the runs are then copied in order, the byte two runs share OR-ed.
  void WriteBitsParallel(uint8_t* begin, uint8_t* end, std::span<const uint32_t> selected,
                         wire::IndexCode code, const float* sign_of, int workers) {
    const size_t count = selected.size();
    const size_t uw = static_cast<size_t>(workers);
    std::vector<size_t> first(uw + 1);
    for (size_t w = 0; w <= uw; ++w) first[w] = count * w / uw;
    auto next0 = [&](size_t w) { return first[w] ? uint64_t{selected[first[w] - 1]} + 1 : 0; };
    std::vector<uint64_t> offset(uw + 1, 0);  // bit offsets of the runs
    RunWorkers(workers, [&](int w) {
      const size_t i = static_cast<size_t>(w);
      const auto run = selected.subspan(first[i], first[i + 1] - first[i]);
      offset[i + 1] = wire::IndexCodeBitsFrom(run, code, next0(i)) + run.size();  // + sign bits
    });
    for (size_t w = 0; w < uw; ++w) offset[w + 1] += offset[w];
    assert((offset[uw] + 7) / 8 == static_cast<uint64_t>(end - begin));
    (void)end;
    if (bit_scratch_.size() < uw) bit_scratch_.resize(uw);
    RunWorkers(workers, [&](int w) {
      const size_t i = static_cast<size_t>(w);
      const auto run = selected.subspan(first[i], first[i + 1] - first[i]);
      const int fill0 = static_cast<int>(offset[i] & 7);
      const size_t bytes = static_cast<size_t>((fill0 + offset[i + 1] - offset[i] + 7) / 8);
      auto& buf = bit_scratch_[i];
      if (buf.size() < bytes) buf.resize(bytes);
      wire::WriteSparseBitsSignOf(buf.data(), buf.data() + bytes, run, code, sign_of + first[i],
                                  next0(i), fill0);
    });
    for (size_t w = 0; w < uw; ++w) {
      const uint64_t at = offset[w] >> 3;
      const size_t bytes = static_cast<size_t>((offset[w + 1] + 7) / 8 - at);
      begin[at] |= bit_scratch_[w][0];  // its low (offset & 7) bits are the previous run's
      if (bytes > 1) std::memcpy(begin + at + 1, bit_scratch_[w].data() + 1, bytes - 1);
    }
  }

  // The two-pass path: pass A checks every G before anything is written.
  Status CompressTwoPass(std::span<const float> grad, std::vector<uint8_t>* frame,
                         CompressStats* stats) {
    if (marked_ && !moved_) {
      // Keep the marked residue and corrections by copying them (rare path).
      spare_.assign(residue_.begin(), residue_.end());
      mark_pending_.assign(pending_.begin(), pending_.begin() + pending_count_);
      mark_pending_count_ = pending_count_;
      mark_pending_scale_ = pending_scale_;
      residue_.swap(spare_);
      moved_ = true;
    }
    Materialize();
    const size_t n = residue_.size();
    const size_t bins = gmax_.size();
    float* r = residue_.data();
    const float* g = grad.data();

    // Pass A.
    group_sums_.assign((bins + kScaleGroupBins - 1) / kScaleGroupBins, 0.0);
    bool bad = false;
    for (size_t b = 0; b < bins; ++b) {
      const size_t begin = b * bin_size_;
      const size_t len = std::min(n, begin + bin_size_) - begin;
      const float m = MaxAbsSumChecked(r + begin, g + begin, len, &bad);
      gmax_[b] = m;
      group_sums_[b / kScaleGroupBins] += m;
    }
    if (bad) return ExplainBadGradient(grad);
    const float scale = ScaleOf(bins);

    // Pass B.
    const ValueMode mode = config().values;
    selected_.clear();
    negative_.clear();
    values_.clear();
    CompressStats st;
    st.elements = n;
    st.bins = bins;
    for (size_t b = 0; b < bins; ++b) {
      const size_t begin = b * bin_size_;
      const size_t len = std::min(n, begin + bin_size_) - begin;
      const size_t before = selected_.size();
      if (mode == ValueMode::kTernary) {
        SelectTernary(r + begin, g + begin, len, gmax_[b], scale, sel_words_.data(),
                      neg_words_.data());
      } else {
        SelectKeep(r + begin, g + begin, len, gmax_[b], sel_words_.data());
      }
      Collect(begin, len, r);
      AddToHistogram(&st.bin_histogram, selected_.size() - before);
    }

    float gmax_top = 0.0f;
    for (size_t b = 0; b < bins; ++b) gmax_top = std::max(gmax_top, gmax_[b]);
    residue_bound_ = NextBound(gmax_top, scale);
    return WriteFrame(
        selected_, [&](size_t e) { return negative_[e] != 0; },
        [&](size_t e) { return values_[e]; }, scale, st, frame, stats);
  }

  // Appends the bin's selected indices (and signs, or values) from the
  // selection words; fp modes also subtract the sent value from r (the bin
  // is still in L1).
  void Collect(size_t begin, size_t len, float* r) {
    const ValueMode mode = config().values;
    const size_t words = (len + 63) / 64;
    for (size_t w = 0; w < words; ++w) {
      uint64_t word = sel_words_[w];
      const uint64_t negw = neg_words_[w];
      while (word) {
        const int t = std::countr_zero(word);
        const size_t j = begin + 64 * w + static_cast<size_t>(t);
        selected_.push_back(static_cast<uint32_t>(j));
        if (mode == ValueMode::kTernary) {
          negative_.push_back(static_cast<uint8_t>((negw >> t) & 1));
        } else {
          const float gj = r[j];
          float q = gj;
          if (mode == ValueMode::kFp16) {
            q = HalfToFloat(FloatToHalf(std::clamp(gj, -kHalfMax, kHalfMax)));
          }
          values_.push_back(q);
          r[j] = gj - q;
        }
        word &= word - 1;
      }
    }
  }

  // Finds why pass A saw a non-finite G: a NaN/Inf in dW, or an overflow.
  Status ExplainBadGradient(std::span<const float> grad) const {
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
    for (size_t j = 0; j < grad.size(); ++j) {
      if (!std::isfinite(residue_[j] + grad[j])) {
        return Status::InvalidArgument("gradient element " + std::to_string(j) + " (" +
                                       std::to_string(grad[j]) +
                                       ") makes residue + gradient overflow float32");
      }
    }
    return Status::Internal("pass A saw a non-finite value that is not there");
  }

  size_t bin_size_;
  // Mutable: residue() and SaveState() apply the pending corrections.
  mutable std::vector<float> residue_;
  std::vector<float> gmax_;
  std::vector<double> group_sums_;  // the scale's partial sums, one per group of bins
  struct Scratch {
    std::vector<uint32_t> idx;
    std::vector<float> val;
  };
  std::vector<Scratch> extra_;  // fast path, workers 1..T-1: their selected entries
  std::vector<std::vector<uint8_t>> bit_scratch_;  // WriteBitsParallel: each worker's bits
  std::vector<uint64_t> sel_words_;                // one bin's selection bits
  std::vector<uint64_t> neg_words_;                // one bin's sign bits (ternary)
  std::vector<uint32_t> selected_;                 // this step's selected indices
  std::vector<uint8_t> negative_;                  // ternary: their signs
  std::vector<float> values_;                      // fp modes: their sent values (as float)
  FusedSelectFn fused_;                            // fast path kernel
  FusedSelectFn fused_no_store_;                   // the first compression after Mark()
  std::vector<uint32_t> idx_;                      // fast path: selected indices (+ slack)
  std::vector<float> val_;                         // fast path: their G (fp modes: sent value)
  float residue_bound_ = 0.0f;                     // >= max |R| (exact after LoadState)
  std::vector<uint32_t> pending_;     // ternary: last step's selected indices (+ slack)
  mutable size_t pending_count_ = 0;  // how many of them still need R = G - sign(G) s
  float pending_scale_ = 0.0f;        // that step's s
  uint64_t step_ = 0;
  // Mark(): the marked state. Once moved_ (compressed since the mark), the
  // marked residue is spare_ and its pending corrections mark_pending_*.
  bool marked_ = false, moved_ = false;
  uint64_t mark_step_ = 0;
  float mark_bound_ = 0.0f;
  std::vector<float> spare_;  // the marked residue once moved_; else the next one's buffer
  std::vector<uint32_t> mark_pending_;
  size_t mark_pending_count_ = 0;
  float mark_pending_scale_ = 0.0f;
};

}  // namespace

std::unique_ptr<Compressor> NewAdaCompCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<AdaCompCompressor>(c, id, n);
}

}  // namespace adacomp::internal
