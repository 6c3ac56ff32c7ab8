"""What the DDP example scripts share: data readers, the launcher (spawned ranks on
127.0.0.1 or one rank of a launched job by env:// rendezvous), the communication
hooks and their byte counters, and a training loop with timing, evaluations,
checkpoints, a summary JSON and clear failure when a peer rank is gone.

A script imports this module from its own folder (examples/); it is not a public
API of the adacomp package.
"""

import datetime
import faulthandler
import gzip
import hashlib
import json
import math
import os
import signal
import socket
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ddp_hooks import (HOOKS, LAYER_TYPES, CommHook, add_hook_args,  # noqa: E402,F401
                       bin_sizes, ddp_wrap, layer_type_list)  # re-exported for the scripts
from ddp_options import add_common_args, check_common_args  # noqa: E402,F401 (the same)

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


# ----- data ---------------------------------------------------------------------------------

def read_idx(path):
    """Reads an IDX file (gzip or raw) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    count = int(np.prod(dims))
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != count:
        raise ValueError(f"{path}: header says {count} values, file has {body.size}")
    return body.reshape(dims)


def fashion_mnist_raw(data_dir, prefix):
    """(images uint8 [n, 28, 28], labels int64 [n]) of one split ("train" or "t10k")."""
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


FASHION_MNIST_MEAN, FASHION_MNIST_STD = 0.2860, 0.3530


def normalize_images(images):
    """uint8 images -> float32 with Fashion-MNIST's mean and standard deviation removed."""
    return (images.float() / 255.0 - FASHION_MNIST_MEAN) / FASHION_MNIST_STD


# ----- small helpers ------------------------------------------------------------------------

def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def median(xs):
    if not xs:
        return float("nan")
    ys = sorted(xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2


def env_rank():
    """(rank, world size) from a launcher's environment (torchrun, cluster.sh run --each), or None."""
    if all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR")):
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return None


def link_bytes(iface):
    """(tx, rx) bytes of a network interface in this process's namespace, or None."""
    if not iface:
        return None
    try:
        base = f"/sys/class/net/{iface}/statistics"
        with open(f"{base}/tx_bytes") as tx, open(f"{base}/rx_bytes") as rx:
            return int(tx.read()), int(rx.read())
    except OSError:
        return None


def sync_buffers(model):
    """Rank 0's buffers (BatchNorm statistics) on every rank. DDP broadcasts them at the
    start of each forward, so after a training forward each rank has its own; before an
    evaluation, a checkpoint or a digest, make them what the next forward would."""
    for b in model.buffers():
        dist.broadcast(b, 0)


def state_digest(state_dict):
    """SHA-256 of the names and bytes of every tensor of a model's state_dict, in order."""
    h = hashlib.sha256()
    for name, t in state_dict.items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def weights_digest(model):
    """state_digest of the model's parameters and buffers."""
    return state_digest(model.state_dict())


class WarmupCosine:
    """lr factor of step s: linear warm-up over `warmup` steps to 1, then a cosine to
    `floor` at `total` steps. A callable object, so LambdaLR's state_dict keeps it."""

    def __init__(self, warmup, total, floor=0.0):
        self.warmup = int(warmup)
        self.total = int(total)
        self.floor = float(floor)

    def __call__(self, step):
        if step < self.warmup:
            return (step + 1) / self.warmup
        span = max(1, self.total - self.warmup)
        progress = min(1.0, (step - self.warmup) / span)
        return self.floor + (1 - self.floor) * 0.5 * (1 + math.cos(math.pi * progress))


# ----- launching ----------------------------------------------------------------------------

def launch(task, args):
    """Runs task's training on every rank: spawned here, or this process as one rank of a
    launched job (RANK, WORLD_SIZE, MASTER_ADDR in the environment; MASTER_PORT 29500)."""
    if env_rank() is not None:
        if os.environ["MASTER_ADDR"] in ("127.0.0.1", "localhost", "::1"):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        os.environ.setdefault("MASTER_PORT", "29500")
        _worker(env_rank()[0], task, args, True)
        return
    if args.port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            args.port = s.getsockname()[1]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(_worker, args=(task, args, False), nprocs=args.procs, join=True)


def _worker(rank, task, args, from_env):
    # A rank that aborts prints every thread's Python stack (stderr).
    faulthandler.enable(all_threads=True)
    timeout = datetime.timedelta(seconds=args.timeout_s)
    if from_env:
        dist.init_process_group("gloo", init_method="env://", timeout=timeout)
    else:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(args.port)
        dist.init_process_group("gloo", rank=rank, world_size=args.procs, timeout=timeout)
    torch.set_num_threads(args.threads)
    run = Run(task, args)
    try:
        from adacomp.torch import Heartbeat  # not needed for the baselines' own runs
    except ImportError:
        Heartbeat = None
    if Heartbeat is not None:
        # A second client of the rendezvous store, for the heartbeat alone: after a
        # failed collective it names the rank that stopped.
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                              dist.get_world_size(), False, timeout)
        # One set of counters per attempt: torchrun's restarts reuse its store.
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        run.heartbeat = Heartbeat(store, dist.get_rank(), dist.get_world_size(),
                                  prefix=f"adacomp/heartbeat/{attempt}/").start()
    try:
        run.train()
    except PeerFailure as e:
        # A peer is gone or frozen: no collective can complete any more, and tearing the
        # process group down could wait on it too. Say what happened and leave now.
        print(f"rank {dist.get_rank()}: {e}", file=sys.stderr, flush=True)
        if run.heartbeat is not None:
            run.heartbeat.leave()
        if dist.get_rank() == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
            # This process hosts the store: give the other ranks time to read the
            # heartbeats in it before it goes.
            time.sleep(3 * HEARTBEAT_READ_S)
        os._exit(2)
    if run.heartbeat is not None:
        run.heartbeat.close()
    # Every rank gets here before any tears its group down (python/README.md).
    dist.barrier()
    dist.destroy_process_group()
    end_rank()


