// Exact per-learner byte counts of one exchange step (see byte_simulation.h).
#include "exchange/byte_simulation.h"

#include <cstring>
#include <string>

#include "adacomp/codec.h"
#include "adacomp/exchange.h"
#include "comm/pieces.h"
#include "comm/ring.h"
#include "core/endian.h"
#include "exchange/exchange_choice.h"
#include "exchange/slice_exchange.h"

namespace adacomp::exchange_internal {
namespace {

using comm_internal::kHeaderBytes;

// The agreement (GradientExchange::Agree): a 16-byte AllGatherV.
constexpr uint64_t kAgreeBytes = 16;

uint64_t Headers(int p) { return kHeaderBytes * static_cast<uint64_t>(p - 1); }

}  // namespace

Status SimulateStep(int learners, uint64_t elements,
                    const std::function<Status(int, std::vector<uint8_t>*)>& make_frame,
                    SimulatedStep* out, ValueMode summed) {
  const int p = learners;
  if (p < 1) return Status::InvalidArgument("SimulateStep: " + std::to_string(p) + " learners");
  *out = SimulatedStep();
  out->learners = p;
  out->elements = elements;
  const size_t up = static_cast<size_t>(p);
  std::vector<uint64_t> frame(up), pieces_out(up), own_piece(up);
  std::vector<uint64_t> slice_in(up, 0), slice_selected(up, 0);  // per owner
  std::vector<float> sum(elements, 0.0f);
  std::vector<uint8_t> f;
  std::vector<std::vector<uint8_t>> pieces(up);
  for (int r = 0; r < p; ++r) {
    f.clear();
    const std::string who = "learner " + std::to_string(r) + "'s frame";
    ADACOMP_RETURN_IF_ERROR(make_frame(r, &f).WithContext(who));
    FrameInfo info;
    // In rank order, as the owners add.
    ADACOMP_RETURN_IF_ERROR(DecodeAccumulate(f, sum, &info).WithContext(who));
    frame[r] = f.size();
    out->frame_bytes += f.size();
    out->selected += info.selected;
    for (auto& piece : pieces) piece.clear();
    ADACOMP_RETURN_IF_ERROR(CutFrame(f, p, &pieces).WithContext(who));
    for (int d = 0; d < p; ++d) {
      const std::vector<uint8_t>& piece = pieces[static_cast<size_t>(d)];
      pieces_out[r] += piece.size();
      slice_in[d] += piece.size();
      if (d == r) own_piece[r] = piece.size();
      if (!piece.empty()) {
        FrameInfo pi;
        ADACOMP_RETURN_IF_ERROR(InspectFrame(piece, &pi));
        slice_selected[d] += pi.selected;
      }
    }
    out->piece_bytes += pieces_out[r];
  }
  // The average, as DecodeAverageMessages writes it.
  const float pf = static_cast<float>(p);
  for (float& v : sum) v = v / pf;
  for (float v : sum) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    out->summed_nonzeros += bits != 0;
  }
  // The owners' messages: kind byte, per non-empty slice the varints of the
  // pieces' bytes and selected elements, then the averaged slice's frame.
  std::vector<uint64_t> message(up, 1);
  std::vector<uint8_t> scratch;
  for (int d = 0; d < p; ++d) {
    const comm_internal::Chunk c = comm_internal::RingChunk(elements, p, d);
    if (c.size == 0) continue;
    scratch.clear();
    ADACOMP_RETURN_IF_ERROR(EncodeSummedSlice(
        0, std::span<const float>(sum).subspan(c.begin, c.size), &scratch, summed));
    message[d] += internal::VarintLength(slice_in[d]) + internal::VarintLength(slice_selected[d]) +
                  scratch.size();
    out->summed_slice_bytes += scratch.size();
  }
  uint64_t messages = 0;
  for (uint64_t m : message) messages += m;

  const uint64_t peers = static_cast<uint64_t>(p - 1);
  const uint64_t agree = p > 1 ? Headers(p) + kAgreeBytes * peers : 0;
  for (int r = 0; r < p; ++r) {
    LearnerBytes ag, rs, r32, r16;
    if (p > 1) {
      ag.sent = agree + Headers(p) + frame[r] * peers;
      ag.received = agree + Headers(p) + out->frame_bytes - frame[r];
      rs.sent = agree + 2 * Headers(p) +
                comm_internal::PieceTraffic(p, pieces_out[r], own_piece[r]) + message[r] * peers;
      rs.received = agree + 2 * Headers(p) +
                    comm_internal::PieceTraffic(p, slice_in[r], own_piece[r]) + messages -
                    message[r];
      const comm_internal::RingTraffic t32 = comm_internal::RingBytes(elements, p, r, 4);
      const comm_internal::RingTraffic t16 = comm_internal::RingBytes(elements, p, r, 2);
      r32 = {agree + Headers(p) + t32.sent, agree + Headers(p) + t32.received};
      r16 = {agree + Headers(p) + t16.sent, agree + Headers(p) + t16.received};
    }
    out->allgather.push_back(ag);
    out->reduce_scatter.push_back(rs);
    out->ring_fp32.push_back(r32);
    out->ring_fp16.push_back(r16);
  }
  // auto, on this step's figures: every learner's chooser sees the same.
  std::vector<ExchangeTensor> tensors(1);
  tensors[0].elements = elements;
  ExchangeChooser chooser(tensors, p, summed);
  chooser.Observe(0, false, out->frame_bytes, sum);
  out->auto_reduce_scatter = chooser.ReduceScatter(0);
  out->auto_exchange = out->auto_reduce_scatter ? out->reduce_scatter : out->allgather;
  return Status::OK();
}

}  // namespace adacomp::exchange_internal
