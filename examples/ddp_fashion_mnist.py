#!/usr/bin/env python3
"""Trains a small CNN on Fashion-MNIST with DistributedDataParallel on Gloo,
with the AdaComp communication hook (default), PyTorch's own fp16 or PowerSGD
hooks, or none, and prints per-epoch test accuracy, time per step, bytes per
step and (AdaComp) compression rate.

    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_fashion_mnist.py [--procs 2] [--epochs 2]
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_fashion_mnist.py --no-hook
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_fashion_mnist.py --hook powersgd --powersgd-rank 2
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_fashion_mnist.py --epochs 8 --lr-decay-epochs 4,6
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_fashion_mnist.py --local-optimizer --eval-every 32
    PYTHONPATH=build/python torchrun --nproc_per_node 2 examples/ddp_fashion_mnist.py --max-steps 20

Without RANK/WORLD_SIZE/MASTER_ADDR in the environment it spawns --procs
processes on 127.0.0.1. With them (torchrun, scripts/cluster.sh run --each) this
process is one rank and joins by env:// rendezvous (MASTER_PORT, default 29500).
Debian's torch 1.13 torchrun fails on Python 3.11 before it starts any worker
("'NoneType' object has no attribute 'get'" in elastic/multiprocessing/api.py:
its Std IntFlag parsing of --redirects/--tee, pytorch/pytorch#92319, fixed in
torch 2.0); there, pass both as a mapping that names no local rank:
torchrun --redirects 9:0 --tee 9:0 --nproc_per_node 2 examples/ddp_fashion_mnist.py

The data are the IDX .gz files of Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist); nothing is downloaded. Each of the N
processes (CPU, one thread each) trains on its shard of every global minibatch
(N x --batch-size images); the same seed gives the same run.

The compression rate is docs/algorithm.md section 5's: 32 bits x elements / bits of the
frames actually sent (headers and checksums included, the hook's 8-byte message headers not).

Time per step is rank 0's wall time of forward + backward + optimizer step, the
mean over the steps after --warmup-steps (PowerSGD: after start_powerSGD_iter +
--warmup-steps), per epoch and over the run. Bytes per step are what one rank
hands to its collectives per step: AdaComp, the hook's own count of the bytes
given to isend (frames and 8-byte headers, to every peer: state.transport_bytes);
no hook and fp16, the gradient bytes all-reduced (4 or 2 bytes x parameters);
PowerSGD, 4 bytes x the elements it all-reduces (its own counter: uncompressed
tensors + P + Q). A ring all-reduce of B bytes sends 2(P-1)/P x B per rank
(B for 2 ranks). Where the interface is known (CLUSTER_IFACE, set by
scripts/cluster.sh run --each) the link bytes each host sent and received over
the timed steps are read from /sys/class/net and reported too.

--local-optimizer keeps SGD's momentum on each rank, before compression
(adacomp.torch.split_optimizer: the hook compresses each rank's velocity and
an SGD without momentum applies the average); --ramp-steps starts the bin
sizes at --ramp-start and ramps them to their values; --eval-every N scores
all 10,000 test images every N steps as well as at each epoch's end ("evals"
in the summary), to see how soon a run gets where.

End a DDP process as this one does: dist.barrier() and then
dist.destroy_process_group(), so that no rank tears its process group down
while a peer still talks to it.
"""

import argparse
import json
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The helpers the examples share; test_bad_calls checks bin_sizes and that
# LAYER_TYPES, the types it accepts, are the hook's.
from ddp_common import (LAYER_TYPES, bin_sizes, end_rank, env_rank, link_bytes,  # noqa: E402,F401
                        mean, median, read_idx)
from ddp_hooks import (add_ramp_and_local_args, check_ramp_and_local_args,  # noqa: E402
                       local_title, one_call_title, ramp_and_local_kwargs, ramp_title,
                       register_adacomp, register_torch_hook, time_the_hook,
                       velocity_masked)

