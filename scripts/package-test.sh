#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# package-test.sh -- build wsel's Debian packages (debian/) and prove them
# on this Debian 12 system, the way a user installs them:
#
#   1. dpkg-buildpackage -b in a copy of the tree, then lintian (no errors)
#   2. purge any installed wsel package, apt-get install ./*.deb
#   3. wsel --version; wsel validate softmax; an outside plugin built with
#      pkg-config from libwsel-dev validates
#   4. the nginx module, enabled through /etc/nginx/modules-enabled by its
#      package: nginx -t, then a request routed through nginx to a
#      wsel-engine on loopback
#   5. apt-get purge: nothing left under /usr/lib/wsel, no modules-enabled link
# The packages are purged on any exit, so the system is left as found
# (less any wsel package installed before, which step 2 purged).
#
# Runs on the host system, not in a debootstrap root: a clean root costs
# minutes of downloads per run, and apt resolves the same dependencies here.
#
# Needs root, dpkg-buildpackage, debhelper, lintian and the build
# dependencies (scripts/install-deps.sh); exits 77 (skipped) without root
# or one of those tools. WORK (default: a new folder under /tmp) holds the
# copy, the .debs and the logs. Runs take a lock: one at a time per system.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
packages=(libwsel-host1 libwsel-router1 libwsel-dev wsel libnginx-mod-http-upstream-wsel)

step() { printf -- '--- %s\n' "$*"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
skip() {
  echo "SKIPPED: $*"
  exit 77
}

[ "$(id -u)" -eq 0 ] || skip "package-test.sh installs packages: run it as root"
for tool in dpkg-buildpackage dh lintian; do
  command -v $tool >/dev/null ||
    skip "$tool not found: install dpkg-dev debhelper lintian (scripts/install-deps.sh)"
done

WORK=${WORK:-$(mktemp -d /tmp/wsel-package-test.XXXXXX)}
rm -rf "$WORK"
mkdir -p "$WORK"
exec 9>/var/lock/wsel-package-test.lock
flock 9

export DEBIAN_FRONTEND=noninteractive
apt_get() { apt-get -q -y -o DPkg::Lock::Timeout=300 "$@"; }

installed() { # the wsel packages dpkg knows (installed or with config left)
  { dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "${packages[@]}" 2>/dev/null || true; } |
    awk '$1 ~ /^.[ic]/ {print $2}'
}
purge_all() {
  local have
  have=$(installed)
  [ -z "$have" ] || apt_get purge $have >"$WORK/purge.log" 2>&1
}

pids=()
cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  purge_all || echo "package-test: purging failed (see $WORK/purge.log)" >&2
  exit $rc
}
trap cleanup EXIT

step "build the packages in $WORK/src (log: $WORK/build.log)"
mkdir -p "$WORK/src/wsel"
git -C "$root" ls-files -co --exclude-standard -z |
  (cd "$root" && tar --null -T - -cf -) | tar -x -C "$WORK/src/wsel"
