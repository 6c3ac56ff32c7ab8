"""AdaCompState, the state of the hook: its settings, the parameters and their
compressors, checkpoints (state_dict), statistics, and each bucket's part of a step
(compress and send at the hook's call, decode and settle when the messages are in)."""

import collections
import threading
import time

import torch.distributed as dist
from torch import nn

from .. import CODECS, Compressor
from .auto import _Auto
from .checkpoint import _gather, _load, _save
from .defer import _after_ddp, _Deferred
from .entry import _Entry, _mix_seed
from .bucket import _average, _compress, _layout, _working_copy
from .errors import _decode_failed, _exchange_failed, _Failed, _keep_failing, _skipped
from .layers import DEFAULT_BIN_SIZES, LAYER_TYPES, _type_by_shape, layer_types_of
from .local_optimizer import _LocalOptimizer
from .schedule import _Schedule
from .stats import _per_type, _report
from .slices import _average_slices, _cut, _estimate, _second_phase
from .step import _Step
from .refusals import _check_group, _check_parameter
from .transport import _Exchange
from .usage import _Usage
from .worker import _LIVE_STATES, _close, _enqueue

EXCHANGES = ("allgather", "reduce-scatter", "auto")


class AdaCompState:
    """State of the AdaComp DDP hook: per-parameter compressors and statistics.

    Args:
        process_group: the group to all-gather over (None: the default group).
        model: the module DDP wraps (or the DDP module itself). Gives stable
            parameter names (residue keys, checkpoints) and layer types.
            Without it, parameters are named "param<k>" in the order the hook
            first meets them and typed by shape; that order is deterministic
            for a given model and DDP setup, but a model is recommended.
        codec: any codec of ``adacomp.CODECS``; "adacomp" by default.
        bin_size: one L_T for every tensor, or None for the layer-type defaults.
        bin_sizes: per-type overrides, e.g. {"conv": 25}.
        values, density, tau, seed: as in ``adacomp.Compressor`` (terngrad's
            seed is mixed with the rank and the tensor id).
        dense_types: layer types to send uncompressed (codec "dense").
        layer_types: {parameter name: type} overrides of the automatic typing.
        overlap: True (default): the hook returns as soon as a bucket's frames are
            sent, and a thread of the state receives and decodes them while DDP
            goes on with backward; False: each bucket is exchanged and decoded
            before the hook returns (same results, bit for bit).
        adapt_threshold, adapt_window, adapt_hold, adapt_bin_size: the adaptive bin
            size of ``adacomp train --adapt-threshold`` (adacomp/schedule.h): every
            adapt_window steps, a parameter whose averaged-gradient L2 norm (mean over
            the window) changed by at least adapt_threshold against the window before
            is sent at adapt_bin_size (0: ramp_start) for the next adapt_hold steps;
            and every parameter after ``lr_dropped()``. 0 (default): off. Needs
            codec "adacomp" and model=.
        exchange: "allgather" (default: every rank receives every rank's frames),
            "reduce-scatter" (slice d of every parameter's frame to rank d, which
            averages it and sends its averaged slices to every rank: the same result,
            fewer bytes received at large world sizes) or "auto" (per bucket, the one
            the slot's previous exchange says receives fewer bytes; the first by the
            all-gather). docs/wire-format.md section 10.
        summed_values: the reduce-scatter's averaged slices, "fp32" (exact) or "fp16"
            (binary16: about half the bytes once the sums are dense; every rank takes
            the rounded values, so the replicas stay identical).
        ramp_steps, ramp_start, ramp_stages: the bin-size ramp of
            ``adacomp train --ramp-steps`` (docs/algorithm.md section 6): over the
            first ramp_steps steps L_T climbs from ramp_start to each tensor's
            bin size in ramp_stages geometric stages; 0 (default): fixed L_T.
        local_optimizer, momentum, betas, eps, local_weight_decay: None (default), or
            "sgd" / "adam": each rank keeps the optimizer's moments of its own gradient
            and compresses the step they give; apply the averaged step with SGD of
            momentum 0 (local_optimizer.py; ``split_optimizer`` makes both).
            local_clip_norm (> 0): the gradient clip of a local optimizer, whose output
            is a step and not a gradient to clip: each rank scales its gradient in a
            bucket to at most this L2 norm before the moments (with the model in one
            bucket, torch's clip_grad_norm_ on the rank's own gradient).
        dense_warmup_steps: ``adacomp train --dense-warmup-steps``: the first steps go
            uncompressed (float32 frames: the exact average), as torch's PowerSGD
            all-reduces its first start_powerSGD_iter; residues untouched. 0: none.
            With a local optimizer: "sgd" sends its velocities whole (nothing masked);
            "adam" runs on the exact averages, then freezes its second moment
            (1-bit Adam; local_optimizer.py).
        max_failed_steps: after this many failed steps in a row (each rolled back and
            raised as a StepAborted), the next failure raises StepsKeepFailing instead,
            which the skip-the-step loop does not skip: a run whose every step fails
            stops with the cause instead of training on without updates. 0: never.
        auto: each step by the codec or dense (float32 frames of gradient + residue,
            the residues then emptied), whichever the run's measured step times say is
            faster (auto.py; ``adacomp train --codec auto``); auto_options: the
            chooser's settings (probe_steps, reprobe_every, probe_cost, drift,
            min_settled, margin). Not with a local optimizer or dense_warmup_steps.

    A CUDA, meta-device or float64 parameter, or a process group other than Gloo, is
    refused here (ValueError), not at the first step. With a DDP model whose
    find_unused_parameters or static_graph is set (given as model=, or through
    register()), a parameter this rank left unused in a step sends nothing of its
    residue (track_usage()).
    """

    def __init__(self, process_group=None, model=None, codec="adacomp", bin_size=None,
                 bin_sizes=None, values="ternary", density=0.01, tau=1e-3, seed=0,
                 dense_types=(), layer_types=None, overlap=True, ramp_steps=0, ramp_start=8,
                 ramp_stages=4, exchange="allgather", summed_values="fp32", adapt_threshold=0.0,
                 adapt_window=16, adapt_hold=32, adapt_bin_size=0, local_optimizer=None,
                 momentum=0.9, betas=(0.9, 0.999), eps=1e-8, local_weight_decay=None,
                 local_clip_norm=0.0,
                 dense_warmup_steps=0, max_failed_steps=3, auto=False, auto_options=None):
        # The settings.
        if local_optimizer is not None and model is None:
            raise ValueError("local_optimizer needs model= (the moments are kept by name)")
        self._local = None if local_optimizer is None else _LocalOptimizer(
            local_optimizer, momentum, betas, eps, local_weight_decay, local_clip_norm)
        if local_clip_norm and local_optimizer is None:
            raise ValueError("local_clip_norm goes with local_optimizer (without it, clip the "
                             "averaged gradient the hook returns, as without the hook)")
        if codec not in CODECS:
            raise ValueError(f"unknown codec {codec!r}; one of {', '.join(CODECS)}")
        if auto and (local_optimizer is not None or dense_warmup_steps or codec == "dense"):
            raise ValueError("auto chooses between dense and a codec by itself: not with "
                             "codec 'dense', a local optimizer or dense_warmup_steps")
        self._auto = _Auto(auto_options) if auto else None
        self._schedule = _Schedule(codec, model is not None, ramp_steps, ramp_start,
                                   ramp_stages, adapt_threshold, adapt_window, adapt_hold,
                                   adapt_bin_size, dense_warmup_steps)
        if self._local is not None and self._local.kind == "adam":
            self._local.freeze_after = self._schedule.dense_warmup_steps
        if exchange not in EXCHANGES:
            raise ValueError(f"unknown exchange {exchange!r}; one of {', '.join(EXCHANGES)}")
        if summed_values not in ("fp32", "fp16"):
            raise ValueError(f"summed_values: 'fp32' or 'fp16', not {summed_values!r}")
        self.exchange = exchange
        self.summed_values = summed_values
        self._by_slices_next = {}  # auto: per bucket slot, the next exchange's choice
        self.process_group = process_group
        self.codec = codec
        self.values = values
        self.density = float(density)
        self.tau = float(tau)
        self.seed = int(seed)
        self.bin_sizes = dict(DEFAULT_BIN_SIZES)
        if bin_sizes:
            for t, v in bin_sizes.items():
                if t not in LAYER_TYPES:
                    raise ValueError(f"bin_sizes: unknown layer type {t!r}; one of {LAYER_TYPES}")
                self.bin_sizes[t] = int(v)
        if bin_size is not None:
            self.bin_sizes = {t: int(bin_size) for t in LAYER_TYPES}
        for t in dense_types:
            if t not in LAYER_TYPES:
                raise ValueError(f"dense_types: unknown layer type {t!r}; one of {LAYER_TYPES}")
        self.dense_types = tuple(dense_types)
        self.overlap = bool(overlap)
        # The parameters.
        self._by_id = {}        # id(param) -> _Entry
        self._by_name = {}      # name -> _Entry
        self._pending = {}      # name -> compressor state_dict loaded before the entry existed
        self._next_id = 0
        self._model_given = model is not None
        self._usage = None      # a _Usage when DDP may leave parameters unused (track_usage)
        # A local optimizer's clip over every bucket at once (defer.py); a callable run
        # once DDP has written the averages into .grad (DistributedOptimizer).
        self.clip_whole = False
        self._deferred = _Deferred()
        self.after_backward = None
        # The step (see step.py), under self._lock.
        self._lock = threading.Lock()
        self._open = None       # the step in progress (a _Step), None between steps
        self.step_error = None  # the StepAborted of the current/last step, None if it went well
        # Statistics (see stats.py).
        self.steps = 0
        self.buckets = 0
        self.aborted_steps = 0  # steps rolled back after an error (not in state_dict)
        self.failed_in_a_row = 0  # failed steps since the last applied one
        if isinstance(max_failed_steps, bool) or not isinstance(max_failed_steps, int) or (
                max_failed_steps < 0):
            raise ValueError(f"max_failed_steps must be a whole number >= 0, not "
                             f"{max_failed_steps!r}")
        self.max_failed_steps = max_failed_steps
        self.transport_bytes = 0
        # CPU seconds of the hook's own work (time.thread_time of the threads that do
        # it): "launch" compress and post on the caller's (autograd) thread, "finish"
        # receive, decode and settle (on the exchange thread with overlap).
        self.cpu_seconds = {"launch": 0.0, "finish": 0.0}
        self._totals = _per_type()
        self._step = _per_type()
        self._last_step = _per_type()
        # The exchange (see _Exchange): per bucket slot, the receive capacity every rank
        # agrees on, the receive buffers, and the tensors of the slot's last exchange.
        self._capacity = {}
        self._recv_buffers = {}
        self._comm_tensors = {}
        # The exchange thread (see worker.py).
        self._inflight = collections.deque()  # exchanges started, not finished, in order
        self._cv = threading.Condition()
        self._thread = None
        self._closing = False
        _LIVE_STATES.add(self)
        ddp = None
        if model is not None:
            if isinstance(model, nn.parallel.DistributedDataParallel):
                ddp, model = model, model.module
            types = layer_types_of(model)
            if layer_types:
                for name, t in layer_types.items():
                    if name not in types:
                        raise ValueError(f"layer_types: the model has no parameter {name!r}")
                    if t not in LAYER_TYPES:
                        raise ValueError(f"layer_types: unknown layer type {t!r} for {name!r}")
                    types[name] = t
            for name, p in model.named_parameters():
                if p.requires_grad:
                    _check_parameter(name, p)
                    self._add_entry(p, name, types[name])
            _check_group(process_group)
        elif layer_types:
            raise ValueError("layer_types needs model=")
        self._schedule.build(sorted(self._by_name.values(), key=lambda e: e.tensor_id),
                             self.bin_sizes)
        if ddp is not None:
            self.track_usage(ddp)

    # ----- parameters and their compressors -------------------------------------------------

    def _rank(self):
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(self.process_group)
        return 0

    def _world(self):
        if dist.is_available() and dist.is_initialized():
            return dist.get_world_size(self.process_group)
        return 1

    def _add_entry(self, param, name, layer_type):
        e = _Entry()
        e.name = name
        e.tensor_id = self._next_id
        self._next_id += 1
        e.layer_type = layer_type
        e.numel = param.numel()
        e.param = param  # keeps id(param) from being reused while the entry exists
        e.compressor = None
        if e.numel > 0:
            codec = "dense" if layer_type in self.dense_types else self.codec
            e.compressor = Compressor(
                e.numel, codec=codec, bin_size=self.bin_sizes[layer_type], values=self.values,
                density=self.density, tau=self.tau,
                seed=_mix_seed(self.seed, self._rank(), e.tensor_id), tensor_id=e.tensor_id)
            if name in self._pending:
                e.compressor.load_state_dict(self._pending.pop(name))
        self._by_id[id(param)] = e
        self._by_name[name] = e
        return e

    def _entry(self, param):
        e = self._by_id.get(id(param))
        if e is None:
            name = f"param{self._next_id}"
            while name in self._by_name:
                name += "_"
            e = self._add_entry(param, name, _type_by_shape(param))
        return e

    def track_usage(self, ddp_model):
        """Sends nothing of a parameter's residue in a step this rank did not use it,
        when ``ddp_model`` (the DDP module the hook serves) may leave parameters unused
        (find_unused_parameters=True or static_graph=True): DDP does not apply an
        average to a parameter no rank used, so what was sent of it would be lost
        (usage.py). register() calls it; needs model=. Returns whether it tracks."""
        if not (getattr(ddp_model, "find_unused_parameters", False)
                or getattr(ddp_model, "static_graph", False)):
            return False
        if not self._model_given:
            raise ValueError("tracking unused parameters needs model= (the parameters to watch)")
        if self._usage is None:
            self._usage = _Usage(sorted(self._by_name.values(), key=lambda e: e.tensor_id))
        return True

    def parameter_names(self):
        """The residue keys, in tensor-id order."""
        return sorted(self._by_name, key=lambda n: self._by_name[n].tensor_id)

    def layer_type(self, name):
        return self._by_name[name].layer_type

    def residues(self):
        """{parameter name: copy of its residue as a float32 numpy array}."""
        return {n: e.compressor.residue for n, e in self._by_name.items() if e.compressor}

    # ----- checkpoints -----------------------------------------------------------------------

    def state_dict(self):
        """This rank's residues (and generator states) by parameter name, plus step
        counters and totals, with the rank and world size they belong to: another rank's
        load_state_dict() refuses it. For one file that serves every rank (a checkpoint
        saved on rank 0 only), see gathered_state_dict()."""
        return _save(self)

    def gathered_state_dict(self, dst=0):
        """Every rank's state_dict() in one object, on rank ``dst`` (None on the other
        ranks): a collective, every rank of the group calls it. Save it from rank dst
        alone; load_state_dict() of the whole object on any rank takes that rank's part.

            hook = state.gathered_state_dict()           # on every rank
            if rank == 0:
                torch.save({"model": model.state_dict(), "adacomp": hook}, path)
            ...
            state.load_state_dict(torch.load(path)["adacomp"])  # on every rank
        """
        return _gather(self, dst)

    def load_state_dict(self, state):
        """Restores what state_dict() returned on this rank, or this rank's part of what
        gathered_state_dict() returned. Refuses another rank's state, or one from a world
        of another size, and checks every entry before changing anything."""
        _load(self, state)

    # ----- statistics ------------------------------------------------------------------------

    def stats(self):
        """Totals since the start (or the loaded checkpoint), per layer type and end to end.

        Keys: steps, buckets, transport_bytes, end_to_end, per_type {conv, fc, lstm,
        other, attention, mlp, embedding, norm}, last_step {end_to_end, per_type}.
        Each counter dict has elements, bytes_sent, bytes_dense (4 x elements),
        compression_rate (bytes_dense / bytes_sent, this rank), gathered_elements,
        gathered_bytes (frame bytes of all ranks) and gathered_compression_rate
        (32 x elements x world / bits of all ranks' frames), selected, bins,
        selected_per_bin, frames, bin_histogram. With auto=True also auto
        {dense_steps, codec_steps, choices}: the applied steps each way and what it
        settled on ("step N: auto: codec, ... s a step against dense's ... s").
        """
        with self._lock:
            return _report(self.steps, self.buckets, self.transport_bytes, self._totals,
                           self._last_step, self._auto)

    def compression_rate(self):
        """End-to-end rate of this rank's frames since the start: 32-bit bytes / frame bytes."""
        return self.stats()["end_to_end"]["compression_rate"]

    def reset_stats(self):
        with self._lock:
            self.transport_bytes = 0
            self._totals = _per_type()

    # ----- the exchange ----------------------------------------------------------------------

    def exchange_bucket(self, bucket):
        """Compresses one bucket and starts its exchange; returns a torch Future.

        The future completes with the bucket tensor, which then holds every
        rank's average, once all peers' frames have arrived and been decoded
        (on the state's exchange thread, so that DDP goes on with backward and
        the next buckets meanwhile; ``overlap=False`` does it all before
        returning). It fails with a StepAborted when the step failed on any rank.

        A step (the buckets of one backward pass, up to ``bucket.is_last()``)
        is atomic for this state: on any error in any bucket, on any rank, every
        compressor touched in the step gets its start-of-step residue, step
        counter and last_stats back, the step's statistics are dropped, and the
        futures of that bucket and of the rest of the step fail on every rank.
        Every bucket is exchanged all the same (a failed rank sends a failure
        marker instead of frames), so no rank waits for a message never sent.

        With a local optimizer's clip over the whole gradient (``clip_whole``), the
        buckets are held until the last one and then exchanged together (defer.py).
        """
        if self._local is not None and self._local.clip_norm and self.clip_whole:
            return self._deferred.hold(self, bucket, self._exchange_now)
        return self._exchange_now(bucket)

    def _exchange_now(self, bucket):
        t = time.thread_time()
        with self._lock:
            ex = self._launch(bucket)
            if ex.is_last and self._local is not None:
                self._local.end_step()
        self.cpu_seconds["launch"] += time.thread_time() - t
        if ex.is_last and self.after_backward is not None:
            _after_ddp(self.after_backward)
        if ex.world == 1 or not self.overlap:
            self._finish(ex)
        else:
            _enqueue(self, ex)
        return ex.future

    def reduce_bucket(self, bucket):
        """exchange_bucket, waited for: returns the averaged bucket tensor or raises
        the StepAborted that failed the step."""
        v = self.exchange_bucket(bucket).wait()
        if isinstance(v, _Failed):
            raise v.error
        return v

    def abort_step(self):
        """Rolls back a step whose backward pass did not reach the last bucket.

        The hook does this itself when it fails a step; call it only if backward
        failed outside the hook (e.g. in your own autograd code) after some
        buckets were reduced on every rank. Returns whether a step was open.
        """
        self.wait_idle()
        with self._lock:
            if self._open is None:
                return False
            self._drop_step()
            return True

    def lr_dropped(self):
        """Tells the adaptive schedule that the learning rate of the next step is lower:
        every parameter is sent at the light bin size for adapt_hold steps (as
        ``adacomp train`` does after each drop). Needs adapt_threshold > 0."""
        with self._lock:
            self._schedule.lr_dropped(self.steps)

    def close(self, timeout=5.0):
        """Waits (up to ``timeout`` seconds each) for the exchanges in flight and for the
        state's exchange thread to end; a later bucket starts a new thread. The
        thread holds the state, so a state that has exchanged with overlap lives
        until closed; the module closes every live state at interpreter exit.
        Returns whether the thread ended."""
        return _close(self, timeout)

    def wait_idle(self, timeout=None):
        """Waits until no exchange of this state is in flight. Returns whether it is idle."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._inflight, timeout)

    # ----- the step (see step.py) ------------------------------------------------------------

    def _begin_step(self):
        self.step_error = None
        self._step_norms = {}
        self._open = _Step(self.buckets, self.transport_bytes)
        if self._auto is not None:
            self._auto.begin(self, self.steps)

    def _snapshot(self, layout):
        self._open.snapshot(layout)

    def _rollback_step(self):
        """Undoes the open step's compressions and statistics; the step stays open, failed."""
        step = self._open
        self.buckets = step.buckets
        self.transport_bytes = step.transport_bytes
        self._step = _per_type()
        self.aborted_steps += 1
        step.restore()
        if self._local is not None:
            self._local.drop()
        if self._auto is not None:
            self._auto.drop()

    def _drop_step(self):
        """Ends the open step unapplied (rolled back unless a failure did that already)."""
        if not self._open.failed:
            self._rollback_step()
        self._open = None

    def _commit_step(self):
        self.failed_in_a_row = 0
        self._open.discard()
        self._open = None
        if self._local is not None:
            self._local.commit()
        if self._auto is not None:
            self._auto.commit()
        self._schedule.observe(self.steps, len(self._by_name))  # the applied step's norms
        self.steps += 1
        for t in LAYER_TYPES:
            self._totals[t].merge(self._step[t])
        self._last_step = self._step
        self._step = _per_type()

    def _launch(self, bucket):
        """On the caller's thread, under the lock: compresses and posts the messages."""
        ids = [id(p) for p in bucket.parameters()]
        if self._open is not None and self._open.has_seen(ids):
            # A parameter seen twice: a new step. If the last one never reached its last
            # bucket (its backward failed outside the hook), it was not applied; undo it.
            self.wait_idle_locked()
            if self._open is not None:
                self._drop_step()
        if self._open is None:
            self._begin_step()
        step = self._open
        step.seen.update(ids)
        ex = _Exchange(self, bucket, self.steps, skipped=step.failed)
        if ex.world > 1 and self.exchange != "allgather":
            ex.by_slices = (self.exchange == "reduce-scatter"
                            or self._by_slices_next.get(ex.index, False))
        frames, error = [], None
        try:
            buf = bucket.buffer()
            ex.buf = buf
            ex.work = _working_copy(buf, bucket.index())
            ex.layout = _layout(bucket, buf, self._entry)
        except Exception as exc:  # still join the exchange: peers fail, not hang
            error = exc
        if error is None and not ex.skipped:
            frames, error = _compress(self, ex, ex.work.numpy())
        ex.error = error
        if error is not None or ex.skipped:
            ex.payload = None
        elif ex.by_slices:
            try:
                ex.payload = _cut(frames, ex.world)
            except Exception as exc:  # noqa: BLE001 - still join the exchange
                ex.error, ex.payload = exc, None
        else:
            ex.payload = b"".join(frames)
        ex.post()
        return ex

    def wait_idle_locked(self):
        """wait_idle() for a caller that holds self._lock (released while waiting)."""
        if not self._inflight:
            return
        self._lock.release()
        try:
            self.wait_idle()
        finally:
            self._lock.acquire()

    def _finish(self, ex):
        """Waits for the bucket's messages, decodes, settles the step, completes the future."""
        t = time.thread_time()
        try:
            received = ex.receive()
            if ex.by_slices:
                received = _second_phase(self, ex, received)
            result = self._settle(ex, received, None)
        except Exception as exc:  # noqa: BLE001 - a failed collective fails the step
            result = self._settle(ex, None, exc)
        self.cpu_seconds["finish"] += time.thread_time() - t
        ex.future.set_result(result)

    def _settle(self, ex, received, comm_error):
        """Decodes the bucket or fails it, and commits the step at its last bucket.
        Returns the value of the bucket's future: the averaged bucket, or a _Failed.

        received: [(rank, header, memoryview of frames)] in rank order, or None when the
        exchange failed (comm_error)."""
        index = ex.index
        with self._lock:
            step = self._open
            ex.retire()
            second = getattr(ex, "phase1", None)
            if second is not None:
                second.retire()
            # Skipped: launched in a failed step, or failed by an earlier bucket while
            # this one travelled.
            skipped = ex.skipped or (step is not None and step.failed)
            failed_ranks = None if received is None else [r for r, h, _ in received if h < 0]
            if received is not None and not failed_ranks and not skipped:
                (second or ex).update_bound([h for _, h, _ in received])
            if step is None or skipped:
                return self._end_bucket(ex, _skipped(index, ex.step, self.step_error))
            if comm_error is not None or failed_ranks:
                return self._fail_step(ex, _exchange_failed(index, ex.step, comm_error,
                                                            ex.error, failed_ranks))
            fp16 = self.summed_values == "fp16"
            try:
                if ex.by_slices:
                    _average_slices(ex, received, self._step, fp16)
                else:
                    _average(ex, received, self._step)
            except Exception as e:  # noqa: BLE001 - a frame that fails to decode
                return self._fail_step(ex, _decode_failed(index, ex.step, e))
            if ex.average_step:  # a dense warm-up step of local Adam: its step, in place
                self._local.average_step(ex)
            self._schedule.record_norms(ex.work, ex.layout)
            if self.exchange == "auto" and ex.world > 1:
                ag, rs = _estimate(ex, fp16)
                self._by_slices_next[index] = rs < ag
            self.buckets += 1
            self.transport_bytes += ex.sent_bytes + (second.sent_bytes if second else 0)
            if ex.is_last:
                self._commit_step()
            return ex.buf

    def _fail_step(self, ex, exc):
        self._rollback_step()
        self.failed_in_a_row += 1
        if self.max_failed_steps and self.failed_in_a_row >= self.max_failed_steps:
            self.step_error = None  # the skip-the-step loop raises: see StepsKeepFailing
            return self._end_bucket(ex, _keep_failing(self.failed_in_a_row, exc))
        self.step_error = exc
        return self._end_bucket(ex, exc)

    def _end_bucket(self, ex, exc):
        """The failed bucket's future value; a failed last bucket ends the step."""
        if ex.is_last and self._open is not None:
            self._open = None
        return _Failed(exc)
