// SpeedChooser (adacomp/speed_choice.h): the `auto` codec's probe-and-settle rule.
#include "adacomp/speed_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/byte_io.h"

namespace adacomp {
namespace {

int Index(StepMode m) { return m == StepMode::kDense ? 0 : 1; }
StepMode Other(StepMode m) { return m == StepMode::kDense ? StepMode::kCodec : StepMode::kDense; }

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g s", s);
  return buf;
}

// The saved state: "SPD2", then the fields in SaveState's order
// (core/byte_io.h; a vector as its uint32 length and its doubles). "SPD1",
// written before steps could await their times in a queue, had one awaited
// step as two bytes (awaited, timed) after `started` and no phase; it still
// loads.
constexpr char kMagic[4] = {'S', 'P', 'D', '2'};
constexpr char kMagicV1[4] = {'S', 'P', 'D', '1'};
constexpr uint32_t kMaxSamples = 1 << 16;

void PutTimes(ByteWriter& w, const std::vector<double>& v) {
  w.Put<uint32_t>(static_cast<uint32_t>(v.size()));
  for (double x : v) w.Put(x);
}

Status GetTimes(ByteReader& r, std::vector<double>* v) {
  uint32_t n = 0;
  ADACOMP_RETURN_IF_ERROR(r.Get(&n));
  if (n > kMaxSamples) return Status::Corruption("a saved auto-codec state lists too many times");
  v->assign(n, 0.0);
  for (double& x : *v) ADACOMP_RETURN_IF_ERROR(r.Get(&x));
  return Status::OK();
}

}  // namespace

SpeedChooser::SpeedChooser(SpeedChoiceOptions options) : o_(options) {}

double SpeedChooser::Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

StepMode SpeedChooser::Decide() {
  note_.clear();
  const size_t probe = static_cast<size_t>(std::max(1, o_.probe_steps));
  if (!started_) {
    started_ = true;
    StartProbe(StepMode::kDense, /*both=*/true);
  } else if (!settled_) {
    if (samples_[Index(mode_)].size() >= probe) {
      if (probe_both_ && mode_ == probe_first_) {
        mode_ = Other(mode_);
        run_ = 0;
      } else {
        Settle();
      }
    }
  } else {
    ++since_settle_;
    const bool due = o_.reprobe_every > 0 && since_settle_ >= ReprobeInterval();
    const bool drifted = o_.drift > 0 && since_settle_ >= o_.min_settled &&
                         recent_.size() >= probe && settled_ref_ > 0 &&
                         Median(recent_) > settled_ref_ * (1.0 + o_.drift);
    if (due || drifted) {
      ref_[Index(mode_)] = Median(recent_);
      note_ = "auto: probing " + std::string(StepModeName(Other(mode_))) + " again (" +
              std::string(StepModeName(mode_)) + " now " + Seconds(ref_[Index(mode_)]) + " a step" +
              (drifted && !due ? ", was " + Seconds(settled_ref_) : std::string()) + ")";
      StartProbe(Other(mode_), /*both=*/false);
    }
  }
  if (pending_.size() >= kMaxPending) pending_.pop_front();
  pending_.push_back({mode_, run_ > 0, phase_});
  ++run_;
  return mode_;
}

int64_t SpeedChooser::ReprobeInterval() const {
  const double cur = ref_[Index(mode_)], other = ref_[Index(Other(mode_))];
  if (!(o_.probe_cost > 0) || !(cur > 0) || !(other > cur)) return o_.reprobe_every;
  // A probe runs probe_steps + 1 steps of the other mode, each (other - cur)
  // longer: keep that under probe_cost of the settled time in between.
  const double steps = (o_.probe_steps + 1) * (other / cur - 1.0) / o_.probe_cost;
  return steps > static_cast<double>(o_.reprobe_every)
             ? static_cast<int64_t>(std::min(std::ceil(steps), 1e15))
             : o_.reprobe_every;
}

void SpeedChooser::StartProbe(StepMode first, bool both) {
  settled_ = false;
  ++phase_;
  probe_both_ = both;
  probe_first_ = first;
  samples_[0].clear();
  samples_[1].clear();
  mode_ = first;
  run_ = 0;
}

void SpeedChooser::Settle() {
  if (probe_both_) {
    ref_[0] = Median(samples_[0]);
    ref_[1] = Median(samples_[1]);
  } else {
    ref_[Index(mode_)] = Median(samples_[Index(mode_)]);
  }
  const StepMode pick = ref_[1] < ref_[0] * (1.0 - o_.margin) ? StepMode::kCodec : StepMode::kDense;
  note_ = "auto: " + std::string(StepModeName(pick)) + ", " + Seconds(ref_[Index(pick)]) +
          " a step against " + std::string(StepModeName(Other(pick))) + "'s " +
          Seconds(ref_[Index(Other(pick))]);
  if (pick != mode_) run_ = 0;
  mode_ = pick;
  settled_ = true;
  ++phase_;
  since_settle_ = 0;
  settled_ref_ = ref_[Index(pick)];
  recent_.clear();
  samples_[0].clear();
  samples_[1].clear();
}

void SpeedChooser::Record(double seconds) {
  if (pending_.empty()) return;
  const Pending step = pending_.front();
  pending_.pop_front();
  if (!step.timed || step.phase != phase_ || !(seconds >= 0) || !std::isfinite(seconds)) return;
  if (!settled_) {
    samples_[Index(step.mode)].push_back(seconds);
  } else {  // (the same phase: the settled mode)
    recent_.push_back(seconds);
    const size_t probe = static_cast<size_t>(std::max(1, o_.probe_steps));
    if (recent_.size() > probe) recent_.erase(recent_.begin());
  }
}

