// Tests for the MPI communicator. Run under mpirun, every rank runs every
// test (ctest: mpirun -np 2, 3 and 4). Each result is checked against a
// simple scalar formula and against what the in-process group gives for the
// same inputs (bit for bit for AllReduceSum and AllReduceSumHalf, whose ring
// both implementations follow; also the traffic they count).
#include "adacomp/mpi_communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../collective_test_data.h"
#include "adacomp/communicator.h"

namespace adacomp {
namespace {

using namespace comm_test;  // NOLINT: the shared inputs and references

Communicator* g_comm = nullptr;

std::vector<float> FloatInput(int rank, size_t n, int salt, InputFn input = FloatOf) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(rank, i, salt);
  return v;
}

uint64_t Digest(const std::vector<float>& data) {
  uint64_t digest = 1469598103934665603ull;
  for (float f : data) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    digest = (digest ^ bits) * 1099511628211ull;
  }
  return digest;
}

// Every rank holds the same bits: compares each rank's digest via a gather.
void ExpectSameOnEveryRank(const std::vector<float>& data, const std::string& what) {
  const uint64_t digest = Digest(data);
  GatheredBuffers digests;
  ASSERT_TRUE(g_comm->AllGatherV({reinterpret_cast<const uint8_t*>(&digest), 8}, &digests).ok());
  for (size_t r = 0; r < digests.ranks(); ++r) {
    EXPECT_EQ(std::memcmp(digests.rank(r).data(), &digest, 8), 0) << "rank " << r << " " << what;
  }
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Runs body on an in-process group of `ranks` threads (the reference
// implementation for the same inputs).
void InProcess(int ranks, const std::function<void(Communicator&)>& body) {
  auto comms = CreateInProcessGroup(ranks, 60.0);
  std::vector<std::thread> threads;
  for (auto& c : comms) threads.emplace_back([&body, comm = c.get()] { body(*comm); });
  for (auto& t : threads) t.join();
}

const size_t kSizes[] = {0, 1, 1001, 1000000};

TEST(Mpi, RankAndSizeMatchTheLauncher) {
  const char* env = std::getenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_NE(env, nullptr) << "run this test under OpenMPI's mpirun";
  EXPECT_EQ(g_comm->size(), std::atoi(env));
  EXPECT_EQ(g_comm->rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  EXPECT_TRUE(LaunchedUnderMpi());
}

TEST(Mpi, AllGatherVMatchesFormulaAndInProcessGroup) {
  const int p = g_comm->size();
  for (size_t n : kSizes) {
    GatheredBuffers got;
    got.data.assign(3, 0xEE);
    ASSERT_TRUE(g_comm->AllGatherV(GatherInput(g_comm->rank(), n, 11), &got).ok());
    ASSERT_EQ(got.ranks(), static_cast<size_t>(p));
    for (int r = 0; r < p; ++r) {
      ASSERT_EQ(got.rank(r).size(), GatherLength(r, n)) << "n " << n << " rank " << r;
      std::vector<uint8_t> want = GatherInput(r, n, 11);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got.rank(r).begin()))
          << "n " << n << " rank " << r;
    }
    GatheredBuffers reference;
    InProcess(p, [&](Communicator& c) {
      GatheredBuffers mine;
      ASSERT_TRUE(c.AllGatherV(GatherInput(c.rank(), n, 11), &mine).ok());
      if (c.rank() == 0) reference = std::move(mine);
    });
    EXPECT_EQ(got.data, reference.data);
    EXPECT_EQ(got.offsets, reference.offsets);
  }
}

// The ring in both precisions: equal to the scalar ring fold and to the
// in-process group's result bit for bit, within float (and half) rounding
// of the exact sum, the same on every rank, and the same traffic counted.
void CheckRing(bool half) {
  const int p = g_comm->size();
  const int salt = half ? 23 : 21;
  const InputFn input = half ? HalfInputOf : FloatOf;
  // 2.5M floats also exercises a chunk of more than 2^20 floats.
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{2}, size_t{1001}, size_t{1000000}, size_t{2500000}}) {
    std::vector<float> data = FloatInput(g_comm->rank(), n, salt, input);
    const CommTraffic before = g_comm->traffic();
    ASSERT_TRUE((half ? g_comm->AllReduceSumHalf(data) : g_comm->AllReduceSum(data)).ok());
    const CommTraffic after = g_comm->traffic();
    EXPECT_TRUE(SameBits(data, ExpectedSum(p, n, salt, input, half))) << "n " << n;
    EXPECT_EQ(FirstOutsideRounding(data, p, salt, input, half), n) << "n " << n;
    std::vector<float> reference;
    CommTraffic ref_traffic;
    InProcess(p, [&](Communicator& c) {
      std::vector<float> mine = FloatInput(c.rank(), n, salt, input);
      ASSERT_TRUE((half ? c.AllReduceSumHalf(mine) : c.AllReduceSum(mine)).ok());
      if (c.rank() == g_comm->rank()) {
        reference = std::move(mine);
        ref_traffic = c.traffic();
      }
    });
    EXPECT_TRUE(SameBits(data, reference)) << "n " << n;
    EXPECT_EQ(after.sent_bytes - before.sent_bytes, ref_traffic.sent_bytes) << "n " << n;
    EXPECT_EQ(after.received_bytes - before.received_bytes, ref_traffic.received_bytes)
        << "n " << n;
    if (n % p == 0) {
      // 2 (P - 1) / P of the buffer each way, plus the headers.
      const uint64_t want = 2 * (p - 1) * (n / p) * (half ? 2 : 4) + 32 * (p - 1);
      EXPECT_EQ(after.sent_bytes - before.sent_bytes, want) << "n " << n;
      EXPECT_EQ(after.received_bytes - before.received_bytes, want) << "n " << n;
    }
    ExpectSameOnEveryRank(data, "n " + std::to_string(n));
  }
}

