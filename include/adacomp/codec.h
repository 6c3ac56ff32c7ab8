// adacomp/codec.h: gradient compressors and the frame decoder.
//
// A Compressor owns the state of ONE tensor on ONE learner (its residue, and
// for terngrad its random generator). Each call to Compress() takes that
// step's gradient, updates the state and appends exactly one self-describing
// frame (docs/wire-format.md) to a caller-owned byte vector; reusing the
// vector across steps means no allocation per step once it has grown.
//
// DecodeAccumulate() validates a frame completely (checksum, header, every
// payload field, every index) BEFORE it touches the destination, then adds
// the frame's dequantized values into it. The sum over learners is built by
// calling it once per learner's frame on the same buffer. A rejected frame
// leaves the destination untouched.
//
// Thread safety: distinct Compressor objects may be used concurrently from
// distinct threads; one object must not be used from two threads at once,
// not even through its const methods (residue() and SaveState() may first
// apply corrections that the fast AdaComp path defers to the next step).
// The free functions are thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "adacomp/status.h"

namespace adacomp {

// Codec ids as they appear on the wire. Never reuse or renumber a value.
enum class Codec : uint8_t {
  kDense = 0,      // float32, every element
  kAdaComp = 1,    // docs/algorithm.md section 2
  kTopK = 2,       // k largest |G| per tensor, float32 values, residue
  kThreshold = 3,  // +-tau where |G| >= tau, residue (Strom 2015)
  kOneBit = 4,     // sign bit per element, mean of positives / negatives, residue
  kTernGrad = 5,   // stochastic ternary {-s,0,+s}, s = max|g|, seeded, no residue
};

// Value modes of the AdaComp codec. Wire values; never renumber.
enum class ValueMode : uint8_t {
  kTernary = 0,  // sign(G) * scale, scale = mean of per-bin max |G| (default)
  kFp16 = 1,     // G itself rounded to IEEE half
  kFp32 = 2,     // G itself
};

std::string_view CodecName(Codec codec);          // "dense", "adacomp", ...
Result<Codec> ParseCodec(std::string_view name);  // inverse of CodecName
std::string_view ValueModeName(ValueMode mode);   // "ternary", "fp16", "fp32"
Result<ValueMode> ParseValueMode(std::string_view name);

// Layer types, for the default AdaComp bin size of a tensor and for
// per-type compression rates. Stable values (reports use the names).
enum class LayerType : int { kConv = 0, kFc = 1, kLstm = 2, kOther = 3 };
inline constexpr int kLayerTypeCount = 4;
const char* LayerTypeName(LayerType type);                // "conv", "fc", "lstm", "other"
Result<LayerType> ParseLayerType(std::string_view name);  // inverse of LayerTypeName

// Default AdaComp bin size L_T per layer type (docs/algorithm.md section 2):
// conv 50, fc 500, lstm 500, other (biases, embeddings) 500.
uint32_t DefaultBinSize(LayerType type);

// The most threads CodecConfig::threads and DecodeOptions::threads accept.
inline constexpr int kMaxThreads = 256;

// Settings of one tensor's compressor. Fields that a codec does not use are
// ignored by it.
struct CodecConfig {
  Codec codec = Codec::kAdaComp;
  uint32_t bin_size = 500;                 // adacomp: L_T, >= 1
  ValueMode values = ValueMode::kTernary;  // adacomp
  double density = 0.01;                   // topk: k = max(1, ceil(density * N)), 0 < d <= 1
  float tau = 1e-3f;                       // threshold: > 0, finite
  uint64_t seed = 0;                       // terngrad: seeds the per-tensor generator
  // adacomp: threads one Compress() call may use for this tensor (1..256);
  // used above 2^18 elements and 2 x 4096 bins. Frames and state do not
  // depend on it.
  int threads = 1;

  // InvalidArgument naming the bad field, or OK.
  Status Validate() const;
};

// What one Compress() call did.
struct CompressStats {
  uint64_t elements = 0;     // N
  uint64_t selected = 0;     // elements sent with a value (N for dense and onebit)
  uint64_t bins = 0;         // adacomp: ceil(N / L_T); other codecs: 0
  uint64_t frame_bytes = 0;  // bytes appended, header and checksum included
  // adacomp: bin_histogram[k] = number of bins that selected k elements, for
  // k < 16; bin_histogram[16] counts bins that selected 16 or more.
  std::array<uint64_t, 17> bin_histogram{};

