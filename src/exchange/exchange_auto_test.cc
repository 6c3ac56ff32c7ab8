// GradientExchange with auto_dense (the `auto` codec) on the in-process
// group: every learner picks the same mode from different times, every
// gradient is conserved across the switches both ways (sent + residue =
// the sum of the gradients, element by element, checked against a sum in
// double), a resume after a switch equals the uninterrupted run bit for bit,
// and over a link that sleeps in proportion to the bytes it carries the
// choice settles on the codec within the stated steps.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "adacomp/exchange.h"
#include "core/test_util.h"
#include "exchange/exchange_hooks.h"
#include "exchange/test_group.h"

namespace adacomp {
namespace {

using exchange_test::Comms;
using exchange_test::OnEveryRank;

std::vector<ExchangeTensor> Tensors(const std::vector<uint64_t>& sizes) {
  std::vector<ExchangeTensor> t;
  for (size_t k = 0; k < sizes.size(); ++k) {
    ExchangeTensor e;
    e.name = "t" + std::to_string(k);
    e.elements = sizes[k];
    e.codec.codec = Codec::kAdaComp;
    e.codec.bin_size = k % 2 ? 50 : 500;
    t.push_back(e);
  }
  return t;
}

std::vector<float> Grad(const std::vector<uint64_t>& sizes, int rank, size_t k, int step) {
  return testing::GradientLike(
      sizes[k], 7919 * static_cast<uint64_t>(step) + 31 * k + static_cast<uint64_t>(rank));
}

// A deterministic clock: a step "takes" its transport bytes at 1 ns each
// plus a fixed 10 us, times (1 + rank x skew); the codec's frames are far
// fewer bytes than dense's, so it wins.
std::function<double(const ExchangeResult&)> ByteClock(int rank, double skew = 0) {
  return [rank, skew](const ExchangeResult& r) {
    return (1e-5 + 1e-9 * static_cast<double>(r.transport_sent_bytes)) * (1 + rank * skew);
  };
}

struct AutoRun {
  // [step][rank]
  std::vector<std::vector<std::vector<float>>> averaged;
  std::vector<std::vector<StepMode>> modes;
  std::vector<std::vector<std::string>> notes;
  std::vector<std::vector<bool>> skipped;
  // [rank][tensor]: the residues at the end; the compressors' and the
  // chooser's saved states.
  std::vector<std::vector<std::vector<float>>> residues;
  std::vector<std::vector<std::vector<uint8_t>>> states;
  std::vector<std::vector<uint8_t>> speed;
  std::vector<Status> status;
};

struct AutoSetup {
  int p = 3;
  std::vector<uint64_t> sizes = {0, 1, 333, 5000, 20000};
  SpeedChoiceOptions speed;
  int first = 0, steps = 20;
  // (rank) -> a clock, or null to measure.
  std::function<std::function<double(const ExchangeResult&)>(int)> clock;
  // Step and rank whose gradient gets a NaN (-1: none).
  int nan_step = -1, nan_rank = 1;
  // Wraps each learner's communicator (a slow link), or null.
  std::function<std::unique_ptr<Communicator>(Communicator&)> link;
  // States to start from ([rank]), as AutoRun::states / AutoRun::speed.
  const AutoRun* resume = nullptr;
};

AutoRun RunAuto(const AutoSetup& s) {
  AutoRun out;
  const size_t steps = static_cast<size_t>(s.steps);
  out.averaged.assign(steps, std::vector<std::vector<float>>(s.p));
  out.modes.assign(steps, std::vector<StepMode>(s.p));
  out.notes.assign(steps, std::vector<std::string>(s.p));
  out.skipped.assign(steps, std::vector<bool>(s.p));
  out.residues.resize(s.p);
  out.states.resize(s.p);
  out.speed.resize(s.p);
  out.status.resize(s.p);
  auto comms = CreateInProcessGroup(s.p, 30.0);
  OnEveryRank(comms, [&](int rank, Communicator& base) {
    std::unique_ptr<Communicator> wrapped = s.link ? s.link(base) : nullptr;
    Communicator& comm = wrapped ? *wrapped : base;
    ExchangeOptions o;
    o.auto_dense = true;
    o.speed = s.speed;
    auto x = GradientExchange::Create(comm, Tensors(s.sizes), o);
    if (!x.ok()) {
      out.status[rank] = x.status();
      return;
    }
    GradientExchange& ex = **x;
    if (s.resume) {
      for (size_t k = 0; k < ex.compressors(); ++k) {
        Status st = ex.compressor(k).LoadState(s.resume->states[rank][k]);
        if (!st.ok()) out.status[rank] = st;
      }
      Status st = ex.LoadSpeedState(s.resume->speed[rank]);
      if (!st.ok()) out.status[rank] = st;
    }
    if (s.clock) exchange_internal::SetStepClock(ex, s.clock(rank));
    for (size_t i = 0; i < steps; ++i) {
      const int step = s.first + static_cast<int>(i);
      std::vector<std::vector<float>> grads;
      std::vector<std::span<const float>> spans;
      for (size_t k = 0; k < s.sizes.size(); ++k) {
        grads.push_back(Grad(s.sizes, rank, k, step));
        if (step == s.nan_step && rank == s.nan_rank && !grads.back().empty()) {
          grads.back()[0] = std::numeric_limits<float>::quiet_NaN();
        }
      }
      for (const auto& g : grads) spans.emplace_back(g);
      out.averaged[i][rank].assign(ex.total_elements(), 0.0f);
      ExchangeResult r;
      Status st = ex.Step(spans, 0, out.averaged[i][rank], &r);
      if (!st.ok()) {
        out.status[rank] = st;
        return;
      }
      out.modes[i][rank] = r.mode;
      out.notes[i][rank] = r.speed_note;
      out.skipped[i][rank] = r.skipped();
      if (r.skipped()) out.averaged[i][rank].assign(ex.total_elements(), 0.0f);
      if (r.mode == StepMode::kDense && !r.skipped()) {
        // A dense step sent every residue: all are empty now.
        const GradientExchange& cx = ex;
        for (size_t k = 0; k < cx.compressors(); ++k) {
          for (float v : cx.compressor(k).residue()) {
            if (v != 0.0f) {
              ADD_FAILURE() << "rank " << rank << " step " << step << " tensor " << k
                            << ": residue " << v << " after a dense step";
              break;
            }
          }
        }
      }
    }
    const GradientExchange& cx = ex;
    for (size_t k = 0; k < cx.compressors(); ++k) {
      const auto r = cx.compressor(k).residue();
      out.residues[rank].emplace_back(r.begin(), r.end());
      out.states[rank].push_back(cx.compressor(k).SaveState());
    }
    out.speed[rank] = ex.SaveSpeedState();
  });
  return out;
}

std::string Letters(const AutoRun& run, int rank = 0) {
  std::string s;
  for (size_t i = 0; i < run.modes.size(); ++i) {
    s += run.skipped[i][rank] ? 'S' : run.modes[i][rank] == StepMode::kDense ? 'D' : 'C';
  }
  return s;
}

TEST(ExchangeAuto, ConservesEveryGradientAcrossSwitchesBothWays) {
  AutoSetup s;
  s.speed.reprobe_every = 4;  // many switches
  s.speed.probe_cost = 0;
  s.steps = 30;
  s.nan_step = 17;  // and a skipped step among them
  s.clock = [](int rank) { return ByteClock(rank); };
  const AutoRun run = RunAuto(s);
  for (const Status& st : run.status) ASSERT_TRUE(st.ok()) << st.ToString();
  const std::string modes = Letters(run);
  EXPECT_NE(modes.find("DC"), std::string::npos) << modes;
  EXPECT_NE(modes.find("CD"), std::string::npos) << modes;
  EXPECT_EQ(modes[17], 'S');
  // sum over steps and learners of the gradients (double) against
  // P x sum over steps of the average + every learner's residue.
  size_t offset = 0;
  for (size_t k = 0; k < s.sizes.size(); ++k) {
    const size_t n = s.sizes[k];
    std::vector<double> want(n, 0.0), scale(n, 0.0), got(n, 0.0);
    for (int step = 0; step < s.steps; ++step) {
      if (step == s.nan_step) continue;
      for (int r = 0; r < s.p; ++r) {
        const std::vector<float> g = Grad(s.sizes, r, k, step);
        for (size_t i = 0; i < n; ++i) {
          want[i] += g[i];
          scale[i] += std::fabs(g[i]);
        }
      }
      for (size_t i = 0; i < n; ++i) {
        got[i] += static_cast<double>(run.averaged[step][0][offset + i]) * s.p;
      }
    }
    for (int r = 0; r < s.p; ++r) {
      for (size_t i = 0; i < n; ++i) got[i] += run.residues[r][k][i];
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5 * scale[i] + 1e-12) << "tensor " << k << " element " << i;
    }
    offset += n;
  }
}

TEST(ExchangeAuto, EveryLearnerChoosesAlikeFromDifferentTimes) {
  AutoSetup s;
  s.p = 4;
  s.steps = 14;
  s.speed.reprobe_every = 0;
  // Rank r's steps take (1 + 3r) times the byte clock's, plus a per-step
  // wobble of its own: no two learners measure the same, and the
  // slowest-measuring ranks would pick differently alone (a rank at 10x
  // sees dense beaten by less). Every learner must still pick what the
  // fastest learner's figures say, on every step.
  s.clock = [](int rank) {
    auto base = ByteClock(rank, 3.0);
    auto n = std::make_shared<int>(0);
    return [base, n, rank](const ExchangeResult& r) {
      return base(r) * (1 + 0.01 * ((++*n * (rank + 2)) % 7));
    };
  };
  const AutoRun run = RunAuto(s);
  for (const Status& st : run.status) ASSERT_TRUE(st.ok()) << st.ToString();
  for (int step = 0; step < s.steps; ++step) {
    for (int r = 1; r < s.p; ++r) {
      ASSERT_EQ(run.modes[step][r], run.modes[step][0]) << "step " << step << " rank " << r;
      ASSERT_EQ(run.notes[step][r], run.notes[step][0]) << "step " << step << " rank " << r;
      ASSERT_EQ(run.averaged[step][r], run.averaged[step][0]) << "step " << step << " rank " << r;
    }
  }
  EXPECT_EQ(Letters(run), "DDDDCCCCCCCCCC");
  EXPECT_EQ(run.notes[8][0].rfind("auto: codec, ", 0), 0u) << run.notes[8][0];
}

TEST(ExchangeAuto, AResumeAfterASwitchEqualsTheUninterruptedRun) {
  AutoSetup s;
  s.speed.reprobe_every = 5;
  s.speed.probe_cost = 0;
  s.steps = 26;
  s.clock = [](int rank) { return ByteClock(rank, 0.5); };
  const AutoRun whole = RunAuto(s);
  for (const Status& st : whole.status) ASSERT_TRUE(st.ok()) << st.ToString();
  // Cut after step 14: the run has switched codec -> dense (13) and is
  // inside a probe; the resumed run starts from the saved states.
  AutoSetup a = s;
  a.steps = 14;
  const AutoRun first = RunAuto(a);
  ASSERT_EQ(Letters(first), Letters(whole).substr(0, 14));
  ASSERT_NE(Letters(first).find("CD"), std::string::npos) << Letters(first);
  AutoSetup b = s;
  b.first = 14;
  b.steps = 12;
  b.resume = &first;
  const AutoRun second = RunAuto(b);
  for (const Status& st : second.status) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Letters(first) + Letters(second), Letters(whole));
  for (int i = 0; i < 12; ++i) {
    for (int r = 0; r < s.p; ++r) {
      ASSERT_EQ(second.averaged[i][r], whole.averaged[14 + i][r]) << "step " << 14 + i;
    }
  }
  for (int r = 0; r < s.p; ++r) {
    EXPECT_EQ(second.states[r], whole.states[r]);
    EXPECT_EQ(second.speed[r], whole.speed[r]);
  }
}

