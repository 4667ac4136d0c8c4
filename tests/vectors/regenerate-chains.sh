#!/bin/sh
# The view chains, regenerated with PyTorch and compared (compare-generated.sh).
exec sh "${srcdir:-.}/vectors/compare-generated.sh" gen_chains.py tensor_chains.txt
