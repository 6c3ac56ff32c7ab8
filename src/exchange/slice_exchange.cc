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

// The first byte of an owner's message.
constexpr uint8_t kSlicesOk = 0;
constexpr uint8_t kSlicesFailed = 1;

void PutVarint(uint64_t v, std::vector<uint8_t>* out) {
  uint8_t b[10];
  const int n = internal::StoreVarint(b, v);
  out->insert(out->end(), b, b + n);
}

// Reads a shortest-form varint at *at; false when truncated or not shortest.
bool GetVarint(std::span<const uint8_t> in, size_t* at, uint64_t* v) {
  *v = 0;
  for (int i = 0; i < 10 && *at < in.size(); ++i) {
    const uint8_t b = in[(*at)++];
    if (i == 9 && b > 1) return false;
    *v |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
    if (!(b & 0x80)) return b != 0 || i == 0;
  }
  return false;
}

std::string TensorName(const std::vector<ExchangeTensor>& tensors, size_t k) {
  return "tensor " + std::to_string(k) + " (" + tensors[k].name + ")";
}

}  // namespace

Status CutFrame(std::span<const uint8_t> frame, int p, std::vector<std::vector<uint8_t>>* pieces) {
  wire::Frame f;
  ADACOMP_RETURN_IF_ERROR(wire::DecodeFrame(frame, DecodeOptions{}, &f));
  const bool sparse = wire::IsSparse(f.codec);
  for (int d = 0; d < p; ++d) {
    const comm_internal::Chunk c = RingChunk(static_cast<size_t>(f.elements), p, d);
    if (c.size == 0) continue;
    wire::Frame g;
    g.codec = f.codec;
    g.tensor_id = f.tensor_id;
    g.elements = c.size;
    g.params = f.params;
    if (sparse) {
      const auto lo = std::lower_bound(f.indices.begin(), f.indices.end(), c.begin);
      const auto hi = std::lower_bound(lo, f.indices.end(), c.begin + c.size);
      const size_t first = static_cast<size_t>(lo - f.indices.begin());
      const size_t count = static_cast<size_t>(hi - lo);
      g.indices.reserve(count);
      for (auto it = lo; it != hi; ++it) g.indices.push_back(*it - static_cast<uint32_t>(c.begin));
      auto part = [&](const auto& all, auto* into) {
        if (!all.empty()) into->assign(all.begin() + first, all.begin() + first + count);
      };
      part(f.negative, &g.negative);
      part(f.values, &g.values);
      part(f.half_values, &g.half_values);
      g.params.selected = count;
      g.params.code = wire::ChooseIndexCode(g.indices);
    } else if (f.codec == Codec::kDense) {
      g.values.assign(f.values.begin() + c.begin, f.values.begin() + c.begin + c.size);
    } else {
      g.symbols.assign(f.symbols.begin() + c.begin, f.symbols.begin() + c.begin + c.size);
    }
    ADACOMP_RETURN_IF_ERROR(wire::EncodeFrame(g, &(*pieces)[d]));
  }
  return Status::OK();
}

Status EncodeSummedSlice(uint32_t tensor_id, std::span<const float> values,
                         std::vector<uint8_t>* out, ValueMode mode) {
  wire::Frame f;
  f.tensor_id = tensor_id;
  f.elements = values.size();
  if (mode == ValueMode::kFp16) {
    // An adacomp fp16-mode frame: every element whose binary16 rounding has
    // non-zero bits, with that value (dense slices cost 2 bytes and about
    // a bit of index code per element).
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = internal::FloatToHalf(values[i]);
      if (!internal::HalfIsFinite(h)) {
        return Status::OutOfRange("an averaged value (" + std::to_string(values[i]) +
                                  ") overflows float16");
      }
      if (h == 0) continue;
      f.indices.push_back(static_cast<uint32_t>(i));
      f.half_values.push_back(h);
    }
    f.codec = Codec::kAdaComp;
    f.params.values = ValueMode::kFp16;
    f.params.bin_size = 1;
    f.params.selected = f.indices.size();
    f.params.code = wire::ChooseIndexCode(f.indices);
    return wire::EncodeFrame(f, out);
  }
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    if (bits != 0) f.indices.push_back(static_cast<uint32_t>(i));
  }
  uint64_t code_bits = 0;
  const wire::IndexCode code = wire::ChooseIndexCode(f.indices, &code_bits);
  const size_t sparse_payload = wire::SparsePayloadBytes(f.indices.size(), code_bits, false, 4);
  // The topk parameter block (index code, selected) is a few bytes longer
  // than dense's empty one.
  const size_t sparse_extra = 1 + static_cast<size_t>(internal::VarintLength(f.indices.size()));
  if (sparse_payload + sparse_extra < 4 * values.size()) {
    f.codec = Codec::kTopK;
    f.params.code = code;
    f.params.selected = f.indices.size();
    f.values.reserve(f.indices.size());
    for (uint32_t i : f.indices) f.values.push_back(values[i]);
  } else {
    f.codec = Codec::kDense;
    f.indices.clear();
    f.values.assign(values.begin(), values.end());
  }
  return wire::EncodeFrame(f, out);
}

