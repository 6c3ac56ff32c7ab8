"""The hook's settings in one object, grouped as a user reads them (as torch's
PowerSGDState groups its own): what is compressed and how (CodecSettings), how the
bin size changes over the run (ScheduleSettings), how the frames travel
(ExchangeSettings), the optimizer's moments on each rank (LocalSettings, or None),
the auto choice between dense and the codec (AutoSettings, or None) and how many
failed steps in a row stop a run.

Frozen dataclasses of plain values: made once, checked once (ValueError naming the
bad field), and picklable, so ``torch.save(state.settings)`` keeps them and
``AdaCompState(model=m, settings=saved)`` makes the same hook again. The state reads
them at construction; ``state.settings`` is what it was made with.

``Settings.of(**kwargs)`` takes the flat keyword arguments AdaCompState has always
taken (codec=, bin_size=, local_optimizer=, auto=, ...) and ``flat()`` gives them
back, so both spellings make the same state.
"""

import dataclasses
import math
from typing import Optional

from .. import CODECS
from .layers import LAYER_TYPES

EXCHANGES = ("allgather", "reduce-scatter", "auto")
_AUTO_KEYS = ("probe_steps", "reprobe_every", "probe_cost", "drift", "min_settled", "margin")


def _whole(name, v, low=0):
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{name} must be a whole number >= {low}, not {v!r}")


@dataclasses.dataclass(frozen=True)
class CodecSettings:
    """What each parameter's compressor is: codec (any of adacomp.CODECS), one bin
    size L_T for every tensor (bin_size) or per layer type (bin_sizes, over the
    defaults: conv 50, others 500), values/density/tau/seed as adacomp.Compressor's
    (terngrad's seed is mixed with the rank and the tensor id), dense_types: layer
    types sent as float32, layer_types: {parameter name: type} over the automatic
    typing (needs model=)."""
    codec: str = "adacomp"
    bin_size: Optional[int] = None
    bin_sizes: Optional[dict] = None
    values: str = "ternary"
    density: float = 0.01
    tau: float = 1e-3
    seed: int = 0
    dense_types: tuple = ()
    layer_types: Optional[dict] = None

    def __post_init__(self):
        if self.codec not in CODECS:
            raise ValueError(f"unknown codec {self.codec!r}; one of {', '.join(CODECS)}")
        for t in (self.bin_sizes or {}):
            if t not in LAYER_TYPES:
                raise ValueError(f"bin_sizes: unknown layer type {t!r}; one of {LAYER_TYPES}")
        for t in self.dense_types:
            if t not in LAYER_TYPES:
                raise ValueError(f"dense_types: unknown layer type {t!r}; one of {LAYER_TYPES}")
        object.__setattr__(self, "dense_types", tuple(self.dense_types))
        object.__setattr__(self, "density", float(self.density))
        object.__setattr__(self, "tau", float(self.tau))
        object.__setattr__(self, "seed", int(self.seed))

    def sizes(self, defaults):
        """L_T per layer type: the defaults, then bin_sizes, or bin_size for all."""
        if self.bin_size is not None:
            return {t: int(self.bin_size) for t in LAYER_TYPES}
        out = dict(defaults)
        out.update({t: int(v) for t, v in (self.bin_sizes or {}).items()})
        return out


@dataclasses.dataclass(frozen=True)
class ScheduleSettings:
    """How L_T changes over the run (docs/algorithm.md section 6): the ramp (over
    ramp_steps steps from ramp_start in ramp_stages geometric stages; 0: off), the
    adaptive bin size of ``adacomp train --adapt-threshold`` (0: off; needs codec
    "adacomp" and model=), and dense_warmup_steps uncompressed steps first."""
    ramp_steps: int = 0
    ramp_start: int = 8
    ramp_stages: int = 4
    adapt_threshold: float = 0.0
    adapt_window: int = 16
    adapt_hold: int = 32
    adapt_bin_size: int = 0
    dense_warmup_steps: int = 0


