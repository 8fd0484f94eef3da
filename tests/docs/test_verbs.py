#!/usr/bin/env python3
"""Every protocol verb is in PROTOCOL.md's request table, and in dlock(1) where the CLI offers it.

Run: python3 tests/docs/test_verbs.py

The verbs are the words of proto/proto.h's PROTO_CMD_MAP. PROTOCOL.md's
request table is the one whose header row is "| request | reply |"; a verb
is in it when a row's first cell has a code span (in backticks) whose first
word is the verb (one row may carry two: "`RUNLOCK <name>`, `WUNLOCK <name>`").
Each verb needs a row, and each row's verbs must be verbs.

dlock has no table of its options' verbs, so CLI_VERBS below lists them; the
test keeps the list honest against clients/cli/dlock.c: every long option of
its longopts[] must be listed (with its verbs, or in NO_VERB), every listed
option must be there, and dlock.c must send each listed verb (the word in
quotes, or libdlock's dlock_<verb>() called). In clients/cli/dlock.1, the
option's entry (its .TP, to the next .TP or .SH) must name each of its verbs.

Exits 1 naming the file and the verb or option.
"""
# SPDX-License-Identifier: MIT

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PROTO_H = "proto/proto.h"
PROTOCOL_MD = "proto/PROTOCOL.md"
CLI_C = "clients/cli/dlock.c"
CLI_MAN = "clients/cli/dlock.1"

# The verbs each long option of dlock makes it send. A plain lock (no kind
# option: LOCK, or TRYLOCK with -n or -w) and the release when COMMAND ends
# (UNLOCK, RUNLOCK, WUNLOCK, RELEASE) are not options: dlock(1) describes
# them in words, so they are not checked there.
CLI_VERBS = {
    "shared": ["RLOCK", "TRYRLOCK"],
    "exclusive": ["WLOCK", "TRYWLOCK"],
    "fair": ["FAIRLOCK", "TRYFAIRLOCK"],
    "permits": ["ACQUIRE", "TRYACQUIRE"],
    "seminit": ["SEMINIT"],
    "status": ["STATUS"],
    "force-unlock": ["FORCEUNLOCK"],
    "info": ["INFO"],
    "ping": ["PING"],
    "who": ["WHO"],
    "elect": ["ELECT", "RESIGN"],
    "observe": ["OBSERVE"],
    "leader": ["LEADER"],
    "multi": ["MLOCK", "TRYMLOCK"],
    "list": ["LIST"],
    "latch-set": ["LATCHSET"],
    "countdown": ["COUNTDOWN"],
    "await": ["AWAIT", "TRYAWAIT"],
}
# Long options that send no verb of their own (--metrics speaks HTTP to the
# metrics endpoint; it reads INFO only to find it).
NO_VERB = {"socket", "verbose", "help", "version", "metrics", "value", "lease", "json",
           "limit"}


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def proto_verbs():
    """The words of PROTO_CMD_MAP: the macro runs while its lines end in a backslash."""
    lines = read(PROTO_H).split("\n")
    start = next((i for i, line in enumerate(lines)
                  if re.match(r"#define\s+PROTO_CMD_MAP\(", line)), None)
    if start is None:
        return []
    block = []
    for line in lines[start:]:
        block.append(line)
        if not line.rstrip().endswith("\\"):
            break
    return re.findall(r"XX\(\s*\w+\s*,\s*\"([A-Z]+)\"", "\n".join(block))


def request_table(path):
    """{verb: line number} of the request table's rows."""
    lines = read(path).split("\n")
    rows, inside = {}, False
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not inside:
            if line.lstrip().startswith("|") and [c.lower() for c in cells] == ["request", "reply"]:
                inside = True
            continue
        if not line.lstrip().startswith("|"):
            break
        if re.fullmatch(r"[-:| ]+", line.strip()):
            continue                  # the delimiter row
        for span in re.findall(r"`([^`]+)`", cells[0]):
            word = span.split()[0] if span.split() else ""
            rows.setdefault(word, i + 1)
    return rows


def cli_longopts(text):
    m = re.search(r"struct option longopts\[\]\s*=\s*\{(.*?)\};", text, re.S)
    return re.findall(r"\{\s*\"([a-z][a-z-]*)\"", m.group(1)) if m else []


def man_option_entry(text, option):
    """The lines of dlock(1)'s entry for --option, or None."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.startswith(".TP") or i + 1 >= len(lines):
            continue
        tag = lines[i + 1].replace("\\-", "-")
        if re.search(r"(^|[\s\"])--" + re.escape(option) + r"($|[\s\"])", tag):
            j = i + 1
            while j < len(lines) and not re.match(r"^\.(TP|SH|SS)\b", lines[j]):
                j += 1
            return i + 1, "\n".join(lines[i + 1:j])
    return None


def main():
    failures = []

    def fail(msg):
        failures.append(msg)
        print("test_verbs: FAIL: %s" % msg, file=sys.stderr)

    verbs = proto_verbs()
    if not verbs:
        fail("%s: found no PROTO_CMD_MAP verbs" % PROTO_H)

    rows = request_table(PROTOCOL_MD)
    if not rows:
        fail("%s: no '| request | reply |' table" % PROTOCOL_MD)
    for verb in verbs:
        if verb not in rows:
            fail("%s: %s has no row in the '| request | reply |' table (a first cell "
                 "starting `%s ...`)" % (PROTOCOL_MD, verb, verb))
    for word, lineno in rows.items():
        if word not in verbs:
            fail("%s:%d: the request table has a row for %s, which is not in %s's "
                 "PROTO_CMD_MAP" % (PROTOCOL_MD, lineno, word, PROTO_H))

    cli = read(CLI_C)
    man = read(CLI_MAN)
    opts = cli_longopts(cli)
    if not opts:
        fail("%s: found no longopts[] table" % CLI_C)
    for opt in opts:
        if opt not in CLI_VERBS and opt not in NO_VERB:
            fail("%s: the option --%s is in neither CLI_VERBS nor NO_VERB of %s: add it"
                 % (CLI_C, opt, os.path.relpath(__file__, ROOT)))
    checked = 0
    for opt, opt_verbs in CLI_VERBS.items():
        if opt not in opts:
            fail("%s: CLI_VERBS lists --%s, which dlock's longopts[] does not have"
                 % (CLI_C, opt))
            continue
        entry = man_option_entry(man, opt)
        if entry is None:
            fail("%s: no entry (.TP) for --%s" % (CLI_MAN, opt))
        for verb in opt_verbs:
            if verb not in verbs:
                fail("CLI_VERBS: --%s sends %s, which is not in %s's PROTO_CMD_MAP"
                     % (opt, verb, PROTO_H))
            if ('"%s' % verb) not in cli and ("dlock_%s(" % verb.lower()) not in cli:
                fail("%s: --%s should send %s, but neither \"%s\" nor dlock_%s() is there"
                     % (CLI_C, opt, verb, verb, verb.lower()))
            if entry is not None and not re.search(r"\b%s\b" % verb, entry[1]):
                fail("%s:%d: the entry for --%s does not name %s" % (CLI_MAN, entry[0], opt,
                                                                     verb))
            checked += 1
    if failures:
        return 1
    print("test_verbs: ok, %d verbs in %s's request table; %d verbs of %d dlock options in %s"
          % (len(verbs), PROTOCOL_MD, checked, len(CLI_VERBS), CLI_MAN))
    return 0


if __name__ == "__main__":
    sys.exit(main())
