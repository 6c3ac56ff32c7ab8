"""DistributedOptimizer: the one call that puts AdaComp into a DDP training script.

    optimizer = adacomp.torch.DistributedOptimizer(ddp_model, optimizer)

It registers the AdaComp hook on the DDP model and returns the optimizer the
script steps. Where the optimizer has a form that runs on each rank (SGD with
momentum, Nesterov's too, Adam, AdamW), each rank keeps the
optimizer's moments of its own gradient and compresses the step they give; the
average of the ranks' steps is applied at step() with the learning rate and
decoupled weight decay the parameter groups hold then (docs/algorithm.md, the local
optimizer). With any other optimizer the hook compresses the gradient and the
optimizer runs on the average, as the paper has it: such an optimizer's state
(if any) is kept after averaging, where only the averaged gradient exists.

The parameter groups are the optimizer's own (the same list), so a learning
rate set on them every iteration, or a scheduler made before or after this
call, takes effect, as does a schedule of SGD's momentum or Adam's betas
(OneCycleLR's and CyclicLR's default: read at each step's first bucket);
gradient accumulation (no_sync, require_backward_grad_sync) and
zero_grad(set_to_none=True) work as without the hook. clip_grad_norm_ and
clip_grad_value_ after backward clip each rank's own gradient (clip.py). state_dict() carries this
rank's hook state; gathered_state_dict() every rank's, for a checkpoint that
rank 0 alone writes.

Adam and AdamW run on each rank with their steps scaled by a measured scale, between
1 and sqrt(P), P the world size (local_step_scale="measured", step_scale.py). Each
rank's second moment is of its own batch, P times smaller than the average's; where
batch noise dominates it is up to P times the averaged gradient's, so the average of
the ranks' steps would be up to sqrt(P) times smaller than the optimizer's on the
averaged gradient (the script's learning rate then acts as a smaller one); where the
ranks' gradients agree it is the same. The scale is measured at each step from how
much the ranks' gradients differ at a few sampled elements; local_step_scale=1.0
turns it off, a number fixes it.

SGD runs on each rank without masking the velocity where a frame sent it
(local_mask=False): every gradient's whole momentum reaches the weights, as with
torch's SGD, later for the elements that wait in the residue. Masking (Deep
Gradient Compression's, register()'s default) cuts the momentum of a gradient sent
k steps after it came to (1 - m^(k+1)) / (1 - m) of torch's 1 / (1 - m), so the
elements sent most often learn at a smaller rate; on the Fashion-MNIST example it
ended behind no hook on each of 5 seeds (docs/ddp-hook.md). local_mask=True masks."""

import collections
import warnings

import numpy as np
import torch
from torch import nn

from .clip import take_over
from .ddp_hook import hook
from .state import AdaCompState

FORMAT = "adacomp.torch.DistributedOptimizer/1"


def _local_form(optimizer):
    """(kind, AdaCompState settings) when the optimizer can run on each rank, else
    (None, why not)."""
    groups = optimizer.param_groups

    def same(key, default=None):
        values = {repr(g.get(key, default)) for g in groups}
        return None if len(values) != 1 else groups[0].get(key, default)

    name = type(optimizer).__name__
    if any(g.get("maximize") for g in groups):
        return None, f"{name} with maximize=True has no local form here"
    if type(optimizer) is torch.optim.SGD:
        momentum = same("momentum")
        if momentum is None:
            return None, "its parameter groups differ in momentum"
        if momentum <= 0:
            return None, ("SGD without momentum keeps no state: on the average it is "
                          "the same optimizer")
        if any(g.get("dampening") for g in groups):
            return None, "SGD with dampening has no local form here"
        nesterov = same("nesterov", False)
        if nesterov is None:
            return None, "its parameter groups differ in nesterov"
        decay = [(list(g["params"]), g) for g in groups]  # read at each step
        return "sgd", {"local_optimizer": "sgd", "momentum": momentum,
                       "nesterov": bool(nesterov), "local_weight_decay": decay}
    if type(optimizer) in (torch.optim.Adam, torch.optim.AdamW):
        if any(g.get("amsgrad") for g in groups):
            return None, "amsgrad has no local form here"
        betas, eps = same("betas"), same("eps")
        if betas is None or eps is None:
            return None, "its parameter groups differ in betas or eps"
        out = {"local_optimizer": "adam", "betas": tuple(betas), "eps": eps}
        if type(optimizer) is torch.optim.Adam:  # its weight decay: an L2 term, in the hook
            out["local_weight_decay"] = [(list(g["params"]), g) for g in groups]
        return "adam", out
    return None, f"{name} is not SGD with momentum, Adam or AdamW"


