"""AdaComp as a PyTorch DistributedDataParallel communication hook.

Two lines on any process group DDP already uses (Gloo on CPU here)::

    state = adacomp.torch.AdaCompState(model=model)          # model: the module DDP wraps
    ddp_model.register_comm_hook(state, adacomp.torch.hook)

or ``state = adacomp.torch.register(ddp_model)``, which does both.

What the hook does with each bucket DDP hands it (docs/algorithm.md sections 2, 3):

1. For every parameter in the bucket, compresses its slice of the bucket's flat
   gradient with that parameter's own Compressor (its residue lives there).
   The bin size follows the layer type: conv weights 50, fully-connected and
   LSTM/GRU/RNN weights 500, biases and other tensors 500 (all compressed with
   AdaComp by default; pass ``dense_types=("other",)`` to send them as float32).
2. Sends this rank's frames of the bucket to every other rank (one isend per
   peer: an 8-byte header, then the frames; no padding; see _Exchange) and
   returns a future, so that DDP goes on with backward meanwhile.
3. A thread of the state receives every peer's frames and writes over each
   parameter's slice of the bucket the average of every rank's frame of it
   (adacomp.decompress_average: the frames added in rank order into zero,
   then divided by the world size), so all replicas apply the same bits; then
   it completes the future.

Compressors are keyed by parameter (its name in ``model`` when a model is
given, else the order in which the hook first saw it), never by bucket index,
so DDP's bucket rebuild after the first iteration does not mix residues up.
``state.state_dict()`` / ``state.load_state_dict()`` carry the residues for
checkpoints; pass the same model (parameter names) when resuming.

Statistics (``state.stats()``): "bytes sent" counts the frame bytes only,
headers and checksums included, as docs/algorithm.md section 5 defines the
compression rate; ``transport_bytes`` counts every byte handed to the process
group (frames, the 8-byte headers, second messages).

Steps are atomic for the state: if a bucket fails on any rank (a NaN or Inf
in a rank's gradient, which is checked for over the whole bucket before
anything is compressed; a bucket the hook cannot compress; a frame that fails
to decode; a failed send or receive), the failing rank still sends every peer
a failure marker for that bucket, so every rank fails in the same bucket
instead of hanging; then every rank restores the residues
(Compressor.snapshot() at the first compression of each parameter in the
step, restore() on failure) and statistics to the start of the step, sets
``state.step_error`` and fails the rest of the step's buckets without
compressing them (their markers are still exchanged). DDP raises the error
from ``backward()``; the caller skips ``optimizer.step()``, zeroes the
gradients and goes on, as if that batch had never been drawn
(python/README.md).
"""

# The package, one thing per module:
#   layers     layer typing (LAYER_TYPES, DEFAULT_BIN_SIZES, layer_types_of)
#   errors     StepAborted, the failed value of a bucket's future, the failure messages
#   stats      the byte and element counters and the stats() report
#   schedule   the bin size per step: the ramp and the adaptive part
#   local_optimizer  the optimizer's moments per rank before compression, split_optimizer
#   step       one step's transaction (what rolling it back needs)
#   bucket     one bucket's data: its parameters' slices, the float32 copy, the average
#   transport  the messages of one bucket (header, tags, receive capacity, overflow)
#   worker     the exchange thread and the interpreter-exit handling
#   state      AdaCompState: settings, parameters, the per-bucket steps
#   entry      one parameter the hook serves
#   checkpoint state_dict, gathered_state_dict and load_state_dict of AdaCompState
#   refusals   what the hook refuses when it is set up
#   usage      parameters a step left unused (find_unused_parameters)
#   defer      holding the buckets for a local clip over the whole gradient
#   ddp_hook   hook() and register()
#   optimizer  DistributedOptimizer, the one call
#   clip       clip_grad_norm_ on a DistributedOptimizer's parameters
#   liveness   Heartbeat: which rank stopped, after a collective failed
# (ddp_hook, not hook: the package's name `hook` is the function.)

from .. import _adacomp  # noqa: F401 - adacomp.torch._adacomp, as before the split
from .ddp_hook import hook, register
from .errors import StepAborted, StepsKeepFailing, _Failed  # noqa: F401 - _Failed: tests
from .liveness import Heartbeat
from .layers import DEFAULT_BIN_SIZES, LAYER_TYPES, layer_types_of
from .local_optimizer import split_optimizer
from .optimizer import DistributedOptimizer
from .settings import (AutoSettings, CodecSettings, ExchangeSettings, LocalSettings,
                       ScheduleSettings, Settings)
from .state import AdaCompState

# The public names keep the module they had (reprs, pickles: adacomp.torch.StepAborted).
for _obj in (DistributedOptimizer, AdaCompState, StepAborted, StepsKeepFailing, Heartbeat, hook, register,
             layer_types_of, split_optimizer, Settings, CodecSettings, ScheduleSettings,
             ExchangeSettings, LocalSettings, AutoSettings):
    _obj.__module__ = __name__
del _obj

__all__ = [
    "DistributedOptimizer",
    "AdaCompState",
    "Settings",
    "CodecSettings",
    "ScheduleSettings",
    "ExchangeSettings",
    "LocalSettings",
    "AutoSettings",
    "StepAborted",
    "StepsKeepFailing",
    "Heartbeat",
    "hook",
    "register",
    "layer_types_of",
    "split_optimizer",
    "LAYER_TYPES",
    "DEFAULT_BIN_SIZES",
]
