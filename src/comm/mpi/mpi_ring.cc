// The MPI ring all-reduce (MpiCommunicator::RingAllReduce, declared in
// mpi_communicator_impl.h): the ring of ring.h, point to point with the
// neighbours, for AllReduceSum and AllReduceSumHalf.
#include <algorithm>
#include <cstring>
#include <string>

#include "../ring.h"
#include "mpi_communicator_impl.h"

namespace adacomp::mpi_internal {

Status MpiCommunicator::RingAllReduce(int64_t kind, std::span<float> data) {
  Collective c;
  ADACOMP_RETURN_IF_ERROR(Begin(kind, static_cast<int64_t>(data.size()), 0, &c));
  const bool half = kind == kAllReduceSumHalf;
  const size_t n = data.size();
  if (size_ == 1) {
    if (half) comm_internal::RoundToHalf(data.data(), n);
    return Status::OK();
  }
  using comm_internal::Mod;
  using comm_internal::RingChunk;
  ring_work_.assign(data.begin(), data.end());
  const size_t max_chunk = RingChunk(n, size_, 0).size;
  if (half) {
    ring_send_half_.resize(max_chunk);
    ring_recv_half_.resize(max_chunk);
  } else {
    ring_recv_.resize(max_chunk);
  }
  const int next = Mod(rank_ + 1, size_);
  const int prev = Mod(rank_ - 1, size_);
  // Reduce-scatter: P - 1 hops; then this rank holds chunk rank + 1.
  for (int s = 0; s + 1 < size_; ++s) {
    const comm_internal::Chunk out = RingChunk(n, size_, Mod(rank_ - s, size_));
    const comm_internal::Chunk in = RingChunk(n, size_, Mod(rank_ - s - 1, size_));
    if (half) {
      comm_internal::ToHalf(ring_work_.data() + out.begin, ring_send_half_.data(), out.size);
      ADACOMP_RETURN_IF_ERROR(Exchange(c, ring_send_half_.data(), out.size, ring_recv_half_.data(),
                                       in.size, 2, next, prev));
      comm_internal::AddHalfPartial(ring_work_.data() + in.begin, ring_recv_half_.data(), in.size);
    } else {
      ADACOMP_RETURN_IF_ERROR(Exchange(c, ring_work_.data() + out.begin, out.size,
                                       ring_recv_.data(), in.size, 4, next, prev));
      // The partial sum is the left operand, as in the in-process fold.
      float* own = ring_work_.data() + in.begin;
      const float* partial = ring_recv_.data();
      for (size_t i = 0; i < in.size; ++i) own[i] = partial[i] + own[i];
    }
  }
  if (half) {
    const comm_internal::Chunk mine = RingChunk(n, size_, Mod(rank_ + 1, size_));
    comm_internal::RoundToHalf(ring_work_.data() + mine.begin, mine.size);
  }
  // All-gather: P - 1 hops passing the finished chunks on.
  for (int s = 0; s + 1 < size_; ++s) {
    const comm_internal::Chunk out = RingChunk(n, size_, Mod(rank_ + 1 - s, size_));
    const comm_internal::Chunk in = RingChunk(n, size_, Mod(rank_ - s, size_));
    if (half) {
      comm_internal::ToHalf(ring_work_.data() + out.begin, ring_send_half_.data(), out.size);
      ADACOMP_RETURN_IF_ERROR(Exchange(c, ring_send_half_.data(), out.size, ring_recv_half_.data(),
                                       in.size, 2, next, prev));
      comm_internal::FromHalf(ring_recv_half_.data(), ring_work_.data() + in.begin, in.size);
    } else {
      ADACOMP_RETURN_IF_ERROR(Exchange(c, ring_work_.data() + out.begin, out.size,
                                       ring_work_.data() + in.begin, in.size, 4, next, prev));
    }
  }
  if (n > 0) std::memcpy(data.data(), ring_work_.data(), n * sizeof(float));
  const comm_internal::RingTraffic t =
      comm_internal::RingBytes(n, size_, rank_, half ? 2 : sizeof(float));
  traffic_.sent_bytes += t.sent;
  traffic_.received_bytes += t.received;
  return Status::OK();
}

Status MpiCommunicator::Exchange(const Collective& c, const void* send, size_t send_count,
                                 void* recv, size_t recv_count, size_t value_bytes, int to,
                                 int from) {
  const auto* out = static_cast<const uint8_t*>(send);
  auto* in = static_cast<uint8_t*>(recv);
  size_t sent = 0;
  size_t received = 0;
  while (sent < send_count || received < recv_count) {
    MPI_Request pair[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    const size_t rn = std::min(kRingPieceValues, recv_count - received);
    const size_t sn = std::min(kRingPieceValues, send_count - sent);
    if (rn > 0) {
      ADACOMP_RETURN_IF_ERROR(Call(c, "MPI_Irecv", [&] {
        return MPI_Irecv(in + received * value_bytes, static_cast<int>(rn * value_bytes), MPI_BYTE,
                         from, kRingTag, comm_, &pair[0]);
      }));
    }
    if (sn > 0) {
      ADACOMP_RETURN_IF_ERROR(Call(c, "MPI_Isend", [&] {
        return MPI_Isend(out + sent * value_bytes, static_cast<int>(sn * value_bytes), MPI_BYTE, to,
                         kRingTag, comm_, &pair[1]);
      }));
    }
    bool timed_out = false;
    ADACOMP_RETURN_IF_ERROR(Poll(c, pair, 2, &timed_out));
    if (timed_out) {
      return Fail(Status::Unavailable(
          Where(c) + ": every rank arrived but the ring exchange with rank " +
          std::to_string(from) + " and rank " + std::to_string(to) + " did not finish within " +
          Seconds(timeout_seconds_) + " s (a peer stalled or died)"));
    }
    received += rn;
    sent += sn;
  }
  return Status::OK();
}

}  // namespace adacomp::mpi_internal
