#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# install_examples.sh -- install wsel to a scratch prefix and build the two
# ABI 1.1 examples against it alone (examples/scorer: a score function;
# examples/outcome-learner: on_request_outcome), each with find_package(wsel)
# and with one cc line and pkg-config. Then: each exports exactly
# wsel_plugin_entry, the installed `wsel validate` passes (its score check
# included), the installed `wsel sim` runs both, and the installed pipeline
# takes the third-party scorer as a child by name.
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
rm -rf "$WORK"
mkdir -p "$WORK"

step "install wsel to $prefix"
"$CMAKE" --install "$WSEL_BUILD_DIR" --prefix "$prefix" >"$WORK/install.log" ||
    fail "cmake --install $WSEL_BUILD_DIR failed (see $WORK/install.log)"
wsel=$prefix/bin/wsel
plugindir=$prefix/lib/wsel/plugins

# example folder : plugin name
for pair in scorer:least_prefill outcome-learner:slow_avoid; do
    dir=$WSEL_SOURCE_DIR/examples/${pair%%:*}
    name=${pair#*:}
    build=$WORK/build-$name

    step "$name: build with find_package(wsel) and install"
    if ! { "$CMAKE" -S "$dir" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS=-Werror >"$build.log" 2>&1 &&
        "$CMAKE" --build "$build" >>"$build.log" 2>&1 &&
        "$CMAKE" --install "$build" >>"$build.log" 2>&1; }; then
        fail "building $dir against $prefix (see $build.log)"
    fi
    [ -f "$plugindir/$name.so" ] || fail "$name.so was not installed into $plugindir"
    sos=$build/$name.so

    if command -v pkg-config >/dev/null 2>&1; then
        step "$name: build with one cc line and pkg-config"
        PKG_CONFIG_PATH=$prefix/lib/pkgconfig
        export PKG_CONFIG_PATH
        # The line docs/writing-a-plugin.md shows, with $CC for cc:
        # shellcheck disable=SC2046 # the flags are meant to split
        $CC -std=c11 -O2 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -shared $(pkg-config --cflags wsel) "$dir/$name.c" -o "$WORK/$name.so" -Wl,--version-script=$(pkg-config --variable=versionscript wsel) -Wl,-z,defs ||
            fail "the pkg-config one-liner did not build $dir/$name.c"
        sos="$sos $WORK/$name.so"
    else
        echo "NOTE: pkg-config is not installed; skipped the one-line build"
    fi

    for so in $sos; do
        exported=$(nm -D --defined-only "$so" | awk '{print $3}' | tr '\n' ' ')
        [ "$exported" = "wsel_plugin_entry " ] ||
            fail "$so exports '$exported', expected exactly wsel_plugin_entry"
        step "wsel validate $so"
        out=$("$wsel" validate "$so" 2>&1) || {
            printf '%s\n' "$out" >&2
            fail "wsel validate $so"
        }
        printf '%s\n' "$out" | grep -q '^PASS score_finite_one_per_row' ||
            fail "wsel validate did not check $so's score function"
    done
done

step "the installed wsel finds both by name and simulates them"
"$wsel" info least_prefill >/dev/null || fail "wsel info least_prefill"
"$wsel" info slow_avoid >/dev/null || fail "wsel info slow_avoid"
out=$("$wsel" sim --plugin least_prefill --plugin slow_avoid --config '{"slow_factor": 1.2}' \
    --plugin softmax --workload chat --requests 200 2>&1) || {
    printf '%s\n' "$out" >&2
    fail "wsel sim with the examples"
}
printf '%s\n' "$out"
for name in least_prefill slow_avoid softmax; do
    printf '%s\n' "$out" | grep -q "^$name " || fail "wsel sim printed no row for $name"
done

step "slow_avoid learns from outcomes in wsel sim"
# Its own reason code (WSEL_REASON_PLUGIN) is given only once some rank has
# a TTFT average, that is, once outcomes have reached it.
out=$("$wsel" sim --plugin slow_avoid --config '{"slow_factor": 1.2}' --workload chat \
    --requests 200 --json 2>&1) || fail "wsel sim --plugin slow_avoid --json"
printf '%s\n' "$out" | grep -q '"answers_by_reason":{[^}]*"plugin":[1-9]' ||
    fail "slow_avoid never skipped a slow rank: no outcome reached it? $out"

if [ -f "$plugindir/pipeline.so" ]; then
    step "the installed pipeline takes the third-party scorer as a child"
    "$wsel" validate pipeline --config \
        '{"scorers": [{"path": "least_prefill", "weight": 2}, {"path": "slow_avoid"}]}' ||
        fail "wsel validate pipeline with least_prefill and slow_avoid as scorers"
else
    echo "NOTE: no bundled pipeline installed; composition step skipped"
fi
echo "install examples test: all steps passed"
