#!/bin/sh
# Installs the pinned Python references (requirements.txt) into a virtual
# environment outside the clone, once: a second run finds the same
# requirements installed and does nothing. torch's wheel and the CUDA
# libraries it names come to about 5 GB, so the environment is kept and
# reused, never rebuilt per run.
#
#   tests/pyref/install.sh         prints the environment's python on stdout
#   tests/pyref/install.sh --find  the same when it is ready, else exit 77;
#                                  never installs (what the suites call)
#
# The folder is $TSTOR_PYREF, else $XDG_CACHE_HOME/tstor/pyref (default
# ~/.cache/tstor/pyref). Exit status 0 when the environment is ready; 77 when
# it cannot be made here (no python3 with venv, or no network for a first
# install), with the reason on stderr: the suites that need it then skip,
# saying so.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=${TSTOR_PYREF:-${XDG_CACHE_HOME:-$HOME/.cache}/tstor/pyref}
req="$here/requirements.txt"
stamp="$venv/tstor-requirements.txt"

# The packages installed without their dependencies (requirements-nodeps.txt:
# torchvision, whose pins would move torch), once, into a ready environment;
# optional: the suites that need them skip without them, and --find never
# waits for them.
nodeps="$here/requirements-nodeps.txt"
nodeps_stamp="$venv/tstor-requirements-nodeps.txt"
add_nodeps() {
  cmp -s "$nodeps" "$nodeps_stamp" 2> /dev/null && return 0
  echo "pyref: installing $nodeps without dependencies" >&2
  if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    -r "$nodeps" >&2; then
    cp "$nodeps" "$nodeps_stamp"
  else
    echo "pyref: could not install $nodeps: the networks of torch 2.x are not regenerated" >&2
  fi
}

if [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp" 2> /dev/null; then
  [ "${1:-}" = --find ] || add_nodeps
  echo "$venv/bin/python"
  exit 0
fi
[ "${1:-}" != --find ] || exit 77

# The interpreter the environment is made from: the first python3 with venv
# and pip. Not /usr/bin/python3 on purpose: that one carries Debian's torch
# 1.13, the other reference.
made=
for py in python3 python3.12 python3.11 /usr/bin/python3; do
  command -v "$py" > /dev/null 2>&1 || continue
  "$py" -c 'import venv, ensurepip' 2> /dev/null || continue
  made=$py
  break
done
if [ -z "$made" ]; then
  echo "pyref: no python3 with venv and ensurepip: the torch 2.x references are skipped" >&2
  exit 77
fi
echo "pyref: installing the Python references into $venv (once; about 5 GB)" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
if ! "$made" -m venv "$venv" >&2 ||
   ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2; then
  rm -rf "$venv"
  echo "pyref: could not install $req (no network?): the torch 2.x references are skipped" >&2
  exit 77
fi
cp "$req" "$stamp"
add_nodeps
echo "$venv/bin/python"
