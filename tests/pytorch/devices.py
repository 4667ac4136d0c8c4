"""The devices the three PyTorch suites run on, whatever tstor type stands for
PrivateUse1: its name in PyTorch, how many devices the type has, and the
second device, on which the cases that move tensors between devices put
them. A type may have one device (a machine with one GPU, a backend author's
single board): there the second device is device 0, each such case moves
within it, and the cases whose point is two devices skip (`two_devices`)."""
import gc
import unittest

import torch

import tstor_torch

DEV = tstor_torch.name
NDEV = torch.ops.tstor.device_count()
D1 = 1 if NDEV > 1 else 0
DEV1 = "%s:%d" % (DEV, D1)
two_devices = unittest.skipIf(NDEV < 2, "needs two devices; this type has %d" % NDEV)


def allocated():
    """The bytes tstor holds on the first two devices (or the one): a case
    takes them before and compares after, so that every byte comes back."""
    gc.collect()
    return [torch.ops.tstor.memory_allocated(i) for i in range(min(2, NDEV))]
