"""Cost of the hook's atomic steps (residue snapshot + whole-bucket finiteness check).

Not a test: prints the time per training step and per hook call of the
Fashion-MNIST example's CNN (batch 32, 1 process on Gloo, so the exchange is
nearly free and the ratio is an upper bound) in three variants, interleaved:
  atomic   the hook as shipped;
  no-snap  residue snapshots disabled (an error would leave the state half-updated);
  bare     no snapshots and no whole-bucket finiteness check (the pre-atomic hook).
Run: PYTHONPATH=<build>/python /usr/bin/python3 bench_atomic_step.py [steps]
"""

import os
import sys
import time
import types

import torch
import torch.distributed as dist
from torch import nn

import adacomp.torch as adt


# The example's model (examples/ddp_fashion_mnist.py; importing it runs nothing).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from ddp_fashion_mnist import Cnn  # noqa: E402


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1)
    torch.manual_seed(0)
    x = torch.randn(steps, 32, 1, 28, 28)
    y = torch.randint(0, 10, (steps, 32))
    runs = {}
    for variant in ("atomic", "no-snap", "bare"):
        model = Cnn()
        ddp = nn.parallel.DistributedDataParallel(model)
        state = adt.register(ddp)
        if variant != "atomic":
            state._snapshot = lambda layout: None
        if variant == "bare":
            state_mod = types.SimpleNamespace(find_non_finite=lambda a: None,
                                              decompress_add=adt._adacomp.decompress_add,
                                              decompress_average=adt._adacomp.decompress_average)
        else:
            state_mod = adt._adacomp
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
        real = state.reduce_bucket
        hook_time = [0.0]

        def timed(bucket, real=real, hook_time=hook_time):
            t = time.perf_counter()
            out = real(bucket)
            hook_time[0] += time.perf_counter() - t
            return out
        state.reduce_bucket = timed
        runs[variant] = (ddp, opt, hook_time, state_mod)
    best = {v: [1e9, 1e9] for v in runs}
    block = 20
    for start in range(0, steps, block):
        for variant, (ddp, opt, hook_time, state_mod) in runs.items():
            adt.bucket._adacomp = state_mod  # where the hook calls find_non_finite
            hook_time[0] = 0.0
            t = time.perf_counter()
            for i in range(start, min(steps, start + block)):
                loss = nn.functional.cross_entropy(ddp(x[i]), y[i])
                opt.zero_grad()
                loss.backward()
                opt.step()
            n = min(steps, start + block) - start
            best[variant][0] = min(best[variant][0], (time.perf_counter() - t) / n)
            best[variant][1] = min(best[variant][1], hook_time[0] / n)
    adt.bucket._adacomp = runs["atomic"][3]
    for v, (step_s, hook_s) in best.items():
        print(f"{v:8s} step {step_s * 1e3:7.3f} ms  hook {hook_s * 1e3:7.3f} ms")
    for v in ("no-snap", "bare"):
        print(f"atomic / {v}: step x{best['atomic'][0] / best[v][0]:.3f}, "
              f"hook x{best['atomic'][1] / best[v][1]:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
