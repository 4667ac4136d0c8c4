#!/bin/sh
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined)
# and runs each for a bounded time.
#
#   tests/fuzz/run.sh [OUTDIR [SECONDS]]
#
# OUTDIR (default /tmp/tstor-fuzz) gets a clang build of the library in
# OUTDIR/fuzz, the corpora grown from the seeds in tests/fuzz/corpus-*, and
# any crashing input as OUTDIR/fuzz/crash-TARGET-*. SECONDS (default 60) is
# the time per target. Exits non-zero when a target finds a crash, a leak or
# undefined behaviour, or when the build fails. FUZZ_TARGETS (default
# "config ops torch_load torch_tar safetensors safetensors_model pickle
# torch7_model gguf gguf_model remote_msg"; remote_msg needs nothing but
# backends/remote/protocol.c)
# picks targets; FUZZ_RUNS=N runs N inputs per target instead of
# a time limit; FUZZ_FLAGS adds libFuzzer flags (e.g. -jobs=8 -workers=8);
# FUZZ_JOBS (default FUZZ_MAKE_JOBS, 2) targets run side by side.
# To replay a crash: OUTDIR/fuzz/fuzz_TARGET OUTDIR/fuzz/crash-TARGET-...
set -eu

src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/tstor-fuzz}
secs=${2:-60}
build="$out/fuzz"
cc=${FUZZ_CC:-clang}
targets=${FUZZ_TARGETS:-"config ops torch_load torch_tar safetensors safetensors_model pickle torch7_model gguf gguf_model remote_msg"}
jobs=${FUZZ_MAKE_JOBS:-2}

san="-fsanitize=address,undefined -fno-sanitize-recover=all"
cflags="-g -O1 -fno-omit-frame-pointer $san -fsanitize=fuzzer-no-link"

mkdir -p "$build"
build=$(cd "$build" && pwd)

# A static libtstor (the targets call internals) and the modules, all built
# by clang with the same sanitizers and coverage instrumentation.
if [ ! -f "$build/config.status" ] || [ "$src/configure" -nt "$build/config.status" ]; then
  echo "fuzz: configuring in $build"
  (cd "$build" && "$src/configure" CC="$cc" CFLAGS="$cflags" LDFLAGS="$san" \
     --enable-static --without-cuda > configure.log 2>&1) ||
    { tail -30 "$build/configure.log"; exit 1; }
fi
echo "fuzz: building"
# The host loops' GCC-only vectoriser flags (core/Makefile.am) are left out:
# clang vectorises at -O1 and up without them.
for dir in core backends/cpu backends/meta; do
  make -C "$build/$dir" -j"$jobs" libtstor_host_la_CFLAGS='$(AM_CFLAGS)' libtstor_convert_la_CFLAGS='$(AM_CFLAGS)' \
    > "$build/make.log" 2>&1 ||
    { tail -40 "$build/make.log"; exit 1; }
done
make -C "$build/tests" plugins/fake.la > "$build/make.log" 2>&1 ||
  { tail -40 "$build/make.log"; exit 1; }

libs="$build/core/.libs/libtstor.a $(pkg-config --libs inih) -ldl -lpthread -lrt -lm"
# The checkpoint readers' targets link libtstor-io (built in core/io) first.
iolibs="$build/core/io/.libs/libtstor-io.a $libs $(pkg-config --libs libzip zlib)"
for t in $targets; do
  case $t in
    torch_load | torch_tar | safetensors* | pickle | torch7* | gguf*) l=$iolibs ;;
    remote_msg) l="-I$src/backends/remote $src/backends/remote/protocol.c" ;;
    *) l=$libs ;;
  esac
  $cc -g -O1 -fno-omit-frame-pointer $san -fsanitize=fuzzer \
    -I"$src/core/include" -I"$src/core" -I"$build" \
    "$src/tests/fuzz/fuzz_$t.c" $l -o "$build/fuzz_$t"
done

TSTOR_BACKEND_DIR="$build/modules"
TSTOR_FUZZ_FAKE="$build/tests/plugins/.libs/fake.so"
ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1"
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSTOR_BACKEND_DIR TSTOR_FUZZ_FAKE ASAN_OPTIONS UBSAN_OPTIONS
unset TSTOR_CONFIG TSTOR_DEFAULT_DEVICE TSTOR_LOG

# fuzz_one TARGET: runs one target; its verdict goes to $build/verdict-TARGET
# (and the log's tail, on failure), printed once its batch is done.
fuzz_one() {
  t=$1
  corpus="$build/corpus-$t"
  mkdir -p "$corpus"
  dict=""
  [ -f "$src/tests/fuzz/$t.dict" ] && dict="-dict=$src/tests/fuzz/$t.dict"
  if [ -n "${FUZZ_RUNS:-}" ]; then limit="-runs=$FUZZ_RUNS"; else limit="-max_total_time=$secs"; fi
  log="$build/fuzz_$t.log"
  verdict="$build/verdict-$t"
  # shellcheck disable=SC2086
  if "$build/fuzz_$t" $limit -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
       -artifact_prefix="$build/crash-$t-" $dict ${FUZZ_FLAGS:-} \
       "$corpus" "$src/tests/fuzz/corpus-$t" > "$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    echo "fuzz: $t passed: ${execs:-?} inputs, corpus $(ls "$corpus" | wc -l) files" > "$verdict"
  else
    { tail -60 "$log"; echo "fuzz: $t FAILED (log: $log; crash inputs: $build/crash-$t-*)"; } \
      > "$verdict"
  fi
}

# Each target is one process on one core: FUZZ_JOBS (default: FUZZ_MAKE_JOBS)
# run side by side, in batches that end together, as every target has the
# same time limit.
fuzz_jobs=${FUZZ_JOBS:-$jobs}
status=0
batch=""
for t in $targets ""; do
  if [ -n "$t" ]; then
    echo "fuzz: $t (${FUZZ_RUNS:+-runs=$FUZZ_RUNS}${FUZZ_RUNS:--max_total_time=$secs})"
    fuzz_one "$t" &
    batch="$batch $t"
  fi
  set -- $batch
  if [ $# -ge "$fuzz_jobs" ] || { [ -z "$t" ] && [ $# -gt 0 ]; }; then
    wait
    for b in $batch; do
      cat "$build/verdict-$b"
      grep -q "^fuzz: $b passed" "$build/verdict-$b" || status=1
    done
    batch=""
  fi
done
exit $status
