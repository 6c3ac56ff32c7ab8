// Tests for the in-process communicator group, gloo style: every rank is a
// thread of this process, and the collectives are crossed with rank counts
// {1, 2, 3, 4, 8, 16} and sizes {0, 1, odd, large}. Expected values come
// from simple scalar formulas computed independently in each test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "../collective_test_data.h"
#include "adacomp/communicator.h"

namespace adacomp {
namespace {

// s is InvalidArgument, and its message contains every one of `parts`.
void ExpectInvalidNaming(const Status& s, std::initializer_list<std::string_view> parts) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  for (std::string_view part : parts) {
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " in " << s.ToString();
  }
}

using namespace comm_test;  // NOLINT: the shared inputs and references

using Comms = std::vector<std::unique_ptr<Communicator>>;
using Clock = std::chrono::steady_clock;

// A generous timeout so that a broken test fails instead of hanging.
constexpr double kTestTimeout = 30.0;

// Runs body(comm) for every rank, each on its own thread, and joins them.
void OnEveryRank(Comms& comms, const std::function<void(Communicator&)>& body) {
  std::vector<std::thread> threads;
  threads.reserve(comms.size());
  for (auto& c : comms) threads.emplace_back([&body, comm = c.get()] { body(*comm); });
  for (auto& t : threads) t.join();
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What rank `viewer` received: from every rank r, length(r) bytes, byte i
// being byte(r, i); the first wrong byte is reported.
template <typename Length, typename Byte>
void ExpectReceived(const GatheredBuffers& g, int ranks, int viewer, Length length, Byte byte) {
  ASSERT_EQ(g.ranks(), static_cast<size_t>(ranks)) << "viewer rank " << viewer;
  ASSERT_EQ(g.offsets.front(), 0u);
  ASSERT_EQ(g.offsets.back(), g.data.size());
  for (int r = 0; r < ranks; ++r) {
    std::span<const uint8_t> got = g.rank(r);
    ASSERT_EQ(got.size(), length(r)) << "viewer " << viewer << " from rank " << r;
    size_t bad = got.size();
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != byte(r, i)) {
        bad = i;
        break;
      }
    }
    EXPECT_EQ(bad, got.size()) << "viewer " << viewer << ": rank " << r
                               << "'s bytes differ first at index " << bad;
  }
}

// Checks a gathered result against the formula, element by element.
void ExpectGathered(const GatheredBuffers& g, int ranks, size_t n, int salt, int viewer) {
  ExpectReceived(
      g, ranks, viewer, [&](int r) { return GatherLength(r, n); },
      [&](int r, size_t i) { return ByteOf(r, i, salt); });
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

// ---------------------------------------------------------------------------
// Ranks x sizes.

class CollectiveTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  int ranks() const { return std::get<0>(GetParam()); }
  size_t n() const { return std::get<1>(GetParam()); }
};

TEST_P(CollectiveTest, AllGatherVReturnsEveryRanksBytesInRankOrder) {
  Comms comms = CreateInProcessGroup(ranks(), kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) {
    EXPECT_EQ(c.size(), ranks());
    const std::vector<uint8_t> mine = GatherInput(c.rank(), n(), 1);
    GatheredBuffers out;
    out.data.assign(5, 0xEE);  // stale contents must be replaced
    ASSERT_TRUE(c.AllGatherV(mine, &out).ok());
    ExpectGathered(out, ranks(), n(), 1, c.rank());
  });
}

// Rank `viewer` received from every rank r exactly the piece r addressed to it.
void ExpectPieces(const GatheredBuffers& g, int ranks, size_t n, int salt, int viewer) {
  ExpectReceived(
      g, ranks, viewer, [&](int r) { return PieceLength(r, viewer, n); },
      [&](int r, size_t i) { return PieceByteOf(r, viewer, i, salt); });
}

