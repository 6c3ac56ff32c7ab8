// SpeedChooser (adacomp/speed_choice.h) fed step times by hand: the probe order,
// the settled choice against a margin, re-probes by count and by drift, the
// untimed first step after each switch, and its saved state.
#include "adacomp/speed_choice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace adacomp {
namespace {

constexpr StepMode D = StepMode::kDense;
constexpr StepMode C = StepMode::kCodec;

// Runs `steps` steps; each decided step takes times(mode, step) seconds.
template <typename F>
std::vector<StepMode> Drive(SpeedChooser& c, int steps, F times,
                            std::vector<std::string>* notes = nullptr, int first = 0) {
  std::vector<StepMode> modes;
  for (int s = first; s < first + steps; ++s) {
    const StepMode m = c.Decide();
    if (notes && !c.note().empty()) notes->push_back(std::to_string(s) + ": " + c.note());
    modes.push_back(m);
    c.Record(times(m, s));
  }
  return modes;
}

// As Drive, but each step's time comes after the next step was decided (the
// DDP hook's order: Decide(s), then Record(s - 1)).
template <typename F>
std::vector<StepMode> DriveLagged(SpeedChooser& c, int steps, F times) {
  std::vector<StepMode> modes;
  for (int s = 0; s < steps; ++s) {
    modes.push_back(c.Decide());
    if (s > 0) c.Record(times(modes[s - 1], s - 1));
  }
  return modes;
}

// Probes of probe_steps timed steps, no re-probe by count or by drift.
SpeedChoiceOptions ProbeOnly(int probe_steps) {
  SpeedChoiceOptions o;
  o.probe_steps = probe_steps;
  o.reprobe_every = 0;
  o.drift = 0;
  return o;
}

std::string Letters(const std::vector<StepMode>& modes) {
  std::string s;
  for (StepMode m : modes) s += m == D ? 'D' : 'C';
  return s;
}

TEST(SpeedChooser, ProbesDenseThenTheCodecThenSettlesOnTheFaster) {
  const SpeedChoiceOptions o = ProbeOnly(3);
  {
    SpeedChooser c(o);
    std::vector<std::string> notes;
    // One untimed step after each switch, then three timed ones.
    EXPECT_EQ(Letters(Drive(
                  c, 14, [](StepMode m, int) { return m == D ? 1.0 : 2.0; }, &notes)),
              "DDDDCCCCDDDDDD");
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0], "8: auto: dense, 1 s a step against codec's 2 s");
    EXPECT_DOUBLE_EQ(c.dense_seconds(), 1.0);
    EXPECT_DOUBLE_EQ(c.codec_seconds(), 2.0);
  }
  {
    SpeedChooser c(o);
    EXPECT_EQ(Letters(Drive(c, 14, [](StepMode m, int) { return m == D ? 0.5 : 0.1; })),
              "DDDDCCCCCCCCCC");
    EXPECT_TRUE(c.settled());
  }
}

TEST(SpeedChooser, TheCodecMustBeatDenseByTheMargin) {
  SpeedChoiceOptions o;
  o.reprobe_every = 0;
  o.margin = 0.05;
  SpeedChooser near(o);  // 3 % faster: not enough, dense's exact averages win
  EXPECT_EQ(Letters(Drive(near, 10, [](StepMode m, int) { return m == D ? 1.0 : 0.97; })).back(),
            'D');
  SpeedChooser clear(o);  // 10 % faster
  EXPECT_EQ(Letters(Drive(clear, 10, [](StepMode m, int) { return m == D ? 1.0 : 0.9; })).back(),
            'C');
}

TEST(SpeedChooser, MediansIgnoreOneOutlierAndTheFirstStepAfterASwitch) {
  SpeedChoiceOptions o;
  o.reprobe_every = 0;
  SpeedChooser c(o);
  // Each mode's first step is huge (allocations, the switch) and one timed
  // codec step stalls: the medians still say codec.
  const auto modes = Drive(c, 10, [](StepMode m, int s) {
    if (s == 0 || s == 4) return 100.0;
    if (s == 6) return 50.0;
    return m == D ? 1.0 : 0.5;
  });
  EXPECT_EQ(Letters(modes), "DDDDCCCCCC");
}

