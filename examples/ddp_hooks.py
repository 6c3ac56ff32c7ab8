"""The communication hooks of the DDP example scripts (CommHook: none, torch's fp16
and PowerSGD hooks, the AdaComp hook; their byte counters and checkpoint state) and
the DDP wrapper that sets the buckets each needs (ddp_wrap), and their command-line
options (add_hook_args). Used through ddp_common; not a public API of the adacomp
package.
"""

import argparse
import math
import time

import torch.distributed as dist
from torch import nn

LAYER_TYPES = ("conv", "fc", "lstm", "other", "attention", "mlp", "embedding",
               "norm")  # the hook's (adacomp.torch.LAYER_TYPES)
HOOKS = ("none", "fp16", "powersgd", "adacomp")


# ----- options ------------------------------------------------------------------------------

def bin_sizes(text):
    """"conv=25,fc=250" -> {"conv": 25, "fc": 250}: the hook checks the layer types."""
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            size = int(value)
        except ValueError:
            size = 0
        name = name.strip()
        if not sep or size < 1 or name in out:
            raise argparse.ArgumentTypeError(
                f"not TYPE=SIZE,... with a positive size per layer type: {text!r}")
        if name not in LAYER_TYPES:
            raise argparse.ArgumentTypeError(
                f"unknown layer type {name!r} in {text!r}; one of {', '.join(LAYER_TYPES)}")
        out[name] = size
    return out


def layer_type_list(text):
    """"other,conv" -> ("other", "conv")."""
    out = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [t for t in out if t not in LAYER_TYPES]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown layer type(s) {bad}; one of {LAYER_TYPES}")
    return out



def add_hook_args(ap):
    """The communication hook's options of every model script."""
    g = ap.add_argument_group("communication hook")
    g.add_argument("--hook", choices=HOOKS, default="adacomp",
                   help="none: DDP's all-reduce; fp16 and powersgd: torch's hooks; adacomp "
                        "(default)")
    g.add_argument("--bucket-cap-mb", type=float, default=0,
                   help="DDP's bucket_cap_mb (default DDP's 25; with powersgd: above the "
                        "model's size, see --help of the script)")
    g.add_argument("--powersgd-rank", type=int, default=1,
                   help="powersgd: matrix_approximation_rank (default 1)")
    g.add_argument("--powersgd-start-iter", type=int, default=0,
                   help="powersgd: start_powerSGD_iter (default 10%% of --steps, at least 2)")
    g.add_argument("--codec", default="adacomp", help="adacomp hook: the codec")
    g.add_argument("--bin-size", type=int, default=0,
                   help="adacomp hook: one bin size for every tensor (default per layer "
                        "type: conv, attention, mlp, embedding 50; fc, lstm, norm, other 500)")
    g.add_argument("--bin-sizes", type=bin_sizes, default={},
                   help="adacomp hook: bin sizes per layer type, e.g. conv=25,fc=250")
    g.add_argument("--values", choices=("ternary", "fp16", "fp32"), default="ternary",
                   help="adacomp hook: value mode of the selected elements")
    g.add_argument("--dense-types", type=layer_type_list, default=(),
                   help="adacomp hook: layer types sent uncompressed, e.g. other")
    g.add_argument("--no-overlap", action="store_true",
                   help="adacomp hook: exchange and decode each bucket inside the hook")
    g.add_argument("--exchange", choices=("allgather", "reduce-scatter", "auto"),
                   default="allgather",
                   help="adacomp hook: how frames travel (AdaCompState's exchange)")
    g.add_argument("--summed-values", choices=("fp32", "fp16"), default="fp32",
                   help="adacomp hook: the reduce-scatter's averaged slices")
    add_ramp_and_local_args(g)
    g.add_argument("--adapt-threshold", type=float, default=0.0,
                   help="adacomp hook: adaptive bin size threshold (0: off)")
    g.add_argument("--dense-warmup-steps", "--dense-steps", type=int, default=0,
                   help="adacomp hook: send the first N steps uncompressed (float32), as "
                        "PowerSGD does its first start_powerSGD_iter (0: none)")
    g.add_argument("--auto", action="store_true",
                   help="adacomp hook: each step dense or compressed, whichever this run's "
                        "iteration times say is faster (auto=True)")


def ramp_and_local_kwargs(args, local):
    """AdaCompState's settings from add_ramp_and_local_args's options (local: the
    local-optimizer kwargs split_optimizer gave, or None)."""
    out = {"ramp_steps": args.ramp_steps, "ramp_start": args.ramp_start,
           "ramp_stages": args.ramp_stages, **(local or {})}
    if local and args.local_clip:
        out["local_clip_norm"] = args.local_clip
    if getattr(args, "no_mask", False):
        out["local_mask"] = False
    if getattr(args, "mask", False):
        out["local_mask"] = True
    if getattr(args, "adam_step_scale", None) is not None:
        out["local_step_scale"] = args.adam_step_scale
    return out


