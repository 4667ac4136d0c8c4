#!/bin/sh
# Installs the Debian 12 packages that building tstor and running its whole
# test suite need: the toolchain and autotools, inih, Check, and valgrind,
# lcov and clang for the sanitizer, coverage and fuzzing runs; jansson, libzip
# and the DLPack header for the checkpoint library; OpenSSL's libcrypto
# (libssl-dev) for the remote backend and tstor serve, and UCX (libucx-dev,
# and ucx-utils for ucx_perftest) for the tests that attack tstor serve with
# it and the benchmark that compares with it; and PyTorch, libtorch and
# numpy, the real clients that tests and benchmarks compare with;
# clang-format for the check of changed lines, and python3-venv, from which
# the test suite makes its environment of PyPI references (tests/pyref). As
# root it runs apt-get directly; otherwise through sudo.
set -e
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
as_root apt-get update -q
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  build-essential autoconf automake libtool pkg-config \
  libinih-dev check valgrind lcov clang libclang-rt-14-dev clang-format python3 python3-venv \
  libjansson-dev libzip-dev libdlpack-dev libucx-dev ucx-utils libssl-dev python3-torch python3-torchvision python3-numpy libtorch-dev
