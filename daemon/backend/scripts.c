/* The Lua scripts that change lock state, their calls and their replies.
 * SPDX-License-Identifier: MIT */
#include "scripts.h"

#include <stdio.h>
#include <string.h>

#include "daemon/backend/keys.h"

/* ---- the scripts -------------------------------------------------------- */

/* K1 lock hash, K2 fence counter; A1 lease ms, A2 owner, Q 'q' for a
 * quorum's rule. {0, fence} new grant, {1, holds} reentered, {2, pttl}
 * taken, {3, 1 or 2} held as a read/write lock (reads, a write: checked
 * first, since a reader's field has the same name as the owner's), {3, 3}
 * a semaphore (a string: its permits). A
 * grant's fence is the greater of the counter plus one and Redis TIME in
 * microseconds, and the counter is set to it: fences keep rising
 * when Redis loses the counter (a restart without persistence) or a
 * promoted replica missed its last writes, as long as that server's clock
 * is not behind by more than the outage lasted. Microseconds stay below
 * 2^53, exact in Lua's doubles. A quorum's nodes count TIME in whole
 * seconds (times a million): nodes whose counters agree then mostly
 * return the same fence, and the grant needs no round to raise counters
 * (quorum.c); fences still rise with up to a million grants a second.
 * The free case comes first, with the fewest calls: it is the common one;
 * GETSET writes TIME and reads the last fence in one call, and a second
 * write follows only when the last was not below it. L and R bracket the
 * two results: "{" and "}" where they are the script's reply, nothing in
 * the batch script, whose functions return them as two values. TIME is
 * how Redis TIME is read: the batch script reads it once per call (its
 * grants follow within microseconds, and a second grant of one name in
 * it takes the counter plus one). */
#define LUA_ACQUIRE(L, R, TIME) \
    "if redis.call('exists', K1) == 0 then\n" \
    "  redis.call('hset', K1, A2, 1)\n" \
    "  redis.call('pexpire', K1, A1)\n" \
    "  local t = " TIME "\n" \
    "  local f\n" \
    "  if Q == 'q' then\n" \
    "    f = math.max(tonumber(redis.call('get', K2) or '0') + 1, tonumber(t[1]) * 1000000)\n" \
    "  else\n" \
    "    f = tonumber(t[1]) * 1000000 + tonumber(t[2])\n" \
    "    local last = tonumber(redis.call('getset', K2, string.format('%d', f)) or '0')\n" \
    "    if last < f then return " L "0, f" R " end\n" \
    "    f = last + 1\n" \
    "  end\n" \
    "  redis.call('set', K2, string.format('%d', f))\n" \
    "  return " L "0, f" R "\n" \
    "end\n" \
    "local m = redis.pcall('hget', K1, 'mode')\n" \
    "if type(m) == 'table' then\n" \
    "  if redis.call('type', K1).ok == 'string' then return " L "3, 3" R " end\n" \
    "  error(m)\n" \
    "end\n" \
    "if m then return " L "3, m == 'read' and 1 or 2" R " end\n" \
    "if redis.call('hexists', K1, A2) == 1 then\n" \
    "  local n = redis.call('hincrby', K1, A2, 1)\n" \
    "  redis.call('pexpire', K1, A1)\n" \
    "  return " L "1, n" R "\n" \
    "end\n" \
    "return " L "2, redis.call('pttl', K1)" R "\n"
static const char script_acquire[] =
    "local K1, K2, A1, A2, Q = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]\n"
    LUA_ACQUIRE("{", "}", "redis.call('time')");

/* K1 lock hash, K2 channel; A1 owner, A2 '1' to release all holds (delete
 * and publish '0', as Redisson's unlock does) or '0' to drop one hold
 * without ever deleting; P the publish command ('publish', or 'spublish'
 * for sharded pub/sub), as Redisson passes it too. Returns holds left, -1
 * if not held (a read/write lock's field of the owner is not this lock),
 * or {0, subscribers that got the release message} (L and R as in
 * LUA_ACQUIRE). Every key
 * is read before anything is written: on a Cluster node that does not
 * hold the key (a slot moving away), the first access fails and nothing
 * has changed. */
#define LUA_RELEASE(L, R) \
    "local v = redis.call('hmget', K1, A1, 'mode')\n" \
    "local n = v[1]\n" \
    "if not n or v[2] then return -1 end\n" \
    "if A2 == '0' then\n" \
    "  if tonumber(n) > 1 then return redis.call('hincrby', K1, A1, -1) end\n" \
    "  return tonumber(n)\n" \
    "end\n" \
    "redis.call('del', K1)\n" \
    "return " L "0, redis.call(P, K2, '0')" R "\n"
static const char script_release[] =
    "local K1, K2, A1, A2, P = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]\n" LUA_RELEASE("{", "}");

/* K1 lock hash, K2 forced marker; A1 lease ms, A2 owner. 1 renewed, 0
 * gone, 2 removed by force. A key of another type counts as gone; any
 * other error (a Cluster node that no longer holds the key) is raised. */
#define LUA_RENEW \
    "local h = redis.pcall('hexists', K1, A2)\n" \
    "if h == 1 then\n" \
    "  redis.call('pexpire', K1, A1)\n" \
    "  return 1\n" \
    "end\n" \
    "if type(h) == 'table' and not string.find(h.err, '^WRONGTYPE') then error(h) end\n" \
    "if redis.pcall('get', K2) == A2 then return 2 end\n" \
    "return 0\n"

/* A read/write lock's renewal (the watchdog's, batched with the others):
 * K1 lock hash, K2 forced marker; A1 lease ms, A2 owner, k 'v' for its
 * read holds (the hash, and each hold's timeout key, as Redisson's
 * ReadLockTask renews them) or 'V' for its write hold. The hash's TTL only
 * grows (see script_rw). Replies as LUA_RENEW. */
#define LUA_RW_RENEW \
    "local m = redis.pcall('hget', K1, 'mode')\n" \
    "if type(m) == 'table' then\n" \
    "  if not string.find(m.err, '^WRONGTYPE') then error(m) end\n" \
    "  m = false\n" \
    "end\n" \
    "local f = k == 'v' and A2 or A2 .. ':write'\n" \
    "local n = m and tonumber(redis.call('hget', K1, f))\n" \
    "if n then\n" \
    "  if redis.call('pttl', K1) < tonumber(A1) then redis.call('pexpire', K1, A1) end\n" \
    "  if k == 'v' then\n" \
    "    local t = (string.find(K1, '{', 1, true) and K1 or '{' .. K1 .. '}') .. ':' .. A2\n" \
    "    for i = 1, n do redis.call('pexpire', t .. ':rwlock_timeout:' .. i, A1) end\n" \
    "  end\n" \
    "  return 1\n" \
    "end\n" \
    "if redis.pcall('get', K2) == f then return 2 end\n" \
    "return 0\n"

/* A semaphore's renewal (the watchdog's, batched with the others): K1 the
 * semaphore, K2 its permit ids' sorted set; A1 lease ms, A2 owner, c how
 * many permits it holds: ids A2:1 .. A2:c, each scored by when it expires
 * (ms since the epoch, Redis TIME). All of them get now + lease: 1; or 0,
 * changing nothing, when any is gone or expired (the holder has lost
 * them: its release gives back the rest). */
#define LUA_SEM_RENEW \
    "local t = redis.call('time')\n" \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
    "local id = A2 .. ':'\n" \
    "for i = 1, c do\n" \
    "  local s = redis.call('zscore', K2, id .. i)\n" \
    "  if not s or tonumber(s) <= now then return 0 end\n" \
    "end\n" \
    "for i = 1, c do redis.call('zadd', K2, now + tonumber(A1), id .. i) end\n" \
    "return 1\n"

/* K1 lock hash, K2 fence counter; A1 a fence, A2 owner. A quorum's grant
 * raises the counter to its fence where it was lower, only while the
 * owner still holds the lock there: 1, or 0 when it does not. */
