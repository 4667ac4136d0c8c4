#!/usr/bin/python3
"""A tstor device type as PyTorch's PrivateUse1 device, through libtstor-torch.

Run by pytorch/run.sh in make check on hpu-stub, on each PyTorch line
(TSTOR_TORCH_LIB names the library, TSTOR_BACKEND_DIR the backends), and by a
backend author on theirs (docs/pytorch.md): nothing here is particular to
hpu-stub. The device is tstor_torch.name: "privateuseone" on 1.13, the name
tstor_torch gives it on 2.x. The cases follow PyTorch's device-generic tests:
test_torch.py's copies between devices and dtypes, empty and empty_strided,
views and strides, resize_, fill_ and item, and the open-registration tests'
allocation and fallback checks. hpu-stub's memory faults when the host
touches it, so every case that passes there shows PyTorch reached the
device's bytes only through tstor. Each result is compared with the same
computation on the cpu.
"""
import ctypes
import os
import subprocess
import sys
import unittest

import torch

import tstor_torch
from devices import D1, DEV, DEV1, allocated, two_devices

LIB = tstor_torch._library()
TORCH_2 = tstor_torch.TORCH_2
DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
          torch.bool]


def sample(dtype, shape=(3, 4)):
    """Distinct, exactly representable values of dtype."""
    n = 1
    for s in shape:
        n *= s
    v = torch.arange(n, dtype=torch.float64).reshape(shape)
    if dtype == torch.bool:
        return (v.long() % 3 == 0)
    if dtype.is_complex:
        return torch.complex(v, -v).to(dtype)
    return v.to(dtype)


class Case(unittest.TestCase):
    """Every byte tstor holds on the first two devices comes back by the end."""

    def setUp(self):
        self.before = allocated()

    def tearDown(self):
        after = allocated()
        self.assertEqual(after, self.before, "bytes left on the device after the test")

    def train_alike(self, widths, batch, where, ref_where, lr, **close):
        """Three steps of SGD with momentum (learning rate lr) and of Adam on
        an MLP of the given widths on `where`, and the same steps from the
        same weights and batches on `ref_where`: after each step the losses
        and every parameter are torch.allclose(**close)."""
        def mlp():
            return torch.nn.Sequential(torch.nn.Linear(widths[0], widths[1]), torch.nn.ReLU(),
                                       torch.nn.Linear(widths[1], widths[2]))
        for name, make in (("SGD", lambda p: torch.optim.SGD(p, lr=lr, momentum=0.9)),
                           ("Adam", lambda p: torch.optim.Adam(p, lr=0.01))):
            with self.subTest(optimizer=name):
                torch.manual_seed(0)
                model, ref = mlp(), mlp()
                ref.load_state_dict(model.state_dict())
                model, ref = model.to(where), ref.to(ref_where)
                opt, ref_opt = make(model.parameters()), make(ref.parameters())
                for step in range(3):
                    x, target = torch.randn(batch, widths[0]), torch.randn(batch, widths[2])
                    losses = []
                    for m, o, dev in ((model, opt, where), (ref, ref_opt, ref_where)):
                        o.zero_grad()
                        loss = torch.nn.functional.mse_loss(m(x.to(dev)), target.to(dev))
                        loss.backward()
                        o.step()
                        losses.append(loss.detach().cpu())
                    self.assertTrue(torch.allclose(losses[0], losses[1], **close), "step %d" % step)
                    for p, q in zip(model.parameters(), ref.parameters()):
                        self.assertEqual(p.device.type, torch.device(where).type)
                        self.assertTrue(torch.allclose(p.cpu(), q.cpu(), **close), "step %d" % step)
                del model, opt


