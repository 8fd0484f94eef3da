// LIST: checking its arguments and parsing its counted reply (OK LIST <n> <more>, then n '=' lines).
// SPDX-License-Identifier: MIT
'use strict';

const { BadRequestError, ProtocolError } = require('./errors.cjs');
const { toFence, toInt } = require('./proto.cjs');

const LIST_MAX = 1000; // the largest limit LIST takes

const PATTERN_RE = /^[\x21-\x7e]{1,255}$/;
const HEADER_RE = /^OK LIST (0|[1-9][0-9]{0,3}) ([01])$/;

/** The LIST request line for {pattern, limit}; throws code ARGS for a bad one. */
function listLine(pattern = '*', limit) {
  if (typeof pattern !== 'string' || !PATTERN_RE.test(pattern)) {
    throw new BadRequestError('ARGS', 'a LIST pattern is 1 to 255 bytes of 0x21-0x7E');
  }
  if (limit === undefined || limit === null) return `LIST ${pattern}`;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > LIST_MAX) {
    throw new BadRequestError('ARGS', `limit must be an integer 1 to ${LIST_MAX}, not ${limit}`);
  }
  return `LIST ${pattern} ${limit}`;
}

/** n of a header `OK LIST <n> <more>`, or -1 when the line is not one. */
function listCount(line) {
  const m = HEADER_RE.exec(line);
  return m && Number(m[1]) <= LIST_MAX ? Number(m[1]) : -1;
}

/** The header and its entry lines as {entries, more}. */
function parseListing(header, lines) {
  const n = listCount(header);
  if (n !== lines.length) throw new ProtocolError(`bad LIST reply: ${header}`);
  return { entries: lines.map(parseEntry), more: header.endsWith(' 1') };
}

function parseEntry(line) {
  const w = line.split(' ');
  if (w.length !== 8 || w[0] !== '=') throw new ProtocolError(`bad LIST entry: ${line}`);
  return {
    name: w[1],
    kind: w[2],
    ttl: toInt(w[3]),
    fence: w[4] === '-' ? null : toFence(w[4]),
    holders: parseParties(w[5], line),
    waiters: parseParties(w[6], line),
    value: w[7] === '-' ? null : w[7],
  };
}

function parseParties(word, line) {
  const parts = word.split(',');
  if (!/^[0-9]+$/.test(parts[0])) throw new ProtocolError(`bad LIST entry: ${line}`);
  const list = parts.slice(1).map((p) => {
    const f = p.split('/');
    if (f.length !== 6) throw new ProtocolError(`bad LIST entry: ${line}`);
    const num = (s) => {
      if (s === '-') return null;
      if (!/^[0-9]+$/.test(s)) throw new ProtocolError(`bad LIST entry: ${line}`);
      return Number(s);
    };
    return {
      host: f[0] === '-' ? null : f[0],
      dlockdPid: num(f[1]),
      pid: num(f[2]),
      uid: num(f[3]),
      count: num(f[4]),
      age: num(f[5]),
    };
  });
  return { total: Number(parts[0]), list };
}

module.exports = { LIST_MAX, listLine, listCount, parseListing };
