// The gradient exchange of one step (include/adacomp/exchange.h;
// docs/algorithm.md section 3). Step() runs on every learner of the
// communicator's group with the same tensors, in the same order:
//   agree       AllGatherV of {first non-finite tensor or -1, a side value}:
//               if any learner's gradient has a NaN or Inf the step is
//               skipped everywhere before any residue or output changes;
//   compress    one frame per tensor, concatenated into this learner's
//               message;
//   communicate AllGatherV of the messages;
//   decompress  DecodeAverageMessages: every frame of every message
//               validated, then the average over the learners per tensor.
// With ExchangeKind::kReduceScatter the last two are instead: every frame
// cut at P slice boundaries, slice r's pieces sent to learner r
// (AllToAllV), averaged there, and the averaged slices all-gathered as
// sparse float32 or dense frames (src/exchange/slice_exchange.h): what a
// learner receives stops growing with P while the sum stays sparse. The
// averaged bits are the same as the all-gather's. With ExchangeKind::kAuto
// each tensor goes by the one of the two that the previous step's figures
// say receives fewer bytes (the first step: the all-gather); the
// reduce-scatter's slices are written only after the all-gather's part
// decoded, so a failure still leaves `averaged` untouched.
// When every tensor's codec is dense the last three are one ring
// all-reduce (Communicator::AllReduceSum) of the float32 gradients, divided
// by the group size (the same bits as averaging dense frames). When every
// tensor is dense with values fp16 it is AllReduceSumHalf of the gradients
// divided by the group size first (as PyTorch's fp16 hook does): binary16 on
// the wire, half the bytes. Dense fp16 beside any other tensor setting is
// refused (dense frames carry float32). Every learner computes the same
// averaged bytes, so replicas that apply them stay bit-identical.
// With ExchangeOptions::auto_dense the agreement also carries each
// learner's time of its previous step; from the fastest learner's, a
// SpeedChooser (adacomp/speed_choice.h) picks this step's mode on every learner
// alike: the codec path above, or the float32 all-reduce of each learner's
// gradient plus the residue each compressor holds, after which those
// residues are emptied (only once that all-reduce succeeded).
//
// The public class holds only a pointer to its Impl below: the settings,
// the compressors and the buffers reused from step to step. Tests and the
// trainer's test hooks reach the send hook through exchange_hooks.h.
#include "adacomp/exchange.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "adacomp/speed_choice.h"
#include "core/byte_io.h"
#include "core/names.h"
#include "core/simd.h"
#include "exchange/exchange_choice.h"
#include "exchange/exchange_hooks.h"
#include "exchange/slice_exchange.h"

namespace adacomp {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

using Hold = exchange_internal::ThrottleHold;

// The agreement message: {int32 first non-finite tensor or -1, int32 0,
// float64 side value}, little-endian (the host's order; every learner of a
// group runs the same build); with auto_dense one more float64, the
// learner's seconds of its previous step (< 0: none).
constexpr size_t kAgreeBytes = 16;
constexpr size_t kAgreeAutoBytes = 24;

constexpr std::array<std::string_view, 3> kExchangeKindNames = {"allgather", "reduce-scatter",
                                                                "auto"};

}  // namespace

struct GradientExchange::Impl {
  Impl(Communicator& comm, std::vector<ExchangeTensor> tensors, ExchangeOptions options)
      : comm_(comm), tensors_(std::move(tensors)), options_(options) {}

  Status Step(std::span<const std::span<const float>> grads, double value,
              std::span<float> averaged, ExchangeResult* result, ExchangeThrottle* throttle);
  // agreed_seconds (auto_dense; else null): the fastest learner's time of
  // its previous step, -1 when any learner has none.
  Status Agree(std::span<const std::span<const float>> grads, double value, ExchangeResult* result,
               ExchangeThrottle* throttle, double* agreed_seconds);
  // The all-gather of `message` (this learner's frames of the tensors
  // `which`) and the average of those tensors into `averaged`. `hook`:
  // whether the send hook sees this message.
  Status GatherAverage(std::span<const size_t> which, std::vector<uint8_t>& message,
                       std::span<float> averaged, ExchangeResult* result,
                       ExchangeThrottle* throttle, bool hook = true);
  void CountTraffic(const CommTraffic& before, ExchangeResult* result) const;
  // The codec path of a step (compress, then the all-gather and/or the
  // reduce-scatter).
  Status CodecStep(std::span<const std::span<const float>> grads, std::span<float> averaged,
                   ExchangeResult* result, ExchangeThrottle* throttle);
  // The dense all-reduce of gradients (+ residues, with auto_dense).
  Status DenseStep(std::span<const std::span<const float>> grads, std::span<float> averaged,
                   ExchangeResult* result, ExchangeThrottle* throttle, bool fold);

