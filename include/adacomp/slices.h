// adacomp/slices.h: the two messages of the reduce-scatter exchange
// (docs/wire-format.md section 10), apart from the exchange that sends them
// (adacomp/exchange.h), for hosts that move the bytes themselves (the
// PyTorch DDP hook), and to be tested and fuzzed on their own:
//   pieces   a learner's frame of a tensor cut at the P slice boundaries
//            into frames of the same codec (CutFrame);
//   owner's  u8 0, then per non-empty slice it owns the varints of its
//   message  pieces' bytes and selected elements summed over learners, then
//            the averaged slices' frames (EncodeSummedSlice); or u8 1, a
//            status code byte and the error text when it could not sum.
// Part of adacomp_exchange (src/exchange/slice_messages.cc); plain
// functions, reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "adacomp/codec.h"
#include "adacomp/status.h"

namespace adacomp {

// Slice d of a tensor of n elements cut into p slices: the first n % p
// slices hold one element more (the ring all-reduce's chunks).
struct SliceBounds {
  uint64_t begin = 0;
  uint64_t size = 0;
};
SliceBounds SliceOf(uint64_t n, int p, int d);

// Cuts `frame` (one tensor's frame, n elements) at the boundaries of p
// slices and appends slice d's piece to (*pieces)[d]; empty slices get no
// piece. Every codec can be cut; the pieces dequantize to the frame's values.
Status CutFrame(std::span<const uint8_t> frame, int p, std::vector<std::vector<uint8_t>>* pieces);

// Appends the frame of one averaged slice. kFp32: topk with float32 values
// of its non-zero elements (by bit pattern, so -0.0 is kept), or dense,
// whichever has fewer bytes (dense on ties): exact. kFp16: an adacomp
// fp16-mode frame of the elements whose binary16 rounding is not +0 (lossy;
// OutOfRange when one overflows binary16).
Status EncodeSummedSlice(uint32_t tensor_id, std::span<const float> values,
                         std::vector<uint8_t>* out, ValueMode mode = ValueMode::kFp32);

// Bytes EncodeSummedSlice writes for the averaged slices of a tensor of
// values.size() elements cut into p slices (empty slices write nothing;
// a slice that cannot be encoded counts as dense float32).
uint64_t SummedSlicesBytes(uint32_t tensor_id, std::span<const float> values, int p,
                           ValueMode mode = ValueMode::kFp32);

// Bytes one learner of p would receive for one tensor by each exchange in a
// step like the one just seen, from figures every learner holds alike (the
// estimate of --exchange auto, src/exchange/exchange_choice.h):
//   F  the frames' bytes summed over the learners,
//   Q  the pieces' bytes summed over the learners (F plus the header of an
//      empty piece for each extra piece: P (P - 1) h),
//   S  the averaged slices' bytes (SummedSlicesBytes of the averaged values);
// wire_bytes is F after an all-gather step, Q after a reduce-scatter one
// (the other is estimated). Then
//   all-gather      F (P - 1) / P
//   reduce-scatter  Q (P - 1) / P^2 + S (P - 1) / P + 8 (P - 1)
// (8 bytes per peer: the piece length and the owner's statistics). Unless
// `exact`, S is first bounded below by its values alone (4 bytes, float16:
// 2, per non-zero average) and sized exactly only when that floor leaves the
// reduce-scatter cheaper: the same choice at a scan instead of an encoding
// of every slice, with reduce_scatter then the floor.
struct ReceiveEstimate {
  double allgather = 0;       // bytes one learner receives by the all-gather
  double reduce_scatter = 0;  // ... by the reduce-scatter
};
ReceiveEstimate EstimateReceive(uint32_t tensor_id, int p, bool by_slices, uint64_t wire_bytes,
                                std::span<const float> averaged,
                                ValueMode summed = ValueMode::kFp32, bool exact = false);

// What an owner reports of the pieces of one slice, summed over learners.
struct SliceStats {
  uint64_t bytes = 0;
  uint64_t selected = 0;
};

// An owner's message: StartSlicesMessage, one PutSliceStats per slice, then
// one EncodeSummedSlice per slice (same order). SlicesFailedMessage replaces
// *out with the failure message of `why` (not OK).
void StartSlicesMessage(std::vector<uint8_t>* out);
void PutSliceStats(const SliceStats& stats, std::vector<uint8_t>* out);
void SlicesFailedMessage(const Status& why, std::vector<uint8_t>* out);

// Reads an owner's message for its non-empty slices `slices` (the
// destinations, tensor ids as the frames must carry): the statistics into
// stats[i] (stats.size() == slices.size()), then, when `decode`, the
// averaged slices into slices[i].dst. A failure message returns its status;
// anything malformed Corruption (or the frame decoder's error), with
// *bad_slice (optional) the slice at fault, slices.size() when none is, and
// no dst written.
Status ReadSlicesMessage(std::span<const uint8_t> m, std::span<const MessageTensor> slices,
                         std::span<SliceStats> stats, bool decode, size_t* bad_slice = nullptr);

}  // namespace adacomp
