// index.d.cts against index.cjs's and index.js's exports, and test/types.ts (what make clients-node-types checks) against both.
// SPDX-License-Identifier: MIT

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as api from '../index.js';

const cjs = createRequire(import.meta.url)('../index.cjs');

const here = dirname(fileURLToPath(import.meta.url));
const read = (file) => readFileSync(join(here, file), 'utf8');

/** index.d.cts's exports as {values, types}: classes, consts and functions; interfaces and types. */
function declared() {
  const values = new Set();
  const types = new Set();
  for (const m of read('../index.d.cts').matchAll(/^export (?:declare )?(class|const|function|interface|type) (\w+)/mg)) {
    (m[1] === 'interface' || m[1] === 'type' ? types : values).add(m[2]);
  }
  return { values, types };
}

/** The names test/types.ts imports from the package. */
function imported() {
  const names = new Set();
  for (const m of read('types.ts').matchAll(/^import (?:type )?\{([^}]*)\} from 'dlockd-client';/mg)) {
    for (const name of m[1].split(',').map((s) => s.trim()).filter(Boolean)) names.add(name);
  }
  return names;
}

test('index.d.cts declares exactly the values index.js exports', () => {
  const { values } = declared();
  assert.deepEqual([...values].sort(), Object.keys(api).sort());
});

test('index.js exports index.cjs\'s values themselves, and index.d.ts is index.d.cts\'s', () => {
  assert.deepEqual(Object.keys(api).sort(), Object.keys(cjs).sort());
  for (const [name, value] of Object.entries(cjs)) assert.equal(api[name], value, name);
  assert.match(read('../index.d.ts'), /^export \* from '\.\/index\.cjs';$/m);
});

test('test/types.ts imports every export of index.d.cts', () => {
  const { values, types } = declared();
  const names = imported();
  assert.deepEqual([...values, ...types].filter((n) => !names.has(n)), []);
  assert.ok(types.size > 10, `types found in index.d.ts: ${[...types]}`);
});

test('test/types.ts uses every name it imports', () => {
  const body = read('types.ts').replace(/^import [^;]*;/mg, '');
  const unused = [...imported()].filter((n) => !new RegExp(`\\b${n}\\b`).test(body));
  assert.deepEqual(unused, []);
});
