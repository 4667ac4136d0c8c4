#!/usr/bin/python3
"""Records three networks run on PyTorch's meta device, for tests/test_networks.c.

Run with Debian's /usr/bin/python3, its python3-torch (PyTorch 1.13) and
python3-torchvision:

    /usr/bin/python3 tests/vectors/gen_networks.py tests/vectors

It writes networks.txt, committed, the record of 1.13's answers. Under torch
2.x with torchvision (tests/pyref; torchvision installed with --no-deps) it
writes networks_torch2.txt, which test_networks checks: tstor follows 2.x. torchvision's resnet18 and
mobilenet_v3_small and torch.nn's TransformerEncoderLayer are built with random
weights (no download), moved to the meta device and run forward once under a
TorchFunctionMode that records every call of torch's Python API that makes a
tensor: F.conv2d, F.batch_norm, relu, view, bmm and so on, the calls inside
F.multi_head_attention_forward included. Each call becomes one line,

    %OUT[,%OUT...] = OP ARG ARG ... => LAYOUT [LAYOUT...]

where an ARG is %N (an earlier result, the input or a parameter), or a token of
shapes.txt (i: l: f: n: w: d:), with the call's arguments bound to the
operation's full signature so that every default is written out; a LAYOUT is
DTYPE:SIZES:STRIDES as PyTorch's meta tensor had it. Parameters and buffers
appear as "%N = param => LAYOUT" before their first use, the network's input as
"%N = input => LAYOUT". The C test replays every line through tstor's shape
inference on tstor's meta device and compares each layout. The output is
deterministic.
"""
import os
import sys
import warnings

import torch
import torchvision
from torch.overrides import TorchFunctionMode

warnings.filterwarnings("ignore")
F = torch.nn.functional


def name_of(d):
    return str(d).replace("torch.", "")


def layout(t):
    return "%s:%s:%s" % (name_of(t.dtype), ",".join(map(str, t.shape)),
                         ",".join(map(str, t.stride())))


def pair(v, n=2):
    return list(v) if isinstance(v, (list, tuple)) else [v] * n


