// GradientExchange on the in-process group (every learner a thread), crossed
// with group sizes and codecs, against a simple reference built from the
// codec's own pieces: each learner's compressor made separately, the frames
// added with DecodeAccumulate learner after learner into zeros and divided
// by P element by element (dense: the ring all-reduce's sum over the flat
// buffer, each chunk folded from its own rank round the ring, divided by P;
// dense fp16: every value divided by P first, the partial sums rounded to
// half at every hop and at the end).
#include "adacomp/exchange.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/half.h"
#include "core/test_util.h"
#include "exchange/exchange_hooks.h"
#include "exchange/test_group.h"

namespace adacomp {
namespace {

using exchange_test::Comms;
using exchange_test::OnEveryRank;

const std::vector<uint64_t> kSizes = {0, 1, 50, 777, 20000};

// Learner `rank`'s tensors for a codec; the seed differs per learner and
// tensor like the trainer's.
std::vector<ExchangeTensor> Tensors(Codec codec, int rank, bool half = false) {
  std::vector<ExchangeTensor> t;
  for (size_t k = 0; k < kSizes.size(); ++k) {
    ExchangeTensor e;
    e.name = std::string("t").append(std::to_string(k));
    e.elements = kSizes[k];
    e.codec.codec = codec;
    e.codec.bin_size = k % 2 ? 50 : 500;
    e.codec.density = 0.05;
    e.codec.seed = 1000 * static_cast<uint64_t>(rank) + k;
    if (half) e.codec.values = ValueMode::kFp16;
    t.push_back(e);
  }
  return t;
}

std::vector<float> Grad(int rank, size_t k, int step) {
  return testing::GradientLike(
      kSizes[k], 7919 * static_cast<uint64_t>(step) + 31 * k + static_cast<uint64_t>(rank));
}

float RoundHalf(float x) { return internal::HalfToFloat(internal::FloatToHalf(x)); }

// The dense reference: every learner's step-`step` gradients, flat, summed
// as the ring does, scalar (chunk c of P, the first T % P one longer, is
// the left fold from rank c round the ring), and averaged.
std::vector<float> RingAverage(int p, int step, bool half) {
  std::vector<std::vector<float>> flat(p);
  for (int r = 0; r < p; ++r) {
    for (size_t k = 0; k < kSizes.size(); ++k) {
      const std::vector<float> g = Grad(r, k, step);
      for (float v : g) flat[r].push_back(half ? v / static_cast<float>(p) : v);
    }
  }
  const size_t total = flat[0].size();
  std::vector<float> out(total);
  size_t begin = 0;
  for (int c = 0; c < p; ++c) {
    const size_t len = total / p + (static_cast<size_t>(c) < total % p ? 1 : 0);
    for (size_t i = begin; i < begin + len; ++i) {
      float acc = flat[c][i];
      for (int k = 1; k < p; ++k) acc = (half ? RoundHalf(acc) : acc) + flat[(c + k) % p][i];
      out[i] = half ? RoundHalf(acc) : acc / static_cast<float>(p);
    }
    begin += len;
  }
  return out;
}

// The reference average of every learner's step-`step` gradient of tensor
// k, given the reference compressors (refs[rank][k]), which it advances.
// Not for dense (RingAverage).
std::vector<float> Reference(Codec /*codec: the refs were made for it*/, int p, size_t k, int step,
                             std::vector<std::vector<std::unique_ptr<Compressor>>>& refs,
                             uint64_t* wire, uint64_t* selected) {
  std::vector<float> sum(kSizes[k], 0.0f);
  *wire = 0;
  *selected = 0;
  for (int r = 0; r < p; ++r) {
    const std::vector<float> g = Grad(r, k, step);
    std::vector<uint8_t> frame;
    CompressStats stats;
    EXPECT_TRUE(refs[r][k]->Compress(g, &frame, &stats).ok());
    EXPECT_TRUE(DecodeAccumulate(frame, sum).ok());
    *wire += frame.size();
    *selected += stats.selected;
  }
  for (float& v : sum) v = v / static_cast<float>(p);
  return sum;
}

class ExchangeTest : public ::testing::TestWithParam<std::tuple<int, Codec, bool>> {};

TEST_P(ExchangeTest, MatchesTheReferenceOnEveryLearner) {
  const auto [p, codec, half] = GetParam();
  auto comms = CreateInProcessGroup(p, 30.0);
  constexpr int kSteps = 3;
  // got[step][rank]: averaged output; results[step][rank].
  std::vector<std::vector<std::vector<float>>> got(kSteps, std::vector<std::vector<float>>(p));
  std::vector<std::vector<ExchangeResult>> results(kSteps, std::vector<ExchangeResult>(p));
  std::vector<Status> status(static_cast<size_t>(p));
  OnEveryRank(comms, [&](int rank, Communicator& comm) {
    auto x = GradientExchange::Create(comm, Tensors(codec, rank, half));
    if (!x.ok()) {
      status[rank] = x.status();
      return;
    }
    EXPECT_EQ((*x)->all_reduce(), codec == Codec::kDense);
    EXPECT_EQ((*x)->all_reduce_half(), half);
    for (int step = 0; step < kSteps; ++step) {
      std::vector<std::vector<float>> grads;
      std::vector<std::span<const float>> spans;
      for (size_t k = 0; k < kSizes.size(); ++k) grads.push_back(Grad(rank, k, step));
      for (const auto& g : grads) spans.emplace_back(g);
      got[step][rank].assign((*x)->total_elements(), -5.0f);
      Status st = (*x)->Step(spans, 0.5 * rank + step, got[step][rank], &results[step][rank]);
      if (!st.ok()) {
        status[rank] = st;
        return;
      }
    }
  });
  for (const Status& st : status) ASSERT_TRUE(st.ok()) << st.ToString();

  std::vector<std::vector<std::unique_ptr<Compressor>>> refs(static_cast<size_t>(p));
  if (codec != Codec::kDense) {
    for (int r = 0; r < p; ++r) {
      const auto t = Tensors(codec, r);
      for (size_t k = 0; k < t.size(); ++k) {
        refs[r].push_back(std::move(
            Compressor::Create(t[k].codec, static_cast<uint32_t>(k), t[k].elements).value()));
      }
    }
  }
  for (int step = 0; step < kSteps; ++step) {
    size_t offset = 0;
    const std::vector<float> ring =
        codec == Codec::kDense ? RingAverage(p, step, half) : std::vector<float>();
    for (size_t k = 0; k < kSizes.size(); ++k) {
      uint64_t wire = 0, selected = 0;
      std::vector<float> want;
      if (codec == Codec::kDense) {
        want.assign(ring.begin() + offset, ring.begin() + offset + kSizes[k]);
        wire = (half ? 2 : 4) * kSizes[k] * p;
        selected = kSizes[k] * p;
      } else {
        want = Reference(codec, p, k, step, refs, &wire, &selected);
      }
      for (int r = 0; r < p; ++r) {
        SCOPED_TRACE("step " + std::to_string(step) + " tensor " + std::to_string(k) + " learner " +
                     std::to_string(r));
        if (!want.empty()) {  // memcmp takes no null pointer, even for 0 bytes
          ASSERT_EQ(0, std::memcmp(got[step][r].data() + offset, want.data(), want.size() * 4));
        }
        const ExchangeResult& res = results[step][r];
        EXPECT_FALSE(res.skipped());
        EXPECT_EQ(res.wire_bytes[k], wire);
        EXPECT_EQ(res.selected[k], selected);
        ASSERT_EQ(res.values.size(), static_cast<size_t>(p));
        for (int q = 0; q < p; ++q) EXPECT_EQ(res.values[q], 0.5 * q + step);
      }
      offset += kSizes[k];
    }
    // The transport bytes: the same figure on every learner for the ring
    // (to within a chunk), the agreement's all-gather and headers included.
    for (int r = 0; r < p; ++r) {
      const ExchangeResult& res = results[step][r];
      const uint64_t agree = p > 1 ? 16 * (p - 1) + 32 * (p - 1) : 0;
      if (codec == Codec::kDense && p > 1) {
        const uint64_t total = got[step][r].size();
        const uint64_t ring = 2 * (p - 1) * (total / p) * (half ? 2 : 4);
        EXPECT_GE(res.transport_sent_bytes, agree + 32 * (p - 1) + ring);
        EXPECT_LE(res.transport_sent_bytes,
                  agree + 32 * (p - 1) + ring + 2 * (p - 1) * (half ? 2 : 4));
        EXPECT_GE(res.transport_received_bytes, agree + 32 * (p - 1) + ring);
      } else if (p > 1) {
        uint64_t others = 0;
        for (size_t k = 0; k < kSizes.size(); ++k) others += res.wire_bytes[k];
        // wire_bytes sums every learner's frames; this learner received the others'.
        EXPECT_LT(res.transport_received_bytes, agree + 32 * (p - 1) + others);
        EXPECT_GT(res.transport_received_bytes, agree + 32 * (p - 1));
      } else {
        EXPECT_EQ(res.transport_sent_bytes, 0u);
        EXPECT_EQ(res.transport_received_bytes, 0u);
      }
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<ExchangeTest::ParamType>& info) {
  return std::string(CodecName(std::get<1>(info.param)))
      .append(std::get<2>(info.param) ? "_fp16" : "")
      .append("_p")
      .append(std::to_string(std::get<0>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(GroupsAndCodecs, ExchangeTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(Codec::kAdaComp, Codec::kTopK,
                                                              Codec::kTernGrad, Codec::kDense),
                                            ::testing::Values(false)),
                         ParamName);
INSTANTIATE_TEST_SUITE_P(DenseFp16, ExchangeTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(Codec::kDense),
                                            ::testing::Values(true)),
                         ParamName);

// Dense fp16 is the fp16 all-reduce of every tensor: beside another codec,
// or dense tensors with float32 values, it is refused, naming the tensor.
TEST(ExchangeTest, DenseFp16MustCoverEveryTensor) {
  auto comms = CreateInProcessGroup(1, 30.0);
  auto mixed = Tensors(Codec::kDense, 0, true);
  mixed[2].codec.codec = Codec::kAdaComp;
  auto bad = GradientExchange::Create(*comms[0], mixed);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("tensor 2 (t2) is adacomp"), std::string::npos)
      << bad.status().ToString();
  auto some = Tensors(Codec::kDense, 0, true);
  some[4].codec.values = ValueMode::kFp32;
  bad = GradientExchange::Create(*comms[0], some);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tensor 4 (t4) is dense with float32 values"),
            std::string::npos)
      << bad.status().ToString();
}

// fp16 dense replicas agree bit for bit and stay within half rounding of
// the float32 average.
TEST(ExchangeTest, DenseFp16IsCloseToTheFloat32Average) {
  constexpr int p = 4;
  std::vector<std::vector<float>> out32(p), out16(p);
  for (bool half : {false, true}) {
    auto comms = CreateInProcessGroup(p, 30.0);
    OnEveryRank(comms, [&](int rank, Communicator& comm) {
      auto x =
          std::move(GradientExchange::Create(comm, Tensors(Codec::kDense, rank, half)).value());
      std::vector<std::vector<float>> grads;
      for (size_t k = 0; k < kSizes.size(); ++k) grads.push_back(Grad(rank, k, 2));
      std::vector<std::span<const float>> spans(grads.begin(), grads.end());
      auto& out = half ? out16[rank] : out32[rank];
      out.assign(x->total_elements(), 0.0f);
      ExchangeResult r;
      ASSERT_TRUE(x->Step(spans, 0.0, out, &r).ok());
    });
  }
  for (int r = 1; r < p; ++r) EXPECT_EQ(out16[r], out16[0]);
  double max_rel = 0;
  for (size_t i = 0; i < out32[0].size(); ++i) {
    const double a = out32[0][i], b = out16[0][i];
    if (std::fabs(a) > 1e-3) max_rel = std::max(max_rel, std::fabs(a - b) / std::fabs(a));
  }
  EXPECT_LT(max_rel, 0.01);
  EXPECT_NE(out32[0], out16[0]);
}

// A NaN on one learner: every learner skips the step and says who and
// where; nothing is written and the residues stay as they were (the next
// step equals a run that never saw the bad step).
TEST(ExchangeTest, NonFiniteGradientSkipsTheStepEverywhere) {
  for (Codec codec : {Codec::kAdaComp, Codec::kDense}) {
    constexpr int p = 3;
    auto comms = CreateInProcessGroup(p, 30.0);
    std::vector<std::vector<float>> after_bad(p), clean(p);
    std::vector<ExchangeResult> bad_result(p);
    OnEveryRank(comms, [&](int rank, Communicator& comm) {
      auto x = std::move(GradientExchange::Create(comm, Tensors(codec, rank)).value());
      std::vector<std::vector<float>> grads;
      for (size_t k = 0; k < kSizes.size(); ++k) grads.push_back(Grad(rank, k, 0));
      std::vector<float> poisoned = grads[3];
      if (rank == 1) grads[3][5] = std::numeric_limits<float>::infinity();
      std::vector<std::span<const float>> spans(grads.begin(), grads.end());
      std::vector<float> out(x->total_elements(), 2.0f);
      ASSERT_TRUE(x->Step(spans, 1.0, out, &bad_result[rank]).ok());
      for (float v : out) ASSERT_EQ(v, 2.0f);
      grads[3] = poisoned;
      std::vector<std::span<const float>> good(grads.begin(), grads.end());
      after_bad[rank].assign(x->total_elements(), 0.0f);
      ExchangeResult r;
      ASSERT_TRUE(x->Step(good, 1.0, after_bad[rank], &r).ok());
      EXPECT_FALSE(r.skipped());
    });
    auto comms2 = CreateInProcessGroup(p, 30.0);
    OnEveryRank(comms2, [&](int rank, Communicator& comm) {
      auto x = std::move(GradientExchange::Create(comm, Tensors(codec, rank)).value());
      std::vector<std::vector<float>> grads;
      for (size_t k = 0; k < kSizes.size(); ++k) grads.push_back(Grad(rank, k, 0));
      std::vector<std::span<const float>> spans(grads.begin(), grads.end());
      clean[rank].assign(x->total_elements(), 0.0f);
      ExchangeResult r;
      ASSERT_TRUE(x->Step(spans, 1.0, clean[rank], &r).ok());
    });
    for (int r = 0; r < p; ++r) {
      ASSERT_TRUE(bad_result[r].skipped());
      ASSERT_EQ(bad_result[r].non_finite.size(), 1u);
      EXPECT_EQ(bad_result[r].non_finite[0], (std::pair<int, int32_t>{1, 3}));
      EXPECT_TRUE(bad_result[r].wire_bytes.empty());
      EXPECT_EQ(after_bad[r], clean[r]);
    }
  }
}

// A message damaged in transit, or with a byte after its last frame: every
// learner fails naming the sender, and the output is untouched.
TEST(ExchangeTest, DamagedMessagesFailOnEveryLearner) {
  struct Case {
    std::function<void(std::vector<uint8_t>&)> damage;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {[](std::vector<uint8_t>& m) { m[m.size() / 2] ^= 0x10; }, "learner 2's frame for tensor"},
      {[](std::vector<uint8_t>& m) { m.push_back(0); },
       "learner 2's message has 1 bytes after its last frame"},
      {[](std::vector<uint8_t>& m) { m.resize(m.size() - 1); },
       "learner 2's frame for tensor 4 (t4)"},
  };
  for (const Case& c : cases) {
    constexpr int p = 3;
    auto comms = CreateInProcessGroup(p, 30.0);
    std::vector<Status> status(p);
    std::vector<bool> untouched(p, false);
    OnEveryRank(comms, [&](int rank, Communicator& comm) {
      auto x = std::move(GradientExchange::Create(comm, Tensors(Codec::kAdaComp, rank)).value());
      if (rank == 2) exchange_internal::SetSendHook(*x, c.damage);
      std::vector<std::vector<float>> grads;
      for (size_t k = 0; k < kSizes.size(); ++k) grads.push_back(Grad(rank, k, 1));
      std::vector<std::span<const float>> spans(grads.begin(), grads.end());
      std::vector<float> out(x->total_elements(), 9.0f);
      ExchangeResult r;
      status[rank] = x->Step(spans, 0.0, out, &r);
      untouched[rank] = std::all_of(out.begin(), out.end(), [](float v) { return v == 9.0f; });
    });
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(status[r].code(), StatusCode::kCorruption) << status[r].ToString();
      EXPECT_NE(status[r].message().find(c.needle), std::string::npos) << status[r].ToString();
      EXPECT_TRUE(untouched[r]);
    }
  }
}

TEST(ExchangeTest, BadArgumentsAreRefused) {
  auto comms = CreateInProcessGroup(1, 30.0);
  auto tensors = Tensors(Codec::kAdaComp, 0);
  tensors[1].codec.bin_size = 0;
  auto bad = GradientExchange::Create(*comms[0], tensors);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tensor 1 (t1)"), std::string::npos);
  auto x = std::move(GradientExchange::Create(*comms[0], Tensors(Codec::kAdaComp, 0)).value());
  std::vector<float> g(3);
  std::vector<std::span<const float>> spans(kSizes.size(), std::span<const float>(g));
  std::vector<float> out(x->total_elements());
  ExchangeResult r;
  EXPECT_EQ(x->Step(spans, 0.0, out, &r).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(x->Step({}, 0.0, out, &r).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace adacomp
