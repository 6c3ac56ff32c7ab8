#!/usr/bin/env python3
"""Trains torchvision's ResNet-18 on Fashion-MNIST with DistributedDataParallel on
Gloo, one process per host, with the AdaComp communication hook (default),
PyTorch's fp16 or PowerSGD hooks, or none.

    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_resnet18.py [--procs 2] [--epochs 10]
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_resnet18.py --hook none --max-steps 6
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_resnet18.py --hook powersgd --powersgd-rank 4
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_resnet18.py --width 8 --steps 40 \\
        --checkpoint-dir /tmp/r18 --checkpoint-every 10 --summary-json /tmp/r18.json
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_resnet18.py ... --resume     # newest checkpoint
    PYTHONPATH=build/python torchrun --redirects 9:0 --tee 9:0 --nproc_per_node 2 examples/ddp_resnet18.py

The model is torchvision.models.resnet's ResNet with BasicBlock and [2, 2, 2, 2]
blocks (Debian's python3-torchvision), 11.2M parameters, with the stem of the
CIFAR variant: one 3x3 convolution of stride 1 and no max-pooling (the ImageNet
stem's 7x7/2 convolution and max-pool would shrink 32x32 images to 8x8 before the
first block). --width sets the base channels (64: ResNet-18 itself; 8: about
175k parameters, for tests); the four stages have width x 1, 2, 4, 8 channels.

The data are the IDX .gz files of Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist), nothing is downloaded: each 28x28 image is
padded with 2 black pixels on every side to 32x32 and repeated over 3 channels,
normalised with Fashion-MNIST's mean and standard deviation, and flipped left to
right with probability 1/2 in training. Every epoch draws one permutation of the
training images (the same on every rank, from --seed and the epoch); each of the
N processes trains on its shard of each global minibatch of N x --batch-size
images, and the flips are drawn from --seed and the step, so a step's batch is a
function of the step alone and a checkpoint's data position is its step.

Optimiser: SGD with momentum 0.9 and weight decay (conv and fc weights only),
lr --lr with a linear warm-up over --warmup-frac of the steps, then a cosine
decay to --lr-floor x --lr (default 0) at the last step (LambdaLR, stepped once per
step); --lr-floor 1 --warmup-frac 0 keeps the lr constant.

Evaluations (at the start, every --eval-every steps and at the end): loss and
accuracy over the first --eval-images test images, each rank scoring its share.

Hooks: --hook none|fp16|powersgd|adacomp. PowerSGD starts at start_powerSGD_iter
(--powersgd-start-iter, default 10 % of the steps as torch advises); torch 1.13's
PowerSGD hook on Gloo aborts with gloo::EnforceNotMet when a model spans several
DDP buckets, so with powersgd DDP's bucket_cap_mb (and its first bucket) is set
above the model's size: one bucket, no overlap of communication with backward.
AdaComp options (--codec, --bin-size, --bin-sizes, --values, --dense-types,
--no-overlap) go to adacomp.torch.register.

Progress (rank 0): step, training loss (mean over ranks and the steps since the
last line), lr, step time split into forward / backward (with DDP's
communication) / optimiser, bytes per step. --summary-json: every evaluation with
its step and wall-clock time, the training losses, time per step and its split,
bytes per step, the AdaComp hook's compression rate per layer type, and each
rank's SHA-256 of its weights (replicas must be bit-identical).

Checkpoints (--checkpoint-dir, --checkpoint-every N, --resume [STEP]): one file
per rank and step with the model (BatchNorm statistics included), optimiser and
scheduler state, the data position (the step), torch's generator and the
AdaComp hook's state_dict() (residues), so a resumed run reaches the same
weights as the uninterrupted one, bit for bit (BatchNorm statistics are rank 0's,
as DDP's next forward would make them). --resume refuses --hook powersgd:
torch's PowerSGDState keeps its error feedback and warm-started P and Q as flat
tensors in the order of DDP's bucket, which a new DDP changes after its first
step (a restored state was measured to diverge), so it could not continue bit
for bit. none and fp16 carry no state.

A rank that dies or freezes makes the others stop after at most --timeout-s
seconds (the Gloo process-group timeout, default 60) with a message naming the
failed collective. --kill-rank R --kill-at-step S (for tests) has rank R kill
itself with SIGKILL at step S.
"""

import argparse
import importlib.util
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_common  # noqa: E402


def cifar_resnet18(width=64, num_classes=10):
    """torchvision's ResNet-18 (BasicBlock, [2, 2, 2, 2]) with the CIFAR stem and
    `width` base channels."""
    from torchvision.models.resnet import BasicBlock, ResNet
    model = ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes)
    # The stages are rebuilt with torchvision's own _make_layer at the chosen width.
    model.inplanes = width
    model.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
    model.bn1 = nn.BatchNorm2d(width)
    model.maxpool = nn.Identity()
    model.layer1 = model._make_layer(BasicBlock, width, 2)
    model.layer2 = model._make_layer(BasicBlock, 2 * width, 2, stride=2)
    model.layer3 = model._make_layer(BasicBlock, 4 * width, 2, stride=2)
    model.layer4 = model._make_layer(BasicBlock, 8 * width, 2, stride=2)
    model.fc = nn.Linear(8 * width, num_classes)
    # torchvision's initialisation for the replaced modules.
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def to_input(images):
    """uint8 [n, 28, 28] -> float32 [n, 3, 32, 32], padded and normalised."""
    x = nn.functional.pad(images, (2, 2, 2, 2))
    x = ddp_common.normalize_images(x).unsqueeze(1)
    return x.expand(-1, 3, -1, -1).contiguous()


