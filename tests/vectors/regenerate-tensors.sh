#!/bin/sh
# The tensor vectors, regenerated with PyTorch and compared (compare-generated.sh).
exec sh "${srcdir:-.}/vectors/compare-generated.sh" gen_tensors.py tensor_views.txt tensor_copies.txt tensor_print.txt
