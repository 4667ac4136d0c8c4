#!/usr/bin/env bash
# Builds backends the way a third party does: against an installed tstor, from
# a folder of their own, with nothing but pkg-config and what `make install`
# put in the prefix. Installs tstor from a build tree into its prefix; copies
# the installed author's kit (the hpu-stub template with its
# Makefile.standalone, the guide's example) into empty folders; builds the
# first with its Makefile.standalone and the second with the command the
# installed guide gives; runs the installed `tstor conformance` on both; builds
# a program against the installed library that loads the out-of-tree module.
#
#   tests/out-of-tree.sh BUILD_DIR PREFIX   BUILD_DIR configured with --prefix=PREFIX
#   tests/out-of-tree.sh                    configures and builds one in a temporary folder
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tstor-oot.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ $# -ge 2 ]; then
  build=$(cd "$1" && pwd)
  prefix=$2
else
  build=$work/build
  prefix=$work/prefix
  mkdir -p "$build"
  echo "configuring and building tstor in $build"
  (cd "$build" && "$src/configure" --prefix="$prefix" > configure.log &&
    make -j2 > make.log 2>&1) || { tail -n 40 "$build/make.log"; exit 1; }
fi

echo "installing tstor into $prefix"
make -C "$build" install > "$work/install.log" 2>&1 || { tail -40 "$work/install.log"; exit 1; }
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pkg-config --exists tstor || { echo "tstor.pc is not in $prefix/lib/pkgconfig"; exit 1; }
# From here on nothing may come from the build tree.
unset TSTOR_BACKEND_DIR TSTOR_CONFIG TSTOR_DEFAULT_DEVICE
tstor="$prefix/bin/tstor"

echo "the installed tstor reads the installed config"
TSTOR_SYSTEM_CONFIG= "$tstor" info > /dev/null # the embedded default works too
unset TSTOR_SYSTEM_CONFIG
info=$("$tstor" info) || { echo "installed tstor info failed"; exit 1; }
echo "$info" | grep -qx "config: $prefix/etc/tstor/tstor.ini" ||
  { echo "installed tstor info did not read $prefix/etc/tstor/tstor.ini:"; echo "$info"; exit 1; }

echo "the manual pages and the guides are installed"
for f in share/man/man1/tstor.1 share/man/man5/tstor.ini.5 share/man/man3/tstor.3 \
  share/doc/tstor/README.md share/doc/tstor/cuda.md; do
  test -f "$prefix/$f" || { echo "not installed: $prefix/$f"; exit 1; }
done
MANPATH="$prefix/share/man" man -w tstor.ini > /dev/null || { echo "man cannot find tstor.ini(5)"; exit 1; }

echo "the author's kit is installed where the guide says"
template=$(pkg-config --variable=templatedir tstor)
guide=$(pkg-config --variable=guide tstor)
example=$(dirname "$guide")/examples/minimal-backend.c
for f in "$guide" "$example" "$template/Makefile.standalone" "$template/hpu_stub.h" \
  "$(dirname "$guide")/config.md" "$(dirname "$guide")/examples/meta-convnet.c"; do
  test -f "$f" || { echo "not installed: $f"; exit 1; }
done
# The installed template is the whole backend: every source its Makefile names.
for f in $(sed -n 's/^SOURCES = //p' "$template/Makefile.standalone"); do
  test -f "$template/$f" || { echo "not installed: $template/$f"; exit 1; }
done
grep -q "$template" "$guide" || grep -q 'share/tstor/hpu-stub' "$guide" ||
  { echo "the installed guide does not name $template"; exit 1; }

