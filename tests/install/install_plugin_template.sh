#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# install_plugin_template.sh -- install wsel to a scratch prefix and build
# examples/plugin-template against it, the two ways docs/writing-a-plugin.md
# shows (find_package and a one-line cc with pkg-config). Then check that each
# plugin exports exactly wsel_plugin_entry and that the installed `wsel`
# validates it and finds plugins by name.
#
# Environment (set by CTest): WSEL_BUILD_DIR, WSEL_SOURCE_DIR, WORK (scratch
# folder, wiped first), CMAKE, CC.
set -eu

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
step() {
    echo "--- $*"
}

prefix=$WORK/prefix
template=$WSEL_SOURCE_DIR/examples/plugin-template
rm -rf "$WORK"
mkdir -p "$WORK"

step "install wsel to $prefix"
"$CMAKE" --install "$WSEL_BUILD_DIR" --prefix "$prefix" >"$WORK/install.log" ||
    fail "cmake --install $WSEL_BUILD_DIR failed (see $WORK/install.log)"
for f in include/wsel/wsel.h include/wsel/wsel_host.h lib/libwsel-host.so.1 bin/wsel \
    bin/wsel-isolated-helper share/doc/wsel/LICENSE \
    lib/cmake/wsel/wsel-config.cmake lib/cmake/wsel/wsel_plugin.map \
    lib/pkgconfig/wsel.pc; do
    [ -e "$prefix/$f" ] || fail "$prefix/$f was not installed"
done
readelf -d "$prefix/lib/libwsel-host.so.1" | grep -q 'SONAME.*\[libwsel-host\.so\.1\]' ||
    fail "$prefix/lib/libwsel-host.so.1: SONAME is not libwsel-host.so.1"
readelf -d "$prefix/bin/wsel" | grep -q 'R.*PATH.*\[\$ORIGIN/\.\./lib\]' ||
    fail "$prefix/bin/wsel: RUNPATH is not \$ORIGIN/../lib"

step "the installed wsel cluster starts the installed wsel-engine"
if [ -x "$WSEL_BUILD_DIR/bin/wsel-engine" ]; then
    engine=$prefix/bin/wsel-engine
    [ -x "$engine" ] || fail "$engine was not installed (the build has one)"
    readelf -d "$engine" | grep -q 'R.*PATH.*\[\$ORIGIN/\.\./lib\]' ||
        fail "$engine: RUNPATH is not \$ORIGIN/../lib"
    env -u WSEL_ENGINE "$prefix/bin/wsel" cluster --workers 1 --ready-file "$WORK/cluster.ready" \
        >"$WORK/cluster.log" 2>&1 &
    cluster=$!
    # wsel cluster writes the file once its engine listens, or exits (60 s at most).
    while [ ! -s "$WORK/cluster.ready" ] && kill -0 "$cluster" 2>/dev/null; do
        sleep 0.1
    done
    started=$(for child in $(ps -o pid= --ppid "$cluster"); do
        readlink "/proc/$child/exe"
    done)
    kill "$cluster" 2>/dev/null || true
    wait "$cluster" || true
    [ -s "$WORK/cluster.ready" ] || fail "wsel cluster did not start (see $WORK/cluster.log)"
    [ "$started" = "$(readlink -f "$engine")" ] ||
        fail "the installed wsel cluster started '$started', not $engine"
else
    echo "NOTE: no wsel-engine in this build (WSEL_REALTIME off); step skipped"
fi

step "build the template with find_package(wsel)"
"$CMAKE" -S "$template" -B "$WORK/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS=-Werror >"$WORK/cmake-build.log" 2>&1 ||
    fail "configuring $template against $prefix (see $WORK/cmake-build.log)"
"$CMAKE" --build "$WORK/cmake-build" >>"$WORK/cmake-build.log" 2>&1 ||
    fail "building $template (see $WORK/cmake-build.log)"
"$CMAKE" --install "$WORK/cmake-build" >>"$WORK/cmake-build.log" 2>&1 ||
    fail "installing $template (see $WORK/cmake-build.log)"
[ -f "$prefix/lib/wsel/plugins/least_active.so" ] ||
    fail "least_active.so was not installed into $prefix/lib/wsel/plugins"