#define LUA_RAISE \
    "if redis.call('hexists', K1, A2) == 0 then return 0 end\n" \
    "if tonumber(redis.call('get', K2) or '0') < tonumber(A1) then\n" \
    "  redis.call('set', K2, A1)\n" \
    "end\n" \
    "return 1\n"

/* KEYS[1] lock hash (or semaphore), KEYS[2] a semaphore's permit ids;
 * ARGV[1] owner. {pttl, this owner's holds, what is held (0 a plain lock,
 * 1 reads, 2 a write, 3 a semaphore), readers (a semaphore: permits
 * available, counting expired ones, which the next acquire takes back),
 * this owner's write holds}; a plain lock's holds are its owner field's,
 * a read/write lock's this owner's read holds. Reads only. */
static const char script_status[] =
    "if redis.call('type', KEYS[1]).ok == 'string' then\n"
    "  local c = redis.call('time')\n"
    "  local now = tonumber(c[1]) * 1000 + math.floor(tonumber(c[2]) / 1000)\n"
    "  local v = (tonumber(redis.call('get', KEYS[1])) or 0) +\n"
    "            redis.call('zcount', KEYS[2], 0, now)\n"
    "  return {redis.call('pttl', KEYS[1]), 0, 3, v, 0}\n"
    "end\n"
    "local t = redis.call('pttl', KEYS[1])\n"
    "local m = redis.call('hget', KEYS[1], 'mode')\n"
    "local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')\n"
    "if not m then return {t, n, 0, 0, 0} end\n"
    "local readers = 0\n"
    "for _, k in ipairs(redis.call('hkeys', KEYS[1])) do\n"
    "  if k ~= 'mode' and not string.find(k, ':write$') then readers = readers + 1 end\n"
    "end\n"
    "local w = tonumber(redis.call('hget', KEYS[1], ARGV[1] .. ':write') or '0')\n"
    "return {t, n, m == 'read' and 1 or 2, readers, w}\n";

/* KEYS[1] lock hash, KEYS[2] channel, KEYS[3] forced marker, KEYS[4] and
 * KEYS[5] a semaphore's permit ids and channel, KEYS[6] a fair lock's
 * queue; ARGV[1] how long the marker outlives the lock, ARGV[2] the
 * publish command. Removes the lock whoever holds it, leaves a marker
 * naming the owner so its daemon can say 'forced', and wakes a fair
 * lock's first waiter on its own channel. A semaphore gets every permit
 * back (its holders find theirs gone). */
static const char script_force[] =
    "if redis.call('type', KEYS[1]).ok == 'string' then\n"
    "  local n = redis.call('zcard', KEYS[4])\n"
    "  if n == 0 then return 0 end\n"
    "  redis.call('del', KEYS[4])\n"
    "  redis.call(ARGV[2], KEYS[5], redis.call('incrby', KEYS[1], n))\n"
    "  return 1\n"
    "end\n"
    "local f = redis.call('hkeys', KEYS[1])\n"
    "if #f == 0 then return 0 end\n"
    "local t = redis.call('pttl', KEYS[1])\n"
    "if t < 0 then t = 0 end\n"
    "local who = f[1] == 'mode' and f[2] or f[1]\n"
    "redis.call('set', KEYS[3], who or '', 'px', t + tonumber(ARGV[1]))\n"
    "redis.call('del', KEYS[1])\n"
    "redis.call(ARGV[2], KEYS[2], '0')\n"
    "local nx = redis.call('lindex', KEYS[6], 0)\n"
    "if nx then redis.call(ARGV[2], KEYS[2] .. ':' .. nx, '0') end\n"
    "return 1\n";

/* Read/write locks in Redisson's RReadWriteLock layout. K1 the lock hash,
 * with 'mode' ('read' or 'write'), a reader's field <owner> holding its
 * read holds and the writer's <owner>:write its write holds; K2 the fence
 * counter; K3 the channel (redisson_rwlock:{K1}); K4 the timeout keys'
 * prefix ({K1}, or K1 when it has a '{'): each read hold n has a key
 * K4:<owner>:rwlock_timeout:n with the reader's lease, so
 * a dead reader's holds end with their keys. A1 the op: 'r'/'w' acquire,
 * 'R'/'W' release all of the owner's read/write holds, 'd'/'D' one hold
 * less (never the last); A2 the lease; A3 the owner; P the publish
 * command. Renewals go in the batch script (LUA_RW_RENEW). Replies as the mutex scripts give them, and an acquire
 * of a name held as a plain lock (a hash without 'mode') gets {3, 0},
 * changing nothing. A write grant raises the fence as LUA_ACQUIRE does; a
 * read grant returns the counter as it is: readers learn whether a newer
 * writer came. Releases publish as Redisson does ('0' after reads, '1'
 * after a write), and a write release that leaves this owner's reads
 * (a downgrade) publishes too, since readers elsewhere may go now.
 *
 * The hash's TTL is never shortened by a grant or a renewal, so it is at
 * least every live read hold's: a reader's release sets it to the longest
 * the other readers' timeout keys have left, as Redisson's unlock does,
 * so that the holds of a dead daemon end with their lease; but it stops
 * looking at the first key within a tenth of the TTL the hash has, and
 * keeps that TTL: with many live readers a release reads one or two keys,
 * not one per reader. It looks at two readers picked at random first
 * (HRANDFIELD, Redis 6.2), and only when neither will do at them all
 * (HKEYS): fifty readers' release no longer lists fifty fields. */
#define LUA_RW(L, R) \
    "local W = A3 .. ':write'\n" \
    "local T = K4 .. ':' .. A3 .. ':rwlock_timeout:'\n" \
    "local field = (op == 'r' or op == 'R' or op == 'd') and A3 or W\n" \
    "local got = redis.pcall('hmget', K1, 'mode', field)\n" \
    "if got.err then\n" \
    "  if redis.call('type', K1).ok ~= 'string' then error(got) end\n" \
    "  if op == 'r' or op == 'w' then return " L "3, 3" R " end\n" \
    "  return -1\n" \
    "end\n" \
    "local mode = got[1]\n" \
    "if op == 'r' or op == 'w' then\n" \
    "  if not mode and redis.call('exists', K1) == 1 then return " L "3, 0" R " end\n" \
    "  local f = tonumber(redis.call('get', K2) or '0')\n" \
    "  if op == 'r' then\n" \
    "    if mode == 'write' and redis.call('hexists', K1, W) == 0 then\n" \
    "      return " L "2, redis.call('pttl', K1)" R "\n" \
    "    end\n" \
    "    if not mode then redis.call('hset', K1, 'mode', 'read') end\n" \
    "    local n = redis.call('hincrby', K1, A3, 1)\n" \
    "    redis.call('set', T .. n, 1, 'px', A2)\n" \
    "    if redis.call('pttl', K1) < tonumber(A2) then redis.call('pexpire', K1, A2) end\n" \
    "    if n == 1 then return " L "0, f" R " end\n" \
    "    return " L "1, n" R "\n" \
    "  end\n" \
    "  if not mode then\n" \
    "    redis.call('hset', K1, 'mode', 'write', W, 1)\n" \
    "    redis.call('pexpire', K1, A2)\n" \
    "    f = f + 1\n" \
    "    local t = redis.call('time')\n" \
    "    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n" \
    "    if now > f then f = now end\n" \
    "    redis.call('set', K2, string.format('%d', f))\n" \
    "    return " L "0, f" R "\n" \
    "  end\n" \
    "  if mode == 'write' and got[2] then\n" \
    "    local n = redis.call('hincrby', K1, W, 1)\n" \
    "    if redis.call('pttl', K1) < tonumber(A2) then redis.call('pexpire', K1, A2) end\n" \
    "    return " L "1, n" R "\n" \
    "  end\n" \
    "  return " L "2, redis.call('pttl', K1)" R "\n" \
    "end\n" \
    "local n = mode and tonumber(got[2])\n" \
    "if not n then return -1 end\n" \
    "if op == 'd' or op == 'D' then\n" \
    "  if n <= 1 then return n end\n" \
    "  if op == 'd' then redis.call('del', T .. n) end\n" \
    "  return redis.call('hincrby', K1, field, -1)\n" \
    "end\n" \
    "redis.call('hdel', K1, field)\n" \
    "if op == 'R' then\n" \
    "  for i = 1, n do redis.call('del', T .. i) end\n" \
    "  if redis.call('hlen', K1) > 1 then\n" \
    "    local cur, left = redis.call('pttl', K1), -3\n" \
    "    local look = function(list, paired)\n" \
    "      for j = 1, #list, paired and 2 or 1 do\n" \
    "        local k = list[j]\n" \
    "        local c = tonumber(paired and list[j + 1] or redis.call('hget', K1, k))\n" \
    "        for i = c or 0, 1, -1 do\n" \
    "          left = math.max(left, redis.call('pttl', K4 .. ':' .. k .. ':rwlock_timeout:' .. i))\n" \
    "          if left >= cur - cur / 10 then return true end\n" \
    "        end\n" \
    "      end\n" \
    "    end\n" \
    "    local ok, some = pcall(redis.call, 'hrandfield', K1, 2, 'withvalues')\n" \
    "    if (ok and look(some, true)) or look(redis.call('hkeys', K1)) then return 0 end\n" \
    "    if left > 0 then\n" \
    "      redis.call('pexpire', K1, left)\n" \
    "      return 0\n" \
    "    end\n" \
    "    if mode == 'write' then return 0 end\n" \
    "  end\n" \
    "  redis.call('del', K1)\n" \
    "  return " L "0, redis.call(P, K3, '0')" R "\n" \
    "end\n" \
    "if redis.call('hlen', K1) == 1 then\n" \
    "  redis.call('del', K1)\n" \
    "else\n" \
    "  redis.call('hset', K1, 'mode', 'read')\n" \
    "end\n" \
    "return " L "0, redis.call(P, K3, '1')" R "\n"