// A communicator whose collectives sleep `seconds_per_byte` x the bytes this
// rank sent in them: a link of that speed (the same on every rank).
class SleepingLink : public Communicator {
 public:
  SleepingLink(Communicator& inner, double seconds_per_byte)
      : inner_(inner), per_byte_(seconds_per_byte) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Status AllGatherV(std::span<const uint8_t> mine, GatheredBuffers* out) override {
    return Slept([&] { return inner_.AllGatherV(mine, out); });
  }
  Status AllToAllV(std::span<const uint8_t> mine, std::span<const size_t> offsets,
                   GatheredBuffers* out) override {
    return Slept([&] { return inner_.AllToAllV(mine, offsets, out); });
  }
  Status AllReduceSum(std::span<float> data) override {
    return Slept([&] { return inner_.AllReduceSum(data); });
  }
  Status AllReduceSumHalf(std::span<float> data) override {
    return Slept([&] { return inner_.AllReduceSumHalf(data); });
  }
  Status Broadcast(std::span<uint8_t> data, int root) override {
    return Slept([&] { return inner_.Broadcast(data, root); });
  }
  Status Barrier() override {
    return Slept([&] { return inner_.Barrier(); });
  }
  void Abort(const Status& why) override { inner_.Abort(why); }

 private:
  template <typename F>
  Status Slept(F call) {
    const uint64_t before = inner_.traffic().sent_bytes;
    Status st = call();
    traffic_ = inner_.traffic();
    const double sleep = per_byte_ * static_cast<double>(traffic_.sent_bytes - before);
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
    return st;
  }
  Communicator& inner_;
  double per_byte_;
};

