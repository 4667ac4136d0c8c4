#!/bin/sh
# The typed-storage vectors, regenerated with PyTorch and compared (compare-generated.sh).
exec sh "${srcdir:-.}/vectors/compare-generated.sh" gen_vectors.py print.txt conversions.bin
