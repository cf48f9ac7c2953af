#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# setup.sh -- the README's first command: install dependencies, build wsel,
# and run its main job, `wsel sim` on the built-in workload comparing every
# bundled policy.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
build/bin/wsel sim "$@"
