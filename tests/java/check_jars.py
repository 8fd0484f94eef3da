#!/usr/bin/env python3
"""Checks what went into the Java client's jars (clients/java/pom.xml).

Run: python3 tests/java/check_jars.py DIR BASE
(DIR holds BASE.jar, BASE-sources.jar, BASE-javadoc.jar and BASE-tests.jar,
e.g. build/java/test-target dlock-0.1.0, or a local repository's
io/github/dlockd/dlock/0.1.0.)

The library jar has the client's classes only (no conformance adapter, no
benchmark, no tests) and names its module in Automatic-Module-Name; the
sources and javadoc jars are there and cover the client; the test jar has
the conformance adapter and the benchmark. Prints one line per check and
'check_jars: N passed, N failed'; exits 1 if any failed.
"""
# SPDX-License-Identifier: MIT

import os
import sys
import zipfile

PACKAGE = "io/github/dlockd/dlock/"
MODULE = "io.github.dlockd.dlock"
ADAPTER = PACKAGE + "conformance/Adapter.class"
BENCH = PACKAGE + "bench/Bench.class"


def entries(path):
    with zipfile.ZipFile(path) as z:
        return z.namelist()


def manifest(path):
    with zipfile.ZipFile(path) as z:
        text = z.read("META-INF/MANIFEST.MF").decode("utf-8")
    # continuation lines start with a space
    fields = {}
    for line in text.replace("\r\n", "\n").replace("\n ", "").split("\n"):
        if ": " in line:
            k, v = line.split(": ", 1)
            fields[k] = v
    return fields


def checks(d, base):
    lib = os.path.join(d, base + ".jar")
    names = entries(lib)
    classes = [n for n in names if n.endswith(".class")]
    yield ("the library jar has the client (DlockClient)",
           PACKAGE + "DlockClient.class" in classes, lib)
    stray = [n for n in classes if not n.startswith(PACKAGE) or "/" in n[len(PACKAGE):]
             or "Test" in n or "Daemons" in n]
    yield ("the library jar has no conformance adapter, benchmark or tests", not stray,
           ", ".join(stray[:5]))
    got = manifest(lib).get("Automatic-Module-Name")
    yield ("Automatic-Module-Name: " + MODULE, got == MODULE, "found %r" % got)
    src = os.path.join(d, base + "-sources.jar")
    src_names = entries(src) if os.path.exists(src) else []
    yield ("the sources jar has the client's sources and nothing else",
           PACKAGE + "DlockClient.java" in src_names
           and not [n for n in src_names if "/conformance/" in n or "/bench/" in n],
           src if src_names else src + " missing")
    doc = os.path.join(d, base + "-javadoc.jar")
    doc_names = entries(doc) if os.path.exists(doc) else []
    yield ("the javadoc jar documents the client",
           "index.html" in doc_names and any(n.endswith(PACKAGE + "DlockClient.html") for n in doc_names),
           doc if doc_names else doc + " missing")
    tests = os.path.join(d, base + "-tests.jar")
    test_names = entries(tests) if os.path.exists(tests) else []
    yield ("the test jar has the conformance adapter and the benchmark",
           ADAPTER in test_names and BENCH in test_names,
           tests if test_names else tests + " missing")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_jars.py DIR BASE")
    passed = failed = 0
    for what, ok, detail in checks(sys.argv[1], sys.argv[2]):
        print("%s: %s%s" % ("ok" if ok else "FAIL", what, "" if ok else " (%s)" % detail))
        passed, failed = passed + ok, failed + (not ok)
    print("check_jars: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