TEST(Mpi, AllReduceSumIsTheRingFoldBitIdenticalToInProcessGroup) { CheckRing(false); }

TEST(Mpi, AllReduceSumHalfIsTheHalfRingFoldBitIdenticalToInProcessGroup) { CheckRing(true); }

TEST(Mpi, AllReduceSumFoldsEachChunkFromItsOwnRankAndKeepsNegativeZero) {
  const int p = g_comm->size();
  const int me = g_comm->rank();
  // One element per chunk. Element e: 1e8 on rank e, 1 on rank e + 1,
  // -1e8 on rank e + 2 (P > 2), 0 elsewhere: the ring's fold from rank e
  // gives ((1e8 + 1) + -1e8) + 0 ... == 0; a fold from any other rank
  // would give 1. Then -0 on every rank stays -0.
  std::vector<float> data(p, 0.0f);
  for (int e = 0; e < p; ++e) {
    const int d = (me - e + p) % p;
    if (d == 0) data[e] = 1e8f;
    if (d == 1) data[e] = 1.0f;
    if (p > 2 && d == 2) data[e] = -1e8f;
  }
  ASSERT_TRUE(g_comm->AllReduceSum(data).ok());
  for (int e = 0; e < p; ++e) EXPECT_EQ(data[e], p > 2 ? 0.0f : 1e8f + 1.0f) << "e " << e;
  std::vector<float> zeros(3, -0.0f);
  ASSERT_TRUE(g_comm->AllReduceSum(zeros).ok());
  for (float z : zeros) EXPECT_TRUE(std::signbit(z));
  ASSERT_TRUE(g_comm->AllReduceSumHalf(zeros).ok());
  for (float z : zeros) EXPECT_TRUE(std::signbit(z));
}

TEST(Mpi, AllGatherVTrafficEqualsTheInProcessGroups) {
  const int p = g_comm->size();
  const CommTraffic before = g_comm->traffic();
  GatheredBuffers got;
  ASSERT_TRUE(g_comm->AllGatherV(GatherInput(g_comm->rank(), 1001, 5), &got).ok());
  const CommTraffic after = g_comm->traffic();
  CommTraffic ref;
  InProcess(p, [&](Communicator& c) {
    GatheredBuffers mine;
    ASSERT_TRUE(c.AllGatherV(GatherInput(c.rank(), 1001, 5), &mine).ok());
    if (c.rank() == g_comm->rank()) ref = c.traffic();
  });
  EXPECT_EQ(after.sent_bytes - before.sent_bytes, ref.sent_bytes);
  EXPECT_EQ(after.received_bytes - before.received_bytes, ref.received_bytes);
  EXPECT_EQ(after.received_bytes - before.received_bytes,
            got.data.size() - GatherLength(g_comm->rank(), 1001) + 32 * (p - 1));
}

