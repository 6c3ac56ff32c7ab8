// The public decode API of include/adacomp/codec.h: InspectFrame,
// DecodeAccumulate, and the multi-frame DecodeAccumulateAll /
// DecodeAverageAll (validate every frame, then add block by block on
// threads).
#include <algorithm>
#include <bit>
#include <memory>
#include <string>
#include <vector>

#include "adacomp/codec.h"
#include "core/parallel.h"
#include "core/simd.h"
#include "wire/fast_reader.h"
#include "wire/format.h"
#include "wire/payload_walker.h"

namespace adacomp {

namespace {

FrameInfo MakeInfo(const wire::Header& h, const wire::Params& p, uint64_t nonzero_trits) {
  FrameInfo fi;
  fi.version = h.version;
  fi.codec = h.codec;
  fi.tensor_id = h.tensor_id;
  fi.elements = h.elements;
  fi.params_bytes = h.params_bytes;
  fi.payload_bytes = h.payload_bytes;
  fi.frame_bytes = h.frame_bytes;
  fi.crc32c = h.crc32c;
  switch (h.codec) {
    case Codec::kDense:
    case Codec::kOneBit:
      fi.selected = h.elements;
      break;
    case Codec::kTernGrad:
      fi.selected = nonzero_trits;
      break;
    default:
      fi.selected = p.selected;
      break;
  }
  fi.bin_size = p.bin_size;
  fi.values = p.values;
  fi.scale = p.scale;
  fi.scale2 = p.scale2;
  return fi;
}

}  // namespace

Status InspectFrame(std::span<const uint8_t> bytes, FrameInfo* info, const DecodeOptions& options) {
  wire::Header h;
  wire::Params p;
  ADACOMP_RETURN_IF_ERROR(wire::ParseFrame(bytes, options, &h, &p));
  wire::CountSink check;
  ADACOMP_RETURN_IF_ERROR(wire::WalkPayload(bytes, h, p, check));
  *info = MakeInfo(h, p, check.nonzero);
  return Status::OK();
}

namespace {

// A frame validated completely and ready to be added into a destination:
// sparse frames are decoded into (index, value) entries, or for +-scale
// values into indices with the sign in bit 31 (half the bytes); dense and onebit
// frames are added straight from their payload; anything else (terngrad, or
// a frame the vector checks did not accept) is decoded by the general walker,
// into `floats` or, on the single-frame path, directly into the destination.
struct Ready {
  enum class Kind { kEntries, kSignedIndices, kFloatBytes, kSignBits, kFloats, kDone };
  Kind kind = Kind::kDone;
  const wire::Entry* entries = nullptr;      // kEntries, increasing indices
  const uint32_t* signed_indices = nullptr;  // kSignedIndices, increasing indices
  size_t count = 0;                          // kEntries, kSignedIndices
  uint32_t scale_bits = 0;                   // kSignedIndices: the value's bits less the sign
  const uint8_t* payload = nullptr;          // kFloatBytes, kSignBits
  const float* floats = nullptr;             // kFloats
  float pos = 0.0f, neg = 0.0f;              // kSignBits
  FrameInfo info;
};

// Room for a frame's entries, grown geometrically and never initialized: the
// readers write every entry they report, so a pass of zeros over it (as
// std::vector::resize makes) would be wasted, and on growth it faulted in
// fresh pages twice over.
template <class T>
class EntryBuffer {
 public:
  T* Reserve(size_t n) {
    if (n > capacity_) {
      capacity_ = std::max(n, capacity_ + capacity_ / 2);
      data_ = std::make_unique_for_overwrite<T[]>(capacity_);
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

// Per-frame scratch, kept per calling thread so that steady-state decoding
// does not allocate.
struct Slot {
  EntryBuffer<wire::Entry> entries;
  EntryBuffer<uint32_t> signed_indices;
  std::vector<float> floats;
};

// The index of a kSignedIndices entry.
constexpr uint32_t kIndexBits = 0x7FFFFFFFu;

// The element index of an entry of either form.
inline uint32_t IndexOf(const wire::Entry& x) { return x.index; }
inline uint32_t IndexOf(uint32_t x) { return x & kIndexBits; }

// Adds entries in[*cursor, count) whose index is below e into dst, value(x)
// giving each one's value, and moves *cursor past them. Unless dst's range
// is `cached` already, 128 entries are prefetched ahead (measured: 32 left
// 20-40 % of the add's time on misses at 1-8 % density; 128-512 were equal,
// 64 in between): the indices increase but jump, so dst would otherwise miss
// the cache on most entries. The multi-frame average zeroes each 16 KB block
// just before it adds the frames into it: there the prefetches only cost
// (measured: 9 % of decoding 4 ResNet-18 messages). A block that one frame
// was added into is not cached for the next: at 1-4 % density that frame
// touched half of its lines or fewer (without the prefetch,
// BM_DecodeAccumulate at L_T 50 took 8 % longer).
template <class T, class Value>
void AddEntries(const T* in, size_t count, size_t e, float* dst, size_t* cursor, Value value,
                bool cached) {
  constexpr size_t kAhead = 128;
  size_t j = *cursor;
  if (cached) {
    for (; j < count && IndexOf(in[j]) < e; ++j) dst[IndexOf(in[j])] += value(in[j]);
  } else {
    for (; j < count && IndexOf(in[j]) < e; ++j) {
      if (j + kAhead < count) __builtin_prefetch(dst + IndexOf(in[j + kAhead]), 1);
      dst[IndexOf(in[j])] += value(in[j]);
    }
  }
  *cursor = j;
}

// The first of in[0, count) (increasing indices) whose index is at least v.
template <class T>
size_t FirstAtOrAfter(const T* in, size_t count, size_t v) {
  return static_cast<size_t>(
      std::lower_bound(in, in + count, v, [](const T& x, size_t w) { return IndexOf(x) < w; }) -
      in);
}

// Validates the frame at bytes[0] for a destination of `n` elements and
// prepares it in *r (its buffers in `slot`). Frames the vector paths do not
// take are walked twice (check, then add): into `direct` when it is given,
// otherwise into slot.floats.
Status Prepare(std::span<const uint8_t> bytes, size_t n, const DecodeOptions& options, Slot& slot,
               float* direct, Ready* r) {
  wire::Header h;
  wire::Params p;
  ADACOMP_RETURN_IF_ERROR(wire::ParseFrame(bytes, options, &h, &p));
  if (n != h.elements) {
    return Status::InvalidArgument("destination holds " + std::to_string(n) +
                                   " elements but the frame carries " + std::to_string(h.elements));
  }
  if (wire::IsSparse(h.codec)) {
    // One validating walk into entries (their number, the selected count,
    // was checked against the payload length). +-scale values: the indices
    // and signs alone; a frame the fast reader does not take goes to the
    // walker, which names the error.
    const bool signed_layout = wire::IsSignedLayout(h, p);
    if (signed_layout) {
      uint32_t* packed = slot.signed_indices.Reserve(static_cast<size_t>(p.selected));
      if (wire::FastSignedIndices(bytes, h, p, packed)) {
        r->kind = Ready::Kind::kSignedIndices;
        r->signed_indices = packed;
        r->count = static_cast<size_t>(p.selected);
        r->scale_bits = std::bit_cast<uint32_t>(p.scale);
        r->info = MakeInfo(h, p, 0);
        return Status::OK();
      }
    }
    wire::Entry* entries = slot.entries.Reserve(static_cast<size_t>(p.selected));
    if (signed_layout || !wire::FastSparseEntries(bytes, h, p, entries)) {
      wire::EntrySink collect{entries, h.codec, p};
      ADACOMP_RETURN_IF_ERROR(wire::WalkPayload(bytes, h, p, collect));
    }
    r->kind = Ready::Kind::kEntries;
    r->entries = entries;
    r->count = static_cast<size_t>(p.selected);
    r->info = MakeInfo(h, p, 0);
    return Status::OK();
  }
  // Dense and onebit: a vector validation pass; the walker below only runs
  // to name the error (or for terngrad).
  const uint8_t* payload = bytes.data() + h.payload_offset;
  if (h.codec == Codec::kDense && internal::MaxAbsBitsBytes(payload, n) < 0x7F800000u) {
    r->kind = Ready::Kind::kFloatBytes;
    r->payload = payload;
    r->info = MakeInfo(h, p, 0);
    return Status::OK();
  }
  if (h.codec == Codec::kOneBit && (n % 8 == 0 || (payload[n / 8] >> (n % 8)) == 0)) {
    r->kind = Ready::Kind::kSignBits;
    r->payload = payload;
    r->pos = p.scale;
    r->neg = p.scale2;
    r->info = MakeInfo(h, p, 0);
    return Status::OK();
  }
  wire::CountSink check;
  ADACOMP_RETURN_IF_ERROR(wire::WalkPayload(bytes, h, p, check));
  float* out = direct;
  if (!out) {
    // -0 is the identity of float addition (x + -0 == x for every x, -0
    // included): scratch[i] = -0 + v == v, and dst + scratch[i] then gives
    // exactly dst + v, or dst itself where the frame adds nothing. From +0,
    // a -0 value (terngrad's -s with s = 0) would turn a -0 of dst into +0.
    slot.floats.assign(n, -0.0f);
    out = slot.floats.data();
  }
  wire::AccumulateSink sink{out, h.codec, p};
  const Status st = wire::WalkPayload(bytes, h, p, sink);
  if (!st.ok()) return Status::Internal("second decode pass failed: " + st.message());
  r->kind = direct ? Ready::Kind::kDone : Ready::Kind::kFloats;
  r->floats = slot.floats.data();
  r->info = MakeInfo(h, p, check.nonzero);
  return Status::OK();
}

// Adds the prepared frame's values for elements [b, e) into dst; *cursor is
// the frame's first entry not yet added (kEntries, kSignedIndices), and
// moves on. b is a multiple of 8 (onebit payloads are added a byte at a
// time). cached: dst[b, e) is in the cache already (AddEntries).
void AddRange(const Ready& r, float* dst, size_t b, size_t e, size_t* cursor, bool cached) {
  switch (r.kind) {
    case Ready::Kind::kEntries:
      AddEntries(
          r.entries, r.count, e, dst, cursor, [](const wire::Entry& x) { return x.value; }, cached);
      break;
    case Ready::Kind::kSignedIndices: {
      // +-scale, the sign from bit 31.
      const uint32_t scale = r.scale_bits;
      AddEntries(
          r.signed_indices, r.count, e, dst, cursor,
          [scale](uint32_t x) { return std::bit_cast<float>(scale | (x & ~kIndexBits)); }, cached);
      break;
    }
    case Ready::Kind::kFloatBytes:
      internal::AddFloatsFromBytes(dst + b, r.payload + 4 * b, e - b);
      break;
    case Ready::Kind::kSignBits:
      internal::AddSignBits(dst + b, r.payload + b / 8, e - b, r.pos, r.neg);
      break;
    case Ready::Kind::kFloats:
      internal::AddFloatsFromBytes(dst + b, reinterpret_cast<const uint8_t*>(r.floats + b), e - b);
      break;
    case Ready::Kind::kDone:
      break;
  }
}

// Elements per block of the multi-frame additions: 16 KB of dst, which stays
// in L1 while every frame's values for it are added.
constexpr size_t kBlockElements = 4096;
// Below this many elements x frames, one thread does everything (starting
// threads costs tens of microseconds).
constexpr uint64_t kMinParallelWork = uint64_t{1} << 20;

}  // namespace

Status DecodeAccumulate(std::span<const uint8_t> bytes, std::span<float> dst, FrameInfo* info,
                        const DecodeOptions& options) {
  thread_local Slot slot;
  Ready r;
  ADACOMP_RETURN_IF_ERROR(Prepare(bytes, dst.size(), options, slot, dst.data(), &r));
  size_t cursor = 0;
  AddRange(r, dst.data(), 0, dst.size(), &cursor, false);
  if (info) *info = r.info;
  return Status::OK();
}

namespace {

Status CheckThreads(const DecodeOptions& options) {
  if (options.threads < 1 || options.threads > kMaxThreads) {
    return Status::InvalidArgument("DecodeOptions::threads is " + std::to_string(options.threads) +
                                   " (must be in 1.." + std::to_string(kMaxThreads) + ")");
  }
  return Status::OK();
}

// Adds the prepared frames ready[0, count) into dst block by block; within
// a block the frames are added in their order, so each element receives
// exactly the sums that calling DecodeAccumulate frame after frame would
// give. With `average` each block is zeroed first and divided by count
// after. Threads take contiguous ranges of whole blocks.
void AddPrepared(const Ready* ready, size_t count, std::span<float> dst, bool average,
                 int threads) {
  const size_t n = dst.size();
  const size_t blocks = (n + kBlockElements - 1) / kBlockElements;
  const int add_workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), blocks));
  float* out = dst.data();
  internal::RunWorkers(std::max(add_workers, 1), [&](int w) {
    const size_t b0 =
        blocks * static_cast<size_t>(w) / static_cast<size_t>(std::max(add_workers, 1));
    const size_t b1 =
        blocks * static_cast<size_t>(w + 1) / static_cast<size_t>(std::max(add_workers, 1));
    const size_t begin = b0 * kBlockElements, end = std::min(n, b1 * kBlockElements);
    if (begin >= end) return;
    std::vector<size_t> cursor(count, 0);
    for (size_t j = 0; j < count; ++j) {
      const Ready& r = ready[j];
      if (r.kind == Ready::Kind::kEntries && begin > 0) {
        cursor[j] = FirstAtOrAfter(r.entries, r.count, begin);
      }
      if (r.kind == Ready::Kind::kSignedIndices && begin > 0) {
        cursor[j] = FirstAtOrAfter(r.signed_indices, r.count, begin);
      }
    }
    const float divisor = static_cast<float>(count);
    for (size_t b = begin; b < end; b += kBlockElements) {
      const size_t e = std::min(end, b + kBlockElements);
      if (average) std::fill(out + b, out + e, 0.0f);
      for (size_t j = 0; j < count; ++j) AddRange(ready[j], out, b, e, &cursor[j], average);
      if (average) internal::DivideFloats(out + b, e - b, divisor);
    }
  });
}

// DecodeAccumulateAll, and with `average` DecodeAverageAll.
Status DecodeAll(const char* name, bool average, std::span<const std::span<const uint8_t>> frames,
                 std::span<float> dst, std::span<FrameInfo> infos, const DecodeOptions& options,
                 size_t* failed_frame) {
  const size_t count = frames.size();
  if (!infos.empty() && infos.size() != count) {
    return Status::InvalidArgument(std::string(name) + ": " + std::to_string(infos.size()) +
                                   " infos for " + std::to_string(count) + " frames");
  }
  ADACOMP_RETURN_IF_ERROR(CheckThreads(options));
  if (count == 0) {
    if (average) return Status::InvalidArgument(std::string(name) + ": no frames to average");
    return Status::OK();
  }
  const size_t n = dst.size();
  int threads = options.threads;
  if (static_cast<uint64_t>(n) * count < kMinParallelWork) threads = 1;

  // 1. Validate and prepare every frame (frames spread over the threads);
  // nothing is written to dst until all of them passed.
  thread_local std::vector<Slot> slots;
  if (slots.size() < count) slots.resize(count);
  std::vector<Ready> ready(count);
  std::vector<Status> status(count);
  const int prep_workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), count));
  Slot* slot_base = slots.data();  // the calling thread's slots, also used by the workers
  internal::RunWorkers(prep_workers, [&](int w) {
    for (size_t j = static_cast<size_t>(w); j < count; j += static_cast<size_t>(prep_workers)) {
      status[j] = Prepare(frames[j], n, options, slot_base[j], nullptr, &ready[j]);
    }
  });
  for (size_t j = 0; j < count; ++j) {
    if (!status[j].ok()) {
      if (failed_frame) {
        *failed_frame = j;
        return status[j];
      }
      return status[j].WithContext("frame " + std::to_string(j) + " of " + std::to_string(count));
    }
  }

  // 2. The additions.
  AddPrepared(ready.data(), count, dst, average, threads);
  for (size_t j = 0; j < infos.size(); ++j) infos[j] = ready[j].info;
  return Status::OK();
}

}  // namespace