DATA_DIR = "/usr/share/datasets/fashion-mnist"




def load_split(data_dir, prefix):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - 0.2860) / 0.3530  # Fashion-MNIST mean / std
    return x, torch.from_numpy(labels.astype(np.int64))


class Cnn(nn.Module):
    """conv5x5(16) - pool - conv5x5(32) - pool - fc(128) - fc(10): about 80k parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def evaluate(model, x, y, rank, world):
    """Test accuracy over the whole test set, each rank scoring its share."""
    model.eval()
    correct = torch.zeros(2, dtype=torch.int64)
    with torch.no_grad():
        for lo in range(rank * 1000, x.shape[0], world * 1000):
            pred = model(x[lo:lo + 1000]).argmax(1)
            correct[0] += (pred == y[lo:lo + 1000]).sum()
            correct[1] += pred.numel()
    dist.all_reduce(correct)
    model.train()
    return correct[0].item() / correct[1].item()


class Hook:
    """The communication hook in use and how its bytes per step are known."""

    def __init__(self, ddp, model, args, world, local=None, optimizer=None):
        """local: the hook's local-optimizer settings (split_optimizer's kwargs);
        optimizer: the script's, which --one-call wraps (self.optimizer, to step)."""
        self.kind = args.hook
        self.optimizer = optimizer
        self.state = None       # AdaCompState
        self.psgd = None        # PowerSGDState
        nparams = sum(p.numel() for p in model.parameters() if p.requires_grad)
        ring = 2 * (world - 1) / world
        if self.kind == "adacomp":
            kwargs = {"codec": args.codec, "overlap": not args.no_overlap,
                      **ramp_and_local_kwargs(args, local)}
            if args.bin_size:
                kwargs["bin_size"] = args.bin_size
            if args.bin_sizes:
                kwargs["bin_sizes"] = args.bin_sizes
            self.optimizer, self.state = register_adacomp(ddp, args, optimizer, kwargs)
            self.hook_time = 0.0
            time_the_hook(self, self.state)
            mode = ("overlap and no overlap on alternate steps" if args.alternate_overlap
                    else "no overlap" if args.no_overlap else "overlap")
            self.title = (f"AdaComp hook (codec {args.codec}, {mode}" + ramp_title(args)
                          + local_title(local, args)
                          + one_call_title(self.optimizer, args) + ")")
            self.bytes_how = ("bytes this rank handed to isend (frames + 8-byte headers, "
                              "to every peer; the hook's transport_bytes)")
        else:
            register_torch_hook(self, ddp, args, nparams, ring)
        self.warm = args.warmup_steps + (args.powersgd_start_iter if self.kind == "powersgd" else 0)

    def counter(self):
        """Cumulative (bytes, frame bytes) of this rank, only differences are meaningful."""
        if self.state is not None:
            st = self.state
            return st.transport_bytes, st.stats()["end_to_end"]["bytes_sent"]
        if self.psgd is not None:
            return 4 * self.psgd.total_numel_after_compression, 0
        return 0, 0

    def step_bytes(self, before, after):
        if self.state is not None or self.psgd is not None:
            return after[0] - before[0], after[1] - before[1]
        return self.fixed, 0