TEST(Mpi, AllToAllVDeliversEachPieceAndCountsWhatTheInProcessGroupCounts) {
  const int p = g_comm->size();
  const int me = g_comm->rank();
  for (size_t n : kSizes) {
    std::vector<size_t> offsets;
    const std::vector<uint8_t> mine = PiecesOf(me, p, n, 9, &offsets);
    const CommTraffic before = g_comm->traffic();
    GatheredBuffers got;
    ASSERT_TRUE(g_comm->AllToAllV(mine, offsets, &got).ok()) << "n " << n;
    const CommTraffic after = g_comm->traffic();
    ASSERT_EQ(got.ranks(), static_cast<size_t>(p));
    for (int r = 0; r < p; ++r) {
      const auto piece = got.rank(r);
      ASSERT_EQ(piece.size(), PieceLength(r, me, n)) << "from " << r << " n " << n;
      for (size_t i = 0; i < piece.size(); ++i) {
        ASSERT_EQ(piece[i], PieceByteOf(r, me, i, 9)) << "from " << r << " byte " << i;
      }
    }
    CommTraffic ref;
    InProcess(p, [&](Communicator& c) {
      std::vector<size_t> off;
      const std::vector<uint8_t> theirs = PiecesOf(c.rank(), p, n, 9, &off);
      GatheredBuffers out;
      ASSERT_TRUE(c.AllToAllV(theirs, off, &out).ok());
      if (c.rank() == me) ref = c.traffic();
    });
    EXPECT_EQ(after.sent_bytes - before.sent_bytes, ref.sent_bytes) << "n " << n;
    EXPECT_EQ(after.received_bytes - before.received_bytes, ref.received_bytes) << "n " << n;
  }
}

TEST(Mpi, AllToAllVBadOffsetsOnOneRankFailOnEveryRankAndTheJobGoesOn) {
  const int p = g_comm->size();
  const int me = g_comm->rank();
  std::vector<uint8_t> mine(static_cast<size_t>(p), 1);
  std::vector<size_t> offsets(static_cast<size_t>(p) + 1);
  for (int d = 0; d <= p; ++d) offsets[d] = static_cast<size_t>(d);
  std::vector<size_t> bad = offsets;
  bad.back() += 1;  // past the buffer's end
  GatheredBuffers out;
  Status s = g_comm->AllToAllV(mine, me == p - 1 ? bad : offsets, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("rank " + std::to_string(p - 1) + " passed bad piece offsets"),
            std::string::npos)
      << s.ToString();
  ASSERT_TRUE(g_comm->AllToAllV(mine, offsets, &out).ok());
  EXPECT_EQ(out.data.size(), static_cast<size_t>(p));
}

TEST(Mpi, BroadcastFromEveryRoot) {
  const int p = g_comm->size();
  for (size_t n : kSizes) {
    for (int root = 0; root < p; ++root) {
      std::vector<uint8_t> data(n);
      for (size_t i = 0; i < n; ++i) data[i] = ByteOf(g_comm->rank(), i, root);
      ASSERT_TRUE(g_comm->Broadcast(data, root).ok());
      size_t bad = n;
      for (size_t i = 0; i < n; ++i) {
        if (data[i] != ByteOf(root, i, root)) {
          bad = i;
          break;
        }
      }
      EXPECT_EQ(bad, n) << "n " << n << " root " << root;
    }
  }
}

TEST(Mpi, BarrierWaitsForTheLastRank) {
  ASSERT_TRUE(g_comm->Barrier().ok());
  const auto start = std::chrono::steady_clock::now();
  if (g_comm->rank() == g_comm->size() - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(g_comm->Barrier().ok());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.15) << "rank " << g_comm->rank() << " left the barrier early";
}