static const char script_rw[] =
    "local K1, K2, K3, K4 = KEYS[1], KEYS[2], KEYS[3], KEYS[4]\n"
    "local op, A2, A3, P = ARGV[1], ARGV[2], ARGV[3], ARGV[4]\n" LUA_RW("{", "}");

/* Many operations in one call: the bodies above as functions (K1, K2, A1,
 * A2 are their parameters), run in the order asked for. Two keys per
 * operation (the lock, and its token, channel or forced marker), then
 * three arguments per operation: 'a' lease owner (an acquire; 'q' with a
 * quorum's fence rule), 'r' all owner, 'n' lease owner (a renewal; 'v'
 * and 'V' of a read/write lock's read or write holds, 's<c>' of a
 * semaphore's c permits), 'f' fence owner (a quorum's raise) or 'x<op>'
 * lease owner (a read/write lock's acquire, release or drop: LUA_RW's op,
 * with the fence counter or the channel as the second key; the timeout
 * keys' prefix is made from the first as SCRIPT_RW's caller makes it); the
 * last argument is the publish command.
 *
 * The reply is an array of two elements per operation: the pair an
 * acquire or a release returns ({0, fence}, {1, holds}, {2, pttl};
 * {0, subscribers}), or a number (holds left, a renewal's or a raise's
 * digit) and nil; or the error's text and nil when that operation failed
 * (the others still run). The operations run under one pcall: when one
 * fails, the loop goes on after it under a new one, so a batch where
 * nothing failed pays for one (a failed operation did not write: see
 * below).
 *
 * Two layouts share the body. SCRIPT_OPS passes the keys in KEYS, so they
 * must share one Cluster slot (or there is no Cluster). SCRIPT_OPS_ANY is
 * for a Cluster node's many slots: Redis refuses declared keys of
 * different slots (CROSSSLOT) even with allow-cross-slot-keys, so the
 * keys go first in ARGV, after their count; the flag lets the script
 * touch keys of any slot this node serves. An operation whose key the
 * node does not serve (its slot moved) fails alone, before it writes. */
#define LUA_OPS_BODY \
    "local tm\n" \
    "local now = function()\n" \
    "  tm = tm or redis.call('time')\n" \
    "  return tm\n" \
    "end\n" \
    "local acquire = function(K1, K2, A1, A2, Q)\n" LUA_ACQUIRE("", "", "now()") "end\n" \
    "local release = function(K1, K2, A1, A2)\n" LUA_RELEASE("", "") "end\n" \
    "local renew = function(K1, K2, A1, A2)\n" LUA_RENEW "end\n" \
    "local rw_renew = function(K1, K2, A1, A2, k)\n" LUA_RW_RENEW "end\n" \
    "local raise = function(K1, K2, A1, A2)\n" LUA_RAISE "end\n" \
    "local sem_renew = function(K1, K2, A1, A2, c)\n" LUA_SEM_RENEW "end\n" \
    "local rw = function(K1, KX, A2, A3, op)\n" \
    "  local K2, K3 = KX, KX\n" \
    "  local K4 = string.find(K1, '{', 1, true) and K1 or '{' .. K1 .. '}'\n" \
    LUA_RW("", "") "end\n" \
    "local out, i = {}, 1\n" \
    "local run = function()\n" \
    "  while i <= n do\n" \
    "    local r, v\n" \
    "    local k1, k2 = K[ko + 2 * i - 1], K[ko + 2 * i]\n" \
    "    local a = ao + 3 * i\n" \
    "    local k = ARGV[a - 2]\n" \
    "    if k == 'r' then\n" \
    "      r, v = release(k1, k2, ARGV[a], ARGV[a - 1])\n" \
    "    elseif k == 'a' or k == 'q' then\n" \
    "      r, v = acquire(k1, k2, ARGV[a - 1], ARGV[a], k)\n" \
    "    elseif k == 'n' then\n" \
    "      r = renew(k1, k2, ARGV[a - 1], ARGV[a])\n" \
    "    elseif k == 'v' or k == 'V' then\n" \
    "      r = rw_renew(k1, k2, ARGV[a - 1], ARGV[a], k)\n" \
    "    elseif k == 'f' then\n" \
    "      r = raise(k1, k2, ARGV[a - 1], ARGV[a])\n" \
    "    elseif string.byte(k) == 120 then\n" \
    "      r, v = rw(k1, k2, ARGV[a - 1], ARGV[a], string.sub(k, 2))\n" \
    "    elseif string.byte(k) == 115 then\n" \
    "      r = sem_renew(k1, k2, ARGV[a - 1], ARGV[a], tonumber(string.sub(k, 2)))\n" \
    "    else\n" \
    "      r, v = release(k1, k2, ARGV[a], ARGV[a - 1])\n" \
    "    end\n" \
    "    out[2 * i - 1], out[2 * i] = r, v or false\n" \
    "    i = i + 1\n" \
    "  end\n" \
    "end\n" \
    "while true do\n" \
    "  local ok, e = pcall(run)\n" \
    "  if ok then return out end\n" \
    "  out[2 * i - 1], out[2 * i] = tostring(type(e) == 'table' and e.err or e), false\n" \
    "  i = i + 1\n" \
    "end\n"
static const char script_ops[] =
    "local n, K, ko, ao = #KEYS / 2, KEYS, 0, 0\n"
    "local P = ARGV[#ARGV]\n" LUA_OPS_BODY;
static const char script_ops_any[] =
    "#!lua flags=allow-cross-slot-keys\n"
    "local n = tonumber(ARGV[1])\n"
    "local K, ko, ao = ARGV, 1, 1 + 2 * n\n"
    "local P = ARGV[#ARGV]\n" LUA_OPS_BODY;

/* Many renewals with one lease: the watchdog's. Two keys per lock (the
 * lock hash and forced marker), the lease, then one owner per lock. One
 * digit per lock comes back, as LUA_RENEW returns it, or 'E' when that
 * renewal failed (its key is not on this node). The watchdog's batches
 * are all renewals with one lease: this passes each in three strings
 * where the batch script needs five. SCRIPT_RENEW_ANY is its layout for a
 * Cluster node's many slots, as with SCRIPT_OPS_ANY. */
