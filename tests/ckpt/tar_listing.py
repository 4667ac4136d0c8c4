#!/usr/bin/python3
"""What torch.load reads from the files gen_tar.py wrote, with whichever
PyTorch runs this: tar.txt, which PyTorch 1.13 and 2.x give alike.

    tar_listing.py DIR > tar.txt

lists DIR/tar/*.pt as golden.txt lists its files (describe.py's format),
each read with torch.load(weights_only=False), the only way PyTorch 2.x
reads the tar format (its weights_only loader refuses it whole), and
cuda_*.pt with map_location="cpu". It also loads each of DIR/tar_hostile/*.pt
and fails (exit 1) unless torch.load refuses it, or reads it where
tar_hostile.txt says it does. On stderr: which files PyTorch's weights_only
loader reads too.
"""
import os
import sys
import tarfile
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from describe import describe  # noqa: E402

warnings.simplefilter("ignore")
top = sys.argv[1]
failed = 0
weights_only = []


def load(path, **kw):
    name = os.path.basename(path)
    if name.startswith("cuda_"):
        kw["map_location"] = "cpu"
    return torch.load(path, weights_only=False, **kw)


files = sorted(os.listdir(os.path.join(top, "tar")))
lines = ["# torch.load(weights_only=False) of each tar/*.pt, as tar_listing.py lists it; "
         "PyTorch 1.13 and 2.x read them alike"]
for name in files:
    path = os.path.join(top, "tar", name)
    lines.append("file ../tar/%s" % name)
    lines.extend(describe(load(path)))
    try:
        torch.load(path, weights_only=True, map_location="cpu")
        weights_only.append(name)
    except Exception:  # noqa: BLE001 -- any refusal
        pass
print("\n".join(lines))

# the PAX parsing of CPython's gh-121285 fix (3.12.5, and Debian's 3.11.2)
strict_pax = hasattr(tarfile, "_header_length_prefix_re")
reads = {}
for line in open(os.path.join(top, "tar_hostile.txt")):
    if line.startswith("# torch.load reads "):
        reads[line.split()[3].rstrip(":")] = True
    if line.startswith("# lax tarfile reads ") and not strict_pax:
        reads[line.split()[4].rstrip(":")] = True
for name in sorted(os.listdir(os.path.join(top, "tar_hostile"))):
    path = os.path.join(top, "tar_hostile", name)
    try:
        load(path)
        ok = True
    except Exception as e:  # noqa: BLE001 -- any refusal is a refusal
        ok, why = False, e
    if ok != reads.get(name, False):
        failed += 1
        print("%s: torch.load %s" % (name, "reads it" if ok else "refuses it (%s: %s)" % (type(why).__name__, why)),
              file=sys.stderr)
print("torch %s: %d tar files; weights_only=True reads %d of them: %s" %
      (torch.__version__, len(files), len(weights_only), " ".join(weights_only) or "none"), file=sys.stderr)
sys.exit(1 if failed else 0)
