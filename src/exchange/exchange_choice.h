// src/exchange/exchange_choice.h: how ExchangeKind::kAuto picks, per tensor
// and step, between the all-gather and the reduce-scatter.
//
// The choice is by the bytes one learner would receive for the tensor at
// this P (decode work follows the bytes: both paths decode what they
// receive), estimated from the previous step, whose figures every learner
// holds alike, so that all of them choose the same without a message:
//   F  the frames' bytes summed over the learners,
//   Q  the pieces' bytes summed over the learners (F plus a frame header
//      for each extra piece: P (P - 1) h, h the header of an empty piece),
//   S  the averaged slices' bytes summed over the owners, exactly as
//      EncodeSummedSlice would write them for the averaged values.
// A step by the all-gather gives F (Q estimated), one by the reduce-scatter
// gives Q (F estimated); both give S from the averaged output. Then
//   all-gather      F (P - 1) / P
//   reduce-scatter  Q (P - 1) / P^2 + S (P - 1) / P + 8 (P - 1)
// (8 bytes per peer: the piece length and the owner's statistics). The
// first step, and any tensor not yet seen, goes by the all-gather.
// Internal to adacomp_exchange; one object per learner, used by its thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "adacomp/exchange.h"

namespace adacomp::exchange_internal {

// Bytes of the header of an empty piece of a frame of `elements` elements
// cut into p slices (the sparse parameter block included).
uint64_t PieceHeaderBytes(uint32_t tensor_id, uint64_t elements, int p);

struct ReceiveEstimate {
  double allgather = 0;       // bytes one learner receives by the all-gather
  double reduce_scatter = 0;  // ... by the reduce-scatter
};

class ExchangeChooser {
 public:
  // exact: always size S exactly (tests). Otherwise S is first bounded
  // below by its values alone (4 bytes, float16: 2, per non-zero average),
  // and sized exactly only when that floor leaves the reduce-scatter
  // cheaper: the same choices, at a scan of the tensor instead of an
  // encoding of every slice in most steps.
  ExchangeChooser(const std::vector<ExchangeTensor>& tensors, int p,
                  ValueMode summed = ValueMode::kFp32, bool exact = false);

  // Whether tensor k goes by the reduce-scatter in the next step.
  bool ReduceScatter(size_t k) const;
  // Records a step of tensor k: how it travelled, its bytes summed over the
  // learners (ExchangeResult::wire_bytes: frames or pieces) and its
  // averaged values (the same on every learner).
  void Observe(size_t k, bool reduce_scatter, uint64_t wire_bytes, std::span<const float> averaged);
  // The last step's estimate for tensor k (zeros before the first; without
  // `exact`, reduce_scatter may be the floor when that already exceeds the
  // all-gather).
  ReceiveEstimate Estimate(size_t k) const { return estimates_[k]; }

 private:
  int p_;
  ValueMode summed_;
  bool exact_;
  std::vector<uint64_t> piece_headers_;
  std::vector<ReceiveEstimate> estimates_;
  std::vector<bool> seen_;
};

}  // namespace adacomp::exchange_internal