#define LUA_RENEW_BODY \
    "local renew = function(K1, K2, A1, A2)\n" LUA_RENEW "end\n" \
    "local r = {}\n" \
    "local lease = ARGV[ao + 1]\n" \
    "for i = 1, n do\n" \
    "  local ok, v = pcall(renew, K[ko + 2 * i - 1], K[ko + 2 * i], lease, ARGV[ao + 1 + i])\n" \
    "  r[i] = ok and v or 'E'\n" \
    "end\n" \
    "return table.concat(r)\n"
static const char script_renew[] =
    "local n, K, ko, ao = #KEYS / 2, KEYS, 0, 0\n" LUA_RENEW_BODY;
static const char script_renew_any[] =
    "#!lua flags=allow-cross-slot-keys\n"
    "local n = tonumber(ARGV[1])\n"
    "local K, ko, ao = ARGV, 1, 1 + 2 * n\n" LUA_RENEW_BODY;

/* KEYS[1] lock hash, KEYS[2] registry. {pttl, the holder's field, its
 * registry entry}: -2 and empty strings when free (-3 a semaphore), '' for a holder no
 * dlockd registered (a Redisson client). Without KEYS[2] (under Cluster
 * the registry is in another slot) the entry is ''. Reads only. */
static const char script_who[] =
    "local f = redis.pcall('hkeys', KEYS[1])\n"
    "if f.err and redis.call('type', KEYS[1]).ok == 'string' then return {-3, '', ''} end\n"
    "if type(f) ~= 'table' or #f == 0 then return {-2, '', ''} end\n"
    "local who = f[1] == 'mode' and f[2] or f[1]\n"
    "if not who then return {-2, '', ''} end\n"
    "who = string.gsub(who, ':write$', '')\n"
    "local uuid = string.match(who, '^(.*):[^:]*$') or who\n"
    "local e = KEYS[2] and redis.call('hget', KEYS[2], uuid) or ''\n"
    "return {redis.call('pttl', KEYS[1]), who, e}\n";

/* KEYS[1] registry; ARGV[1] uuid, ARGV[2] "dlockd:<host>:<pid>", ARGV[3]
 * the age past which an entry is gone. Sets ours to "<now ms> <name>" and
 * removes the stale ones: a few daemons, so a few fields. */
static const char script_register[] =
    "local t = redis.call('time')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "redis.call('hset', KEYS[1], ARGV[1], string.format('%d', now) .. ' ' .. ARGV[2])\n"
    "local all = redis.call('hgetall', KEYS[1])\n"
    "for i = 1, #all, 2 do\n"
    "  local seen = tonumber(string.match(all[i + 1], '^(%d+) '))\n"
    "  if seen == nil or now - seen > tonumber(ARGV[3]) then\n"
    "    redis.call('hdel', KEYS[1], all[i])\n"
    "  end\n"
    "end\n"
    "return 1\n";



/* Semaphores in Redisson's RPermitExpirableSemaphore layout. K1 the
 * semaphore, a string: the permits available; K2 its permit ids' sorted
 * set ({K1}:timeout), each id scored by when it expires (ms since the
 * epoch, Redis TIME; Redisson's non-expiring ids have 922337203685477);
 * K3 the channel (redisson_sc:{K1}). A1 the op: 'a' acquire, 'r' release,
 * 'i' set the permits unless set (Redisson's trySetPermits: 1, or 0);
 * A2 permits (of 'i': the size); A3 base: the owner's ids are
 * A5:1 .. A5:base already (an acquire's) or the ids released are
 * A5:base+1 .. A5:base+A2; A4 the lease; P the publish command.
 *
 * An acquire first checks that the owner's earlier ids are all there
 * ({4, 0} and nothing changed when not: its permits were lost), takes
 * back expired ids as Redisson's acquire does, then, with A2 permits
 * available, adds ids base+1 .. base+A2 and scores them all now + lease:
 * {0, permits still available}; or {2, ms until the first id expires, -1
 * for none}.
 * Permits available go down by the ids actually added, and a release
 * gives back the ids actually removed: available plus ids is the size,
 * whatever ids a lost answer left behind. Releases publish the permits
 * available (Redisson's message), and return {0, subscribers} or -1 when
 * none of the ids was there. A name that is a lock (a hash) gets {3, its
 * kind} from 'a' and 'i' and -1 from 'r', changing nothing. */
static const char script_sem[] =
    "local K1, K2, K3 = KEYS[1], KEYS[2], KEYS[3]\n"
    "local op, n, b, P = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[6]\n"
    "local id = ARGV[5] .. ':'\n"
    "local ty = redis.call('type', K1).ok\n"
    "if ty == 'hash' then\n"
    "  if op == 'r' then return -1 end\n"
    "  local m = redis.call('hget', K1, 'mode')\n"
    "  return {3, m == 'read' and 1 or m == 'write' and 2 or 0}\n"
    "end\n"
    "if op == 'i' then\n"
    "  if ty ~= 'none' then return 0 end\n"
    "  redis.call('set', K1, n)\n"
    "  redis.call(P, K3, n)\n"
    "  return 1\n"
    "end\n"
    "if op == 'r' then\n"
    "  local removed = 0\n"
    "  for i = b + 1, b + n do removed = removed + redis.call('zrem', K2, id .. i) end\n"
    "  if removed == 0 then return -1 end\n"
    "  return {0, redis.call(P, K3, redis.call('incrby', K1, removed))}\n"
    "end\n"
    "local t = redis.call('time')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "for i = 1, b do\n"
    "  local s = redis.call('zscore', K2, id .. i)\n"
    "  if not s or tonumber(s) <= now then return {4, 0} end\n"
    "end\n"
    "local x = redis.call('zrangebyscore', K2, 0, now, 'limit', 0, 1000)\n"
    "if #x > 0 then\n"
    "  redis.call('zrem', K2, unpack(x))\n"
    "  local v = redis.call('incrby', K1, #x)\n"
    "  if v > 0 then redis.call(P, K3, v) end\n"
    "end\n"
    "local avail = tonumber(redis.call('get', K1)) or -1\n"
    "if avail < n then\n"
    "  local e = redis.call('zrange', K2, 0, 0, 'withscores')\n"
    "  if e[2] and tonumber(e[2]) < 922337203685477 then\n"
    "    return {2, math.max(0, tonumber(e[2]) - now)}\n"
    "  end\n"
    "  return {2, -1}\n"
    "end\n"
    "local added, till = 0, now + tonumber(ARGV[4])\n"
    "for i = 1, b + n do added = added + redis.call('zadd', K2, till, id .. i) end\n"
    "if added > 0 then avail = redis.call('decrby', K1, added) end\n"
    "local ttl = redis.call('pttl', K1)\n"
    "if ttl > 0 then redis.call('pexpire', K2, ttl) end\n"
    "return {0, avail}\n";

/* Fair locks in Redisson's RFairLock layout: an RLock hash (K1) whose
 * waiters queue in K2 (redisson_lock_queue:{K1}, a list of owner fields)
 * with K3 (redisson_lock_timeout:{K1}, a sorted set) saying when each
 * place ends (ms since the epoch); the lock goes to the queue's head
 * only, and a release wakes just it, on K4 .. ':' .. <its field> (K4
 * redisson_lock__channel:{K1}). K5 the fence counter, K6 (dlock_fair:{K1},
 * a set) the fields of the places that are dlockd's. A1 the op: 'a'
 * acquire or queue (keeping the owner's place A4 ms more, plus A5 for
 * each place ahead that is not dlockd's), 'o' acquire without queueing,
 * 'r' release all holds, 'd' one hold less (never the last), 'l' leave
 * the queue; A2 lease, A3 owner, P the publish command.
 *
 * Every op first drops the places at the head that have ended, as
 * Redisson's scripts do: a waiter that died (its dlockd or its Java
 * client) holds the queue up only until its place ends. dlockd keeps its
 * waiters' places alive by asking again while they wait, and takes them
 * out at once when they stop ('l', which also wakes the new head if the
 * lock is free). A grant is as LUA_ACQUIRE's; unlike Redisson's, it does
 * not shorten the other places (Redisson chains them, each waiter's its
 * predecessor's plus its wait; dlockd's are their own). But Redisson's
 * grants take their wait off every place, ours too: so a place of ours
 * lasts A5 (at least any Redisson client's wait) more for each Redisson
 * place ahead of it, which only such a grant can use up (a long queue,
 * over 64, is only read when it has more places than K6 has dlockd's:
 * with none of Redisson's, none is ahead). Replies as the
 * read/write script's; a waiter's {2, ttl} is the holder's lease, or when
 * the head's place ends if the lock is free, -1 unknown. */