echo "building the installed hpu-stub template out of tree"
mkdir "$work/hpu-stub"
cp "$template"/* "$work/hpu-stub/"
make -C "$work/hpu-stub" -f Makefile.standalone CFLAGS="-O2 -g -Werror"
make -C "$work/hpu-stub" -f Makefile.standalone install DESTDIR="$work/stage"
test -f "$work/stage$(pkg-config --variable=backenddir tstor)/tstor-hpu-stub.so"

echo "building the guide's example as the guide says"
mkdir "$work/toy"
cp "$example" "$work/toy/"
(cd "$work/toy" &&
  cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden \
    $(pkg-config --cflags tstor) minimal-backend.c -o tstor-toy.so)

echo "every config the docs show loads with the installed tstor"
bash "$src/tests/doc-configs.sh" "$prefix" "$work/toy/tstor-toy.so"

echo "checking both with the installed tstor conformance"
"$tstor" conformance "$work/hpu-stub/tstor-hpu-stub.so" --no-hardware devices=0
"$tstor" conformance "$work/toy/tstor-toy.so" --name toy --no-hardware devices=0 --align 64

echo "an application built against the installed library loads the module"
cat > "$work/app.c" <<'APP'
#include <stdio.h>
#include <string.h>
#include <tstor/tstor.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char ini[4096];
  snprintf(ini, sizeof ini, "[tstor]\nbackend_dir = " BACKEND_DIR "\n"
                            "[backend cpu]\nlibrary = tstor-cpu.so\n"
                            "[backend hpu]\nlibrary = %s\ndevices = 3\n", argv[1]);
  tstor_context *ctx;
  tstor_device hpu, cpu;
  tstor_storage *d, *h;
  char in[64] = "bytes that went to the hpu and back", out[64] = "";
  if (tstor_context_open_string(ini, "app.ini", &ctx) || tstor_device_parse(ctx, "hpu:2", &hpu) ||
      tstor_device_parse(ctx, "cpu", &cpu) || tstor_storage_new(ctx, hpu, sizeof in, &d) ||
      tstor_storage_wrap(ctx, cpu, in, sizeof in, &h) || tstor_storage_copy(d, h)) {
    fprintf(stderr, "app: %s\n", tstor_last_error());
    return 1;
  }
  tstor_storage_release(h);
  if (tstor_storage_wrap(ctx, cpu, out, sizeof out, &h) || tstor_storage_copy(h, d)) {
    fprintf(stderr, "app: %s\n", tstor_last_error());
    return 1;
  }
  printf("%s\n", out);
  tstor_storage_release(h);
  tstor_storage_release(d);
  tstor_context_close(ctx);
  return strcmp(in, out) != 0;
}
APP
cc -std=c11 -Wall -Wextra -Werror "$work/app.c" -o "$work/app" \
  -DBACKEND_DIR="\"$(pkg-config --variable=backenddir tstor)\"" $(pkg-config --cflags --libs tstor) \
  -Wl,-rpath,"$(pkg-config --variable=libdir tstor)"
"$work/app" "$work/hpu-stub/tstor-hpu-stub.so"

echo "a program shipped with its own libtstor and backends runs where it is copied"
# bin/, lib/ and lib/tstor/ copied into a folder of their own, as an
# application bundles them (the program finds libtstor by \$ORIGIN, as its own
# rpath would say; here LD_LIBRARY_PATH): the embedded default's \$LIBDIR/tstor
# finds the copied backends, with no config and no prefix
moved="$work/moved"
mkdir -p "$moved/bin" "$moved/lib"
cp -a "$prefix/bin/tstor" "$moved/bin/"
cp -a "$prefix/lib/"libtstor*.so* "$prefix/lib/tstor" "$moved/lib/"
info=$(TSTOR_SYSTEM_CONFIG= LD_LIBRARY_PATH="$moved/lib" "$moved/bin/tstor" info) ||
  { echo "the copied tstor info failed"; exit 1; }
echo "$info" | grep -q "cpu *loaded *$moved/lib/tstor/tstor-cpu.so" ||
  { echo "the copied tstor did not load its own backends:"; echo "$info"; exit 1; }
# and a config of its own may name them by the program's folder
printf '[tstor]\nbackend_dir = $ORIGIN/../lib/tstor\n[backend cpu]\nlibrary = tstor-cpu.so\n' > "$moved/app.ini"
info=$(TSTOR_CONFIG="$moved/app.ini" LD_LIBRARY_PATH="$moved/lib" "$moved/bin/tstor" info) ||
  { echo "the copied tstor info with \$ORIGIN failed"; exit 1; }
echo "$info" | grep -q "cpu *loaded *$moved/bin/../lib/tstor/tstor-cpu.so" ||
  { echo "\$ORIGIN did not lead to the copied backends:"; echo "$info"; exit 1; }

echo "out-of-tree builds: ok"