TEST(Mpi, ManyMixedCollectivesInARow) {
  const int p = g_comm->size();
  const int me = g_comm->rank();
  for (int step = 0; step < 300; ++step) {
    const size_t n = static_cast<size_t>((step * 37) % 23);
    switch (step % 4) {
      case 0: {
        GatheredBuffers out;
        ASSERT_TRUE(g_comm->AllGatherV(GatherInput(me, n, step), &out).ok());
        for (int r = 0; r < p; ++r) {
          std::vector<uint8_t> want = GatherInput(r, n, step);
          ASSERT_EQ(out.rank(r).size(), want.size());
          ASSERT_TRUE(std::equal(want.begin(), want.end(), out.rank(r).begin())) << step;
        }
        break;
      }
      case 1: {
        if (step % 8 == 1) {
          std::vector<float> data = FloatInput(me, n, step);
          ASSERT_TRUE(g_comm->AllReduceSum(data).ok());
          ASSERT_TRUE(SameBits(data, ExpectedSum(p, n, step))) << step;
        } else {
          std::vector<float> data = FloatInput(me, n, step, HalfInputOf);
          ASSERT_TRUE(g_comm->AllReduceSumHalf(data).ok());
          ASSERT_TRUE(SameBits(data, ExpectedHalfSum(p, n, step))) << step;
        }
        break;
      }
      case 2: {
        const int root = step % p;
        std::vector<uint8_t> data(n);
        for (size_t i = 0; i < n; ++i) data[i] = ByteOf(me, i, step);
        ASSERT_TRUE(g_comm->Broadcast(data, root).ok());
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(data[i], ByteOf(root, i, step)) << step;
        break;
      }
      case 3:
        ASSERT_TRUE(g_comm->Barrier().ok());
        break;
    }
  }
}

TEST(Mpi, MismatchedCallsFailOnEveryRankAndTheJobGoesOn) {
  const int p = g_comm->size();
  const int me = g_comm->rank();
  std::vector<float> data(me == p - 1 ? 5 : 4, 1.0f);
  Status s = g_comm->AllReduceSum(data);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("rank " + std::to_string(p - 1) + " 5 floats"), std::string::npos)
      << s.ToString();

  std::vector<uint8_t> bytes(3, static_cast<uint8_t>(me));
  s = g_comm->Broadcast(bytes, me == 0 ? 1 : 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("rank 0 root 1"), std::string::npos) << s.ToString();

  if (me == 0) {
    s = g_comm->Barrier();
  } else {
    GatheredBuffers out;
    s = g_comm->AllGatherV({}, &out);
  }
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("rank 0 Barrier"), std::string::npos) << s.ToString();

  std::vector<float> half(me == 0 ? 2 : 3, 1.0f);
  s = g_comm->AllReduceSumHalf(half);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("rank 0 2 floats"), std::string::npos) << s.ToString();

  std::vector<float> ok(4, 1.0f);
  ASSERT_TRUE(g_comm->AllReduceSum(ok).ok());
  EXPECT_EQ(ok[0], static_cast<float>(p));
}

}  // namespace
}  // namespace adacomp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  adacomp::MpiOptions options;
  options.timeout_seconds = 20.0;  // a broken test fails instead of hanging
  auto comm = adacomp::CreateMpiCommunicator(options);
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", comm.status().ToString().c_str());
    return 1;
  }
  adacomp::g_comm = comm->get();
  // Only rank 0 prints the whole test log; other ranks print failures only.
  if (adacomp::g_comm->rank() != 0) GTEST_FLAG_SET(brief, true);
  int failed = RUN_ALL_TESTS();
  // Every rank learns whether any rank failed, so all exit alike.
  std::vector<float> any(1, static_cast<float>(failed != 0));
  adacomp::Status s = adacomp::g_comm->AllReduceSum(any);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", adacomp::g_comm->rank(), s.ToString().c_str());
    adacomp::g_comm->Abort(s);
  }
  if (failed != 0) {
    std::fprintf(stderr, "rank %d: some tests FAILED\n", adacomp::g_comm->rank());
  }
  const int rc = any[0] != 0.0f ? 1 : 0;
  comm->reset();
  return rc;
}