static const char script_fair[] =
    "local K1, K2, K3, K4, K5, K6 = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]\n"
    "local op, A2, A3, A4, A5, P = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]\n"
    "local t = redis.call('time')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "while true do\n"
    "  local h = redis.call('lindex', K2, 0)\n"
    "  if not h then break end\n"
    "  local s = redis.call('zscore', K3, h)\n"
    "  if not s or tonumber(s) > now then break end\n"
    "  redis.call('zrem', K3, h)\n"
    "  redis.call('srem', K6, h)\n"
    "  redis.call('lpop', K2)\n"
    "end\n"
    "local wake = function()\n"
    "  local h = redis.call('lindex', K2, 0)\n"
    "  if h then return redis.call(P, K4 .. ':' .. h, '0') end\n"
    "  return 0\n"
    "end\n"
    "if op == 'l' then\n"
    "  redis.call('zrem', K3, A3)\n"
    "  redis.call('srem', K6, A3)\n"
    "  redis.call('lrem', K2, 0, A3)\n"
    "  if redis.call('exists', K1) == 0 then wake() end\n"
    "  return 0\n"
    "end\n"
    "local m = redis.pcall('hget', K1, 'mode')\n"
    "if type(m) == 'table' then\n"
    "  if redis.call('type', K1).ok ~= 'string' then error(m) end\n"
    "  m = 'sem'\n"
    "end\n"
    "if m then\n"
    "  if op == 'a' or op == 'o' then\n"
    "    return {3, m == 'read' and 1 or m == 'write' and 2 or 3}\n"
    "  end\n"
    "  return -1\n"
    "end\n"
    "if op == 'r' or op == 'd' then\n"
    "  local n = tonumber(redis.call('hget', K1, A3))\n"
    "  if not n then return -1 end\n"
    "  if op == 'd' then\n"
    "    if n > 1 then return redis.call('hincrby', K1, A3, -1) end\n"
    "    return n\n"
    "  end\n"
    "  redis.call('del', K1)\n"
    "  return {0, wake()}\n"
    "end\n"
    "if redis.call('exists', K1) == 0 then\n"
    "  local h = redis.call('lindex', K2, 0)\n"
    "  if not h or h == A3 then\n"
    "    if h then redis.call('lpop', K2) end\n"
    "    redis.call('zrem', K3, A3)\n"
    "    redis.call('srem', K6, A3)\n"
    "    redis.call('hset', K1, A3, 1)\n"
    "    redis.call('pexpire', K1, A2)\n"
    "    local f = tonumber(redis.call('get', K5) or '0') + 1\n"
    "    local us = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "    if us > f then f = us end\n"
    "    redis.call('set', K5, string.format('%d', f))\n"
    "    return {0, f}\n"
    "  end\n"
    "elseif redis.call('hexists', K1, A3) == 1 then\n"
    "  local n = redis.call('hincrby', K1, A3, 1)\n"
    "  redis.call('pexpire', K1, A2)\n"
    "  return {1, n}\n"
    "end\n"
    "local ttl = redis.call('pttl', K1)\n"
    "if ttl < 0 then\n"
    "  local h = redis.call('lindex', K2, 0)\n"
    "  local s = h and redis.call('zscore', K3, h)\n"
    "  ttl = s and math.max(0, tonumber(s) - now) or -1\n"
    "end\n"
    "if op == 'a' then\n"
    "  local ahead, queued, n = 0, false, redis.call('llen', K2)\n"
    "  if n > 0 and (n <= 64 or n > redis.call('scard', K6)) then\n"
    "    for _, f in ipairs(redis.call('lrange', K2, 0, -1)) do\n"
    "      if f == A3 then queued = true break end\n"
    "      if redis.call('sismember', K6, f) == 0 then ahead = ahead + 1 end\n"
    "    end\n"
    "  else\n"
    "    queued = redis.call('zscore', K3, A3) ~= false\n"
    "  end\n"
    "  redis.call('sadd', K6, A3)\n"
    "  local e = tonumber(A4) + ahead * tonumber(A5)\n"
    "  redis.call('zadd', K3, now + e, A3)\n"
    "  if not queued then redis.call('rpush', K2, A3) end\n"
    "  if redis.call('pttl', K6) < e then redis.call('pexpire', K6, e) end\n"
    "end\n"
    "return {2, ttl}\n";

const char *const scripts_text[SCRIPT_COUNT] = {
    script_acquire, script_release, script_status, script_force, script_ops, script_renew,
    script_who, script_register, script_ops_any, script_renew_any, script_rw, script_sem,
    script_fair,
};

/* ---- calls ---------------------------------------------------------------- */

int scripts_loaded(script_id_t id, unsigned flags) {
    return (id != SCRIPT_OPS_ANY && id != SCRIPT_RENEW_ANY) || (flags & SCRIPTS_F_ANY_SLOT);
}

int scripts_batchable(const backend_op_t *op) {
    if (op->mode == BACKEND_READ || op->mode == BACKEND_WRITE)
        return op->kind == BACKEND_RENEW || op->kind == BACKEND_ACQUIRE ||
               op->kind == BACKEND_RELEASE || op->kind == BACKEND_DROP;
    if (op->mode != BACKEND_MUTEX) return op->kind == BACKEND_RENEW;
    return op->kind == BACKEND_ACQUIRE || op->kind == BACKEND_RELEASE ||
           op->kind == BACKEND_DROP || op->kind == BACKEND_RENEW || op->kind == BACKEND_FENCE;
}

script_id_t scripts_choose(backend_op_t *const *ops, size_t n, unsigned flags) {
    int any = (flags & SCRIPTS_F_ANY_SLOT) != 0;
    if (n == 1 && any && scripts_batchable(ops[0])) return SCRIPT_OPS_ANY;
    if (n == 1 && ops[0]->mode == BACKEND_SEM &&
        (ops[0]->kind == BACKEND_ACQUIRE || ops[0]->kind == BACKEND_RELEASE ||
         ops[0]->kind == BACKEND_SEMINIT))
        return SCRIPT_SEM;
    if (n == 1 && ops[0]->mode == BACKEND_FAIR &&
        (ops[0]->kind == BACKEND_ACQUIRE || ops[0]->kind == BACKEND_RELEASE ||
         ops[0]->kind == BACKEND_DROP || ops[0]->kind == BACKEND_LEAVE))
        return SCRIPT_FAIR;
    if (n == 1 && ops[0]->mode != BACKEND_MUTEX &&
        (ops[0]->kind == BACKEND_ACQUIRE || ops[0]->kind == BACKEND_RELEASE ||
         ops[0]->kind == BACKEND_DROP))
        return SCRIPT_RW;
    if (n == 1 && ops[0]->mode != BACKEND_MUTEX && ops[0]->kind == BACKEND_RENEW)
        return SCRIPT_OPS;
    /* A quorum's acquires carry its fence rule, which only the batch
     * script takes; a raise has no script of its own. */
    if (n == 1 && (ops[0]->kind == BACKEND_FENCE ||
                   (ops[0]->kind == BACKEND_ACQUIRE && (flags & SCRIPTS_F_QUORUM))))
        return SCRIPT_OPS;
    if (n > 1) {
        for (size_t i = 0; i < n; i++)
            if (ops[i]->kind != BACKEND_RENEW || ops[i]->mode != BACKEND_MUTEX ||
                ops[i]->lease_ms != ops[0]->lease_ms)
                return any ? SCRIPT_OPS_ANY : SCRIPT_OPS;
        return any ? SCRIPT_RENEW_ANY : SCRIPT_RENEW;
    }
    switch (ops[0]->kind) {
    case BACKEND_ACQUIRE: return SCRIPT_ACQUIRE;
    case BACKEND_RELEASE:
    case BACKEND_DROP: return SCRIPT_RELEASE;
    case BACKEND_STATUS: return SCRIPT_STATUS;
    case BACKEND_FORCE: return SCRIPT_FORCE;
    case BACKEND_WHO: return SCRIPT_WHO;
    default: return SCRIPT_OPS;
    }
}

