#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_man.py -- the built man pages hold the --help texts they come from.

Usage: check_man.py MANDIR WSEL_H WSEL [WSEL_ENGINE]

Renders each page with groff (no hyphenation, no justification that
matters: whitespace is compared collapsed) and fails unless
  - wsel.1 holds every line of `wsel --help` and of each `wsel COMMAND
    --help` that `wsel --help` lists;
  - wsel-engine.1 holds every line of `wsel-engine --help`;
  - every C name (wsel_*, WSEL_*) wsel-plugin.7 cites is declared in wsel.h.
"""
import os
import re
import subprocess
import sys


def collapse(text):
    return " ".join(text.split())


def render(page):
    out = subprocess.run(["groff", "-man", "-Tascii", "-rHY=0", "-rLL=200n", "-P-cbou",
                          page], check=True, capture_output=True, text=True).stdout
    return collapse(out)


def help_text(*argv):
    return subprocess.run(list(argv) + ["--help"], check=True, capture_output=True,
                          text=True).stdout


def missing_lines(page_text, help_out):
    return [line for line in help_out.splitlines()
            if line.strip() and collapse(line) not in page_text]


def check_program(page, program, subcommands):
    text = render(page)
    top = help_text(program)
    texts = {os.path.basename(program): top}
    if subcommands:
        listing = re.search(r"\ncommands:\n((?:  [^\n]+\n)+)", top)
        if not listing:
            return ["%s --help lists no commands" % program]
        for name in re.findall(r"^  ([a-z]+) ", listing.group(1), re.M):
            texts["%s %s" % (os.path.basename(program), name)] = help_text(program, name)
    bad = []
    for what, out in texts.items():
        for line in missing_lines(text, out):
            bad.append("%s: '%s --help' line not in the page: %s" % (page, what, line))
    print("%s: %d --help texts, every line present" % (os.path.basename(page), len(texts)))
    return bad


def check_plugin_page(page, header):
    with open(header, encoding="utf-8") as f:
        declared = f.read()
    text = render(page)
    bad = []
    # C names only: wsel_add_plugin() is CMake's
    names = set(re.findall(r"\b(?:wsel|WSEL)_[A-Za-z0-9_]*[A-Za-z0-9]\b(?!\()", text))
    for name in sorted(names):
        if not re.search(r"\b%s" % re.escape(name), declared):
            bad.append("%s names %s, which wsel.h does not declare" % (page, name))
    print("wsel-plugin.7: %d wsel.h names cited, all declared" % len(names))
    return bad


def main():
    mandir, header, wsel = sys.argv[1:4]
    engine = sys.argv[4] if len(sys.argv) > 4 else None
    bad = check_program(os.path.join(mandir, "wsel.1"), wsel, True)
    if engine:
        bad += check_program(os.path.join(mandir, "wsel-engine.1"), engine, False)
    bad += check_plugin_page(os.path.join(mandir, "wsel-plugin.7"), header)
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
