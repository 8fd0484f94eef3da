-- SCRIPT_STATUS: a lock's (or semaphore's) state, for one owner. Reads only.
-- KEYS: the lock hash (or semaphore), a semaphore's permit ids.
-- ARGV: owner field.
--   redis-cli --eval build/gen/lua/status.lua mylock '{mylock}:timeout' , me:1
--
-- Replies {pttl, this owner's holds, what is held (a HELD_ code of
-- part/kind.lua: a plain lock's for a lock's hash, or nothing there),
-- readers (a semaphore: permits available, counting expired ones, which
-- the next acquire takes back), this owner's write holds}; a plain lock's
-- holds are its owner field's, a read/write lock's this owner's read
-- holds.
--#include part/codes.lua
--#include part/kind.lua
local h = held(KEYS[1])
if h == HELD_SEM then
  local c = redis.call('time')
  local now = tonumber(c[1]) * 1000 + math.floor(tonumber(c[2]) / 1000)
  local v = (tonumber(redis.call('get', KEYS[1])) or 0) +
            redis.call('zcount', KEYS[2], 0, now)
  return {redis.call('pttl', KEYS[1]), 0, HELD_SEM, v, 0}
end
local t = redis.call('pttl', KEYS[1])
-- another kind, whose key is no lock's hash: only what it is
if h ~= HELD_LOCK and h ~= HELD_READ and h ~= HELD_WRITE then return {t, 0, h, 0, 0} end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if h == HELD_LOCK then return {t, n, HELD_LOCK, 0, 0} end
local readers = 0
for _, k in ipairs(redis.call('hkeys', KEYS[1])) do
  if k ~= 'mode' and not string.find(k, ':write$') then readers = readers + 1 end
end
local w = tonumber(redis.call('hget', KEYS[1], ARGV[1] .. ':write') or '0')
return {t, n, h, readers, w}
