#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_spdx.py -- every source, build and script file of the repository
carries an SPDX-License-Identifier line (the project is Apache-2.0; see
LICENSE). Data (traces, fuzz corpora, JSON), prose (Markdown), images and
lock files (Cargo.lock, go.sum) are not sources and are skipped, as are
build folders.

Usage: check_spdx.py [ROOT]   (default: the repository holding this file)
Prints each file without the line and exits 1 if there is any.
"""
import os
import subprocess
import sys

TAG = "SPDX-License-Identifier:"
SKIP_EXT = (".md", ".png", ".jsonl", ".json", ".lock", ".sum", ".tmp")
# py.typed: the empty marker of a typed Python package (PEP 561).
SKIP_NAMES = ("LICENSE", ".clang-format", ".gitignore", "py.typed")
# Debian's formats without comments; debian/copyright gives their licence.
SKIP_PATHS = ("debian/changelog", "debian/source/format")


def is_source(rel):
    name = os.path.basename(rel)
    parts = rel.split(os.sep)
    return not (name.endswith(SKIP_EXT) or name in SKIP_NAMES or "corpus" in parts
                or rel.replace(os.sep, "/") in SKIP_PATHS)


def sources(root):
    """The project's files: the files git tracks in a checkout (what a
    clone, and so CI, holds), else a walk that skips build trees (any folder
    holding a CMakeCache.txt) and tool folders."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"],
                             capture_output=True, text=True, check=True).stdout
        for rel in out.splitlines():
            if is_source(rel) and os.path.isfile(os.path.join(root, rel)):
                yield os.path.join(root, rel)
        return
    except (OSError, subprocess.CalledProcessError):
        pass
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames
                       if not d.startswith(".git") and d not in ("target", "__pycache__")
                       and not os.path.exists(os.path.join(dirpath, d, "CMakeCache.txt"))]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if is_source(os.path.relpath(path, root)):
                yield path


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1
                           else os.path.join(here, "..", ".."))
    missing = []
    count = 0
    for path in sorted(sources(root)):
        try:
            with open(path, encoding="utf-8") as f:
                head = f.read(4096)
        except (UnicodeDecodeError, OSError):
            continue  # binary: not a source
        count += 1
        if TAG not in head:
            missing.append(os.path.relpath(path, root))
    for m in missing:
        print("spdx: no SPDX-License-Identifier line: " + m)
    if missing:
        print("spdx: %d of %d files lack the line" % (len(missing), count))
        return 1
    print("spdx: all %d source files carry an SPDX-License-Identifier line" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