/* One RESP header or bulk string; room was reserved by the caller. */
static size_t put_head(char *p, char kind, size_t n) {
    size_t k = 0;
    p[k++] = kind;
    k += keys_u64(p + k, n);
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

static size_t put_bulk(char *p, const char *s, size_t len) {
    size_t k = put_head(p, '$', len);
    memcpy(p + k, s, len);
    k += len;
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

/* Room one argument of len bytes takes at most. */
#define ARG_ROOM(len) (1 + 20 + 2 + (len) + 2)
/* Room any one operation's arguments take at most (SCRIPT_FORCE's and
 * SCRIPT_FAIR's keys: the lock and five companions). */
#define OP_ROOM (ARG_ROOM(KEYS_KEY_MAX) + 5 * ARG_ROOM(KEYS_COMPANION_MAX) + \
                 ARG_ROOM(24) + ARG_ROOM(KEYS_FIELD_MAX) + ARG_ROOM(1))
/* The publish command releases use: classic or sharded pub/sub. */
#define PUB_CMD(flags) ((flags) & SCRIPTS_F_SHARDED ? "spublish" : "publish")

/* An operation's two keys: the lock, and its token, channel or forced
 * marker (the companion SCRIPT_OPS passes; SCRIPT_FORCE takes two). */
/* A companion of key as a bulk string, written in place: the same bytes
 * as keys_companion() gives, without a copy in between. */
static size_t put_companion(char *p, const char *kind, size_t kindlen, const char *key,
                            size_t klen, int braces) {
    size_t k = put_head(p, '$', kindlen + 1 + klen + (braces ? 2 : 0));
    memcpy(p + k, kind, kindlen);
    k += kindlen;
    p[k++] = ':';
    if (braces) p[k++] = '{';
    memcpy(p + k, key, klen);
    k += klen;
    if (braces) p[k++] = '}';
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

/* A suffix companion of key (Redisson's suffixName): "{key}:kind", or
 * "key:kind" when the key has a '{' already. */
static size_t put_suffix(char *p, const char *kind, size_t kindlen, const char *key, size_t klen,
                         int braces) {
    size_t k = put_head(p, '$', klen + (braces ? 2 : 0) + 1 + kindlen);
    if (braces) p[k++] = '{';
    memcpy(p + k, key, klen);
    k += klen;
    if (braces) p[k++] = '}';
    p[k++] = ':';
    memcpy(p + k, kind, kindlen);
    k += kindlen;
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

#define KIND(s) (s), (sizeof(s) - 1)

static size_t put_keys(char *p, const backend_op_t *op, script_id_t id, const char *prefix,
                       size_t plen, unsigned flags) {
    /* The lock key, prefix and name, straight into place; its companion
     * copies it from there. */
    size_t klen = plen + op->len, k = put_head(p, '$', klen);
    char *key = p + k;
    memcpy(key, prefix, plen);
    memcpy(key + plen, op->name, op->len);
    k += klen;
    p[k++] = '\r';
    p[k++] = '\n';
    int braces = memchr(key, '{', klen) == NULL;
    if (id == SCRIPT_STATUS) return k + put_suffix(p + k, KIND(KEYS_SEM_TIMEOUT), key, klen, braces);
    if (id == SCRIPT_SEM) {
        k += put_suffix(p + k, KIND(KEYS_SEM_TIMEOUT), key, klen, braces);
        return k + put_companion(p + k, KIND(KEYS_SEM_CHANNEL), key, klen, braces);
    }
    if (id == SCRIPT_RW) {
        k += put_companion(p + k, KIND(KEYS_TOKEN), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_RW_CHANNEL), key, klen, braces);
        /* the timeout keys' prefix: "{key}", or the key as it is */
        k += put_head(p + k, '$', klen + (braces ? 2 : 0));
        if (braces) p[k++] = '{';
        memcpy(p + k, key, klen);
        k += klen;
        if (braces) p[k++] = '}';
        p[k++] = '\r';
        p[k++] = '\n';
        return k;
    }
    if (id == SCRIPT_WHO) {
        if (flags & SCRIPTS_F_NO_REGISTRY) return k;
        k += put_head(p + k, '$', plen + sizeof(KEYS_REGISTRY) - 1);
        memcpy(p + k, prefix, plen);
        memcpy(p + k + plen, KEYS_REGISTRY, sizeof(KEYS_REGISTRY) - 1);
        k += plen + sizeof(KEYS_REGISTRY) - 1;
        p[k++] = '\r';
        p[k++] = '\n';
        return k;
    }
    if (id == SCRIPT_FORCE) {
        k += put_companion(p + k, KIND(KEYS_CHANNEL), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_FORCED), key, klen, braces);
        k += put_suffix(p + k, KIND(KEYS_SEM_TIMEOUT), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_SEM_CHANNEL), key, klen, braces);
        return k + put_companion(p + k, KIND(KEYS_QUEUE), key, klen, braces);
    }
    if (id == SCRIPT_FAIR) {
        k += put_companion(p + k, KIND(KEYS_QUEUE), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_QUEUE_TIMEOUT), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_CHANNEL), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_TOKEN), key, klen, braces);
        return k + put_companion(p + k, KIND(KEYS_FAIR_OWNERS), key, klen, braces);
    }
    if (op->mode == BACKEND_SEM) /* a renewal */
        return k + put_suffix(p + k, KIND(KEYS_SEM_TIMEOUT), key, klen, braces);
    if (op->kind == BACKEND_ACQUIRE || op->kind == BACKEND_FENCE)
        return k + put_companion(p + k, KIND(KEYS_TOKEN), key, klen, braces);
    if (op->kind == BACKEND_RENEW) return k + put_companion(p + k, KIND(KEYS_FORCED), key, klen, braces);
    if (op->mode == BACKEND_READ || op->mode == BACKEND_WRITE) /* a release or drop */
        return k + put_companion(p + k, KIND(KEYS_RW_CHANNEL), key, klen, braces);
    return k + put_companion(p + k, KIND(KEYS_CHANNEL), key, klen, braces);
}

/* LUA_RW's op for a read/write lock's acquire, release or drop. */
static char rw_letter(const backend_op_t *op) {
    static const char letters[][BACKEND_MODE_COUNT] = {
        [BACKEND_ACQUIRE] = {'a', 'r', 'w'}, [BACKEND_RELEASE] = {'r', 'R', 'W'},
        [BACKEND_DROP] = {'r', 'd', 'D'},
    };
    return letters[op->kind][op->mode];
}

/* An operation's arguments, in the order its script wants them: SCRIPT_OPS
 * takes kind, number, owner ('a' lease, 'n' lease, or 'r' all); the
 * acquire script lease, owner; the release script owner, all; status the
 * owner; force how long its marker stays. */