@dataclasses.dataclass(frozen=True)
class ExchangeSettings:
    """How frames travel: exchange "allgather" (every rank receives every frame),
    "reduce-scatter" (slices averaged by their owners) or "auto" (per bucket, the
    fewer bytes received); summed_values "fp32" or "fp16" (the reduce-scatter's
    averaged slices); overlap: exchange and decode on the state's thread while DDP
    goes on with backward (the one setting a script may change between steps)."""
    exchange: str = "allgather"
    summed_values: str = "fp32"
    overlap: bool = True

    def __post_init__(self):
        if self.exchange not in EXCHANGES:
            raise ValueError(f"unknown exchange {self.exchange!r}; one of {', '.join(EXCHANGES)}")
        if self.summed_values not in ("fp32", "fp16"):
            raise ValueError(f"summed_values: 'fp32' or 'fp16', not {self.summed_values!r}")


@dataclasses.dataclass(frozen=True)
class LocalSettings:
    """The optimizer's moments on each rank (local_optimizer.py): kind "sgd" or "adam",
    momentum and nesterov (sgd), betas and eps (adam), weight_decay: [(parameters, decay)] added
    inside SGD's velocity, clip_norm (> 0): each rank's gradient clipped before the
    moments, mask (sgd): zero the velocity of the elements a frame sent (False: the
    velocity goes on, and each gradient's whole momentum is sent in time), step_scale
    (adam): each rank's Adam step multiplied by it before compression (1: Adam's own
    step; sqrt(world size) makes up for each rank's second moment being of a batch world
    size times smaller than the average's where batch noise dominates; "measured", the
    one call's default: the scale measured from how much the ranks' gradients differ,
    step_scale.py). Made by split_optimizer() or DistributedOptimizer from a torch
    optimizer."""
    kind: str = "sgd"
    momentum: float = 0.9
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: Optional[list] = None
    clip_norm: float = 0.0
    mask: bool = True
    step_scale: float = 1.0
    nesterov: bool = False

    def __post_init__(self):
        if self.kind not in ("sgd", "adam"):
            raise ValueError(f"local_optimizer: 'sgd' or 'adam', not {self.kind!r}")
        if not isinstance(self.nesterov, bool):
            raise ValueError(f"nesterov must be True or False, not {self.nesterov!r}")
        if self.nesterov and self.kind != "sgd":
            raise ValueError("nesterov goes with local_optimizer 'sgd'")
        c = self.clip_norm
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not (
                c >= 0 and math.isfinite(c)):
            raise ValueError(f"local_clip_norm must be a finite number >= 0, not {c!r}")
        k = self.step_scale
        if k != "measured" and (isinstance(k, bool) or not isinstance(k, (int, float)) or not (
                k > 0 and math.isfinite(k))):
            raise ValueError(f"local_step_scale must be a finite number > 0 or 'measured', "
                             f"not {k!r}")
        if k != 1 and self.kind != "adam":
            raise ValueError("local_step_scale goes with local_optimizer 'adam'")
        if not isinstance(self.mask, bool):
            raise ValueError(f"local_mask must be True or False, not {self.mask!r}")
        object.__setattr__(self, "betas", tuple(self.betas))