TEST_P(CollectiveTest, AllToAllVDeliversEachPieceToItsRankAndCountsItsBytes) {
  Comms comms = CreateInProcessGroup(ranks(), kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<size_t> offsets;
    const std::vector<uint8_t> mine = PiecesOf(c.rank(), ranks(), n(), 3, &offsets);
    GatheredBuffers out;
    out.data.assign(7, 0xEE);  // stale contents must be replaced
    out.offsets.assign(2, 3);
    const CommTraffic before = c.traffic();
    ASSERT_TRUE(c.AllToAllV(mine, offsets, &out).ok());
    ExpectPieces(out, ranks(), n(), 3, c.rank());
    // Scalar count: a header and a length each way per peer, the pieces
    // for (from) the other ranks.
    uint64_t sent = 0, received = 0;
    for (int r = 0; r < ranks(); ++r) {
      if (r == c.rank()) continue;
      sent += 32 + 8 + PieceLength(c.rank(), r, n());
      received += 32 + 8 + PieceLength(r, c.rank(), n());
    }
    const CommTraffic after = c.traffic();
    EXPECT_EQ(after.sent_bytes - before.sent_bytes, sent);
    EXPECT_EQ(after.received_bytes - before.received_bytes, received);
    EXPECT_EQ(after.collectives - before.collectives, 1u);
  });
}

TEST_P(CollectiveTest, AllReduceSumIsTheRingFoldBitForBitOnEveryRank) {
  Comms comms = CreateInProcessGroup(ranks(), kTestTimeout);
  const std::vector<float> expected = ExpectedSum(ranks(), n(), 2);
  EXPECT_EQ(FirstOutsideRounding(expected, ranks(), 2), n());
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<float> data(n());
    for (size_t i = 0; i < n(); ++i) data[i] = FloatOf(c.rank(), i, 2);
    ASSERT_TRUE(c.AllReduceSum(data).ok());
    EXPECT_TRUE(SameBits(data, expected)) << "rank " << c.rank();
    EXPECT_EQ(FirstOutsideRounding(data, ranks(), 2), n()) << "rank " << c.rank();
  });
}

TEST_P(CollectiveTest, AllReduceSumHalfIsTheHalfRingFoldBitForBitOnEveryRank) {
  Comms comms = CreateInProcessGroup(ranks(), kTestTimeout);
  const std::vector<float> expected = ExpectedHalfSum(ranks(), n(), 4);
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<float> data(n());
    for (size_t i = 0; i < n(); ++i) data[i] = HalfInputOf(c.rank(), i, 4);
    ASSERT_TRUE(c.AllReduceSumHalf(data).ok());
    EXPECT_TRUE(SameBits(data, expected)) << "rank " << c.rank();
    EXPECT_EQ(FirstOutsideRounding(data, ranks(), 4, HalfInputOf, true), n())
        << "rank " << c.rank();
    size_t not_half = n();
    for (size_t i = 0; i < n(); ++i) {
      if (RoundHalf(data[i]) != data[i]) {
        not_half = i;
        break;
      }
    }
    EXPECT_EQ(not_half, n()) << "every result is a half value";
  });
}

