"""The optimizer's moments kept on each rank, before compression
(AdaCompState(local_optimizer=...)), and split_optimizer(), which turns a user's torch
optimizer into the hook's settings plus the plain SGD that applies the averaged step.
The moments and their arithmetic are the library's (include/adacomp/local_optimizer.h,
the same code as ``adacomp train --local-optimizer``); this file keeps the names, the
clip and the saved form.

The hook's default compresses each rank's gradient and hands the average to the
user's optimizer, whose momentum or Adam moments then see only what the exchange
let through. With a local optimizer each rank runs the moments on its OWN gradient
and compresses the step they give; the average of the steps is applied as it is
(w -= lr x average, by torch.optim.SGD with momentum 0):

  "sgd"   the velocity u = momentum u + (g + weight_decay w) is compressed (the
          momentum correction of Deep Gradient Compression), with factor masking:
          an element the compressor sent has its velocity zeroed, so momentum from
          before the send does not push it again from the residue. With nesterov,
          Nesterov's step (g + weight_decay w) + momentum u is compressed instead.
  "adam"  the bias-corrected Adam step d = m_hat / (sqrt(v_hat) + eps) of this
          rank's gradient is compressed; nothing is masked. AdamW's decoupled
          weight decay stays with the SGD that applies the average (the same
          update: w -= lr (d + weight_decay w)); Adam's L2 term (weight_decay
          here) is added to the gradient before the moments, as torch's Adam adds it.

The elements masked are those the frame carries with a non-zero value (a sparse
frame's entries, never a pass over the tensor): the ones whose residue the send
changed, R + step minus the value sent. A codec without a residue ("dense",
"terngrad") masks nothing. Adam counts each parameter's steps, as torch's Adam does.

The moments of a step are prepared beside the current ones and take their place
only when the hook commits the step, so a step rolled back (a NaN anywhere, a
failed exchange) leaves them as they were.

With dense_warmup_steps, the first steps go uncompressed (float32 frames). "sgd"
sends each rank's velocity whole: their average is exactly SGD with momentum on the
averaged gradient (the velocity is linear in the gradients), and nothing is masked.
"adam" follows 1-bit Adam: the warm-up steps send the gradient, and every rank runs
Adam on the exact average (the same moments everywhere); then the second moment is
frozen, and each rank compresses m_hat / (sqrt(v_hat of the warm-up) + eps) with its
own first moment. Its steps are then linear in the gradients too, so their average is
Adam with that frozen second moment on the averaged gradient, where each rank's own
second moment (of a batch P times smaller, so noisier and larger) would shrink them.
Compression, and SGD's masking, start after the warm-up.
"""

import math
import warnings

import numpy as np
import torch

from .. import _adacomp
from .step_scale import ScaleMeter

def squared_norm(arr, layout, clamp=0.0):
    """The sum of squares of arr over the layout's slices ((entry, offset, count));
    with clamp > 0, of arr clamped to [-clamp, clamp] (arr itself is left as it is)."""
    if clamp:
        return sum(_adacomp._l2_norm(np.clip(arr[off:off + n], -clamp, clamp)) ** 2
                   for _, off, n in layout)
    return sum(_adacomp._l2_norm(arr[off:off + n]) ** 2 for _, off, n in layout)


def _clamp(arr, layout, value):
    """Clamps the layout's slices of arr to [-value, value] in place (clip_grad_value_)."""
    for _, off, n in layout:
        np.clip(arr[off:off + n], -value, value, out=arr[off:off + n])


def _scale(arr, layout, factor):
    """Scales the layout's slices of arr by factor when it is below 1 (a clip)."""
    if factor < 1.0:
        for _, off, n in layout:
            arr[off:off + n] *= factor


