"""auto=True: each step of the hook goes either by the codec or dense (each rank's
gradient plus its residue, all-reduced by the process group as DDP without a hook
does: dense_sum.py; the residues then emptied), whichever this run's step times say
is faster, decided by the trainer's own rule (adacomp/speed_choice.h, bound as
_SpeedChooser).

With a local optimizer (DistributedOptimizer's SGD with momentum, Adam, AdamW) both
kinds of step send what each rank's optimizer gives, its velocity or its Adam step: a
dense step sends it whole with the residue added and masks nothing (sgd's velocity
goes on: the average of the ranks' velocities is SGD with momentum on the averaged
gradient); a codec step compresses it and masks as always.

A step's time is the interval from its first bucket to the next step's first bucket:
the whole iteration (forward, backward, the exchange and what it hides, the
optimizer). At each step's first bucket every rank posts its time of the step before
to an all-gather (8 bytes, async: no rank waits there for the others, as DDP's own
all-reduce does not), and reads it at the next step's first bucket, when that step's
buckets, posted after it, have been reduced everywhere. All ranks feed the chooser
the fastest rank's time, one step late (speed_choice.h counts it for the mode that
step ran), so every rank makes the same choice. A checkpoint keeps the agreed time
not yet fed; the time of the step in flight at the save is lost on a resume (its
start is not saved), as a skipped step's is. A dense step's residues are emptied
only when the step is applied (_commit_step); a failed step leaves them whole. A
parameter this step left unused (track_usage) sends an empty frame and keeps its
residue."""

import time

import torch
import torch.distributed as dist

from .. import _adacomp


class _Auto:
    def __init__(self, options):
        opts = dict(options or {})
        self.chooser = _adacomp._SpeedChooser(**opts)  # ValueError on a bad setting
        self.options = opts
        self.mode = "codec"
        self.started = None     # perf_counter at the current step's first bucket
        # The last step's time as posted at this step's start: (all_gather work, its
        # outputs), or a float once read (and with one rank), or None.
        self.agreeing = None
        self.timed = False      # the last step was applied (its time counts)
        self.folded = {}        # id(entry) -> entry: residues a dense step sent
        # id(entry) of residues a dense step emptied and no compression has filled
        # since: a dense step adds nothing of them (no copy on a dense run's hot path).
        self.empty = set()
        self.dense_steps = 0
        self.codec_steps = 0
        self.choices = []       # "step N: auto: ..." for each settled choice
        self.note = ""

    def begin(self, state, step):
        """At a step's first bucket (under the state's lock): record the agreed time of
        the step before last, post this rank's time of the last step, and choose this
        step's mode."""
        now = time.perf_counter()
        mine = now - self.started if self.started is not None and self.timed else -1.0
        if self.agreeing is not None:
            self.chooser.record(self._agreed())
            self.agreeing = None
        world = state._world()
        # (the run's first step: no step before it awaits a time)
        decided = self.chooser.started  # a step was decided (this run or the saved one)
        if decided and world > 1:
            t = torch.tensor([mine], dtype=torch.float64)
            out = [torch.empty(1, dtype=torch.float64) for _ in range(world)]
            work = dist.all_gather(out, t, group=state.process_group, async_op=True)
            self.agreeing = (work, out)
        elif decided:
            self.agreeing = mine
        self.mode = self.chooser.decide()
        self.note = self.chooser.note
        if self.note:
            self.choices.append(f"step {step + 1}: {self.note}")
        self.started = now
        self.timed = False
        self.folded = {}

    def _agreed(self):
        """The step time posted at the last step's start, agreed: the fastest rank's,
        or -1 (not counted) where a rank has none. Its all-gather was posted before
        that step's buckets, which every rank has since reduced: waiting costs nothing."""
        if isinstance(self.agreeing, float):
            times = [self.agreeing]
        else:
            work, out = self.agreeing
            work.wait()
            times = [float(o[0]) for o in out]
        self.agreeing = min(times) if all(x >= 0 for x in times) else -1.0
        return self.agreeing

    def fold(self, e, g):
        """A dense step: what parameter e sends (g, its gradient or local step, float32,
        in the working copy) gets its residue added, and the residue is noted to be
        emptied when the step is applied (nothing when it has none)."""
        if id(e) in self.empty:
            return
        r = e.compressor.residue
        if len(r):
            g += r
            self.folded[id(e)] = e

    def commit(self):
        for e in self.folded.values():
            e.compressor.clear_residue()
        if self.mode == "dense":
            self.empty.update(self.folded)
            self.dense_steps += 1
        else:
            self.empty.clear()  # the codec's step filled the residues again
            self.codec_steps += 1
        self.folded = {}
        self.timed = True

    def drop(self):
        """A failed step: the residues stay whole, its time does not count."""
        self.folded = {}
        self.timed = False

    def save(self):
        agreed = self._agreed() if self.agreeing is not None else None
        return {"chooser": self.chooser.save_state(), "agreed": agreed,
                "dense_steps": self.dense_steps,
                "codec_steps": self.codec_steps, "choices": list(self.choices)}

    def check(self, saved):
        if not isinstance(saved, dict) or not isinstance(saved.get("chooser"), bytes):
            raise ValueError("state_dict has no auto state, this state has auto=True")
        probe = _adacomp._SpeedChooser(**self.options)
        probe.load_state(saved["chooser"])  # ValueError if it does not read back

    def load(self, saved):
        self.chooser.load_state(saved["chooser"])
        self.dense_steps = int(saved["dense_steps"])
        self.codec_steps = int(saved["codec_steps"])
        self.choices = list(saved["choices"])
        agreed = saved.get("agreed")  # (states saved before the lag have none)
        self.agreeing = None if agreed is None else float(agreed)
        self.started, self.timed, self.folded, self.empty = None, False, {}, set()