TEST(SpeedChooser, ReprobesTheOtherModeEveryReprobeEverySteps) {
  SpeedChoiceOptions o;
  o.reprobe_every = 5;
  o.probe_cost = 0;  // every 5 steps, whatever a probe costs
  o.drift = 0;
  SpeedChooser c(o);
  std::vector<std::string> notes;
  // The link gets faster at step 12: dense wins from then on.
  const auto modes = Drive(
      c, 26,
      [](StepMode m, int s) {
        if (m == C) return 1.0;
        return s < 12 ? 4.0 : 0.5;
      },
      &notes);
  // Settled on the codec at step 8; five settled steps later (13) dense
  // is probed again (4 steps); at 17 it settles on dense, and five steps
  // later (22) probes the codec again.
  EXPECT_EQ(Letters(modes), "DDDDCCCCCCCCCDDDDDDDDDCCCC");
  ASSERT_EQ(notes.size(), 4u);
  EXPECT_EQ(notes[0], "8: auto: codec, 1 s a step against dense's 4 s");
  EXPECT_EQ(notes[1], "13: auto: probing dense again (codec now 1 s a step)");
  EXPECT_EQ(notes[2], "17: auto: dense, 0.5 s a step against codec's 1 s");
  EXPECT_EQ(notes[3], "22: auto: probing codec again (dense now 0.5 s a step)");
}

TEST(SpeedChooser, ReprobesWhenTheSettledModesTimeDrifts) {
  SpeedChoiceOptions o;
  o.reprobe_every = 0;
  o.drift = 0.3;
  o.min_settled = 4;
  SpeedChooser c(o);
  std::vector<std::string> notes;
  // The codec settles at 1 s (step 8); from step 10 its steps take 3 s (the
  // CPU got busy): at step 12, the fourth settled step, the median of its
  // last three is 3 s, past 30 % off, and dense is probed again, now cheaper.
  const auto modes = Drive(
      c, 24,
      [](StepMode m, int s) {
        if (m == D) return 2.0;
        return s < 10 ? 1.0 : 3.0;
      },
      &notes);
  EXPECT_EQ(Letters(modes).substr(0, 8), "DDDDCCCC");
  ASSERT_GE(notes.size(), 3u);
  EXPECT_EQ(notes[1], "12: auto: probing dense again (codec now 3 s a step, was 1 s)");
  EXPECT_EQ(notes[2], "16: auto: dense, 2 s a step against codec's 3 s");
  EXPECT_EQ(modes.back(), D);
}

TEST(SpeedChooser, ReprobesNoMoreOftenThanTheProbeCostAllows) {
  SpeedChoiceOptions o;
  o.reprobe_every = 5;
  o.probe_cost = 0.1;
  o.drift = 0;
  SpeedChooser c(o);
  std::vector<std::string> notes;
  // Dense takes 2x the codec: a probe's 4 dense steps cost 4 extra codec
  // steps, which is 10 % of 40 steps: settled at 8, dense again at 48.
  Drive(
      c, 60, [](StepMode m, int) { return m == D ? 2.0 : 1.0; }, &notes);
  ASSERT_GE(notes.size(), 2u);
  EXPECT_EQ(notes[1], "48: auto: probing dense again (codec now 1 s a step)");
}

TEST(SpeedChooser, AFasterSettledModeIsNoDrift) {
  SpeedChoiceOptions o;
  o.reprobe_every = 0;
  o.drift = 0.3;
  o.min_settled = 2;
  SpeedChooser c(o);
  std::vector<std::string> notes;
  // The codec settles at 1 s and then gets faster: nothing to look at again.
  Drive(
      c, 40, [](StepMode m, int s) { return m == D   ? 2.0
                                            : s < 10 ? 1.0
                                                     : 0.4; }, &notes);
  EXPECT_EQ(notes.size(), 1u);
}

TEST(SpeedChooser, AStepWithoutATimeIsNotCounted) {
  SpeedChoiceOptions o;
  o.reprobe_every = 0;
  SpeedChooser c(o);
  // Steps 1 and 2 have no figure (skipped or failed elsewhere): dense is
  // timed on steps 3-5 and the codec starts at 6.
  const auto modes = Drive(c, 8, [](StepMode, int s) { return s == 1 || s == 2 ? -1.0 : 1.0; });
  EXPECT_EQ(Letters(modes), "DDDDDDCC");
  c.Record(5.0);  // a second figure for the same step is ignored
  c.Record(5.0);
}

TEST(SpeedChooser, ABadStateIsRefusedAndChangesNothing) {
  SpeedChoiceOptions o;
  SpeedChooser c(o);
  Drive(c, 6, [](StepMode m, int) { return m == D ? 1.0 : 0.5; });
  const std::vector<uint8_t> before = c.SaveState();
  std::vector<uint8_t> bad = before;
  bad[0] = 'X';
  EXPECT_EQ(c.LoadState(bad).code(), StatusCode::kInvalidArgument);
  bad = before;
  bad.pop_back();
  EXPECT_EQ(c.LoadState(bad).code(), StatusCode::kCorruption);
  bad = before;
  bad.push_back(0);
  EXPECT_EQ(c.LoadState(bad).code(), StatusCode::kCorruption);
  bad = before;
  bad[4] = 7;  // no such mode
  EXPECT_EQ(c.LoadState(bad).code(), StatusCode::kCorruption);
  EXPECT_EQ(c.SaveState(), before);
}

