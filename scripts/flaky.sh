#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# flaky.sh N -- hunt tests that depend on the scheduler.
#
# Builds the gcc, clang and TSan configurations of scripts/test.sh (in
# build-flaky-gcc, build-flaky-clang, build-flaky-tsan; TSan runs only the
# concurrency suites, as test.sh does), then, while two busy loops keep the
# cores occupied, runs `ctest -j2` N times on each build. It prints every
# test that failed with how many times, one summary line per build, and a
# final "P passed, F failed" over all runs; it exits non-zero if any run
# failed. The output of each failed run is kept in BUILD/flaky-logs/.
#
#   scripts/flaky.sh 20
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 1 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 N   (run every suite N times per build under load)" >&2
  exit 2
fi
runs=$1
jobs=$(nproc)
# The same set as scripts/test.sh: suites that exercise threads.
concurrency_regex='stress|switch|concurren|hysteresis|validate|router'

build() { # build DIR [cmake args...] -- as scripts/test.sh builds
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
}

busy_pids=()
ctest_pid=
stop_busy() {
  local pid
  if [ -n "$ctest_pid" ]; then # ctest and the tests it runs: its own group
    kill -- "-$ctest_pid" 2>/dev/null || true
    wait "$ctest_pid" 2>/dev/null || true
  fi
  for pid in "${busy_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  busy_pids=()
  ctest_pid=
}
trap stop_busy EXIT
trap 'exit 130' INT TERM

printf '==== building ====\n'
build build-flaky-gcc
build build-flaky-clang -DCMAKE_C_COMPILER=clang
build build-flaky-tsan -DCMAKE_C_COMPILER=clang -DWSEL_SANITIZE=thread

for _ in 1 2; do
  sh -c 'while :; do :; done' &
  busy_pids+=("$!")
done

passed=0
failed=0
summary=()

run_build() { # run_build NAME DIR [ctest args...]; env comes from the caller
  local name=$1 dir=$2
  shift 2
  local logs="$dir/flaky-logs" failed_file="$dir/Testing/Temporary/LastTestsFailed.log"
  local bad=0 i
  local -A counts=()
  rm -rf "$logs"
  mkdir -p "$logs"
  for ((i = 1; i <= runs; i++)); do
    rm -f "$failed_file"
    # In the background and in a process group of its own, so that an
    # interrupt stops it and its tests at once (the trap).
    setsid ctest --test-dir "$dir" --output-on-failure --timeout 600 -j2 "$@" >"$logs/run-$i.log" 2>&1 &
    ctest_pid=$!
    local rc=0
    wait "$ctest_pid" || rc=$?
    ctest_pid=
    if [ "$rc" -eq 0 ]; then
      passed=$((passed + 1))
      rm -f "$logs/run-$i.log"
    else
      failed=$((failed + 1))
      bad=$((bad + 1))
      local test_name
      if [ -s "$failed_file" ]; then
        while IFS=: read -r _ test_name; do
          counts[$test_name]=$((${counts[$test_name]:-0} + 1))
        done <"$failed_file"
      else
        counts['(ctest itself)']=$((${counts['(ctest itself)']:-0} + 1))
      fi
      printf 'flaky: %s run %d failed; log in %s\n' "$name" "$i" "$logs/run-$i.log"
    fi
  done
  local t
  for t in "${!counts[@]}"; do
    printf 'flaky: %s %s failed %d/%d\n' "$name" "$t" "${counts[$t]}" "$runs"
  done
  summary+=("$name $bad/$runs runs failed")
}

printf '==== %d runs per build under two busy loops ====\n' "$runs"
run_build gcc build-flaky-gcc
run_build clang build-flaky-clang
WSEL_STRESS_SCALE=0.05 TSAN_OPTIONS="halt_on_error=1:suppressions=$PWD/tests/tsan.supp" \
  run_build tsan build-flaky-tsan -R "$concurrency_regex"

stop_busy
summary_line=$(printf '%s, ' "${summary[@]}")
printf 'flaky: %s\n' "${summary_line%, }"
printf '%d passed, %d failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]