def worker(rank, args):
    if env_rank() is None:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(args.port)
        dist.init_process_group("gloo", rank=rank, world_size=args.procs)
    else:
        os.environ.setdefault("MASTER_PORT", "29500")
        dist.init_process_group("gloo", init_method="env://")
    torch.set_num_threads(args.threads)
    world = dist.get_world_size()
    rank = dist.get_rank()

    x_train, y_train = load_split(args.data_dir, "train")
    x_test, y_test = load_split(args.data_dir, "t10k")
    if args.train_limit:
        x_train, y_train = x_train[:args.train_limit], y_train[:args.train_limit]

    torch.manual_seed(args.seed)
    model = Cnn()
    ddp_kwargs = {}
    if args.bucket_cap_mb:
        # DDP's first bucket has its own limit (1 MB: this whole model), which torch
        # 1.13 reads from dist._DEFAULT_FIRST_BUCKET_BYTES when DDP is made.
        ddp_kwargs["bucket_cap_mb"] = args.bucket_cap_mb
        dist._DEFAULT_FIRST_BUCKET_BYTES = min(dist._DEFAULT_FIRST_BUCKET_BYTES,
                                               int(args.bucket_cap_mb * 1024 * 1024))
    ddp = nn.parallel.DistributedDataParallel(model, **ddp_kwargs)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9, nesterov=args.nesterov)
    local = None
    if args.local_optimizer:
        import adacomp.torch as adt
        # The momentum moves into the hook; opt becomes SGD without it.
        local, opt = adt.split_optimizer(opt)
    hook = Hook(ddp, model, args, world, local, opt)
    opt = hook.optimizer  # --one-call: the DistributedOptimizer (the lr decay sets its groups)
    state = hook.state
    iface = os.environ.get("CLUSTER_IFACE", "")

    global_batch = world * args.batch_size
    steps_per_epoch = x_train.shape[0] // global_batch
    gen = torch.Generator().manual_seed(args.seed)
    step = 0
    if rank == 0:
        print(f"# {world} processes x batch {args.batch_size}, {steps_per_epoch} steps/epoch, "
              f"{sum(p.numel() for p in model.parameters())} parameters, {hook.title}, SGD lr "
              f"{args.lr} momentum 0.9" + (" Nesterov" if args.nesterov else "")
              + (" (in the hook)" if local else "")
              + (f", x0.1 after epochs {','.join(map(str, args.lr_decay_epochs))}"
                 if args.lr_decay_epochs else ""),
              flush=True)
        print(f"# time per step: mean over steps >= {hook.warm}; bytes per step: {hook.bytes_how}",
              flush=True)
    summary = {}
    epochs = []
    all_times, all_bytes, all_frames, all_hook = [], [], [], []
    by_mode = {True: [], False: []}  # --alternate-overlap: step times with / without overlap
    hook_by_mode = {True: [], False: []}
    link_total = torch.zeros(3, dtype=torch.int64)  # tx, rx, timed steps (this rank)
    skipped = 0
    evals = []  # {"step", "test_acc"}: every --eval-every steps, and each epoch end
    start = time.time()
    for epoch in range(1, args.epochs + 1):
        if args.max_steps and step >= args.max_steps:
            break
        # x0.1 after each --lr-decay-epochs epoch (as adacomp train's schedule).
        lr = args.lr * 0.1 ** sum(1 for e in args.lr_decay_epochs if epoch > e)
        for group in opt.param_groups:
            group["lr"] = lr
        perm = torch.randperm(x_train.shape[0], generator=gen)  # same on every rank
        if state:
            state.reset_stats()
        loss_sum = torch.zeros(2, dtype=torch.float64)
        times, nbytes, nframes = [], [], []
        link0 = None
        t0 = time.time()
        for i in range(steps_per_epoch):
            if args.max_steps and step >= args.max_steps:
                break
            timed = step >= hook.warm
            if timed and link0 is None:
                link0 = link_bytes(iface)
            idx = perm[i * global_batch + rank * args.batch_size:
                       i * global_batch + (rank + 1) * args.batch_size]
            xb = x_train[idx]
            if step == args.nan_at and rank == world - 1:
                xb = xb.clone()
                xb[0, 0, 0, 0] = float("nan")  # a bad batch on one rank only
            if args.alternate_overlap:
                # The same step on every rank: a paired comparison under the same load.
                state.overlap = step % 2 == 0
            c0 = hook.counter()
            h0 = getattr(hook, "hook_time", 0.0)
            ts = time.perf_counter()
            loss = nn.functional.cross_entropy(ddp(xb), y_train[idx])
            opt.zero_grad()
            try:
                loss.backward()
            except RuntimeError:
                if state is None or state.step_error is None:
                    raise  # not the hook's: nothing was rolled back
                # Every rank gets here for the same step; the hook state is as it was
                # before the step. Skip the update and go on with the next batch.
                if rank == 0:
                    print(f"step {step} skipped: {state.step_error}", flush=True)
                opt.zero_grad()
                skipped += 1
                step += 1
                continue
            opt.step()
            if timed:
                times.append(time.perf_counter() - ts)
                if state:
                    all_hook.append(hook.hook_time - h0)
                if args.alternate_overlap:
                    by_mode[state.overlap].append(times[-1])
                    hook_by_mode[state.overlap].append(all_hook[-1])
                b, f = hook.step_bytes(c0, hook.counter())
                nbytes.append(b)
                nframes.append(f)
            loss_sum[0] += loss.item()
            loss_sum[1] += 1
            step += 1
            if args.eval_every and step % args.eval_every == 0 and i + 1 < steps_per_epoch:
                evals.append({"step": step, "test_acc": evaluate(model, x_test, y_test, rank,
                                                                  world)})
        link1 = link_bytes(iface)
        link = torch.zeros(3, dtype=torch.int64)
        if link0 is not None and link1 is not None:
            link[0], link[1], link[2] = link1[0] - link0[0], link1[1] - link0[1], len(times)
        dist.all_reduce(link)  # summed over hosts
        link_total += link
        dist.all_reduce(loss_sum)
        acc = evaluate(model, x_test, y_test, rank, world)
        evals.append({"step": step, "test_acc": acc, "epoch": epoch})
        line = (f"epoch {epoch}  steps {step}  train_loss {loss_sum[0].item() / loss_sum[1].item():.4f}"
                f"  test_acc {acc:.4f}  time {time.time() - t0:.1f}s")
        ep = {"epoch": epoch, "steps": step, "test_acc": acc, "lr": lr,
              "train_loss": loss_sum[0].item() / loss_sum[1].item(), "timed_steps": len(times),
              "step_time_mean_s": mean(times), "step_time_median_s": median(times),
              "bytes_per_step": mean(nbytes)}
        summary = {"test_acc": acc, "steps": step}
        if times:
            line += (f"  step {1e3 * mean(times):.1f} ms (median {1e3 * median(times):.1f}, "
                     f"{len(times)} timed)  bytes/step {mean(nbytes):,.0f}")
        if link[2] > 0:
            # Every host's counters over the same steps: per host and step.
            tx, rx = link[0].item() / link[2].item(), link[1].item() / link[2].item()
            ep["link_tx_per_host_step"], ep["link_rx_per_host_step"] = tx, rx
            line += f"  link tx/host/step {tx:,.0f} rx {rx:,.0f}"
        if state:
            st = state.stats()
            e2e = st["end_to_end"]
            per = "  ".join(f"{t} {v['compression_rate']:.1f}x" for t, v in st["per_type"].items()
                            if v["elements"])
            line += (f"  compression {e2e['compression_rate']:.1f}x (all ranks "
                     f"{e2e['gathered_compression_rate']:.1f}x; {per})"
                     f"  sent {e2e['bytes_sent'] / 1e6:.2f} MB of {e2e['bytes_dense'] / 1e6:.1f} MB"
                     f"  selected/bin {e2e['selected_per_bin']:.2f}")
            summary["compression_rate"] = e2e["compression_rate"]
            ep["compression_rate"] = e2e["compression_rate"]
            ep["frame_bytes_per_step"] = mean(nframes)
        epochs.append(ep)
        all_times += times
        all_bytes += nbytes
        all_frames += nframes
        if rank == 0:
            print(line, flush=True)
    if rank == 0:
        extra = f"  compression {summary['compression_rate']:.1f}x" if state else ""
        if all_times:
            extra += (f"  step {1e3 * mean(all_times):.1f} ms (median "
                      f"{1e3 * median(all_times):.1f}, {len(all_times)} timed)"
                      f"  bytes/step {mean(all_bytes):,.0f}")
        if state:
            st = state.stats()
            buckets_per_step = st["buckets"] / st["steps"] if st["steps"] else float("nan")
            extra += f"  buckets/step {buckets_per_step:.2f}  in hook {1e3 * mean(all_hook):.2f} ms/step"
        wall = time.time() - start
        print(f"final: test_acc {summary.get('test_acc', 0):.4f}  steps {summary.get('steps', 0)}"
              f"{extra}  skipped {skipped}  wall {wall:.1f}s", flush=True)
        if args.alternate_overlap and by_mode[True] and by_mode[False]:
            on, off = by_mode[True], by_mode[False]
            print(f"overlap (alternate steps): with {1e3 * mean(on):.1f} ms (median "
                  f"{1e3 * median(on):.1f}, {len(on)} steps)  without {1e3 * mean(off):.1f} ms "
                  f"(median {1e3 * median(off):.1f}, {len(off)} steps); in the hook "
                  f"{1e3 * mean(hook_by_mode[True]):.2f} and {1e3 * mean(hook_by_mode[False]):.2f} "
                  f"ms/step", flush=True)
        if args.summary_json:
            out = {
                "hook": args.hook, "title": hook.title, "world": world,
                "parameters": sum(p.numel() for p in model.parameters()),
                "batch_size": args.batch_size, "train_images": int(x_train.shape[0]),
                "test_images": int(x_test.shape[0]), "steps": summary.get("steps", 0),
                "skipped": skipped, "warmup_steps": hook.warm, "timed_steps": len(all_times),
                "test_acc": summary.get("test_acc"), "seed": args.seed,
                "lr": args.lr, "lr_decay_epochs": args.lr_decay_epochs,
                "step_time_mean_s": mean(all_times), "step_time_median_s": median(all_times),
                "bytes_per_step": mean(all_bytes), "bytes_how": hook.bytes_how,
                "wall_s": wall, "epochs": epochs, "evals": evals,
                "local_optimizer": bool(local), "one_call": args.one_call,
                "local_mask": velocity_masked(state),
                "ramp_steps": args.ramp_steps,
                "overlap": ("alternate" if args.alternate_overlap else not args.no_overlap)
                if args.hook == "adacomp" else None,
                "powersgd_rank": args.powersgd_rank if args.hook == "powersgd" else None,
            }
            if state:
                out["frame_bytes_per_step"] = mean(all_frames)
                out["compression_rate"] = summary.get("compression_rate")
                out["buckets_per_step"] = buckets_per_step
                out["hook_time_per_step_s"] = mean(all_hook)
            if args.alternate_overlap:
                for key, ts in (("overlap", by_mode[True]), ("no_overlap", by_mode[False])):
                    out[f"step_time_{key}_mean_s"] = mean(ts)
                    out[f"step_time_{key}_median_s"] = median(ts)
                    out[f"timed_steps_{key}"] = len(ts)
                    out[f"hook_time_{key}_per_step_s"] = mean(hook_by_mode[key == "overlap"])
            if link_total[2] > 0:
                out["link_tx_per_host_step"] = link_total[0].item() / link_total[2].item()
                out["link_rx_per_host_step"] = link_total[1].item() / link_total[2].item()
            with open(args.summary_json, "w") as f:
                json.dump(out, f, indent=1)
        if args.save_model:
            torch.save(model.state_dict(), args.save_model)
    # Both ranks reach here before either tears its group down (python/README.md).
    dist.barrier()
    dist.destroy_process_group()
    end_rank()