step "build the template with one cc line and pkg-config"
if command -v pkg-config >/dev/null 2>&1; then
    PKG_CONFIG_PATH=$prefix/lib/pkgconfig
    export PKG_CONFIG_PATH
    [ "$(pkg-config --variable=plugindir wsel)" -ef "$prefix/lib/wsel/plugins" ] ||
        fail "wsel.pc: plugindir is not $prefix/lib/wsel/plugins"
    cd "$WORK"
    # The line docs/writing-a-plugin.md shows, with $CC for cc:
    $CC -std=c11 -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -shared $(pkg-config --cflags wsel) "$template/least_active.c" -o least_active.so -Wl,--version-script=$(pkg-config --variable=versionscript wsel) -Wl,-z,defs ||
        fail "the pkg-config one-liner did not build $template/least_active.c"
    pkg_so=$WORK/least_active.so
else
    echo "NOTE: pkg-config is not installed; skipped the one-line build"
    pkg_so=
fi

step "each plugin exports exactly wsel_plugin_entry"
for so in "$WORK/cmake-build/least_active.so" $pkg_so; do
    exported=$(nm -D --defined-only "$so" | awk '{print $3}' | tr '\n' ' ')
    [ "$exported" = "wsel_plugin_entry " ] ||
        fail "$so exports '$exported', expected exactly wsel_plugin_entry"
done

step "the installed wsel validates them and finds plugins by name"
wsel=$prefix/bin/wsel
run_wsel() {
    # A subcommand that is still a placeholder is noted, not failed.
    if out=$("$wsel" "$@" 2>&1); then
        printf '%s\n' "$out"
    elif printf '%s' "$out" | grep -q 'not implemented'; then
        echo "NOTE: 'wsel $*' is not implemented yet; step skipped"
    else
        printf '%s\n' "$out" >&2
        fail "wsel $* failed"
    fi
}
for so in "$WORK/cmake-build/least_active.so" $pkg_so; do
    run_wsel validate "$so"
done
run_wsel info least_active
run_wsel validate least_active
run_wsel sim --plugin least_active --config '{"slack": 2}' --plugin softmax --workload chat --requests 200
if [ -f "$prefix/lib/wsel/plugins/softmax.so" ]; then
    run_wsel info softmax
else
    echo "NOTE: no bundled softmax plugin installed; 'wsel info softmax' skipped"
fi
step "embed libwsel-host: examples/embedding/router.c, built with pkg-config"
if [ -n "$pkg_so" ]; then
    cd "$WORK"
    # The line docs/embedding.md shows, with $CC for cc and an RPATH so the
    # scratch prefix's library is found without LD_LIBRARY_PATH:
    $CC -std=c11 -Wall -Wextra -Werror "$WSEL_SOURCE_DIR/examples/embedding/router.c" -o router $(pkg-config --cflags --libs wsel) -Wl,-rpath,"$(pkg-config --variable=libdir wsel)" ||
        fail "examples/embedding/router.c did not build against $prefix"
    plugindir=$(pkg-config --variable=plugindir wsel)
    out=$(./router "$plugindir/least_active.so" '{"slack": 2}') ||
        fail "router with least_active.so: $out"
    echo "$out"
    [ "$out" = "least_active chose row 3: worker 11 dp_rank 1" ] ||
        fail "router with least_active.so answered '$out'"
    if ./router "$plugindir/least_active.so" '{"slak": 2}' 2>"$WORK/router.err"; then
        fail "router accepted the unknown key 'slak'"
    fi
    grep -q "slak" "$WORK/router.err" || fail "the config error does not name 'slak'"
else
    echo "NOTE: pkg-config is not installed; skipped the embedding example"
fi
step "embed libwsel-host: the same router built with find_package(wsel)"
"$CMAKE" -S "$WSEL_SOURCE_DIR/examples/embedding" -B "$WORK/router-build" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS=-Werror \
    >"$WORK/router-build.log" 2>&1 &&
    "$CMAKE" --build "$WORK/router-build" >>"$WORK/router-build.log" 2>&1 ||
    fail "building examples/embedding with CMake (see $WORK/router-build.log)"
out=$("$WORK/router-build/router" "$prefix/lib/wsel/plugins/least_active.so" '{}') ||
    fail "CMake-built router with least_active.so: $out"
[ "$out" = "least_active chose row 3: worker 11 dp_rank 1" ] ||
    fail "CMake-built router answered '$out'"
echo "install test: all steps passed"
