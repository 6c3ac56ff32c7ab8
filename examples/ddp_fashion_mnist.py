#!/usr/bin/env python3
"""Trains a small CNN on Fashion-MNIST with DistributedDataParallel on Gloo,
with the AdaComp communication hook (default) or without it (--no-hook), and
prints per-epoch test accuracy and compression rate.

    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_fashion_mnist.py [--procs 2] [--epochs 2]
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_fashion_mnist.py --no-hook

The data are the IDX .gz files of Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist); nothing is downloaded. Each of the N
processes (CPU, one thread each) trains on its shard of every global minibatch
(N x --batch-size images); the same seed gives the same run.

The compression rate is docs/algorithm.md section 5's: 32 bits x elements / bits of the
frames actually sent (headers and checksums included, Gloo's padding not).
"""

import argparse
import gzip
import os
import socket
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

DATA_DIR = "/usr/share/datasets/fashion-mnist"


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


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.procs)
    world = args.procs

    x_train, y_train = load_split(args.data_dir, "train")
    x_test, y_test = load_split(args.data_dir, "t10k")
    if args.train_limit:
        x_train, y_train = x_train[:args.train_limit], y_train[:args.train_limit]

    torch.manual_seed(args.seed)
    model = Cnn()
    ddp = nn.parallel.DistributedDataParallel(model)
    state = None
    if not args.no_hook:
        import adacomp.torch as adt
        kwargs = {"codec": args.codec}
        if args.bin_size:
            kwargs["bin_size"] = args.bin_size
        state = adt.register(ddp, **kwargs)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)

    global_batch = world * args.batch_size
    steps_per_epoch = x_train.shape[0] // global_batch
    gen = torch.Generator().manual_seed(args.seed)
    step = 0
    if rank == 0:
        print(f"# {world} processes x batch {args.batch_size}, {steps_per_epoch} steps/epoch, "
              f"{sum(p.numel() for p in model.parameters())} parameters, "
              f"{'AdaComp hook (codec ' + args.codec + ')' if state else 'no hook (dense all-reduce)'}",
              flush=True)
    summary = {}
    skipped = 0
    start = time.time()
    for epoch in range(1, args.epochs + 1):
        if args.max_steps and step >= args.max_steps:
            break
        perm = torch.randperm(x_train.shape[0], generator=gen)  # same on every rank
        if state:
            state.reset_stats()
        loss_sum = torch.zeros(2, dtype=torch.float64)
        t0 = time.time()
        for i in range(steps_per_epoch):
            if args.max_steps and step >= args.max_steps:
                break
            idx = perm[i * global_batch + rank * args.batch_size:
                       i * global_batch + (rank + 1) * args.batch_size]
            xb = x_train[idx]
            if step == args.nan_at and rank == world - 1:
                xb = xb.clone()
                xb[0, 0, 0, 0] = float("nan")  # a bad batch on one rank only
            loss = nn.functional.cross_entropy(ddp(xb), y_train[idx])
            opt.zero_grad()
            try:
                loss.backward()
            except RuntimeError as exc:
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
            loss_sum[0] += loss.item()
            loss_sum[1] += 1
            step += 1
        dist.all_reduce(loss_sum)
        acc = evaluate(model, x_test, y_test, rank, world)
        line = (f"epoch {epoch}  steps {step}  train_loss {loss_sum[0].item() / loss_sum[1].item():.4f}"
                f"  test_acc {acc:.4f}  time {time.time() - t0:.1f}s")
        summary = {"test_acc": acc, "steps": step}
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
        if rank == 0:
            print(line, flush=True)
    if rank == 0:
        extra = f"  compression {summary['compression_rate']:.1f}x" if state else ""
        print(f"final: test_acc {summary.get('test_acc', 0):.4f}  steps {summary.get('steps', 0)}"
              f"{extra}  skipped {skipped}  wall {time.time() - start:.1f}s", flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=2, help="number of DDP processes (default 2)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    ap.add_argument("--train-limit", type=int, default=0, help="use only the first N training images")
    ap.add_argument("--batch-size", type=int, default=32, help="per process")
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--no-hook", action="store_true", help="plain DDP (dense all-reduce)")
    ap.add_argument("--codec", default="adacomp")
    ap.add_argument("--bin-size", type=int, default=0,
                    help="one bin size for every layer (default: conv 50, fc 500, other 500)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nan-at", type=int, default=-1,
                    help="put a NaN in the last rank's batch at this step (shows the skip)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--data-dir", default=DATA_DIR)
    ap.add_argument("--port", type=int, default=0, help="rendezvous port (0: pick a free one)")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")):
        sys.exit(f"no Fashion-MNIST in {args.data_dir} (apt-get install dataset-fashion-mnist)")
    if args.port == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            args.port = s.getsockname()[1]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(args,), nprocs=args.procs, join=True)


if __name__ == "__main__":
    main()