TEST(SpeedChooser, ATimeThatComesAStepLateCountsForTheModeItsStepRan) {
  SpeedChoiceOptions o = ProbeOnly(1);
  SpeedChooser c(o);
  // Dense's one timed step (1) is known at step 3 and the codec probed from
  // there; the last dense step's time (2) comes after the switch and still
  // counts for dense; the codec's untimed step 3, timed step 4; settled at 6.
  EXPECT_EQ(Letters(DriveLagged(c, 9, [](StepMode m, int) { return m == D ? 1.0 : 2.0; })),
            "DDDCCCDDD");
  EXPECT_DOUBLE_EQ(c.dense_seconds(), 1.0);
  EXPECT_DOUBLE_EQ(c.codec_seconds(), 2.0);  // no dense time counted for the codec
  // A time of a step decided before the probe settled is dropped: the codec
  // probe's last time (3) would otherwise count among settled dense's recent
  // times, 3x its 1, and dense (min_settled 0) would probe the codec again.
  o.drift = 0.3;
  o.min_settled = 0;
  SpeedChooser d(o);
  EXPECT_EQ(Letters(DriveLagged(d, 12, [](StepMode m, int) { return m == D ? 1.0 : 3.0; })),
            "DDDCCCDDDDDD");
}

// Cut anywhere, saved and loaded, it decides as the uninterrupted run: with
// each time recorded before the next Decide() (the trainer) and a step late
// (the hook: a cut leaves the last step awaiting its time in the state).
TEST(SpeedChooser, ASavedStateDecidesAsTheUninterruptedOne) {
  SpeedChoiceOptions o;
  o.reprobe_every = 7;
  o.probe_cost = 0;
  auto times = [](StepMode m, int s) { return (m == D ? 1.0 : 0.6) + 0.01 * (s % 3); };
  for (bool lagged : {false, true}) {
    for (int cut : {0, 1, 3, 4, 5, 6, 9, 11, 15, 17}) {
      SpeedChooser whole(o), first(o), second(o);
      const auto all = lagged ? DriveLagged(whole, 30, times) : Drive(whole, 30, times);
      auto a = lagged ? DriveLagged(first, cut, times) : Drive(first, cut, times);
      const std::vector<uint8_t> saved = first.SaveState();
      ASSERT_TRUE(second.LoadState(saved).ok());
      EXPECT_EQ(second.SaveState(), saved);
      EXPECT_EQ(second.started(), cut > 0);  // the hook's auto asks it
      for (int s = cut; s < 30; ++s) {
        a.push_back(second.Decide());
        if (!lagged) second.Record(times(a[s], s));
        if (lagged && s > 0) second.Record(times(a[s - 1], s - 1));
      }
      EXPECT_EQ(Letters(a), Letters(all)) << "cut at " << cut << (lagged ? ", lagged" : "");
    }
  }
}

TEST(SpeedChooser, AStateSavedBeforeTheQueueStillLoads) {
  // "SPD1": mode codec, started, one timed step awaited, settled, both, first
  // dense; run 4, since_settle 2; no samples; recent [0.5]; medians 1 and 0.5.
  std::vector<uint8_t> v1 = {'S', 'P', 'D', '1', 1, 1, 1, 1, 1, 1, 0};
  auto put = [&v1](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    v1.insert(v1.end(), b, b + n);
  };
  const int64_t run = 4, since = 2;
  const uint32_t none = 0, one = 1;
  const double half = 0.5, whole = 1.0;
  put(&run, 8);
  put(&since, 8);
  put(&none, 4);
  put(&none, 4);
  put(&one, 4);
  put(&half, 8);
  put(&whole, 8);
  put(&half, 8);
  put(&half, 8);
  SpeedChoiceOptions o;
  SpeedChooser c(o);
  ASSERT_TRUE(c.LoadState(v1).ok());
  EXPECT_TRUE(c.settled());
  EXPECT_DOUBLE_EQ(c.dense_seconds(), 1.0);
  EXPECT_DOUBLE_EQ(c.codec_seconds(), 0.5);
  c.Record(0.5);  // the awaited step
  EXPECT_EQ(c.Decide(), C);
  const std::vector<uint8_t> v2 = c.SaveState();
  EXPECT_EQ(std::string(v2.begin(), v2.begin() + 4), "SPD2");
  SpeedChooser d(o);
  EXPECT_TRUE(d.LoadState(v2).ok());
  v1.pop_back();
  EXPECT_EQ(d.LoadState(v1).code(), StatusCode::kCorruption);
  EXPECT_EQ(d.SaveState(), v2);
}

TEST(SpeedChooser, OptionsAreValidated) {
  SpeedChoiceOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.probe_steps = 0;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o = {};
  o.margin = 1;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o = {};
  o.drift = -0.1;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o = {};
  o.probe_cost = -1;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o = {};
  o.reprobe_every = -1;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace adacomp