// Traffic: the ring moves 2 (P - 1) chunks each way (4 or 2 bytes a value),
// plus a 32-byte header to and from each peer per collective; the totals
// over ranks balance.
TEST_P(CollectiveTest, TrafficCountsTheRingsChunksAndTheHeaders) {
  const int p = ranks();
  Comms comms = CreateInProcessGroup(p, kTestTimeout);
  std::vector<CommTraffic> after(p);
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<float> data(n(), 1.0f);
    ASSERT_TRUE(c.AllReduceSum(data).ok());
    ASSERT_TRUE(c.AllReduceSumHalf(data).ok());
    after[c.rank()] = c.traffic();
  });
  uint64_t sent = 0, received = 0;
  for (int r = 0; r < p; ++r) {
    EXPECT_EQ(after[r].collectives, 2u);
    // Chunks this rank sends: all but (r + 1) and (r + 2) mod P; receives:
    // all but r and (r + 1) mod P.
    auto len = [&](int c) { return ChunkStart(n(), p, c % p + 1) - ChunkStart(n(), p, c % p); };
    uint64_t want_sent = p > 1 ? 2 * n() - len(r + 1) - len(r + 2) : 0;
    uint64_t want_received = p > 1 ? 2 * n() - len(r) - len(r + 1) : 0;
    const uint64_t headers = 2 * 32 * static_cast<uint64_t>(p - 1);
    EXPECT_EQ(after[r].sent_bytes, 6 * want_sent + headers) << "rank " << r;
    EXPECT_EQ(after[r].received_bytes, 6 * want_received + headers) << "rank " << r;
    sent += after[r].sent_bytes;
    received += after[r].received_bytes;
  }
  EXPECT_EQ(sent, received);
  if (n() % p == 0) {
    // Exactly 2 (P - 1) / P of the buffer, fp32 and fp16.
    EXPECT_EQ(after[0].sent_bytes - 2 * 32 * (p - 1), 2 * (p - 1) * n() / p * 6);
  }
}

TEST_P(CollectiveTest, BroadcastCopiesTheRootsBytesFromEveryRoot) {
  Comms comms = CreateInProcessGroup(ranks(), kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) {
    const int roots[2] = {ranks() - 1, 0};
    for (int root : roots) {
      std::vector<uint8_t> data(n());
      for (size_t i = 0; i < n(); ++i) data[i] = ByteOf(c.rank(), i, 3 + root);
      ASSERT_TRUE(c.Broadcast(data, root).ok());
      size_t bad = n();
      for (size_t i = 0; i < n(); ++i) {
        if (data[i] != ByteOf(root, i, 3 + root)) {
          bad = i;
          break;
        }
      }
      EXPECT_EQ(bad, n()) << "rank " << c.rank() << " root " << root;
    }
  });
}

