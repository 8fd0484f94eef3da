#!/usr/bin/env python3
"""The Go client used as its README says, from modules outside the repository, offline.

Run: DLOCKD_BIN=$PWD/build/dlockd python3 tests/consumer/go.py      (make consumer-go)

In a temporary directory (HOME, so ~/myapp is there), with a GOPATH and a
build cache of its own (so no module or build of the repository's is at
hand) and GOPROXY=off (nothing may be downloaded):
  myapp     a module made with `go mod init`, holding consumer.go, then
            the sh block of clients/go/README.md's "Install" section run
            as written (GOFLAGS=-mod=mod) but for /path/to/dlockd, which
            is this checkout: the require and replace it adds make the
            module build;
  mywork    the README's other recipe, its `go work init . <checkout>`
            (a workspace, go.mod untouched; GOFLAGS empty, which a
            workspace needs).
Each must take the module from the checkout (go list -m), build, and, run
against a private redis-server and dlockd on Unix sockets in that
directory (found through DLOCK_SOCKET, as the README says), connect, lock,
read the status, unlock, and see a bad name's error show the name.
Exits 1 naming the step that failed, with its output (and the daemons'
logs when a consumer failed); the directory is removed either way.
"""
# SPDX-License-Identifier: MIT

import os
import re
import shlex
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import Failed, Servers, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(ROOT, "clients", "go", "README.md")
GOMOD = os.path.join(ROOT, "clients", "go", "go.mod")
CHECKOUT_PLACEHOLDER = "/path/to/dlockd"  # the README's name for the checkout



