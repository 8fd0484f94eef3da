// The dlockd wire format: checking names and numbers, parsing replies, STATUS and fences.
// SPDX-License-Identifier: MIT
'use strict';

const { BadRequestError, ProtocolError } = require('./errors.cjs');

const DEFAULT_SOCKET = '/run/dlockd/dlockd.sock';
const NAME_MAX = 255;
const NUM_MAX = 2147483647;
const PERMITS_MAX = 10000;

const NAME_RE = /^[\x21-\x7e]{1,255}$/;
const DIGITS_RE = /^[0-9]+$/;
const INT_RE = /^-?[0-9]+$/;

/** Returns name if it is a valid lock name (1-255 bytes of 0x21-0x7E), else throws code NAME. */
function checkName(name) {
  if (typeof name !== 'string') {
    throw new BadRequestError('NAME', `lock name must be a string, not ${typeof name}`);
  }
  if (!NAME_RE.test(name)) {
    const why = name.length < 1 || name.length > NAME_MAX
      ? `must be 1 to ${NAME_MAX} bytes` : 'only printable ASCII without spaces is allowed';
    const shown = name.length > 40 ? `${JSON.stringify(name.slice(0, 40))}... (${name.length} chars)` : JSON.stringify(name);
    throw new BadRequestError('NAME', `bad lock name ${shown}: ${why}`);
  }
  return name;
}

/** Returns v if it is an integer from low to high, else throws code ARGS. */
function checkNum(what, v, low = 0, high = NUM_MAX) {
  if (typeof v !== 'number' || !Number.isInteger(v)) {
    throw new BadRequestError('ARGS', `${what} must be an integer, not ${typeof v === 'number' ? v : typeof v}`);
  }
  if (v < low || v > high) throw new BadRequestError('ARGS', `${what} must be ${low} to ${high}, not ${v}`);
  return v;
}

/**
 * Returns v, a time in ms, as the whole ms sent on the wire: a fraction is
 * rounded up (a lease of 0.5 ms is 1 ms, never 0, which for a lease means
 * "no lease"; the Go and Java clients round their durations so too). Throws
 * code ARGS unless v is a number from 0 to NUM_MAX once rounded.
 */
function checkMs(what, v) {
  if (typeof v !== 'number' || Number.isNaN(v)) {
    throw new BadRequestError('ARGS', `${what} must be a number of ms, not ${typeof v === 'number' ? v : typeof v}`);
  }
  const ms = Math.ceil(v);
  if (v < 0 || !(ms <= NUM_MAX)) throw new BadRequestError('ARGS', `${what} must be 0 to ${NUM_MAX} ms, not ${v}`);
  return ms + 0; // -0 as 0
}

/** A reply line as {type: 'OK'|'TIMEOUT'|'ERR', words, code, text}. */
function parseReply(line) {
  const words = line.split(/[ \t]+/).filter((w) => w !== '');
  const type = words[0];
  if (type === 'OK' || type === 'TIMEOUT') return { type, words };
  if (type === 'ERR') {
    const m = /^ERR[ \t]+(\S+)[ \t]*(.*)$/.exec(line);
    return { type, words, code: m ? m[1] : 'UNKNOWN', text: m ? m[2] : line };
  }
  throw new ProtocolError(`unexpected line from dlockd: ${JSON.stringify(line)}`);
}

/** A decimal word from dlockd as a number (may be -1 for a ttl). */
function toInt(word) {
  if (word === undefined || !INT_RE.test(word)) {
    throw new ProtocolError(`expected a number from dlockd, got ${JSON.stringify(word)}`);
  }
  return Number(word);
}

/** A fence word as a bigint. */
function toFence(word) {
  if (word === undefined || !DIGITS_RE.test(word)) {
    throw new ProtocolError(`expected a fence from dlockd, got ${JSON.stringify(word)}`);
  }
  return BigInt(word);
}

/** `OK <fence> <holds>` as {fence, holds}. */
function parseGrant(words) {
  if (words.length !== 3) throw new ProtocolError(`bad grant reply: ${words.join(' ')}`);
  return { fence: toFence(words[1]), holds: toInt(words[2]) };
}

/** `OK <n>` as n. */
function parseCount(words) {
  if (words.length !== 2) throw new ProtocolError(`bad reply: ${words.join(' ')}`);
  return toInt(words[1]);
}

/**
 * STATUS's reply as a typed object:
 * {state, holds, ttl, fence, readers, available}, see index.d.cts.
 */
function parseStatus(words) {
  const s = words[1];
  const n = words.length;
  const st = { state: s, holds: 0, ttl: null, fence: null, readers: null, available: null };
  if (s === 'FREE' && n === 2) return st;
  if (s === 'MINE' && n === 5) {
    return { ...st, holds: toInt(words[2]), ttl: toInt(words[3]), fence: toFence(words[4]) };
  }
  if (s === 'TAKEN' && n === 3) return { ...st, ttl: toInt(words[2]) };
  if ((s === 'READ' || s === 'WRITE') && n === 5) {
    return { ...st, readers: toInt(words[2]), holds: toInt(words[3]), ttl: toInt(words[4]) };
  }
  if (s === 'SEM' && n === 4) return { ...st, available: toInt(words[2]), holds: toInt(words[3]) };
  throw new ProtocolError(`bad STATUS reply: ${words.join(' ')}`);
}

module.exports = {
  DEFAULT_SOCKET, NAME_MAX, NUM_MAX, PERMITS_MAX, checkName, checkNum, checkMs, parseReply, toInt,
  toFence, parseGrant, parseCount, parseStatus,
};