  // 32 bits x elements / bits actually sent (docs/algorithm.md section 5); 0 when nothing sent.
  double CompressionRate() const {
    return frame_bytes ? (32.0 * static_cast<double>(elements)) / (8.0 * frame_bytes) : 0.0;
  }
  // Adds `other` into this (for totals over tensors or steps).
  void Merge(const CompressStats& other);
};

// A copy of a compressor's mutable state (its step counter and residue),
// taken by Compressor::Snapshot() and put back by Restore(). Reusing one
// object across steps keeps its buffer, so a snapshot costs one copy of the
// residue and no allocation (SaveState() also encodes and checksums).
struct CompressorSnapshot {
  uint64_t step = 0;           // Compress() calls so far
  std::vector<float> residue;  // empty for codecs without one
};

class Compressor {
 public:
  // A compressor for a tensor of `elements` floats, identified on the wire by
  // `tensor_id`. The residue starts at zero. Fails on an invalid config.
  static Result<std::unique_ptr<Compressor>> Create(const CodecConfig& config, uint32_t tensor_id,
                                                    uint64_t elements);
  virtual ~Compressor() = default;

  // Compresses this step's gradient (grad.size() == elements()): appends one
  // frame to *frame and updates the residue. On error (wrong size, a NaN or
  // Inf in grad) returns InvalidArgument and changes neither *frame nor any
  // state.
  virtual Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                          CompressStats* stats = nullptr) = 0;

  // The residue (size elements()), or empty for codecs without one
  // (dense, terngrad). The span is valid until the next non-const call
  // (after Mark() adacomp's next Compress() moves the residue to its
  // other buffer).
  virtual std::span<const float> residue() const = 0;

  // All mutable state (residue, generator) as bytes, for checkpoints; and
  // its inverse, which validates sizes and leaves the state unchanged on error.
  virtual std::vector<uint8_t> SaveState() const = 0;
  virtual Status LoadState(std::span<const uint8_t> state) = 0;

  // The mutable state into *snapshot (its buffer reused), and its inverse,
  // for undoing compressions whose frames were never sent. Restore() takes
  // a snapshot of a compressor of the same codec and size (InvalidArgument,
  // state unchanged, if its residue has the wrong size); the compressor then
  // behaves exactly as it did when the snapshot was taken.
  virtual void Snapshot(CompressorSnapshot* snapshot) const = 0;
  virtual Status Restore(const CompressorSnapshot& snapshot) = 0;

  // The same undo, kept inside the compressor and cheaper where the codec
  // can: Mark() notes the state now; UndoToMark() puts it back (the
  // compressor then behaves exactly as it did at Mark(), with the bin size
  // as last set) and KeepSinceMark() keeps what followed; either ends the
  // mark, and a new Mark() replaces it. A successful LoadState() or
  // Restore() ends it too (adacomp; callers end it themselves for the
  // others). The default copies the state at Mark(), as Snapshot() does.
  // adacomp copies nothing: the first Compress() after Mark() writes the new
  // residue into a second buffer, chunk by chunk while each chunk is in
  // cache, and the marked one stays as it was. UndoToMark() without a mark:
  // InvalidArgument, nothing changed.
  virtual void Mark();
  virtual Status UndoToMark();
  virtual void KeepSinceMark();

  // adacomp: the bin size L_T from the next Compress() on (a compression
  // schedule, adacomp/schedule.h). The residue carries over unchanged, with
  // any deferred correction applied first, so nothing is lost across the
  // change; config().bin_size follows. InvalidArgument (state unchanged) for
  // 0 or for a codec without bins.
  virtual Status SetBinSize(uint32_t bin_size);
  // Empties the residue (nothing held back any more: a caller has sent it
  // some other way); the step counter stays. Ends a mark, as Restore() does.
  // A codec without a residue: nothing to do.
  Status ClearResidue();

  const CodecConfig& config() const { return config_; }
  uint32_t tensor_id() const { return tensor_id_; }
  uint64_t elements() const { return elements_; }

 protected:
  Compressor(const CodecConfig& config, uint32_t tensor_id, uint64_t elements)
      : config_(config), tensor_id_(tensor_id), elements_(elements) {}
  void set_bin_size(uint32_t bin_size) { config_.bin_size = bin_size; }

 private:
  CodecConfig config_;
  uint32_t tensor_id_;
  uint64_t elements_;
  std::unique_ptr<CompressorSnapshot> mark_;  // the default Mark()'s copy (buffer kept)
  bool marked_ = false;                       // the default Mark()'s
};

// Header fields and summary of one frame, as read by InspectFrame().
struct FrameInfo {
  uint8_t version = 0;
  Codec codec = Codec::kDense;
  uint32_t tensor_id = 0;
  uint64_t elements = 0;
  uint64_t params_bytes = 0;  // codec parameter block
  uint64_t payload_bytes = 0;
  uint64_t frame_bytes = 0;  // whole frame, header to checksum
  uint32_t crc32c = 0;
  uint64_t selected = 0;  // elements the frame carries a value for
  // Codec parameters; those a codec lacks stay at their defaults.
  uint32_t bin_size = 0;                   // adacomp
  ValueMode values = ValueMode::kTernary;  // adacomp
  float scale = 0.0f;   // adacomp ternary scale; threshold tau; terngrad s; onebit positive mean
  float scale2 = 0.0f;  // onebit negative mean
};

