#!/usr/bin/python3
"""Reads, with check_gen.py's reference reader, every file that tstor wrote
back (DIR/manifest.txt lists them with the manifest line they must give) and
checks that it gives that line: tstor's writer writes what Torch7 reads.

    read_back.py DIR
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_gen  # noqa: E402

def normal(line):
    """The numbers without their Python spelling, and the object indices
    numbered by first appearance (tstor's writer numbers objects as it meets
    them; a table's key order is the file's)."""
    line = re.sub(r"num\(([^;]*);[^)]*\)", r"num(\1)", line)
    ids = {}
    return re.sub(r"([#@])(\d+)", lambda m: m.group(1) + str(ids.setdefault(m.group(2), len(ids) + 1)), line)


def main():
    d = sys.argv[1]
    n = bad = 0
    for line in open(os.path.join(d, "manifest.txt")):
        name, fmt, _, want = line.rstrip("\n").split(" ", 3)
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        got = check_gen.read_outcome(data, fmt)
        n += 1
        if not got.startswith("ok ") or normal(got[3:]) != normal(want):
            bad += 1
            print("%s (%s): the reference reader gives\n  %s\nnot\n  %s" % (name, fmt, got[:300], want[:300]))
    print("%d files tstor wrote, read by the reference reader: %d as listed, %d not" % (n, n - bad, bad))
    sys.exit(1 if bad or not n else 0)


if __name__ == "__main__":
    main()