TEST_P(CollectiveTest, BarrierHoldsEveryRankUntilAllArrive) {
  Comms comms = CreateInProcessGroup(ranks(), kTestTimeout);
  std::atomic<int> arrivals{0};
  OnEveryRank(comms, [&](Communicator& c) {
    for (int round = 1; round <= 3; ++round) {
      if (c.rank() == ranks() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      arrivals.fetch_add(1);
      ASSERT_TRUE(c.Barrier().ok());
      EXPECT_GE(arrivals.load(), round * ranks()) << "rank " << c.rank() << " round " << round;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(RanksBySizes, CollectiveTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8, 16),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{1001},
                                                              size_t{1000000})),
                         [](const auto& info) {
                           std::string name = "P";
                           name += std::to_string(std::get<0>(info.param));
                           name += "_N";
                           name += std::to_string(std::get<1>(info.param));
                           return name;
                         });

// ---------------------------------------------------------------------------
// Many consecutive collectives: results must match the call order.

class SequenceTest : public ::testing::TestWithParam<int> {};

TEST_P(SequenceTest, ManyMixedCollectivesInARowEachGetTheirOwnResult) {
  const int ranks = GetParam();
  Comms comms = CreateInProcessGroup(ranks, kTestTimeout);
  constexpr int kSteps = 240;
  OnEveryRank(comms, [&](Communicator& c) {
    for (int step = 0; step < kSteps; ++step) {
      const size_t n = static_cast<size_t>((step * 37) % 23);
      // Uneven pacing so that fast ranks run ahead into the next collective.
      if ((step + c.rank()) % 7 == 0) std::this_thread::yield();
      switch (step % 4) {
        case 0: {
          GatheredBuffers out;
          ASSERT_TRUE(c.AllGatherV(GatherInput(c.rank(), n, step), &out).ok());
          ExpectGathered(out, ranks, n, step, c.rank());
          break;
        }
        case 1: {
          std::vector<float> data(n);
          for (size_t i = 0; i < n; ++i) data[i] = FloatOf(c.rank(), i, step);
          if (step % 8 == 1) {
            ASSERT_TRUE(c.AllReduceSum(data).ok());
            ASSERT_TRUE(SameBits(data, ExpectedSum(ranks, n, step)))
                << "step " << step << " rank " << c.rank();
          } else {
            for (size_t i = 0; i < n; ++i) data[i] = HalfInputOf(c.rank(), i, step);
            ASSERT_TRUE(c.AllReduceSumHalf(data).ok());
            ASSERT_TRUE(SameBits(data, ExpectedHalfSum(ranks, n, step)))
                << "step " << step << " rank " << c.rank();
          }
          break;
        }
        case 2: {
          const int root = step % ranks;
          std::vector<uint8_t> data(n);
          for (size_t i = 0; i < n; ++i) data[i] = ByteOf(c.rank(), i, step);
          ASSERT_TRUE(c.Broadcast(data, root).ok());
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(data[i], ByteOf(root, i, step)) << step;
          break;
        }
        case 3:
          ASSERT_TRUE(c.Barrier().ok());
          break;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, SequenceTest, ::testing::Values(1, 2, 3, 4, 8, 16));

// ---------------------------------------------------------------------------
// Summation order and signed zero.

TEST(InProcessAllReduceSum, EachChunkFoldsFromItsOwnRankRoundTheRing) {
  // (1e8 + 1) - 1e8 == 0 in float; (1e8 - 1e8) + 1 == 1. Three elements,
  // one per chunk; element e is 1e8 on rank e, 1 on rank e + 1 and -1e8 on
  // rank e + 2 (mod 3), so the ring's fold (from rank e) gives 0 for each,
  // where a rank-order fold would give 1 for elements 1 and 2.
  Comms comms = CreateInProcessGroup(3, kTestTimeout);
  const float inputs[3] = {1e8f, 1.0f, -1e8f};
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<float> data(3);
    for (int e = 0; e < 3; ++e) data[e] = inputs[(c.rank() - e + 3) % 3];
    ASSERT_TRUE(c.AllReduceSum(data).ok());
    for (int e = 0; e < 3; ++e) EXPECT_EQ(data[e], 0.0f) << "rank " << c.rank() << " e " << e;
  });
}

TEST(InProcessAllReduceSumHalf, RoundsEveryHopToHalfAndOverflowsToInf) {
  // 1 + 2^-11 is not a half (it rounds to 1): the partial sum is rounded to
  // half before each hop, so three ranks adding 2^-11 to 1 each keep 1 as
  // long as the rounding happens per hop.
  Comms comms = CreateInProcessGroup(3, kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) {
    // One chunk each; element e starts on rank e.
    std::vector<float> data(3);
    for (int e = 0; e < 3; ++e) data[e] = c.rank() == e ? 1.0f : 0x1p-11f;
    std::vector<float> big = {c.rank() == 0 ? 60000.0f : 10000.0f};
    ASSERT_TRUE(c.AllReduceSumHalf(data).ok());
    for (int e = 0; e < 3; ++e) EXPECT_EQ(data[e], 1.0f) << "rank " << c.rank() << " e " << e;
    ASSERT_TRUE(c.AllReduceSumHalf(big).ok());
    EXPECT_TRUE(std::isinf(big[0])) << big[0];
  });
  // One rank: the input rounded to half.
  Comms one = CreateInProcessGroup(1, kTestTimeout);
  std::vector<float> x = {1.0f + 0x1p-12f, 0.1f, -0.0f};
  ASSERT_TRUE(one[0]->AllReduceSumHalf(x).ok());
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], RoundHalf(0.1f));
  EXPECT_TRUE(std::signbit(x[2]));
  EXPECT_EQ(one[0]->traffic().sent_bytes, 0u);
}

TEST(InProcessAllReduceSum, KeepsNegativeZeroAndSingleRankInputExactly) {
  for (int ranks : {1, 2}) {
    Comms comms = CreateInProcessGroup(ranks, kTestTimeout);
    OnEveryRank(comms, [&](Communicator& c) {
      std::vector<float> data = {-0.0f, 1e-45f};
      ASSERT_TRUE(c.AllReduceSum(data).ok());
      EXPECT_TRUE(std::signbit(data[0])) << "P=" << ranks << ": -0 + -0 must stay -0";
      EXPECT_EQ(data[1], ranks * 1e-45f);
    });
  }
}

// ---------------------------------------------------------------------------
// Mismatched calls: InvalidArgument on every rank, and the group stays usable.

TEST(InProcessMismatch, AllReduceSumHalfSizesDifferFailsOnEveryRank) {
  Comms comms = CreateInProcessGroup(3, kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<float> data(c.rank() == 2 ? 3 : 4, 1.0f);
    Status s = c.AllReduceSumHalf(data);
    ExpectInvalidNaming(s, {"AllReduceSumHalf", "rank 2 3 floats"});
  });
}

