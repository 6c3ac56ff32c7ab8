"""The measured step scale of local Adam (local_step_scale="measured"): how much each
rank's Adam step must be scaled so that the average of the ranks' steps is as large
as Adam's step on the averaged gradient, measured from the gradients themselves.

Each rank's second moment v_r is of its own gradient g_r; Adam on the averaged
gradient would divide by v_avg, the second moment of the average gbar. Per element,
the average of the ranks' steps m_r / sqrt(v_r) is then sqrt(v_r / v_avg) times too
small. That factor is 1 where the ranks' gradients agree and sqrt(P) where batch
noise dominates (P ranks); a fixed sqrt(P) overshoots by up to sqrt(P) in the first
case (docs/local-adam.md), 1 undershoots in the second.

The meter estimates it at a few fixed sampled elements of every tensor (16, drawn
with a seed from the tensor's index, so every rank samples the same ones): at each
step, every rank sends its gradient there (float32, ``size`` values and a flag; 4
bytes a sample, about 3 KB per peer for a 50-tensor model) to every peer; every rank
adds the P vectors and their squares in float64 in rank order (the same bits
everywhere) and keeps, per sampled element, exponential averages at
Adam's beta2 of gbar^2 (``num``, v_avg's estimate) and of the ranks' mean g^2
(``den``, v_r's). The scale of the next step is the geometric mean of
sqrt(den / num) over the sampled elements, each clamped to [1, sqrt(P)] and
weighted by the elements it stands for; 1 before the first measurement. Only batch
noise separates the ranks at one step, so the estimate is not confused by the
gradient drifting over time.

The messages go at each step's last bucket, after its frames, and are received
before the step settles; a failed step measures nothing, and the averages change
only when a step commits. They are state (state_dict), so a resume continues with
the same scale."""

import math

import numpy as np
import torch
import torch.distributed as dist

PER_TENSOR = 16          # sampled elements per tensor (fewer where it has fewer)
_TAG = 0x5AF0000         # the meter's messages (transport.py's tags start at 0x5AC0000)