Status DecodeAccumulateAll(std::span<const std::span<const uint8_t>> frames, std::span<float> dst,
                           std::span<FrameInfo> infos, const DecodeOptions& options,
                           size_t* failed_frame) {
  return DecodeAll("DecodeAccumulateAll", false, frames, dst, infos, options, failed_frame);
}

Status DecodeAverageAll(std::span<const std::span<const uint8_t>> frames, std::span<float> dst,
                        std::span<FrameInfo> infos, const DecodeOptions& options,
                        size_t* failed_frame) {
  return DecodeAll("DecodeAverageAll", true, frames, dst, infos, options, failed_frame);
}

Status DecodeAverageMessages(std::span<const std::span<const uint8_t>> messages,
                             std::span<const MessageTensor> tensors, std::span<FrameInfo> infos,
                             const DecodeOptions& options, MessageError* error) {
  const size_t count = messages.size();
  const size_t n_tensors = tensors.size();
  if (count == 0) return Status::InvalidArgument("DecodeAverageMessages: no messages to average");
  if (!infos.empty() && infos.size() != count * n_tensors) {
    return Status::InvalidArgument("DecodeAverageMessages: " + std::to_string(infos.size()) +
                                   " infos for " + std::to_string(count) + " messages of " +
                                   std::to_string(n_tensors) + " tensors");
  }
  ADACOMP_RETURN_IF_ERROR(CheckThreads(options));
  uint64_t work = 0;
  for (const MessageTensor& t : tensors) work += static_cast<uint64_t>(t.dst.size()) * count;
  const int threads = work < kMinParallelWork ? 1 : options.threads;

  // 1. Walk every message frame by frame (messages spread over the
  // threads), preparing frame k of message r into ready[k * count + r];
  // a message stops at its first bad frame. Nothing is written to any dst
  // until every frame of every message passed and no message has bytes
  // left after its last frame.
  thread_local std::vector<Slot> slots;
  if (slots.size() < count * n_tensors) slots.resize(count * n_tensors);
  std::vector<Ready> ready(count * n_tensors);
  std::vector<Status> status(count);
  std::vector<size_t> failed_tensor(count, n_tensors);  // n_tensors: none failed
  const int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), count));
  Slot* slot_base = slots.data();
  internal::RunWorkers(workers, [&](int w) {
    for (size_t r = static_cast<size_t>(w); r < count; r += static_cast<size_t>(workers)) {
      const std::span<const uint8_t> message = messages[r];
      size_t cursor = 0;
      for (size_t k = 0; k < n_tensors; ++k) {
        DecodeOptions opts = options;
        opts.expected_tensor_id = tensors[k].tensor_id;
        opts.max_elements = std::min<uint64_t>(options.max_elements, tensors[k].dst.size());
        Ready& rd = ready[k * count + r];
        status[r] = Prepare(message.subspan(cursor), tensors[k].dst.size(), opts,
                            slot_base[k * count + r], nullptr, &rd);
        if (!status[r].ok()) {
          failed_tensor[r] = k;
          break;
        }
        cursor += static_cast<size_t>(rd.info.frame_bytes);
      }
      if (status[r].ok() && cursor != message.size()) {
        status[r] = Status::Corruption("message has " + std::to_string(message.size() - cursor) +
                                       " bytes after its last frame");
      }
    }
  });
  // The first error in (tensor, message) order; a message's leftover bytes
  // count as a failure after its last tensor.
  size_t bad = count;
  for (size_t r = 0; r < count; ++r) {
    if (status[r].ok()) continue;
    if (bad == count || failed_tensor[r] < failed_tensor[bad]) bad = r;
  }
  if (bad != count) {
    if (error) {
      error->message = bad;
      error->tensor = failed_tensor[bad];
      return status[bad];
    }
    const std::string where = failed_tensor[bad] < n_tensors
                                  ? "message " + std::to_string(bad) + ", frame of tensor " +
                                        std::to_string(tensors[failed_tensor[bad]].tensor_id)
                                  : "message " + std::to_string(bad);
    return status[bad].WithContext(where);
  }

  // 2. Per tensor, the average over the messages' frames.
  for (size_t k = 0; k < n_tensors; ++k) {
    const std::span<float> dst = tensors[k].dst;
    const int t =
        static_cast<uint64_t>(dst.size()) * count < kMinParallelWork ? 1 : options.threads;
    AddPrepared(ready.data() + k * count, count, dst, true, t);
  }
  for (size_t k = 0; k < n_tensors && !infos.empty(); ++k) {
    for (size_t r = 0; r < count; ++r) infos[k * count + r] = ready[k * count + r].info;
  }
  return Status::OK();
}

