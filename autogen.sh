#!/bin/sh
# Generates configure and the Makefile.in files from a fresh clone.
set -e
cd "$(dirname "$0")"
mkdir -p m4
autoreconf --install --force --warnings=all
