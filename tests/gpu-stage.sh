#!/bin/sh
# Copies what tests/gpu-checks.sh runs of a configured and built tree (`make
# && make -C tests check TESTS=`) into DEST, laid out as in the tree, for a
# machine with a GPU that has neither this toolchain nor the libraries the
# build links: libtool and its wrappers, the tstor program, the modules (as
# links), libtstor and libtstor-io, the GPU suites and bench_cuda, the test
# plugins, and in DEST/lib every shared library these need beyond the C and
# C++ runtimes. The objects, the static archives and every other program stay
# behind: DEST is a few tens of MiB where the tree is hundreds.
#
# Usage: tests/gpu-stage.sh BUILDDIR DEST
#
# On the GPU machine, put DEST back at the build tree's own path (libtool's
# wrappers, the modules' links and the suites' source folder are absolute),
# with the source tree at its own path beside it, and run
#
#   TSTOR_GPU_CHECKS_LIBS=BUILDDIR/lib tests/gpu-checks.sh BUILDDIR LOGDIR
#
# which uses a library of BUILDDIR/lib only where that machine lacks it.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILDDIR DEST" >&2
  exit 2
fi
b=$(cd "$1" && pwd)
mkdir -p "$2"
dest=$(cd "$2" && pwd)
cd "$b"
suites="test_cuda test_cuda_tensor test_cuda_module bench_cuda"
for prog in $suites; do
  [ -x "tests/.libs/$prog" ] || [ -x "tests/$prog" ] || {
    echo "$0: $b/tests/$prog is not built (make -C tests check TESTS=)" >&2
    exit 1
  }
done
[ -e modules/tstor-cuda.so ] || {
  echo "$0: $b has no cuda module: configure found no CUDA" >&2
  exit 1
}
files="libtool tools/tstor"
[ -e tools/.libs/tstor ] && files="$files tools/.libs/tstor"
for prog in $suites; do
  files="$files tests/$prog"
  [ -e "tests/.libs/$prog" ] && files="$files tests/.libs/$prog"
done
files="$files $(ls core/.libs/libtstor.so* core/io/.libs/libtstor-io.so* backends/*/.libs/*.so \
  tests/plugins/.libs/*.so 2>/dev/null | tr '\n' ' ')"
# shellcheck disable=SC2086 # the list is words
tar -cf - modules $files | (cd "$dest" && tar -xf -)

# Every library the ELF files need, found the way they are found here, but
# the runtimes any machine has (and tstor's own, copied above).
mkdir -p "$dest/lib"
for f in $files; do
  head -c 4 "$f" | grep -q ELF || continue
  LD_LIBRARY_PATH="$b/core/.libs:$b/core/io/.libs" ldd "$f" 2>/dev/null
done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while read -r lib; do
  case ${lib##*/} in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libgcc_s.so.* | \
      libstdc++.so.* | ld-linux*.so.* | libtstor*.so.*) ;;
    *) cp -L "$lib" "$dest/lib/" ;;
  esac
done
echo "gpu-stage: $(du -sh "$dest" | cut -f1) in $dest ($(ls "$dest/lib" | wc -l) libraries in lib)"