# the revision `wsel --version` prints: the copy is not a git checkout
revision=$(git -C "$root" rev-parse --short=7 HEAD 2>/dev/null || true)
if [ -n "$revision" ] && [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
  revision=$revision-dirty
fi
(cd "$WORK/src/wsel" &&
  WSEL_GIT_REVISION=$revision DEB_BUILD_OPTIONS="parallel=$(nproc) nocheck" \
    dpkg-buildpackage -b -us -uc) >"$WORK/build.log" 2>&1 ||
  fail "dpkg-buildpackage failed (see $WORK/build.log)"
debs=()
for p in "${packages[@]}"; do
  deb=$(ls "$WORK"/src/"${p}"_*.deb 2>/dev/null) || fail "no package $p was built"
  debs+=("$deb")
done
ls -l "${debs[@]}"

step "lintian: no errors"
# Warnings are listed, not failed (README.md, "Install" lists them).
lintian --fail-on error "$WORK"/src/*.changes | tee "$WORK/lintian.log" ||
  fail "lintian reports errors"

step "the module depends on the nginx ABI it was built against"
abi=$(sed -n 's/^nginx:abi=//p' /usr/share/nginx/src/debian/libnginx-mod.abisubstvars)
module_deb=$(ls "$WORK"/src/libnginx-mod-http-upstream-wsel_*.deb)
dpkg-deb -f "$module_deb" Depends | grep -qw -- "$abi" ||
  fail "$module_deb does not depend on $abi: $(dpkg-deb -f "$module_deb" Depends)"
dpkg-query -W -f='${Provides}\n' nginx | grep -qw -- "$abi" ||
  fail "the installed nginx does not provide $abi"
echo "Depends: $abi, which the installed nginx provides"

step "remove any installed wsel, install the .debs with apt"
purge_all
apt_get install "${debs[@]}" >"$WORK/install.log" 2>&1 ||
  fail "apt-get install failed (see $WORK/install.log)"

step "wsel --version"
version=$(wsel --version)
echo "$version"
[[ $version =~ ^wsel\ [0-9]+\.[0-9]+\.[0-9]+\ \(ABI\ [0-9]+\.[0-9]+ ]] ||
  fail "wsel --version printed '$version'"
wsel-engine --version

step "wsel validate softmax (the bundled plugin, found by name)"
wsel validate softmax --seed 1 >"$WORK/validate.log" 2>&1 ||
  fail "wsel validate softmax (see $WORK/validate.log)"
tail -1 "$WORK/validate.log"

step "an outside plugin built with pkg-config from libwsel-dev validates"
template=/usr/share/wsel/examples/plugin-template
# shellcheck disable=SC2046 # pkg-config's words are separate arguments
cc -std=c11 -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -shared \
  $(pkg-config --cflags wsel) "$template/least_active.c" -o "$WORK/least_active.so" \
  -Wl,--version-script="$(pkg-config --variable=versionscript wsel)" -Wl,-z,defs ||
  fail "the pkg-config build of $template/least_active.c"
wsel validate "$WORK/least_active.so" --seed 1 >"$WORK/validate-outside.log" 2>&1 ||
  fail "wsel validate least_active.so (see $WORK/validate-outside.log)"
tail -1 "$WORK/validate-outside.log"

step "nginx -t loads the module through /etc/nginx/modules-enabled"
enabled=/etc/nginx/modules-enabled/50-mod-http-upstream-wsel.conf
[ -L "$enabled" ] || fail "$enabled: the package did not enable the module"
nginx -t >"$WORK/nginx-t.log" 2>&1 || fail "nginx -t: $(cat "$WORK/nginx-t.log")"
cat "$WORK/nginx-t.log"

step "a request routed by the module through nginx to a wsel-engine"
wsel-engine --port 0 --port-file "$WORK/engine.port" --quiet >"$WORK/engine.log" 2>&1 &
pids+=($!)
while [ ! -s "$WORK/engine.port" ] && kill -0 "${pids[-1]}" 2>/dev/null; do
  sleep 0.1
done
engine=$(awk '$1 == "http" {sub("http://", "", $2); print $2}' "$WORK/engine.port")
[ -n "$engine" ] || fail "wsel-engine did not start"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Debian's prefix (/usr/share/nginx), so the snippet's modules/ path holds.
cat >"$WORK/nginx.conf" <<CONF
# SPDX-License-Identifier: Apache-2.0
include /etc/nginx/modules-enabled/*.conf;
user $(id -un) $(id -gn);
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log info;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $WORK/body;
    proxy_temp_path $WORK/proxy;
    upstream engines {
        server $engine max_fails=0;
        wsel_policy /usr/lib/wsel/plugins/softmax.so '{"temperature": 0}';
    }
    server {
        listen 127.0.0.1:$port;
        location /v1/ { wsel_route engines; proxy_pass http://engines; }
        location = /wsel/status { wsel_status engines; }
    }
}
CONF
nginx -t -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log" >"$WORK/nginx-t2.log" 2>&1 ||
  fail "nginx -t with $WORK/nginx.conf: $(cat "$WORK/nginx-t2.log")"
nginx -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log" &
pids+=($!)
status=000
for _ in $(seq 100); do # until nginx listens (10 s at most)
  status=$(curl -s -o "$WORK/reply.json" -w '%{http_code}' \
    -H 'Content-Type: application/json' \
    -d '{"model": "wsel-engine", "prompt": "hello", "max_tokens": 2}' \
    "http://127.0.0.1:$port/v1/completions" || true)
  [ "$status" = 000 ] || break
  kill -0 "${pids[-1]}" 2>/dev/null || break
  sleep 0.1
done
[ "$status" = 200 ] || fail "POST /v1/completions through nginx: HTTP $status ($(cat "$WORK/nginx-error.log"))"
head -c 300 "$WORK/reply.json"
echo
curl -s "http://127.0.0.1:$port/wsel/status" >"$WORK/status.json"
python3 - "$WORK/status.json" <<'PY' || fail "wsel_status: $(cat "$WORK/status.json")"
import json, sys
s = json.load(open(sys.argv[1]))
print("wsel_status: %d request(s), %d route(s)" % (s["requests"], s["routes"]))
sys.exit(0 if s["requests"] >= 1 and s["routes"] >= 1 else 1)
PY
for pid in "${pids[@]}"; do
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
done
pids=()

step "apt-get purge leaves nothing behind"
apt_get purge "${packages[@]}" >"$WORK/purge.log" 2>&1 || fail "apt-get purge (see $WORK/purge.log)"
[ -z "$(installed)" ] || fail "still known to dpkg after purge: $(installed)"
for gone in /usr/lib/wsel "$enabled" /usr/lib/nginx/modules/ngx_http_upstream_wsel_module.so \
  /usr/share/nginx/modules-available/mod-http-upstream-wsel.conf /usr/bin/wsel; do
  [ ! -e "$gone" ] && [ ! -L "$gone" ] || fail "$gone is left after purge"
done
echo "package test: all steps passed"