class _LocalOptimizer:
    """The hook's side of the library's local optimizer (self.opt, which holds the
    moments, the step in progress and the counts): each parameter's name and its tensor
    there, the weight decay per parameter, the clip, and the saved form."""

    def __init__(self, local, freeze_after=0):
        """local: a LocalSettings (settings.py, which checked it); freeze_after: adam with
        a dense warm-up, its length (the second moment is frozen after it)."""
        kind = self.kind = local.kind
        self.momentum = float(local.momentum)
        self.betas = tuple(float(b) for b in local.betas)
        self.eps = float(local.eps)
        self.freeze_after = freeze_after
        measured = local.step_scale == "measured"
        self.step_scale = "measured" if measured else float(local.step_scale)
        # local_step_scale="measured": the scale measured at each step (step_scale.py)
        self.meter = ScaleMeter() if measured else None
        self.nesterov = bool(local.nesterov)
        # The library's optimizer (adacomp/local_optimizer.h); its settings' check
        # (ValueError) is the one for momentum, betas and eps.
        self.opt = _adacomp._LocalOptimizer(kind, self.momentum, self.betas[0], self.betas[1],
                                            self.eps, freeze_after,
                                            1.0 if measured else self.step_scale,
                                            self.nesterov)
        # id(parameter) -> the weight decay added to its gradient before the moments
        # (sgd, and adam's L2 term: torch's Adam(weight_decay); AdamW's decoupled decay
        # belongs to the SGD that applies the step and is not given here).
        # wd: a number, or a torch parameter group whose "weight_decay" is read at each
        # step (DistributedOptimizer: a schedule that sets it takes effect).
        self._decay = {}
        for params, wd in (local.weight_decay or ()):
            for p in params:
                self._decay[id(p)] = wd if isinstance(wd, dict) else float(wd)
        self.clip_norm = float(local.clip_norm)
        self.clip_value = 0.0  # > 0: each rank's gradient clamped to +-it (clip_grad_value_)
        self.mask = bool(local.mask)
        self._warned_buckets = False  # clip() said once that the model spans buckets
        # The step's clip factor over every bucket (defer.py: the whole gradient's
        # norm, known before any bucket is compressed), or None: each bucket on its own.
        self.step_factor = None
        self.measure = False  # add up this rank's gradient norm (DistributedOptimizer)
        self.norm_sq = 0.0    # the step's sum of squares so far, when measuring
        self.last_norm = None  # this rank's gradient L2 norm of the last step, measured
        self._index = {}      # parameter name -> its tensor in self.opt
        # torch parameter groups whose momentum (sgd) or betas (adam) are read at each
        # step's first prepare (follow()), or None: the rates stay as made.
        self.groups = None
        self._fresh = False   # a step began and its rates are not read yet

    @property
    def steps(self):
        return self.opt.steps

    @property
    def masked(self):
        """Elements whose velocity a send zeroed (sgd), committed steps."""
        return self.opt.masked

    def _k(self, name, n):
        k = self._index.get(name)
        if k is None:
            k = self._index[name] = self.opt.add_tensor(n)
        return k

    @property
    def masks(self):
        return self.kind == "sgd" and self.mask

    def settings(self):
        if self.kind == "sgd":
            out = {"kind": "sgd", "momentum": self.momentum, "mask": self.mask}
            if self.nesterov:
                out["nesterov"] = True
            return out
        out = {"kind": "adam", "betas": list(self.betas), "eps": self.eps}
        if self.freeze_after:
            out["second_moment_frozen_after"] = self.freeze_after
        if self.step_scale != 1.0:
            out["step_scale"] = self.step_scale
        return out

    def follow(self, groups):
        """Reads the decay rates from these torch parameter groups at each step
        (DistributedOptimizer): a schedule that moves SGD's momentum or Adam's betas,
        as OneCycleLR and CyclicLR do by default, takes effect as it does in torch."""
        self.groups = groups

    def begin_step(self):
        """A step begins: its first prepare reads the groups' rates."""
        self._fresh = self.groups is not None
        if self.meter is not None:
            self.meter.begin()

    def _read_rates(self):
        key = "momentum" if self.kind == "sgd" else "betas"
        values = {repr(tuple(map(float, v)) if isinstance(v, (list, tuple)) else float(v))
                  for v in (g.get(key) for g in self.groups)}
        if len(values) != 1:
            raise ValueError(
                f"the parameter groups' {key} differ ({', '.join(sorted(values))}); each "
                f"rank's optimizer runs one {key} for every parameter (local=False runs "
                f"the optimizer on the average instead)")
        value = self.groups[0][key]
        if self.kind == "sgd":
            if float(value) != self.momentum:
                self.opt.set_rates(float(value), *self.betas)
                self.momentum = float(value)
        else:
            betas = (float(value[0]), float(value[1]))
            if betas != self.betas:
                self.opt.set_rates(self.momentum, *betas)
                self.betas = betas

    def prepare(self, e, grad):
        """The step this rank compresses for parameter entry ``e`` from its gradient
        (a float32 numpy slice, not changed): a view of the library optimizer's buffer,
        valid until the parameter's next step; its moments wait for commit()."""
        if self._fresh:
            self._fresh = False
            self._read_rates()
        wd, w = self._l2(e)
        if self.meter is not None:  # what the moments take: the gradient and the L2 term
            self.meter.take(e.name, grad, w, wd)
        return self.opt.prepare(self._k(e.name, grad.size), grad, w, wd)

    def _l2(self, e):
        """(weight decay, the parameter as float32 numpy or None) added to e's gradient
        before the moments (SGD's decay, Adam's L2 term)."""
        wd, w = 0.0, None
        if self._decay:
            wd = self._decay.get(id(e.param), 0.0)
            if isinstance(wd, dict):
                wd = float(wd.get("weight_decay", 0.0))
            if wd:
                w = e.param.detach().reshape(-1).float().numpy()
        return wd, w

    def clip(self, arr, layout, bucket_index=0):
        """Scales the bucket's gradient (arr, over the layout's slices) in place to at
        most clip_norm, as torch's clip_grad_norm_ does (factor clip_norm / (norm +
        1e-6) when below 1); nothing without clip_norm. A bucket after the first (the
        model spans several, each clipped on its own) is warned of once. With
        clip_value, the gradient is first clamped to [-clip_value, clip_value] (a
        script's clip_grad_value_), and the norm is the clamped gradient's."""
        if self.clip_value:
            _clamp(arr, layout, self.clip_value)
        if self.step_factor is not None:
            _scale(arr, layout, self.step_factor)
            return
        sq = None
        if self.measure:
            sq = squared_norm(arr, layout)
            self.norm_sq += sq
        if not self.clip_norm:
            return
        if bucket_index > 0 and not self._warned_buckets:
            self._warned_buckets = True
            warnings.warn(
                "adacomp hook: local_clip_norm clips each DDP bucket's gradient on its own, "
                "and this model spans several buckets; to clip each rank's whole gradient, "
                "put the model in one bucket (DDP's bucket_cap_mb above the model's size, "
                "and torch.distributed's first-bucket limit with it, as "
                "examples/ddp_hooks.py's ddp_wrap does)", RuntimeWarning, stacklevel=2)
        if sq is None:
            sq = squared_norm(arr, layout)
        _scale(arr, layout, self.clip_norm / (math.sqrt(sq) + 1e-6))

    def average_step(self, ex):
        """A dense warm-up step of "adam": the averaged gradient of each parameter of the
        bucket (ex.work, the same on every rank; clipped as clip() does) is replaced by
        the Adam step of it, in place (and in ex.buf), with moments prepared as
        prepare() does."""
        work = ex.work.numpy()
        self.clip(work, ex.layout, ex.index)
        for e, off, n in ex.layout:
            work[off:off + n] = self.prepare(e, work[off:off + n])
        if ex.work.data_ptr() != ex.buf.data_ptr():  # a float16 / bfloat16 bucket's copy
            ex.buf.copy_(ex.work)

    def compress(self, e, grad, whole=None):
        """e's frame of the step for this gradient (prepare, compress, mask). ``whole``:
        a compressor without residue to send the step with instead (the dense warm-up's
        float32 one): the whole step is sent, so nothing is masked."""
        step = self.prepare(e, grad)
        if whole is not None:
            return whole.compress(step)
        frame = e.compressor.compress(step)
        if self.masks:  # (the library leaves a codec without residue alone)
            self.opt.mask_sent(self._index[e.name], frame)
        return frame

    def end_step(self):
        """The step's measured norm becomes last_norm; the step's clip factor ends."""
        if self.measure and self.step_factor is None:
            self.last_norm = math.sqrt(self.norm_sq)
        self.norm_sq = 0.0
        self.step_factor = None

    def commit(self):
        """The step was applied: its prepared moments become the moments (and what it
        measured of the step scale, the next step's scale)."""
        self.opt.commit()
        if self.meter is not None:
            self.meter.commit(self.opt, self.betas[1])

    def drop(self):
        """The step was rolled back: its prepared moments are forgotten."""
        self.opt.drop()

    def save(self):
        opt = self.opt
        first, second, counts = {}, {}, {}
        for name, k in self._index.items():
            if not opt.started(k):
                continue
            first[name] = torch.from_numpy(opt.first(k))
            if self.kind == "adam":
                second[name] = torch.from_numpy(opt.second(k))
            counts[name] = list(opt.counts(k))
        out = {"settings": self.settings(), "steps": opt.steps, "masked": opt.masked,
               "first": first, "second": second, "counts": counts}
        if self.meter is not None:
            out["measured_step_scale"] = self.meter.state()
        return out

    def check(self, saved, numel):
        """Raises ValueError unless ``saved`` (a save(), or None) loads into this
        optimizer for parameters of these sizes ({name: numel}); changes nothing."""
        if saved is None:
            raise ValueError(f"state_dict has no local optimizer, this state has one "
                             f"({self.kind!r})")
        kind = saved.get("settings", {}).get("kind")
        if kind != self.kind:
            raise ValueError(f"state_dict's local optimizer is {kind!r}, this state's is "
                             f"{self.kind!r}")
        frozen = saved["settings"].get("second_moment_frozen_after", 0)
        if frozen != self.freeze_after:
            raise ValueError(f"state_dict's local Adam freezes its second moment after "
                             f"{frozen} steps (0: never), this state's after "
                             f"{self.freeze_after}")
        for part in ("first", "second"):
            for name, t in saved.get(part, {}).items():
                if name not in numel:
                    raise ValueError(f"state_dict's local optimizer has moments for "
                                     f"parameter {name!r}, which the state does not have")
                if (not isinstance(t, torch.Tensor) or t.dtype != torch.float32
                        or t.dim() != 1 or t.numel() != numel[name]):
                    raise ValueError(f"state_dict's local optimizer: {part} moment of "
                                     f"{name!r} is not {numel[name]} float32 elements")
        measured = saved["settings"].get("step_scale") == "measured"
        if measured != (self.meter is not None):
            says = "measures" if measured else "does not measure"
            mine = "does" if self.meter is not None else "does not"
            raise ValueError(f"state_dict's local Adam {says} its step scale "
                             f"(local_step_scale='measured'), this state {mine}")
        if self.meter is not None:
            self.meter.check(saved.get("measured_step_scale"))
        if int(saved.get("steps", -1)) < 0:
            raise ValueError("state_dict's local optimizer has no step count")
        first = saved.get("first", {})
        if self.kind == "adam" and set(first) != set(saved.get("second", {})):
            raise ValueError("state_dict's local Adam has first and second moments for "
                             "different parameters")
        counts = saved.get("counts")
        for name in first if counts is not None else ():
            c = counts.get(name)
            ok = (isinstance(c, (list, tuple)) and len(c) == 2
                  and all(isinstance(x, int) for x in c) and 1 <= c[1] <= c[0]
                  and (self.kind == "adam" or c[0] == c[1]))
            if not ok:
                raise ValueError(f"state_dict's local optimizer: the step counts of {name!r} "
                                 f"are {c!r}, not [steps, second-moment steps] with "
                                 f"1 <= the second <= the first")

    def load(self, saved):
        steps = int(saved["steps"])
        self.opt.reset(steps, int(saved.get("masked", 0)))
        if self.meter is not None:
            self.meter.load(saved["measured_step_scale"], self.opt)
        counts = saved.get("counts")
        for name, first in saved["first"].items():
            if counts is not None:
                c, c2 = counts[name]
            else:  # saved before per-parameter counts: every parameter had every step
                c = steps
                c2 = min(c, self.freeze_after) if self.freeze_after else c
            second = saved["second"].get(name) if self.kind == "adam" else None
            self.opt.set_moments(self._k(name, first.numel()), first.numpy(),
                                 None if second is None else second.numpy(), c, c2)


