#!/usr/bin/env bash
# The whole test suite: the format of changed lines, the Python references
# (tests/pyref), a -Werror build with every Check suite, the same under
# AddressSanitizer + UndefinedBehaviorSanitizer and ThreadSanitizer, the
# hpu-stub backend built out of tree against an installed tstor, bounded fuzz
# runs and differential runs against PyTorch on the day's inputs, and make
# distcheck. Build trees go under build-tests/.
#
# README's quick start builds in the clone itself (./configure there), and
# configure refuses to build out of tree from a source folder configured in
# place ("source directory already configured"), as make distcheck does. So
# the suite runs on a clean copy of the sources, build-tests/src: the files
# git tracks plus the untracked ones it does not ignore (uncommitted work is
# tested too), or, outside a git checkout, a copy of everything cleaned with
# make distclean. The clone and its in-place build are left as they were.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
out="$top/build-tests"
mkdir -p "$out"

step() { printf '\n==== %s\n' "$*"; }

step "format of the lines changed since .clang-format"
sh "$top/tests/format-check.sh" || [ $? -eq 77 ]

step "clean copy of the sources in $out/src"
rm -rf "$out/src"
mkdir -p "$out/src"
if git -C "$top" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  # --ignore-failed-read: a tracked file deleted in the work tree is left out.
  (cd "$top" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2> /dev/null) | tar -xf - -C "$out/src"
else
  (cd "$top" && tar --exclude=./build-tests -cf - .) | tar -xf - -C "$out/src"
  if [ -f "$out/src/config.status" ]; then
    make -C "$out/src" distclean > "$out/distclean.log" 2>&1 || { cat "$out/distclean.log"; exit 1; }
  fi
fi
top="$out/src"
cd "$top"

step "Python references (tests/pyref: torch 2.x, safetensors, numpy 2.x, gguf...)"
# Installed once outside the clone and reused; where they cannot be installed
# the suites that need them skip and say so.
if TSTOR_PYREF_PYTHON=$(sh "$top/tests/pyref/install.sh"); then
  export TSTOR_PYREF_PYTHON
  "$TSTOR_PYREF_PYTHON" -c 'import torch; print("torch", torch.__version__)'
else
  echo "no Python references: the torch 2.x checks will skip"
fi

step "autogen"
./autogen.sh > "$out/autogen.log" 2>&1 || { cat "$out/autogen.log"; exit 1; }

step "build and check (-Werror)"
mkdir -p "$out/main"
(cd "$out/main" && "$top/configure" --enable-werror --prefix="$out/prefix" > configure.log &&
  make -j"$jobs" > make.log 2>&1 || { tail -50 make.log; exit 1; }
  make -j"$jobs" bench > make-bench.log 2>&1 || { tail -50 make-bench.log; exit 1; }
  make -j"$jobs" check || { cat tests/test-suite.log; exit 1; })

step "sanitizers"
bash tests/ci-sanitizers.sh "$out"

step "out-of-tree backend build"
bash tests/out-of-tree.sh "$out/main" "$out/prefix"

step "fuzzing and differential runs (bounded)"
bash tests/fuzz/run.sh "$out" 50
bash tests/differential.sh "$out/main"

step "distcheck"
(cd "$out/main" && make -j"$jobs" distcheck > distcheck.log 2>&1 || { tail -60 distcheck.log; exit 1; })

step "all passed"
