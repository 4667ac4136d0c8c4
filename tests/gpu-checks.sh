#!/bin/sh
# The checks docs/cuda.md owes on a machine with an NVIDIA GPU, run from a
# configured and built tree (`make && make -C tests check TESTS=` builds every
# program they need; nothing is rebuilt here, so the tree can be carried to a
# GPU machine without a toolchain):
#
#   the GPU suites (test_cuda_module, test_cuda, test_cuda_tensor), with the
#   caching allocators on and off; `tstor conformance tstor-cuda.so --strict`;
#   bench_cuda against cudaMalloc/cudaMemcpy and PyTorch (from Python, and from
#   C++ when its libtorch and a g++ are found); then both GPU suites, caches
#   off, under compute-sanitizer's memcheck, racecheck, initcheck and
#   synccheck, the four at once.
#
# Usage: tests/gpu-checks.sh BUILDDIR LOGDIR
# TSTOR_GPU_CHECKS_SANITIZER_S bounds each sanitizer run (default 420 s).
# Each step's output goes to LOGDIR/STEP.log and one line per step to
# LOGDIR/summary.txt (also printed). Exit status 0 when every step passed.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILDDIR LOGDIR" >&2
  exit 2
fi
src=$(cd "$(dirname "$0")/.." && pwd)
b=$(cd "$1" && pwd) || exit 2
logs=$2
mkdir -p "$logs" || exit 2
logs=$(cd "$logs" && pwd)
summary=$logs/summary.txt
: >"$summary"
export TSTOR_BACKEND_DIR="$b/modules" TSTOR_TEST_PLUGINS="$b/tests/plugins/.libs"
unset TSTOR_CONFIG TSTOR_DEFAULT_DEVICE TSTOR_LOG
run="$b/libtool --mode=execute"
failed=0

# step NAME SECONDS COMMAND...: runs it with a time limit, logs and sums it up.
step() {
  name=$1 limit=$2
  shift 2
  start=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  case $rc in
    0) verdict=PASS ;;
    77) verdict=SKIP failed=1 ;;
    124|137) verdict="FAIL (over ${limit} s)" failed=1 ;;
    *) verdict="FAIL (exit status $rc)" failed=1 ;;
  esac
  line="$verdict: $name, $took s"
  echo "$line" | tee -a "$summary"
}

command -v nvidia-smi >/dev/null && nvidia-smi >"$logs/nvidia-smi.log" 2>&1

# PyTorch's allocator from C++, built in the background while the suites run.
cxx=""
torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ -n "$torch_dir" ] && command -v g++ >/dev/null; then
  cxx=$logs/torch_alloc
  g++ -O2 -std=c++17 -I"$torch_dir/include" -I"$cuda_home/include" \
    "$src/bench/cuda_torch_alloc.cc" -L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" \
    -Wl,--no-as-needed -ltorch_cpu -ltorch_cuda -lc10_cuda -lc10 -o "$cxx" >"$logs/torch_alloc-build.log" 2>&1 &
  cxx_pid=$!
fi

step info 60 "$b/tools/tstor" info
step test_cuda_module 120 $run "$b/tests/test_cuda_module"
step test_cuda 300 $run "$b/tests/test_cuda"
step test_cuda_tensor 300 $run "$b/tests/test_cuda_tensor"
step test_cuda-nocache 300 env TSTOR_TEST_CUDA_CACHING=no $run "$b/tests/test_cuda"
step test_cuda_tensor-nocache 300 env TSTOR_TEST_CUDA_CACHING=no $run "$b/tests/test_cuda_tensor"
step conformance 300 "$b/tools/tstor" conformance "$b/modules/tstor-cuda.so" --strict \
  --no-hardware max_devices=0

if [ -n "$cxx" ]; then
  wait "$cxx_pid" || cxx=""
fi
step bench_cuda 400 $run "$b/tests/bench_cuda" --torch-script "$src/bench/cuda_torch_alloc.py" \
  ${cxx:+--torch-cxx "$cxx"}

sanitizer=$(command -v compute-sanitizer || echo "$cuda_home/bin/compute-sanitizer")
pids=""
for tool in memcheck racecheck initcheck synccheck; do
  extra=""
  [ $tool = memcheck ] && extra="--leak-check full"
  (
    # The out-of-memory tests make cudaMalloc fail on purpose, which memcheck
    # reports as an error of the program; the runs above cover them.
    for suite in test_cuda test_cuda_tensor; do
      step "$tool-$suite" "${TSTOR_GPU_CHECKS_SANITIZER_S:-420}" \
        env TSTOR_TEST_CUDA_CACHING=no CK_EXCLUDE_TAGS=oom \
        $run "$sanitizer" --tool $tool $extra --error-exitcode 1 "$b/tests/$suite"
    done
  ) &
  pids="$pids $!"
done
for pid in $pids; do wait "$pid"; done
grep -q FAIL "$summary" && failed=1
exit $failed
