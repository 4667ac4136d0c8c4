"""What torch.load of this PyTorch reads from the files a listing names, as
that listing's format (describe.py) writes it.

    list_as_torch2.py LISTING DIR > OUT

Run by PyTorch 2.x over golden.txt (PyTorch 1.13's files and what 1.13
read from each), it writes golden_as_torch2.txt: the same files as 2.x reads
them, which tstor is held to. Each file is loaded with weights_only=True
(2.x's default), else with weights_only=False, as gen_golden.py's torch.load
of 1.13 loaded it.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from describe import describe  # noqa: E402

listing, folder = sys.argv[1], sys.argv[2]
names = [l[5:].rstrip("\n") for l in open(listing) if l.startswith("file ")]
print("# PyTorch %s; torch.load of each file of %s" % (torch.__version__, os.path.basename(listing)))
for name in names:
    path = os.path.join(folder, name)
    try:
        obj = torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001
        obj = torch.load(path, weights_only=False)
    print("file %s" % name)
    print("\n".join(describe(obj)))
