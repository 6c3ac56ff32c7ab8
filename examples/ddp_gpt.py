#!/usr/bin/env python3
"""Trains a small byte-level GPT-style decoder on the fortunes of Debian's
fortunes packages with DistributedDataParallel on Gloo, one process per host,
with the AdaComp communication hook (default), PyTorch's fp16 or PowerSGD hooks,
or none, and reports the held-out loss in nats per byte.

    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_gpt.py [--procs 2] [--steps 2000]
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_gpt.py --hook none --max-steps 6
    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_gpt.py --layers 2 --dim 64 --heads 2 \\
        --context 64 --steps 100 --checkpoint-dir /tmp/gpt --checkpoint-every 25 --summary-json /tmp/gpt.json
    PYTHONPATH=build/python torchrun --redirects 9:0 --tee 9:0 --nproc_per_node 2 examples/ddp_gpt.py

The model, written here: byte embeddings (vocabulary 256) plus learned position
embeddings, --layers pre-norm blocks (LayerNorm, causal multi-head
self-attention, residual; LayerNorm, MLP of 4 x --dim with GELU, residual), a
final LayerNorm, and an output head tied to the byte embeddings. At the
defaults (6 layers, dim 384, 6 heads, context 256) it has 10.8M parameters.
Weights start normal with std 0.02, the projections back into the residual
stream with 0.02 / sqrt(2 x layers).

The text: every plain-text fortune file in /usr/share/games/fortunes (the files
without .dat or .u8; about 2.5 MB, Debian's fortunes-min and fortunes packages),
in name order, plus any --extra-text files (e.g. /usr/share/common-licenses/GPL-3,
if installed). The held-out split is the last --heldout-frac (default 5 %) of
the concatenated bytes; training reads only the bytes before it. A training step
draws N x --batch-size windows of --context + 1 bytes at offsets drawn from
--seed and the step (each rank takes its share), so a checkpoint's data position
is its step. The held-out loss is the mean cross-entropy, in nats per byte, of
predicting every byte of the first --eval-windows consecutive, non-overlapping
windows of the held-out split (each rank scores its share); bits per byte are
that / ln 2.

Optimiser: AdamW (betas 0.9, 0.95; weight decay on the 2-D weights only),
lr --lr with a linear warm-up over --warmup-frac of the steps and a cosine decay
to --lr-floor x --lr at the last step; gradients clipped to norm --clip (after
DDP's averaging, so every rank clips alike).

Hooks, progress, the summary JSON, checkpoints, the process-group timeout and
the failure options are those of examples/ddp_resnet18.py (see its --help):
--hook none|fp16|powersgd|adacomp; with powersgd the whole model goes in one
DDP bucket, since torch 1.13's PowerSGD hook on Gloo aborts with
gloo::EnforceNotMet when a model spans several; start_powerSGD_iter defaults to
10 % of the steps. Evaluations report the held-out loss ("loss", nats per byte).
"""

import argparse
import math
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_common  # noqa: E402

FORTUNES_DIR = "/usr/share/games/fortunes"


def read_text(fortunes_dir, extra):
    """The training text as bytes: the plain fortune files by name, then `extra` files."""
    names = sorted(n for n in os.listdir(fortunes_dir)
                   if not n.endswith((".dat", ".u8"))
                   and os.path.isfile(os.path.join(fortunes_dir, n)))
    paths = [os.path.join(fortunes_dir, n) for n in names] + list(extra)
    parts = []
    for p in paths:
        with open(p, "rb") as f:
            parts.append(f.read())
    return b"".join(parts), paths


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, context):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        # A plain attribute, not a buffer: DDP would broadcast a buffer, and Gloo has no bool.
        self.mask = torch.ones(context, context, dtype=torch.bool).tril()

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim, heads, context):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, context)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.proj = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(nn.functional.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    """Byte-level decoder: token + position embeddings, pre-norm blocks, tied head."""

    def __init__(self, layers=6, dim=384, heads=6, context=256, vocab=256):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, context) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()  # the head is the byte embedding