  Communicator& comm_;
  std::vector<ExchangeTensor> tensors_;
  ExchangeOptions options_;
  std::vector<size_t> offsets_;
  size_t total_elements_ = 0;
  bool all_reduce_ = false;
  bool half_ = false;
  std::vector<std::unique_ptr<Compressor>> compressors_;
  std::vector<uint8_t> message_;
  GatheredBuffers gathered_;
  std::vector<std::span<const uint8_t>> message_spans_;
  std::vector<MessageTensor> message_tensors_;
  std::vector<FrameInfo> infos_;
  std::vector<size_t> frame_ends_;
  std::vector<size_t> all_;                            // the tensors by the all-gather this step
  std::vector<size_t> by_slices_;                      // ... by the reduce-scatter
  std::vector<std::span<const uint8_t>> frame_spans_;  // reduce-scatter, auto
  std::vector<uint8_t> gather_message_;                // auto
  std::unique_ptr<exchange_internal::SliceExchange> slices_;     // reduce-scatter, auto
  std::unique_ptr<exchange_internal::ExchangeChooser> chooser_;  // auto
  // auto_dense: the chooser, this learner's seconds of its last step (for
  // the next agreement; < 0 none), and per compressor whether its residue
  // may hold anything (cleared when a dense step has sent it).
  std::unique_ptr<SpeedChooser> speed_;
  double last_seconds_ = -1;
  std::vector<uint8_t> residue_dirty_;
  // Tests (exchange_hooks.h): the seconds a step took, instead of its wall time.
  std::function<double(const ExchangeResult&)> step_clock_;
  // For failure tests (exchange_hooks.h): sees this learner's message
  // just before it is sent.
  std::function<void(std::vector<uint8_t>&)> send_hook_;
};

namespace exchange_internal {

struct Access {
  static GradientExchange::Impl& Of(GradientExchange& x) { return *x.impl_; }
};

void SetSendHook(GradientExchange& exchange, std::function<void(std::vector<uint8_t>&)> hook) {
  Access::Of(exchange).send_hook_ = std::move(hook);
}

void SetStepClock(GradientExchange& exchange, std::function<double(const ExchangeResult&)> clock) {
  Access::Of(exchange).step_clock_ = std::move(clock);
}

}  // namespace exchange_internal

std::string_view ExchangeKindName(ExchangeKind kind) {
  return names::Of(kind, kExchangeKindNames, "allgather");
}

Result<ExchangeKind> ParseExchangeKind(std::string_view name) {
  return names::Parse<ExchangeKind>(name, kExchangeKindNames, "unknown exchange ",
                                    " (allgather, reduce-scatter, auto)");
}