def install_section():
    """The README's '## Install' section: (the lines of its sh block with
    the replace, its `go work init ...` command)."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## Install\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        raise Failed("%s: no '## Install' section" % README)
    # Its first sh block is `go get` (once published); the offline recipe is
    # the block with the replace.
    blocks = re.findall(r"^```sh\n(.*?)^```", m.group(1), re.S | re.M)
    offline = [b for b in blocks if "-replace=" in b]
    if not offline:
        raise Failed("%s: no sh block with go mod edit -replace in its Install section" % README)
    lines = [l for l in offline[0].split("\n") if l.strip()]
    work = re.search(r"`(go work init [^`]+)`", m.group(1).replace("\n", " "))
    if not work:
        raise Failed("%s: no `go work init ...` in its Install section" % README)
    return lines, work.group(1)


def module_path():
    with open(GOMOD, encoding="utf-8") as f:
        m = re.match(r"module\s+(\S+)", f.read())
    if not m:
        raise Failed("%s: no module line" % GOMOD)
    return m.group(1)


# The consumer: locks a name of its own, checks what it got, prints "<kind>: ok, fence N".
CONSUMER = """package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	dlock "%(module)s"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(kind string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := dlock.DialDefault(ctx) // $DLOCK_SOCKET
	if err != nil {
		return err
	}
	defer c.Close()
	name := "consumer-go-" + kind
	l, err := c.Lock(ctx, name, dlock.WithLease(30*time.Second))
	if err != nil {
		return err
	}
	fence := l.Fence()
	st, err := c.Status(ctx, name)
	if err != nil || st.State != "MINE" || st.Fence != fence {
		return fmt.Errorf("status %%+v, %%v; want MINE with fence %%d", st, err, fence)
	}
	if err := l.Unlock(); err != nil {
		return err
	}
	if st, err := c.Status(ctx, name); err != nil || st.State != "FREE" {
		return fmt.Errorf("after unlock: status %%+v, %%v", st, err)
	}
	_, err = c.Lock(ctx, "bad name")
	if !errors.Is(err, dlock.ErrName) || !strings.Contains(err.Error(), `"bad name"`) {
		return fmt.Errorf("bad name: %%v", err)
	}
	fmt.Printf("%%s: ok, fence %%d\\n", kind, fence)
	return nil
}
"""


def main():
    dlockd = os.environ.get("DLOCKD_BIN") or os.path.join(ROOT, "build", "dlockd")
    if not os.access(dlockd, os.X_OK):
        raise Failed("dlockd not found at %s (make build/dlockd)" % dlockd)
    if not shutil.which("go"):
        raise Failed("no go command (make deps installs golang-go)")
    lines, work_init = install_section()
    module = module_path()
    checkout_module = os.path.join(ROOT, "clients", "go")
    tmp = tempfile.mkdtemp(prefix="dlock-consumer-go-")
    srv = None
    try:
        if os.path.commonpath([os.path.realpath(tmp), ROOT]) == ROOT:
            raise Failed("the temporary directory %s is inside the repository" % tmp)
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        # Go's module cache, build cache and settings in the throwaway HOME;
        # nothing may be downloaded, not even a toolchain (Go 1.21 on).
        env = {k: v for k, v in os.environ.items() if not k.startswith("GO")}
        env.update(HOME=home, GOPATH=os.path.join(tmp, "gopath"),
                   GOCACHE=os.path.join(tmp, "gocache"), GOENV=os.path.join(home, "go.env"),
                   GOPROXY="off", GOTOOLCHAIN="local", GOFLAGS="-mod=mod", GO111MODULE="on")
        env.pop("GOWORK", None)
        kinds = {"myapp": env, "mywork": dict(env, GOFLAGS="")}
        for kind in kinds:
            d = os.path.join(home, kind)
            os.makedirs(d)
            run("go mod init in %s" % kind, ["go", "mod", "init", "example.com/" + kind], d, env)
            with open(os.path.join(d, "consumer.go"), "w") as f:
                f.write(CONSUMER % {"module": module})

        script = "set -ex\n" + "\n".join(l.replace(CHECKOUT_PLACEHOLDER, shlex.quote(ROOT))
                                          for l in lines) + "\n"
        print("== the README's offline recipe, in %s" % home)
        print(run("the README's install steps", ["sh", "-c", script], home, kinds["myapp"]).rstrip())
        work = work_init.replace(CHECKOUT_PLACEHOLDER, shlex.quote(ROOT))
        print("== the README's workspace: %s, in ~/mywork" % work)
        print(run(work, ["sh", "-c", "set -ex\n" + work], os.path.join(home, "mywork"),
                  kinds["mywork"]).rstrip())

        failures = []
        built = {}
        for kind, kenv in kinds.items():
            d = os.path.join(home, kind)
            try:
                where = run("go list -m in %s" % kind, ["go", "list", "-m", "-f", "{{.Dir}}", module],
                            d, kenv).strip()
                if os.path.realpath(where) != os.path.realpath(checkout_module):
                    raise Failed("%s: %s comes from %s, not the checkout %s"
                                 % (kind, module, where, checkout_module))
                run("go vet in %s" % kind, ["go", "vet", "."], d, kenv)
                run("go build in %s" % kind, ["go", "build", "-o", "consumer", "."], d, kenv)
                built[kind] = os.path.join(d, "consumer")
                print("== %s: builds, with %s from %s" % (kind, module, where))
            except Failed as e:
                print("== %s: FAILED: %s" % (kind, e))
                failures.append(kind)

        srv = Servers(tmp, dlockd)
        srv.wait_ready()
        for kind, binary in built.items():
            what = "%s's consumer" % kind
            try:
                out = run(what, [binary, kind], os.path.join(home, kind),
                          dict(kinds[kind], DLOCK_SOCKET=srv.sock))
                last = out.rstrip().split("\n")[-1]
                if not re.search(r"^[a-z]+: ok, fence [0-9]+$", last):
                    raise Failed("%s: no ok line\n%s" % (what, out))
                print("== %s: %s" % (what, last))
            except Failed as e:
                print("== %s: FAILED: %s" % (what, e))
                failures.append(what)
        if failures:
            raise Failed("%s\n%s" % (", ".join(failures), srv.logs()))
    finally:
        if srv:
            srv.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("consumer go: ok")


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        print("consumer go: FAILED: %s" % e, file=sys.stderr)
        sys.exit(1)
