-- SCRIPT_SEM: one op on a semaphore in Redisson's RPermitExpirableSemaphore
-- layout (its renewals go in the batch script: part/sem_renew.lua).
-- KEYS: K1 the semaphore, a string: the permits available; K2 its permit
-- ids' sorted set ({K1}:timeout), each id scored by when it expires (ms
-- since the epoch, Redis TIME; Redisson's non-expiring ids have
-- 922337203685477); K3 the channel (redisson_sc:{K1}).
-- ARGV: the op: 'a' acquire, 'r' release, 'i' set the permits unless set
-- (Redisson's trySetPermits: 1, or 0); permits (of 'i': the size); base:
-- the owner's ids are <owner>:1 .. <owner>:base already (an acquire's) or
-- the ids released are <owner>:base+1 .. <owner>:base+permits; the lease
-- ms; the owner field; the publish command.
--   redis-cli --eval build/gen/lua/sem.lua mysem '{mysem}:timeout' 'redisson_sc:{mysem}' \
--     , i 3 0 0 me:1 publish
--
-- An acquire first checks that the owner's earlier ids are all there
-- ({4, 0} and nothing changed when not: its permits were lost), takes back
-- expired ids as Redisson's acquire does, then, with the permits asked for
-- available, adds ids base+1 .. base+permits and scores them all now +
-- lease: {0, permits still available}; or {2, ms until the first id
-- expires, -1 for none}. Permits available go down by the ids actually
-- added, and a release gives back the ids actually removed: available plus
-- ids is the size, whatever ids a lost answer left behind. Releases
-- publish the permits available (Redisson's message), and return
-- {0, subscribers} or -1 when none of the ids was there. A name held as
-- another kind (a lock's hash: part/kind.lua) gets {3, its kind} from 'a'
-- and 'i' and -1 from 'r', changing nothing.
--#include part/codes.lua
--#include part/kind.lua
local K1, K2, K3 = KEYS[1], KEYS[2], KEYS[3]
local op, n, b, P = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[6]
local id = ARGV[5] .. ':'
local k = kind(K1)
if k and k ~= HELD_SEM then
  if op == 'r' then return NOT_HELD end
  return {WRONG_KIND, k}
end
if op == 'i' then
  if k then return 0 end
  redis.call('set', K1, n)
  fresh(K1)
  redis.call(P, K3, n)
  return 1
end
if op == 'r' then
  local removed = 0
  for i = b + 1, b + n do removed = removed + redis.call('zrem', K2, id .. i) end
  if removed == 0 then return NOT_HELD end
  return {0, redis.call(P, K3, redis.call('incrby', K1, removed))}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, b do
  local s = redis.call('zscore', K2, id .. i)
  if not s or tonumber(s) <= now then return {HOLD_GONE, 0} end
end
local x = redis.call('zrangebyscore', K2, 0, now, 'limit', 0, 1000)
if #x > 0 then
  redis.call('zrem', K2, unpack(x))
  local v = redis.call('incrby', K1, #x)
  if v > 0 then redis.call(P, K3, v) end
end
local avail = tonumber(redis.call('get', K1)) or -1
if avail < n then
  local e = redis.call('zrange', K2, 0, 0, 'withscores')
  if e[2] and tonumber(e[2]) < 922337203685477 then
    return {TAKEN, math.max(0, tonumber(e[2]) - now)}
  end
  return {TAKEN, -1}
end
local added, till = 0, now + tonumber(ARGV[4])
for i = 1, b + n do added = added + redis.call('zadd', K2, till, id .. i) end
if added > 0 then avail = redis.call('decrby', K1, added) end
local ttl = redis.call('pttl', K1)
if ttl > 0 then redis.call('pexpire', K2, ttl) end
return {GRANTED, avail}