@dataclasses.dataclass(frozen=True)
class AutoSettings:
    """auto (auto.py, adacomp/speed_choice.h): dense or the codec each step, from the
    run's measured step times; the chooser's settings."""
    probe_steps: int = 3
    reprobe_every: int = 500
    probe_cost: float = 0.01
    drift: float = 0.3
    min_settled: int = 50
    margin: float = 0.05

    def options(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every setting of an AdaCompState, grouped (see the module's docstring)."""
    codec: CodecSettings = dataclasses.field(default_factory=CodecSettings)
    schedule: ScheduleSettings = dataclasses.field(default_factory=ScheduleSettings)
    exchange: ExchangeSettings = dataclasses.field(default_factory=ExchangeSettings)
    local: Optional[LocalSettings] = None
    auto: Optional[AutoSettings] = None
    max_failed_steps: int = 3

    def __post_init__(self):
        _whole("max_failed_steps", self.max_failed_steps)
        if self.auto is not None and (self.schedule.dense_warmup_steps
                                      or self.codec.codec == "dense"):
            raise ValueError("auto chooses between dense and a codec by itself: not with "
                             "codec 'dense' or dense_warmup_steps")
        if (self.local is not None and self.local.step_scale != 1
                and self.schedule.dense_warmup_steps):
            raise ValueError("local_step_scale makes up for each rank's own second moment; "
                             "after dense_warmup_steps local Adam's second moment is the "
                             "average's (1-bit Adam): not both")

    # The flat keyword arguments of AdaCompState, and where each lives.
    _FLAT = {
        **{f.name: ("codec", f.name) for f in dataclasses.fields(CodecSettings)},
        **{f.name: ("schedule", f.name) for f in dataclasses.fields(ScheduleSettings)},
        **{f.name: ("exchange", f.name) for f in dataclasses.fields(ExchangeSettings)},
        "local_optimizer": ("local", "kind"), "momentum": ("local", "momentum"),
        "nesterov": ("local", "nesterov"),
        "betas": ("local", "betas"), "eps": ("local", "eps"),
        "local_weight_decay": ("local", "weight_decay"), "local_clip_norm": ("local", "clip_norm"),
        "local_mask": ("local", "mask"), "local_step_scale": ("local", "step_scale"),
        "auto": ("auto", None), "auto_options": ("auto", "*"),
        "max_failed_steps": ("max_failed_steps", None),
    }

    @classmethod
    def names(cls):
        """The flat keyword arguments, in order."""
        return tuple(cls._FLAT)

    @classmethod
    def of(cls, base=None, **kwargs):
        """Settings from the flat keyword arguments, over ``base`` (None: the
        defaults). TypeError names an unknown argument."""
        base = base if base is not None else cls()
        unknown = [k for k in kwargs if k not in cls._FLAT]
        if unknown:
            raise TypeError(f"AdaCompState: unknown setting {unknown[0]!r}; the settings "
                            f"are {', '.join(cls._FLAT)}")
        groups = {"codec": {}, "schedule": {}, "exchange": {}, "local": {}}
        for k, v in kwargs.items():
            group, field = cls._FLAT[k]
            if group in groups:
                groups[group][field] = v
        codec = dataclasses.replace(base.codec, **groups["codec"])
        schedule = dataclasses.replace(base.schedule, **groups["schedule"])
        exchange = dataclasses.replace(base.exchange, **groups["exchange"])
        local_args = groups["local"]
        kind = local_args.pop("kind", base.local.kind if base.local else None)
        if kind is None:
            if local_args.get("clip_norm"):
                raise ValueError("local_clip_norm goes with local_optimizer (without it, clip "
                                 "the averaged gradient the hook returns, as without the hook)")
            if local_args.get("mask") is False:
                raise ValueError("local_mask goes with local_optimizer 'sgd'")
            if local_args.get("step_scale", 1) != 1:
                raise ValueError("local_step_scale goes with local_optimizer 'adam'")
            if local_args.get("nesterov"):
                raise ValueError("nesterov goes with local_optimizer 'sgd'")
            local = None
        else:
            start = base.local if base.local is not None else LocalSettings(kind=kind)
            local = dataclasses.replace(start, kind=kind, **local_args)
        auto = base.auto
        if "auto" in kwargs or "auto_options" in kwargs:
            on = kwargs.get("auto", base.auto is not None)
            opts = kwargs.get("auto_options") or {}
            bad = [k for k in opts if k not in _AUTO_KEYS]
            if bad:
                raise ValueError(f"auto_options: unknown {bad[0]!r}; one of "
                                 f"{', '.join(_AUTO_KEYS)}")
            auto = dataclasses.replace(base.auto or AutoSettings(), **opts) if on else None
        return cls(codec=codec, schedule=schedule, exchange=exchange, local=local, auto=auto,
                   max_failed_steps=kwargs.get("max_failed_steps", base.max_failed_steps))

    def flat(self):
        """The flat keyword arguments that make these settings (Settings.of(**flat()) ==
        self)."""
        out = {}
        for group in ("codec", "schedule", "exchange"):
            out.update(dataclasses.asdict(getattr(self, group)))
        if self.local is not None:
            out.update(local_optimizer=self.local.kind, momentum=self.local.momentum,
                       nesterov=self.local.nesterov,
                       betas=self.local.betas, eps=self.local.eps,
                       local_weight_decay=self.local.weight_decay,
                       local_clip_norm=self.local.clip_norm, local_mask=self.local.mask,
                       local_step_scale=self.local.step_scale)
        out["auto"] = self.auto is not None
        if self.auto is not None:
            out["auto_options"] = self.auto.options()
        out["max_failed_steps"] = self.max_failed_steps
        return out
