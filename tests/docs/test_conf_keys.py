#!/usr/bin/env python3
"""Every configuration key of the daemon is in dlockd.conf(5) and the shipped file, at its default.

Run: CONF_KEYS_BIN=$PWD/build/docs/conf_keys python3 tests/docs/test_conf_keys.py

The keys are the rows of conf/conf.c's table, printed by tests/docs/conf_keys
("section TAB name [TAB default]"; no third field: unset, derived at start).

conf/dlockd.conf.5: a key entry is a .TP whose tag line (the next line) is a
.B or .BR request, inside the section .SH [server], .SH [redis] or .SH [lock]
and outside .RS/.RE (the url's forms are a nested list). The tag names the
key(s): its first word, and each bold word after a roman ", " (as in
".BR password ", " username " (default: none)"). Each key of the table must
have exactly one entry, in its section, and no other key may have one. The
entry's tag must state the default: "default <value>" when the table has one,
"default:" and a description (none, empty, the url's host, ...) when the
table's default is empty; an unset default is derived, so any wording will do.

conf/dlockd.conf: a key line is "key = value" (active) or "; key = value" /
"# key = value" (commented out), key being lower case letters, digits and
'_'; the section is the last "[section]" line. Each key of the table must have
exactly one line, in its section, and no other key may have one. An active line
must show the default (for an unset default, any value); a commented-out line
may show an example only when the default is empty or unset.

Exits 1 naming the file, the key and what is wrong.
"""
# SPDX-License-Identifier: MIT

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

MAN = "conf/dlockd.conf.5"
SHIPPED = "conf/dlockd.conf"
SECTIONS = ("server", "redis", "lock")
KEY_RE = r"[a-z][a-z0-9_]*"


def table_keys(binary):
    """{(section, name): default or None}, in table order."""
    out = subprocess.run([binary], check=True, capture_output=True, text=True).stdout
    keys = {}
    for line in out.split("\n"):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) not in (2, 3):
            raise SystemExit("test_conf_keys: %s printed %r" % (binary, line))
        keys[(fields[0], fields[1])] = fields[2] if len(fields) == 3 else None
    return keys


# ---- the man page --------------------------------------------------------------

def roff_args(text):
    """The arguments of a request line, as roff splits them (double quotes group)."""
    args, i = [], 0
    while i < len(text):
        if text[i] == " ":
            i += 1
        elif text[i] == '"':
            j = i + 1
            arg = ""
            while j < len(text):
                if text[j] == '"' and j + 1 < len(text) and text[j + 1] == '"':
                    arg += '"'
                    j += 2
                elif text[j] == '"':
                    j += 1
                    break
                else:
                    arg += text[j]
                    j += 1
            args.append(arg)
            i = j
        else:
            j = text.find(" ", i)
            j = len(text) if j < 0 else j
            args.append(text[i:j])
            i = j
    return args


def roff_plain(text):
    """Text with the escapes the tags use taken out."""
    text = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", text)   # font changes
    text = re.sub(r"\\\((..)", lambda m: {"en": "-", "em": "-"}.get(m.group(1), "?"), text)
    return text.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")


