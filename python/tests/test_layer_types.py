"""The hook's transformer layer types (attention, mlp, embedding, norm): which tensors
get them, on examples/ddp_gpt.py's model, on torch's own transformer layers and on a
hand-built module; their default bin sizes; and that with attention, mlp and
embedding at fc's bin size the typing changes no bits (every tensor's compressor has
the bin size and codec that the four codec types gave it before).
Run: PYTHONPATH=<build>/python /usr/bin/python3 -m unittest -v test_layer_types
"""

import os
import sys
import unittest

import numpy as np
import torch
from torch import nn

import adacomp.torch as adt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import ddp_gpt  # noqa: E402


def shape_typing(model):
    """The typing before transformer types, written out: conv/fc/lstm by module class,
    biases other, anything else by shape."""
    out = {}
    seen = set()
    for _, mod in model.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            if pname.startswith("bias"):
                t = "other"
            elif isinstance(mod, (nn.Conv1d, nn.Conv2d)) and pname == "weight":
                t = "conv"
            elif isinstance(mod, nn.Linear) and pname == "weight":
                t = "fc"
            elif isinstance(mod, nn.LSTM) and pname.startswith("weight"):
                t = "lstm"
            else:
                t = "conv" if p.dim() >= 3 else "fc" if p.dim() == 2 else "other"
            out[id(p)] = t
    return {n: out[id(p)] for n, p in model.named_parameters()}


class Hand(nn.Module):
    """Attention by class name, a block whose MLP is a nested module, torch's
    MultiheadAttention and TransformerEncoderLayer, norms, and a plain head."""

    class MyAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(8, 8)
            self.out = nn.Linear(8, 8, bias=False)

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(8, 16)
            self.down = nn.Linear(16, 8)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(8)
            self.attention = Hand.MyAttention()
            self.ff = Hand.FeedForward()

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 8)
        self.block = Hand.Block()
        self.mha = nn.MultiheadAttention(8, 2)
        self.enc = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
        self.gn = nn.GroupNorm(2, 8)
        self.conv = nn.Conv1d(8, 8, 3)
        self.head = nn.Linear(8, 4)