Status ZeroWhereCarried(std::span<const uint8_t> bytes, std::span<float> dst, uint64_t* zeroed,
                        const DecodeOptions& options) {
  thread_local Slot slot;
  Ready r;
  ADACOMP_RETURN_IF_ERROR(Prepare(bytes, dst.size(), options, slot, nullptr, &r));
  uint64_t count = 0;
  if (r.kind == Ready::Kind::kEntries) {
    // A sparse frame: its entries only, never a pass over dst.
    for (size_t j = 0; j < r.count; ++j) {
      if (r.entries[j].value != 0.0f) {
        dst[r.entries[j].index] = 0.0f;
        ++count;
      }
    }
  } else if (r.kind == Ready::Kind::kSignedIndices) {
    // +-scale: every entry, unless the scale is 0.
    if (std::bit_cast<float>(r.scale_bits) != 0.0f) {
      for (size_t j = 0; j < r.count; ++j) dst[IndexOf(r.signed_indices[j])] = 0.0f;
      count = r.count;
    }
  } else {
    // Every element has a value: decode them (from -0, which adds as nothing), then test.
    std::vector<float> values(dst.size(), -0.0f);
    size_t cursor = 0;
    AddRange(r, values.data(), 0, values.size(), &cursor, false);
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] != 0.0f) {
        dst[i] = 0.0f;
        ++count;
      }
    }
  }
  if (zeroed) *zeroed = count;
  return Status::OK();
}

}  // namespace adacomp
