// src/exchange/byte_simulation.h: what each of P learners would send and
// receive in one GradientExchange::Step of one tensor, by every exchange,
// counted exactly as Communicator::traffic() counts it, without P threads
// or P buffers: the learners' frames are made one at a time, cut into
// pieces with the exchange's own CutFrame, and summed in rank order with
// DecodeAccumulate; the owners' messages are sized with EncodeSummedSlice;
// auto's choice is ExchangeChooser's on the same step's figures (the
// stationary case: the previous step's figures equal this one's). Memory:
// the tensor's sum and O(P) counters. For `adacomp bench exchange-bytes`
// and docs/scaling.md's exact byte counts to P = 1024.
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/status.h"

namespace adacomp::exchange_internal {

// One learner's bytes in one step, each way.
struct LearnerBytes {
  uint64_t sent = 0, received = 0;
};

struct SimulatedStep {
  int learners = 0;
  uint64_t elements = 0;
  // Per rank, the whole step (the finiteness agreement and every
  // collective's headers included).
  std::vector<LearnerBytes> allgather, reduce_scatter, auto_exchange, ring_fp32, ring_fp16;
  bool auto_reduce_scatter = false;  // auto's choice
  uint64_t frame_bytes = 0;          // all learners' frames
  uint64_t selected = 0;             // all learners' selected elements
  uint64_t piece_bytes = 0;          // all learners' pieces
  uint64_t summed_slice_bytes = 0;   // all owners' averaged-slice frames
  uint64_t summed_nonzeros = 0;      // non-zero elements of the sum
};

// make_frame(r, &frame): learner r's frame of the tensor (tensor id 0,
// `elements` elements), appended to an empty vector.
// summed: the reduce-scatter's averaged-slice values (ExchangeOptions).
Status SimulateStep(int learners, uint64_t elements,
                    const std::function<Status(int, std::vector<uint8_t>*)>& make_frame,
                    SimulatedStep* out, ValueMode summed = ValueMode::kFp32);

}  // namespace adacomp::exchange_internal
