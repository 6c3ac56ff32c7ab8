// The `dense` codec: every element as float32, no residue (the uncompressed
// reference).
#include "compress/common.h"
#include "core/endian.h"
#include "wire/frame.h"

namespace adacomp::internal {
namespace {

class DenseCompressor final : public BaselineCompressor<Codec::kDense, false> {
 public:
  using BaselineCompressor::BaselineCompressor;

  Status Compress(std::span<const float> grad, std::vector<uint8_t>* frame,
                  CompressStats* stats) override {
    ADACOMP_RETURN_IF_ERROR(CheckGradient(grad, elements()));
    uint8_t* dst = BeginFrame(frame, {}, 4 * grad.size());
    for (size_t i = 0; i < grad.size(); ++i) StoreF32(dst + 4 * i, grad[i]);
    return EndFrame(frame, grad.size(), stats);
  }
};

}  // namespace

std::unique_ptr<Compressor> NewDenseCompressor(const CodecConfig& c, uint32_t id, uint64_t n) {
  return std::make_unique<DenseCompressor>(c, id, n);
}

}  // namespace adacomp::internal