class GptTask:
    name = "gpt"

    def config(self, args):
        return {"model": "gpt-bytes", "layers": args.layers, "dim": args.dim,
                "heads": args.heads, "context": args.context, "lr": args.lr,
                "lr_floor": args.lr_floor, "weight_decay": args.weight_decay,
                "warmup_frac": args.warmup_frac, "clip": args.clip,
                "heldout_frac": args.heldout_frac, "text_bytes": len(self.data),
                "extra_text": list(args.extra_text)}

    def describe(self, args):
        return (f"AdamW lr {args.lr} (warm-up {self._warmup(args)} steps, cosine to "
                f"{args.lr_floor:g} x), weight decay {args.weight_decay}, clip "
                + (f"{args.local_clip:g} per rank in the hook (--local-clip)" if args.local_clip
                   else "off (--local-optimizer)" if args.local_optimizer else f"{args.clip:g}")
                + "; "
                f"{len(self.paths)} text files, {self.n_train:,} training bytes, "
                f"{len(self.data) - self.n_train:,} held-out bytes (the last "
                f"{100 * args.heldout_frac:g} %), eval on {self.eval_windows} windows of "
                f"{args.context}")

    def load_data(self, args):
        text, self.paths = read_text(args.fortunes_dir, args.extra_text)
        self.data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
        self.n_train = int(len(self.data) * (1 - args.heldout_frac))
        heldout = len(self.data) - self.n_train
        self.eval_windows = min(args.eval_windows, (heldout - 1) // args.context)
        if self.eval_windows < 1 or self.n_train <= args.context + 1:
            raise SystemExit(f"text too short ({len(self.data)} bytes) for context "
                             f"{args.context} and --heldout-frac {args.heldout_frac}")

    def total_steps(self, args):
        return args.steps

    def _warmup(self, args):
        return max(1, round(args.warmup_frac * args.steps))

    def build_model(self, args):
        return Gpt(args.layers, args.dim, args.heads, args.context)

    def make_optimizer(self, model, args, total):
        decay = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                 {"params": rest, "weight_decay": 0.0}],
                                lr=args.lr, betas=(0.9, 0.95))
        return opt, ddp_common.WarmupCosine(self._warmup(args), total, args.lr_floor)

    def batch(self, step, rank, world, args):
        g = torch.Generator().manual_seed(args.seed * 1000003 + step)
        offsets = torch.randint(0, self.n_train - args.context, (world * args.batch_size,),
                                generator=g)
        mine = offsets[rank * args.batch_size:(rank + 1) * args.batch_size]
        win = self.data[mine.unsqueeze(1) + torch.arange(args.context + 1)]
        return win[:, :-1], win[:, 1:]

    def loss(self, logits, y):
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def clip(self, model, args):
        if args.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)

    def evaluate(self, model, args, rank, world):
        model.eval()
        sums = torch.zeros(2, dtype=torch.float64)  # nats, bytes predicted
        ctx = args.context
        per_batch = 8
        with torch.no_grad():
            for lo in range(rank * per_batch, self.eval_windows, world * per_batch):
                ws = range(lo, min(lo + per_batch, self.eval_windows))
                win = torch.stack([self.data[self.n_train + w * ctx:
                                             self.n_train + w * ctx + ctx + 1] for w in ws])
                logits = model(win[:, :-1])
                sums[0] += nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), win[:, 1:].reshape(-1),
                    reduction="sum").item()
                sums[1] += win[:, 1:].numel()
        torch.distributed.all_reduce(sums)
        model.train()
        nats = sums[0].item() / sums[1].item()
        return {"loss": nats, "bits_per_byte": nats / math.log(2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_argument_group("model and data")
    g.add_argument("--layers", type=int, default=6)
    g.add_argument("--dim", type=int, default=384)
    g.add_argument("--heads", type=int, default=6)
    g.add_argument("--context", type=int, default=256, help="bytes per window")
    g.add_argument("--steps", type=int, default=2000, help="steps of the schedule")
    g.add_argument("--batch-size", type=int, default=16, help="windows per process and step")
    g.add_argument("--lr", type=float, default=1e-3)
    g.add_argument("--lr-floor", type=float, default=0.1,
                   help="the cosine ends at this fraction of --lr")
    g.add_argument("--weight-decay", type=float, default=0.1)
    g.add_argument("--warmup-frac", type=float, default=0.05,
                   help="linear lr warm-up over this fraction of the steps")
    g.add_argument("--clip", type=float, default=1.0, help="gradient norm clip (0: none)")
    g.add_argument("--heldout-frac", type=float, default=0.05,
                   help="the last fraction of the text is held out")
    g.add_argument("--eval-windows", type=int, default=128,
                   help="held-out windows of --context bytes per evaluation")
    g.add_argument("--fortunes-dir", default=FORTUNES_DIR)
    g.add_argument("--extra-text", nargs="*", default=[],
                   help="more text files appended after the fortunes")
    ddp_common.add_common_args(ap)
    args = ap.parse_args()
    ddp_common.check_common_args(ap, args)
    if min(args.layers, args.dim, args.heads, args.context, args.steps, args.batch_size,
           args.eval_windows) < 1:
        ap.error("--layers, --dim, --heads, --context, --steps, --batch-size and "
                 "--eval-windows must be positive")
    if args.dim % args.heads:
        ap.error("--dim must be a multiple of --heads")
    if not 0 < args.heldout_frac < 1:
        ap.error("--heldout-frac must be between 0 and 1")
    if not os.path.isdir(args.fortunes_dir):
        sys.exit(f"no {args.fortunes_dir} (apt-get install fortunes)")
    ddp_common.launch(GptTask(), args)


if __name__ == "__main__":
    main()
