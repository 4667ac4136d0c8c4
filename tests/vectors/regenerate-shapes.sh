#!/bin/sh
# The shape-inference cases, regenerated with PyTorch and compared (compare-generated.sh).
exec sh "${srcdir:-.}/vectors/compare-generated.sh" gen_shapes.py shapes.txt