def end_rank():
    """Ends this rank's process, its work done and its group torn down, without
    finalizing the interpreter (python/README.md, "Ending a script"): a Gloo worker
    thread of torch 1.13 may still hold the last reference to a tensor of a finished
    collective, and if it drops it while the interpreter shuts down it must take the
    GIL, which ends it inside a C++ destructor and aborts the process (SIGABRT,
    "terminate called without an active exception") after all of its work. The
    output is flushed first; every file the run writes is closed by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _first_line(exc):
    """The gist of an error from Gloo or the hook: its first line, without tracebacks."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:500] if text else ''}"


class PeerFailure(RuntimeError):
    """A collective failed: another rank died, froze or lost its connection."""


# Seconds between two readings of the heartbeats after a failure (Heartbeat's default:
# 2.5 beats of 1 s).
HEARTBEAT_READ_S = 2.5


# ----- the training loop --------------------------------------------------------------------

class Run:
    """One rank's training run of a task.

    The task (a model script's object) provides: name, total_steps(args),
    build_model(args), make_optimizer(model, args, total) -> (optimizer, lr factor of
    the step, for LambdaLR),
    load_data(args), batch(step, rank, world, args) -> (inputs, targets) (a function of
    the step, so that the data position of a checkpoint is its step), loss(output,
    targets), evaluate(model, args, rank, world) -> {"loss": ..., ...} (summed over
    ranks), clip(model, args), config(args) (what a checkpoint must match).
    """

    def __init__(self, task, args):
        self.task = task
        self.args = args

    heartbeat = None  # set by _worker

    def log(self, text):
        if self.rank == 0:
            print(text, flush=True)

    def _peer_failure(self, step, what, error):
        """The PeerFailure for a failed collective: which rank stopped, by the heartbeats."""
        who = (self.heartbeat.describe(HEARTBEAT_READ_S) if self.heartbeat is not None
               else "another rank is gone, frozen or unreachable")
        return PeerFailure(f"step {step}: {what} failed: {who} (process-group timeout "
                           f"{self.args.timeout_s:g} s): {_first_line(error)}")

    def train(self):
        task, args = self.task, self.args
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        total = task.total_steps(args)
        if args.hook == "powersgd" and not args.powersgd_start_iter:
            args.powersgd_start_iter = max(2, total // 10)  # torch's advice: about 10 %
        stop = min(total, args.max_steps) if args.max_steps else total
        task.load_data(args)
        torch.manual_seed(args.seed)
        model = task.build_model(args)
        nparams = sum(p.numel() for p in model.parameters())
        ckpt = self._load_checkpoint() if args.resume else None
        if ckpt is not None:
            model.load_state_dict(ckpt["model"])
        ddp, cap = ddp_wrap(model, args)
        opt, lr_lambda = task.make_optimizer(model, args, total)
        local = None
        if args.local_optimizer:
            import adacomp.torch as adt
            local, opt = adt.split_optimizer(opt)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
        hook = CommHook(ddp, model, args, self.world, local, opt)
        opt = hook.optimizer  # --one-call: the DistributedOptimizer (sched still acts on it)
        history = {"evals": [], "train": [], "wall_before_s": 0.0}
        step = 0
        if ckpt is not None:
            opt.load_state_dict(ckpt["optimizer"])
            sched.load_state_dict(ckpt["scheduler"])
            hook.load_state_dict(ckpt["hook"])
            torch.set_rng_state(ckpt["rng"]["torch"])
            history = ckpt["history"]
            step = ckpt["step"]
        self.log(f"# {task.name}: {nparams:,} parameters, {self.world} processes x batch "
                 f"{args.batch_size}, {total} steps (running to {stop}), {hook.title}"
                 + (f", bucket_cap_mb {cap:g}" if cap else "")
                 + (f"; resumed at step {step}" if ckpt is not None else ""))
        self.log(f"# {task.describe(args)}")
        self.log(f"# time per step: mean over steps >= {hook.untimed}; bytes per step: "
                 f"{hook.bytes_how}")
        start = time.time()

        def wall():
            return history["wall_before_s"] + time.time() - start

        def evaluate(at):
            t = time.time()
            sync_buffers(model)
            ev = task.evaluate(model, args, self.rank, self.world)
            ev.update(step=at, wall_s=wall(), eval_s=time.time() - t)
            history["evals"].append(ev)
            self.log(f"eval step {at}  " + "  ".join(
                f"{k} {v:.4f}" for k, v in ev.items() if k not in ("step", "wall_s", "eval_s"))
                + f"  ({ev['eval_s']:.1f} s)")

        times = {"step": [], "forward": [], "backward": [], "optimizer": [], "hook": []}
        cpu = {"backward": [], "hook": []}  # CPU seconds per timed step (thread_time)
        nbytes = []
        skipped = 0
        window = torch.zeros(2, dtype=torch.float64)  # loss sum, steps since the last log
        iface = os.environ.get("CLUSTER_IFACE", "")
        link0 = None
        timed_steps = 0
        try:
            if step == 0:
                evaluate(0)
            while step < stop:
                if step == args.kill_at_step and self.rank == args.kill_rank:
                    print(f"rank {self.rank}: killing myself at step {step} (--kill-rank)",
                          file=sys.stderr, flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
                if step == args.freeze_at_step and self.rank == args.freeze_rank:
                    print(f"rank {self.rank}: freezing at step {step} (--freeze-rank), pid "
                          f"{os.getpid()}", file=sys.stderr, flush=True)
                    os.kill(os.getpid(), signal.SIGSTOP)
                timed = step >= hook.untimed
                if timed and link0 is None:
                    link0 = link_bytes(iface)
                x, y = task.batch(step, self.rank, self.world, args)
                c0, h0 = hook.counter(), hook.hook_time
                k0 = hook.cpu_seconds()
                t0 = time.perf_counter()
                loss = task.loss(ddp(x), y)
                t1 = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                b0 = time.thread_time()
                try:
                    loss.backward()
                except RuntimeError as e:
                    err = hook.step_failure()
                    if err is None:
                        raise self._peer_failure(step, "the gradient exchange", e) from e
                    # Bad data on some rank: every rank rolled the hook back for this step.
                    self.log(f"step {step} skipped: {err}")
                    opt.zero_grad(set_to_none=True)
                    skipped += 1
                    step += 1
                    sched.step()
                    continue
                t2 = time.perf_counter()
                b1 = time.thread_time()
                if local is None:  # a local optimizer's averaged step is not clipped
                    task.clip(model, args)
                lr = opt.param_groups[0]["lr"]
                opt.step()
                sched.step()
                t3 = time.perf_counter()
                if timed:
                    timed_steps += 1
                    for k, v in (("step", t3 - t0), ("forward", t1 - t0), ("backward", t2 - t1),
                                 ("optimizer", t3 - t2), ("hook", hook.hook_time - h0)):
                        times[k].append(v)
                    nbytes.append(hook.step_bytes(c0, hook.counter()))
                    cpu["backward"].append(b1 - b0)
                    cpu["hook"].append(hook.cpu_seconds() - k0)
                window[0] += loss.item()
                window[1] += 1
                step += 1
                if step % args.log_every == 0 or step == stop:
                    dist.all_reduce(window)
                    tl = window[0].item() / window[1].item()
                    history["train"].append({"step": step, "loss": tl, "lr": lr,
                                             "wall_s": wall()})
                    scale = (hook.state.stats().get("local_step_scale")
                             if hook.state is not None else None)
                    if scale is not None:  # local_step_scale="measured"
                        history["train"][-1]["step_scale"] = scale["scale"]
                    line = (f"step {step}  loss {tl:.4f}  lr {lr:.3g}  "
                            f"step {t3 - t0:.3f} s (fwd {t1 - t0:.3f} bwd {t2 - t1:.3f} "
                            f"opt {t3 - t2:.3f})")
                    if nbytes:
                        line += f"  bytes/step {nbytes[-1]:,}"
                    if hook.state is not None:
                        line += f"  compression {hook.state.compression_rate():.1f}x"
                    self.log(line)
                    window.zero_()
                if args.eval_every and step % args.eval_every == 0 and step < stop:
                    evaluate(step)
                if args.checkpoint_dir and (step == stop or (
                        args.checkpoint_every and step % args.checkpoint_every == 0)):
                    sync_buffers(model)
                    self._save_checkpoint(step, model, opt, sched, hook,
                                          dict(history, wall_before_s=wall()))
            if not history["evals"] or history["evals"][-1]["step"] != step:
                evaluate(step)
            link1 = link_bytes(iface)
            link = torch.zeros(3, dtype=torch.int64)
            if link0 is not None and link1 is not None:
                link[0], link[1], link[2] = link1[0] - link0[0], link1[1] - link0[1], timed_steps
            dist.all_reduce(link)
            sync_buffers(model)
            digests = [None] * self.world
            dist.all_gather_object(digests, weights_digest(model))
        except RuntimeError as e:
            if isinstance(e, PeerFailure):
                raise
            raise self._peer_failure(step, "a collective", e) from e
        if self.rank != 0:
            return
        rates = hook.rates()
        last = history["evals"][-1]
        line = (f"final: step {step}  " + "  ".join(
            f"{k} {v:.4f}" for k, v in last.items() if k not in ("step", "wall_s", "eval_s")))
        if times["step"]:
            line += (f"  step {mean(times['step']):.3f} s (median {median(times['step']):.3f}, "
                     f"{len(times['step'])} timed)  bytes/step {mean(nbytes):,.0f}")
        if rates:
            per = "  ".join(f"{t} {v['compression_rate']:.1f}x" for t, v in rates["per_type"].items())
            line += f"  compression {rates['end_to_end']:.1f}x ({per})"
        line += f"  skipped {skipped}  wall {wall():.1f} s"
        self.log(line)
        if hook.kind == "adacomp" and "auto" in hook.state.stats():
            a = hook.state.stats()["auto"]
            self.log(f"auto: {a['dense_steps']} steps dense, {a['codec_steps']} by the codec; "
                     + ("; ".join(a["choices"]) or "no choice settled"))
        if not args.summary_json:
            return
        out = {
            "model": task.name, "config": task.config(args), "parameters": nparams,
            "hook": args.hook, "title": hook.title, "world": self.world,
            "batch_size": args.batch_size, "steps_total": total, "steps": step,
            "resumed_from": ckpt["step"] if ckpt is not None else None,
            "seed": args.seed, "skipped": skipped, "bucket_cap_mb": cap,
            "evals": history["evals"], "train": history["train"],
            "untimed_steps": hook.untimed, "timed_steps": len(times["step"]),
            "step_time_mean_s": mean(times["step"]), "step_time_median_s": median(times["step"]),
            "step_times_s": times["step"],
            "step_time_split_mean_s": {k: mean(v) for k, v in times.items() if k != "step"},
            # CPU seconds per step: backward on the main thread (the AdaComp hook's
            # compress and post included, it runs there), and the hook's own work on
            # every thread (None for the other hooks).
            "cpu_per_step_s": {"backward": mean(cpu["backward"]),
                               "hook": (mean(cpu["hook"]) if hook.kind == "adacomp"
                                        else None)},
            "bytes_per_step": mean(nbytes), "bytes_how": hook.bytes_how,
            "compression": rates, "wall_s": wall(), "weights_digests": digests,
            "powersgd": ({"rank": args.powersgd_rank,
                          "start_powerSGD_iter": args.powersgd_start_iter}
                         if args.hook == "powersgd" else None),
        }
        if hook.kind != "adacomp":
            del out["step_time_split_mean_s"]["hook"]
        elif "auto" in hook.state.stats():
            out["auto"] = hook.state.stats()["auto"]
        if link[2] > 0:
            out["link_tx_per_host_step"] = link[0].item() / link[2].item()
            out["link_rx_per_host_step"] = link[1].item() / link[2].item()
        with open(args.summary_json, "w") as f:
            json.dump(out, f, indent=1)

    # ----- checkpoints ----------------------------------------------------------------------

    def _path(self, step, rank):
        return os.path.join(self.args.checkpoint_dir, f"step-{step:08d}.rank{rank}.pt")

    def _save_checkpoint(self, step, model, opt, sched, hook, history):
        """Every rank writes its own file (the AdaComp residues differ per rank); after all
        have, rank 0 names the step in `latest`."""
        args = self.args
        os.makedirs(args.checkpoint_dir, exist_ok=True)
        ckpt = {"format": "adacomp-example-checkpoint/1", "step": step, "world": self.world,
                "rank": self.rank, "config": self._config(),
                "data": {"seed": args.seed, "next_step": step},
                "model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "hook": hook.state_dict(),
                "rng": {"torch": torch.get_rng_state()}, "history": history}
        path = self._path(step, self.rank)
        torch.save(ckpt, path + ".tmp")
        os.replace(path + ".tmp", path)
        dist.barrier()
        if self.rank == 0:
            with open(os.path.join(args.checkpoint_dir, "latest.tmp"), "w") as f:
                f.write(f"{step}\n")
            os.replace(os.path.join(args.checkpoint_dir, "latest.tmp"),
                       os.path.join(args.checkpoint_dir, "latest"))
        self.log(f"checkpoint step {step}: {os.path.dirname(path)}/step-{step:08d}.rank*.pt")

    def _config(self):
        """What a resumed run must share with the checkpoint's."""
        a = self.args
        return {"task": self.task.config(a), "hook": a.hook, "codec": a.codec,
                "bin_size": a.bin_size, "bin_sizes": a.bin_sizes, "values": a.values,
                "dense_types": list(a.dense_types), "powersgd_rank": a.powersgd_rank,
                "powersgd_start_iter": a.powersgd_start_iter, "seed": a.seed,
                "batch_size": a.batch_size, "steps_total": self.task.total_steps(a),
                "local_optimizer": a.local_optimizer,
                **({"dense_warmup_steps": a.dense_warmup_steps} if a.dense_warmup_steps else {}),
                **({"local_clip": a.local_clip} if a.local_clip else {}),
                **({"one_call": True} if getattr(a, "one_call", False) else {}),
                **({"no_mask": True} if getattr(a, "no_mask", False) else {}),
                **({"mask": True} if getattr(a, "mask", False) else {}),
                **({"adam_step_scale": a.adam_step_scale}
                   if getattr(a, "adam_step_scale", None) is not None else {}),
                **({"auto": True} if getattr(a, "auto", False) else {})}

    def _load_checkpoint(self):
        args = self.args
        # Rank 0 decides the step, so every rank loads the same one.
        choice = [None]
        if self.rank == 0:
            if args.resume == "latest":
                try:
                    with open(os.path.join(args.checkpoint_dir, "latest")) as f:
                        choice[0] = int(f.read())
                except (OSError, ValueError) as e:
                    choice[0] = f"no usable {args.checkpoint_dir}/latest ({e})"
            else:
                choice[0] = int(args.resume)
        dist.broadcast_object_list(choice, src=0)
        if isinstance(choice[0], str):
            raise SystemExit(f"rank {self.rank}: cannot resume: {choice[0]}")
        path = self._path(choice[0], self.rank)
        if not os.path.exists(path):
            raise SystemExit(f"rank {self.rank}: cannot resume: no {path}")
        ckpt = torch.load(path)
        problems = []
        if ckpt.get("format") != "adacomp-example-checkpoint/1":
            problems.append(f"not a checkpoint of these examples ({ckpt.get('format')!r})")
        elif ckpt["world"] != self.world or ckpt["rank"] != self.rank:
            problems.append(f"written by rank {ckpt['rank']} of {ckpt['world']}, this is rank "
                            f"{self.rank} of {self.world}")
        else:
            mine = self._config()
            for k, v in ckpt["config"].items():
                if mine.get(k) != v:
                    problems.append(f"{k}: checkpoint {v!r}, this run {mine.get(k)!r}")
        if problems:
            raise SystemExit(f"rank {self.rank}: cannot resume from {path}: "
                             + "; ".join(problems))
        return ckpt