class ScaleMeter:
    """The measured scale: sampled elements, their averages, and the step's messages."""

    def __init__(self):
        self.world = 1
        self._slots = {}       # tensor name -> (offset in the vector, positions, weight)
        self.size = 0          # sampled elements over every tensor
        self._weights = np.zeros(0)
        self.num = np.zeros(0)  # per sampled element: average of gbar^2
        self.den = np.zeros(0)  # and of the ranks' mean g^2
        self.measured = 0       # steps measured (committed)
        self.scale = 1.0        # the scale of the next step
        self._vec = None        # this step's samples: g (size values), then a flag
        self._works = None      # the step's messages in flight: (sends, [(rank, buffer, work)])
        self._received = None   # the step's vectors of every rank, in rank order

    def build(self, tensors, world):
        """tensors: [(name, numel)] in the order every rank has them (tensor ids); world:
        the number of ranks."""
        self.world = world
        off = 0
        for index, (name, n) in enumerate(tensors):
            m = min(n, PER_TENSOR)
            if m == 0:
                continue
            rng = np.random.default_rng(0x5CA1E + index)
            pos = np.sort(rng.choice(n, size=m, replace=False)).astype(np.int64)
            self._slots[name] = (off, pos, n / m)
            off += m
        self.size = off
        self._weights = np.zeros(off)
        for o, pos, w in self._slots.values():
            self._weights[o:o + pos.size] = w
        self.num = np.zeros(off)
        self.den = np.zeros(off)

    def begin(self):
        """A step begins: what an unfinished one sampled is forgotten."""
        self._vec = None

    def take(self, name, grad, param=None, weight_decay=0.0):
        """Samples this rank's gradient of tensor ``name`` (the float32 slice handed to the
        optimizer) for the step in progress, with weight_decay x param added where the
        moments take an L2 term (torch's Adam's weight_decay; param: float32 numpy)."""
        slot = self._slots.get(name)
        if slot is None:
            return
        if self._vec is None:
            self._vec = np.zeros(self.size + 1, dtype=np.float32)
        off, pos, _ = slot
        x = grad[pos]
        if weight_decay:
            x = x + np.float32(weight_decay) * param[pos]
        self._vec[off:off + pos.size] = x
        self._vec[-1] = 1.0

    def post(self, group, rank, world, global_rank):
        """At the step's last bucket: sends this rank's samples to every peer (a vector of
        zeros flagged 0 when it took none: a failed or skipped step) and posts the
        receives. global_rank(r): the rank in the default group. Returns the tensors
        handed to the process group (the caller keeps them: worker.py says why)."""
        mine = self._vec if self._vec is not None else np.zeros(self.size + 1, np.float32)
        self._vec = None
        own = torch.from_numpy(mine)
        if world == 1:
            self._works = ([], [(rank, own, None)])
            return [own]
        g = None if group is dist.group.WORLD else group
        recvs = [(rank, own, None)]
        for k in range(1, world):
            src = (rank - k) % world
            buf = torch.empty(self.size + 1, dtype=torch.float32)
            recvs.append((src, buf, dist.irecv(buf, global_rank(src), group=g, tag=_TAG)))
        sends = [dist.isend(own, global_rank((rank + k) % world), group=g, tag=_TAG)
                 for k in range(1, world)]
        self._works = (sends, recvs)
        return [own] + [buf for _, buf, _ in recvs[1:]]

    def message_bytes(self, world):
        """What post() hands to isend, to every peer together."""
        return (world - 1) * 4 * (self.size + 1)

    def receive(self):
        """Waits for the step's messages (the last bucket's exchange thread); a failed
        send or receive raises, and fails the step."""
        works, self._works = self._works, None
        if works is None:
            return
        sends, recvs = works
        got = {}
        for src, buf, w in recvs:
            if w is not None:
                w.wait()
            got[src] = buf.numpy()
        for w in sends:
            w.wait()
        # (a non-finite sample comes from a non-finite gradient, which fails the step in
        # the compressors with its own message; commit() measures nothing from it)
        self._received = [got[r] for r in sorted(got)]

    def discard(self):
        """The step's last bucket settled: what it measured and commit() did not take (a
        failed step) is dropped."""
        self._received = None

    def commit(self, opt, beta):
        """The step was applied: its samples go into the averages (at Adam's beta2, beta),
        and the next step's scale into ``opt`` (the library's optimizer; between steps)."""
        vecs, self._received = self._received, None
        if (not vecs or len(vecs) != self.world or any(v[-1] != 1.0 for v in vecs)
                or not all(np.isfinite(v).all() for v in vecs)):
            return  # a step without samples on some rank, or not finite: nothing measured
        world, n = self.world, self.size
        total, squares = np.zeros(n), np.zeros(n)
        for v in vecs:  # in rank order: the same bits on every rank
            x = v[:n].astype(np.float64)
            total += x
            squares += x * x
        mean = total / world
        b = float(beta)
        self.num = b * self.num + (1 - b) * mean * mean
        self.den = b * self.den + (1 - b) * squares / world
        self.measured += 1
        self._set(opt)

    def _set(self, opt):
        self.scale = scale_from(self.num, self.den, self._weights, self.world)
        opt.set_step_scale(self.scale)

    def state(self):
        return {"size": self.size, "measured": self.measured,
                "num": torch.from_numpy(self.num.copy()),
                "den": torch.from_numpy(self.den.copy())}

    def check(self, saved):
        """Raises ValueError unless ``saved`` (a state()) fits this meter."""
        if not isinstance(saved, dict):
            raise ValueError("state_dict's local Adam has no measured step scale, this "
                             "state measures one (local_step_scale='measured')")
        if saved.get("size") != self.size:
            raise ValueError(f"state_dict's measured step scale samples {saved.get('size')} "
                             f"elements, this state {self.size}")
        for key in ("num", "den"):
            t = saved.get(key)
            if (not isinstance(t, torch.Tensor) or t.dtype != torch.float64
                    or t.dim() != 1 or t.numel() != self.size):
                raise ValueError(f"state_dict's measured step scale: {key} is not "
                                 f"{self.size} float64 values")

    def reset(self, opt):
        """Forgets every measurement (the optimizer's moments were replaced): scale 1."""
        self.num = np.zeros(self.size)
        self.den = np.zeros(self.size)
        self.measured = 0
        self._received = self._vec = None
        self.scale = 1.0
        opt.set_step_scale(1.0)

    def load(self, saved, opt):
        self.reset(opt)
        self.num = saved["num"].numpy().copy()
        self.den = saved["den"].numpy().copy()
        self.measured = int(saved.get("measured", 0))
        if self.measured:
            self._set(opt)


def scale_from(num, den, weights, world):
    """The weighted geometric mean of sqrt(den / num) over the sampled elements where
    both are > 0, each clamped to [1, sqrt(world)]; 1 where there are none."""
    ok = (num > 0) & (den > 0)
    if not ok.any():
        return 1.0
    f = np.clip(0.5 * np.log(den[ok] / num[ok]), 0.0, 0.5 * math.log(world))
    w = weights[ok]
    return float(math.exp(float(np.dot(w, f) / w.sum())))
