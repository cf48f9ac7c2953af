#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test.sh -- the README's second command: the whole test suite.
#
#   1. gcc build, every CTest suite
#   2. gcc Release build (-O3), every CTest suite and, as root with
#      dpkg-buildpackage, the Debian packages (scripts/package-test.sh)
#   3. clang build, every CTest suite
#   4. ASan + UBSan build (gcc), every CTest suite
#   5. TSan build (clang), the concurrency suites
#   6. libFuzzer harnesses (clang), WSEL_FUZZ_SECONDS each (default 60)
# Every build turns warnings into errors (-DWSEL_WERROR=ON; a user's
# build does not). Builds are RelWithDebInfo unless said.
#
# Set WSEL_TEST_QUICK=1 to run step 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc)
fuzz_seconds=${WSEL_FUZZ_SECONDS:-60}
# Suites that exercise threads; the TSan build runs these.
concurrency_regex='stress|switch|concurren|hysteresis|validate|router'

step() { printf '\n==== %s ====\n' "$*"; }

build() { # build DIR [cmake args...]
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWSEL_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
}

# --timeout 600: a test without a TIMEOUT of its own that hangs fails in
# 10 minutes instead of holding CI until its 90-minute limit.
# The package test (label "package") builds, installs and purges the .debs
# once, in the Release stage; the other stages leave it out.
step "gcc build and tests"
build build
ctest --test-dir build --output-on-failure --timeout 600 -j"$jobs" -LE package

if [ "${WSEL_TEST_QUICK:-0}" = 1 ]; then
  exit 0
fi

# What users and distributions build: -O3 finds warnings and bugs -O2 does not.
step "gcc Release build (-O3) and tests, Debian packages"
build build-release -DCMAKE_BUILD_TYPE=Release
ctest --test-dir build-release --output-on-failure --timeout 600 -j"$jobs"

step "clang build and tests"
build build-clang -DCMAKE_C_COMPILER=clang
ctest --test-dir build-clang --output-on-failure --timeout 600 -j"$jobs" -LE package

step "ASan + UBSan build and tests"
build build-asan -DWSEL_SANITIZE=address,undefined
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure --timeout 600 -j"$jobs" -LE package

step "TSan build and concurrency tests"
build build-tsan -DCMAKE_C_COMPILER=clang -DWSEL_SANITIZE=thread
WSEL_STRESS_SCALE=0.05 TSAN_OPTIONS="halt_on_error=1:suppressions=$PWD/tests/tsan.supp" \
  ctest --test-dir build-tsan --output-on-failure --timeout 600 -j"$jobs" -R "$concurrency_regex"

step "libFuzzer harnesses (${fuzz_seconds}s each)"
tests/fuzz/run.sh "$fuzz_seconds" build-fuzz

step "all test stages passed"
