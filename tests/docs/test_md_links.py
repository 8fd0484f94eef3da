#!/usr/bin/env python3
"""Every relative link in the tracked Markdown files points at a file or directory that exists.

Run: python3 tests/docs/test_md_links.py [FILE.md...]

The files are `git ls-files '*.md'` (every *.md outside build/ and dot
directories when this is not a git checkout). A link is an inline link or
image, [text](target) or ![alt](target), with an optional title and an
optional <...> around the target, or a reference definition "[label]: target".
Links inside fenced code blocks and code spans are not links. Targets with a
scheme (http:, https:, mailto:, ...) and pure #anchors are skipped; any other
target, without its #anchor or ?query and %-decoded, is resolved against the
directory of the file that holds it (a leading / against the repository's
root) and must exist. Exits 1 naming the file, the line and the target.
"""
# SPDX-License-Identifier: MIT

import os
import re
import subprocess
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

INLINE_RE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]"        # [text], one nesting
                       r"\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"  # (target
                       r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")   # "title")
REFDEF_RE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def markdown_files():
    try:
        out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split("\n")
        return [p for p in out if p]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for d, dirs, files in os.walk(ROOT):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "build")
            found += [os.path.relpath(os.path.join(d, f), ROOT)
                      for f in sorted(files) if f.endswith(".md")]
        return found


def strip_code_spans(line):
    """The line with each `code span` blanked (same length, so columns hold)."""
    return re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def links(path):
    """[(line number, target)] of the links in path, code excluded. Link text may
    run over lines, so the file is searched whole, fenced blocks blanked."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    kept, fence = [], None
    for line in lines:
        m = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if fence is None and m:
            fence = m.group(1)
            kept.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
                fence = None
            kept.append("")
        else:
            kept.append(strip_code_spans(line))
    text = "\n".join(kept)
    out = [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in INLINE_RE.finditer(text)]
    for i, line in enumerate(kept):
        m = REFDEF_RE.match(line)
        if m:
            out.append((i + 1, m.group(1)))
    return sorted(out)


def main(argv):
    files = argv[1:] or markdown_files()
    failures, checked = [], 0
    for path in files:
        for lineno, target in links(path):
            target = target[1:-1] if target.startswith("<") and target.endswith(">") else target
            if not target or target.startswith("#") or SCHEME_RE.match(target):
                continue
            rel = urllib.parse.unquote(re.split(r"[#?]", target, maxsplit=1)[0])
            if not rel:
                continue
            base = ROOT if rel.startswith("/") else os.path.join(ROOT, os.path.dirname(path))
            resolved = os.path.normpath(os.path.join(base, rel.lstrip("/")))
            checked += 1
            if not os.path.exists(resolved):
                msg = "%s:%d: the link (%s) points at %s, which does not exist" % (
                    path, lineno, target, os.path.relpath(resolved, ROOT))
                failures.append(msg)
                print("test_md_links: FAIL: %s" % msg, file=sys.stderr)
    if failures:
        return 1
    print("test_md_links: ok, %d relative links in %d Markdown files" % (checked, len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