# Each recorded op: its positional parameter names and their defaults (None
# where a value is required), then how each is written.
SIGNATURES = {
    "conv2d": (["input", "weight", "bias", "stride", "padding", "dilation", "groups"],
               [None, None, None, 1, 0, 1, 1]),
    "batch_norm": (["input", "running_mean", "running_var", "weight", "bias", "training",
                    "momentum", "eps"], [None, None, None, None, None, False, 0.1, 1e-5]),
    "layer_norm": (["input", "normalized_shape", "weight", "bias", "eps"],
                   [None, None, None, None, 1e-5]),
    "relu": (["input", "inplace"], [None, False]),
    "hardswish": (["input", "inplace"], [None, False]),
    "hardsigmoid": (["input", "inplace"], [None, False]),
    "gelu": (["input", "approximate"], [None, "none"]),
    "dropout": (["input", "p", "training", "inplace"], [None, 0.5, True, False]),
    "max_pool2d": (["input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                    "return_indices"], [None, None, None, 0, 1, False, False]),
    "adaptive_avg_pool2d": (["input", "output_size"], [None, None]),
    "flatten": (["input", "start_dim", "end_dim"], [None, 0, -1]),
    "linear": (["input", "weight", "bias"], [None, None, None]),
    "add": (["input", "other"], [None, None]),
    "add_": (["input", "other"], [None, None]),
    "mul": (["input", "other"], [None, None]),
    "div": (["input", "other"], [None, None]),
    "bmm": (["input", "mat2"], [None, None]),
    "softmax": (["input", "dim", "_stacklevel", "dtype"], [None, None, 3, None]),
    "chunk": (["input", "chunks", "dim"], [None, None, 0]),
    "contiguous": (["input"], [None]),
    "transpose": (["input", "dim0", "dim1"], [None, None, None]),
    "view": (["input", "size"], [None, None]),
    # called by torch 2.x's multi_head_attention_forward (compare-torch2.sh)
    "unflatten": (["input", "dim", "sizes"], [None, None, None]),
    "unsqueeze": (["input", "dim"], [None, None]),
    "squeeze": (["input", "dim"], [None, None]),
    "__getitem__": (["input", "index"], [None, None]),
    "permute": (["input", "dims"], [None, None]),
    "reshape": (["input", "shape"], [None, None]),
    "scaled_dot_product_attention": (["query", "key", "value", "attn_mask", "dropout_p", "is_causal",
                                      "scale", "enable_gqa"], [None, None, None, None, 0.0, False, None,
                                                               False]),
}
# Arguments written as a pair (H, W) whatever form the module gave them in.
PAIRS = {("conv2d", "stride"), ("conv2d", "dilation"), ("max_pool2d", "kernel_size"),
         ("max_pool2d", "stride"), ("max_pool2d", "padding"), ("max_pool2d", "dilation"),
         ("adaptive_avg_pool2d", "output_size")}
SKIPPED = {"dim", "size", "__get__", "to", "empty"}  # no tensor made


class Recorder(TorchFunctionMode):
    def __init__(self, lines):
        super().__init__()
        self.lines = lines
        self.ids = {}   # id(tensor) -> its number
        self.keep = []  # every tensor seen, so that no id() is reused

    def ref(self, t):
        if id(t) not in self.ids:
            self.ids[id(t)] = len(self.keep)
            self.keep.append(t)
            kind = "param" if isinstance(t, torch.nn.Parameter) or self.ids[id(t)] else "input"
            self.lines.append("%%%d = %s => %s" % (self.ids[id(t)], kind, layout(t)))
        return "%%%d" % self.ids[id(t)]

    def new(self, t):
        self.ids[id(t)] = len(self.keep)
        self.keep.append(t)
        return "%%%d" % self.ids[id(t)]

    def token(self, op, pname, v):
        if isinstance(v, torch.Tensor):
            return self.ref(v)
        if (op, pname) in PAIRS and v is not None:
            return "l:" + ",".join(map(str, pair(v)))
        if v is None:
            return "n:"
        if isinstance(v, bool):
            return "i:%d" % v
        if isinstance(v, int):
            return "i:%d" % v
        if isinstance(v, float):
            return "f:%r" % v
        if isinstance(v, str):
            return "w:" + v
        if isinstance(v, torch.dtype):
            return "d:" + name_of(v)
        if isinstance(v, (list, tuple, torch.Size)):
            return "l:" + ",".join(str(int(x)) for x in v)
        raise TypeError((op, pname, v))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.multi_head_attention_forward:
            # record what it is made of: run its body with this mode pushed
            # again, past its own check for a mode
            saved = F.has_torch_function
            F.has_torch_function = lambda *a: False
            try:
                with self.inner():
                    return func(*args, **kwargs)
            finally:
                F.has_torch_function = saved
        name = getattr(func, "__name__", str(func))
        if name in SKIPPED:
            return func(*args, **kwargs)
        if name not in SIGNATURES:
            raise NotImplementedError("gen_networks.py: no signature for %s" % name)
        names, defaults = SIGNATURES[name]
        bound = list(defaults)
        if name in ("view", "permute", "reshape"):  # view(*sizes) or view(sizes)
            bound = [args[0], list(args[1]) if len(args) == 2 and not isinstance(args[1], int)
                     else list(args[1:])]
        else:
            for i, a in enumerate(args):
                bound[i] = a
            for k, v in kwargs.items():
                bound[names.index(k)] = v
        if name == "max_pool2d" and bound[2] is None or (name == "max_pool2d" and bound[2] == []):
            bound[2] = bound[1]  # PyTorch's default stride: the kernel
        toks = [self.token(name, n, v) for n, v in zip(names, bound)]
        r = func(*args, **kwargs)
        outs = list(r) if isinstance(r, tuple) else [r]
        ids = [self.new(t) for t in outs]
        self.lines.append("%s = %s %s => %s" % (",".join(ids), name, " ".join(toks),
                                                " ".join(layout(t) for t in outs)))
        return r

    def inner(self):
        """A recorder of the same network, to push while this one is running."""
        r = Recorder(self.lines)
        r.ids, r.keep = self.ids, self.keep
        return r


def record(label, model, x):
    lines = ["net " + label]
    torch.manual_seed(0)
    model = model.to("meta").eval()
    with Recorder(lines):
        model(x.to("meta"))
    lines.append("end " + label)
    return lines


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch.manual_seed(0)
    lines = []
    lines += record("resnet18", torchvision.models.resnet18(), torch.empty(2, 3, 224, 224))
    lines += record("resnet18-channels-last", torchvision.models.resnet18(),
                    torch.empty(2, 3, 224, 224).to(memory_format=torch.channels_last))
    lines += record("mobilenet_v3_small", torchvision.models.mobilenet_v3_small(),
                    torch.empty(2, 3, 224, 224))
    lines += record("transformer_encoder_layer", torch.nn.TransformerEncoderLayer(64, 4, 128),
                    torch.empty(10, 2, 64))
    lines += record("transformer_encoder_layer-gelu-batch-first",
                    torch.nn.TransformerEncoderLayer(64, 8, 256, activation="gelu",
                                                     batch_first=True, norm_first=True),
                    torch.empty(3, 7, 64))
    # torch 2.x writes networks_torch2.txt, what test_networks checks; with
    # TSTOR_GEN_ALL_VERSIONS=1 networks.txt (1.13's record), for compare-torch2.sh
    name = "networks.txt"
    if int(torch.__version__.split(".")[0]) >= 2 and not os.environ.get("TSTOR_GEN_ALL_VERSIONS"):
        name = "networks_torch2.txt"
    with open(out + "/" + name, "w") as f:
        f.write("# PyTorch %s; torchvision %s, meta device, tests/vectors/gen_networks.py\n"
                % (torch.__version__, torchvision.__version__))
        for line in lines:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
