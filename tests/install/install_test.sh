#!/usr/bin/env bash
# Installs dblock into a scratch prefix and builds a consumer against it twice: with CMake's
# find_package(dblock) and with pkg-config; then the examples/ against it. Usage: install_test.sh BUILD_DIR CONSUMER_DIR
set -euo pipefail
build=$1 consumer=$2
prefix=$(mktemp -d /tmp/dblock-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -x "$prefix/bin/dblock"
# The tree's configuration: CMakeCache.txt's NAME:TYPE=VALUE lines.
configured() { grep -Eqx "$1:[A-Z]*=$2" "$build/CMakeCache.txt"; }
# A shared command finds its library through $ORIGIN/../<libdir> wherever the install moved;
# a tree configured for /usr (a distribution's, scripts/test's plain tree) has no run path,
# the dynamic loader's own directories being where its packages put the library.
run_installed=("$prefix/bin/dblock")
if configured BUILD_SHARED_LIBS ON; then
  runpath=$(readelf -d "$prefix/bin/dblock" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p')
  if configured CMAKE_INSTALL_PREFIX /usr; then
    [ -z "$runpath" ] || { echo "install: a command for /usr has the run path $runpath"; exit 1; }
    run_installed=(env LD_LIBRARY_PATH="$(dirname "$(find "$prefix" -name 'libdblock.so.*' | head -n 1)")" "$prefix/bin/dblock")
  else
    [[ $runpath == '$ORIGIN/../'* ]] || { echo "install: the command's run path is '$runpath'"; exit 1; }
  fi
fi
# One version: the installed header's (from project(VERSION)) is what the command prints.
version=$(sed -n 's/^#define DBLOCK_VERSION "\(.*\)"$/\1/p' "$prefix/include/dblock/version.hpp")
test -n "$version"
test "$("${run_installed[@]}" --version)" = "dblock $version"
test -f "$prefix/share/dblock/migrations/sqlite/V1__create_dblock_locks.sql"
test -f "$prefix/include/dblock/dblock.hpp"
# The sweeper's deployment files; the service runs the command at the configured bindir.
grep -q "^ExecStart=/.*/dblock sweep$" "$prefix/share/dblock/systemd/dblock-sweep.service"
test -f "$prefix/share/dblock/systemd/dblock-sweep.timer"
test -f "$prefix/share/dblock/kubernetes/sweep-cronjob.yaml"

cmake -S "$consumer" -B "$prefix/consumer-cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer-cmake" >/dev/null
"$prefix/consumer-cmake/consumer" "sqlite:$prefix/cmake.db"

# dblock.pc names the configured prefix; --define-variable moves it to where this tree went.
pc=$(dirname "$(find "$prefix" -name dblock.pc | head -n 1)")
pkgconf() { PKG_CONFIG_PATH="$pc" pkg-config --define-variable=prefix="$prefix" "$@" dblock; }
test "$(pkgconf --variable=includedir)" = "$prefix/include"
c++ -std=c++17 "$consumer/main.cpp" -o "$prefix/consumer-pc" $(pkgconf --cflags --libs) \
  -Wl,-rpath,"$(pkgconf --variable=libdir)"  # a shared build's library is found there
"$prefix/consumer-pc" "sqlite:$prefix/pc.db"
# The license: a distribution's copyright file per package under /usr, LICENSE elsewhere.
if configured CMAKE_INSTALL_PREFIX /usr; then
  grep -q "^License: Apache-2.0$" "$prefix/share/doc/dblock/copyright"
else
  test -f "$prefix/share/doc/dblock/LICENSE"
fi
test ! -e "$prefix/bin/dblock-bench"  # a development tool, installed only when asked

# The examples, built against the install as a user's project would be, each run on SQLite.
src=$(cd "$consumer/../../.." && pwd)
cmake -S "$src/examples" -B "$prefix/examples" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/examples" -j "$(nproc)" >/dev/null
db="sqlite:$prefix/examples.db"
"$prefix/examples/cron_job" "$db" 5s | grep "running with fence" >/dev/null
code=0; "$prefix/examples/cron_job" "$db" 5s >/dev/null || code=$?
test "$code" = 75  # the second run within hold_at_least skips the job
"$prefix/examples/fenced_writes" "$db" >/dev/null
"$prefix/examples/leader" "$db" 1 | grep "leading with fence" >/dev/null
"$prefix/examples/worker_pool" "$db" 6 2 12 | grep "12 tasks, at most [12] at once" >/dev/null
"$prefix/examples/same_database" "$prefix/same.db" | grep "refused a stale write" >/dev/null
"$prefix/examples/asio_tasks" "$db" 200 4 | grep "200 tasks on 4 names, on one thread: 0 overlapping" >/dev/null

# A shared build, as a distribution packages it (RelWithDebInfo, the static library made from
# the same objects, installed to /usr), packaged as the three Debian packages
# (cmake/Packaging.cmake), each unpacked into a scratch root. That is the tested tree itself when
# it was configured so (scripts/test's plain tree), else a tree of the test's own (library and
# command only), kept in the tested build's directory so that a second run rebuilds only what
# changed.
if configured BUILD_SHARED_LIBS ON && configured DBLOCK_STATIC_TOO ON && configured CMAKE_INSTALL_PREFIX /usr; then
  shared=$build
else
  shared="$build/shared-build"
  cmake -S "$src" -B "$shared" -DBUILD_SHARED_LIBS=ON -DDBLOCK_STATIC_TOO=ON -DBUILD_TESTING=OFF \
    -DDBLOCK_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE= -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
  cmake --build "$shared" -j "$(nproc)" >/dev/null
fi
rm -f "$shared"/*.deb "$shared"/*.ddeb
(cd "$shared" && cpack -G DEB >cpack.log 2>&1) || { tail -n 30 "$shared/cpack.log"; exit 1; }
major=${version%%.*}
root="$prefix/root"
for package in "libdblock$major" libdblock-dev dblock; do
  deb=$(find "$shared" -maxdepth 1 -name "${package}_${version}-*_*.deb")
  test -n "$deb" || { echo "install: no package $package was built"; exit 1; }
  dpkg-deb -x "$deb" "$root"
  debian_version=$(dpkg-deb -f "$deb" Version)
  depends=$(dpkg-deb -f "$deb" Depends)
  case $package in
    libdblock$major) [[ $depends == *libstdc++6* ]] ;;  # from dpkg-shlibdeps
    libdblock-dev) [[ $depends == *"libdblock$major (= $debian_version)"* && $depends == *libfmt-dev* ]] ;;
    dblock) [[ $depends == *"libdblock$major (= $debian_version)"* ]] ;;
  esac || { echo "install: $package has Depends: $depends"; exit 1; }
  grep -q "^License: Apache-2.0$" "$root/usr/share/doc/$package/copyright"
  test -f "$root/usr/share/doc/$package/changelog.Debian.gz"
done
# What Debian's checker says of them: any error fails (warnings and notes are printed).
command -v lintian >/dev/null || { echo "install: lintian not found: scripts/deps test installs it"; exit 1; }
lintian_out=$(lintian --fail-on error "$shared"/*.deb 2>&1) || {
  echo "install: lintian reports errors:"; echo "$lintian_out"; exit 1; }
[ -z "$lintian_out" ] || { echo "install: lintian (no errors):"; echo "$lintian_out"; }
libdir=$(dirname "$(find "$root/usr" -name "libdblock.so.*.*.*" | head -n 1)")
lib=$(find "$libdir" -name "libdblock.so.*.*.*")
readelf -d "$lib" | grep -q "SONAME.*libdblock.so.$major\]"
test -f "$libdir/libdblock.a" -a -L "$libdir/libdblock.so"
# The packaged dblock.pc gives plain paths under /usr.
grep -qx "prefix=/usr" "$libdir/pkgconfig/dblock.pc"
test "$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --variable=includedir dblock)" = /usr/include
test -f "$root/usr/share/man/man1/dblock.1.gz" -a -f "$root/usr/share/man/man1/dblock-run.1.gz"
man -l "$root/usr/share/man/man1/dblock-run.1.gz" 2>/dev/null | grep -q -- "--hold-at-least"
test -f "$root/usr/share/dblock/systemd/dblock-sweep.service"
grep -q "^ExecStart=/usr/bin/dblock sweep$" "$root/usr/share/dblock/systemd/dblock-sweep.service"
# Exported: dblock:: names only, none of dblock::detail (the backends, the core).
exported=$(nm -D --defined-only -C "$lib" | grep -c " dblock::" || true)
leaked=$(nm -D --defined-only -C "$lib" | grep " dblock::detail::" || true)
test "$exported" -gt 10
[ -z "$leaked" ] || { echo "install: the shared library exports internals:"; echo "$leaked" | head; exit 1; }
export LD_LIBRARY_PATH="$libdir"
test "$("$root/usr/bin/dblock" --version)" = "dblock $version"
"$root/usr/bin/dblock" run --url "sqlite:$prefix/shared-cli.db" --name job -- true
# Against the unpacked packages: the consumer (shared, then static) and an example.
cmake -S "$consumer" -B "$prefix/consumer-shared" -DCMAKE_PREFIX_PATH="$root/usr" >/dev/null
cmake --build "$prefix/consumer-shared" >/dev/null
"$prefix/consumer-shared/consumer" "sqlite:$prefix/shared.db"
readelf -d "$prefix/consumer-shared/consumer" | grep -q "NEEDED.*libdblock.so.$major"
cmake -S "$consumer" -B "$prefix/consumer-static" -DCMAKE_PREFIX_PATH="$root/usr" -DDBLOCK_TARGET=dblock::dblock_static >/dev/null
cmake --build "$prefix/consumer-static" >/dev/null
! readelf -d "$prefix/consumer-static/consumer" | grep -q "libdblock.so"
"$prefix/consumer-static/consumer" "sqlite:$prefix/static.db"
cmake -S "$src/examples" -B "$prefix/examples-deb" -DCMAKE_PREFIX_PATH="$root/usr" >/dev/null
cmake --build "$prefix/examples-deb" --target leader >/dev/null
"$prefix/examples-deb/leader" "sqlite:$prefix/deb-leader.db" 1 | grep "leading with fence" >/dev/null
echo "install: 6 passed, 0 failed"