TEST(InProcessMismatch, AllToAllVBadOffsetsOnOneRankFailOnEveryRank) {
  Comms comms = CreateInProcessGroup(3, kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<uint8_t> mine(6, 1);
    std::vector<size_t> offsets = {0, 2, 4, 6};
    if (c.rank() == 1) offsets = {0, 4, 2, 6};  // decreasing
    GatheredBuffers out;
    Status s = c.AllToAllV(mine, offsets, &out);
    ExpectInvalidNaming(s, {"rank 1 passed piece offsets decrease at rank 1"});
    // Too few offsets, and offsets that do not end at the buffer's end.
    std::vector<size_t> short_offsets = {0, 6};
    std::vector<size_t> long_end = {0, 2, 4, 7};
    s = c.AllToAllV(mine, c.rank() == 0 ? short_offsets : long_end, &out);
    ExpectInvalidNaming(s, {"rank 0 passed 2 piece offsets for 3 ranks"});
    // The group goes on.
    offsets = {0, 2, 4, 6};
    ASSERT_TRUE(c.AllToAllV(mine, offsets, &out).ok());
    EXPECT_EQ(out.data.size(), 6u);
  });
}

TEST(InProcessMismatch, AllReduceSumSizesDifferFailsOnEveryRank) {
  Comms comms = CreateInProcessGroup(3, kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<float> data(c.rank() == 1 ? 5 : 4, 1.0f);
    Status s = c.AllReduceSum(data);
    ExpectInvalidNaming(s, {"rank 1 5 floats"});
    EXPECT_EQ(data[0], 1.0f);  // untouched
    // Still usable afterwards.
    std::vector<float> ok(4, 1.0f);
    ASSERT_TRUE(c.AllReduceSum(ok).ok());
    EXPECT_EQ(ok[3], 3.0f);
  });
}

TEST(InProcessMismatch, BroadcastSizeOrRootMismatchFailsOnEveryRank) {
  Comms comms = CreateInProcessGroup(4, kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<uint8_t> data(c.rank() == 3 ? 2 : 3, 7);
    Status s = c.Broadcast(data, 0);
    ExpectInvalidNaming(s, {"rank 3 2 bytes"});

    std::vector<uint8_t> same(3, static_cast<uint8_t>(c.rank()));
    s = c.Broadcast(same, c.rank() == 2 ? 1 : 0);
    ExpectInvalidNaming(s, {"rank 2 root 1"});

    s = c.Broadcast(same, 4);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_EQ(same[0], c.rank());

    ASSERT_TRUE(c.Broadcast(same, 2).ok());
    EXPECT_EQ(same[0], 2);
  });
}

TEST(InProcessMismatch, DifferentCollectivesFailOnEveryRank) {
  Comms comms = CreateInProcessGroup(2, kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) {
    Status s;
    if (c.rank() == 0) {
      s = c.Barrier();
    } else {
      GatheredBuffers out;
      s = c.AllGatherV({}, &out);
    }
    ExpectInvalidNaming(s, {"rank 0 Barrier, rank 1 AllGatherV"});
    EXPECT_TRUE(c.Barrier().ok());
  });
}

