#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# nginx_addon_build.sh -- nginx's own build of the module, the way
# nginx/config (and nginx/README.md) documents it: a copy of nginx-dev's
# tree configured with Debian's conf_flags plus --add-dynamic-module=nginx/,
# `make modules`, WSEL_INCS and WSEL_LIBS pointing at this checkout's
# headers and this build's libraries; the module built that way must be
# accepted by `nginx -t` through load_module (every source it needs listed
# in nginx/config, no symbol left undefined).
#
# Environment (set by CTest): WSEL_SOURCE_DIR, WSEL_BUILD_DIR, WORK
# (scratch folder, wiped first), NGX_SOURCE (nginx-dev's tree), WSEL_NGINX
# (the nginx binary).
set -eu

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

rm -rf "$WORK"
mkdir -p "$WORK/conf"
cp -r "$NGX_SOURCE" "$WORK/src"
cd "$WORK/src"
# conf_flags holds NGX_CONF_FLAGS=( ... ): a bash array, read by bash.
WSEL_INCS="$WSEL_SOURCE_DIR/router/include $WSEL_SOURCE_DIR/host/include $WSEL_SOURCE_DIR/abi" \
WSEL_LIBS="-L$WSEL_BUILD_DIR/lib -lwsel-router -lwsel-host" \
    bash -c '. ./conf_flags && ./configure "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$0"' \
    "$WSEL_SOURCE_DIR/nginx" >"$WORK/configure.log" 2>&1 ||
    fail "configure failed (see $WORK/configure.log)"
make -f objs/Makefile modules >"$WORK/make.log" 2>&1 ||
    fail "make modules failed (see $WORK/make.log)"
module=$WORK/src/objs/ngx_http_upstream_wsel_module.so
[ -f "$module" ] || fail "no $module"
# Only what load_module looks up is exported (the version script): the
# JSON reader and the module's own functions stay local.
exports=$(nm -D --defined-only "$module" | awk '{ print $3 }' | sort | tr '\n' ' ')
[ "$exports" = "ngx_module_names ngx_module_order ngx_modules " ] ||
    fail "the module exports more than nginx's three symbols: $exports"

cat >"$WORK/conf/nginx.conf" <<CONF
load_module $module;
error_log stderr;
pid $WORK/nginx.pid;
events {}
http {
    upstream engines { wsel_policy builtin; server 127.0.0.1:1; }
    server { listen 127.0.0.1:1; location / { proxy_pass http://engines; } }
}
CONF
LD_LIBRARY_PATH=$WSEL_BUILD_DIR/lib "$WSEL_NGINX" -t -p "$WORK" -c "$WORK/conf/nginx.conf" \
    >"$WORK/nginx-t.log" 2>&1 || fail "nginx -t refused the module: $(cat "$WORK/nginx-t.log")"
echo "nginx's own build of the module loads: $module"