std::vector<uint8_t> SpeedChooser::SaveState() const {
  ByteWriter w;
  w.bytes.assign(kMagic, kMagic + 4);
  w.Put<uint8_t>(static_cast<uint8_t>(mode_));
  w.Put<uint8_t>(started_);
  w.Put<uint8_t>(settled_);
  w.Put<uint8_t>(probe_both_);
  w.Put<uint8_t>(static_cast<uint8_t>(probe_first_));
  w.Put<int64_t>(run_);
  w.Put<int64_t>(since_settle_);
  w.Put<uint32_t>(phase_);
  w.Put<uint32_t>(static_cast<uint32_t>(pending_.size()));
  for (const Pending& p : pending_) {
    w.Put<uint8_t>(static_cast<uint8_t>(p.mode));
    w.Put<uint8_t>(p.timed);
    w.Put<uint32_t>(p.phase);
  }
  PutTimes(w, samples_[0]);
  PutTimes(w, samples_[1]);
  PutTimes(w, recent_);
  w.Put(ref_[0]);
  w.Put(ref_[1]);
  w.Put(settled_ref_);
  return std::move(w.bytes);
}

Status SpeedChooser::LoadState(std::span<const uint8_t> bytes) {
  const bool v1 = bytes.size() >= 4 && std::memcmp(bytes.data(), kMagicV1, 4) == 0;
  if (!v1 && (bytes.size() < 4 || std::memcmp(bytes.data(), kMagic, 4) != 0)) {
    return Status::InvalidArgument("not a saved auto-codec state (no SPD2 or SPD1 mark)");
  }
  ByteReader r(bytes.subspan(4), "a saved auto-codec state");
  SpeedChooser n(o_);
  uint8_t mode = 0, started = 0, settled = 0, both = 0, first = 0;
  uint8_t pending = 0, timed = 0;  // SPD1's one awaited step
  bool bad = false;
  if (v1) {
    for (uint8_t* b : {&mode, &started, &pending, &timed, &settled, &both, &first}) {
      ADACOMP_RETURN_IF_ERROR(r.Get(b));
    }
  } else {
    for (uint8_t* b : {&mode, &started, &settled, &both, &first}) ADACOMP_RETURN_IF_ERROR(r.Get(b));
  }
  ADACOMP_RETURN_IF_ERROR(r.Get(&n.run_));
  ADACOMP_RETURN_IF_ERROR(r.Get(&n.since_settle_));
  if (v1) {
    if (pending)
      n.pending_.push_back(
          {mode > 1 ? StepMode::kDense : static_cast<StepMode>(mode), timed != 0, 0});
  } else {
    uint32_t count = 0;
    ADACOMP_RETURN_IF_ERROR(r.Get(&n.phase_));
    ADACOMP_RETURN_IF_ERROR(r.Get(&count));
    if (count > kMaxPending) bad = true;
    for (uint32_t k = 0; k < count && !bad; ++k) {
      uint8_t m = 0, t = 0;
      uint32_t phase = 0;
      ADACOMP_RETURN_IF_ERROR(r.Get(&m));
      ADACOMP_RETURN_IF_ERROR(r.Get(&t));
      ADACOMP_RETURN_IF_ERROR(r.Get(&phase));
      bad = m > 1 || t > 1;
      n.pending_.push_back({static_cast<StepMode>(m), t != 0, phase});
    }
  }
  if (!bad) {
    ADACOMP_RETURN_IF_ERROR(GetTimes(r, &n.samples_[0]));
    ADACOMP_RETURN_IF_ERROR(GetTimes(r, &n.samples_[1]));
    ADACOMP_RETURN_IF_ERROR(GetTimes(r, &n.recent_));
    ADACOMP_RETURN_IF_ERROR(r.Get(&n.ref_[0]));
    ADACOMP_RETURN_IF_ERROR(r.Get(&n.ref_[1]));
    ADACOMP_RETURN_IF_ERROR(r.Get(&n.settled_ref_));
  }
  if (bad || !r.AtEnd() || mode > 1 || first > 1 || n.run_ < 0 || n.since_settle_ < 0) {
    return Status::Corruption("a saved auto-codec state of " + std::to_string(bytes.size()) +
                              " bytes does not read back whole");
  }
  n.mode_ = static_cast<StepMode>(mode);
  n.probe_first_ = static_cast<StepMode>(first);
  n.started_ = started != 0;
  n.settled_ = settled != 0;
  n.probe_both_ = both != 0;
  *this = std::move(n);
  return Status::OK();
}

std::string_view StepModeName(StepMode mode) {
  return mode == StepMode::kDense ? "dense" : "codec";
}

Status SpeedChoiceOptions::Validate() const {
  if (probe_steps < 1 || probe_steps > 1000) {
    return Status::InvalidArgument("auto: probe_steps must be 1..1000, not " +
                                   std::to_string(probe_steps));
  }
  if (reprobe_every < 0) return Status::InvalidArgument("auto: reprobe_every must be >= 0");
  if (min_settled < 0) return Status::InvalidArgument("auto: min_settled must be >= 0");
  if (!(drift >= 0) || !std::isfinite(drift)) {
    return Status::InvalidArgument("auto: drift must be a finite fraction >= 0");
  }
  if (!(probe_cost >= 0) || !std::isfinite(probe_cost)) {
    return Status::InvalidArgument("auto: probe_cost must be a finite fraction >= 0");
  }
  if (!(margin >= 0 && margin < 1)) {
    return Status::InvalidArgument("auto: margin must be in [0, 1)");
  }
  return Status::OK();
}

}  // namespace adacomp