class Device(Case):
    def test_issue_example(self):
        if TORCH_2:  # issue 46's: randn on the device by its name
            torch.manual_seed(3)
            want = torch.randn(3, 4)
            getattr(torch, DEV).manual_seed(3)
            r = torch.randn(3, 4, device=DEV + ":0")
            self.assertEqual(r.device, torch.device(DEV, 0))
            self.assertTrue(torch.equal(r.cpu(), want))
            del r
        x = torch.arange(12.).reshape(3, 4).to(DEV1)
        y = (x.t() * 2).contiguous()
        self.assertEqual(y.device, torch.device(DEV, D1))
        self.assertTrue(torch.equal(y.cpu(), torch.arange(12.).reshape(3, 4).t() * 2))
        self.assertEqual(x.storage().nbytes(), 48)

    def test_device_type(self):
        # the type TSTOR_TORCH_DEVICE names, and on 2.x the name PyTorch
        # knows the device by: the type's own where PyTorch has none of that
        # name (it has hpu), else "tstor", unless TSTOR_TORCH_NAME says
        want = os.environ.get("TSTOR_TORCH_DEVICE")
        if want:
            self.assertEqual(torch.ops.tstor.device_type(), want)
        kind = tstor_torch.device_type
        if not TORCH_2:
            self.assertEqual(DEV, "privateuseone")
        elif os.environ.get("TSTOR_TORCH_NAME"):
            self.assertEqual(DEV, os.environ["TSTOR_TORCH_NAME"])
        elif kind in ("hpu", "cuda", "cpu", "meta", "xpu", "mps"):
            self.assertEqual(DEV, "tstor")
        else:
            self.assertEqual(DEV, kind)
        self.assertEqual(torch.empty(1, device=DEV).device.type, DEV)

    def test_copy_every_dtype_both_ways(self):
        for dt in DTYPES:
            with self.subTest(dtype=dt):
                c = sample(dt)
                d = c.to(DEV)
                self.assertEqual(d.dtype, dt)
                self.assertEqual(d.device.type, DEV)
                self.assertTrue(torch.equal(d.cpu(), c))

    def test_copy_converting(self):
        # test_torch's test_copy_all_dtypes_and_devices: copy_ across dtypes
        for src in DTYPES:
            for dst in (torch.float32, torch.int64, torch.bool, torch.complex128):
                if src.is_complex and not dst.is_complex:
                    continue  # PyTorch warns and drops the imaginary part
                with self.subTest(src=src, dst=dst):
                    c = sample(src)
                    out = torch.empty(3, 4, dtype=dst, device=DEV)
                    out.copy_(c.to(DEV))
                    self.assertTrue(torch.equal(out.cpu(), c.to(dst)))

    def test_copy_device_to_device(self):
        c = sample(torch.float32, (4, 5))
        a = c.to(DEV + ":0")
        b = a.to(DEV1)
        self.assertEqual(b.device.index, D1)
        self.assertTrue(torch.equal(b.cpu(), c))
        # strided source and destination
        dst = torch.zeros(5, 4, device=DEV1)
        dst.copy_(a.t())
        self.assertTrue(torch.equal(dst.cpu(), c.t()))
        back = torch.zeros(8, 10, device=DEV)[::2, ::2]
        back.copy_(b)
        self.assertTrue(torch.equal(back.cpu(), c))

    def test_copy_broadcast_into_device(self):
        dst = torch.zeros(3, 4, device=DEV)
        dst.copy_(torch.arange(4.))
        self.assertTrue(torch.equal(dst.cpu(), torch.arange(4.).expand(3, 4)))

    def test_empty_and_empty_strided(self):
        e = torch.empty(2, 3, device=DEV)
        self.assertEqual((e.shape, e.stride()), (torch.Size([2, 3]), (3, 1)))
        s = torch.empty_strided((2, 3), (1, 2), device=DEV)
        self.assertEqual(s.stride(), (1, 2))
        z = torch.empty(0, 4, device=DEV)
        self.assertEqual(z.numel(), 0)
        self.assertEqual(z.cpu().shape, torch.Size([0, 4]))
        cl = torch.empty(2, 3, 4, 5, device=DEV, memory_format=torch.channels_last)
        self.assertEqual(cl.stride(), (60, 1, 15, 3))

    def test_views_and_strides(self):
        c = sample(torch.float32, (4, 6))
        d = c.to(DEV)
        for f in (lambda t: t.view(-1), lambda t: t.view(3, 8), lambda t: t.t(),
                  lambda t: t[1:, ::2], lambda t: t.transpose(0, 1)[2], lambda t: t.unsqueeze(1),
                  lambda t: t.as_strided((2, 2), (6, 1), 3), lambda t: t.reshape(2, 12),
                  lambda t: t.narrow(1, 2, 3), lambda t: t.expand(2, 4, 6)):
            with self.subTest(f=f):
                v = f(d)
                self.assertEqual(v.device.type, DEV)
                self.assertEqual(v.stride(), f(c).stride())
                self.assertEqual(v.storage_offset(), f(c).storage_offset())
                self.assertTrue(torch.equal(v.cpu(), f(c)))
                # a view shares the storage: writing through it shows in d
                self.assertEqual(v.storage().data_ptr(), d.storage().data_ptr())

    def test_write_through_view(self):
        d = torch.zeros(3, 4, device=DEV)
        d[:, 1].fill_(5)
        d.t()[2].copy_(torch.tensor([1., 2., 3.]))
        c = torch.zeros(3, 4)
        c[:, 1] = 5
        c[:, 2] = torch.tensor([1., 2., 3.])
        self.assertTrue(torch.equal(d.cpu(), c))

    def test_resize(self):
        d = torch.empty(0, device=DEV)
        d.resize_(4, 5)
        self.assertEqual(d.shape, torch.Size([4, 5]))
        self.assertGreaterEqual(d.storage().nbytes(), 80)
        x = torch.arange(6.).to(DEV)
        x.resize_(10)  # grows: the first six elements survive
        self.assertTrue(torch.equal(x[:6].cpu(), torch.arange(6.)))
        x.resize_(2, 3)
        self.assertTrue(torch.equal(x.cpu(), torch.arange(6.).view(2, 3)))

    def test_fill_zero_item(self):
        for dt in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bool,
                   torch.float16, torch.uint8):
            with self.subTest(dtype=dt):
                d = torch.empty(2, 3, dtype=dt, device=DEV)
                d.fill_(1)
                self.assertTrue(torch.equal(d.cpu(), torch.ones(2, 3, dtype=dt)))
                d.zero_()
                self.assertTrue(torch.equal(d.cpu(), torch.zeros(2, 3, dtype=dt)))
        self.assertEqual(torch.tensor(7.25).to(DEV).item(), 7.25)
        self.assertEqual(torch.tensor([3], dtype=torch.int64).to(DEV).item(), 3)
        self.assertEqual(torch.full((2, 2), 2.5, device=DEV).cpu().tolist(), [[2.5, 2.5], [2.5, 2.5]])

    def test_fill_as_pytorch_converts(self):
        # values a float64 cannot hold, complex values, and every layout:
        # dense, permuted, strided, expanded (stride 0), and as_strided with
        # elements that overlap
        values = [2 ** 62 + 1, -(2 ** 63), 1 + 2j, -0.0, float("nan"), float("inf"), 65504.0,
                  1e-8, True, 255, 3.7]
        layouts = [lambda t: t, lambda t: t.t(), lambda t: t[:, ::2],
                   lambda t: t[:1].expand(4, 6), lambda t: t.as_strided((3, 3), (1, 1))]
        for dt in DTYPES:
            for v in values:
                for k, layout in enumerate(layouts):
                    with self.subTest(dtype=dt, value=v, layout=k):
                        want = torch.zeros(4, 6, dtype=dt)
                        try:
                            layout(want).fill_(v)
                        except RuntimeError as e:
                            with self.assertRaises(RuntimeError) as got:
                                layout(torch.zeros(4, 6, dtype=dt, device=DEV)).fill_(v)
                            self.assertEqual(str(got.exception).split("\n")[0],
                                             str(e).split("\n")[0])
                            continue
                        d = torch.zeros(4, 6, dtype=dt, device=DEV)
                        layout(d).fill_(v)
                        self.assertTrue(torch.equal(d.cpu().view(torch.uint8),
                                                    want.view(torch.uint8)))

    def test_inplace_fallback_into_a_strided_view(self):
        # the fallback copies its result back with _copy_from_and_resize; the
        # view's sizes already match, so its strides must stay
        for make in (lambda t: t.narrow(1, 1, 2), lambda t: t.t(), lambda t: t[::2]):
            d, c = torch.zeros(4, 3, device=DEV), torch.zeros(4, 3)
            make(d).add_(1)
            make(c).add_(1)
            self.assertTrue(torch.equal(d.cpu(), c))
            out_d, out_c = torch.zeros(3, 4, device=DEV), torch.zeros(3, 4)
            torch.add(torch.ones(4, 3, device=DEV), 2, out=out_d.t())
            torch.add(torch.ones(4, 3), 2, out=out_c.t())
            self.assertTrue(torch.equal(out_d.cpu(), out_c))
        with self.assertRaisesRegex(RuntimeError, "Unsupported memory format"):
            torch.zeros(2, device=DEV).resize_(3, memory_format=torch.preserve_format)

    def test_device_indices(self):
        x = torch.arange(12.).reshape(3, 4)
        d = x.to(DEV)
        mask, idx = x > 4, torch.tensor([2, 0])
        self.assertTrue(torch.equal(d[mask.to(DEV)].cpu(), x[mask]))
        self.assertTrue(torch.equal(d[idx.to(DEV)].cpu(), x[idx]))
        d[mask.to(DEV)] = -1.0
        x[mask] = -1.0
        self.assertTrue(torch.equal(d.cpu(), x))

    def test_ops_through_the_cpu_fallback(self):
        a = sample(torch.float32, (3, 4))
        b = sample(torch.float32, (4, 2)) / 7
        da, db = a.to(DEV), b.to(DEV)
        for f in (lambda x, y: x @ y, lambda x, y: (x.sum(0), y.max()), lambda x, y: torch.relu(x - 5),
                  lambda x, y: torch.cat([x, x]), lambda x, y: x.exp().log1p()):
            with self.subTest(f=f):
                got, want = f(da, db), f(a, b)
                got = got if isinstance(got, tuple) else (got,)
                want = want if isinstance(want, tuple) else (want,)
                for g, w in zip(got, want):
                    self.assertEqual(g.device.type, DEV)
                    self.assertTrue(torch.allclose(g.cpu(), w))

    def test_module_forward_and_backward(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        ref = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        ref.load_state_dict(model.state_dict())
        model = model.to(DEV)
        x, target = torch.randn(4, 5), torch.randn(4, 3)
        loss = torch.nn.functional.mse_loss(model(x.to(DEV)), target.to(DEV))
        loss.backward()
        ref_loss = torch.nn.functional.mse_loss(ref(x), target)
        ref_loss.backward()
        self.assertTrue(torch.allclose(loss.cpu(), ref_loss))
        for p, q in zip(model.parameters(), ref.parameters()):
            self.assertEqual(p.device.type, DEV)
            self.assertTrue(torch.allclose(p.grad.cpu(), q.grad, atol=1e-6))
        del model, loss

    def test_module_training_steps(self):
        # each step's parameters equal to the cpu's (the optimizers' foreach
        # and in-place updates run through the cpu fallback)
        self.train_alike((5, 8, 3), 4, DEV, "cpu", 0.1, atol=1e-6)

    def test_copies_of_conj_and_neg_views(self):
        # .conj() and _neg_view() set a bit instead of touching the bytes;
        # PyTorch's copy_ hands such a tensor to the device's _copy_from,
        # which must apply the bit (once, recursing through PyTorch's clone
        # overflowed the stack)
        c = torch.complex(sample(torch.float32), -sample(torch.float32) / 2)
        r = sample(torch.float32) - 5
        d, dr = c.to(DEV), r.to(DEV)
        cases = [("conj().cpu()", lambda t, u: t.conj().cpu()),
                 ("_neg_view().cpu()", lambda t, u: u._neg_view().cpu()),
                 ("conj().imag", lambda t, u: t.conj().imag.cpu()),
                 ("resolve_conj()", lambda t, u: t.conj().resolve_conj()),
                 ("resolve_neg()", lambda t, u: u._neg_view().resolve_neg()),
                 ("bits resolved", lambda t, u: torch.tensor([t.conj().resolve_conj().is_conj(),
                                                              u._neg_view().resolve_neg().is_neg()])),
                 ("clone()", lambda t, u: t.conj().clone()),
                 ("to(:1)", lambda t, u: t.conj().to(DEV1)),
                 ("strided", lambda t, u: t.t().conj()[::2].contiguous()),
                 ("cpu conj in", lambda t, u: torch.zeros_like(t).copy_(c.conj())),
                 ("into conj", lambda t, u: torch.zeros_like(t).conj().copy_(t)),
                 ("into neg", lambda t, u: torch.zeros_like(u)._neg_view().copy_(u)),
                 ("converting", lambda t, u: torch.zeros_like(t, dtype=torch.complex128)
                  .copy_(t.conj())),
                 ("fallback", lambda t, u: t.conj() * 2 + u._neg_view())]
        for name, f in cases:
            with self.subTest(case=name):
                got, want = f(d, dr), f(c, r)
                self.assertTrue(torch.equal(got.cpu().resolve_conj().resolve_neg(),
                                            want.resolve_conj().resolve_neg()))

    def test_storage_slices_are_views_of_the_device_bytes(self):
        # a slice of an untyped storage is a StorageImpl of PyTorch's whose
        # bytes lie inside the tensor's tstor storage. 1.13's Python reaches a
        # device storage's bytes through fill_ only; 2.x through set_ and
        # copy_ too
        modern = hasattr(torch.Tensor, "untyped_storage")
        untyped = (lambda t: t.untyped_storage()) if modern else (lambda t: t.storage().untyped())
        c = torch.arange(16, dtype=torch.uint8)
        d = c.to(DEV)
        untyped(d)[2:3].fill_(7)
        untyped(c)[2:3].fill_(7)
        untyped(d)[9:16].fill_(200)
        untyped(c)[9:16].fill_(200)
        self.assertTrue(torch.equal(d.cpu(), c))
        if not modern:
            return
        s = untyped(d)[5:13]
        self.assertEqual((s.nbytes(), s.device), (8, d.device))
        t = torch.tensor([], dtype=torch.uint8, device=DEV).set_(s)
        t.copy_(torch.arange(8, dtype=torch.uint8) + 100)
        untyped(c)[5:13].copy_(untyped(torch.arange(8, dtype=torch.uint8) + 100))
        self.assertTrue(torch.equal(d.cpu(), c))
        self.assertTrue(torch.equal(t.cpu(), c[5:13]))
        self.assertEqual(s.cpu().tolist(), c[5:13].tolist())
        del s, t

    def test_memory_returns(self):
        xs = [torch.empty(1000, device=DEV) for _ in range(10)]
        self.assertGreaterEqual(torch.ops.tstor.memory_allocated(0) - self.before[0], 40000)
        del xs  # tearDown checks that every byte went back

    @unittest.skipIf(TORCH_2, "2.x saves device tensors: test_save_and_load")
    def test_save_and_load_as_1_13_allows(self):
        # 1.13 cannot place a PrivateUse1 storage in a torch.save file or
        # restore one there (docs/pytorch.md): through the cpu, it round-trips
        import io
        x = sample(torch.float32, (2, 3)).to(DEV)
        with self.assertRaisesRegex(RuntimeError, "don't know how to determine data location"):
            torch.save(x, io.BytesIO())
        buf = io.BytesIO()
        torch.save({"w": x.cpu()}, buf)
        buf.seek(0)
        with self.assertRaisesRegex(RuntimeError, "don't know how to restore data location"):
            torch.load(buf, map_location=DEV1)
        buf.seek(0)
        y = torch.load(buf)["w"].to(DEV1)
        self.assertEqual(y.device, torch.device(DEV, D1))
        self.assertTrue(torch.equal(y.cpu(), x.cpu()))

    def test_module_functions(self):
        # tstor_torch's functions on both lines (on 2.x it is torch.<name>
        # too): the count, the current device per thread, synchronize, and
        # the memory statistics
        self.assertTrue(tstor_torch.is_available())
        self.assertEqual(tstor_torch.device_count(), torch.ops.tstor.device_count())
        with tstor_torch.device(D1):
            self.assertEqual(tstor_torch.current_device(), D1)
            x = torch.empty(100, device=DEV)
            self.assertEqual(x.device, torch.device(DEV, D1))
            tstor_torch.synchronize()
        self.assertEqual(tstor_torch.current_device(), 0)
        self.assertEqual(tstor_torch.memory_allocated(D1), self.before[D1] + 400)
        self.assertEqual(tstor_torch.memory_stats(D1)["allocated"], self.before[D1] + 400)
        del x

    def test_device_properties(self):
        # what the backend reports of the device (tstor_device_get_properties),
        # on both lines: free within total, an allocation lowers free by at
        # least its size, and the same id each time; where it reports no
        # memory, mem_get_info says so
        p = tstor_torch.get_device_properties(D1)
        self.assertEqual((p.type, p.index), (tstor_torch.device_type, D1))
        self.assertEqual(p.name, tstor_torch.get_device_name(D1))
        if tstor_torch.device_type == "hpu":  # hpu-stub reports everything
            self.assertEqual(p.id, "hpu-stub:%d" % D1)
            self.assertIn("properties", p.capabilities)
            self.assertIn("streams", p.capabilities)
        if p.free_memory is None or p.total_memory is None:
            with self.assertRaisesRegex(NotImplementedError, "does not report its"):
                tstor_torch.mem_get_info(D1)
            self.skipTest("the backend reports no free and total memory")
        free, total = tstor_torch.mem_get_info(D1)
        self.assertEqual(total, p.total_memory)
        self.assertLessEqual(free, total)
        if p.max_allocation is not None:
            self.assertLessEqual(p.max_allocation, p.free_memory)
        n = min(1 << 20, total // 4)
        reserved = tstor_torch.memory_reserved(D1)
        x = torch.empty(n, dtype=torch.uint8, device=DEV1)
        after, _ = tstor_torch.mem_get_info(D1)
        if tstor_torch.memory_reserved(D1) > reserved:  # not from a cache of freed blocks
            self.assertLessEqual(after + n, free)
        else:
            self.assertLessEqual(after, free)
        if p.alignment is not None:
            self.assertEqual(x.data_ptr() % p.alignment, 0)
        del x
        self.assertEqual(tstor_torch.get_device_properties(D1).id, p.id)
        if TORCH_2:  # torch.<name> and torch.accelerator ask the same
            self.assertEqual(getattr(torch, DEV).mem_get_info(D1), tstor_torch.mem_get_info(D1))
            self.assertEqual(torch.accelerator.get_memory_info(D1), tstor_torch.mem_get_info(D1))
            self.assertEqual(getattr(torch, DEV).get_device_properties(D1).total_memory, total)

    def test_bad_device_index(self):
        with self.assertRaisesRegex(RuntimeError, "does not exist"):
            torch.empty(1, device=DEV + ":5")


def needs_pinned_memory(test):
    """Skips test where no loaded backend offers tstor pinned host memory
    (hpu-stub and cuda do)."""
    try:
        torch.empty(1, pin_memory=True)
    except RuntimeError as why:
        if "pinned host memory" not in str(why):
            raise
        test.skipTest("no pinned host memory in this tstor context: "
                      + str(why).splitlines()[0])


class Tstor:
    """tstor's C API through ctypes, for the DLPack cases: the libtstor this
    process loaded with the library, and libtstor-io ($TSTOR_IO_LIB, else
    the one beside libtstor). DLPack 0.6, as core/io/dlpack.c speaks it:
    where tstor gains DLPack 1.x, export_capsule and import_capsule are the
    two places that change (capsule name "dltensor_versioned")."""

    class Device(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int32), ("index", ctypes.c_int32)]

    FLOAT32 = 6  # TSTOR_FLOAT32

    def __init__(self):
        with open("/proc/self/maps") as maps:
            core = next(line.split()[-1] for line in maps if "/libtstor.so" in line)
        self.core = ctypes.CDLL(core)
        io = os.environ.get("TSTOR_IO_LIB") or os.path.join(os.path.dirname(core),
                                                             "libtstor-io.so.1")
        self.io = ctypes.CDLL(io)
        for lib, name, args in (
                (self.core, "tstor_device_parse", [ctypes.c_void_p, ctypes.c_char_p,
                                                   ctypes.POINTER(self.Device)]),
                (self.core, "tstor_tensor_from_array", [ctypes.c_void_p, self.Device, ctypes.c_int,
                                                        ctypes.c_int, ctypes.c_void_p,
                                                        ctypes.c_void_p, ctypes.c_void_p]),
                (self.core, "tstor_tensor_to_array", [ctypes.c_void_p, ctypes.c_void_p,
                                                      ctypes.c_int, ctypes.c_size_t]),
                (self.core, "tstor_tensor_get_device", [ctypes.c_void_p]),
                (self.io, "tstor_dlpack_export", [ctypes.c_void_p, ctypes.c_void_p]),
                (self.io, "tstor_dlpack_import", [ctypes.c_void_p, ctypes.c_void_p,
                                                  ctypes.c_void_p])):
            getattr(lib, name).argtypes = args
            getattr(lib, name).restype = ctypes.c_int
        self.core.tstor_tensor_release.argtypes = [ctypes.c_void_p]
        self.core.tstor_last_error.restype = ctypes.c_char_p
        api = ctypes.pythonapi
        api.PyCapsule_New.restype = ctypes.py_object
        api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

    def ok(self, rc):
        if rc != 0:
            raise RuntimeError(self.core.tstor_last_error().decode())

    def tensor(self, device, values):
        """A float32 tstor tensor of `values` (a list) on device "type:index"."""
        dev = self.Device()
        self.ok(self.core.tstor_device_parse(None, device.encode(), ctypes.byref(dev)))
        data = (ctypes.c_float * len(values))(*values)
        sizes = (ctypes.c_int64 * 1)(len(values))
        t = ctypes.c_void_p()
        self.ok(self.core.tstor_tensor_from_array(None, dev, self.FLOAT32, 1, sizes, data,
                                                  ctypes.byref(t)))
        return t

    def values(self, t, count):
        out = (ctypes.c_float * count)()
        self.ok(self.core.tstor_tensor_to_array(t, out, self.FLOAT32, count))
        return list(out)

    def export_capsule(self, t):
        """A "dltensor" capsule of t (tstor_dlpack_export), for from_dlpack."""
        m = ctypes.c_void_p()
        self.ok(self.io.tstor_dlpack_export(t, ctypes.byref(m)))
        return ctypes.pythonapi.PyCapsule_New(m, b"dltensor", None)

    def import_capsule(self, capsule):
        """The tstor tensor a "dltensor" capsule holds, taking it over as a
        consumer does (the capsule is renamed "used_dltensor")."""
        m = ctypes.pythonapi.PyCapsule_GetPointer(capsule, b"dltensor")
        t = ctypes.c_void_p()
        self.ok(self.io.tstor_dlpack_import(None, m, ctypes.byref(t)))
        ctypes.pythonapi.PyCapsule_SetName(capsule, b"used_dltensor")
        return t


@unittest.skipUnless(TORCH_2, "what PyTorch 2.x gives a PrivateUse1 device")
class Torch2(Case):
    """What 2.x asks of a device, each compared with the cpu's behaviour."""

    def test_device_module(self):
        mod = getattr(torch, DEV)
        self.assertIs(mod, tstor_torch)
        self.assertTrue(mod.is_available())
        self.assertEqual(mod.device_count(), torch.ops.tstor.device_count())
        self.assertGreaterEqual(mod.device_count(), 1)
        self.assertEqual(mod.current_device(), 0)
        mod.set_device(D1)
        try:
            self.assertEqual(mod.current_device(), D1)
            self.assertEqual(torch.empty(1, device=DEV).device, torch.device(DEV, D1))
            with mod.device(0):
                self.assertEqual(torch.empty(1, device=DEV).device, torch.device(DEV, 0))
            self.assertEqual(mod.current_device(), D1)
        finally:
            mod.set_device(0)
        with self.assertRaisesRegex(RuntimeError, "does not exist"):
            mod.set_device(mod.device_count())
        mod.synchronize()
        mod.synchronize(D1)
        self.assertTrue(mod.get_device_name(0))
        # the generated methods
        x = torch.arange(3.)
        y = getattr(x, DEV)()
        self.assertEqual(y.device, torch.device(DEV, 0))
        self.assertTrue(getattr(y, "is_" + DEV))
        self.assertFalse(getattr(x, "is_" + DEV))
        m = getattr(torch.nn.Linear(2, 2), DEV)()
        self.assertEqual(m.weight.device.type, DEV)

    def test_memory_stats(self):
        mod = getattr(torch, DEV)
        mod.reset_peak_memory_stats()
        base = mod.memory_allocated()
        self.assertEqual(base, torch.ops.tstor.memory_allocated(0))
        x = torch.empty(1000, device=DEV)
        self.assertEqual(mod.memory_allocated(), base + 4000)
        # a backend may keep no counters but the bytes allocated (tstor_stats)
        counting = mod.memory_stats()["alloc_count"] > 0
        if counting:
            self.assertGreaterEqual(mod.memory_reserved(), mod.memory_allocated())
        del x
        self.assertEqual(mod.memory_allocated(), base)
        self.assertEqual(mod.memory_stats()["allocated"], base)
        mod.empty_cache()
        if not counting:
            self.skipTest("the backend keeps no counters but the bytes allocated")
        self.assertGreaterEqual(mod.max_memory_allocated(), base + 4000)
        mod.reset_peak_memory_stats()
        self.assertEqual(mod.max_memory_allocated(), base)

    def test_randn_and_the_seeded_generator(self):
        # the device draws the cpu's sequence for a seed, from its own state
        torch.manual_seed(7)
        d = torch.randn(3, 4, device=DEV)
        c = torch.randn(3, 4)  # the cpu's first draw after the seed too
        self.assertTrue(torch.equal(d.cpu(), c))
        torch.manual_seed(7)
        self.assertTrue(torch.equal(torch.randn(3, 4).cpu(), c))
        g = torch.Generator(device=DEV)
        self.assertEqual(g.device, torch.device(DEV, 0))
        g.manual_seed(11)
        a = torch.rand(5, device=DEV, generator=g)
        self.assertTrue(torch.equal(a.cpu(), torch.rand(5, generator=torch.Generator().manual_seed(11))))
        self.assertEqual(g.initial_seed(), 11)
        state = g.get_state()
        b = torch.rand(5, device=DEV, generator=g)
        g.set_state(state)
        self.assertTrue(torch.equal(torch.rand(5, device=DEV, generator=g).cpu(), b.cpu()))
        mod = getattr(torch, DEV)
        mod.manual_seed(3)
        self.assertEqual(mod.initial_seed(), 3)
        state = mod.get_rng_state()
        first = torch.randint(0, 100, (6,), device=DEV)
        mod.set_rng_state(state)
        self.assertTrue(torch.equal(torch.randint(0, 100, (6,), device=DEV).cpu(), first.cpu()))
        with torch.random.fork_rng(devices=[0], device_type=DEV):
            torch.randn(10, device=DEV)
        self.assertFalse(torch.equal(torch.randint(0, 100, (6,), device=DEV).cpu(), first.cpu()))
        self.assertEqual(torch.randn(2, 2, device=DEV).dtype, torch.float32)

    @two_devices
    def test_each_device_keeps_its_generator(self):
        getattr(torch, DEV).manual_seed_all(5)
        one = torch.randn(4, device=DEV1)
        zero = torch.randn(4, device=DEV + ":0")
        self.assertTrue(torch.equal(one.cpu(), zero.cpu()))

    def test_streams_and_events(self):
        mod = getattr(torch, DEV)
        self.assertEqual(mod.current_stream().stream_id, 0)
        self.assertEqual(mod.default_stream(D1).device, torch.device(DEV, D1))
        s = mod.Stream()
        self.assertEqual(s.device, torch.device(DEV, 0))
        self.assertNotEqual(s.stream_id, 0)
        e = mod.Event()
        with mod.stream(s):
            self.assertEqual(mod.current_stream(), s)
            x = torch.ones(4, device=DEV) * 3
            e.record()
        self.assertEqual(mod.current_stream().stream_id, 0)
        e.synchronize()
        self.assertTrue(e.query())
        s.synchronize()
        self.assertTrue(s.query())
        t = mod.Stream(D1)
        t.wait_event(e)  # an event of another device's stream: waited for by tstor
        t.wait_stream(s)
        t.synchronize()
        with torch.Stream(device=DEV) as u:  # PyTorch's own Stream, generic over devices
            self.assertEqual(mod.current_stream(), u)
        self.assertTrue(torch.equal(x.cpu(), torch.full((4,), 3.)))
        f = mod.Event(enable_timing=True)
        f.record()
        g = mod.Event(enable_timing=True)
        g.record()
        with self.assertRaisesRegex(RuntimeError, "keep no time"):
            f.elapsed_time(g)

    def test_save_and_load(self):
        import io
        base = torch.arange(12.).reshape(3, 4)
        x = base.to(DEV1)
        buf = io.BytesIO()
        torch.save({"x": x, "row": x[1], "t": x.t()}, buf)
        for where, device in ((None, torch.device(DEV, D1)), ("cpu", torch.device("cpu")),
                              (DEV + ":0", torch.device(DEV, 0)),
                              (torch.device(DEV, 0), torch.device(DEV, 0))):
            with self.subTest(map_location=where):
                buf.seek(0)
                got = torch.load(buf, map_location=where)
                self.assertEqual(got["x"].device, device)
                self.assertTrue(torch.equal(got["x"].cpu(), base))
                self.assertTrue(torch.equal(got["row"].cpu(), base[1]))
                self.assertTrue(torch.equal(got["t"].cpu(), base.t()))
                # storages shared in the file stay shared
                self.assertEqual(got["row"].untyped_storage().data_ptr(),
                                 got["x"].untyped_storage().data_ptr())
        # a cpu file onto the device, and the other way round
        buf = io.BytesIO()
        torch.save(base, buf)
        buf.seek(0)
        got = torch.load(buf, map_location=DEV)
        self.assertEqual(got.device, torch.device(DEV, 0))
        self.assertTrue(torch.equal(got.cpu(), base))
        buf = io.BytesIO()
        torch.save(torch.nn.Linear(3, 2).to(DEV).state_dict(), buf)
        buf.seek(0)
        state = torch.load(buf, map_location="cpu")
        self.assertEqual(state["weight"].device, torch.device("cpu"))

    def test_untyped_storage(self):
        c = torch.arange(6, dtype=torch.int16)
        d = c.to(DEV)
        s = d.untyped_storage()
        self.assertEqual((s.nbytes(), s.device), (12, d.device))
        self.assertEqual(s.cpu().tolist(), c.untyped_storage().tolist())
        t = torch.UntypedStorage(8, device=DEV)
        self.assertEqual(t.device, torch.device(DEV, 0))
        t.copy_(c.untyped_storage()[:8])
        self.assertEqual(t.cpu().tolist(), c.untyped_storage()[:8].tolist())
        s.resize_(16)  # grows, keeping its bytes
        self.assertEqual(s.cpu().tolist()[:12], c.untyped_storage().tolist())
        self.assertEqual(getattr(c.untyped_storage(), DEV)().device, torch.device(DEV, 0))
        del s, t, d

    def test_pinned_memory(self):
        needs_pinned_memory(self)
        x = torch.arange(10.)
        self.assertFalse(x.is_pinned())
        p = x.pin_memory()
        self.assertTrue(p.is_pinned())
        self.assertEqual(p.device, torch.device("cpu"))
        self.assertTrue(torch.equal(p, x))
        self.assertTrue(p[3:].is_pinned())  # an address inside a pinned block
        self.assertTrue(torch.empty(3, pin_memory=True).is_pinned())
        d = p.to(DEV, non_blocking=True)
        getattr(torch, DEV).synchronize()
        self.assertTrue(torch.equal(d.cpu(), x))
        back = torch.empty(10, pin_memory=True)
        back.copy_(d, non_blocking=True)
        getattr(torch, DEV).synchronize()
        self.assertTrue(torch.equal(back, x))

    def test_dlpack_both_ways(self):
        from torch.utils import dlpack
        c = torch.arange(12.).reshape(3, 4)
        d = c.to(DEV1)
        # within PyTorch: the device's bytes, not a copy
        e = dlpack.from_dlpack(dlpack.to_dlpack(d))
        self.assertEqual(e.device, torch.device(DEV, D1))
        self.assertEqual(e.data_ptr(), d.data_ptr())
        e[0, 0] = 100.
        self.assertEqual(d[0, 0].item(), 100.)
        t = dlpack.from_dlpack(dlpack.to_dlpack(d.t()))
        self.assertEqual(t.stride(), d.t().stride())
        del e, t
        try:
            api = Tstor()
        except (OSError, StopIteration) as why:
            self.skipTest("tstor's C API not found for the tstor half: %s" % why)
        # tstor -> PyTorch: a tstor tensor on the device, exported by tstor.
        # DLPack has a device type of its own for cuda, which PyTorch takes as
        # its own cuda device; every other type's is kDLExtDev, PrivateUse1
        native = "cuda" if tstor_torch.device_type == "cuda" else DEV
        values = [1.5, -2., 3.25, 7.]
        t = api.tensor("%s:%d" % (tstor_torch.device_type, D1), values)
        f = dlpack.from_dlpack(api.export_capsule(t))
        api.core.tstor_tensor_release(t)
        self.assertEqual(f.device, torch.device(native, D1))
        self.assertEqual(f.cpu().tolist(), values)
        g = (f * 2).cpu()
        self.assertEqual(g.tolist(), [2 * v for v in values])
        del f
        # PyTorch -> tstor: a device tensor, read by tstor. PyTorch packs the
        # PrivateUse1 device as kDLExtDev, which names no cuda device
        src = d[1]
        if native == "cuda":
            with self.assertRaisesRegex(RuntimeError, "kDLExtDev tensor, and no backend device"):
                api.import_capsule(dlpack.to_dlpack(d[1]))
            src = d[1].cpu().to(torch.device("cuda", D1))
        u = api.import_capsule(dlpack.to_dlpack(src))
        self.assertEqual(api.core.tstor_tensor_get_device(u), D1)
        self.assertEqual(api.values(u, 4), d[1].cpu().tolist())
        api.core.tstor_tensor_release(u)
        del d

    def test_what_2x_lacks_for_privateuse1(self):
        # docs/pytorch.md's lists, each pinned down. PyTorch's:
        # Tensor.__dlpack_device__ knows PrivateUse1 by its old name only
        # (the capsule functions work: test_dlpack_both_ways); the hooks have
        # no hasCompatibleShallowCopyType, so `.data =` between the cpu and
        # the device is refused
        d = torch.arange(3., device=DEV)
        with self.assertRaisesRegex(ValueError, "Unknown device type %s for Dlpack" % DEV):
            torch.from_dlpack(d)
        self.assertFalse(torch._has_compatible_shallow_copy_type(torch.zeros(3), d))
        # tstor's: no per-tensor backend metadata
        self.assertEqual(torch.accelerator.current_accelerator().type, DEV)
        torch._utils.set_tensor_metadata(d, {"format": 1})
        self.assertEqual(torch._utils.get_tensor_metadata(d), {})

    def test_autocast(self):
        # the policy PyTorch gives cuda: matrix products in the lower
        # precision (as the cpu's autocast does too), exp in float32
        a, b = torch.randn(4, 4), torch.randn(4, 4)
        for dtype in (torch.bfloat16, torch.float16):
            with self.subTest(dtype=dtype):
                with torch.autocast(DEV, dtype=dtype):
                    mm = torch.mm(a.to(DEV), b.to(DEV))
                    ex = torch.exp(a.to(DEV).to(dtype))
                    plain = a.to(DEV) + b.to(DEV)
                with torch.autocast("cpu", dtype=dtype):
                    want = torch.mm(a, b)
                self.assertEqual(mm.dtype, dtype)
                self.assertTrue(torch.equal(mm.cpu(), want))
                self.assertEqual(ex.dtype, torch.float32)
                self.assertTrue(torch.equal(ex.cpu(), torch.exp(a.to(dtype).float())))
                self.assertEqual(plain.dtype, torch.float32)
        self.assertEqual(torch.mm(a.to(DEV), b.to(DEV)).dtype, torch.float32)


@unittest.skipUnless(tstor_torch.device_type == "cuda" and torch.cuda.is_available(),
                     "needs tstor's cuda type as the device, beside PyTorch's own CUDA")
class BesideTorchCuda(Case):
    """tstor's cuda backend as the device in a process where PyTorch's own
    CUDA runs too (tests/gpu-checks.sh): the two reach the same GPU, and
    training on the device, whose kernels run through the cpu fallback,
    follows training on PyTorch's cuda."""

    def test_same_gpu(self):
        p = tstor_torch.get_device_properties(D1)
        q = torch.cuda.get_device_properties(D1)
        # cudaDeviceGetPCIBusId's "domain:bus:device.function", in hex
        domain, bus, rest = p.id.split(":")
        self.assertEqual((int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)),
                         (q.pci_domain_id, q.pci_bus_id, q.pci_device_id))
        self.assertEqual(p.total_memory, torch.cuda.mem_get_info(D1)[1])

    def test_training_steps_follow_torchs_cuda(self):
        # within float32's rounding of one another: cuBLAS and the cpu's
        # BLAS sum in different orders, so equal bits are not to be had
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            self.train_alike((16, 64, 8), 32, DEV1, torch.device("cuda", D1), 0.05, rtol=1e-4, atol=1e-6)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32