def ramp_title(args):
    if not args.ramp_steps:
        return ""
    return f", ramp {args.ramp_start} -> L_T over {args.ramp_steps} steps"


def local_title(local, args):
    if not local:
        return ""
    return f", local {local['local_optimizer']}" + (
        f", clip {args.local_clip:g} per rank" if args.local_clip else "") + (
        ", no mask" if getattr(args, "no_mask", False) else "")


def register_adacomp(ddp, args, optimizer, kwargs):
    """The AdaComp hook on ddp with the AdaCompState settings kwargs: through
    adacomp.torch.DistributedOptimizer around the script's optimizer with --one-call,
    else adacomp.torch.register. Returns (the optimizer to step, the state)."""
    import adacomp.torch as adt
    if getattr(args, "one_call", False):
        one = adt.DistributedOptimizer(ddp, optimizer, **kwargs)
        return one, one.hook
    return optimizer, adt.register(ddp, **kwargs)


def velocity_masked(state):
    """Whether the AdaCompState's (or None's) local SGD zeroes the velocity of the
    elements a frame sent."""
    local = state.settings.local if state is not None else None
    return bool(local is not None and local.kind == "sgd" and local.mask)


def one_call_title(optimizer, args):
    """The title's words for --one-call: where the optimizer runs."""
    if not getattr(args, "one_call", False):
        return ""
    masked = velocity_masked(optimizer.hook)
    return (f", one call: {optimizer.kind or 'the optimizer'} "
            f"{'on each rank' if optimizer.local else 'on the average'}"
            + (", velocity masked" if masked else "")
            + (f", Adam's step x {_scale_words(optimizer.hook.settings.local.step_scale)}"
               if optimizer.kind == "adam" else ""))


def _scale_words(scale):
    return "the measured scale" if scale == "measured" else f"{scale:g}"


def add_ramp_and_local_args(g):
    """--ramp-steps, --ramp-start, --ramp-stages and --local-optimizer (every example's)."""
    g.add_argument("--ramp-steps", type=int, default=0,
                   help="adacomp hook: bin-size ramp over the first N steps (0: off)")
    g.add_argument("--ramp-start", type=int, default=8, help="adacomp hook: the ramp's first L_T")
    g.add_argument("--ramp-stages", type=int, default=4, help="adacomp hook: the ramp's stages")
    g.add_argument("--local-optimizer", action="store_true",
                   help="adacomp hook: every rank keeps the optimizer's moments (SGD's "
                        "velocity, Adam's moments) of its own gradient and compresses the "
                        "step; the average is applied by SGD without momentum "
                        "(adacomp.torch.split_optimizer); no gradient clipping then, "
                        "unless --local-clip")
    g.add_argument("--one-call", action="store_true",
                   help="adacomp hook through adacomp.torch.DistributedOptimizer(ddp, "
                        "optimizer): the one call chooses where the optimizer runs, the "
                        "script's lr schedule and clip (each rank's gradient) stay as they are")
    g.add_argument("--no-mask", action="store_true",
                   help="adacomp hook with SGD's velocity on each rank (--local-optimizer or "
                        "--one-call): leave the velocity of the elements a frame sent as it "
                        "is (local_mask=False) instead of zeroing it (the one call's "
                        "default)")
    g.add_argument("--mask", action="store_true",
                   help="adacomp hook, --one-call with SGD: zero the velocity of the "
                        "elements a frame sent (local_mask=True, --local-optimizer's "
                        "default)")
    g.add_argument("--adam-step-scale", type=_step_scale, default=None,
                   help="adacomp hook with Adam on each rank (--local-optimizer or --one-call): "
                        "multiply each rank's Adam step by this (local_step_scale), or "
                        "'measured': by the scale measured from how much the ranks' "
                        "gradients differ (default: the one call's 'measured', else 1)")
    g.add_argument("--local-clip", type=float, default=0.0,
                   help="adacomp hook with --local-optimizer: each rank clips its own "
                        "gradient to this L2 norm before the moments (the model goes in "
                        "one DDP bucket, so the norm is the whole gradient's); 0: off")


def _step_scale(text):
    """--adam-step-scale: a number, or "measured"."""
    return text if text == "measured" else float(text)