TEST(ExchangeAuto, SettlesOnTheCodecOverASlowLinkWithinNineSteps) {
  // 100 ns a byte (80 Mbit/s): dense's all-reduce of 100,000 floats sleeps
  // about 40 ms a step, the codec's frames about 1 ms. Probing takes 8
  // steps (dense, then the codec, 3 timed steps each after an untimed one);
  // from the ninth on it is the codec.
  AutoSetup s;
  s.p = 2;
  s.sizes = {50000, 50000};
  s.steps = 12;
  s.speed.reprobe_every = 0;
  s.link = [](Communicator& c) { return std::make_unique<SleepingLink>(c, 1e-7); };
  const AutoRun run = RunAuto(s);
  for (const Status& st : run.status) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Letters(run), "DDDDCCCCCCCC") << run.notes[8][0];
  EXPECT_EQ(Letters(run, 1), Letters(run));
}

TEST(ExchangeAuto, SettlesOnDenseOverAFastLinkWithinNineSteps) {
  // A 400 Gbit/s link: a step takes its CPU phases as measured (copy and
  // divide for dense; compress and decode for the codec) plus its bytes at
  // 0.02 ns each. (The in-process ring's own waits are left out: threads
  // handing chunks to each other on a busy machine are no such link.) The
  // codec's work on a million floats costs more than dense's 4 MB take.
  AutoSetup s;
  s.p = 2;
  s.sizes = {500000, 500000};
  s.steps = 12;
  s.speed.reprobe_every = 0;
  s.clock = [](int) {
    return [](const ExchangeResult& r) {
      return r.compress_seconds + r.decompress_seconds +
             0.02e-9 * static_cast<double>(r.transport_sent_bytes);
    };
  };
  const AutoRun run = RunAuto(s);
  for (const Status& st : run.status) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Letters(run), "DDDDCCCCDDDD") << run.notes[8][0];
  EXPECT_EQ(Letters(run, 1), Letters(run));
  std::printf("%s\n", run.notes[8][0].c_str());
}

