-- SCRIPT_FORCE: removes a lock whoever holds it, leaves a marker naming
-- the owner so its daemon can say 'forced', and wakes its waiters: a
-- plain lock's on its channel, a fair lock's first on its own, a
-- read/write lock's on the read/write channel (as Redisson's write lock's
-- forceUnlock). A semaphore gets every permit back (its holders find
-- theirs gone). 1 removed, 0 nothing there.
-- KEYS: the lock hash, its channel, its forced marker, a semaphore's
-- permit ids and channel, a fair lock's queue, a read/write lock's channel.
-- ARGV: how long the marker outlives the lock (ms), the publish command.
--   redis-cli --eval daemon/backend/lua/force.lua mylock 'redisson_lock__channel:{mylock}' \
--     'dlock_forced:{mylock}' '{mylock}:timeout' 'redisson_sc:{mylock}' \
--     'redisson_lock_queue:{mylock}' 'redisson_rwlock:{mylock}' , 60000 publish
--#include part/kind.lua
local h = held(KEYS[1])
if h == HELD_SEM then
  local n = redis.call('zcard', KEYS[4])
  if n == 0 then return 0 end
  redis.call('del', KEYS[4])
  redis.call(ARGV[2], KEYS[5], redis.call('incrby', KEYS[1], n))
  return 1
end
local rw = h == HELD_READ or h == HELD_WRITE
-- another kind, whose key is no lock's hash: nothing a holder holds
if h ~= HELD_LOCK and not rw then return 0 end
local f = redis.call('hkeys', KEYS[1])
if #f == 0 then return 0 end
local t = redis.call('pttl', KEYS[1])
if t < 0 then t = 0 end
local who = first_holder(f)
redis.call('set', KEYS[3], who or '', 'px', t + tonumber(ARGV[1]))
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], '0')
if rw then redis.call(ARGV[2], KEYS[7], '0') end
local nx = redis.call('lindex', KEYS[6], 0)
if nx then redis.call(ARGV[2], KEYS[2] .. ':' .. nx, '0') end
return 1