static size_t put_args(char *p, const backend_op_t *op, script_id_t id, const char *uuid,
                       unsigned flags) {
    char num[24], field[KEYS_FIELD_MAX];
    size_t nlen, flen = keys_owner_field(field, uuid, op->owner), k = 0;
    int release = op->kind == BACKEND_RELEASE || op->kind == BACKEND_DROP;
    if (release) {
        num[0] = op->kind == BACKEND_RELEASE ? '1' : '0';
        nlen = 1;
    } else if (op->kind == BACKEND_FENCE) {
        nlen = keys_u64(num, op->raise_to);
    } else {
        nlen = keys_u64(num, op->lease_ms);
    }
    switch (id) {
    case SCRIPT_OPS:
    case SCRIPT_OPS_ANY:
        if ((op->mode == BACKEND_READ || op->mode == BACKEND_WRITE) &&
            op->kind != BACKEND_RENEW) { /* 'x<op>' */
            char letter[2] = {'x', rw_letter(op)};
            k += put_bulk(p, letter, 2);
            k += put_bulk(p + k, num, keys_u64(num, op->lease_ms));
            return k + put_bulk(p + k, field, flen);
        }
        if (op->mode == BACKEND_SEM) { /* a renewal of c permits: 's<c>' */
            char letter[24];
            letter[0] = 's';
            k += put_bulk(p, letter, 1 + keys_u64(letter + 1, op->permits));
            k += put_bulk(p + k, num, nlen);
            return k + put_bulk(p + k, field, flen);
        }
        k += put_bulk(p,
                      op->kind == BACKEND_ACQUIRE ? (flags & SCRIPTS_F_QUORUM ? "q" : "a")
                      : op->kind == BACKEND_RENEW ? (op->mode == BACKEND_READ    ? "v"
                                                     : op->mode == BACKEND_WRITE ? "V"
                                                                                 : "n")
                      : op->kind == BACKEND_FENCE ? "f"
                                                  : "r",
                      1);
        k += put_bulk(p + k, num, nlen);
        return k + put_bulk(p + k, field, flen);
    case SCRIPT_ACQUIRE:
        k += put_bulk(p, num, nlen);
        return k + put_bulk(p + k, field, flen);
    case SCRIPT_RELEASE:
        k += put_bulk(p, field, flen);
        return k + put_bulk(p + k, num, nlen);
    case SCRIPT_RW: {
        char letter = rw_letter(op);
        k += put_bulk(p, &letter, 1);
        k += put_bulk(p + k, num, keys_u64(num, op->lease_ms));
        return k + put_bulk(p + k, field, flen);
    }
    case SCRIPT_SEM: {
        char letter = op->kind == BACKEND_ACQUIRE   ? 'a'
                      : op->kind == BACKEND_SEMINIT ? 'i'
                                                    : 'r';
        k += put_bulk(p, &letter, 1);
        k += put_bulk(p + k, num, keys_u64(num, op->permits));
        k += put_bulk(p + k, num, keys_u64(num, op->permit_base));
        k += put_bulk(p + k, num, keys_u64(num, op->lease_ms));
        return k + put_bulk(p + k, field, flen);
    }
    case SCRIPT_FAIR: {
        char letter = op->kind == BACKEND_ACQUIRE ? (op->once ? 'o' : 'a')
                      : op->kind == BACKEND_RELEASE ? 'r'
                      : op->kind == BACKEND_DROP    ? 'd'
                                                    : 'l';
        k += put_bulk(p, &letter, 1);
        k += put_bulk(p + k, num, keys_u64(num, op->lease_ms));
        k += put_bulk(p + k, field, flen);
        k += put_bulk(p + k, num, keys_u64(num, op->queue_ms));
        return k + put_bulk(p + k, num, keys_u64(num, op->queue_foreign_ms));
    }
    case SCRIPT_WHO:
        return 0;
    case SCRIPT_STATUS:
    case SCRIPT_RENEW: /* its lease went once, before the owners */
    case SCRIPT_RENEW_ANY:
        return put_bulk(p, field, flen);
    default: /* SCRIPT_FORCE */
        return put_bulk(p, num, keys_u64(num, SCRIPTS_FORCED_MARK_MS));
    }
}

int scripts_format(buf_t *out, script_id_t id, const char *sha, backend_op_t *const *ops,
                   size_t n, const char *prefix, const char *uuid, unsigned flags) {
    size_t start = out->len, numkeys, argc, k, plen = strlen(prefix);
    int any = id == SCRIPT_OPS_ANY || id == SCRIPT_RENEW_ANY;
    char nk[24];
    char *p;

    switch (id) {
    case SCRIPT_OPS: numkeys = 2 * n; argc = 3 + 5 * n + 1; break;
    case SCRIPT_OPS_ANY: numkeys = 0; argc = 3 + 1 + 5 * n + 1; break;
    case SCRIPT_RENEW: numkeys = 2 * n; argc = 3 + 3 * n + 1; break;
    case SCRIPT_RENEW_ANY: numkeys = 0; argc = 3 + 1 + 3 * n + 1; break;
    case SCRIPT_STATUS: numkeys = 2; argc = 6; break;
    case SCRIPT_WHO:
        numkeys = flags & SCRIPTS_F_NO_REGISTRY ? 1 : 2;
        argc = 3 + numkeys;
        break;
    case SCRIPT_FORCE: numkeys = 6; argc = 11; break;
    case SCRIPT_FAIR: numkeys = 6; argc = 3 + 6 + 6; break;
    case SCRIPT_RW: numkeys = 4; argc = 3 + 4 + 4; break;
    case SCRIPT_SEM: numkeys = 3; argc = 3 + 3 + 6; break;
    default: numkeys = 2; argc = 8; break; /* acquire 7: no publish command */
    }
    if (id == SCRIPT_ACQUIRE) argc = 7;
    /* Room is reserved one operation at a time, so that a batch takes
     * about what it needs; the keys of all come first, then the other
     * arguments. The _ANY layouts pass the keys in ARGV, after their
     * count. */
    p = buf_reserve(out, 1 + 20 + 2 + ARG_ROOM(7) + ARG_ROOM(SCRIPTS_SHA_LEN) + 2 * ARG_ROOM(20));
    if (p == NULL) goto nomem;
    k = put_head(p, '*', argc);
    k += put_bulk(p + k, "EVALSHA", 7);
    k += put_bulk(p + k, sha, SCRIPTS_SHA_LEN);
    k += put_bulk(p + k, nk, keys_u64(nk, numkeys));
    if (any) k += put_bulk(p + k, nk, keys_u64(nk, n));
    buf_commit(out, k);
    for (size_t i = 0; i < n; i++) {
        if ((p = buf_reserve(out, OP_ROOM)) == NULL) goto nomem;
        buf_commit(out, put_keys(p, ops[i], id, prefix, plen, flags));
    }
    if (id == SCRIPT_RENEW || id == SCRIPT_RENEW_ANY) {
        char lease[24];
        if ((p = buf_reserve(out, ARG_ROOM(24))) == NULL) goto nomem;
        buf_commit(out, put_bulk(p, lease, keys_u64(lease, ops[0]->lease_ms)));
    }
    for (size_t i = 0; i < n; i++) {
        if ((p = buf_reserve(out, OP_ROOM)) == NULL) goto nomem;
        buf_commit(out, put_args(p, ops[i], id, uuid, flags));
    }
    if (id == SCRIPT_OPS || id == SCRIPT_OPS_ANY || id == SCRIPT_RELEASE ||
        id == SCRIPT_FORCE || id == SCRIPT_RW || id == SCRIPT_SEM || id == SCRIPT_FAIR) {
        if ((p = buf_reserve(out, ARG_ROOM(8))) == NULL) goto nomem;
        const char *pub = PUB_CMD(flags);
        buf_commit(out, put_bulk(p, pub, strlen(pub)));
    }
    return 0;
nomem:
    out->len = start;
    return -1;
}

/* ---- replies ---------------------------------------------------------------- */

static int is_int(const redisReply *r) {
    return r != NULL && r->type == REDIS_REPLY_INTEGER;
}

static int is_pair(const redisReply *r) {
    return r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_int(r->element[0]) &&
           is_int(r->element[1]);
}

