// The reduce-scatter exchange against a simple reference: every learner's
// frames made by compressors of its own, decoded with DecodeAccumulate
// learner after learner into zeros and divided by P, element by element
// (the same additions, in the same order, as the slice owners'); and
// against the all-gather exchange of the same gradients, bit for bit. Group
// sizes 1, 2, 3, 4, 7, 16; tensors of 0, 1, fewer elements than P, odd and
// large sizes; every codec; supports that overlap fully and not at all;
// damaged pieces and slices.
#include "exchange/slice_exchange.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "adacomp/exchange.h"
#include "core/half.h"
#include "core/test_util.h"
#include "exchange/exchange_hooks.h"
#include "exchange/test_group.h"
#include "wire/frame.h"

namespace adacomp {
namespace {

using exchange_test::Comms;
using exchange_test::OnEveryRank;

const std::vector<uint64_t> kSizes = {0, 1, 5, 777, 20000};

CodecConfig Config(Codec codec, ValueMode values, size_t k, int rank) {
  CodecConfig c;
  c.codec = codec;
  c.values = values;
  c.bin_size = k % 2 ? 50 : 500;
  c.density = 0.05;
  c.seed = 1000 * static_cast<uint64_t>(rank) + k;
  return c;
}

std::vector<ExchangeTensor> Tensors(Codec codec, ValueMode values, int rank) {
  std::vector<ExchangeTensor> t;
  for (size_t k = 0; k < kSizes.size(); ++k) {
    // One dense tensor beside the others: it is cut as dense frames.
    const Codec c = k == 3 && codec != Codec::kDense ? Codec::kDense : codec;
    const ValueMode v = c == Codec::kDense ? ValueMode::kFp32 : values;
    t.push_back({"t" + std::to_string(k), kSizes[k], Config(c, v, k, rank)});
  }
  return t;
}

// Support: 0 = each learner's own gradient; 1 = every learner the same
// gradient (supports overlap fully); 2 = learner r's gradient is non-zero
// only on the r-th of P stripes (supports disjoint).
std::vector<float> Grad(int rank, int p, size_t k, int step, int support) {
  const uint64_t n = kSizes[k];
  const int who = support == 1 ? 0 : rank;
  std::vector<float> g = testing::GradientLike(
      n, 7919 * static_cast<uint64_t>(step) + 31 * k + static_cast<uint64_t>(who));
  if (support == 2) {
    for (uint64_t i = 0; i < n; ++i) {
      if (static_cast<int>(i * static_cast<uint64_t>(p) / std::max<uint64_t>(n, 1)) != rank) {
        g[i] = 0.0f;
      }
    }
  }
  return g;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

struct StepRun {
  std::vector<std::vector<float>> averaged;  // [rank]
  std::vector<ExchangeResult> results;       // [rank]
};

// kSteps steps of a group of p learners with the given exchange.
constexpr int kSteps = 3;

// One learner at a time in the CPU-bound phases, as the trainer's gate.
class OneAtATime : public ExchangeThrottle {
 public:
  void Acquire() override { mu_.lock(); }
  void Release() override { mu_.unlock(); }

 private:
  std::mutex mu_;
};

std::vector<StepRun> RunGroup(int p, Codec codec, ValueMode values, int support, ExchangeKind kind,
                              ExchangeThrottle* throttle = nullptr, double timeout = 60.0) {
  std::vector<StepRun> steps(kSteps);
  for (StepRun& s : steps) {
    s.averaged.resize(p);
    s.results.resize(p);
  }
  Comms comms = CreateInProcessGroup(p, timeout);
  OnEveryRank(comms, [&](int rank, Communicator& comm) {
    auto x = GradientExchange::Create(comm, Tensors(codec, values, rank), {kind});
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    for (int step = 0; step < kSteps; ++step) {
      std::vector<std::vector<float>> g;
      for (size_t k = 0; k < kSizes.size(); ++k) g.push_back(Grad(rank, p, k, step, support));
      std::vector<std::span<const float>> spans(g.begin(), g.end());
      std::vector<float>& out = steps[step].averaged[rank];
      out.assign((*x)->total_elements(), -7.0f);
      const Status st = (*x)->Step(spans, 0.0, out, &steps[step].results[rank], throttle);
      ASSERT_TRUE(st.ok()) << st.ToString();
    }
  });
  return steps;
}

// The reference: compressors of each learner made here, frames decoded
// learner after learner into zeros, divided by P.
std::vector<std::vector<float>> Reference(int p, Codec codec, ValueMode values, int support,
                                          std::vector<std::vector<uint64_t>>* selected) {
  std::vector<std::vector<std::unique_ptr<Compressor>>> refs(p);
  for (int r = 0; r < p; ++r) {
    const auto tensors = Tensors(codec, values, r);
    for (size_t k = 0; k < kSizes.size(); ++k) {
      auto c = Compressor::Create(tensors[k].codec, static_cast<uint32_t>(k), kSizes[k]);
      EXPECT_TRUE(c.ok());
      refs[r].push_back(std::move(*c));
    }
  }
  std::vector<std::vector<float>> out(kSteps);
  selected->assign(kSteps, std::vector<uint64_t>(kSizes.size(), 0));
  for (int step = 0; step < kSteps; ++step) {
    for (size_t k = 0; k < kSizes.size(); ++k) {
      std::vector<float> sum(kSizes[k], 0.0f);
      for (int r = 0; r < p; ++r) {
        std::vector<uint8_t> frame;
        CompressStats stats;
        EXPECT_TRUE(refs[r][k]->Compress(Grad(r, p, k, step, support), &frame, &stats).ok());
        EXPECT_TRUE(DecodeAccumulate(frame, sum).ok());
        (*selected)[step][k] += stats.selected;
      }
      for (float v : sum) out[step].push_back(v / static_cast<float>(p));
    }
  }
  return out;
}

using Param = std::tuple<int, std::tuple<Codec, ValueMode>, int>;
class SliceExchangeTest : public ::testing::TestWithParam<Param> {};

TEST_P(SliceExchangeTest, EqualsTheReferenceTheAllGatherAndAutoBitForBitOnEveryLearner) {
  const auto [p, codec_values, support] = GetParam();
  const auto [codec, values] = codec_values;
  const std::vector<StepRun> rs = RunGroup(p, codec, values, support, ExchangeKind::kReduceScatter);
  const std::vector<StepRun> ag = RunGroup(p, codec, values, support, ExchangeKind::kAllGather);
  const std::vector<StepRun> au = RunGroup(p, codec, values, support, ExchangeKind::kAuto);
  std::vector<std::vector<uint64_t>> selected;
  const auto ref = Reference(p, codec, values, support, &selected);
  for (int step = 0; step < kSteps; ++step) {
    for (int r = 0; r < p; ++r) {
      const auto& got = rs[step].averaged[r];
      ASSERT_EQ(got.size(), ref[step].size());
      size_t bad = got.size();
      for (size_t i = 0; i < got.size() && bad == got.size(); ++i) {
        if (!SameBits({&got[i], 1}, {&ref[step][i], 1})) bad = i;
      }
      // All dense is the ring all-reduce for either kind (exchange_test.cc
      // checks its sums), not the reference's order of additions.
      if (codec == Codec::kDense) bad = got.size();
      EXPECT_EQ(bad, got.size()) << "step " << step << " learner " << r << " element " << bad
                                 << ": " << got[bad] << " vs reference " << ref[step][bad];
      EXPECT_TRUE(SameBits(got, ag[step].averaged[r])) << "step " << step << " learner " << r;
      EXPECT_TRUE(SameBits(au[step].averaged[r], ag[step].averaged[r]))
          << "auto, step " << step << " learner " << r;
      const ExchangeResult& x = rs[step].results[r];
      if (codec != Codec::kDense) {  // all dense: the ring all-reduce, either kind
        EXPECT_EQ(x.selected, selected[step]) << "step " << step << " learner " << r;
        EXPECT_EQ(x.wire_bytes, rs[step].results[0].wire_bytes) << "learner " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    GroupsCodecsSupports, SliceExchangeTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 7, 16),
                       ::testing::Values(std::make_tuple(Codec::kAdaComp, ValueMode::kTernary),
                                         std::make_tuple(Codec::kAdaComp, ValueMode::kFp16),
                                         std::make_tuple(Codec::kTopK, ValueMode::kTernary),
                                         std::make_tuple(Codec::kThreshold, ValueMode::kTernary),
                                         std::make_tuple(Codec::kOneBit, ValueMode::kTernary),
                                         std::make_tuple(Codec::kTernGrad, ValueMode::kTernary),
                                         std::make_tuple(Codec::kDense, ValueMode::kFp32)),
                       ::testing::Values(0, 1, 2)));

// A throttle is never held across a collective (else the learners that
// wait for it deadlock with the one in the collective).
TEST(SliceExchangeThrottle, LearnersTakingTurnsGetTheSameResult) {
  OneAtATime gate;
  const auto turns = RunGroup(4, Codec::kAdaComp, ValueMode::kTernary, 0,
                              ExchangeKind::kReduceScatter, &gate, /*timeout=*/10.0);
  const auto free =
      RunGroup(4, Codec::kAdaComp, ValueMode::kTernary, 0, ExchangeKind::kReduceScatter);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(SameBits(turns[kSteps - 1].averaged[r], free[kSteps - 1].averaged[r]));
  }
}

// ---------------------------------------------------------------------------
// The pieces and the summed slices on their own.

TEST(CutFrame, PiecesDequantizeToTheFramesSlicesForEveryCodec) {
  for (Codec codec : {Codec::kAdaComp, Codec::kTopK, Codec::kThreshold, Codec::kDense,
                      Codec::kOneBit, Codec::kTernGrad}) {
    for (uint64_t n : {uint64_t{1}, uint64_t{6}, uint64_t{1001}}) {
      auto c = Compressor::Create(Config(codec, ValueMode::kTernary, 0, 3), 9, n);
      ASSERT_TRUE(c.ok());
      std::vector<uint8_t> frame;
      ASSERT_TRUE((*c)->Compress(testing::GradientLike(n, n + 5), &frame).ok());
      std::vector<float> whole(n, 0.0f);
      ASSERT_TRUE(DecodeAccumulate(frame, whole).ok());
      for (int p : {1, 4, 7}) {
        std::vector<std::vector<uint8_t>> pieces(p);
        ASSERT_TRUE(CutFrame(frame, p, &pieces).ok());
        size_t begin = 0;
        for (int d = 0; d < p; ++d) {
          const size_t len = n / p + (static_cast<uint64_t>(d) < n % p ? 1 : 0);
          if (len == 0) {
            EXPECT_TRUE(pieces[d].empty()) << "empty slice " << d << " got a piece";
            continue;
          }
          FrameInfo info;
          std::vector<float> part(len, 0.0f);
          ASSERT_TRUE(DecodeAccumulate(pieces[d], part, &info).ok())
              << CodecName(codec) << " n " << n << " p " << p << " slice " << d;
          EXPECT_EQ(info.codec, codec);
          EXPECT_EQ(info.tensor_id, 9u);
          EXPECT_EQ(info.frame_bytes, pieces[d].size()) << "one frame per piece";
          EXPECT_TRUE(SameBits(part, std::span<const float>(whole).subspan(begin, len)))
              << CodecName(codec) << " n " << n << " p " << p << " slice " << d;
          begin += len;
        }
        EXPECT_EQ(begin, n);
      }
    }
  }
}

TEST(EncodeSummedSlice, SparseWhenFewNonZerosDenseWhenManyExactEitherWay) {
  std::vector<float> few(1000, 0.0f);
  few[3] = 0.25f;
  few[500] = -0.0f;  // kept: its bits are not zero
  few[999] = -1e-30f;
  std::vector<float> many = testing::GradientLike(1000, 4);
  for (const auto* v : {&few, &many}) {
    std::vector<uint8_t> frame;
    ASSERT_TRUE(EncodeSummedSlice(2, *v, &frame).ok());
    FrameInfo info;
    ASSERT_TRUE(InspectFrame(frame, &info).ok());
    EXPECT_EQ(info.codec, v == &few ? Codec::kTopK : Codec::kDense);
    EXPECT_EQ(info.tensor_id, 2u);
    wire::Frame f;
    ASSERT_TRUE(wire::DecodeFrame(frame, {}, &f).ok());
    std::vector<float> back(v->size(), 0.0f);
    ASSERT_TRUE(wire::Dequantize(f, back).ok());
    if (v == &few) {
      EXPECT_EQ(f.indices, (std::vector<uint32_t>{3, 500, 999}));
      EXPECT_TRUE(std::signbit(f.values[1]));
      back[500] = -0.0f;  // Dequantize writes zeros where nothing was sent
    }
    EXPECT_TRUE(SameBits(back, *v));
    EXPECT_LE(frame.size(), 4 * v->size() + 16) << "never larger than the dense frame";
  }
  std::vector<float> inf(4, 0.0f);
  inf[1] = INFINITY;
  std::vector<uint8_t> frame;
  EXPECT_FALSE(EncodeSummedSlice(0, inf, &frame).ok());
}

// float16 averaged slices: every learner ends with the all-gather's average
// rounded to binary16, element by element (zeros where it rounds to +0).
TEST(SliceExchangeFp16, EveryLearnerTakesTheAllGathersAverageRoundedToFloat16) {
  for (int p : {1, 3, 4, 16}) {
    const std::vector<StepRun> ag =
        RunGroup(p, Codec::kAdaComp, ValueMode::kTernary, 0, ExchangeKind::kAllGather);
    std::vector<std::vector<float>> got(p);
    Comms comms = CreateInProcessGroup(p, 60.0);
    OnEveryRank(comms, [&](int rank, Communicator& comm) {
      ExchangeOptions o;
      o.kind = ExchangeKind::kReduceScatter;
      o.summed_values = ValueMode::kFp16;
      auto x =
          GradientExchange::Create(comm, Tensors(Codec::kAdaComp, ValueMode::kTernary, rank), o);
      ASSERT_TRUE(x.ok()) << x.status().ToString();
      std::vector<std::vector<float>> g;
      for (size_t k = 0; k < kSizes.size(); ++k) g.push_back(Grad(rank, p, k, 0, 0));
      std::vector<std::span<const float>> spans(g.begin(), g.end());
      got[rank].assign((*x)->total_elements(), -7.0f);
      ExchangeResult result;
      const Status st = (*x)->Step(spans, 0.0, got[rank], &result);
      ASSERT_TRUE(st.ok()) << st.ToString();
    });
    const std::vector<float>& exact = ag[0].averaged[0];
    size_t rounded_differently = 0;
    for (int r = 0; r < p; ++r) {
      ASSERT_EQ(got[r].size(), exact.size());
      EXPECT_TRUE(SameBits(got[r], got[0])) << "p " << p << ": learner " << r << " differs";
      for (size_t i = 0; i < exact.size(); ++i) {
        const uint16_t h = internal::FloatToHalf(exact[i]);
        const float want = h == 0 ? 0.0f : internal::HalfToFloat(h);
        if (!SameBits({&got[r][i], 1}, {&want, 1})) {
          ADD_FAILURE() << "p " << p << " learner " << r << " element " << i << ": " << got[r][i]
                        << " for " << exact[i] << " (binary16: " << want << ")";
          break;
        }
        rounded_differently += got[r][i] != exact[i];
      }
    }
    EXPECT_GT(rounded_differently, 0u) << "p " << p << ": nothing was rounded";
  }
}

TEST(EncodeSummedSlice, Float16KeepsTheRoundedNonZerosAndRefusesOverflow) {
  std::vector<float> v = {0.0f, 1.0f / 3.0f, -1e-9f, 1e-5f, -2.5f, 0.0f};
  std::vector<uint8_t> frame;
  ASSERT_TRUE(EncodeSummedSlice(1, v, &frame, ValueMode::kFp16).ok());
  wire::Frame f;
  ASSERT_TRUE(wire::DecodeFrame(frame, {}, &f).ok());
  EXPECT_EQ(f.codec, Codec::kAdaComp);
  EXPECT_EQ(f.params.values, ValueMode::kFp16);
  // -1e-9 rounds to -0 in binary16: kept, its bits are not zero.
  EXPECT_EQ(f.indices, (std::vector<uint32_t>{1, 2, 3, 4}));
  std::vector<float> back(v.size(), 0.0f);
  ASSERT_TRUE(wire::Dequantize(f, back).ok());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = internal::FloatToHalf(v[i]);
    EXPECT_EQ(back[i], h == 0 ? 0.0f : internal::HalfToFloat(h)) << i;
  }
  std::vector<float> big = {1.0f, 70000.0f};
  frame.clear();
  const Status st = EncodeSummedSlice(0, big, &frame, ValueMode::kFp16);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("float16"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Damage: every learner returns an error naming who sent what; nothing is
// written to any learner's output.

void ExpectDamageFailsEverywhere(int p, int victim,
                                 const std::function<void(std::vector<uint8_t>&)>& damage,
                                 const std::string& expected) {
  Comms comms = CreateInProcessGroup(p, 60.0);
  OnEveryRank(comms, [&](int rank, Communicator& comm) {
    auto x = GradientExchange::Create(comm, Tensors(Codec::kAdaComp, ValueMode::kTernary, rank),
                                      {ExchangeKind::kReduceScatter});
    ASSERT_TRUE(x.ok());
    if (rank == victim) exchange_internal::SetSendHook(**x, damage);
    std::vector<std::vector<float>> g;
    for (size_t k = 0; k < kSizes.size(); ++k) g.push_back(Grad(rank, p, k, 0, 0));
    std::vector<std::span<const float>> spans(g.begin(), g.end());
    std::vector<float> out((*x)->total_elements(), -7.0f);
    ExchangeResult result;
    const Status st = (*x)->Step(spans, 0.0, out, &result);
    EXPECT_FALSE(st.ok()) << "learner " << rank;
    EXPECT_NE(st.ToString().find(expected), std::string::npos)
        << "learner " << rank << ": " << st.ToString();
    for (float v : out) ASSERT_EQ(v, -7.0f) << "learner " << rank << " wrote its output";
  });
}

TEST(SliceExchangeDamage, AFlippedByteInAPieceFailsOnEveryLearnerAndWritesNothing) {
  // Learner 2's first piece is its piece for learner 0 (tensor 1's slice 0).
  ExpectDamageFailsEverywhere(
      4, 2, [](std::vector<uint8_t>& m) { m[5] ^= 0x10; }, "learner 2's piece of tensor 1 (t1)");
}

TEST(SliceExchangeDamage, TruncatedPiecesFailOnEveryLearnerAndWriteNothing) {
  ExpectDamageFailsEverywhere(
      3, 1, [](std::vector<uint8_t>& m) { m.resize(m.size() - 3); }, "learner 1's piece");
}

}  // namespace
}  // namespace adacomp
