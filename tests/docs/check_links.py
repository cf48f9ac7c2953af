#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_links.py -- fail on a relative link or cited heading that is gone.

Checks, under ROOT (skipping hidden, build*, obj-*, debian, target and
bad_tree folders):
  - every relative Markdown link [text](path#anchor) in a .md file: the
    path exists and, for a .md target, the anchor is one of its headings
    (GitHub's slugs);
  - every citation `X.md, "Heading"` (or `X.md "Heading"`) in any source
    or doc file: X.md has a heading, or a bold paragraph lead, that starts
    with or contains the quoted text.

Usage: check_links.py ROOT. Prints one line per broken link and a count;
exits 1 if any.
"""
import os
import re
import sys

TEXT = ('.md', '.c', '.h', '.sh', '.py', '.cmake', '.txt', '.rs', '.go', '.in')
CITE = re.compile(r'((?:[\w.-]+/)*[\w.-]+\.md)[,:]?[\s*/#(]{0,12}"([^"\n]{2,80})"')
LINK = re.compile(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)')


def slug(heading):
    h = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading.strip().lower())
    h = re.sub(r'[^\w\- ]', '', h.replace('`', '').replace('*', ''))
    return h.replace(' ', '-')


_cache = {}


def headings(path):
    """(anchor set, heading and bold-lead texts) of a Markdown file."""
    if path not in _cache:
        anchors, texts, seen, fence = set(), [], {}, False
        with open(path, encoding='utf-8', errors='replace') as f:
            for line in f:
                if line.startswith('```'):
                    fence = not fence
                if fence:
                    continue
                bold = re.match(r'\s*(?:- )?\*\*([^*]+)\*\*', line)
                if bold:
                    texts.append(bold.group(1).strip())
                m = re.match(r'#{1,6}\s+(.*)', line)
                if m:
                    texts.append(m.group(1).strip())
                    s = slug(m.group(1))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    anchors.add(s if n == 0 else '%s-%d' % (s, n))
        _cache[path] = (anchors, texts)
    return _cache[path]


def files(root):
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(('.', 'build', 'obj-'))
                   and x not in ('bad_tree', 'debian', 'node_modules', 'target')]
        for n in names:
            if n.endswith(TEXT) or n == 'CMakeLists.txt':
                yield os.path.join(d, n)


def check_links(path, text):
    bad = []
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r'[a-z]+:', target):
            continue
        p, _, anchor = target.partition('#')
        tp = os.path.normpath(os.path.join(os.path.dirname(path), p)) if p else path
        if not os.path.exists(tp):
            bad.append('%s: missing %s' % (path, target))
        elif anchor and tp.endswith('.md') and anchor not in headings(tp)[0]:
            bad.append('%s: no anchor %s' % (path, target))
    return bad


def check_cites(root, path, text):
    bad = []
    for m in CITE.finditer(text):
        name, cited = m.group(1), m.group(2).strip('`').lower()
        cands = [os.path.join(root, name), os.path.join(root, 'docs', name),
                 os.path.join(os.path.dirname(path), name)]
        tp = next((c for c in cands if os.path.isfile(c)), None)
        if tp is None:
            continue
        texts = [t.strip('`').lower() for t in headings(tp)[1]]
        if not any(t.startswith(cited) or cited in t for t in texts):
            bad.append('%s: "%s" is no heading of %s'
                       % (path, m.group(2), os.path.relpath(tp, root)))
    return bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    bad = []
    for path in files(root):
        try:
            with open(path, encoding='utf-8') as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        if path.endswith('.md'):
            bad += check_links(path, text)
        bad += check_cites(root, path, text)
    for line in sorted(bad):
        print(os.path.relpath(line.split(':')[0], root) + ':' + line.split(':', 1)[1])
    print('%d broken link(s)' % len(bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
