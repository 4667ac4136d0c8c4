#!/bin/sh
# The library reads its environment with secure_getenv only (tstor.h,
# docs/config.md): a setuid program linked with libtstor ignores TSTOR_CONFIG,
# TSTOR_BACKEND_DIR and the rest, so its caller cannot make it load a module.
# A plain getenv anywhere in the core shows up as an import of libtstor.so.
set -eu
lib=${top_builddir:-..}/core/.libs/libtstor.so
if [ ! -f "$lib" ]; then
  echo "SKIP: no shared $lib (built with --disable-shared?)"
  exit 77
fi
undefined=$(nm -D --undefined-only "$lib" | awk '{ print $NF }' | sed 's/@.*//')
if echo "$undefined" | grep -qx getenv; then
  echo "FAIL: $lib imports getenv; read the environment with secure_getenv"
  exit 1
fi
if ! echo "$undefined" | grep -qx secure_getenv; then
  echo "FAIL: $lib does not import secure_getenv (has the environment stopped counting?)"
  exit 1
fi
echo "libtstor.so reads its environment with secure_getenv only"
