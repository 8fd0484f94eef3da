-- SCRIPT_ELECT: one op on an election. K1 is the name's key, an RLock hash
-- whose one field is the leader's owner field (so the watchdog's renewals,
-- STATUS, WHO and FORCEUNLOCK treat the leader as a lock's holder); K2
-- (dlock_elect_queue:{K1}, a list of owner fields) the candidates in the
-- order they came, K3 (dlock_elect_timeout:{K1}, a sorted set) when each
-- place ends (ms since the epoch), K4 (redisson_lock__channel:{K1}) the
-- channel every change is published on, K5 (redisson_lock_token:{K1}) the
-- fence counter, K6 (dlock_leader:{K1}, a hash: owner, fence, value) the
-- leader's record, which counts only while K1 holds its owner.
-- ARGV: the op: 'a' campaign (taking or keeping a place A4 ms), 'o' try
-- without a place, 'r' resign, 'd' one hold less (never the last), 'l'
-- leave the queue, 'g' the leader now; A2 lease ms, A3 owner field, A4,
-- A5 the value, P the publish command.
--   redis-cli --eval build/gen/lua/elect.lua myelection \
--     'dlock_elect_queue:{myelection}' 'dlock_elect_timeout:{myelection}' \
--     'redisson_lock__channel:{myelection}' 'redisson_lock_token:{myelection}' \
--     'dlock_leader:{myelection}' , a 30000 me:1 30000 10.0.0.5:8080 publish
--
-- Every op first drops the places at the head that have ended: a dead
-- daemon's candidates hold the line up only until their places end. The
-- leadership goes to the queue's head only (or to anyone when nobody
-- waits). Every grant and every release publishes "<fence> <value>" or
-- "0" on K4, which wakes the waiters and tells the observers; a lease that
-- runs out publishes nothing (dlockd reads again when it ends). A grant's
-- fence is as a lock's: above the counter and above TIME in microseconds,
-- so it rises across a failover that lost the counter. Replies as
-- fair.lua's; 'g' answers {fence, value, pttl}, {0, '', -2} when nobody
-- leads, {-1, '', HELD_*} when K1 is another kind of lock.
--#include part/codes.lua
--#include part/kind.lua
local K1, K2, K3, K4, K5, K6 = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local op, A2, A3, A4, A5, P = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if op == 'g' then
  local k = kind(K1, 'e')
  if not k then return {0, '', -2} end
  if k ~= HELD_ELECT then return {-1, '', k} end
  local r = redis.call('hmget', K6, 'fence', 'value')
  return {tonumber(r[1]), r[2], redis.call('pttl', K1)}
end
while true do
  local h = redis.call('lindex', K2, 0)
  if not h then break end
  local s = redis.call('zscore', K3, h)
  if not s or tonumber(s) > now then break end
  redis.call('zrem', K3, h)
  redis.call('lpop', K2)
end
if op == 'l' then
  redis.call('zrem', K3, A3)
  redis.call('lrem', K2, 0, A3)
  if redis.call('exists', K1) == 0 then redis.call(P, K4, '0') end
  return 0
end
-- What K1 is (an election's when its holder is K6's owner): nil when nothing.
local k = kind(K1, 'e')
if k and k ~= HELD_ELECT then
  if op == 'a' or op == 'o' then return {WRONG_KIND, k} end
  return NOT_HELD
end
if op == 'r' or op == 'd' then
  local n = tonumber(redis.call('hget', K1, A3))
  if not n then return NOT_HELD end
  if op == 'd' then
    if n > 1 then return redis.call('hincrby', K1, A3, -1) end
    return n
  end
  redis.call('del', K1, K6)
  return {0, redis.call(P, K4, '0')}
end
if not k then
  local h = redis.call('lindex', K2, 0)
  if not h or h == A3 then
    if h then redis.call('lpop', K2) end
    redis.call('zrem', K3, A3)
    redis.call('hset', K1, A3, 1)
    redis.call('pexpire', K1, A2)
    local f = tonumber(redis.call('get', K5) or '0') + 1
    local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if us > f then f = us end
    local fs = string.format('%d', f)
    redis.call('set', K5, fs)
    redis.call('del', K6)
    redis.call('hset', K6, 'owner', A3, 'fence', fs, 'value', A5)
    redis.call(P, K4, fs .. ' ' .. A5)
    return {GRANTED, f}
  end
elseif redis.call('hexists', K1, A3) == 1 then
  redis.call('pexpire', K1, A2)
  return {REENTERED, tonumber(redis.call('hget', K1, A3))}
end
local ttl = redis.call('pttl', K1)
if ttl < 0 then
  local h = redis.call('lindex', K2, 0)
  local s = h and redis.call('zscore', K3, h)
  ttl = s and math.max(0, tonumber(s) - now) or -1
end
if op == 'a' then
  local e = tonumber(A4)
  if not redis.call('zscore', K3, A3) then redis.call('rpush', K2, A3) end
  redis.call('zadd', K3, now + e, A3)
  if redis.call('pttl', K2) < e then redis.call('pexpire', K2, e) end
  if redis.call('pttl', K3) < e then redis.call('pexpire', K3, e) end
end
return {TAKEN, ttl}
