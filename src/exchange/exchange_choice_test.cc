// ExchangeKind::kAuto: its byte estimates against what the communicator
// counts, its choices against the cheaper of the two exchanges, its result
// against the all-gather bit for bit, and a failure in a step that mixes
// the two leaving every output untouched.
#include "exchange/exchange_choice.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "adacomp/exchange.h"
#include "core/test_util.h"
#include "exchange/exchange_hooks.h"
#include "exchange/slice_exchange.h"
#include "exchange/test_group.h"

namespace adacomp {
namespace {

using exchange_test::Comms;
using exchange_test::OnEveryRank;

TEST(SummedSlicesBytes, IsTheSumOfTheEncodedSlices) {
  std::vector<float> v = testing::GradientLike(1003, 8);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 7 != 0) v[i] = 0.0f;  // sparse enough for topk slices
  }
  for (int p : {1, 2, 5, 1003, 2000}) {
    uint64_t want = 0;
    size_t begin = 0;
    for (int d = 0; d < p; ++d) {
      const size_t len = v.size() / p + (static_cast<size_t>(d) < v.size() % p ? 1 : 0);
      if (len == 0) continue;
      std::vector<uint8_t> frame;
      ASSERT_TRUE(EncodeSummedSlice(4, std::span<const float>(v).subspan(begin, len), &frame).ok());
      want += frame.size();
      begin += len;
    }
    EXPECT_EQ(SummedSlicesBytes(4, v, p), want) << "p " << p;
  }
}

// Tensors: 0 sparse ternary AdaComp (large bins: little overlap), 1 dense
// float32 frames (the reduce-scatter receives about 2/P of what the
// all-gather does), 2 AdaComp with small bins.
std::vector<ExchangeTensor> Tensors(int rank) {
  std::vector<ExchangeTensor> t(3);
  t[0] = {"sparse", 30000, {}};
  t[0].codec.codec = Codec::kAdaComp;
  t[0].codec.bin_size = 500;
  t[1] = {"dense", 3000, {}};
  t[1].codec.codec = Codec::kDense;
  t[2] = {"small-bins", 20000, {}};
  t[2].codec.codec = Codec::kAdaComp;
  t[2].codec.bin_size = 4;
  for (auto& x : t) x.codec.seed = static_cast<uint64_t>(rank) + 1;
  return t;
}

std::vector<float> Grad(int rank, size_t k, uint64_t n, int step) {
  // A shared part and a learner's own, as gradients of one model are.
  std::vector<float> g = testing::GradientLike(n, 100 * k + static_cast<uint64_t>(step));
  const std::vector<float> own =
      testing::GradientLike(n, 7777 + 100 * k + 10 * static_cast<uint64_t>(step) + rank);
  for (size_t i = 0; i < n; ++i) g[i] += 0.5f * own[i];
  return g;
}

struct GroupRun {
  std::vector<std::vector<float>> out;                  // [step], learner 0's output
  std::vector<uint64_t> received;                       // [step], most bytes a learner received
  std::vector<std::vector<uint8_t>> routes;             // [step], learner 0's reduce_scatter
  std::vector<std::vector<ReceiveEstimate>> estimates;  // [step][tensor]
};

constexpr int kSteps = 4;

GroupRun RunGroup(int p, ExchangeKind kind) {
  GroupRun run;
  run.out.resize(kSteps);
  run.received.assign(kSteps, 0);
  run.routes.resize(kSteps);
  run.estimates.resize(kSteps);
  std::vector<std::vector<uint64_t>> received(p, std::vector<uint64_t>(kSteps));
  Comms comms = CreateInProcessGroup(p, 60.0);
  OnEveryRank(comms, [&](int rank, Communicator& comm) {
    const std::vector<ExchangeTensor> tensors = Tensors(rank);
    auto x = GradientExchange::Create(comm, tensors, {kind});
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    // An independent chooser fed with the same figures (learner 0 only).
    exchange_internal::ExchangeChooser chooser(tensors, p, ValueMode::kFp32, /*exact=*/true);
    for (int step = 0; step < kSteps; ++step) {
      std::vector<std::vector<float>> g;
      for (size_t k = 0; k < tensors.size(); ++k) {
        g.push_back(Grad(rank, k, tensors[k].elements, step));
      }
      std::vector<std::span<const float>> spans(g.begin(), g.end());
      std::vector<float> out((*x)->total_elements());
      ExchangeResult result;
      const Status st = (*x)->Step(spans, 0.0, out, &result);
      ASSERT_TRUE(st.ok()) << st.ToString();
      received[rank][step] = result.transport_received_bytes;
      if (rank != 0) continue;
      run.out[step] = out;
      run.routes[step] = result.reduce_scatter;
      for (size_t k = 0; k < tensors.size(); ++k) {
        const bool rs = !result.reduce_scatter.empty() && result.reduce_scatter[k];
        chooser.Observe(k, rs, result.wire_bytes[k],
                        std::span<const float>(out).subspan((*x)->offset(k), tensors[k].elements));
        run.estimates[step].push_back(chooser.Estimate(k));
      }
    }
  });
  for (int step = 0; step < kSteps; ++step) {
    for (int r = 0; r < p; ++r)
      run.received[step] = std::max(run.received[step], received[r][step]);
  }
  return run;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(AutoExchange, EqualsTheAllGatherAndReceivesNoMoreThanTheCheaperExchange) {
  for (int p : {2, 4, 8, 16}) {
    const GroupRun ag = RunGroup(p, ExchangeKind::kAllGather);
    const GroupRun rs = RunGroup(p, ExchangeKind::kReduceScatter);
    const GroupRun au = RunGroup(p, ExchangeKind::kAuto);
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_TRUE(SameBits(au.out[step], ag.out[step])) << "p " << p << " step " << step;
      EXPECT_TRUE(SameBits(rs.out[step], ag.out[step])) << "p " << p << " step " << step;
    }
    // The first step goes by the all-gather; from the second on, auto
    // receives at most the cheaper exchange's bytes (2 % for the extra
    // collective's headers of a step that mixes the two).
    ASSERT_FALSE(au.routes[0].empty());
    for (uint8_t r : au.routes[0]) EXPECT_EQ(r, 0) << "p " << p;
    for (int step = 1; step < kSteps; ++step) {
      const double cheaper = std::min(ag.received[step], rs.received[step]);
      EXPECT_LE(au.received[step], cheaper * 1.02 + 64)
          << "p " << p << " step " << step << ": allgather " << ag.received[step]
          << ", reduce-scatter " << rs.received[step];
    }
    // Dense float32 frames: always the reduce-scatter from P = 4 on.
    if (p >= 4) {
      EXPECT_EQ(au.routes[kSteps - 1][1], 1) << "p " << p;
    }
    if (p == 16) {
      // The large-bin ternary tensor stays on the all-gather... its
      // frames are far smaller than dense slices at this P.
      EXPECT_EQ(au.routes[kSteps - 1][0], 0);
    }
  }
}