class Errors(unittest.TestCase):
    def run_python(self, code, env):
        e = dict(os.environ)
        e.update(env)
        return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True)

    def raised(self, statement, env=None):
        """What statement raised, run after loading the library in a Python of
        its own (with env added to the environment)."""
        code = ("import torch, torch.utils.dlpack, tstor_torch\nDEV = tstor_torch.name\n"
                "try:\n    %s\nexcept RuntimeError as e:\n    print('raised:', e)\n") % statement
        r = self.run_python(code, env or {})
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("raised:", r.stdout)
        self.load_warning = r.stderr
        return r.stdout

    def test_missing_device_type_is_a_python_error(self):
        out = self.raised("torch.empty(1, device=DEV)", {"TSTOR_TORCH_DEVICE": "nosuch"})
        self.assertIn("TSTOR_TORCH_DEVICE=nosuch: no such device type", out)
        # the context opens as the library loads, so the load already said it
        self.assertIn("privateuseone cannot be used: tstor: TSTOR_TORCH_DEVICE=nosuch",
                      self.load_warning)

    def test_bad_config_is_a_python_error(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".ini") as ini:
            ini.write("[backend hpu]\nlibrary = no-such-backend.so\n")
            ini.flush()
            out = self.raised("torch.zeros(2, device=DEV)", {"TSTOR_CONFIG": ini.name})
        self.assertIn("cannot open the tstor context", out)
        self.assertIn("no-such-backend.so", out)
        self.assertIn("privateuseone cannot be used", self.load_warning)

    def test_library_that_does_not_load(self):
        # as one built against another torch fails: an ImportError that
        # names the library and this torch
        r = self.run_python("import tstor_torch", {"TSTOR_TORCH_LIB": os.path.abspath(__file__)})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError: tstor_torch: cannot load %s into torch %s: "
                      % (os.path.abspath(__file__), torch.__version__), r.stderr)
        self.assertIn("loads only into the torch it was built against", r.stderr)

    def test_host_device_type_is_refused(self):
        out = self.raised("torch.ops.tstor.device_type()", {"TSTOR_TORCH_DEVICE": "cpu"})
        self.assertIn("is host memory or has no data", out)

    @unittest.skipIf(TORCH_2, "2.x packs device tensors: Device.test_dlpack_both_ways")
    def test_dlpack_refused_by_1_13(self):
        # in a process of its own: 1.13's to_dlpack keeps a reference to the
        # tensor it refuses (it makes its DLPack wrapper first), so the bytes
        # never return
        out = self.raised("torch.utils.dlpack.to_dlpack(torch.ones(2, device=DEV))")
        self.assertIn("raised: Cannot pack tensors on privateuseone", out)

    def test_loaded_twice(self):
        # a second copy from another path stands aside with a warning; the
        # first keeps serving the device
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            copy = os.path.join(d, "libtstor-torch-copy.so")
            shutil.copy(LIB, copy)
            code = ("import torch, tstor_torch\ntorch.ops.load_library(%r)\n"
                    "print(torch.ones(2, device=tstor_torch.name).cpu().tolist())\n") % copy
            r = self.run_python(code, {})
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("[1.0, 1.0]", r.stdout)
        self.assertIn("libtstor-torch is already loaded in this process", r.stderr)


if __name__ == "__main__":
    unittest.main()
