#!/usr/bin/env python3
"""The Node client installed as its README says, and used by four consumers, outside the repository.

Run: DLOCKD_BIN=$PWD/build/dlockd NODE_TSC=$PWD/build/node-dev/node_modules/.bin/tsc \\
     python3 tests/consumer/node.py          (make consumer-node)

In a temporary directory (HOME for npm, so ~/myapp is there): a project
~/myapp with a package.json and nothing else, then the sh block of
clients/node/README.md's "Install" section, run as written but for
/path/to/dlockd, which is this checkout. npm runs offline: the package
must install from its tarball alone. Then, against a private redis-server
and dlockd on Unix sockets in that directory (found through DLOCK_SOCKET,
as the README says), each consumer connects, locks, reads the status,
unlocks, checks a bad name's error and closes:
  esm.mjs       JavaScript, an ES module; require() of the package in it
                must give the same classes as its import
  cjs.cjs       JavaScript, CommonJS; also run with require(esm) turned off
                (--no-experimental-require-module), as Node 20 before 20.19
  src/cjs.ts    TypeScript in the CommonJS project, module node16 (the
                setting that failed with TS1479), compiled with TypeScript
                from npm (NODE_TSC) and run, also with require(esm) off
  src/esm.mts   the same as an ES module
Exits 1 naming the step that failed, with its output (and the daemons'
logs when a consumer failed); the directory is removed either way.
"""
# SPDX-License-Identifier: MIT

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from servers import STEP_TIMEOUT, Failed, Servers, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(ROOT, "clients", "node", "README.md")
CHECKOUT_PLACEHOLDER = "/path/to/dlockd"  # the README's name for the checkout



def install_block():
    """The lines of the first sh block under the README's '## Install'."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## Install\n(.*?)(?=^## )", text, re.S | re.M)
    if not m:
        raise Failed("%s: no '## Install' section" % README)
    block = re.search(r"^```sh\n(.*?)^```", m.group(1), re.S | re.M)
    if not block:
        raise Failed("%s: no ```sh block in its Install section" % README)
    lines = [l for l in block.group(1).split("\n") if l.strip()]
    if not any(re.match(r"\s*npm install ", l) for l in lines):
        raise Failed("%s: the Install block has no npm install line:\n%s" % (README, "\n".join(lines)))
    return lines


# ---- the consumers --------------------------------------------------------------
# Each locks a name of its own, checks what it got, and prints "<kind>: ok" last.

BODY = """
  const name = 'consumer-node-%(kind)s';
  const client = await connect();                 // $DLOCK_SOCKET
  const h%(handle_t)s = await client.lock(name, { lease: 30000 });
  const fence%(fence_t)s = h.fence;
  if (typeof fence !== 'bigint') throw new Error(`fence ${String(fence)} is not a bigint`);
  const st = await client.status(name);
  if (st.state !== 'MINE' || st.fence !== fence) throw new Error(`status ${JSON.stringify(st.state)}`);
  if ((await h.unlock()) !== 0) throw new Error('unlock left holds');
  if ((await client.status(name)).state !== 'FREE') throw new Error('still held after unlock');
  let bad%(err_t)s = null;
  try {
    await client.lock('bad name');
  } catch (e) {
    bad = e;
  }
  if (!(bad instanceof BadRequestError) || bad.code !== 'NAME' || !bad.message.includes('"bad name"')) {
    throw new Error(`bad name: ${String(bad)}`);
  }
  await client.close();
  console.log(`%(kind)s: ok, fence ${fence}`);
"""


def body(kind, typed):
    """BODY for a consumer of that kind; typed: with TypeScript's annotations."""
    return BODY % {"kind": kind, "handle_t": ": LockHandle" if typed else "",
                   "fence_t": ": bigint" if typed else "", "err_t": ": unknown" if typed else ""}


CONSUMERS = {
    "esm.mjs": """import { createRequire } from 'node:module';
import { connect, BadRequestError, Client } from 'dlockd-client';

if (createRequire(import.meta.url)('dlockd-client').Client !== Client) {
  throw new Error('import and require() gave two Client classes');
}
""" + body("esm", False),
    "cjs.cjs": """const { connect, BadRequestError } = require('dlockd-client');

(async () => {""" + body("cjs", False) + """})().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
""",
    "src/cjs.ts": """import { connect, BadRequestError, LockHandle } from 'dlockd-client';

async function main(): Promise<void> {""" + body("ts-cjs", True) + """}

void main();
""",
    "src/esm.mts": """import { connect, BadRequestError, LockHandle } from 'dlockd-client';
""" + body("ts-esm", True),
}

