"""Layer typing: which layer type (conv, fc, lstm, other) each parameter is, and the
types' default bin sizes."""

from torch import nn

from .. import _adacomp

# From the codec level (include/adacomp/codec.h: LayerType, DefaultBinSize).
LAYER_TYPES = tuple(_adacomp.LAYER_TYPES)
DEFAULT_BIN_SIZES = dict(_adacomp.DEFAULT_BIN_SIZES)

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
         nn.ConvTranspose3d)
_FC = (nn.Linear, nn.Bilinear)
_RNN = (nn.RNNBase, nn.RNNCellBase)


def _type_by_shape(param):
    if param.dim() >= 3:
        return "conv"
    if param.dim() == 2:
        return "fc"
    return "other"


def layer_types_of(model):
    """Maps each parameter name of ``model`` to its layer type.

    conv: weights of Conv*/ConvTranspose*; fc: weights of Linear/Bilinear;
    lstm: weight_ih*/weight_hh* of LSTM/GRU/RNN (and their cells); other:
    biases. Parameters of other modules go by shape: >= 3-D conv, 2-D fc, else other.
    """
    by_id = {}
    for mod_name, mod in model.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            if pname.startswith("bias"):
                t = "other"
            elif isinstance(mod, _CONV) and pname == "weight":
                t = "conv"
            elif isinstance(mod, _FC) and pname == "weight":
                t = "fc"
            elif isinstance(mod, _RNN) and pname.startswith("weight"):
                t = "lstm"
            else:
                t = _type_by_shape(p)
            by_id.setdefault(id(p), t)
    return {name: by_id[id(p)] for name, p in model.named_parameters()}