// ---------------------------------------------------------------------------
// Abort, timeout, a rank leaving: no hangs, and the message names the rank.

TEST(InProcessAbort, WakesPendingCollectivesAndFailsLaterOnes) {
  Comms comms = CreateInProcessGroup(4, kTestTimeout);
  const auto start = Clock::now();
  OnEveryRank(comms, [&](Communicator& c) {
    if (c.rank() == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      c.Abort(Status::Corruption("frame 3 of tensor 7 failed to decode"));
      c.Abort(Status::Internal("second abort is ignored"));
    } else {
      GatheredBuffers out;
      Status s = c.AllGatherV(GatherInput(c.rank(), 10, 0), &out);
      EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
      EXPECT_NE(s.message().find("rank 2"), std::string::npos) << s.ToString();
      EXPECT_NE(s.message().find("frame 3 of tensor 7 failed to decode"), std::string::npos)
          << s.ToString();
    }
    Status later = c.Barrier();
    EXPECT_EQ(later.code(), StatusCode::kAborted) << later.ToString();
    EXPECT_NE(later.message().find("rank 2"), std::string::npos);
  });
  EXPECT_LT(SecondsSince(start), 5.0);  // far below the 30 s timeout
}

TEST(InProcessAbort, AbortBeforePeersArriveFailsTheirNextCollective) {
  Comms comms = CreateInProcessGroup(3, kTestTimeout);
  comms[0]->Abort(Status::IOError("disk full writing checkpoint"));
  const auto start = Clock::now();
  OnEveryRank(comms, [&](Communicator& c) {
    std::vector<float> data(3, 1.0f);
    Status s = c.AllReduceSum(data);
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    EXPECT_NE(s.message().find("rank 0 aborted"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("disk full"), std::string::npos) << s.ToString();
    EXPECT_EQ(data[0], 1.0f);
  });
  EXPECT_LT(SecondsSince(start), 5.0);
}

TEST(InProcessTimeout, ReturnsUnavailableNamingTheRanksThatDidNotArrive) {
  Comms comms = CreateInProcessGroup(4, 0.2);
  std::atomic<bool> timed_out{false};
  const auto start = Clock::now();
  OnEveryRank(comms, [&](Communicator& c) {
    if (c.rank() >= 2) {
      // Late ranks: arrive only after the others have given up.
      while (!timed_out.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const auto late = Clock::now();
      Status s = c.Barrier();
      EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
      EXPECT_LT(SecondsSince(late), 0.1) << "a late rank must fail at once, not wait again";
      return;
    }
    Status s = c.Barrier();
    const double waited = SecondsSince(start);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("ranks 2, 3 did not arrive"), std::string::npos) << s.ToString();
    EXPECT_GE(waited, 0.19);
    EXPECT_LT(waited, 5.0);
    timed_out.store(true);
  });
}

TEST(InProcessLeave, DestroyingARanksCommunicatorUnblocksItsPeers) {
  Comms comms = CreateInProcessGroup(3, kTestTimeout);
  std::unique_ptr<Communicator> leaver = std::move(comms[2]);
  comms.pop_back();
  const auto start = Clock::now();
  std::thread destroyer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    leaver.reset();
  });
  OnEveryRank(comms, [&](Communicator& c) {
    Status s = c.Barrier();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("rank 2 left the group"), std::string::npos) << s.ToString();
    s = c.Barrier();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  });
  destroyer.join();
  EXPECT_LT(SecondsSince(start), 5.0);
}

TEST(InProcessLeave, DestroyingAGroupAfterUseIsQuiet) {
  Comms comms = CreateInProcessGroup(4, kTestTimeout);
  OnEveryRank(comms, [&](Communicator& c) { ASSERT_TRUE(c.Barrier().ok()); });
  comms.clear();  // no waiter, nothing to report, no crash
}

}  // namespace
}  // namespace adacomp