TSCONFIG = {
    "compilerOptions": {"module": "node16", "target": "es2022", "strict": True,
                        "rootDir": "src", "outDir": "dist", "types": []},
    "include": ["src"],
}


def node_flags_without_require_esm(env):
    """The node flags turning require(esm) off, or None where node has no such flag (then it has none)."""
    try:
        subprocess.run(["node", "--no-experimental-require-module", "-e", "0"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=STEP_TIMEOUT)
        return ["--no-experimental-require-module"]
    except subprocess.CalledProcessError:
        return None


def main():
    dlockd = os.environ.get("DLOCKD_BIN") or os.path.join(ROOT, "build", "dlockd")
    tsc = os.environ.get("NODE_TSC") or os.path.join(ROOT, "build", "node-dev", "node_modules", ".bin", "tsc")
    for tool, path in (("dlockd", dlockd), ("tsc", tsc)):
        if not os.access(path, os.X_OK):
            raise Failed("%s not found at %s (make consumer-node builds it)" % (tool, path))
    lines = install_block()
    tmp = tempfile.mkdtemp(prefix="dlock-consumer-node-")
    srv = None
    try:
        if os.path.commonpath([os.path.realpath(tmp), ROOT]) == ROOT:
            raise Failed("the temporary directory %s is inside the repository" % tmp)
        home = os.path.join(tmp, "home")
        app = os.path.join(home, "myapp")
        os.makedirs(app)
        with open(os.path.join(app, "package.json"), "w") as f:
            json.dump({"name": "myapp", "version": "1.0.0", "private": True}, f, indent=2)
        # npm's cache and config in the throwaway HOME; offline: nothing may come from a registry.
        env = {k: v for k, v in os.environ.items() if not k.lower().startswith("npm_config_")}
        env.update(HOME=home, npm_config_offline="true", npm_config_audit="false",
                   npm_config_fund="false", npm_config_update_notifier="false",
                   npm_config_loglevel="warn")
        script = "set -ex\n" + "\n".join(l.replace(CHECKOUT_PLACEHOLDER, shlex.quote(ROOT))
                                          for l in lines) + "\n"
        print("== the README's install steps, in %s" % home)
        print(run("the README's install steps", ["sh", "-c", script], home, env).rstrip())
        installed = os.path.join(app, "node_modules", "dlockd-client")
        if os.path.islink(installed) or not os.path.isfile(os.path.join(installed, "package.json")):
            raise Failed("%s is not the package unpacked (a link, or no package.json)" % installed)
        with open(os.path.join(app, "package.json"), encoding="utf-8") as f:
            deps = json.load(f).get("dependencies", {})
        if "dlockd-client" not in deps:
            raise Failed("myapp's package.json does not list dlockd-client: %s" % deps)

        for path, text in CONSUMERS.items():
            os.makedirs(os.path.dirname(os.path.join(app, path)), exist_ok=True)
            with open(os.path.join(app, path), "w") as f:
                f.write(text)
        with open(os.path.join(app, "tsconfig.json"), "w") as f:
            json.dump(TSCONFIG, f, indent=2)
        # Every consumer is tried: a failure is told, and the others still run.
        failures = []
        print("== tsc -p myapp (module node16; src/cjs.ts is CommonJS, src/esm.mts an ES module)")
        compiled = False
        try:
            run("tsc", [tsc, "-p", app], app, env)
            with open(os.path.join(app, "dist", "cjs.js"), encoding="utf-8") as f:
                if 'require("dlockd-client")' not in f.read():
                    raise Failed("dist/cjs.js does not require() the package: not compiled as CommonJS")
            compiled = True
        except Failed as e:
            print("FAILED: %s" % e)
            failures.append("tsc")

        srv = Servers(tmp, dlockd)
        srv.wait_ready()
        env["DLOCK_SOCKET"] = srv.sock
        no_require_esm = node_flags_without_require_esm(env)
        runs = [["esm.mjs"], ["cjs.cjs"]] + ([["dist/cjs.js"], ["dist/esm.mjs"]] if compiled else [])
        if no_require_esm:
            runs += [no_require_esm + ["cjs.cjs"]] + ([no_require_esm + ["dist/cjs.js"]] if compiled else [])
        for argv in runs:
            what = "node " + " ".join(argv)
            try:
                out = run(what, ["node"] + argv, app, env)
                last = out.rstrip().split("\n")[-1]
                if not re.search(r"^[a-z-]+: ok, fence [0-9]+$", last):
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
    print("consumer node: ok")


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        print("consumer node: FAILED: %s" % e, file=sys.stderr)
        sys.exit(1)
