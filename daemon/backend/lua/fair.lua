-- SCRIPT_FAIR: one op on a fair lock in Redisson's RFairLock layout: an
-- RLock hash (K1) whose waiters queue in K2 (redisson_lock_queue:{K1}, a
-- list of owner fields) with K3 (redisson_lock_timeout:{K1}, a sorted set)
-- saying when each place ends (ms since the epoch); the lock goes to the
-- queue's head only, and a release wakes just it, on K4 .. ':' .. <its
-- field> (K4 redisson_lock__channel:{K1}). K5 the fence counter, K6
-- (dlock_fair:{K1}, a set) the fields of the places that are dlockd's.
-- ARGV: the op: 'a' acquire or queue (keeping the owner's place A4 ms
-- more, plus A5 for each place ahead that is not dlockd's), 'o' acquire
-- without queueing, 'r' release all holds, 'd' one hold less (never the
-- last), 'l' leave the queue; A2 lease ms, A3 owner field, A4, A5, P the
-- publish command.
--   redis-cli --eval build/gen/lua/fair.lua myfair 'redisson_lock_queue:{myfair}' \
--     'redisson_lock_timeout:{myfair}' 'redisson_lock__channel:{myfair}' \
--     'redisson_lock_token:{myfair}' 'dlock_fair:{myfair}' , a 30000 me:1 60000 5000 publish
--
-- Every op first drops the places at the head that have ended, as
-- Redisson's scripts do: a waiter that died (its dlockd or its Java
-- client) holds the queue up only until its place ends. dlockd keeps its
-- waiters' places alive by asking again while they wait, and takes them
-- out at once when they stop ('l', which also wakes the new head if the
-- lock is free). A grant is as part/acquire.lua's, and wakes the new head
-- too, so that it waits for this holder's lease; unlike Redisson's, it
-- does not shorten the other places (Redisson chains them, each waiter's
-- its predecessor's plus its wait; dlockd's are their own). But Redisson's
-- grants take their wait off every place, ours too: so a place of ours
-- lasts A5 (at least any Redisson client's wait) more for each Redisson
-- place ahead of it, which only such a grant can use up (a long queue,
-- over 64, is only read when it has more places than K6 has dlockd's:
-- with none of Redisson's, none is ahead). Replies as rw.lua's; a
-- waiter's {2, ttl} is the holder's lease, or when the head's place ends
-- if the lock is free, -1 unknown.
--#include part/codes.lua
--#include part/kind.lua
local K1, K2, K3, K4, K5, K6 = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local op, A2, A3, A4, A5, P = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
  local h = redis.call('lindex', K2, 0)
  if not h then break end
  local s = redis.call('zscore', K3, h)
  if not s or tonumber(s) > now then break end
  redis.call('zrem', K3, h)
  redis.call('srem', K6, h)
  redis.call('lpop', K2)
end
local wake = function()
  local h = redis.call('lindex', K2, 0)
  if h then return redis.call(P, K4 .. ':' .. h, '0') end
  return 0
end
if op == 'l' then
  redis.call('zrem', K3, A3)
  redis.call('srem', K6, A3)
  redis.call('lrem', K2, 0, A3)
  if redis.call('exists', K1) == 0 then wake() end
  return 0
end
local as = held(K1)
if as ~= HELD_LOCK then
  if op == 'a' or op == 'o' then return {WRONG_KIND, as} end
  return NOT_HELD
end
if op == 'r' or op == 'd' then
  local n = tonumber(redis.call('hget', K1, A3))
  if not n then return NOT_HELD end
  if op == 'd' then
    if n > 1 then return redis.call('hincrby', K1, A3, -1) end
    return n
  end
  redis.call('del', K1)
  return {0, wake()}
end
if redis.call('exists', K1) == 0 then
  local h = redis.call('lindex', K2, 0)
  if not h or h == A3 then
    if h then redis.call('lpop', K2) end
    redis.call('zrem', K3, A3)
    redis.call('srem', K6, A3)
    redis.call('hset', K1, A3, 1)
    redis.call('pexpire', K1, A2)
    local f = tonumber(redis.call('get', K5) or '0') + 1
    local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if us > f then f = us end
    redis.call('set', K5, string.format('%d', f))
    -- The next place's waiter may have asked while the lock was free and
    -- heard the head's place's end as its wait: woken, it asks again and
    -- learns this holder's lease (an expiry publishes nothing).
    if h then wake() end
    return {GRANTED, f}
  end
elseif redis.call('hexists', K1, A3) == 1 then
  local n = redis.call('hincrby', K1, A3, 1)
  redis.call('pexpire', K1, A2)
  return {REENTERED, n}
end
local ttl = redis.call('pttl', K1)
if ttl < 0 then
  local h = redis.call('lindex', K2, 0)
  local s = h and redis.call('zscore', K3, h)
  ttl = s and math.max(0, tonumber(s) - now) or -1
end
if op == 'a' then
  local ahead, queued, n = 0, false, redis.call('llen', K2)
  if n > 0 and (n <= 64 or n > redis.call('scard', K6)) then
    for _, f in ipairs(redis.call('lrange', K2, 0, -1)) do
      if f == A3 then queued = true break end
      if redis.call('sismember', K6, f) == 0 then ahead = ahead + 1 end
    end
  else
    queued = redis.call('zscore', K3, A3) ~= false
  end
  redis.call('sadd', K6, A3)
  local e = tonumber(A4) + ahead * tonumber(A5)
  redis.call('zadd', K3, now + e, A3)
  if not queued then redis.call('rpush', K2, A3) end
  if redis.call('pttl', K6) < e then redis.call('pexpire', K6, e) end
end
return {TAKEN, ttl}
