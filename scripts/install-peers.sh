#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install-peers.sh -- install the peer routers scripts/peers.sh compares
# wsel with, from PyPI at pinned versions, into venvs inside the checkout:
# .peers/venv (smg ~37 MB, vllm-router ~24 MB, plus their Python
# dependencies: grpcio, fastapi, aiohttp, ...) and .peers/dynamo-venv
# (Dynamo, below). Idempotent.
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
fi
if [ "$want" -eq 1 ]; then
  echo "install-peers: installing ${pins[*]} into $venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    -c "$root/scripts/peers-constraints.txt" "${pins[@]}"
fi

# --- Dynamo (docs/peers.md, docs/integrations.md) ----------------------------
# A venv of its own, $DYNAMO_VENV: ai-dynamo-runtime 1.6.1 requires
# pydantic<=2.13.5 where the routers above pin 2.14.4 (through fastapi).
# ai-dynamo 1.6.1 also requires aisimulate==0.13.0, a placeholder wheel that
# downloads the real one from NVIDIA's own package index when installed
# (unreachable here; Dynamo's planner and offline replay use it, the
# frontend, router and mocker do not), so ai-dynamo goes in --no-deps and
# its other requirements are named here, every version pinned by
# scripts/dynamo-constraints.txt (with cffi, setuptools and pytest for the
# wsel binding and the adapter's tests). ~200 MB of wheels, ~700 MB
# installed. WSEL_DYNAMO=0 leaves it out.
if [ "${WSEL_DYNAMO:-1}" = 1 ]; then
  dvenv=${DYNAMO_VENV:-$root/.peers/dynamo-venv}
  dynamo_pin=1.6.1
  if [ -x "$dvenv/bin/python" ] &&
    "$dvenv/bin/pip" show ai-dynamo 2>/dev/null | grep -x "Version: $dynamo_pin" >/dev/null; then
    echo "install-peers: ai-dynamo==$dynamo_pin present in $dvenv"
  else
    [ -x "$dvenv/bin/python" ] || python3 -m venv "$dvenv"
    echo "install-peers: installing ai-dynamo==$dynamo_pin into $dvenv"
    "$dvenv/bin/pip" install -q --disable-pip-version-check \
      -c "$root/scripts/dynamo-constraints.txt" "ai-dynamo-runtime==$dynamo_pin" \
      aiohttp certifi kubernetes msgspec prometheus-client pyzmq redis tqdm \
      transformers typing-extensions zstandard uvloop cffi setuptools pytest
    "$dvenv/bin/pip" install -q --disable-pip-version-check --no-deps \
      "ai-dynamo==$dynamo_pin"
  fi
fi
