#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# install_nginx_module.sh -- `cmake --install` to a scratch prefix puts the
# nginx module where Debian's nginx loads dynamic modules from
# (lib/nginx/modules) with its modules-available snippet, and the installed
# module is accepted by Debian's nginx: through the snippet's prefix-relative
# path in a Debian-like layout (share/nginx/modules -> ../../lib/nginx/modules,
# as nginx-common ships it) and by absolute path, with a bundled policy from
# the same prefix, its libraries found by RUNPATH in the prefix alone.
#
# Environment (set by CTest): WSEL_BUILD_DIR, WORK (scratch folder, wiped
# first), CMAKE, WSEL_NGINX (the nginx binary; NGINX itself is nginx's
# inherited-sockets variable).
set -eu

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
step() {
    echo "--- $*"
}

prefix=$WORK/prefix
rm -rf "$WORK"
mkdir -p "$WORK"

step "install wsel to $prefix"
"$CMAKE" --install "$WSEL_BUILD_DIR" --prefix "$prefix" >"$WORK/install.log" ||
    fail "cmake --install $WSEL_BUILD_DIR failed (see $WORK/install.log)"
module=$prefix/lib/nginx/modules/ngx_http_upstream_wsel_module.so
snippet=$prefix/share/nginx/modules-available/mod-http-upstream-wsel.conf
for f in "$module" "$snippet" "$prefix/lib/wsel/plugins/softmax.so"; do
    [ -f "$f" ] || fail "$f was not installed"
done

step "the module exports what load_module looks up"
exported=$(nm -D --defined-only "$module" | awk '{print $3}')
for sym in ngx_modules ngx_module_names ngx_module_order; do
    printf '%s\n' "$exported" | grep -qx "$sym" || fail "$module does not export $sym"
done
# shellcheck disable=SC2016 # a literal $ORIGIN
readelf -d "$module" | grep -q 'RUNPATH.*\[\$ORIGIN/' ||
    fail "$module: RUNPATH is not relative to \$ORIGIN: $(readelf -d "$module" | grep PATH)"
# its wsel libraries come from the prefix, not from the build tree
for lib in libwsel-router.so.1 libwsel-host.so.1; do
    where=$(ldd "$module" | awk -v l="$lib" '$1 == l {print $3}')
    [ -n "$where" ] || fail "$module: $lib not found ($(ldd "$module" | grep wsel))"
    case $(readlink -f "$where") in
    "$(readlink -f "$prefix")"/*) ;;
    *) fail "$module: $lib resolves to $where, outside $prefix" ;;
    esac
done

step "the snippet loads it by nginx's prefix-relative path"
grep -qx 'load_module modules/ngx_http_upstream_wsel_module.so;' "$snippet" ||
    fail "$snippet has no load_module line for modules/ngx_http_upstream_wsel_module.so"
# Debian's layout: nginx's prefix is P/share/nginx, its modules/ a link
ln -s ../../lib/nginx/modules "$prefix/share/nginx/modules"
# A master started as root runs its workers as nobody, who cannot read a
# build under a private folder (mktemp -d is mode 0700): the user running
# the test, who owns the build.
user_line=""
if [ "$(id -u)" = 0 ]; then user_line="user $(id -un) $(id -gn);"; fi
conf_tail() {
    cat <<CONF
$user_line
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 64; }
http {
    upstream engines {
        server 127.0.0.1:1;
        wsel_policy $prefix/lib/wsel/plugins/softmax.so '{"temperature": 0}';
    }
    server {
        listen 127.0.0.1:1;
        location /v1/ { wsel_route engines; proxy_pass http://engines; }
        location = /wsel/status { wsel_status engines; }
    }
}
CONF
}
{
    echo "include $snippet;"
    conf_tail
} >"$WORK/debian.conf"
out=$("$WSEL_NGINX" -t -p "$prefix/share/nginx/" -c "$WORK/debian.conf" -e "$WORK/error.log" 2>&1) ||
    fail "nginx -t with the snippet: $out"
printf '%s\n' "$out"

step "and by its absolute path"
{
    echo "load_module $module;"
    conf_tail
} >"$WORK/absolute.conf"
out=$("$WSEL_NGINX" -t -p "$WORK/" -c "$WORK/absolute.conf" -e "$WORK/error.log" 2>&1) ||
    fail "nginx -t with load_module $module: $out"
printf '%s\n' "$out"
echo "nginx module install test: all steps passed"
