#!/bin/sh
# The test suite under the sanitizers, in build trees of its own:
#
#   OUTDIR/asan  --enable-sanitizers (AddressSanitizer + UndefinedBehaviorSanitizer,
#                leak detection on, no recovery): every suite of 'make check'
#   OUTDIR/tsan  --enable-tsan (ThreadSanitizer): the suites that run threads
#
#   tests/ci-sanitizers.sh [OUTDIR]        (default OUTDIR: /tmp/tstor-sanitizers)
#
# Exits non-zero when a build fails or any suite fails or reports. Settings:
#   SAN_CONFIGURE_FLAGS  extra configure flags (default --without-cuda: the CUDA
#                        runtime is not ASan/TSan-clean; the cuda suites run in
#                        the normal build)
#   SAN_STEPS            "asan tsan" (default), or one of them
#   TSAN_TESTS           the suites run under TSan (default below)
#   JOBS                 make -j (default: the number of CPUs)
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/tmp/tstor-sanitizers}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
flags=${SAN_CONFIGURE_FLAGS:---without-cuda}
steps=${SAN_STEPS:-"asan tsan"}
# Every suite that starts threads itself or through the library (the typed
# conversions' workers, the hpu-stub's stream threads, the cpu block cache,
# the checkpoint readers' read threads).
# Not test_convert: its after_fork case starts threads in a child forked from
# a threaded parent, where TSan's own locks may deadlock (TSan says as much).
tsan_tests=${TSAN_TESTS:-"test_threads test_copy_batch test_stress test_context test_error test_cpu_cache test_cpu_large test_shm test_typed test_hpu test_loader_lock test_tensor_threads test_ckpt_golden"}

mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -x "$src/configure" ] || (cd "$src" && ./autogen.sh > "$out/autogen.log" 2>&1)

# Leak detection on and stop at the first report (a report makes the test
# process exit non-zero, which fails the suite). Tests that want NULL from
# absurd sizes add allocator_may_return_null themselves (__asan_default_options).
ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# die_after_fork=0: the suites check that a child forked from a threaded
# parent can still start the conversion workers and use the cpu cache.
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0"
export ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS

failed=""

# build NAME CONFIGURE-FLAGS...: configures and builds OUTDIR/NAME.
build() {
  name=$1
  shift
  dir="$out/$name"
  # from scratch: a program left by an earlier run (a benchmark make check
  # would run) must not outlive the sources it was built from
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "== $name: configure $*"
  if ! (cd "$dir" && "$src/configure" "$@" > configure.log 2>&1); then
    tail -30 "$dir/configure.log"
    return 1
  fi
  echo "== $name: build"
  if ! make -C "$dir" -j"$jobs" > "$dir/make.log" 2>&1; then
    tail -40 "$dir/make.log"
    return 1
  fi
}

# check NAME [TESTS]: runs the suites (all when TESTS is empty).
check() {
  name=$1
  tests=${2:-}
  dir="$out/$name"
  echo "== $name: make check${tests:+ TESTS=\"$tests\"}"
  if [ -n "$tests" ]; then
    make -C "$dir/tests" -j"$jobs" check TESTS="$tests" > "$dir/check.log" 2>&1 && rc=0 || rc=$?
  else
    make -C "$dir" -j"$jobs" check > "$dir/check.log" 2>&1 && rc=0 || rc=$?
  fi
  grep -E '^(PASS|FAIL|ERROR|XPASS|SKIP):|^# [A-Z]+: ' "$dir/check.log" || true
  if [ "$rc" -ne 0 ]; then
    for log in "$dir"/tests/*.log; do
      case $log in */test-suite.log) continue ;; esac
      if grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "${log%.log}.trs" 2>/dev/null; then
        echo "---- $log"
        tail -80 "$log"
      fi
    done
    return 1
  fi
}

for step in $steps; do
  case $step in
    asan)
      # shellcheck disable=SC2086
      if build asan --enable-werror --enable-sanitizers $flags; then
        check asan || failed="$failed asan"
      else
        failed="$failed asan(build)"
      fi
      ;;
    tsan)
      # shellcheck disable=SC2086
      if build tsan --enable-werror --enable-tsan $flags; then
        # The remote suites where configure built them: the server's gate and
        # session threads, the client's streams and the tests' own threads.
        # test_remote_attack turns UCX's mmap hooks off under TSan, which
        # otherwise crash.
        t=$tsan_tests
        if [ -z "${TSAN_TESTS:-}" ] && grep -q '^#define HAVE_REMOTE 1' "$out/tsan/config.h"; then
          t="$t test_remote test_remote_batch test_remote_wire test_remote_hostile"
          if grep -q '^#define HAVE_UCX 1' "$out/tsan/config.h"; then t="$t test_remote_attack"; fi
        fi
        check tsan "$t" || failed="$failed tsan"
      else
        failed="$failed tsan(build)"
      fi
      ;;
    *)
      echo "unknown step $step" >&2
      exit 2
      ;;
  esac
done

if [ -n "$failed" ]; then
  echo "== sanitizers FAILED:$failed"
  exit 1
fi
echo "== sanitizers passed ($steps)"