struct DecodeOptions {
  uint64_t max_frame_bytes = uint64_t{1} << 31;  // larger frames are OutOfRange
  uint64_t max_elements = uint64_t{1} << 31;     // larger element counts are OutOfRange
  std::optional<uint32_t> expected_tensor_id;    // NotFound/InvalidArgument on mismatch
  // DecodeAccumulateAll / DecodeAverageAll only (1..256): threads that
  // validate the frames (a frame each) and add them (a range of dst each);
  // used when elements x frames is at least 2^20. The result does not
  // depend on it.
  int threads = 1;
};

// Reads and validates the frame that starts at bytes[0] (more frames may
// follow it; info->frame_bytes says where the next one starts). Checks the
// checksum and every field, but writes nothing but *info.
Status InspectFrame(std::span<const uint8_t> bytes, FrameInfo* info,
                    const DecodeOptions& options = {});

// Validates the frame at bytes[0] completely, then adds its dequantized
// values into dst (dst.size() must equal the frame's element count). On any
// error dst is untouched. `info` (optional) receives the header fields.
Status DecodeAccumulate(std::span<const uint8_t> bytes, std::span<float> dst,
                        FrameInfo* info = nullptr, const DecodeOptions& options = {});

// Adds the dequantized values of several frames of one tensor (e.g. every
// learner's frame) into dst: validates all of them first, and on any error
// leaves dst untouched. Each element receives the same additions, in frame
// order, as calling DecodeAccumulate frame after frame, so the result is
// bit-identical to that; it is faster for large tensors because dst is
// walked once, in cache-sized blocks, rather than once per frame. Each span
// starts at a frame (more bytes may follow it). `infos`, if not empty, must
// have one element per frame and receives their headers. On error the
// status is the failing frame's (the first one, in order); its position
// goes to *failed_frame if given, otherwise into the message.
Status DecodeAccumulateAll(std::span<const std::span<const uint8_t>> frames, std::span<float> dst,
                           std::span<FrameInfo> infos = {}, const DecodeOptions& options = {},
                           size_t* failed_frame = nullptr);

// The average of several frames of one tensor (e.g. every learner's frame
// of a gradient), written over dst: bit for bit what zeroing dst, calling
// DecodeAccumulate frame after frame and dividing each element by the
// number of frames gives, in one blocked pass over dst. Same arguments,
// validation and errors as DecodeAccumulateAll; dst is untouched on error;
// no frames is InvalidArgument.
Status DecodeAverageAll(std::span<const std::span<const uint8_t>> frames, std::span<float> dst,
                        std::span<FrameInfo> infos = {}, const DecodeOptions& options = {},
                        size_t* failed_frame = nullptr);

// One tensor of a message: every message carries one frame of it, in the
// order of the tensors, with tensor id `tensor_id` and dst.size() elements.
struct MessageTensor {
  uint32_t tensor_id = 0;
  std::span<float> dst;  // receives the average over the messages
};

// Where DecodeAverageMessages failed: the message (rank) and the tensor
// whose frame in it was bad; tensor == the number of tensors when every
// frame was good but bytes were left after the last one.
struct MessageError {
  size_t message = 0;
  size_t tensor = 0;
};

// Decodes whole messages, each the concatenation of one frame per tensor
// (one learner's contribution to an exchange), and writes for every tensor
// the average over the messages over tensors[k].dst: per tensor bit for bit
// what DecodeAverageAll of the messages' k-th frames gives. Every frame of
// every message is validated (with expected_tensor_id and max_elements set
// from the tensor) and every message must end exactly after its last frame
// BEFORE any dst is written; on any error no dst is changed. The error is
// the first in (tensor, message) order, a message's leftover bytes coming
// after all of its frames; it goes to *error if given, else into the
// message text. `infos`, if not empty, must hold messages x tensors
// entries and receives frame k of message r at [k * messages + r]. No
// messages is InvalidArgument.
Status DecodeAverageMessages(std::span<const std::span<const uint8_t>> messages,
                             std::span<const MessageTensor> tensors,
                             std::span<FrameInfo> infos = {}, const DecodeOptions& options = {},
                             MessageError* error = nullptr);

// Validates the frame at bytes[0] completely, then writes 0 into dst at
// every element the frame gives a non-zero value (dst.size() must equal the
// frame's element count): a sparse frame's selected elements, a dense or
// onebit frame's non-zero ones. What the hook's local optimizer masks
// (python/adacomp/torch/local_optimizer.py). *zeroed (optional) receives
// their number; on any error dst is untouched.
Status ZeroWhereCarried(std::span<const uint8_t> bytes, std::span<float> dst,
                        uint64_t* zeroed = nullptr, const DecodeOptions& options = {});

// Index of the first non-finite value in `values`, or nullopt if all are finite.
std::optional<size_t> FindNonFinite(std::span<const float> values);

// The sum of the squares of `values`, in double: element i goes to accumulator
// i % 8, and the eight are added in order at the end, so the result is the same
// bits on every machine and run (vectorizable, where one accumulator is a chain
// of dependent adds).
double SumOfSquares(std::span<const float> values);

}  // namespace adacomp
