// Tests for the MPI communicator. Run under mpirun, every rank runs every
// test (ctest: mpirun -np 2 and -np 4). Each result is checked against a
// simple scalar formula and against what the in-process group gives for the
// same inputs (bit for bit for AllReduceSum).
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

#include "adacomp/communicator.h"
#include "../collective_test_data.h"

namespace adacomp {
namespace {

using namespace comm_test;  // NOLINT: the shared inputs and references

Communicator* g_comm = nullptr;

std::vector<float> FloatInput(int rank, size_t n, int salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = FloatOf(rank, i, salt);
  return v;
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

TEST(Mpi, AllReduceSumIsBitIdenticalToRankOrderFoldAndInProcessGroup) {
  const int p = g_comm->size();
  // 2.5M floats also exercises the chunked path (chunks of 2^20 floats).
  for (size_t n : {size_t{0}, size_t{1}, size_t{1001}, size_t{1000000}, size_t{2500000}}) {
    std::vector<float> data = FloatInput(g_comm->rank(), n, 21);
    ASSERT_TRUE(g_comm->AllReduceSum(data).ok());
    EXPECT_TRUE(SameBits(data, ExpectedSum(p, n, 21))) << "n " << n;
    std::vector<float> reference;
    InProcess(p, [&](Communicator& c) {
      std::vector<float> mine = FloatInput(c.rank(), n, 21);
      ASSERT_TRUE(c.AllReduceSum(mine).ok());
      if (c.rank() == 0) reference = std::move(mine);
    });
    EXPECT_TRUE(SameBits(data, reference)) << "n " << n;
    // Every rank holds the same bits: compare each rank's digest via gather.
    uint64_t digest = 1469598103934665603ull;
    for (float f : data) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      digest = (digest ^ bits) * 1099511628211ull;
    }
    GatheredBuffers digests;
    ASSERT_TRUE(g_comm->AllGatherV({reinterpret_cast<const uint8_t*>(&digest), 8}, &digests).ok());
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(std::memcmp(digests.rank(r).data(), &digest, 8), 0) << "rank " << r << " n " << n;
    }
  }
}

TEST(Mpi, AllReduceSumKeepsRankOrderAndNegativeZero) {
  const int p = g_comm->size();
  // Rank 0 adds 1e8, rank 1 adds 1, the last rank adds -1e8 (others 0):
  // ((1e8 + 1) + 0...) - 1e8 == 0 in rank order; a pairwise sum gives 1.
  std::vector<float> data = {0.0f, -0.0f};
  if (g_comm->rank() == 0) data[0] = 1e8f;
  if (g_comm->rank() == 1) data[0] = 1.0f;
  if (p > 2 && g_comm->rank() == p - 1) data[0] = -1e8f;
  ASSERT_TRUE(g_comm->AllReduceSum(data).ok());
  EXPECT_EQ(data[0], p > 2 ? 0.0f : 1e8f + 1.0f);
  EXPECT_TRUE(std::signbit(data[1]));
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
        std::vector<float> data = FloatInput(me, n, step);
        ASSERT_TRUE(g_comm->AllReduceSum(data).ok());
        ASSERT_TRUE(SameBits(data, ExpectedSum(p, n, step))) << step;
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
