"""Layer typing: which layer type each parameter is, and the types' default bin sizes.

The codec's four types (conv, fc, lstm, other; include/adacomp/codec.h) plus four the
hook adds for transformers: attention (the projections of an attention module), mlp
(the other linear layers of a block that holds an attention module), embedding
(Embedding/EmbeddingBag tables) and norm (the scales and shifts of LayerNorm,
GroupNorm, BatchNorm and InstanceNorm). Default bin sizes: attention, mlp and
embedding 50 (measured on a GPT: at fc's 500 it stops learning), norm other's 500,
so models without attention or embeddings compress exactly as before;
experiments/ddp-real-models/report.md has the measurements and the settings we recommend.
"""

from torch import nn

from .. import _adacomp

CODEC_LAYER_TYPES = tuple(_adacomp.LAYER_TYPES)
TRANSFORMER_LAYER_TYPES = ("attention", "mlp", "embedding", "norm")
LAYER_TYPES = CODEC_LAYER_TYPES + TRANSFORMER_LAYER_TYPES
DEFAULT_BIN_SIZES = dict(_adacomp.DEFAULT_BIN_SIZES)
# Transformer weights at L_T 50: at fc's 500 a GPT trained with AdamW stopped learning
# (held-out loss 3.29 nats/byte after 250 steps against 2.27 without a hook, at 947x),
# at 50 it trains (experiments/ddp-real-models/report.md). Norms keep other's bin size.
DEFAULT_BIN_SIZES.update(attention=50, mlp=50, embedding=50, norm=DEFAULT_BIN_SIZES["other"])

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
         nn.ConvTranspose3d)
_FC = (nn.Linear, nn.Bilinear)
_RNN = (nn.RNNBase, nn.RNNCellBase)
_EMBEDDING = (nn.Embedding, nn.EmbeddingBag)
_NORM = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase, nn.LocalResponseNorm)
# nn.MultiheadAttention's own projection weights (its out_proj is a Linear child).
_MHA_WEIGHTS = ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight")


def _type_by_shape(param):
    if param.dim() >= 3:
        return "conv"
    if param.dim() == 2:
        return "fc"
    return "other"


def _is_attention(mod):
    return isinstance(mod, nn.MultiheadAttention) or "attention" in type(mod).__name__.lower()


def _is_block(mod):
    """A transformer block: a module with an attention module among its children."""
    return any(_is_attention(c) for c in mod.children())


def _contexts(model):
    """{id(module): "attention" | "mlp" | None}: the innermost attention module or block
    that holds each module (a block's non-attention parts are its MLP). The model
    itself is never a block: its attention children are not what makes its head an MLP."""
    ctx = {}

    def walk(mod, inherited):
        if _is_attention(mod):
            here = "attention"
        elif mod is not model and _is_block(mod):
            here = "mlp"
        else:
            here = inherited
        ctx.setdefault(id(mod), here)
        for child in mod.children():
            walk(child, here)

    walk(model, None)
    return ctx


def layer_types_of(model):
    """Maps each parameter name of ``model`` to its layer type.

    - embedding: weights of Embedding/EmbeddingBag (a head tied to one is that
      embedding: a shared parameter keeps the type of the first module that has it);
    - norm: weights and biases of LayerNorm/GroupNorm/BatchNorm*/InstanceNorm*;
    - attention: weights of Linear layers (and MultiheadAttention's in-projections)
      inside an attention module, that is nn.MultiheadAttention or any module whose
      class name contains "Attention";
    - mlp: weights of the other Linear layers of a transformer block (a module, not the
      model itself, with an attention module among its children), at any depth below it;
    - conv: weights of Conv*/ConvTranspose*; fc: weights of other Linear/Bilinear;
      lstm: weight_ih*/weight_hh* of LSTM/GRU/RNN (and their cells);
    - other: biases outside norms. Parameters of other modules go by shape: >= 3-D
      conv, 2-D fc, else other.
    """
    ctx = _contexts(model)
    by_id = {}
    for _, mod in model.named_modules():
        where = ctx.get(id(mod))
        for pname, p in mod.named_parameters(recurse=False):
            if isinstance(mod, _NORM):
                t = "norm"
            elif "bias" in pname:
                t = "other"
            elif isinstance(mod, _EMBEDDING) and pname == "weight":
                t = "embedding"
            elif isinstance(mod, _CONV) and pname == "weight":
                t = "conv"
            elif isinstance(mod, _RNN) and pname.startswith("weight"):
                t = "lstm"
            elif ((isinstance(mod, _FC) and pname == "weight") or pname in _MHA_WEIGHTS) \
                    and where is not None:
                t = where
            elif isinstance(mod, _FC) and pname == "weight":
                t = "fc"
            else:
                t = _type_by_shape(p)
            by_id.setdefault(id(p), t)
    return {name: by_id[id(p)] for name, p in model.named_parameters()}