def check_ramp_and_local_args(ap, args, adam=True):
    """Refuses (ap.error) the combinations of add_ramp_and_local_args' options that do
    not go together; adam=False: the example's optimizer is SGD."""
    if (args.local_optimizer or args.ramp_steps) and args.hook != "adacomp":
        ap.error("--local-optimizer and --ramp-steps apply to --hook adacomp only")
    if args.ramp_steps < 0:
        ap.error("--ramp-steps must not be negative")
    if args.one_call and (args.hook != "adacomp" or args.local_optimizer):
        ap.error("--one-call applies to --hook adacomp, without --local-optimizer (it "
                 "chooses where the optimizer runs)")
    if args.no_mask and not (args.local_optimizer or args.one_call):
        ap.error("--no-mask goes with --local-optimizer or --one-call")
    if args.mask and not args.one_call:
        ap.error("--mask goes with --one-call (--local-optimizer masks already)")
    if args.mask and args.no_mask:
        ap.error("--mask or --no-mask, not both")
    scale = args.adam_step_scale
    if scale is not None and not adam:
        ap.error("--adam-step-scale goes with Adam; this example's optimizer is SGD")
    if scale is not None and not (args.local_optimizer or args.one_call):
        ap.error("--adam-step-scale goes with --local-optimizer or --one-call")
    if scale not in (None, "measured") and not (scale > 0 and math.isfinite(scale)):
        ap.error("--adam-step-scale is a finite number > 0, or 'measured'")
    if args.local_clip and not (args.local_optimizer and args.local_clip > 0):
        ap.error("--local-clip is a positive norm, with --local-optimizer")


# ----- the hooks ----------------------------------------------------------------------------


def time_the_hook(owner, state):
    """Adds to owner.hook_time the wall time the AdaComp hook of ``state`` spends on the
    calling (autograd) thread, summed over a step's buckets: compress and post with
    overlap, the whole exchange and decode without it."""
    exchange = getattr(state, "exchange_bucket", None)
    if exchange is None:
        return

    def timed_exchange(bucket):
        t = time.perf_counter()
        try:
            return exchange(bucket)
        finally:
            owner.hook_time += time.perf_counter() - t
    state.exchange_bucket = timed_exchange



def register_torch_hook(owner, ddp, args, nparams, ring):
    """Registers torch's own hook of kind owner.kind on ddp: "fp16"
    (default_hooks.fp16_compress_hook), "powersgd" (powerSGD_hook at
    args.powersgd_rank and args.powersgd_start_iter) or anything else for none
    (DDP's dense all-reduce). Sets owner.title, owner.bytes_how, owner.psgd
    (the PowerSGDState, whose own counter gives its bytes) and owner.fixed (the
    bytes per step of fp16 and none: 2 or 4 x nparams). ring: what a ring
    sends per rank, in units of the all-reduced bytes."""
    if owner.kind == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        owner.title = "fp16 hook (torch default_hooks.fp16_compress_hook)"
        owner.fixed = 2 * nparams
        owner.bytes_how = (f"all-reduced bytes: 2 x {nparams} parameters (a ring sends "
                           f"{ring:g} x that per rank)")
    elif owner.kind == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        owner.psgd = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=args.powersgd_rank,
            start_powerSGD_iter=args.powersgd_start_iter, random_seed=args.seed)
        ddp.register_comm_hook(owner.psgd, powerSGD_hook.powerSGD_hook)
        owner.title = (f"PowerSGD hook (rank {args.powersgd_rank}, start_powerSGD_iter "
                       f"{args.powersgd_start_iter}, min_compression_rate "
                       f"{owner.psgd.min_compression_rate:g})")
        owner.bytes_how = ("all-reduced bytes: 4 x the elements PowerSGD all-reduces "
                           "(uncompressed tensors + P + Q; its own counter; a ring sends "
                           f"{ring:g} x that per rank)")
    else:
        owner.title = "no hook (DDP's dense all-reduce)"
        owner.fixed = 4 * nparams
        owner.bytes_how = (f"all-reduced bytes: 4 x {nparams} parameters (a ring sends "
                           f"{ring:g} x that per rank)")


