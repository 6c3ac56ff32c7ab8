// The `dense` codec: every element as float32, no residue (the uncompressed
// reference).
#include "compress/common.h"
#include "core/endian.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class DenseCompressor final : public Compressor {
 public:
  DenseCompressor(const CodecConfig& c, uint32_t id, uint64_t n) : Compressor(c, id, n) {}

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
    const size_t start = frame->size();
    const size_t at =
        wire::BeginFrame(frame, Codec::kDense, tensor_id(), grad.size(), {}, 4 * grad.size());
    uint8_t* dst = frame->data() + at;
    for (size_t i = 0; i < grad.size(); ++i) StoreF32(dst + 4 * i, grad[i]);
    wire::FinishFrame(frame, start);
    ++step_;
    if (stats) {
      *stats = CompressStats{};
      stats->elements = grad.size();
      stats->selected = grad.size();
      stats->frame_bytes = frame->size() - start;
    }
    return Status::OK();
  }
  std::span<const float> residue() const override { return {}; }
  std::vector<uint8_t> SaveState() const override {
    return SaveStateBytes(Codec::kDense, ValueMode::kTernary, elements(), step_, {});
  }
  Status LoadState(std::span<const uint8_t> state) override {
    return LoadStateBytes(state, Codec::kDense, ValueMode::kTernary, elements(), &step_, {});
  }
  void Snapshot(CompressorSnapshot* s) const override { SnapshotState(step_, {}, s); }
  Status Restore(const CompressorSnapshot& s) override { return RestoreState(s, &step_, {}); }

 private:
  uint64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Compressor> NewDenseCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<DenseCompressor>(c, id, n);
}

}  // namespace adacomp::internal
