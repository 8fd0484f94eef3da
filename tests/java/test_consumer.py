#!/usr/bin/env python3
"""A Java project outside the repository uses the client as its README says.

Run: DLOCKD_BIN=$PWD/build/dlockd python3 tests/java/test_consumer.py

In a temporary directory: a copy of clients/java (a checkout, as a user has
it) where the first ```sh block of clients/java/README.md's "## Install"
section runs (mvn -o install into ~/.m2/repository: Maven's user.home is
the temporary directory's home/, through MAVEN_OPTS), then what it
installed is checked (tests/java/check_jars.py: no conformance adapter in
the library jar, Automatic-Module-Name, sources and javadoc jars). Then a
consumer project: a pom.xml with the README's ```xml dependency block and
clients/java/pom.xml's plugin versions, a module-info.java that requires
the client's module by its Automatic-Module-Name, and a main class that
locks and unlocks; the section's second ```sh block builds it (with
/path/to/dlockd standing for the copy). The consumer then runs, on the
module path, against a private dlockd and redis-server, and must print the
lock's fence, MINE while held and FREE after. Everything is offline.
Prints 'consumer-java: N passed, N failed'; exits 1 if a step failed.
"""
# SPDX-License-Identifier: MIT

import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "docs"))
from test_tour import Servers, TourError  # noqa: E402  (a private redis-server and dlockd)

JAVA = os.path.join(ROOT, "clients", "java")
README = os.path.join(JAVA, "README.md")
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
CHECKOUT_PLACEHOLDER = "/path/to/dlockd"
STEP_TIMEOUT = 300       # seconds for one Maven run (a cold, busy 2-core machine)
RUN_TIMEOUT = 60         # seconds for the consumer's run
MODULE = "io.github.dlockd.dlock"
LOCK_NAME = "consumer-java"

MAIN = """package consumer;

import io.github.dlockd.dlock.DlockClient;
import io.github.dlockd.dlock.DlockLock;
import java.time.Duration;

public final class Main {
    public static void main(String[] args) throws Exception {
        try (DlockClient c = DlockClient.connect()) {              // $DLOCK_SOCKET
            try (DlockLock l = c.lock("%(name)s", Duration.ofSeconds(30))) {
                System.out.println("fence " + l.fence());
                System.out.println("held " + c.status("%(name)s"));
            }
            System.out.println("released " + c.status("%(name)s"));
        }
    }
}
""" % {"name": LOCK_NAME}

MODULE_INFO = "module consumer {\n    requires %s;\n}\n" % MODULE


class Failed(Exception):
    pass


def install_section():
    """The README's "## Install" section: its ```sh blocks and its ```xml block."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## Install\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        raise Failed("%s has no '## Install' section" % README)
    blocks = re.findall(r"^```(\w+)\n(.*?)^```", m.group(1), re.S | re.M)
    sh = [body for lang, body in blocks if lang == "sh"]
    xml = [body for lang, body in blocks if lang == "xml"]
    if len(sh) != 2 or len(xml) != 1:
        raise Failed("the Install section should have two ```sh blocks (install, build a "
                     "project) and one ```xml block (the dependency); it has %d and %d"
                     % (len(sh), len(xml)))
    return sh[0], sh[1], xml[0]


def run_sh(script, cwd, env, what):
    """Each line of a README block, as sh runs it (set -e), in cwd."""
    print("-- %s, in %s:\n%s" % (what, cwd, script.rstrip()), flush=True)
    p = subprocess.run(["sh", "-ec", script], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=STEP_TIMEOUT)
    if p.returncode != 0:
        raise Failed("%s failed (exit %d):\n%s" % (what, p.returncode, p.stdout))


def coordinates(dependency_xml):
    d = ET.fromstring(dependency_xml)
    return tuple(d.findtext(k).strip() for k in ("groupId", "artifactId", "version"))


def plugins_of(pom):
    """clients/java/pom.xml's plugins, as groupId:artifactId:version, without their setup."""
    root = ET.parse(pom).getroot()
    out = []
    for p in root.findall("m:build/m:plugins/m:plugin", POM_NS):
        out.append(tuple(p.findtext("m:" + k, namespaces=POM_NS) for k in
                         ("groupId", "artifactId", "version")))
    return out