/* An acquire's (kind, value) pair into res; -1 if kind is unknown. */
static int set_acquire(backend_result_t *res, long long kind, long long v) {
    res->outcome = (backend_outcome_t)kind;
    switch (kind) {
    case BACKEND_GRANTED: res->fence = (uint64_t)v; return 0;
    case BACKEND_REENTERED: res->holds = v; return 0;
    case BACKEND_TAKEN: res->ttl_ms = v; return 0;
    case BACKEND_WRONG_KIND: res->held = (backend_mode_t)v; return 0;
    case BACKEND_HOLD_GONE: return 0;
    default: return -1;
    }
}

static void set_renewal(backend_result_t *res, long long v) {
    res->renewal = v == 1 ? BACKEND_RENEWED : v == 2 ? BACKEND_FORCED : BACKEND_GONE;
}

/* The batch script's one line per operation. An operation's own error
 * fails it alone; the error text must stay valid during its callback, so
 * it points into the reply, which outlives the callbacks. */
static int decode_ops(backend_op_t *const *ops, size_t n, redisReply *r, char *err,
                      size_t errlen) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * n) {
        snprintf(err, errlen, "unexpected reply (type %d) from the batch script", r->type);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        backend_result_t *res = &ops[i]->res;
        const redisReply *x = r->element[2 * i], *y = r->element[2 * i + 1];
        int pair = is_int(y);
        long long a = is_int(x) ? x->integer : 0, v = pair ? y->integer : 0;
        memset(res, 0, sizeof(*res));
        if (x->type == REDIS_REPLY_STRING) { /* the error's text */
            res->status = BACKEND_FAILED;
            res->error = x->str;
            continue;
        }
        if (!is_int(x)) {
            res->status = BACKEND_FAILED;
            res->error = "bad result from the batch script";
            continue;
        }
        switch (ops[i]->kind) {
        case BACKEND_ACQUIRE:
            if (!pair || set_acquire(res, a, v) != 0) {
                res->status = BACKEND_FAILED;
                res->error = "bad acquire result from the batch script";
            }
            break;
        case BACKEND_RENEW: set_renewal(res, a); break;
        case BACKEND_FENCE: res->holds = a; break;
        default: /* release, drop */
            res->holds = a;
            if (pair) res->others_waiting = (int)(v > 1000000 ? 1000000 : v);
            break;
        }
    }
    return 0;
}

int scripts_format_register(buf_t *out, const char *sha, const char *prefix, const char *uuid,
                            const char *name) {
    size_t plen = strlen(prefix), ulen = strlen(uuid), nlen = strlen(name);
    char stale[24];
    size_t slen = keys_u64(stale, SCRIPTS_REGISTRY_STALE_MS);
    char *p = buf_reserve(out, 1 + 20 + 2 + ARG_ROOM(7) + ARG_ROOM(SCRIPTS_SHA_LEN) + ARG_ROOM(1) +
                                   ARG_ROOM(plen + sizeof(KEYS_REGISTRY)) + ARG_ROOM(ulen) +
                                   ARG_ROOM(nlen) + ARG_ROOM(slen));
    if (p == NULL) return -1;
    size_t k = put_head(p, '*', 7);
    k += put_bulk(p + k, "EVALSHA", 7);
    k += put_bulk(p + k, sha, SCRIPTS_SHA_LEN);
    k += put_bulk(p + k, "1", 1);
    k += put_head(p + k, '$', plen + sizeof(KEYS_REGISTRY) - 1);
    memcpy(p + k, prefix, plen);
    memcpy(p + k + plen, KEYS_REGISTRY, sizeof(KEYS_REGISTRY) - 1);
    k += plen + sizeof(KEYS_REGISTRY) - 1;
    p[k++] = '\r';
    p[k++] = '\n';
    k += put_bulk(p + k, uuid, ulen);
    k += put_bulk(p + k, name, nlen);
    k += put_bulk(p + k, stale, slen);
    buf_commit(out, k);
    return 0;
}

int scripts_decode(script_id_t id, backend_op_t *const *ops, size_t n, redisReply *r,
                   char *err, size_t errlen) {
    if (id == SCRIPT_OPS || id == SCRIPT_OPS_ANY) return decode_ops(ops, n, r, err, errlen);
    if (id == SCRIPT_RENEW || id == SCRIPT_RENEW_ANY) {
        if (r->type != REDIS_REPLY_STRING || r->len != n) {
            snprintf(err, errlen, "unexpected reply (type %d) from the renew script", r->type);
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            memset(&ops[i]->res, 0, sizeof(ops[i]->res));
            if (r->str[i] == 'E') {
                ops[i]->res.status = BACKEND_FAILED;
                ops[i]->res.error = SCRIPTS_NOT_HERE;
            } else {
                set_renewal(&ops[i]->res, r->str[i] - '0');
            }
        }
        return 0;
    }
    backend_result_t *res = &ops[0]->res;
    memset(res, 0, sizeof(*res));
    switch (id) {
    case SCRIPT_ACQUIRE:
        if (is_pair(r) &&
            set_acquire(res, r->element[0]->integer, r->element[1]->integer) == 0)
            return 0;
        break;
    case SCRIPT_RELEASE:
        if (is_pair(r)) {
            res->holds = r->element[0]->integer;
            long long v = r->element[1]->integer;
            res->others_waiting = (int)(v > 1000000 ? 1000000 : v);
            return 0;
        }
        if (is_int(r)) {
            res->holds = r->integer;
            return 0;
        }
        break;
    case SCRIPT_STATUS:
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 5) {
            for (size_t i = 0; i < 5; i++)
                if (!is_int(r->element[i])) goto bad;
            res->ttl_ms = r->element[0]->integer;
            res->holds = r->element[1]->integer;
            res->held = (backend_mode_t)r->element[2]->integer;
            res->holders = r->element[3]->integer;
            /* a write hold's count: the mode asked about decides */
            if (ops[0]->mode == BACKEND_WRITE) res->holds = r->element[4]->integer;
            if (res->held == BACKEND_WRITE) res->holders = 1;
            return 0;
        }
        break;
    case SCRIPT_FORCE:
        if (is_int(r)) {
            res->removed = r->integer != 0;
            return 0;
        }
        break;
    case SCRIPT_WHO:
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[0]->type == REDIS_REPLY_INTEGER &&
            r->element[1]->type == REDIS_REPLY_STRING &&
            r->element[2]->type == REDIS_REPLY_STRING && ops[0]->who != NULL) {
            backend_who_t *w = ops[0]->who;
            const char *entry = strchr(r->element[2]->str, ' '); /* after "<seen ms> " */
            res->ttl_ms = r->element[0]->integer;
            if (res->ttl_ms == -3) res->held = BACKEND_SEM;
            snprintf(w->owner, sizeof(w->owner), "%s", r->element[1]->str);
            snprintf(w->daemon, sizeof(w->daemon), "%s", entry ? entry + 1 : "");
            return 0;
        }
        break;
    case SCRIPT_SEM:
    case SCRIPT_FAIR:
    case SCRIPT_RW:
        /* an acquire's (or SEMINIT's refusal) pair; a release's pair, or
         * holds left (SEMINIT: 1 or 0) */
        if (is_pair(r) && (ops[0]->kind == BACKEND_ACQUIRE || ops[0]->kind == BACKEND_SEMINIT)) {
            if (set_acquire(res, r->element[0]->integer, r->element[1]->integer) == 0) return 0;
        } else if (is_pair(r) && ops[0]->kind != BACKEND_ACQUIRE) {
            res->holds = r->element[0]->integer;
            long long v = r->element[1]->integer;
            res->others_waiting = (int)(v > 1000000 ? 1000000 : v);
            return 0;
        } else if (is_int(r) && ops[0]->kind != BACKEND_ACQUIRE) {
            res->holds = r->integer;
            return 0;
        }
        break;
    default:
        break;
    }
bad:
    snprintf(err, errlen, "unexpected reply type %d from a script", r->type);
    return -1;
}
