#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_includes.py -- fail on any #include that points up or sideways.

The layers (ARCHITECTURE.md), bottom up:

    abi       abi/wsel.h                  depends on nothing
    cli       cli/ (the option parser)    depends on nothing; tools/ and
                                          engine/ include it
    tokenizer tokenizer/ (libwsel-tokenizer, a Rust shim behind a C
              header)                     depends on nothing; router/,
                                          nginx/, engine/ and tools/ may
                                          include its public header
    host      host/ (host/isolated/ too)  abi
    plugins   plugins/NAME/               abi, its own folder, plugins/common/
                                          (source compiled into each plugin
                                          that uses it; it includes abi only)
    sim       sim/                        abi, host's public header
    tools     tools/ (all subfolders)     abi, host's public header, sim
    engine    engine/ (wsel-engine)       abi, host's public header, sim;
                                          at the tools level: nobody includes it
    router    router/ (libwsel-router)    abi, host's public header, router
    nginx     nginx/ (the nginx module)   abi, host's public header, router,
                                          nginx; nobody includes router/ or
                                          nginx/ from below, except that
                                          tools/ may include router's public
                                          header (wsel replay --plugin routes)

Only host/ may include host's private headers (everything in host/ but
host/include/). The plugin template in examples/ is held to the plugin
rule. tests/ and other examples are not checked: they may reach anywhere.

Usage: check_includes.py [ROOT]   (default: the repository holding this file)
Prints one line per bad edge and exits 1 if there is any, else prints a
summary and exits 0.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
SOURCE_EXT = (".c", ".h")


def layer_of(rel):
    """(layer, unit) of a repository-relative path, or None if unchecked."""
    parts = rel.split("/")
    top = parts[0]
    if top == "abi":
        return ("abi", "abi")
    if top == "cli":
        return ("cli", "cli")
    if top == "tokenizer":
        public = len(parts) > 1 and parts[1] == "include"
        return ("tokenizer", "tokenizer-public" if public else "tokenizer")
    if top == "host":
        private = not (len(parts) > 1 and parts[1] == "include")
        return ("host", "host-private" if private else "host-public")
    if top == "plugins" and len(parts) > 2:
        return ("plugins", "plugins/" + parts[1])
    if rel.startswith("examples/plugin-template/"):
        return ("plugins", "examples/plugin-template")
    if top == "sim":
        return ("sim", "sim")
    if top == "tools":
        return ("tools", "tools")
    if top == "engine":
        return ("engine", "engine")
    if top == "router":
        public = len(parts) > 1 and parts[1] == "include"
        return ("router", "router-public" if public else "router")
    if top == "nginx":
        return ("nginx", "nginx")
    return None


def allowed(src, dst):
    """May a file of (layer, unit) src include one of dst?"""
    s_layer, s_unit = src
    d_layer, d_unit = dst
    if d_layer == "abi":
        return True
    if d_layer == "cli":
        return s_layer in ("cli", "tools", "engine")
    if d_layer == "tokenizer":
        return s_layer == "tokenizer" or (
            d_unit == "tokenizer-public" and
            s_layer in ("router", "nginx", "engine", "tools"))
    if s_layer in ("abi", "cli", "tokenizer"):
        return False
    if s_layer == "plugins":
        return d_unit == s_unit or (d_unit == "plugins/common" and
                                    s_unit.startswith("plugins/"))
    if d_unit == "host-private":
        return s_layer == "host"
    if d_unit == "host-public":
        return s_layer in ("host", "sim", "tools", "engine", "router", "nginx")
    if d_layer == "router":
        return s_layer in ("router", "nginx") or (
            s_layer == "tools" and d_unit == "router-public")
    if d_layer == "nginx":
        return s_layer == "nginx"
    if d_layer == "sim":
        return s_layer in ("sim", "tools", "engine")
    if d_layer == "engine":
        return s_layer == "engine"
    if d_layer == "tools":
        return s_layer == "tools"
    if d_layer == "plugins":
        return d_unit == s_unit
    return False


def project_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames
                       if not d.startswith((".", "build")) and d != "target"]
        for name in filenames:
            if name.endswith(SOURCE_EXT):
                rel = os.path.normpath(os.path.join(rel_dir, name))
                yield rel.replace(os.sep, "/")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1
                           else os.path.join(here, "..", ".."))
    files = sorted(project_files(root))
    headers = {}
    for rel in files:
        if rel.endswith(".h") and layer_of(rel) is not None:
            headers.setdefault(os.path.basename(rel), []).append(rel)

    bad = []
    edges = 0
    for rel in files:
        src = layer_of(rel)
        if src is None:
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            quote, name = m.group(1), m.group(2)
            base = os.path.basename(name)
            if quote == "<" and base not in ("wsel.h", "wsel_host.h", "wsel_router.h",
                                             "wsel_tokenizer.h"):
                continue  # a system header
            same_dir = os.path.normpath(os.path.join(os.path.dirname(rel), name))
            if same_dir in files:
                target = same_dir
            elif base in headers:
                # Several headers of one name: the one in the includer's
                # layer if there is one, else the first (a bad edge shows).
                cands = headers[base]
                mine = [c for c in cands if layer_of(c)[0] == src[0]]
                target = (mine or cands)[0]
            else:
                continue  # not a project header
            edges += 1
            dst = layer_of(target)
            if not allowed(src, dst):
                line = text.count("\n", 0, m.start()) + 1
                bad.append("%s:%d: %s (%s) includes %s (%s)"
                           % (rel, line, src[1], src[0], target, dst[1]))
    for b in bad:
        print("layering: " + b)
    if bad:
        print("layering: %d include(s) against the layers (see %s)"
              % (len(bad), os.path.basename(__file__)))
        return 1
    print("layering: %d project includes checked, all point down" % edges)
    return 0


if __name__ == "__main__":
    sys.exit(main())
