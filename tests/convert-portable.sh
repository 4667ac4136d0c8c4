#!/bin/sh
# test_convert once more with the AVX2/F16C loops off (TSTOR_SIMD=off), so
# that the portable loops meet the PyTorch vectors too on machines that have
# those instructions.
TSTOR_SIMD=off exec ./test_convert