def split_optimizer(optimizer):
    """Turns a torch optimizer into a local optimizer for the hook and the optimizer
    that applies the averaged step. Returns (kwargs for AdaCompState, torch.optim.SGD
    over the same parameter groups with momentum 0).

    SGD (momentum > 0, Nesterov or not, no dampening): the hook keeps the velocity, with
    each group's weight decay added to the gradient before it (as torch's SGD does);
    the returned SGD has no weight decay. AdamW: the hook keeps the moments (betas,
    eps), and the returned SGD applies each group's decoupled weight decay. Adam: the
    same, its weight decay (an L2 term) added to the gradient in the hook. Every group
    must share momentum, or betas and eps. Call
    it before making the learning-rate scheduler (make that on the returned SGD).
    """
    groups = optimizer.param_groups

    def same(key):
        values = {tuple(g[key]) if isinstance(g[key], (tuple, list)) else g[key]
                  for g in groups}
        if len(values) != 1:
            raise ValueError(f"split_optimizer: every parameter group needs the same "
                             f"{key}, not {sorted(values)}")
        return values.pop()

    def plain(keep_decay):
        out = []
        for g in groups:
            d = {"params": list(g["params"]), "lr": g["lr"],
                 "weight_decay": g["weight_decay"] if keep_decay else 0.0}
            if "initial_lr" in g:
                d["initial_lr"] = g["initial_lr"]
            out.append(d)
        return torch.optim.SGD(out, lr=groups[0]["lr"], momentum=0.0)

    # The weight decay the hook adds to each rank's gradient (SGD's, Adam's L2 term).
    decay = [(list(g["params"]), g["weight_decay"]) for g in groups if g["weight_decay"]]
    if isinstance(optimizer, torch.optim.SGD):
        if same("dampening"):
            raise ValueError("split_optimizer: SGD with dampening has no local form here")
        nesterov = bool(same("nesterov"))
        momentum = same("momentum")
        if momentum <= 0:
            raise ValueError("split_optimizer: SGD without momentum has no moments to keep")
        return ({"local_optimizer": "sgd", "momentum": momentum, "nesterov": nesterov,
                 "local_weight_decay": decay}, plain(False))
    if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        if same("amsgrad"):
            raise ValueError("split_optimizer: amsgrad has no local form here")
        local = {"local_optimizer": "adam", "betas": same("betas"), "eps": same("eps")}
        if isinstance(optimizer, torch.optim.AdamW):
            return local, plain(True)
        if decay:  # Adam's L2 term, in the gradient before the moments
            local["local_weight_decay"] = decay
        return local, plain(False)
    raise ValueError(f"split_optimizer: {type(optimizer).__name__} has no local form "
                     f"(SGD with momentum, Adam or AdamW)")