def man_entries(path):
    """[(line number, section, [keys], plain tag text)] for each key entry."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    entries, section, nest = [], None, 0
    for i, line in enumerate(lines):
        m = re.match(r"^\.SH\s+(.*)$", line)
        if m:
            title = m.group(1).strip().strip('"')
            s = re.fullmatch(r"\[(\w+)\]", title)
            section = s.group(1) if s and s.group(1) in SECTIONS else None
            nest = 0
            continue
        if re.match(r"^\.RS\b", line):
            nest += 1
        elif re.match(r"^\.RE\b", line):
            nest = max(0, nest - 1)
        if section is None or nest or not re.match(r"^\.TP\b", line) or i + 1 >= len(lines):
            continue
        tag = re.match(r"^\.(BR?)\s+(.*)$", lines[i + 1])
        if not tag:
            continue
        args = [roff_plain(a) for a in roff_args(tag.group(2))]
        if tag.group(1) == "B":
            args = [" ".join(args)] if args else []
        keys = []
        if args:
            keys.append(args[0])
        k = 1           # .BR: bold at even places; a roman ", " joins the next key
        while k + 1 < len(args) and args[k] == ", ":
            keys.append(args[k + 1])
            k += 2
        entries.append((i + 2, section, keys, "".join(args)))
    return entries


def check_man(path, keys, fail):
    seen = {}
    for lineno, section, names, tag in man_entries(path):
        for name in names:
            where = "%s:%d" % (path, lineno)
            if not re.fullmatch(KEY_RE, name):
                fail("%s: the entry %r in [%s] is not a key name" % (where, name, section))
                continue
            if (section, name) not in keys:
                others = [s for s, n in keys if n == name]
                fail("%s: [%s] %s has an entry, but the daemon has no such key%s"
                     % (where, section, name, " (it is in [%s])" % others[0] if others else ""))
                continue
            if (section, name) in seen:
                fail("%s: [%s] %s has a second entry (the first at line %d)"
                     % (where, section, name, seen[(section, name)]))
                continue
            seen[(section, name)] = lineno
            default = keys[(section, name)]
            if default is None:
                continue
            if default == "":
                if not re.search(r"\bdefault:\s*\S", tag):
                    fail("%s: [%s] %s: the tag %r does not say 'default: ...' (the default is "
                         "empty)" % (where, section, name, tag))
            elif not re.search(r"\bdefault\s+" + re.escape(default) + r"(?=[\s,;)]|$)", tag):
                fail("%s: [%s] %s: the tag %r does not say 'default %s'"
                     % (where, section, name, tag, default))
    for (section, name) in keys:
        if (section, name) not in seen:
            fail("%s: [%s] %s has no entry (.TP then .BR %s \" (...; default ...)\" under "
                 ".SH [%s])" % (path, section, name, name, section))
    return len(seen)


# ---- the shipped file ----------------------------------------------------------

def check_shipped(path, keys, fail):
    seen = {}
    section = None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        where = "%s:%d" % (path, i + 1)
        m = re.match(r"^\s*\[([^]]*)\]\s*$", line)
        if m:
            section = m.group(1).strip()
            continue
        m = re.match(r"^(?:([;#])\s*)?(" + KEY_RE + r")\s*=(.*)$", line)
        if not m:
            continue
        commented, name = m.group(1) is not None, m.group(2)
        value = re.split(r"\s;", m.group(3), maxsplit=1)[0].strip()
        if (section, name) not in keys:
            fail("%s: [%s] %s is set, but the daemon has no such key" % (where, section, name))
            continue
        if (section, name) in seen:
            fail("%s: [%s] %s is there twice (the first at line %d)"
                 % (where, section, name, seen[(section, name)]))
            continue
        seen[(section, name)] = i + 1
        default = keys[(section, name)]
        if commented and default in ("", None):
            continue                  # an example, off by default
        if default is not None and value != default:
            fail("%s: [%s] %s = %s, but its default is %r" % (where, section, name, value,
                                                               default))
    for (section, name) in keys:
        if (section, name) not in seen:
            fail("%s: [%s] %s is missing (as '%s = <default>' or '; %s = <example>')"
                 % (path, section, name, name, name))
    return len(seen)


def main():
    binary = os.environ.get("CONF_KEYS_BIN") or os.path.join(ROOT, "build", "docs", "conf_keys")
    if not os.access(binary, os.X_OK):
        print("test_conf_keys: %s not found; run `make build/docs/conf_keys` or set "
              "CONF_KEYS_BIN" % binary, file=sys.stderr)
        return 1
    keys = table_keys(binary)
    failures = []

    def fail(msg):
        failures.append(msg)
        print("test_conf_keys: FAIL: %s" % msg, file=sys.stderr)

    if not keys:
        fail("%s printed no keys" % binary)
    os.chdir(ROOT)
    n_man = check_man(MAN, keys, fail)
    n_conf = check_shipped(SHIPPED, keys, fail)
    if failures:
        return 1
    print("test_conf_keys: ok, %d keys: %d entries in %s, %d lines in %s"
          % (len(keys), n_man, MAN, n_conf, SHIPPED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
