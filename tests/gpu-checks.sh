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
#   synccheck, the four at once. Between the two, what needs this machine's
#   PyTorch (TSTOR_GPU_CHECKS_PYTHON, default python3): DLPack 1.x with its
#   cuda tensors both ways, with the stream handshake (ckpt/dlpack_cuda.py),
#   and the PyTorch device built here against its torch, with tstor's cuda
#   type as PrivateUse1 beside torch's own CUDA, through the three suites of
#   tests/pytorch (a training step against torch's cuda among them).
#
# Usage: tests/gpu-checks.sh BUILDDIR LOGDIR
# TSTOR_GPU_CHECKS_SANITIZER_S bounds each sanitizer run (default 420 s).
# TSTOR_GPU_CHECKS_PARTS (default "suites bench torch sanitizers") runs only
# the parts it names, so that the checks fit a machine's time in two runs.
# TSTOR_GPU_CHECKS_LIBS names a folder of the shared libraries the build
# links (tests/gpu-stage.sh makes one): each that this machine's loader does
# not find is used from there, and the machine's own come first.
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
if [ -n "${TSTOR_GPU_CHECKS_LIBS:-}" ]; then
  mkdir -p "$logs/lib"
  for lib in "$TSTOR_GPU_CHECKS_LIBS"/*.so*; do
    name=${lib##*/}
    ldconfig -p | grep -q "^[[:space:]]*$name " || ln -sf "$(cd "${lib%/*}" && pwd)/$name" "$logs/lib/$name"
  done
  LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$logs/lib
  export LD_LIBRARY_PATH
  echo "libraries this machine lacks, from $TSTOR_GPU_CHECKS_LIBS: $(ls "$logs/lib" | tr '\n' ' ')" >"$logs/libs.log"
fi
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
parts=" ${TSTOR_GPU_CHECKS_PARTS:-suites bench torch sanitizers} "
part() { case $parts in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# PyTorch's allocator from C++, and the PyTorch device against this machine's
# torch (the tree's libtstor-torch2 serves the torch configure found), built
# in the background while the suites run.
py=${TSTOR_GPU_CHECKS_PYTHON:-python3}
cxx="" bridge=""
torch_dir=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ -n "$torch_dir" ] && command -v g++ >/dev/null && { part bench || part torch; }; then
  cxx=$logs/torch_alloc
  g++ -O2 -std=c++17 -I"$torch_dir/include" -I"$cuda_home/include" \
    "$src/bench/cuda_torch_alloc.cc" -L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" \
    -Wl,--no-as-needed -ltorch_cpu -ltorch_cuda -lc10_cuda -lc10 -o "$cxx" >"$logs/torch_alloc-build.log" 2>&1 &
  cxx_pid=$!
  # as bindings/pytorch/Makefile.am builds it, with torch-paths.py's answers
  bridge=$logs/libtstor-torch2.so
  paths=$("$py" "$src/bindings/pytorch/torch-paths.py")
  includes=$(echo "$paths" | sed -n 3p | sed 's/[^ ][^ ]*/-isystem &/g')
  libdir=$(echo "$paths" | sed -n 4p)
  # shellcheck disable=SC2086 # the include flags are words
  g++ -O2 -std=c++20 -fPIC -shared -Wall -Wextra -fvisibility=hidden -fvisibility-inlines-hidden \
    -D_GLIBCXX_USE_CXX11_ABI="$(echo "$paths" | sed -n 2p)" -I"$src/core/include" $includes \
    "$src/bindings/pytorch/tstor_torch.cc" "$src/bindings/pytorch/torch2.cc" \
    -L"$b/core/.libs" -Wl,-rpath,"$b/core/.libs" -ltstor -L"$libdir" -Wl,-rpath,"$libdir" \
    -ltorch -ltorch_cpu -lc10 -o "$bridge" >"$logs/libtstor-torch2-build.log" 2>&1 &
  bridge_pid=$!
fi

step info 60 "$b/tools/tstor" info
if part suites; then
  step test_cuda_module 120 $run "$b/tests/test_cuda_module"
  step test_cuda 300 $run "$b/tests/test_cuda"
  step test_cuda_tensor 300 $run "$b/tests/test_cuda_tensor"
  step test_cuda-nocache 300 env TSTOR_TEST_CUDA_CACHING=no $run "$b/tests/test_cuda"
  step test_cuda_tensor-nocache 300 env TSTOR_TEST_CUDA_CACHING=no $run "$b/tests/test_cuda_tensor"
  step conformance 300 "$b/tools/tstor" conformance "$b/modules/tstor-cuda.so" --strict \
    --no-hardware max_devices=0
fi

if [ -n "$cxx" ]; then # both builds end before the timings start
  wait "$cxx_pid" || cxx=""
  wait "$bridge_pid" || bridge="$logs/libtstor-torch2.so: its build failed (libtstor-torch2-build.log)"
fi
part bench && step bench_cuda 400 $run "$b/tests/bench_cuda" --torch-script "$src/bench/cuda_torch_alloc.py" \
  ${cxx:+--torch-cxx "$cxx"}

# what needs this machine's torch, on a context of cpu, cuda and meta
ini=$logs/cuda.ini
cat >"$ini" <<EOF
[backend cpu]
library = tstor-cpu.so
[backend cuda]
library = tstor-cuda.so
[backend meta]
library = tstor-meta.so
EOF
io=$b/core/io/.libs/libtstor-io.so
if part torch; then
  step dlpack_cuda 120 env TSTOR_CONFIG="$ini" \
    LD_LIBRARY_PATH="$b/core/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$py" "$src/tests/ckpt/dlpack_cuda.py" "$io"
  for suite in test_privateuse1 test_torch_suite test_openreg; do
    step "pytorch-$suite" 300 env TSTOR_CONFIG="$ini" TSTOR_TORCH_DEVICE=cuda \
      TSTOR_TORCH_LIB="${bridge:-no torch or no g++ here to build libtstor-torch2 with}" TSTOR_IO_LIB="$io" \
      PYTHONPATH="$src/bindings/pytorch" "$py" "$src/tests/pytorch/$suite.py" -v
  done
fi

if part sanitizers; then
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
fi
grep -q FAIL "$summary" && failed=1
exit $failed
