// adacomp/exchange.h: one training step's gradient exchange, the layer
// between the trainer and the Communicator (docs/algorithm.md section 3).
//
// A GradientExchange belongs to ONE learner and owns that learner's
// compressors (one per tensor, with their residues). Step() runs on every
// learner of the communicator's group with the same tensors, in the same
// order:
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
//
// No framework types: gradients and the output are float spans, so the
// LibTorch trainer, tests and other hosts share this code.
// Thread safety: one object is used by its learner's thread only; the
// learners of a group run Step() concurrently, each on its own object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/communicator.h"
#include "adacomp/status.h"

namespace adacomp {
namespace exchange_internal {
class SliceExchange;
class ExchangeChooser;
}  // namespace exchange_internal

// One tensor the exchange carries. Its tensor id on the wire is its index.
struct ExchangeTensor {
  std::string name;       // for error messages ("conv1.weight")
  uint64_t elements = 0;  // the tensor's size, in floats
  CodecConfig codec;      // this learner's compressor settings for it
};

// Lets several learners that share cores take turns in the CPU-bound
// phases (compress, decompress); never held across a collective. Optional.
class ExchangeThrottle {
 public:
  virtual ~ExchangeThrottle() = default;
  virtual void Acquire() = 0;
  virtual void Release() = 0;
};

// Holds a throttle (if any: null holds nothing) for a scope.
class ExchangeThrottleHold {
 public:
  explicit ExchangeThrottleHold(ExchangeThrottle* t) : t_(t) {
    if (t_) t_->Acquire();
  }
  ~ExchangeThrottleHold() {
    if (t_) t_->Release();
  }
  ExchangeThrottleHold(const ExchangeThrottleHold&) = delete;
  ExchangeThrottleHold& operator=(const ExchangeThrottleHold&) = delete;

 private:
  ExchangeThrottle* t_;
};

// How the frames of a step travel (the all-reduce path of all-dense
// tensors is the same for both).
enum class ExchangeKind {
  kAllGather,      // every learner receives every frame and decodes all of them
  kReduceScatter,  // pieces to slice owners, averaged slices all-gathered
  kAuto,           // per tensor and step, whichever the previous step says
                   // receives fewer bytes (src/exchange/exchange_choice.h)
};
// "allgather", "reduce-scatter", "auto"
std::string_view ExchangeKindName(ExchangeKind kind);
Result<ExchangeKind> ParseExchangeKind(std::string_view name);

struct ExchangeOptions {
  ExchangeKind kind = ExchangeKind::kAllGather;
  // The reduce-scatter's averaged slices on the wire: kFp32 (exact, the
  // all-gather's bits) or kFp16 (binary16 values, about half the bytes once
  // the sums are dense; every learner takes the rounded values, so replicas
  // stay identical, but they differ from the all-gather's).
  ValueMode summed_values = ValueMode::kFp32;
};

// What one Step() did, the same on every learner of the group.
struct ExchangeResult {
  // Each learner's side value, in rank order (e.g. its loss).
  std::vector<double> values;
  // (rank, first non-finite tensor) of every learner whose gradient was not
  // finite; not empty means the step was skipped: nothing was compressed or
  // written.
  std::vector<std::pair<int, int32_t>> non_finite;
  // Per tensor, summed over the learners (left empty on a skipped step):
  // bytes sent (whole frames; 4 x elements on the all-reduce path, 2 x for
  // fp16; reduce-scatter: the pieces, the averaged slices not included),
  // and elements sent with a value.
  std::vector<uint64_t> wire_bytes;
  std::vector<uint64_t> selected;
  // Per tensor, 1 when it went by the reduce-scatter (empty: none did).
  std::vector<uint8_t> reduce_scatter;
  // What this learner's communicator sent and received during the step
  // (every collective of it, the agreement included; Communicator::traffic()),
  // skipped steps too: the bytes on the wire, without TCP/IP framing.
  uint64_t transport_sent_bytes = 0, transport_received_bytes = 0;
  // Wall time of the phases on this learner.
  double compress_seconds = 0, communicate_seconds = 0, decompress_seconds = 0;

  bool skipped() const { return !non_finite.empty(); }
};

class GradientExchange {
 public:
  ~GradientExchange();
  // An exchange for this learner (comm's rank) over `tensors`. Fails on a
  // codec config that Compressor::Create refuses.
  static Result<std::unique_ptr<GradientExchange>> Create(Communicator& comm,
                                                          std::vector<ExchangeTensor> tensors,
                                                          ExchangeOptions options = {});

  // One step. grads[k] is this learner's gradient of tensor k (size
  // elements); `value` is shared with the others (ExchangeResult::values).
  // On success, unless the step was skipped, `averaged` (total_elements()
  // floats, tensor k at offset(k)) holds the average over the learners.
  // Errors of a peer or of the communicator, and frames that do not decode
  // (naming the learner and tensor), are returned on every learner that
  // sees them; a failed decode leaves `averaged` untouched.
  Status Step(std::span<const std::span<const float>> grads, double value,
              std::span<float> averaged, ExchangeResult* result,
              ExchangeThrottle* throttle = nullptr);

  size_t tensors() const { return tensors_.size(); }
  const ExchangeTensor& tensor(size_t k) const { return tensors_[k]; }
  size_t offset(size_t k) const { return offsets_[k]; }
  size_t total_elements() const { return total_elements_; }
  // True when every tensor is dense: the exchange is an all-reduce and
  // there are no compressors.
  bool all_reduce() const { return all_reduce_; }
  // True when the all-reduce carries binary16 values (dense, values fp16).
  bool all_reduce_half() const { return half_; }
  ExchangeKind kind() const { return options_.kind; }
  // The compressors (one per tensor; none on the all-reduce path), for
  // saving and restoring their state.
  size_t compressors() const { return compressors_.size(); }
  Compressor& compressor(size_t k) { return *compressors_[k]; }
  const Compressor& compressor(size_t k) const { return *compressors_[k]; }

  // For failure tests: called with this learner's message just before it is
  // sent, so a test can damage it in transit.
  void SetSendHook(std::function<void(std::vector<uint8_t>&)> hook) {
    send_hook_ = std::move(hook);
  }

 private:
  GradientExchange(Communicator& comm, std::vector<ExchangeTensor> tensors,
                   ExchangeOptions options);
  Status Agree(std::span<const std::span<const float>> grads, double value, ExchangeResult* result,
               ExchangeThrottle* throttle);
  // The all-gather of `message` (this learner's frames of the tensors
  // `which`) and the average of those tensors into `averaged`. `hook`:
  // whether the send hook sees this message.
  Status GatherAverage(std::span<const size_t> which, std::vector<uint8_t>& message,
                       std::span<float> averaged, ExchangeResult* result,
                       ExchangeThrottle* throttle, bool hook = true);
  void CountTraffic(const CommTraffic& before, ExchangeResult* result) const;

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
  std::function<void(std::vector<uint8_t>&)> send_hook_;
};

}  // namespace adacomp