Status SliceExchange::Run(Communicator& comm, const std::vector<ExchangeTensor>& tensors,
                          std::span<const size_t> offsets,
                          std::span<const std::span<const uint8_t>> frames,
                          std::span<const size_t> which, size_t total_elements,
                          ExchangeResult* result,
                          ExchangeThrottle* throttle,
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
      mine_.push_back(kSlicesOk);
      for (size_t i = 0; i < message_tensors_.size(); ++i) {
        uint64_t bytes = 0, selected = 0;
        for (int r = 0; r < p; ++r) {
          bytes += infos_[i * static_cast<size_t>(p) + static_cast<size_t>(r)].frame_bytes;
          selected += infos_[i * static_cast<size_t>(p) + static_cast<size_t>(r)].selected;
        }
        PutVarint(bytes, &mine_);
        PutVarint(selected, &mine_);
      }
      for (const MessageTensor& t : message_tensors_) {
        summed = EncodeSummedSlice(t.tensor_id, t.dst, &mine_, summed_);
        if (!summed.ok()) break;  // a sum overflowed to Inf (float16: past its range)
      }
    }
    if (!summed.ok()) {
      mine_.assign({kSlicesFailed, static_cast<uint8_t>(summed.code())});
      const std::string& text = summed.message();
      mine_.insert(mine_.end(), text.begin(), text.end());
    }
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
    const std::span<const uint8_t> m = slices_.rank(static_cast<size_t>(r));
    const std::string who = "learner " + std::to_string(r) + "'s summed slices";
    if (m.empty()) return Status::Corruption(who + ": empty message");
    if (m[0] == kSlicesFailed) {
      if (m.size() < 2 || m[1] == 0 || m[1] > static_cast<uint8_t>(StatusCode::kInternal)) {
        return Status::Corruption(who + ": a failure without a valid status code");
      }
      return Status(static_cast<StatusCode>(m[1]),
                    who + ": it could not sum them: " +
                        std::string(reinterpret_cast<const char*>(m.data()) + 2, m.size() - 2));
    }
    if (m[0] != kSlicesOk) {
      return Status::Corruption(who + ": unknown message kind " + std::to_string(m[0]));
    }
    slices_of(r);
    size_t at = 1;
    for (size_t i = 0; i < tensor_of_.size(); ++i) {
      uint64_t bytes = 0, selected = 0;
      if (!GetVarint(m, &at, &bytes) || !GetVarint(m, &at, &selected)) {
        return Status::Corruption(who + ": byte " + std::to_string(at) +
                                  ": bad piece statistics of " +
                                  TensorName(tensors, tensor_of_[i]));
      }
      result->wire_bytes[tensor_of_[i]] += bytes;
      result->selected[tensor_of_[i]] += selected;
    }
    if (tensor_of_.empty() && at != m.size()) {
      return Status::Corruption(who + ": " + std::to_string(m.size() - at) +
                                " bytes after the last slice");
    }
    // Its own slices are in scratch_ already, unless rounded on the wire.
    if ((r == me && summed_ != ValueMode::kFp16) || tensor_of_.empty()) continue;
    const std::span<const uint8_t> frames_part = m.subspan(at);
    MessageError where;
    const Status st = DecodeAverageMessages({&frames_part, 1}, message_tensors_, {}, {}, &where);
    if (!st.ok()) {
      if (where.tensor < tensor_of_.size()) {
        return st.WithContext(who + ", the slice of " +
                              TensorName(tensors, tensor_of_[where.tensor]));
      }
      return Status(st.code(), who + ": " + st.message());
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