class LayerTypesTest(unittest.TestCase):
    def test_gpt(self):
        model = ddp_gpt.Gpt(layers=2, dim=16, heads=2, context=8)
        types = adt.layer_types_of(model)
        self.assertEqual(types["tok.weight"], "embedding")
        self.assertEqual(types["pos.weight"], "embedding")
        for b in range(2):
            p = f"blocks.{b}."
            self.assertEqual(types[p + "attn.qkv.weight"], "attention")
            self.assertEqual(types[p + "attn.proj.weight"], "attention")
            self.assertEqual(types[p + "attn.qkv.bias"], "other")
            self.assertEqual(types[p + "fc.weight"], "mlp")
            self.assertEqual(types[p + "proj.weight"], "mlp")
            self.assertEqual(types[p + "fc.bias"], "other")
            for ln in ("ln1", "ln2"):
                self.assertEqual(types[p + ln + ".weight"], "norm")
                self.assertEqual(types[p + ln + ".bias"], "norm")
        self.assertEqual(types["ln.weight"], "norm")
        # Every parameter has a type; the tied head is the embedding, not a parameter.
        self.assertEqual(set(types), {n for n, _ in model.named_parameters()})
        counts = {t: sum(1 for v in types.values() if v == t) for t in set(types.values())}
        self.assertEqual(counts, {"embedding": 2, "attention": 4, "mlp": 4, "norm": 10,
                                  "other": 8})

    def test_hand_built(self):
        types = adt.layer_types_of(Hand())
        expect = {  # type: the tensors that have it
            "embedding": ["emb.weight"],
            "norm": ["block.norm.weight", "block.norm.bias", "enc.norm1.weight",
                     "enc.norm2.bias", "gn.weight", "gn.bias"],
            "attention": ["block.attention.q.weight", "block.attention.out.weight",
                          "mha.in_proj_weight", "mha.out_proj.weight",
                          "enc.self_attn.in_proj_weight", "enc.self_attn.out_proj.weight"],
            "mlp": ["block.ff.up.weight", "block.ff.down.weight", "enc.linear1.weight",
                    "enc.linear2.weight"],
            "conv": ["conv.weight"],
            "fc": ["head.weight"],
            "other": ["block.attention.q.bias", "block.ff.up.bias", "block.ff.down.bias",
                      "mha.in_proj_bias", "mha.out_proj.bias", "enc.linear1.bias",
                      "conv.bias", "head.bias"],
        }
        for t, names in expect.items():
            for name in names:
                self.assertEqual(types[name], t, name)

    def test_nothing_else_changes(self):
        # Models without transformer parts keep their types, and a GPT's tensors keep
        # the bin sizes and codecs they had under the codec's four types.
        class Cnn(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(1, 4, 3)
                self.lstm = nn.LSTM(4, 4)
                self.fc = nn.Linear(4, 2)

        cnn = Cnn()
        self.assertEqual(adt.layer_types_of(cnn), shape_typing(cnn))
        # Norms keep other's bin size; attention, mlp and embedding weights are at 50
        # (fc's 500 stalls a GPT); with those three at fc's bin size, every tensor
        # compresses as under the old typing.
        self.assertEqual(adt.DEFAULT_BIN_SIZES["norm"], adt.DEFAULT_BIN_SIZES["other"])
        for t in ("attention", "mlp", "embedding"):
            self.assertEqual(adt.DEFAULT_BIN_SIZES[t], 50)
        as_fc = {t: adt.DEFAULT_BIN_SIZES["fc"] for t in ("attention", "mlp", "embedding")}
        for model in (ddp_gpt.Gpt(layers=2, dim=16, heads=2, context=8), Hand()):
            old = shape_typing(model)
            new = adt.layer_types_of(model)
            self.assertNotEqual(old, new)
            st = adt.AdaCompState(model=model, bin_sizes=as_fc)
            default = adt.AdaCompState(model=model)
            for name in st.parameter_names():
                c = st._by_name[name].compressor
                self.assertEqual(c.bin_size, adt.DEFAULT_BIN_SIZES[old[name]], name)
                self.assertEqual(c.codec, "adacomp", name)
                self.assertEqual(default._by_name[name].compressor.bin_size,
                                 50 if new[name] in as_fc else c.bin_size, name)
            # The same gradient compresses to the same frame as with the old type given
            # explicitly (layer_types= overrides the automatic typing).
            st_old = adt.AdaCompState(model=model, layer_types=old)
            rng = np.random.default_rng(1)
            for name in st.parameter_names():
                g = rng.standard_normal(st._by_name[name].numel).astype(np.float32)
                a = st._by_name[name].compressor.compress(g)
                b = st_old._by_name[name].compressor.compress(g)
                self.assertEqual(bytes(a), bytes(b), name)

    def test_bin_sizes_by_new_type(self):
        model = ddp_gpt.Gpt(layers=1, dim=16, heads=2, context=8)
        st = adt.AdaCompState(model=model, bin_sizes={"attention": 100, "embedding": 20},
                              dense_types=("norm",))
        by = {n: st._by_name[n].compressor for n in st.parameter_names()}
        self.assertEqual(by["blocks.0.attn.qkv.weight"].bin_size, 100)
        self.assertEqual(by["blocks.0.fc.weight"].bin_size, 50)
        self.assertEqual(by["tok.weight"].bin_size, 20)
        self.assertEqual(by["ln.weight"].codec, "dense")
        self.assertEqual(by["blocks.0.fc.bias"].codec, "adacomp")
        with self.assertRaises(ValueError):
            adt.AdaCompState(model=model, bin_sizes={"transformer": 10})
        # The per-type counters have every type.
        self.assertEqual(set(st.stats()["per_type"]), set(adt.LAYER_TYPES))
        self.assertEqual(adt.LAYER_TYPES[:4], ("conv", "fc", "lstm", "other"))


if __name__ == "__main__":
    torch.manual_seed(0)
    unittest.main()
