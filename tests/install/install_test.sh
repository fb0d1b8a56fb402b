#!/usr/bin/env bash
# Installs dblock into a scratch prefix and builds a consumer against it twice: with CMake's
# find_package(dblock) and with pkg-config. Usage: install_test.sh BUILD_DIR CONSUMER_DIR
set -euo pipefail
build=$1 consumer=$2
prefix=$(mktemp -d /tmp/dblock-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/dblock"
# One version: the installed header's (from project(VERSION)) is what the command prints.
version=$(sed -n 's/^#define DBLOCK_VERSION "\(.*\)"$/\1/p' "$prefix/include/dblock/version.hpp")
test -n "$version"
test "$("$prefix/bin/dblock" --version)" = "dblock $version"
test -f "$prefix/share/dblock/migrations/sqlite/V1__create_dblock_locks.sql"
test -f "$prefix/include/dblock/dblock.hpp"

cmake -S "$consumer" -B "$prefix/consumer-cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer-cmake" >/dev/null
"$prefix/consumer-cmake/consumer" "sqlite:$prefix/cmake.db"

pc=$(dirname "$(find "$prefix" -name dblock.pc | head -n 1)")
PKG_CONFIG_PATH="$pc" c++ -std=c++17 "$consumer/main.cpp" -o "$prefix/consumer-pc" \
  $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs dblock)
"$prefix/consumer-pc" "sqlite:$prefix/pc.db"
echo "install: 3 passed, 0 failed"
