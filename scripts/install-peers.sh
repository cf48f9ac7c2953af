#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install-peers.sh -- install the peer routers scripts/peers.sh compares
# wsel with, from PyPI at pinned versions, into a venv inside the checkout
# (.peers/venv). Idempotent. Wheels: smg ~37 MB, vllm-router ~24 MB, plus
# their Python dependencies (grpcio, fastapi, aiohttp, ...).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv=${PEERS_VENV:-$root/.peers/venv}

# name==version, one line each: the versions docs/peers.md was measured with.
pins=(
  smg==1.13.0          # Shepherd Model Gateway (formerly sglang-router)
  vllm-router==0.1.17  # vLLM's router
)

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
want=0
for p in "${pins[@]}"; do
  "$venv/bin/pip" show "${p%%==*}" 2>/dev/null | grep -x "Version: ${p##*==}" >/dev/null ||
    want=1
done
if [ "$want" -eq 0 ]; then
  echo "install-peers: ${pins[*]} present in $venv"
  exit 0
fi
echo "install-peers: installing ${pins[*]} into $venv"
"$venv/bin/pip" install -q --disable-pip-version-check \
  -c "$root/scripts/peers-constraints.txt" "${pins[@]}"