class CommHook:
    """The communication hook of a run, its byte counter and its checkpoint state."""

    def __init__(self, ddp, model, args, world, local=None, optimizer=None):
        """local: the hook's local-optimizer settings (split_optimizer's kwargs);
        optimizer: the script's, which --one-call wraps (self.optimizer, to step)."""
        self.kind = args.hook
        self.optimizer = optimizer
        self.state = None      # AdaCompState
        self.psgd = None       # PowerSGDState
        self.hook_time = 0.0   # adacomp: seconds inside the hook on the autograd thread
        nparams = sum(p.numel() for p in model.parameters() if p.requires_grad)
        ring = 2 * (world - 1) / world
        if self.kind == "adacomp":
            kwargs = {"codec": args.codec, "overlap": not args.no_overlap, "seed": args.seed,
                      "values": args.values, "dense_types": args.dense_types,
                      "exchange": args.exchange, "summed_values": args.summed_values,
                      "adapt_threshold": args.adapt_threshold,
                      "dense_warmup_steps": args.dense_warmup_steps,
                      **({"auto": True} if getattr(args, "auto", False) else {}),
                      **ramp_and_local_kwargs(args, local)}
            if args.bin_size:
                kwargs["bin_size"] = args.bin_size
            if args.bin_sizes:
                kwargs["bin_sizes"] = args.bin_sizes
            self.optimizer, self.state = register_adacomp(ddp, args, optimizer, kwargs)
            time_the_hook(self, self.state)
            self.title = (f"AdaComp hook (codec {args.codec}, values {args.values}, "
                          f"{'no overlap' if args.no_overlap else 'overlap'}"
                          + (f", bin_size {args.bin_size}" if args.bin_size else "")
                          + (f", bin_sizes {args.bin_sizes}" if args.bin_sizes else "")
                          + (f", dense {','.join(args.dense_types)}" if args.dense_types else "")
                          + (f", exchange {args.exchange}" if args.exchange != "allgather"
                             else "")
                          + (f", {args.summed_values} sums" if args.summed_values != "fp32"
                             else "")
                          + ramp_title(args)
                          + (f", adaptive {args.adapt_threshold:g}" if args.adapt_threshold
                             else "")
                          + (f", float32 for the first {args.dense_warmup_steps} steps"
                             if args.dense_warmup_steps else "")
                          + (", auto" if getattr(args, "auto", False) else "")
                          + local_title(local, args)
                          + one_call_title(self.optimizer, args) + ")")
            self.bytes_how = ("bytes this rank handed to isend (frames + 8-byte headers, to "
                              "every peer; the hook's transport_bytes)")
        else:
            register_torch_hook(self, ddp, args, nparams, ring)
        self.untimed = args.warmup_steps + (args.powersgd_start_iter
                                            if self.kind == "powersgd" else 0)

    def cpu_seconds(self):
        """The AdaComp hook's CPU seconds so far (every thread), 0 for the others."""
        if self.state is None:
            return 0.0
        return sum(self.state.cpu_seconds.values())

    def counter(self):
        """Cumulative bytes this rank handed to its collectives (differences only)."""
        if self.state is not None:
            return self.state.transport_bytes
        if self.psgd is not None:
            return 4 * self.psgd.total_numel_after_compression
        return 0

    def step_bytes(self, before, after):
        if self.state is not None or self.psgd is not None:
            return after - before
        return self.fixed

    def step_failure(self):
        """The hook's StepAborted of the last step if a rank reported bad data (the step was
        rolled back everywhere and can be skipped), else None."""
        err = self.state.step_error if self.state is not None else None
        if err is not None and err.failed_ranks:
            return err
        return None

    def rates(self):
        """The AdaComp hook's compression rate end to end and per layer type (rank 0)."""
        if self.state is None:
            return None
        st = self.state.stats()
        out = {"end_to_end": st["end_to_end"]["compression_rate"],
               "end_to_end_all_ranks": st["end_to_end"]["gathered_compression_rate"],
               "selected_per_bin": st["end_to_end"]["selected_per_bin"],
               "per_type": {}}
        for t, v in st["per_type"].items():
            if v["elements"]:
                out["per_type"][t] = {"compression_rate": v["compression_rate"],
                                      "bytes_sent": v["bytes_sent"],
                                      "bytes_dense": v["bytes_dense"]}
        out["buckets_per_step"] = st["buckets"] / st["steps"] if st["steps"] else float("nan")
        return out

    def state_dict(self):
        return {"adacomp": self.state.state_dict()} if self.state is not None else {}

    def load_state_dict(self, d):
        if self.state is not None:
            self.state.load_state_dict(d["adacomp"])


def ddp_wrap(model, args):
    """DDP over the model; with powersgd or --local-clip, in one bucket (see the scripts'
    docstrings)."""
    size_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    kwargs = {}
    cap = args.bucket_cap_mb
    # With --local-clip the whole gradient's norm is one bucket's.
    whole = args.hook == "powersgd" or args.local_clip > 0
    if whole and (not cap or cap <= size_mb):
        # torch 1.13's PowerSGD hook on Gloo aborts (gloo::EnforceNotMet) once a model
        # spans several buckets: keep the whole model in one, the first bucket included.
        cap = math.ceil(size_mb) + 1
    if cap:
        kwargs["bucket_cap_mb"] = cap
        # DDP's first bucket has its own limit, read from here when DDP is made.
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(cap * 2**20) if whole else min(
            dist._DEFAULT_FIRST_BUCKET_BYTES, int(cap * 2**20))
    return nn.parallel.DistributedDataParallel(model, **kwargs), kwargs.get("bucket_cap_mb")
