// The simulated byte counts against what the in-process communicators count
// in a real GradientExchange::Step of the same frames, learner by learner,
// for P = 2, 4, 8: the all-gather, the reduce-scatter and both rings.
#include "exchange/byte_simulation.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "adacomp/exchange.h"
#include "core/test_util.h"
#include "exchange/test_group.h"

namespace adacomp {
namespace {

using exchange_test::Comms;
using exchange_test::OnEveryRank;

CodecConfig Config(Codec codec, int rank) {
  CodecConfig c;
  c.codec = codec;
  c.bin_size = 50;
  c.density = 0.02;
  c.seed = 11 + static_cast<uint64_t>(rank);
  return c;
}

std::vector<float> Grad(int rank, uint64_t n) {
  std::vector<float> g = testing::GradientLike(n, 5);
  const std::vector<float> own = testing::GradientLike(n, 100 + static_cast<uint64_t>(rank));
  for (size_t i = 0; i < n; ++i) g[i] += own[i];
  return g;
}

// What each learner's communicator counted in one real step.
std::vector<exchange_internal::LearnerBytes> RealStep(int p, uint64_t n, CodecConfig (*config)(int),
                                                      ExchangeKind kind,
                                                      ValueMode summed = ValueMode::kFp32) {
  std::vector<exchange_internal::LearnerBytes> got(p);
  Comms comms = CreateInProcessGroup(p, 60.0);
  OnEveryRank(comms, [&](int rank, Communicator& comm) {
    auto x = GradientExchange::Create(comm, {{"t", n, config(rank)}}, {kind, summed});
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    const std::vector<float> g = Grad(rank, n);
    const std::span<const float> spans[1] = {g};
    std::vector<float> out(n);
    ExchangeResult result;
    ASSERT_TRUE((*x)->Step(spans, 0.0, out, &result).ok());
    got[rank] = {result.transport_sent_bytes, result.transport_received_bytes};
  });
  return got;
}

CodecConfig* g_codec_holder = nullptr;
CodecConfig FromHolder(int rank) {
  CodecConfig c = *g_codec_holder;
  c.seed = 11 + static_cast<uint64_t>(rank);
  return c;
}

void ExpectSame(const std::vector<exchange_internal::LearnerBytes>& sim,
                const std::vector<exchange_internal::LearnerBytes>& real, const std::string& what) {
  ASSERT_EQ(sim.size(), real.size());
  for (size_t r = 0; r < sim.size(); ++r) {
    EXPECT_EQ(sim[r].sent, real[r].sent) << what << ", learner " << r << " sent";
    EXPECT_EQ(sim[r].received, real[r].received) << what << ", learner " << r << " received";
  }
}

TEST(SimulateStep, CountsWhatTheCommunicatorsCountInARealStep) {
  for (Codec codec : {Codec::kAdaComp, Codec::kTopK, Codec::kOneBit}) {
    for (int p : {2, 4, 8}) {
      for (uint64_t n : {uint64_t{5}, uint64_t{4099}}) {
        const std::string what =
            std::string(CodecName(codec)) + " p " + std::to_string(p) + " n " + std::to_string(n);
        exchange_internal::SimulatedStep sim;
        const Status st = exchange_internal::SimulateStep(
            p, n,
            [&](int r, std::vector<uint8_t>* frame) {
              auto c = Compressor::Create(Config(codec, r), 0, n);
              if (!c.ok()) return c.status();
              return (*c)->Compress(Grad(r, n), frame);
            },
            &sim);
        ASSERT_TRUE(st.ok()) << st.ToString();
        CodecConfig holder = Config(codec, 0);
        g_codec_holder = &holder;
        ExpectSame(sim.allgather, RealStep(p, n, FromHolder, ExchangeKind::kAllGather),
                   what + ", allgather");
        ExpectSame(sim.reduce_scatter, RealStep(p, n, FromHolder, ExchangeKind::kReduceScatter),
                   what + ", reduce-scatter");
        if (codec == Codec::kAdaComp) {
          exchange_internal::SimulatedStep half;
          ASSERT_TRUE(exchange_internal::SimulateStep(
                          p, n,
                          [&](int r, std::vector<uint8_t>* frame) {
                            auto c = Compressor::Create(Config(codec, r), 0, n);
                            if (!c.ok()) return c.status();
                            return (*c)->Compress(Grad(r, n), frame);
                          },
                          &half, ValueMode::kFp16)
                          .ok());
          ExpectSame(half.reduce_scatter,
                     RealStep(p, n, FromHolder, ExchangeKind::kReduceScatter, ValueMode::kFp16),
                     what + ", reduce-scatter with float16 sums");
          holder = CodecConfig();
          holder.codec = Codec::kDense;
          ExpectSame(sim.ring_fp32, RealStep(p, n, FromHolder, ExchangeKind::kAllGather),
                     what + ", ring fp32");
          holder.values = ValueMode::kFp16;
          ExpectSame(sim.ring_fp16, RealStep(p, n, FromHolder, ExchangeKind::kAllGather),
                     what + ", ring fp16");
        }
        EXPECT_GT(sim.frame_bytes, 0u);
        EXPECT_GE(sim.piece_bytes, sim.frame_bytes) << what << ": a header per extra piece";
        const auto& chosen = sim.auto_reduce_scatter ? sim.reduce_scatter : sim.allgather;
        EXPECT_EQ(sim.auto_exchange[0].received, chosen[0].received);
      }
    }
  }
}

TEST(SimulateStep, RefusesNoLearnersAndPassesFrameErrorsOn) {
  exchange_internal::SimulatedStep sim;
  auto none = [](int, std::vector<uint8_t>*) { return Status::OK(); };
  EXPECT_FALSE(exchange_internal::SimulateStep(0, 10, none, &sim).ok());
  const Status st = exchange_internal::SimulateStep(
      3, 10,
      [](int, std::vector<uint8_t>* f) {
        f->assign(5, 0xAB);
        return Status::OK();
      },
      &sim);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("learner 0"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace adacomp
