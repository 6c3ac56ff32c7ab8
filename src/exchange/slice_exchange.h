// src/exchange/slice_exchange.h: the reduce-scatter exchange of sparse
// frames (ExchangeKind::kReduceScatter; docs/wire-format.md section 7).
//
// Every tensor of n elements is cut into P slices (comm_internal::RingChunk:
// the first n % P one element longer); learner r owns slice r of every
// tensor. One step:
//   cut      each learner cuts its frame of every tensor at the slice
//            boundaries into pieces: frames of the same codec and settings
//            whose elements are the slice's (indices relative to its start),
//            and sends slice r's pieces to learner r (AllToAllV);
//   sum      the owner decodes the P pieces of its slices and averages them
//            (DecodeAverageMessages: added in rank order into zero, divided
//            by P), the same additions per element as the all-gather path;
//   gather   the owner encodes each averaged slice as a topk frame of its
//            non-zero elements (float32 values) or a dense frame, whichever
//            is smaller, and the slices are all-gathered (AllGatherV); every
//            learner decodes them into `averaged`.
// The result is bit for bit what the all-gather path gives. Nothing is
// written to `averaged` until every slice decoded; a piece that fails to
// decode makes its owner send an error message instead of its slices, so
// that every learner returns the error.
// Internal to adacomp_exchange; one object per learner, used by its thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/communicator.h"
#include "adacomp/exchange.h"
#include "adacomp/slices.h"
#include "adacomp/status.h"

namespace adacomp::exchange_internal {

using ThrottleHold = ExchangeThrottleHold;

class SliceExchange {
 public:
  // frames[k]: this learner's frame of tensor k (tensor id k); `which`: the
  // tensors to carry, increasing. Averages them into this object (nothing
  // is written to the caller's buffers: Commit does that), and adds to
  // *result the pieces' bytes and selected elements per tensor summed over
  // learners. send_hook (tests) may damage the pieces just before they are
  // sent; a changed length moves the end of the last ones.
  // summed: the averaged slices' values on the wire (kFp32 or kFp16; with
  // kFp16 every learner, the owner too, takes the rounded values).
  explicit SliceExchange(ValueMode summed = ValueMode::kFp32) : summed_(summed) {}
  Status Run(Communicator& comm, const std::vector<ExchangeTensor>& tensors,
             std::span<const size_t> offsets, std::span<const std::span<const uint8_t>> frames,
             std::span<const size_t> which, size_t total_elements, ExchangeResult* result,
             ExchangeThrottle* throttle,
             const std::function<void(std::vector<uint8_t>&)>& send_hook = {});
  // After a Run that succeeded: writes the averaged tensors it carried into
  // `averaged` (tensor k at offsets[k]), the other tensors untouched.
  void Commit(std::span<const size_t> offsets, std::span<float> averaged) const;

 private:
  ValueMode summed_;
  std::vector<std::vector<uint8_t>> pieces_;
  std::vector<uint8_t> send_;
  std::vector<size_t> send_offsets_;
  GatheredBuffers received_;
  GatheredBuffers slices_;
  std::vector<float> scratch_;
  std::vector<uint8_t> mine_;
  std::vector<std::span<const uint8_t>> spans_;
  std::vector<MessageTensor> message_tensors_;
  std::vector<size_t> tensor_of_;  // message tensor index -> tensor
  std::vector<size_t> which_;      // the last Run's tensors
  std::vector<uint64_t> sizes_;    // and their elements
  std::vector<FrameInfo> infos_;
  std::vector<SliceStats> stats_;
};

}  // namespace adacomp::exchange_internal