GradientExchange::GradientExchange(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GradientExchange::~GradientExchange() = default;

size_t GradientExchange::tensors() const { return impl_->tensors_.size(); }
const ExchangeTensor& GradientExchange::tensor(size_t k) const { return impl_->tensors_[k]; }
size_t GradientExchange::offset(size_t k) const { return impl_->offsets_[k]; }
size_t GradientExchange::total_elements() const { return impl_->total_elements_; }
bool GradientExchange::all_reduce() const { return impl_->all_reduce_; }
bool GradientExchange::all_reduce_half() const { return impl_->half_; }
ExchangeKind GradientExchange::kind() const { return impl_->options_.kind; }
size_t GradientExchange::compressors() const { return impl_->compressors_.size(); }
Compressor& GradientExchange::compressor(size_t k) {
  if (k < impl_->residue_dirty_.size()) impl_->residue_dirty_[k] = 1;
  return *impl_->compressors_[k];
}
bool GradientExchange::auto_dense() const { return impl_->speed_ != nullptr; }

std::vector<uint8_t> GradientExchange::SaveSpeedState() const {
  if (!impl_->speed_) return {};
  ByteWriter w;
  w.PutBytes(impl_->speed_->SaveState());
  w.Put(impl_->last_seconds_);
  return std::move(w.bytes);
}

Status GradientExchange::LoadSpeedState(std::span<const uint8_t> bytes) {
  if (!impl_->speed_) {
    if (bytes.empty()) return Status::OK();
    return Status::InvalidArgument("a saved auto-codec state, but this exchange is not auto");
  }
  ByteReader r(bytes, "a saved auto-codec state");
  std::span<const uint8_t> chooser;
  double last = -1;
  Status read = r.GetBytes(&chooser);
  if (read.ok()) read = r.Get(&last);
  if (!read.ok()) {
    return Status::InvalidArgument("a saved auto-codec state of " + std::to_string(bytes.size()) +
                                   " bytes, too short (was the checkpoint made without auto?)");
  }
  if (!r.AtEnd()) return Status::Corruption("a saved auto-codec state has trailing bytes");
  ADACOMP_RETURN_IF_ERROR(impl_->speed_->LoadState(chooser));
  impl_->last_seconds_ = last;
  return Status::OK();
}
const Compressor& GradientExchange::compressor(size_t k) const { return *impl_->compressors_[k]; }

std::span<const uint8_t> GradientExchange::frame(size_t k) const {
  const Impl& x = *impl_;
  if (k >= x.frame_ends_.size()) return {};
  const size_t begin = k == 0 ? 0 : x.frame_ends_[k - 1];
  return std::span<const uint8_t>(x.message_).subspan(begin, x.frame_ends_[k] - begin);
}

Result<std::unique_ptr<GradientExchange>> GradientExchange::Create(
    Communicator& comm, std::vector<ExchangeTensor> tensors, ExchangeOptions options) {
  auto x = std::make_unique<Impl>(comm, std::move(tensors), options);
  if (options.summed_values != ValueMode::kFp32 && options.summed_values != ValueMode::kFp16) {
    return Status::InvalidArgument("the averaged slices' values are fp32 or fp16, not " +
                                   std::string(ValueModeName(options.summed_values)));
  }
  if (options.kind != ExchangeKind::kAllGather) {
    x->slices_ = std::make_unique<exchange_internal::SliceExchange>(options.summed_values);
  }
  if (options.kind == ExchangeKind::kAuto) {
    x->chooser_ = std::make_unique<exchange_internal::ExchangeChooser>(x->tensors_, comm.size(),
                                                                       options.summed_values);
  }
  x->all_reduce_ = true;
  size_t half_tensors = 0;
  for (const ExchangeTensor& t : x->tensors_) {
    x->offsets_.push_back(x->total_elements_);
    x->total_elements_ += static_cast<size_t>(t.elements);
    if (t.codec.codec != Codec::kDense) x->all_reduce_ = false;
    if (t.codec.codec == Codec::kDense && t.codec.values == ValueMode::kFp16) ++half_tensors;
  }
  // Dense fp16 exists only as the all-reduce (dense frames carry float32),
  // for every tensor or none: refuse rather than send float32 silently.
  if (half_tensors > 0) {
    for (size_t k = 0; k < x->tensors_.size(); ++k) {
      const ExchangeTensor& t = x->tensors_[k];
      if (t.codec.codec != Codec::kDense || t.codec.values != ValueMode::kFp16) {
        return Status::InvalidArgument(
            "dense with fp16 values is an fp16 all-reduce of every tensor, but tensor " +
            std::to_string(k) + " (" + t.name + ") is " + std::string(CodecName(t.codec.codec)) +
            (t.codec.codec == Codec::kDense ? " with float32 values" : ""));
      }
    }
    x->half_ = true;
  }
  if (options.auto_dense) {
    ADACOMP_RETURN_IF_ERROR(options.speed.Validate());
    if (x->all_reduce_) {
      return Status::InvalidArgument(
          "auto chooses between the dense all-reduce and the tensors' codecs, but every tensor "
          "is dense: give the tensors a codec (e.g. adacomp)");
    }
    x->speed_ = std::make_unique<SpeedChooser>(options.speed);
    x->residue_dirty_.assign(x->tensors_.size(), 0);
  }
  if (!x->all_reduce_) {
    for (size_t k = 0; k < x->tensors_.size(); ++k) {
      const ExchangeTensor& t = x->tensors_[k];
      auto c = Compressor::Create(t.codec, static_cast<uint32_t>(k), t.elements);
      if (!c.ok())
        return c.status().WithContext("tensor " + std::to_string(k) + " (" + t.name + ")");
      x->compressors_.push_back(std::move(*c));
    }
  }
  return std::unique_ptr<GradientExchange>(new GradientExchange(std::move(x)));
}

Status GradientExchange::Impl::Agree(std::span<const std::span<const float>> grads, double value,
                                     ExchangeResult* result, ExchangeThrottle* throttle,
                                     double* agreed_seconds) {
  int32_t bad_tensor = -1;
  {
    Hold hold(throttle);
    for (size_t k = 0; k < grads.size(); ++k) {
      if (FindNonFinite(grads[k])) {
        bad_tensor = static_cast<int32_t>(k);
        break;
      }
    }
  }
  const size_t agree_bytes = speed_ ? kAgreeAutoBytes : kAgreeBytes;
  uint8_t mine[kAgreeAutoBytes] = {};
  std::memcpy(mine, &bad_tensor, 4);
  std::memcpy(mine + 8, &value, 8);
  std::memcpy(mine + 16, &last_seconds_, 8);
  const auto t0 = Clock::now();
  GatheredBuffers all;
  ADACOMP_RETURN_IF_ERROR(comm_.AllGatherV(std::span<const uint8_t>(mine, agree_bytes), &all));
  result->communicate_seconds += Since(t0);
  const int p = comm_.size();
  if (all.ranks() != static_cast<size_t>(p)) {
    return Status::Internal("all-gather returned " + std::to_string(all.ranks()) +
                            " agreements for " + std::to_string(p) + " learners");
  }
  for (int r = 0; r < p; ++r) {
    const auto s = all.rank(static_cast<size_t>(r));
    if (s.size() != agree_bytes) {
      return Status::Internal("learner " + std::to_string(r) + " sent a bad status");
    }
    int32_t bt;
    double v;
    std::memcpy(&bt, s.data(), 4);
    std::memcpy(&v, s.data() + 8, 8);
    if (bt >= 0) result->non_finite.emplace_back(r, bt);
    result->values.push_back(v);
  }
  if (agreed_seconds) {
    // The previous step's time: the fastest learner's (it waited least for
    // the others); none (-1) when any learner has none.
    *agreed_seconds = std::numeric_limits<double>::infinity();
    for (int r = 0; r < p; ++r) {
      double sec;
      std::memcpy(&sec, all.rank(static_cast<size_t>(r)).data() + 16, 8);
      *agreed_seconds = sec >= 0 ? std::min(*agreed_seconds, sec) : -1;
      if (*agreed_seconds < 0) break;
    }
  }
  return Status::OK();
}

Status GradientExchange::Step(std::span<const std::span<const float>> grads, double value,
                              std::span<float> averaged, ExchangeResult* result,
                              ExchangeThrottle* throttle) {
  return impl_->Step(grads, value, averaged, result, throttle);
}

Status GradientExchange::Impl::Step(std::span<const std::span<const float>> grads, double value,
                                    std::span<float> averaged, ExchangeResult* result,
                                    ExchangeThrottle* throttle) {
  *result = ExchangeResult();
  const size_t n_tensors = tensors_.size();
  if (grads.size() != n_tensors || averaged.size() != total_elements_) {
    return Status::InvalidArgument("GradientExchange::Step: " + std::to_string(grads.size()) +
                                   " gradients and " + std::to_string(averaged.size()) +
                                   " output floats for " + std::to_string(n_tensors) +
                                   " tensors of " + std::to_string(total_elements_));
  }
  for (size_t k = 0; k < n_tensors; ++k) {
    if (grads[k].size() != tensors_[k].elements) {
      return Status::InvalidArgument("GradientExchange::Step: gradient of tensor " +
                                     std::to_string(k) + " (" + tensors_[k].name + ") has " +
                                     std::to_string(grads[k].size()) + " elements, not " +
                                     std::to_string(tensors_[k].elements));
    }
  }
  frame_ends_.clear();  // no frames of this step until it compresses
  const CommTraffic before = comm_.traffic();
  double agreed_seconds = -1;
  ADACOMP_RETURN_IF_ERROR(
      Agree(grads, value, result, throttle, speed_ ? &agreed_seconds : nullptr));
  if (result->skipped()) {
    last_seconds_ = -1;  // nothing to time
    CountTraffic(before, result);
    return Status::OK();
  }
  result->wire_bytes.assign(n_tensors, 0);
  result->selected.assign(n_tensors, 0);
  result->mode = all_reduce_ ? StepMode::kDense : StepMode::kCodec;
  if (speed_) {
    speed_->Record(agreed_seconds);
    result->mode = speed_->Decide();
    result->speed_note = speed_->note();
  }
  const auto t0 = Clock::now();
  last_seconds_ = -1;  // a failed step has no time
  ADACOMP_RETURN_IF_ERROR(result->mode == StepMode::kDense
                              ? DenseStep(grads, averaged, result, throttle, speed_ != nullptr)
                              : CodecStep(grads, averaged, result, throttle));
  CountTraffic(before, result);
  if (speed_) last_seconds_ = step_clock_ ? step_clock_(*result) : Since(t0);
  return Status::OK();
}

Status GradientExchange::Impl::DenseStep(std::span<const std::span<const float>> grads,
                                         std::span<float> averaged, ExchangeResult* result,
                                         ExchangeThrottle* throttle, bool fold) {
  const int p = comm_.size();
  const size_t n_tensors = tensors_.size();
  {
    Hold hold(throttle);
    const auto t0 = Clock::now();
    for (size_t k = 0; k < n_tensors; ++k) {
      if (grads[k].empty()) continue;
      std::memcpy(averaged.data() + offsets_[k], grads[k].data(), grads[k].size_bytes());
      if (fold && residue_dirty_[k]) {
        // The residue goes along: nothing a compressor held back is lost.
        const std::span<const float> r = compressors_[k]->residue();
        float* out = averaged.data() + offsets_[k];
        for (size_t i = 0; i < r.size(); ++i) out[i] += r[i];
      }
    }
    // fp16: x / P before the sum (as PyTorch's fp16 hook does), so that
    // the sums stay within half's range.
    if (half_) internal::DivideFloats(averaged.data(), averaged.size(), static_cast<float>(p));
    result->compress_seconds = Since(t0);
  }
  const auto t1 = Clock::now();
  ADACOMP_RETURN_IF_ERROR(half_ ? comm_.AllReduceSumHalf(averaged) : comm_.AllReduceSum(averaged));
  result->communicate_seconds += Since(t1);
  Hold hold(throttle);
  const auto t2 = Clock::now();
  // x / P, vectorized; the same bits as DecodeAverageAll of dense frames.
  if (!half_) internal::DivideFloats(averaged.data(), averaged.size(), static_cast<float>(p));
  for (size_t k = 0; k < n_tensors; ++k) {
    result->wire_bytes[k] = tensors_[k].elements * (half_ ? 2 : 4) * static_cast<uint64_t>(p);
    result->selected[k] = tensors_[k].elements * static_cast<uint64_t>(p);
  }
  if (fold) {
    // Sent: the residues empty, only now that the all-reduce succeeded.
    for (size_t k = 0; k < n_tensors; ++k) {
      if (!residue_dirty_[k]) continue;
      ADACOMP_RETURN_IF_ERROR(compressors_[k]->ClearResidue());
      residue_dirty_[k] = 0;
    }
  }
  result->decompress_seconds = Since(t2);
  return Status::OK();
}

Status GradientExchange::Impl::CodecStep(std::span<const std::span<const float>> grads,
                                         std::span<float> averaged, ExchangeResult* result,
                                         ExchangeThrottle* throttle) {
  const size_t n_tensors = tensors_.size();
  {
    Hold hold(throttle);
    const auto t0 = Clock::now();
    message_.clear();
    frame_ends_.clear();
    for (size_t k = 0; k < n_tensors; ++k) {
      if (!residue_dirty_.empty()) residue_dirty_[k] = 1;
      Status st = compressors_[k]->Compress(grads[k], &message_);
      if (!st.ok()) return st.WithContext("compressing " + tensors_[k].name);
      frame_ends_.push_back(message_.size());
    }
    result->compress_seconds = Since(t0);
  }
  if (options_.kind == ExchangeKind::kAllGather) {
    all_.resize(n_tensors);
    for (size_t k = 0; k < n_tensors; ++k) all_[k] = k;
    return GatherAverage(all_, message_, averaged, result, throttle);
  }
  // Reduce-scatter, or auto: each tensor by the way the chooser picked.
  frame_spans_.clear();
  size_t begin = 0;
  for (size_t end : frame_ends_) {
    frame_spans_.push_back(std::span<const uint8_t>(message_).subspan(begin, end - begin));
    begin = end;
  }
  by_slices_.clear();
  all_.clear();
  for (size_t k = 0; k < n_tensors; ++k) {
    const bool rs = options_.kind == ExchangeKind::kReduceScatter || chooser_->ReduceScatter(k);
    (rs ? by_slices_ : all_).push_back(k);
  }
  if (!by_slices_.empty()) {
    ADACOMP_RETURN_IF_ERROR(slices_->Run(comm_, tensors_, offsets_, frame_spans_, by_slices_,
                                         total_elements_, result, throttle, send_hook_));
  }
  if (!all_.empty()) {
    gather_message_.clear();
    for (size_t k : all_) {
      gather_message_.insert(gather_message_.end(), frame_spans_[k].begin(), frame_spans_[k].end());
    }
    // Nothing of the slices is written before this part decoded too.
    ADACOMP_RETURN_IF_ERROR(GatherAverage(all_, gather_message_, averaged, result, throttle,
                                          /*hook=*/by_slices_.empty()));
  }
  if (!by_slices_.empty()) slices_->Commit(offsets_, averaged);
  result->reduce_scatter.assign(n_tensors, 0);
  for (size_t k : by_slices_) result->reduce_scatter[k] = 1;
  if (chooser_) {
    Hold hold(throttle);
    const auto t3 = Clock::now();
    for (size_t k = 0; k < n_tensors; ++k) {
      chooser_->Observe(k, result->reduce_scatter[k] != 0, result->wire_bytes[k],
                        averaged.subspan(offsets_[k], static_cast<size_t>(tensors_[k].elements)));
    }
    result->decompress_seconds += Since(t3);
  }
  return Status::OK();
}

Status GradientExchange::Impl::GatherAverage(std::span<const size_t> which,
                                             std::vector<uint8_t>& message,
                                             std::span<float> averaged, ExchangeResult* result,
                                             ExchangeThrottle* throttle, bool hook) {
  const int p = comm_.size();
  if (hook && send_hook_) send_hook_(message);
  const auto t1 = Clock::now();
  ADACOMP_RETURN_IF_ERROR(comm_.AllGatherV(message, &gathered_));
  result->communicate_seconds += Since(t1);
  Hold hold(throttle);
  const auto t2 = Clock::now();
  if (gathered_.ranks() != static_cast<size_t>(p)) {
    return Status::Internal("all-gather returned " + std::to_string(gathered_.ranks()) +
                            " messages for " + std::to_string(p) + " learners");
  }
  message_spans_.resize(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) message_spans_[r] = gathered_.rank(static_cast<size_t>(r));
  message_tensors_.resize(which.size());
  for (size_t i = 0; i < which.size(); ++i) {
    const size_t k = which[i];
    message_tensors_[i] = {
        static_cast<uint32_t>(k),
        averaged.subspan(offsets_[k], static_cast<size_t>(tensors_[k].elements))};
  }
  infos_.resize(which.size() * static_cast<size_t>(p));
  MessageError where;
  const Status st = DecodeAverageMessages(message_spans_, message_tensors_, infos_, {}, &where);
  if (!st.ok()) {
    if (where.tensor < which.size()) {
      const size_t k = which[where.tensor];
      return st.WithContext("learner " + std::to_string(where.message) + "'s frame for tensor " +
                            std::to_string(k) + " (" + tensors_[k].name + ")");
    }
    return Status(st.code(), "learner " + std::to_string(where.message) + "'s " + st.message());
  }
  for (size_t i = 0; i < which.size(); ++i) {
    for (int r = 0; r < p; ++r) {
      const FrameInfo& info = infos_[i * static_cast<size_t>(p) + static_cast<size_t>(r)];
      result->wire_bytes[which[i]] += info.frame_bytes;
      result->selected[which[i]] += info.selected;
    }
  }
  result->decompress_seconds += Since(t2);
  return Status::OK();
}

void GradientExchange::Impl::CountTraffic(const CommTraffic& before, ExchangeResult* result) const {
  const CommTraffic after = comm_.traffic();
  result->transport_sent_bytes = after.sent_bytes - before.sent_bytes;
  result->transport_received_bytes = after.received_bytes - before.received_bytes;
}

}  // namespace adacomp
