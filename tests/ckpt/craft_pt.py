"""torch.save files written without PyTorch, for the trees the command-line
tests need that no golden file holds: names that collide when dotted, names
with control characters, and small files whose names repeat long keys a
hundred thousand times, and a large legitimate model for the bound that stops
those.

    craft_pt.py KIND OUT

The pickle names torch's rebuild function and storage classes as torch.save
writes them (protocol 2, persistent ids ('storage', class, key, location,
numel)), through stand-in modules, so that any Python writes them and
torch.load reads them: cli.sh loads each with it where PyTorch is installed.
"""
import collections
import pickle
import struct
import sys
import types
import zipfile

# Stand-ins for torch._utils._rebuild_tensor_v2 and torch.FloatStorage: pickle
# writes a function or class as its module and name.
torch = types.ModuleType("torch")
utils = types.ModuleType("torch._utils")


def _rebuild_tensor_v2(*args):
    raise AssertionError("never called: the file is only written")


class FloatStorage:
    pass


_rebuild_tensor_v2.__module__ = "torch._utils"
FloatStorage.__module__ = "torch"
utils._rebuild_tensor_v2 = _rebuild_tensor_v2
torch._utils = utils
torch.FloatStorage = FloatStorage
sys.modules["torch"], sys.modules["torch._utils"] = torch, utils


class Storage:
    def __init__(self, key, values):
        self.key, self.values = key, values


class Tensor:
    """A float32 tensor viewing `storage` from `offset` with `size` and `stride`."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride)

    def __reduce__(self):
        storage, offset, size, stride = self.args
        return (_rebuild_tensor_v2, (storage, offset, size, stride, False, collections.OrderedDict()))


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", FloatStorage, obj.key, "cpu", len(obj.values))
        return None


def save(tree, storages, path):
    import io

    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(tree)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/byteorder", "little")
        for s in storages:
            z.writestr("archive/data/" + s.key, struct.pack("<%df" % len(s.values), *s.values))
        z.writestr("archive/version", "3\n")


def vector(key, n, start=0.0):
    s = Storage(key, [start + i for i in range(n)])
    return s, Tensor(s, 0, (n,), (1,))


def collide(path):
    """{"a.b": x, "a": {"b": y}}: both dotted a.b; {"x[0]": z, "x": [w]}: both x[0]."""
    parts = [vector(str(i), 2, 10.0 * i) for i in range(4)]
    tree = {"a.b": parts[0][1], "a": {"b": parts[1][1]}, "x[0]": parts[2][1], "x": [parts[3][1]]}
    save(tree, [s for s, _ in parts], path)


def control(path):
    """Two names with ESC, CR and BEL that share one storage: safetensors
    refuses the pair, quoting both names."""
    s = Storage("0", [1.0, 2.0, 3.0, 4.0])
    tree = {"evil\x1b[2K\rname": Tensor(s, 0, (2,), (1,)), "bell\x07": Tensor(s, 2, (2,), (1,))}
    save(tree, [s], path)


def amplify(path):
    """A tensor named 60000 times under 200 nested keys of 1000 characters:
    about 300 KB of file, 24 GB of names if every path were spelled out."""
    s, t = vector("0", 1)
    node = [t] * 60000
    for depth in range(200):
        node = {"k%03d" % depth + "x" * 996: node}
    save(node, [s], path)


def model(path):
    """A legitimate large tree for the same bound: 120000 tensors nested eight
    deep as Lua models nest their modules, each its own view of one storage,
    in a file of several megabytes. Never cut."""
    s = Storage("0", [0.5] * 64)
    blocks = []
    for b in range(1000):
        layers = []
        for layer in range(20):
            p = {name: Tensor(s, (b + layer + i) % 60, (2, 2), (2, 1)) for i, name in
                 enumerate(["weight", "bias", "running_mean", "running_var", "gradWeight", "gradBias"])}
            layers.append({"modules": [{"attention": {"output": p}}]})
        blocks.append({"modules": layers})
    save({"model": {"encoder": {"modules": blocks}}}, [s], path)


if __name__ == "__main__":
    kinds = {"collide": collide, "control": control, "amplify": amplify, "model": model}
    kinds[sys.argv[1]](sys.argv[2])
