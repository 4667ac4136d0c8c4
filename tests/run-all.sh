#!/usr/bin/env bash
# The whole test suite: a -Werror build with every Check suite, the same under
# AddressSanitizer + UndefinedBehaviorSanitizer and ThreadSanitizer, the
# hpu-stub backend built out of tree against an installed tstor, bounded fuzz
# runs, and make distcheck. Build trees go under build-tests/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)
out="$top/build-tests"
mkdir -p "$out"

step() { printf '\n==== %s\n' "$*"; }

step "autogen"
./autogen.sh > "$out/autogen.log" 2>&1 || { cat "$out/autogen.log"; exit 1; }

step "build and check (-Werror)"
mkdir -p "$out/main"
(cd "$out/main" && "$top/configure" --enable-werror --prefix="$out/prefix" > configure.log &&
  make -j"$jobs" > make.log 2>&1 || { tail -50 make.log; exit 1; }
  make -j"$jobs" check || { cat tests/test-suite.log; exit 1; })

step "sanitizers"
bash tests/ci-sanitizers.sh "$out"

step "out-of-tree backend build"
bash tests/out-of-tree.sh "$out/main" "$out/prefix"

step "fuzzing (bounded)"
bash tests/fuzz/run.sh "$out" 60

step "distcheck"
(cd "$out/main" && make -j"$jobs" distcheck > distcheck.log 2>&1 || { tail -60 distcheck.log; exit 1; })

step "all passed"
