#!/usr/bin/env bash
# Installs dblock into a scratch prefix and builds a consumer against it twice: with CMake's
# find_package(dblock) and with pkg-config; then the examples/ against it. Usage: install_test.sh BUILD_DIR CONSUMER_DIR
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
# The sweeper's deployment files; the service runs the command at the configured bindir.
grep -q "^ExecStart=/.*/dblock sweep$" "$prefix/share/dblock/systemd/dblock-sweep.service"
test -f "$prefix/share/dblock/systemd/dblock-sweep.timer"
test -f "$prefix/share/dblock/kubernetes/sweep-cronjob.yaml"

cmake -S "$consumer" -B "$prefix/consumer-cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer-cmake" >/dev/null
"$prefix/consumer-cmake/consumer" "sqlite:$prefix/cmake.db"

pc=$(dirname "$(find "$prefix" -name dblock.pc | head -n 1)")
PKG_CONFIG_PATH="$pc" c++ -std=c++17 "$consumer/main.cpp" -o "$prefix/consumer-pc" \
  $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs dblock)
"$prefix/consumer-pc" "sqlite:$prefix/pc.db"
test ! -e "$prefix/bin/dblock-bench"  # a development tool, installed only when asked

# The examples, built against the install as a user's project would be, each run on SQLite.
src=$(cd "$consumer/../../.." && pwd)
cmake -S "$src/examples" -B "$prefix/examples" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/examples" -j "$(nproc)" >/dev/null
db="sqlite:$prefix/examples.db"
"$prefix/examples/cron_job" "$db" 5s | grep -q "running with fence"
code=0; "$prefix/examples/cron_job" "$db" 5s >/dev/null || code=$?
test "$code" = 75  # the second run within hold_at_least skips the job
"$prefix/examples/fenced_writes" "$db" >/dev/null
"$prefix/examples/leader" "$db" 1 | grep -q "leading with fence"

# A shared build, as a distribution packages it: its own tree (unoptimised, library and
# command only), a SONAME with the major version, and only the public API exported.
cmake -S "$src" -B "$prefix/shared-build" -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF -DDBLOCK_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE= >/dev/null
cmake --build "$prefix/shared-build" -j "$(nproc)" >/dev/null
cmake --install "$prefix/shared-build" --prefix "$prefix/shared" >/dev/null
lib=$(find "$prefix/shared" -name "libdblock.so.*.*.*" | head -n 1)
test -n "$lib"
major=${version%%.*}
readelf -d "$lib" | grep -q "SONAME.*libdblock.so.$major\]"
# Exported: dblock:: names only, none of dblock::detail (the backends, the core).
exported=$(nm -D --defined-only -C "$lib" | grep -c " dblock::" || true)
leaked=$(nm -D --defined-only -C "$lib" | grep " dblock::detail::" || true)
test "$exported" -gt 10
[ -z "$leaked" ] || { echo "install: the shared library exports internals:"; echo "$leaked" | head; exit 1; }
test "$("$prefix/shared/bin/dblock" --version)" = "dblock $version"
"$prefix/shared/bin/dblock" run --url "sqlite:$prefix/shared-cli.db" --name job -- true
cmake -S "$consumer" -B "$prefix/consumer-shared" -DCMAKE_PREFIX_PATH="$prefix/shared" >/dev/null
cmake --build "$prefix/consumer-shared" >/dev/null
"$prefix/consumer-shared/consumer" "sqlite:$prefix/shared.db"
echo "install: 5 passed, 0 failed"
