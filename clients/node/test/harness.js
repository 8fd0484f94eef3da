// Test support: a private redis-server and dlockd in a temp dir, started and cleaned up by the tests.
// SPDX-License-Identifier: MIT

import { spawn, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync, rmSync, accessSync, constants, readFileSync, openSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, after } from 'node:test';
import { connect } from '../index.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const DLOCKD = process.env.DLOCKD_BIN || join(ROOT, 'build', 'dlockd');
export const START_TIMEOUT_MS = 15000;
export const CONF_LEASE_MS = 600;

/** Resolves once `check()` resolves truthy; polls every 10 ms, rejects after `ms`. */
export async function until(check, what, ms = 5000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10)); // poll interval
  }
}

/** Rejects with "hang" when `p` takes longer than `ms`: a hang guard, never a wait for an event. */
export function guard(p, ms = 5000, what = 'promise') {
  let t;
  const timeout = new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`${what} hung for ${ms} ms`)), ms); });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

/** Resolves the signal's reason once it aborts. */
export function aborted(signal) {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((r) => signal.addEventListener('abort', () => r(signal.reason), { once: true }));
}

/** A redis-server and dlockd daemons sharing it, in a temp dir. */
export class Servers {
  constructor() {
    accessSync(DLOCKD, constants.X_OK);
    execFileSync('which', ['redis-server']);
    this.dir = mkdtempSync(join(tmpdir(), 'dlock-node-'));
    this.rsock = join(this.dir, 'redis.sock');
    this.procs = [];
    this.n = 0;
  }

  #spawn(argv, log) {
    const fd = openSync(join(this.dir, log), 'a');
    const p = spawn(argv[0], argv.slice(1), { cwd: this.dir, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    p.log = log;
    p.exited = new Promise((r) => p.once('exit', r));
    this.procs.push(p);
    return p;
  }

  async start() {
    this.#spawn(['redis-server', '--port', '0', '--unixsocket', this.rsock, '--save', '',
      '--appendonly', 'no', '--dir', this.dir], 'redis.log');
    this.sock = (await this.daemon()).sock;
    return this;
  }

  /** Starts one more dlockd on the shared redis; resolves {sock, proc} once redis is up for it. */
  async daemon() {
    const i = this.n++;
    const sock = join(this.dir, `d${i}.sock`);
    const conf = join(this.dir, `d${i}.conf`);
    writeFileSync(conf, `[server]\nsocket = ${sock}\nadmin_uids = 0\n[redis]\nurl = unix://${this.rsock}\n`
      + `[lock]\nlease_ms = ${CONF_LEASE_MS}\n`, { mode: 0o600 });
    const proc = this.#spawn([DLOCKD, '-c', conf], `d${i}.log`);
    let died = false;
    proc.exited.then(() => { died = true; });
    await until(async () => {
      if (died) throw new Error('dlockd exited');
      const c = await connect({ path: sock });
      try {
        return (await c.info()).redis === 'up';
      } finally {
        await c.close();
      }
    }, `dlockd ${sock} to be ready`, START_TIMEOUT_MS).catch((e) => {
      throw new Error(`${e.message}${died ? ' (dlockd exited)' : ''}`);
    });
    return { sock, proc };
  }

  async stop() {
    for (const p of this.procs.reverse()) {
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGTERM');
        const t = setTimeout(() => p.kill('SIGKILL'), 5000);
        await p.exited;
        clearTimeout(t);
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  logs() {
    try {
      return readFileSync(join(this.dir, 'd0.log'), 'utf8');
    } catch {
      return '';
    }
  }
}

/** Resolves once the dlockd at `sock` has `n` requests waiting (INFO waiters). */
export async function waiters(sock, n) {
  const c = await connect({ path: sock });
  try {
    await until(async () => Number((await c.info()).waiters) === n, `${n} waiters at ${sock}`);
  } finally {
    await c.close();
  }
}

/**
 * The Servers of a test file: started before its tests, stopped after them with every
 * client that fx.client() opened. fx.srv is the Servers once started.
 */
export function shared() {
  const fx = {
    srv: undefined,
    clients: [],
    async client() {
      const c = await connect({ path: fx.srv.sock });
      fx.clients.push(c);
      return c;
    },
  };
  before(async () => { fx.srv = await new Servers().start(); });
  after(async () => {
    await Promise.all(fx.clients.map((c) => c.close()));
    await fx.srv?.stop();
  });
  return fx;
}

/** A name no other test uses: node-<tag>-<8 hex digits>. */
export const fresh = (tag) => `node-${tag}-${randomBytes(4).toString('hex')}`;