TEST(ExchangeAuto, RefusesWhatItCannotChooseFor) {
  auto comms = CreateInProcessGroup(1, 30.0);
  ExchangeOptions o;
  o.auto_dense = true;
  std::vector<ExchangeTensor> dense = Tensors({10, 20});
  for (auto& t : dense) t.codec.codec = Codec::kDense;
  auto x = GradientExchange::Create(*comms[0], dense, o);
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(x.status().message().find("every tensor is dense"), std::string::npos);
  o.speed.probe_steps = 0;
  x = GradientExchange::Create(*comms[0], Tensors({10}), o);
  ASSERT_FALSE(x.ok());
  EXPECT_NE(x.status().message().find("probe_steps"), std::string::npos);
  // A state saved with auto does not load into an exchange without it, and
  // a truncated one is refused.
  o.speed = {};
  auto with = GradientExchange::Create(*comms[0], Tensors({10}), o);
  auto without = GradientExchange::Create(*comms[0], Tensors({10}));
  ASSERT_TRUE(with.ok() && without.ok());
  const std::vector<uint8_t> saved = (*with)->SaveSpeedState();
  EXPECT_TRUE((*without)->SaveSpeedState().empty());
  EXPECT_EQ((*without)->LoadSpeedState(saved).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*without)->LoadSpeedState({}).ok());
  EXPECT_EQ((*with)->LoadSpeedState(std::span<const uint8_t>(saved).first(5)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE((*with)->LoadSpeedState(saved).ok());
}

}  // namespace
}  // namespace adacomp