class ResNetTask:
    name = "resnet18"

    def __init__(self):
        self._perm_epoch = None
        self._perm = None

    def config(self, args):
        return {"model": "resnet18-cifar-stem", "width": args.width,
                "train_limit": args.train_limit, "lr": args.lr,
                "weight_decay": args.weight_decay, "warmup_frac": args.warmup_frac,
                "lr_floor": args.lr_floor}

    def describe(self, args):
        return (f"SGD lr {args.lr} momentum 0.9 weight decay {args.weight_decay}, warm-up "
                f"{self._warmup(args)} steps then cosine to {args.lr_floor:g} x lr; "
                f"Fashion-MNIST padded to 32x32x3, "
                f"{self.x_train.shape[0]} training images, {self.steps_per_epoch(args)} "
                f"steps/epoch; eval on {self.x_test.shape[0]} test images")

    def load_data(self, args):
        self.x_train, self.y_train = ddp_common.fashion_mnist_raw(args.data_dir, "train")
        if args.train_limit:
            self.x_train = self.x_train[:args.train_limit]
            self.y_train = self.y_train[:args.train_limit]
        x, y = ddp_common.fashion_mnist_raw(args.data_dir, "t10k")
        self.x_test, self.y_test = x[:args.eval_images], y[:args.eval_images]

    def steps_per_epoch(self, args):
        n = args.train_limit or 60000
        return max(1, n // (args.procs_now * args.batch_size))

    def total_steps(self, args):
        return args.steps or args.epochs * self.steps_per_epoch(args)

    def _warmup(self, args):
        return max(1, round(args.warmup_frac * self.total_steps(args)))

    def build_model(self, args):
        return cifar_resnet18(args.width)

    def make_optimizer(self, model, args, total):
        decay = [p for p in model.parameters() if p.dim() > 1]
        rest = [p for p in model.parameters() if p.dim() <= 1]
        opt = torch.optim.SGD([{"params": decay, "weight_decay": args.weight_decay},
                               {"params": rest, "weight_decay": 0.0}],
                              lr=args.lr, momentum=0.9)
        return opt, ddp_common.WarmupCosine(self._warmup(args), total, args.lr_floor)

    def batch(self, step, rank, world, args):
        spe = self.steps_per_epoch(args)
        epoch, i = divmod(step, spe)
        if self._perm_epoch != epoch:
            g = torch.Generator().manual_seed(args.seed * 100003 + epoch)
            self._perm = torch.randperm(self.x_train.shape[0], generator=g)
            self._perm_epoch = epoch
        gb = world * args.batch_size
        idx = self._perm[i * gb:(i + 1) * gb]
        flips = torch.rand(gb, generator=torch.Generator().manual_seed(
            args.seed * 1000003 + step)) < 0.5
        lo, hi = rank * args.batch_size, (rank + 1) * args.batch_size
        x = to_input(self.x_train[idx[lo:hi]])
        f = flips[lo:hi]
        x[f] = x[f].flip(-1)
        return x, self.y_train[idx[lo:hi]]

    def loss(self, out, y):
        return nn.functional.cross_entropy(out, y)

    def clip(self, model, args):
        pass

    def evaluate(self, model, args, rank, world):
        model.eval()
        sums = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, images
        chunk = 250
        with torch.no_grad():
            for lo in range(rank * chunk, self.x_test.shape[0], world * chunk):
                x = to_input(self.x_test[lo:lo + chunk])
                y = self.y_test[lo:lo + chunk]
                out = model(x)
                sums[0] += nn.functional.cross_entropy(out, y, reduction="sum").item()
                sums[1] += (out.argmax(1) == y).sum().item()
                sums[2] += y.numel()
        torch.distributed.all_reduce(sums)
        model.train()
        return {"loss": sums[0].item() / sums[2].item(),
                "accuracy": sums[1].item() / sums[2].item()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_argument_group("model and data")
    g.add_argument("--width", type=int, default=64,
                   help="base channels (64: ResNet-18; smaller for tests)")
    g.add_argument("--epochs", type=int, default=10)
    g.add_argument("--steps", type=int, default=0,
                   help="steps of the schedule (default: --epochs epochs)")
    g.add_argument("--batch-size", type=int, default=32, help="per process")
    g.add_argument("--lr", type=float, default=0.05)
    g.add_argument("--lr-floor", type=float, default=0.0,
                   help="the cosine ends at this fraction of --lr (1 with --warmup-frac 0: "
                        "a constant lr)")
    g.add_argument("--weight-decay", type=float, default=5e-4)
    g.add_argument("--warmup-frac", type=float, default=0.05,
                   help="linear lr warm-up over this fraction of the steps")
    g.add_argument("--train-limit", type=int, default=0,
                   help="use only the first N training images")
    g.add_argument("--eval-images", type=int, default=2000,
                   help="evaluate on the first N test images (10000: all)")
    g.add_argument("--data-dir", default=ddp_common.FASHION_MNIST_DIR)
    ddp_common.add_common_args(ap)
    args = ap.parse_args()
    ddp_common.check_common_args(ap, args)
    if args.width < 1 or args.batch_size < 1 or args.eval_images < 1:
        ap.error("--width, --batch-size and --eval-images must be positive")
    if not os.path.exists(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")):
        sys.exit(f"no Fashion-MNIST in {args.data_dir} (apt-get install dataset-fashion-mnist)")
    if importlib.util.find_spec("torchvision") is None:
        sys.exit("torchvision is missing (apt-get install python3-torchvision)")
    env = ddp_common.env_rank()
    args.procs_now = env[1] if env else args.procs
    ddp_common.launch(ResNetTask(), args)


if __name__ == "__main__":
    main()
