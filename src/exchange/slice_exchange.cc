// The reduce-scatter exchange (see slice_exchange.h).
#include "exchange/slice_exchange.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "comm/ring.h"
#include "core/endian.h"
#include "core/half.h"
#include "wire/frame.h"

namespace adacomp::exchange_internal {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

using comm_internal::RingChunk;

std::string TensorName(const std::vector<ExchangeTensor>& tensors, size_t k) {
  return "tensor " + std::to_string(k) + " (" + tensors[k].name + ")";
}

}  // namespace

Status SliceExchange::Run(Communicator& comm, const std::vector<ExchangeTensor>& tensors,
                          std::span<const size_t> offsets,
                          std::span<const std::span<const uint8_t>> frames,
                          std::span<const size_t> which, size_t total_elements,
                          ExchangeResult* result, ExchangeThrottle* throttle,
                          const std::function<void(std::vector<uint8_t>&)>& send_hook) {
  const int p = comm.size();
  const int me = comm.rank();
  which_.assign(which.begin(), which.end());
  sizes_.clear();
  for (size_t k : which) sizes_.push_back(tensors[k].elements);
  {
    ThrottleHold hold(throttle);
    const auto t0 = Clock::now();
    pieces_.resize(static_cast<size_t>(p));
    for (auto& piece : pieces_) piece.clear();
    for (size_t k : which) {
      Status st = CutFrame(frames[k], p, &pieces_);
      if (!st.ok()) return st.WithContext("cutting the frame of " + TensorName(tensors, k));
    }
    send_.clear();
    send_offsets_.assign(1, 0);
    for (const auto& piece : pieces_) {
      send_.insert(send_.end(), piece.begin(), piece.end());
      send_offsets_.push_back(send_.size());
    }
    result->compress_seconds += Since(t0);
  }
  if (send_hook) {
    send_hook(send_);
    for (size_t& o : send_offsets_) o = std::min(o, send_.size());
    send_offsets_.back() = send_.size();
  }
  auto t1 = Clock::now();
  ADACOMP_RETURN_IF_ERROR(comm.AllToAllV(send_, send_offsets_, &received_));
  result->communicate_seconds += Since(t1);

  // The given slices (rank r's) of every tensor as decode destinations in
  // scratch_, in tensor order.
  auto slices_of = [&](int r) {
    message_tensors_.clear();
    tensor_of_.clear();
    for (size_t k : which) {
      const comm_internal::Chunk c = RingChunk(static_cast<size_t>(tensors[k].elements), p, r);
      if (c.size == 0) continue;
      message_tensors_.push_back({static_cast<uint32_t>(k), std::span<float>(scratch_).subspan(
                                                                offsets[k] + c.begin, c.size)});
      tensor_of_.push_back(k);
    }
  };
  // Every path below reaches the all-gather: the other learners wait in it.
  Status summed = Status::OK();
  {
    ThrottleHold hold(throttle);
    const auto t2 = Clock::now();
    scratch_.resize(total_elements);  // every slice of `which` is written below
    slices_of(me);
    mine_.clear();
    if (received_.ranks() != static_cast<size_t>(p)) {
      summed = Status::Internal("all-to-all returned " + std::to_string(received_.ranks()) +
                                " piece messages for " + std::to_string(p) + " learners");
    } else if (!message_tensors_.empty()) {
      spans_.resize(static_cast<size_t>(p));
      for (int r = 0; r < p; ++r) spans_[r] = received_.rank(static_cast<size_t>(r));
      infos_.resize(message_tensors_.size() * static_cast<size_t>(p));
      MessageError where;
      summed = DecodeAverageMessages(spans_, message_tensors_, infos_, {}, &where);
      if (!summed.ok()) {
        summed =
            where.tensor < tensor_of_.size()
                ? summed.WithContext("learner " + std::to_string(where.message) + "'s piece of " +
                                     TensorName(tensors, tensor_of_[where.tensor]))
                : Status(summed.code(), "learner " + std::to_string(where.message) +
                                            "'s pieces: " + summed.message());
      }
    }
    if (summed.ok()) {
      StartSlicesMessage(&mine_);
      for (size_t i = 0; i < message_tensors_.size(); ++i) {
        SliceStats stats;
        for (int r = 0; r < p; ++r) {
          stats.bytes += infos_[i * static_cast<size_t>(p) + static_cast<size_t>(r)].frame_bytes;
          stats.selected += infos_[i * static_cast<size_t>(p) + static_cast<size_t>(r)].selected;
        }
        PutSliceStats(stats, &mine_);
      }
      for (const MessageTensor& t : message_tensors_) {
        summed = EncodeSummedSlice(t.tensor_id, t.dst, &mine_, summed_);
        if (!summed.ok()) break;  // a sum overflowed to Inf (float16: past its range)
      }
    }
    if (!summed.ok()) SlicesFailedMessage(summed, &mine_);
    result->decompress_seconds += Since(t2);
  }
  // Sent even after a failure, so that every learner learns of it.
  t1 = Clock::now();
  const Status gathered = comm.AllGatherV(mine_, &slices_);
  result->communicate_seconds += Since(t1);
  ADACOMP_RETURN_IF_ERROR(summed.WithContext("summing slice " + std::to_string(me)));
  ADACOMP_RETURN_IF_ERROR(gathered);

  ThrottleHold hold(throttle);
  const auto t3 = Clock::now();
  if (slices_.ranks() != static_cast<size_t>(p)) {
    return Status::Internal("all-gather returned " + std::to_string(slices_.ranks()) +
                            " slice messages for " + std::to_string(p) + " learners");
  }
  // Every owner's message checked and decoded into scratch_ first.
  for (int r = 0; r < p; ++r) {
    slices_of(r);
    stats_.resize(message_tensors_.size());
    // Its own slices are in scratch_ already, unless rounded on the wire.
    const bool decode = r != me || summed_ == ValueMode::kFp16;
    size_t bad = 0;
    const Status st = ReadSlicesMessage(slices_.rank(static_cast<size_t>(r)), message_tensors_,
                                        stats_, decode, &bad);
    if (!st.ok()) {
      const std::string who = "learner " + std::to_string(r) + "'s summed slices";
      return st.WithContext(bad < tensor_of_.size()
                                ? who + ", the slice of " + TensorName(tensors, tensor_of_[bad])
                                : who);
    }
    for (size_t i = 0; i < tensor_of_.size(); ++i) {
      result->wire_bytes[tensor_of_[i]] += stats_[i].bytes;
      result->selected[tensor_of_[i]] += stats_[i].selected;
    }
  }
  result->decompress_seconds += Since(t3);
  return Status::OK();
}

void SliceExchange::Commit(std::span<const size_t> offsets, std::span<float> averaged) const {
  for (size_t i = 0; i < which_.size(); ++i) {
    const size_t at = offsets[which_[i]];
    if (sizes_[i] > 0) std::memcpy(averaged.data() + at, scratch_.data() + at, sizes_[i] * 4);
  }
}

}  // namespace adacomp::exchange_internal
