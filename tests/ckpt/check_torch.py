#!/usr/bin/python3
"""PyTorch loads the checkpoints tstor wrote and must see what golden.txt says.

    check_torch.py GOLDEN_TXT DIR [--weights-only] [--where-same OTHER_TXT]

For each file of golden.txt, DIR holds tstor's re-save of it under the same
base name. It is loaded with torch.load(weights_only=True), except where the
tree holds floats (PyTorch 1.13's weights_only loader refuses BINFLOAT, so
those are loaded without it) unless --weights-only says every file (torch
2.x's loader reads floats), and its listing must equal the golden one: the
same values, layouts, storage sharing and element bytes. --where-same skips
the files OTHER_TXT lists otherwise: where two torches read a source
differently, tstor's re-save follows one of them, and only that one is asked.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from describe import describe  # noqa: E402



def listing(path):
    cases, name = {}, None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("#"):
            continue
        if line.startswith("file "):
            name = os.path.basename(line[5:])
            cases[name] = []
        else:
            cases[name].append(line)
    return cases


golden, outdir = sys.argv[1], sys.argv[2]
only_weights = "--weights-only" in sys.argv[3:]
cases = listing(golden)
if "--where-same" in sys.argv[3:]:
    other = listing(sys.argv[sys.argv.index("--where-same") + 1])
    differ = sorted(n for n in cases if other.get(n) != cases[n])
    print("%d files read otherwise by the other torch, not asked: %s" % (len(differ), " ".join(differ)))
    for n in differ:
        del cases[n]

failed = weights_only = 0
for name, want in cases.items():
    floats = not only_weights and any(" float " in l or "[f:" in l for l in want)
    path = os.path.join(outdir, name)
    try:
        obj = torch.load(path, weights_only=not floats) if not floats else torch.load(path)
    except Exception as e:  # noqa: BLE001
        print("%s: torch.load failed: %s" % (name, e))
        failed += 1
        continue
    weights_only += not floats
    got = describe(obj)
    if got != want:
        failed += 1
        print("%s: PyTorch reads something else" % name)
        for a, b in zip(got, want):
            if a != b:
                print("  torch: %s\n  want:  %s" % (a, b))
                break
print("%d files checked, %d with weights_only=True, %d failed" % (len(cases), weights_only, failed))
sys.exit(1 if failed else 0)
