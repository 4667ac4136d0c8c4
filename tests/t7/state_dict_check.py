"""A Lua model migrated with `tstor convert --state-dict`, checked by PyTorch.

    state_dict_check.py TSTOR OUTDIR GMODULE

Writes a Torch7 model as Lua Torch's nn writes one (gen_t7's writer, which
gives Torch7's own bytes): nn.Sequential of SpatialConvolutionMM (its weight
2-d), SpatialBatchNormalization, ReLU, View, Linear, and a ConcatTable of two
Linear inside a second Sequential. tstor converts it to a state_dict; the
equivalent PyTorch module must load it with load_state_dict(strict=True), and
its output on an input must equal the forward pass that the Torch7 weights
imply, computed with numpy from the file as torchfile (an independent Torch7
reader) reads it.

Then a model Lua Torch itself wrote: GMODULE, python-torchfile's
gmodule_with_linear_identity.t7 (tests/corpus/SOURCES), the nngraph
nn.gModule({a, b}, {nn.CAddTable()({b, c})}) with a, b = nn.Identity()() and
c = nn.Linear(1, 2)(a). Its modules in forward order are Identity,
Identity, Linear, CAddTable, so the Linear is "2"; the PyTorch module holds
parameterless modules at 0, 1 and 3. Its output for (a, b) must equal
b + W a + bias, computed in float64 with numpy from torchfile's values.
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torchfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_t7  # noqa: E402
from gen_t7 import T7Object, T7Tensor, T7Storage  # noqa: E402

tstor, out, gmodule = sys.argv[1], sys.argv[2], sys.argv[3]
rng = np.random.default_rng(7)


def tensor(shape, values=None):
    n = int(np.prod(shape))
    vals = rng.standard_normal(n).astype(np.float32) if values is None else np.asarray(values, np.float32)
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    return T7Tensor('Float', list(shape), strides, 1, T7Storage('Float', [float(v) for v in vals.ravel()]))


def empty():
    return T7Tensor('Float', [], [], 1, None)


def module(cls, **fields):
    fields.setdefault('train', False)
    fields.setdefault('output', empty())
    fields.setdefault('gradInput', empty())
    return T7Object(cls, 1, fields)


conv = module('nn.SpatialConvolutionMM', nInputPlane=2, nOutputPlane=3, kW=3, kH=3, dW=1, dH=1,
              padW=1, padH=1, weight=tensor([3, 2 * 3 * 3]), bias=tensor([3]),
              gradWeight=tensor([3, 18], [0] * 54), gradBias=tensor([3], [0] * 3),
              finput=empty(), fgradInput=empty())
bn = module('nn.SpatialBatchNormalization', eps=1e-5, momentum=0.1, affine=True,
            weight=tensor([3]), bias=tensor([3]), running_mean=tensor([3]),
            running_var=tensor([3], rng.uniform(0.5, 2.0, 3)), gradWeight=tensor([3], [0] * 3),
            gradBias=tensor([3], [0] * 3))
relu = module('nn.ReLU', inplace=False, threshold=0, val=0)
view = module('nn.View', size=T7Tensor('Long', [1], [1], 1, T7Storage('Long', [48])), numElements=48)
lin = module('nn.Linear', weight=tensor([5, 48]), bias=tensor([5]), gradWeight=tensor([5, 48], [0] * 240),
             gradBias=tensor([5], [0] * 5))
heads = module('nn.ConcatTable', modules=[module('nn.Linear', weight=tensor([2, 5]), bias=tensor([2])),
                                          module('nn.Linear', weight=tensor([4, 5]), bias=tensor([4]))])
model = module('nn.Sequential', modules=[conv, bn, relu, view, lin, module('nn.Sequential', modules=[heads])])
t7 = os.path.join(out, 'model.t7')
with open(t7, 'wb') as f:
    f.write(gen_t7.write(model))
pt = os.path.join(out, 'model.pt')
subprocess.run([tstor, 'convert', '--state-dict', t7, pt], check=True)


class Heads(torch.nn.Module):  # what ConcatTable does: each head on the same input
    def __init__(self):
        super().__init__()
        self.add_module('0', torch.nn.Linear(5, 2))
        self.add_module('1', torch.nn.Linear(5, 4))

    def forward(self, x):
        return [m(x) for m in self.children()]


net = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
                          torch.nn.Flatten(0), torch.nn.Linear(48, 5), torch.nn.Sequential(Heads()))
sd = torch.load(pt, weights_only=True)
net.load_state_dict(sd, strict=True)
net.eval()
x = rng.standard_normal((2, 4, 4)).astype(np.float32)
got = [h.detach().numpy() for h in net(torch.from_numpy(x).unsqueeze(0))]

# the forward pass the Torch7 weights imply, from torchfile's reading
m = torchfile.load(t7)
c, b, _, _, l, tail = m.modules
w = np.asarray(c.weight).reshape(3, 2, 3, 3)
xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
y = np.zeros((3, 4, 4), np.float64)
for o in range(3):
    for i in range(4):
        for j in range(4):
            y[o, i, j] = np.sum(w[o] * xp[:, i:i + 3, j:j + 3]) + c.bias[o]
y = (y - np.asarray(b.running_mean)[:, None, None]) / np.sqrt(np.asarray(b.running_var)[:, None, None] + b.eps)
y = y * np.asarray(b.weight)[:, None, None] + np.asarray(b.bias)[:, None, None]
y = np.maximum(y, 0).reshape(48)
y = np.asarray(l.weight) @ y + np.asarray(l.bias)
want = [np.asarray(h.weight) @ y + np.asarray(h.bias) for h in tail.modules[0].modules]
for g, w_ in zip(got, want):
    np.testing.assert_allclose(g.ravel(), w_, rtol=1e-4, atol=1e-5)
print('state_dict: %d tensors, loaded with strict=True; outputs equal to the Torch7 forward pass'
      % len(sd))
print('names:', ' '.join(sd))


# ---- the real gModule
class GModule(torch.nn.Module):  # nn.gModule({a, b}, {nn.CAddTable()({b, nn.Linear(1, 2)(a)})})
    def __init__(self):
        super().__init__()
        self.add_module('0', torch.nn.Identity())
        self.add_module('1', torch.nn.Identity())
        self.add_module('2', torch.nn.Linear(1, 2, dtype=torch.float64))
        self.add_module('3', torch.nn.Identity())  # CAddTable: b + c, in forward

    def forward(self, a, b):
        a, b = getattr(self, '0')(a), getattr(self, '1')(b)
        return getattr(self, '3')(b + getattr(self, '2')(a))


pt = os.path.join(out, 'gmodule.pt')
subprocess.run([tstor, 'convert', '--state-dict', gmodule, pt], check=True)
sd = torch.load(pt, weights_only=True)
g = GModule()
g.load_state_dict(sd, strict=True)
lua = torchfile.load(gmodule)
kinds = [x.torch_typename().decode() for x in lua[b'modules']]
assert kinds == ['nn.Identity', 'nn.Identity', 'nn.Linear', 'nn.CAddTable'], kinds
W, bias = np.asarray(lua[b'modules'][2][b'weight']), np.asarray(lua[b'modules'][2][b'bias'])
inputs = [(np.array([0.0]), np.array([0.0, 0.0])), (np.array([1.0]), np.array([0.0, 0.0])),
          (np.array([-2.5]), np.array([3.0, -1.25])), (np.array([1e3]), np.array([-7.0, 0.5]))]
with torch.no_grad():
    for a, b in inputs:
        got = g(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        want = b + (W @ a + bias)
        assert got.dtype == np.float64 and np.array_equal(got, want), (a, b, got, want)
print('gModule (python-torchfile gmodule_with_linear_identity.t7): state_dict %s, loaded with strict=True'
      % ' '.join('%s%s' % (k, list(v.shape)) for k, v in sd.items()))
print('gModule: %d inputs (a, b), output equal to b + W a + bias from torchfile, float64, bit for bit'
      % len(inputs))
