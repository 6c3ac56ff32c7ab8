// adacomp/speed_choice.h: how the `auto` codec (ExchangeOptions::auto_dense,
// `adacomp train --codec auto`, the DDP hook's auto=True) picks, step by
// step, between the dense exchange and the tensors' codecs, from step times
// measured on this run.
//
// Probing: the run starts dense (the early phase, where dense's steps also
// train best) for probe_steps timed steps, then runs the codec for as many,
// and settles on the faster by the medians (the codec only when its time is
// below dense's by `margin`: on a tie, dense's exact averages win). The
// first step after each switch is not timed (it pays the switch). Once
// settled it probes the other mode again every reprobe_every steps (or
// more: as many as keep the probe's extra time, (probe_steps + 1) steps of
// the slower mode, under probe_cost of the time in between; where dense's
// steps take 27x the codec's, 10,300 steps), or sooner
// when the median of the last probe_steps times of the mode it runs has
// grown by more than `drift` over the time it settled on (no sooner than
// min_settled steps after settling); a re-probe compares the other mode's
// new median with that recent median.
//
// A step's time may come after later steps were decided (the DDP hook
// agrees on a step's time while the next one runs): each Record() belongs to
// the oldest decided step without one, counts for the mode that step ran, and
// is dropped when a probe started or settled since that step was decided.
//
// Every learner feeds it the same numbers (the exchange agrees on them) and
// it is deterministic, so every learner decides the same. Its whole state
// saves to bytes for checkpoints. One object per learner, used by one
// thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "adacomp/status.h"

namespace adacomp {

// The two ways a step of the `auto` codec can go (ExchangeOptions::auto_dense).
enum class StepMode : uint8_t {
  kDense = 0,  // float32, every element, gradient + residue; residues emptied
  kCodec = 1,  // each tensor by its compressor (its codec), as without auto
};
std::string_view StepModeName(StepMode mode);  // "dense", "codec"

// How `auto` probes and settles (the comment at the top tells how).
struct SpeedChoiceOptions {
  int probe_steps = 3;          // timed steps of each mode per probe (>= 1)
  int64_t reprobe_every = 500;  // settled steps before the other mode is probed again; 0 = never
  // ... and at least as many as keep a probe's extra time (the slower
  // mode's steps) under this fraction of the time in between; 0 = off.
  double probe_cost = 0.01;
  double drift = 0.3;        // re-probe when the settled mode's recent median grows this much
  int64_t min_settled = 50;  // ... but no sooner than this many settled steps
  double margin = 0.05;      // the codec only when its time < dense's x (1 - margin)
  // InvalidArgument naming the bad field, or OK.
  Status Validate() const;
};

class SpeedChooser {
 public:
  explicit SpeedChooser(SpeedChoiceOptions options = {});

  // The mode of the step about to run; call once per step that runs (not
  // for a skipped one).
  StepMode Decide();
  // The agreed seconds of the oldest decided step not yet given one (the
  // trainer's exchange learns them at the next step, before its Decide(); the
  // hook one step later still); a negative value (no figure) is not counted,
  // and a call with no such step is ignored. At most kMaxPending steps await
  // a time: a Decide() beyond that drops the oldest.
  void Record(double seconds);
  static constexpr size_t kMaxPending = 8;
  // What the last Decide() settled, when it settled something ("" otherwise):
  // the mode chosen and the two median times compared.
  const std::string& note() const { return note_; }
  // The median step time of each mode at the last comparison (0 before).
  double dense_seconds() const { return ref_[0]; }
  double codec_seconds() const { return ref_[1]; }
  bool settled() const { return settled_; }
  // Decide() has been called (in this run or in the one whose state was loaded).
  bool started() const { return started_; }

  std::vector<uint8_t> SaveState() const;
  // Leaves the state unchanged on error (InvalidArgument or Corruption).
  Status LoadState(std::span<const uint8_t> bytes);

 private:
  static double Median(std::vector<double> v);
  // Settled steps before the other mode is probed again.
  int64_t ReprobeInterval() const;
  void StartProbe(StepMode first, bool both);
  void Settle();

  SpeedChoiceOptions o_;
  StepMode mode_ = StepMode::kDense;  // the mode of the last decided step
  bool started_ = false;              // Decide() has been called
  struct Pending {
    StepMode mode;
    bool timed;      // not the first step after a switch
    uint32_t phase;  // phase_ when it was decided
  };
  std::deque<Pending> pending_;  // decided steps awaiting Record(), oldest first
  uint32_t phase_ = 0;           // counts probes started and settlements
  bool settled_ = false;         // false: probing
  bool probe_both_ = true;       // this probe times both modes (the first one)
  StepMode probe_first_ = StepMode::kDense;
  int64_t run_ = 0;                 // steps decided in mode_ since the last switch
  int64_t since_settle_ = 0;        // steps decided since settling
  std::vector<double> samples_[2];  // timed steps of each mode in this probe
  std::vector<double> recent_;      // the settled mode's last probe_steps times
  double ref_[2] = {0, 0};          // medians at the last comparison
  double settled_ref_ = 0;          // the settled mode's time when it settled
  std::string note_;
};

}  // namespace adacomp
