// adacomp/exchange.h: one training step's gradient exchange between the
// learners of a group, the layer between a trainer and the Communicator.
//
// A GradientExchange belongs to ONE learner: it owns that learner's
// compressors (one per tensor, with their residues) and borrows its
// Communicator, which must outlive it. Step() runs on every learner of the
// group with the same tensors in the same order: the learners agree that
// every gradient is finite, compress, exchange the frames and return the
// same average on every learner (src/exchange/exchange.cc tells how).
// Gradients and the output are float spans: no framework types.
// Thread safety: one object is used by its learner's thread only; the
// learners of a group run Step() concurrently, each on its own object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/communicator.h"
#include "adacomp/speed_choice.h"
#include "adacomp/status.h"

namespace adacomp {
namespace exchange_internal {
struct Access;  // the library's own tests and test hooks (src/exchange)
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
  // The `auto` codec: each step goes either by the tensors' codecs or as
  // the dense float32 all-reduce of each learner's gradient plus residue
  // (the residues then empty, so nothing is lost at a switch and the codec
  // restarts from empty residues), whichever this run's measured step times
  // say is faster. Every learner sends its last step's time in the step's
  // agreement and all decide from the same figures (the fastest learner's:
  // it waited least), so replicas stay identical. Needs a codec with a
  // residue on every tensor (adacomp, topk, threshold, onebit).
  bool auto_dense = false;
  SpeedChoiceOptions speed{};
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
  // auto_dense: the mode this step went by and, when it settled a choice,
  // why (the two median step times compared; the same on every learner).
  // Without auto_dense: kDense for an all-reduce, kCodec otherwise.
  StepMode mode = StepMode::kCodec;
  std::string speed_note;
  // Wall time of the phases on this learner.
  double compress_seconds = 0, communicate_seconds = 0, decompress_seconds = 0;

  bool skipped() const { return !non_finite.empty(); }
};

class GradientExchange {
 public:
  ~GradientExchange();
  // Neither copied nor moved: Create hands it out behind a unique_ptr.
  GradientExchange(const GradientExchange&) = delete;
  GradientExchange& operator=(const GradientExchange&) = delete;

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

  size_t tensors() const;
  const ExchangeTensor& tensor(size_t k) const;
  size_t offset(size_t k) const;
  size_t total_elements() const;
  // True when every tensor is dense: the exchange is an all-reduce and
  // there are no compressors.
  bool all_reduce() const;
  // True when the all-reduce carries binary16 values (dense, values fp16).
  bool all_reduce_half() const;
  ExchangeKind kind() const;
  // The compressors (one per tensor; none on the all-reduce path), for
  // saving and restoring their state. With auto_dense the non-const one
  // notes that tensor k's residue may have changed, so the next dense step
  // sends it along.
  size_t compressors() const;
  Compressor& compressor(size_t k);
  const Compressor& compressor(size_t k) const;
  // This learner's frame of tensor k from the last Step that compressed
  // (valid until the next Step); empty when that step sent dense values
  // (the all-reduce path, an auto dense step) or stopped before
  // compressing (a skipped step). The local optimizer masks by it.
  std::span<const uint8_t> frame(size_t k) const;
  // auto_dense: the chooser's state (which mode, the times it has seen and
  // this learner's time of the last step, which the next step's agreement
  // sends), for checkpoints; LoadSpeedState leaves it unchanged on error.
  // Without auto_dense: empty, and only empty loads.
  bool auto_dense() const;
  std::vector<uint8_t> SaveSpeedState() const;
  Status LoadSpeedState(std::span<const uint8_t> bytes);

 private:
  struct Impl;  // the settings, compressors and per-step buffers (exchange.cc)
  friend struct exchange_internal::Access;
  explicit GradientExchange(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace adacomp