def _norms(grads):
    """The L2 norm of each noted .grad, as they are now."""
    return torch.stack([torch.linalg.vector_norm(grad.detach()).float()
                        for _, grad, _ in grads]) if grads else None


def _same(a, b):
    """Equal element by element, a NaN equal to a NaN."""
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


class DistributedOptimizer(torch.optim.Optimizer):
    """The optimizer to step, with the AdaComp hook registered on ``ddp_model``.

    Args:
        ddp_model: the DistributedDataParallel model (Gloo, CPU parameters).
        optimizer: the script's optimizer over the model's parameters; its parameter
            groups become this optimizer's (the same list).
        local: None (default): the optimizer runs on each rank where it can (see the
            module); True: it must (ValueError where it cannot); False: never.
        **settings: AdaCompState's settings (codec, bin_sizes, exchange, ...).

    Attributes: ``hook`` (the AdaCompState), ``local`` (whether each rank runs the
    optimizer), ``why`` (why not, when it does not).
    """

    def __init__(self, ddp_model, optimizer, local=None, **settings):
        if not isinstance(ddp_model, nn.parallel.DistributedDataParallel):
            raise TypeError(f"DistributedOptimizer: ddp_model must be a "
                            f"DistributedDataParallel, not {type(ddp_model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"DistributedOptimizer: optimizer must be a torch optimizer, "
                            f"not {type(optimizer).__name__}")
        if "local_optimizer" in settings:
            raise ValueError("DistributedOptimizer chooses the local optimizer itself "
                             "(local=True/False to decide)")
        own = {id(p) for p in ddp_model.parameters()}
        self._param_ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if not self._param_ids <= own:
            raise ValueError("DistributedOptimizer: the optimizer has parameters that the "
                             "DDP model does not")
        kind, found = _local_form(optimizer) if local is not False else (None, "local=False")
        others = [n for n, p in ddp_model.module.named_parameters()
                  if p.requires_grad and id(p) not in self._param_ids]
        if kind is not None and others:
            # DDP averages every parameter's bucket through the one hook: run there, the
            # optimizer would leave its averaged step in the .grad another optimizer reads.
            kind, found = None, (
                f"the optimizer does not hold every trained parameter of the model "
                f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}), whose "
                f".grad another optimizer then needs as the averaged gradient")
        if local and kind is None:
            raise ValueError(f"DistributedOptimizer: local=True, but {found}")
        self.inner = optimizer
        self.kind = kind
        self.local = kind is not None
        self.why = None if self.local else found
        # AdamW's decay is decoupled, applied at step(); SGD's and Adam's L2 term go
        # into each rank's gradient in the hook.
        self.decoupled = type(optimizer) is torch.optim.AdamW
        self.defaults = optimizer.defaults
        self._bind()
        self._hook_for_profile()
        settings.setdefault("process_group", ddp_model.process_group)
        if self.local and kind == "sgd" and "local_mask" not in settings:
            base = settings.get("settings")
            if base is None or base.local is None:  # (a Settings' local says its own)
                found["local_mask"] = False
        if self.local and kind == "adam" and "local_step_scale" not in settings:
            base = settings.get("settings")
            warmup = settings.get("dense_warmup_steps",
                                  base.schedule.dense_warmup_steps if base else 0)
            chosen = base is not None and base.local is not None and base.local.step_scale != 1
            if not warmup and not chosen:  # after a dense warm-up v is the average's
                found["local_step_scale"] = "measured"
        self.hook = AdaCompState(model=ddp_model.module, **settings,
                                 **(found if self.local else {}))
        self.hook.track_usage(ddp_model)
        ddp_model.register_comm_hook(self.hook, hook)
        self._grads = None  # (param, grad object, version) as DDP left them
        self._norms = None  # and their norms
        self._warned_clip = False
        self._warned_value = False
        if self.local:
            self.hook._local.follow(self.param_groups)
            self.hook._local.measure = True
            self.hook.after_backward = self._averaged
            take_over(self)

    def _bind(self):
        """Shares the inner optimizer's groups and state (again after it loaded some)."""
        self.param_groups = self.inner.param_groups
        self.state = self.inner.state if not self.local else collections.defaultdict(dict)
        hook_state = getattr(self, "hook", None)
        if hook_state is not None and self.local:
            hook_state._local.follow(self.param_groups)  # momentum or betas, each step
        if hook_state is not None and self.local and not self.decoupled:
            for g in self.param_groups:  # (sgd, and Adam's L2 term)
                for p in g["params"]:
                    hook_state._local._decay[id(p)] = g

    # ----- the step -------------------------------------------------------------------------

    def _averaged(self):
        """After backward, once DDP wrote the averaged steps into .grad: notes them, and
        their norms (a change through .data leaves the version as it was)."""
        self._grads = [(p, p.grad, p.grad._version) for g in self.param_groups
                       for p in g["params"] if p.grad is not None]
        self._norms = _norms(self._grads)

    def _check_untouched(self):
        changed = any(p.grad is not grad or (grad is not None and grad._version != version)
                      for p, grad, version in self._grads or ())
        if changed or (self._grads and not _same(_norms(self._grads), self._norms)):
            raise RuntimeError(
                "adacomp DistributedOptimizer: .grad was changed between backward() and "
                "step(), but it holds the ranks' averaged optimizer step, not a gradient, "
                "and is applied as it is. A clip_grad_norm_ or clip_grad_value_ bound "
                "before adacomp was imported, or a change of .grad in place (also through "
                ".grad.data), does this: call torch.nn.utils.clip_grad_norm_ or "
                "clip_grad_value_ (they clip each rank's gradient in the hook), or pass "
                "local=False")

    @torch.no_grad()
    def step(self, closure=None):
        """Applies the averaged step (local) or steps the optimizer on the average."""
        if not self.local:
            return self.inner.step(closure)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._check_untouched()
        self._grads = self._norms = None
        for g in self.param_groups:
            lr = g["lr"]
            wd = g.get("weight_decay", 0.0) if self.decoupled else 0.0
            for p in g["params"]:
                if p.grad is None:
                    continue
                if wd:
                    p.mul_(1.0 - lr * wd)
                p.add_(p.grad, alpha=-lr)
        if hasattr(self.inner, "_step_count"):  # a scheduler made on the inner optimizer
            self.inner._step_count += 1
        local = self.hook._local
        if local.measure and not self.hook.clip_whole:
            # A script that did not clip at its first step does not clip: each rank's
            # gradient norm (a pass over it in the hook, for clip_grad_norm_'s return
            # value) is no longer measured. Should it clip later, that first call
            # returns NaN; the clip itself measures from then on (defer.py).
            local.measure = False
            local.last_norm = None
        return loss

    def clip_requested(self, max_norm, norm_type):
        """clip.py: a clip_grad_norm_ call on these parameters."""
        if norm_type != 2.0:
            raise ValueError(f"clip_grad_norm_: norm_type {norm_type}: the hook clips each "
                             f"rank's gradient by its L2 norm (norm_type 2) only")
        if not max_norm > 0 or max_norm == float("inf"):
            raise ValueError(f"clip_grad_norm_: max_norm must be a finite number > 0 here, "
                             f"not {max_norm}")
        local = self.hook._local
        if not self.hook.clip_whole and self._plain_adam():
            self._clip_first_moments(max_norm)
        if local.clip_norm != max_norm:
            self._warn_once("_warned_clip", f"clip_grad_norm_ on a DistributedOptimizer's "
                            f"parameters clips each rank's own gradient at {max_norm:g}")
        local.clip_norm = max_norm
        self.hook.clip_whole = True
        norm = local.last_norm
        return torch.tensor(float("nan") if norm is None else norm)

    def _plain_adam(self):
        """Adam whose moments are of the gradient alone (no L2 term in it), whose first
        moments a clip at the first step can therefore make exactly the clipped
        gradient's; with an L2 term the clip starts at the next step, as with SGD."""
        return self.kind == "adam" and (self.decoupled or not any(
            g.get("weight_decay") for g in self.param_groups))

    def clip_value_requested(self, clip_value):
        """clip.py: a clip_grad_value_ call on these parameters."""
        if not clip_value > 0 or clip_value == float("inf"):
            raise ValueError(f"clip_grad_value_: clip_value must be a finite number > 0 "
                             f"here, not {clip_value}")
        local = self.hook._local
        if not local.clip_value and self._plain_adam():
            self._clamp_first_moments(clip_value)
        if local.clip_value != clip_value:
            self._warn_once("_warned_value", f"clip_grad_value_ on a DistributedOptimizer's "
                            f"parameters clamps each rank's own gradient to +-{clip_value:g}")
        local.clip_value = clip_value

    def _warn_once(self, flag, what):
        """The take-over of a clip, said once (flag: the attribute that remembers it)."""
        if not getattr(self, flag):
            setattr(self, flag, True)
            warnings.warn(f"adacomp: {what} before its optimizer, from the next step on; "
                          f".grad (the averaged step) is left as it is", RuntimeWarning,
                          stacklevel=4)

    def _clamp_first_moments(self, value):
        """Adam, the script's first clip_grad_value_ call at the run's first step: the
        step's moments become the clamped gradient's, as _clip_first_moments does for
        the norm. m = (1 - b1) g and v = (1 - b2) g g are monotone in g and |g|, so
        clamping m to +-(1 - b1) c and v to at most (1 - b2) c c, rounded as the
        library rounds them, gives exactly the clamped gradient's moments; the step
        already sent, about sign(g) in each element, stays the same to eps."""
        state = self.hook
        state.wait_idle()
        local = state._local
        if local.steps != 1:
            return
        f32 = np.float32
        b1, b2 = local.betas
        c = f32(value)
        top_m = f32(f32(1.0 - b1) * c)
        top_v = f32(f32(f32(1.0 - b2) * c) * c)
        opt = local.opt
        for k in local._index.values():
            if opt.started(k) and tuple(opt.counts(k)) == (1, 1):
                first, second = opt.first(k), opt.second(k)
                opt.set_moments(k, np.clip(first, -top_m, top_m), np.minimum(second, top_v),
                                1, 1)

    def _clip_first_moments(self, max_norm):
        """Adam, the script's first clip call at the run's first step: the step's
        moments are made the clipped gradient's. With no moments before, m = (1 - b1) g
        and v = (1 - b2) g^2, so clipping g by a factor f makes them f m and f^2 v, while
        the step d = m_hat / (sqrt(v_hat) + eps) already sent is the same (to eps).
        Without this the unclipped first gradient (often 10x the clip at
        initialization) would dominate the second moment for a hundred steps and the
        first moment for tens, as torch's Adam after a clip never lets it."""
        state = self.hook
        state.wait_idle()  # the step's moments are committed
        local = state._local
        norm = local.last_norm
        if local.steps != 1 or norm is None:
            return
        f = max_norm / (norm + 1e-6)
        if f >= 1.0:  # not clipped
            return
        opt = local.opt
        for k in local._index.values():
            if opt.started(k) and tuple(opt.counts(k)) == (1, 1):
                first, second = opt.first(k), opt.second(k)
                opt.set_moments(k, first * np.float32(f), second * np.float32(f * f), 1, 1)

    def add_param_group(self, param_group):
        raise NotImplementedError("DistributedOptimizer: the hook serves the parameters it "
                                  "was made with; make a new one for other parameters")

    # ----- checkpoints ----------------------------------------------------------------------

    def _moment_slots(self):
        """Each parameter in torch's state_dict order: (its index there, the parameter,
        its name in the hook or None), and the keys of torch's state of its moments."""
        params = (p for g in self.param_groups for p in g["params"])
        slots = [(i, p, getattr(self.hook._by_id.get(id(p)), "name", None))
                 for i, p in enumerate(params)]
        keys = ("momentum_buffer",) if self.kind == "sgd" else ("exp_avg", "exp_avg_sq")
        return slots, keys

    def _load_torch(self, saved):
        """A run without the hook goes on with it: the optimizer's own state_dict (its
        groups' lr and the rest, and its moments) is loaded into the script's optimizer.
        Run on each rank, the moments become every rank's local moments (SGD's momentum
        buffer, Adam's exp_avg, exp_avg_sq and step; they were the average's, the same
        on every rank), as if each rank had run the optimizer so far; the residues
        start empty. Checked whole first; nothing changes when it refuses."""
        before = self.inner.state_dict()
        try:
            self.inner.load_state_dict(saved)  # torch checks the groups
            moments, steps = [], 0
            slots, keys = self._moment_slots() if self.local else ([], ())
            for _, p, name in slots:
                st = self.inner.state.get(p, {})
                if name is None or not st:
                    continue
                found = [st.get(key) for key in keys]
                missing = [key for key, t in zip(keys, found) if t is None]
                if missing:
                    raise ValueError(f"the saved state of {name!r} has no {missing[0]} (keys "
                                     f"{', '.join(sorted(st))}): not the state of "
                                     f"{type(self.inner).__name__}")
                for t in found:
                    if t.numel() != p.numel():
                        raise ValueError(f"the saved moments of {name!r} have {t.numel()} "
                                         f"elements, the parameter {p.numel()}")
                step = max(1, int(float(st.get("step", 1))))
                moments.append((name, found, step))
                steps = max(steps, step)
        except Exception as exc:  # (torch's Adam may fail after taking the state in)
            self.inner.load_state_dict(before)
            self._bind()
            if isinstance(exc, ValueError):
                raise
            raise ValueError(f"not a state_dict of {type(self.inner).__name__}: "
                             f"{type(exc).__name__}: {exc}") from exc
        if not self.local:
            self._bind()
            return None
        self.inner.state.clear()  # the moments live in the hook when it runs them
        self._bind()
        local = self.hook._local
        local.opt.reset(steps, 0)
        if local.meter is not None:  # the moments are the loaded ones: measure anew
            local.meter.reset(local.opt)
        for name, found, step in moments:
            first, *second = (t.detach().reshape(-1).float().numpy() for t in found)
            local.opt.set_moments(local._k(name, first.size), first,
                                  second[0] if second else None, step, step)  # (SGD: none)
        return None

    def _with(self, hook_state):
        """This optimizer's state_dict around ``hook_state`` (one rank's, or gathered)."""
        return {"format": FORMAT, "local": self.local, "optimizer": self.inner.state_dict(),
                "clip_norm": self.hook._local.clip_norm if self.local else 0.0,
                "clip_value": self.hook._local.clip_value if self.local else 0.0,
                "adacomp": hook_state}

    def state_dict(self):
        """The optimizer's state_dict and this rank's hook state (refused on another rank;
        see gathered_state_dict)."""
        return self._with(self.hook.state_dict())

    def gathered_state_dict(self, dst=0):
        """state_dict() with every rank's hook state, on rank ``dst`` (None elsewhere): a
        collective, every rank calls it. Every rank can load what rank dst saved."""
        hook_state = self.hook.gathered_state_dict(dst)
        if hook_state is None:
            return None
        return self._with(hook_state)

    def torch_state_dict(self):
        """The script's optimizer's own state_dict with this rank's moments in torch's
        form (SGD's momentum_buffer; Adam's step, exp_avg and exp_avg_sq), to go on
        without the hook: ``torch.optim.SGD(...).load_state_dict(opt.torch_state_dict())``.
        Each rank's moments are of its own gradient: SGD's velocities average to the
        velocity of the averaged gradient; an Adam second moment is of a batch world
        size times smaller than the average's. What waits in the residues is not in
        it. On the average (local False) it is the optimizer's own state_dict."""
        saved = self.inner.state_dict()
        if not self.local:
            return saved
        self.hook.wait_idle()
        local, state = self.hook._local, {}
        slots, keys = self._moment_slots()
        for index, p, name in slots:
            k = local._index.get(name) if name is not None else None
            if k is None or not local.opt.started(k):
                continue
            moments = [local.opt.first(k)] + ([local.opt.second(k)] if len(keys) > 1 else [])
            state[index] = {key: torch.from_numpy(m).reshape(p.shape).to(p.dtype)
                            for key, m in zip(keys, moments)}
            if self.kind == "adam":
                state[index]["step"] = torch.tensor(float(local.opt.counts(k)[0]))
        saved["state"] = state
        return saved

    def load_state_dict(self, state_dict):
        """Loads state_dict() of this rank, or gathered_state_dict() of any; or the
        state_dict of the script's own optimizer, saved by a run without the hook (see
        _load_torch); changes nothing when it refuses."""
        if (isinstance(state_dict, dict) and "format" not in state_dict
                and set(state_dict) == {"state", "param_groups"}):
            return self._load_torch(state_dict)
        if not isinstance(state_dict, dict) or state_dict.get("format") != FORMAT:
            raise ValueError("not a DistributedOptimizer state_dict, nor a torch "
                             "optimizer's")
        if state_dict["local"] != self.local:
            where = "on each rank" if state_dict["local"] else "on the average"
            raise ValueError(f"the state_dict is of an optimizer run {where}, this one is not")
        before = self.inner.state_dict()
        self.inner.load_state_dict(state_dict["optimizer"])
        try:
            self.hook.load_state_dict(state_dict["adacomp"])
        except Exception:
            self.inner.load_state_dict(before)
            self._bind()
            raise
        self._bind()
        if self.local:
            self.hook._local.clip_norm = float(state_dict.get("clip_norm", 0.0))
            self.hook.clip_whole = bool(self.hook._local.clip_norm)
            self._warned_clip = self.hook.clip_whole
            self.hook._local.clip_value = float(state_dict.get("clip_value", 0.0))
            self._warned_value = bool(self.hook._local.clip_value)