TEST(AutoExchange, EstimatesMatchWhatEachExchangeReceives) {
  // One tensor at a time is what the estimate is of; compare the sum over
  // tensors with the step's bytes, less the agreement.
  for (int p : {4, 8}) {
    const GroupRun ag = RunGroup(p, ExchangeKind::kAllGather);
    const GroupRun rs = RunGroup(p, ExchangeKind::kReduceScatter);
    for (int step = 1; step < kSteps; ++step) {
      double est_ag = 0, est_rs = 0, est_rs_from_ag = 0;
      for (size_t k = 0; k < 3; ++k) {
        est_ag += ag.estimates[step][k].allgather;
        est_rs_from_ag += ag.estimates[step][k].reduce_scatter;
        est_rs += rs.estimates[step][k].reduce_scatter;
      }
      // The agreement's AllGatherV: 16 bytes from each peer plus headers.
      const double agree = 16.0 * (p - 1);
      EXPECT_NEAR(est_ag, ag.received[step] - agree, 0.05 * ag.received[step]) << "p " << p;
      EXPECT_NEAR(est_rs, rs.received[step] - agree, 0.10 * rs.received[step]) << "p " << p;
      EXPECT_NEAR(est_rs_from_ag, rs.received[step] - agree, 0.15 * rs.received[step])
          << "p " << p << ": the reduce-scatter's bytes estimated from an all-gather step";
    }
  }
}

TEST(AutoExchange, ADamagedPieceInAMixedStepWritesNoOutputAnywhere) {
  const int p = 8;
  Comms comms = CreateInProcessGroup(p, 60.0);
  OnEveryRank(comms, [&](int rank, Communicator& comm) {
    auto x = GradientExchange::Create(comm, Tensors(rank), {ExchangeKind::kAuto});
    ASSERT_TRUE(x.ok());
    for (int step = 0; step < 2; ++step) {
      std::vector<std::vector<float>> g;
      for (size_t k = 0; k < 3; ++k) g.push_back(Grad(rank, k, (*x)->tensor(k).elements, step));
      std::vector<std::span<const float>> spans(g.begin(), g.end());
      std::vector<float> out((*x)->total_elements(), -7.0f);
      ExchangeResult result;
      // Step 1 mixes the two (the dense tensor by slices): damage the first
      // piece learner 3 sends.
      if (step == 1 && rank == 3) {
        exchange_internal::SetSendHook(**x, [](std::vector<uint8_t>& m) { m[4] ^= 0x20; });
      }
      const Status st = (*x)->Step(spans, 0.0, out, &result);
      if (step == 0) {
        ASSERT_TRUE(st.ok()) << st.ToString();
        continue;
      }
      EXPECT_FALSE(st.ok()) << "learner " << rank;
      EXPECT_NE(st.ToString().find("learner 3's piece"), std::string::npos) << st.ToString();
      for (float v : out) ASSERT_EQ(v, -7.0f) << "learner " << rank << " wrote its output";
    }
  });
}

TEST(ExchangeKindNames, RoundTrip) {
  testing::ExpectNamesRoundTrip(
      {ExchangeKind::kAllGather, ExchangeKind::kReduceScatter, ExchangeKind::kAuto},
      ExchangeKindName, ParseExchangeKind, "ring");
}

}  // namespace
}  // namespace adacomp