def epoch_list(text):
    """"4,6" -> [4, 6]: positive, increasing epoch numbers."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of epochs: {text!r}")
    if any(e < 1 for e in out) or out != sorted(set(out)):
        raise argparse.ArgumentTypeError(f"epochs must be positive and increasing: {text!r}")
    return out






def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=2,
                    help="number of DDP processes to spawn (default 2; ignored under a launcher)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    ap.add_argument("--train-limit", type=int, default=0, help="use only the first N training images")
    ap.add_argument("--batch-size", type=int, default=32, help="per process")
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--nesterov", action="store_true", help="SGD with Nesterov momentum")
    ap.add_argument("--lr-decay-epochs", type=epoch_list, default=[],
                    help="comma-separated epochs after which the lr is multiplied by 0.1")
    ap.add_argument("--hook", choices=("adacomp", "none", "fp16", "powersgd"), default="adacomp",
                    help="communication hook (default adacomp; none: plain DDP all-reduce)")
    ap.add_argument("--no-hook", dest="hook", action="store_const", const="none",
                    help="the same as --hook none")
    ap.add_argument("--codec", default="adacomp", help="adacomp hook: the codec")
    ap.add_argument("--bin-size", type=int, default=0,
                    help="adacomp hook: one bin size for every layer (default: conv 50, fc 500, other 500)")
    ap.add_argument("--bin-sizes", type=bin_sizes, default={},
                    help="adacomp hook: bin sizes per layer type, e.g. conv=25,fc=250 (types left "
                         "out keep the default)")
    ap.add_argument("--no-overlap", action="store_true",
                    help="adacomp hook: exchange and decode each bucket inside the hook")
    add_ramp_and_local_args(ap)
    ap.add_argument("--eval-every", type=int, default=0,
                    help="also score the whole test set every N steps (0: at epoch ends only)")
    ap.add_argument("--alternate-overlap", action="store_true",
                    help="adacomp hook: overlap on even steps, not on odd ones, and report both "
                         "step times (a paired comparison under the same machine load)")
    ap.add_argument("--bucket-cap-mb", type=float, default=0,
                    help="DDP's bucket_cap_mb, also the first bucket's limit (default: DDP's 25 MB "
                         "and 1 MB: one bucket for this model; 0.01: three)")
    ap.add_argument("--powersgd-rank", type=int, default=1,
                    help="powersgd hook: matrix_approximation_rank (default 1)")
    ap.add_argument("--powersgd-start-iter", type=int, default=10,
                    help="powersgd hook: start_powerSGD_iter, plain all-reduce before it (default 10)")
    ap.add_argument("--warmup-steps", type=int, default=5,
                    help="steps left out of the time per step (PowerSGD: after start_powerSGD_iter)")
    ap.add_argument("--summary-json", default="", help="rank 0 writes the run's figures here")
    ap.add_argument("--save-model", default="", help="rank 0 writes the final weights here "
                    "(the model's state_dict, torch.save)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nan-at", type=int, default=-1,
                    help="put a NaN in the last rank's batch at this step (shows the skip)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--data-dir", default=DATA_DIR)
    ap.add_argument("--port", type=int, default=0, help="rendezvous port when spawning (0: pick a free one)")
    args = ap.parse_args()
    if (args.no_overlap or args.alternate_overlap) and args.hook != "adacomp":
        ap.error("--no-overlap and --alternate-overlap apply to --hook adacomp only")
    check_ramp_and_local_args(ap, args, adam=False)
    if args.eval_every < 0:
        ap.error("--eval-every must not be negative")
    if args.no_overlap and args.alternate_overlap:
        ap.error("--no-overlap or --alternate-overlap, not both")
    if args.hook == "powersgd" and args.powersgd_start_iter < 2:
        ap.error("--powersgd-start-iter must be at least 2 (torch's PowerSGD with error feedback)")
    if not os.path.exists(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")):
        sys.exit(f"no Fashion-MNIST in {args.data_dir} (apt-get install dataset-fashion-mnist)")
    if env_rank() is not None:
        # One rank of a launched job: join by env:// rendezvous in this process.
        if os.environ["MASTER_ADDR"] in ("127.0.0.1", "localhost", "::1"):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        worker(env_rank()[0], args)
        return
    if args.port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            args.port = s.getsockname()[1]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(args,), nprocs=args.procs, join=True)


if __name__ == "__main__":
    main()
