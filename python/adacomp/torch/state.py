"""AdaCompState, the state of the hook: its settings, the parameters and their
compressors, checkpoints (state_dict), statistics, and each bucket's part of a step
(compress and send at the hook's call, decode and settle when the messages are in)."""

import collections
import threading
import time

import torch.distributed as dist
from torch import nn

from .. import Compressor
from .auto import _Auto
from . import dense_sum
from .checkpoint import _gather, _load, _save
from .defer import _after_ddp, _Deferred
from .entry import _Entry, _mix_seed
from .bucket import _average, _compress, _layout, _working_copy
from .errors import _decode_failed, _exchange_failed, _Failed, _keep_failing, _skipped
from .layers import DEFAULT_BIN_SIZES, LAYER_TYPES, _type_by_shape, layer_types_of
from .local_optimizer import _LocalOptimizer
from .schedule import _Schedule
from .settings import Settings
from .stats import _per_type, _report
from .slices import _average_slices, _cut, _estimate, _second_phase
from .step import _Step
from .refusals import _check_group, _check_parameter
from .transport import _Exchange
from .usage import _Usage
from .worker import _LIVE_STATES, _close, _enqueue



class AdaCompState:
    """State of the AdaComp DDP hook: per-parameter compressors and statistics.

    Args:
        process_group: the group to exchange over (None: the default group).
        model: the module DDP wraps (or the DDP module itself). Gives stable
            parameter names (residue keys, checkpoints) and layer types.
            Without it, parameters are named "param<k>" in the order the hook
            first meets them and typed by shape; that order is deterministic
            for a given model and DDP setup, but a model is recommended.
        settings: a Settings (settings.py: codec, schedule, exchange, local
            optimizer, auto, max_failed_steps, grouped); None: the defaults.
        **kwargs: the same settings by their flat names (codec=, bin_size=,
            local_optimizer=, auto=, ...; Settings.names()), over ``settings``.
            ``state.settings`` is what the state was made with; it does not change.

    The main ones: codec (default "adacomp"), bin_size / bin_sizes (L_T; layer-type
    defaults conv 50, others 500), local_optimizer "sgd" / "adam" (each rank's
    moments before compression; split_optimizer() makes them from a torch
    optimizer), dense_warmup_steps, auto (dense or the codec each step, from measured
    times; not with a local optimizer or a dense warm-up), exchange
    ("allgather", "reduce-scatter", "auto"), overlap (True: decode on the state's
    thread while backward goes on; the one setting a script may change between
    steps, ``state.overlap``), max_failed_steps (after that many failed steps in a
    row the next raises StepsKeepFailing, which the skip-the-step loop does not skip;
    0: never).

    A CUDA, meta-device or float64 parameter, or a process group other than Gloo, is
    refused here (ValueError), not at the first step. With a DDP model whose
    find_unused_parameters or static_graph is set (given as model=, or through
    register()), a parameter this rank left unused in a step sends nothing of its
    residue (track_usage()).
    """

    def __init__(self, process_group=None, model=None, settings=None, **kwargs):
        s = self.settings = Settings.of(settings, **kwargs)
        local = s.local
        if local is not None and model is None:
            raise ValueError("local_optimizer needs model= (the moments are kept by name)")
        self._auto = _Auto(s.auto.options()) if s.auto is not None else None
        sch = s.schedule
        self._schedule = _Schedule(s.codec.codec, model is not None, sch.ramp_steps,
                                   sch.ramp_start, sch.ramp_stages, sch.adapt_threshold,
                                   sch.adapt_window, sch.adapt_hold, sch.adapt_bin_size,
                                   sch.dense_warmup_steps)
        self._local = None if local is None else _LocalOptimizer(
            local, self._schedule.dense_warmup_steps if local.kind == "adam" else 0)
        self._by_slices_next = {}  # auto: per bucket slot, the next exchange's choice
        self.process_group = process_group
        self._bin_sizes = s.codec.sizes(DEFAULT_BIN_SIZES)
        self.overlap = s.exchange.overlap
        layer_types = s.codec.layer_types
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
        entries = sorted(self._by_name.values(), key=lambda e: e.tensor_id)
        self._schedule.build(entries, self._bin_sizes)
        self._meter = None if self._local is None else self._local.meter
        if self._meter is not None:  # the same sampled elements on every rank
            self._meter.build([(e.name, e.numel) for e in entries], self._world())
        if ddp is not None:
            self.track_usage(ddp)

    # ----- the settings, as the state has always shown them (read-only) ---------------------

    codec = property(lambda self: self.settings.codec.codec)
    values = property(lambda self: self.settings.codec.values)
    density = property(lambda self: self.settings.codec.density)
    tau = property(lambda self: self.settings.codec.tau)
    seed = property(lambda self: self.settings.codec.seed)
    dense_types = property(lambda self: self.settings.codec.dense_types)
    bin_sizes = property(lambda self: dict(self._bin_sizes), doc="L_T per layer type")
    exchange = property(lambda self: self.settings.exchange.exchange)
    summed_values = property(lambda self: self.settings.exchange.summed_values)
    max_failed_steps = property(lambda self: self.settings.max_failed_steps)

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
                e.numel, codec=codec, bin_size=self._bin_sizes[layer_type], values=self.values,
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

    def __reduce__(self):
        raise TypeError("an AdaCompState is bound to its process group, model and thread, and "
                        "is not pickled itself: torch.save state.settings (the settings, "
                        "picklable) and state.state_dict() (this rank's residues and moments; "
                        "gathered_state_dict() for every rank's in one file)")

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
        settled on ("step N: auto: codec, ... s a step against dense's ... s"). With
        local_step_scale="measured" also local_step_scale {scale, measured}: the next
        step's scale and the steps it was measured over (step_scale.py).
        """
        with self._lock:
            out = _report(self.steps, self.buckets, self.transport_bytes, self._totals,
                          self._last_step, self._auto)
            if self._meter is not None:
                out["local_step_scale"] = {"scale": self._meter.scale,
                                           "measured": self._meter.measured}
            return out

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
            if ex.is_last and self._meter is not None:  # after the frames: step_scale.py
                self._comm_tensors["step_scale"] = self._meter.post(
                    ex.group, ex.rank, ex.world, ex._global)
                ex.sent_bytes += self._meter.message_bytes(ex.world)  # transport_bytes
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
        if self._local is not None:
            self._local.begin_step()
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
        # auto's dense step: the process group's all-reduce (dense_sum.py)
        ex.dense_sum = self._auto is not None and self._auto.mode == "dense"
        if ex.world > 1 and self.exchange != "allgather" and not ex.dense_sum:
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
            if ex.dense_sum:
                error = dense_sum.fill(self, ex, ex.work.numpy())
            else:
                frames, error = _compress(self, ex, ex.work.numpy())
        ex.error = error
        if ex.dense_sum:
            dense_sum.post(ex)
            return ex
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
            if ex.dense_sum:
                dense_sum.wait(ex)
                received = []
            else:
                received = ex.receive()
            if ex.by_slices:
                received = _second_phase(self, ex, received)
            comm_error = None
        except Exception as exc:  # noqa: BLE001 - a failed collective fails the step
            received, comm_error = None, exc
        if ex.is_last and self._meter is not None:
            try:  # the step scale's samples, sent after the last bucket's frames
                self._meter.receive()
            except Exception as exc:  # noqa: BLE001 - as a failed collective
                received, comm_error = None, comm_error or exc
        try:
            result = self._settle(ex, received, comm_error)
        except Exception as exc:  # noqa: BLE001 - a failed collective fails the step
            result = self._settle(ex, None, exc)
        if ex.is_last and self._meter is not None:
            self._meter.discard()  # (a committed step took them; any other drops them)
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
            if ex.dense_sum and received is not None and ex.error is not None:
                failed_ranks = [ex.rank]  # the others see the NaN it sent (dense_sum.py)
            if received is not None and not failed_ranks and not skipped and not ex.dense_sum:
                (second or ex).update_bound([h for _, h, _ in received])
            if step is None or skipped:
                return self._end_bucket(ex, _skipped(index, ex.step, self.step_error))
            if comm_error is not None or failed_ranks:
                return self._fail_step(ex, _exchange_failed(index, ex.step, comm_error,
                                                            ex.error, failed_ranks))
            fp16 = self.summed_values == "fp16"
            try:
                if ex.dense_sum:
                    dense_sum.average(ex, self._step)
                elif ex.by_slices:
                    _average_slices(ex, received, self._step, fp16)
                else:
                    _average(ex, received, self._step)
            except Exception as e:  # noqa: BLE001 - a frame that fails to decode
                return self._fail_step(ex, _decode_failed(index, ex.step, e))
            if ex.average_step:  # a dense warm-up step of local Adam: its step, in place
                self._local.average_step(ex)
            self._schedule.record_norms(ex.work, ex.layout)
            if self.exchange == "auto" and ex.world > 1 and not ex.dense_sum:
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