def consumer_pom(dependency_xml, plugins):
    ps = "".join("      <plugin><groupId>%s</groupId><artifactId>%s</artifactId>"
                 "<version>%s</version></plugin>\n" % p for p in plugins)
    return """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>consumer</artifactId>
  <version>1</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <maven.compiler.release>17</maven.compiler.release>
  </properties>
  <dependencies>
%s
  </dependencies>
  <build>
    <plugins>
%s    </plugins>
  </build>
</project>
""" % (dependency_xml.rstrip(), ps)


def main():
    dlockd = os.environ.get("DLOCKD_BIN") or os.path.join(ROOT, "build", "dlockd")
    for tool in ("mvn", "java", "redis-server"):
        if shutil.which(tool) is None:
            print("consumer-java: %s not found (make deps)" % tool, file=sys.stderr)
            return 1
    tmp = tempfile.mkdtemp(prefix="dlock-consumer-java-")
    passed, failed = 0, 0
    servers = None
    try:
        install, build, dependency = install_section()
        group, artifact, version = coordinates(dependency)
        checkout = os.path.join(tmp, "dlockd")
        shutil.copytree(JAVA, os.path.join(checkout, "clients", "java"),
                        ignore=shutil.ignore_patterns("target"))
        home = os.path.join(tmp, "home")
        os.mkdir(home)
        env = dict(os.environ, MAVEN_OPTS=(os.environ.get("MAVEN_OPTS", "") +
                                           " -Duser.home=" + home).strip())
        env.pop("DLOCKD_BIN", None)
        run_sh(install, checkout, env, "the README's install")
        installed = os.path.join(home, ".m2", "repository", *group.split("."), artifact, version)
        print("-- tests/java/check_jars.py %s %s-%s" % (installed, artifact, version), flush=True)
        if subprocess.run([sys.executable, os.path.join(HERE, "check_jars.py"), installed,
                           "%s-%s" % (artifact, version)]).returncode != 0:
            raise Failed("the installed jars are not as they should be")
        passed += 1

        proj = os.path.join(tmp, "consumer")
        os.makedirs(os.path.join(proj, "src", "main", "java", "consumer"))
        with open(os.path.join(proj, "pom.xml"), "w") as f:
            f.write(consumer_pom(dependency, plugins_of(os.path.join(JAVA, "pom.xml"))))
        with open(os.path.join(proj, "src", "main", "java", "module-info.java"), "w") as f:
            f.write(MODULE_INFO)
        with open(os.path.join(proj, "src", "main", "java", "consumer", "Main.java"), "w") as f:
            f.write(MAIN)
        run_sh(build.replace(CHECKOUT_PLACEHOLDER, checkout), proj, env,
               "the README's build of a project")
        passed += 1

        servers = Servers(dlockd)
        servers.wait_ready()
        jar = os.path.join(installed, "%s-%s.jar" % (artifact, version))
        argv = ["java", "-p", os.path.join(proj, "target", "classes") + ":" + jar,
                "-m", "consumer/consumer.Main"]
        print("-- DLOCK_SOCKET=%s %s" % (servers.sock, " ".join(argv)), flush=True)
        p = subprocess.run(argv, env=dict(os.environ, DLOCK_SOCKET=servers.sock),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=RUN_TIMEOUT)
        print(p.stdout, end="")
        want = [r"fence [1-9][0-9]*", r"held MINE 1 [0-9]+ [1-9][0-9]*", r"released FREE"]
        lines = p.stdout.splitlines()
        if p.returncode != 0 or len(lines) != len(want) or \
                not all(re.fullmatch(w, l) for w, l in zip(want, lines)):
            raise Failed("the consumer's run (exit %d) printed %r; expected lines matching %r"
                         % (p.returncode, p.stdout, want))
        passed += 1
    except (Failed, TourError, subprocess.TimeoutExpired, OSError) as e:
        print("FAIL: %s" % e, flush=True)
        if servers is not None:
            print(servers.logs())
        failed += 1
    finally:
        if servers is not None:
            servers.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("consumer-java: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
