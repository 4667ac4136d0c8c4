#!/usr/bin/python3
"""A torch.save file written from a GPU, as PyTorch writes one there: its
storages are tagged with the device they were on ("cuda:0"), which torch.load
without map_location restores.

    gen_cuda_saved.py OUT.pt

needs a PyTorch that sees a CUDA device. The values are what
test_cuda_tensor.c and test_ckpt_golden.c expect: "a" is arange(12) as
float32 3x4, "t" its transpose (the same storage), "i" arange(5) * -3 as
int64, "h" linspace(-1, 1, 7) as bfloat16.
"""
import sys

import torch

if not torch.cuda.is_available():
    sys.exit("gen_cuda_saved.py: torch sees no CUDA device")
dev = torch.device("cuda", 0)
a = torch.arange(12, dtype=torch.float32, device=dev).reshape(3, 4)
tensors = {
    "a": a,
    "t": a.t(),
    "i": torch.arange(5, dtype=torch.int64, device=dev) * -3,
    "h": torch.linspace(-1, 1, 7, device=dev).to(torch.bfloat16),
}
torch.save(tensors, sys.argv[1])
print(f"torch {torch.__version__} on {torch.cuda.get_device_name(dev)} wrote {sys.argv[1]}")
