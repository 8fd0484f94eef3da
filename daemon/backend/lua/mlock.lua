-- SPDX-License-Identifier: MIT
-- BACKEND_MULTI's own script: a multi-name lock (MLOCK) granted whole or not at all, in one
-- call: every name's RLock hash is looked at first, and only when each is
-- free (or the owner's own, as the daemon expects) are they all taken.
-- KEYS: for each of the n names, its lock hash and its fence counter
-- (2n keys). ARGV: lease ms, owner field, and a letter per name: 'r' the
-- daemon holds it for this owner (a reentry: one hold more), 'n' a new
-- grant.
--   redis-cli --eval build/gen/lua/mlock.lua a 'redisson_lock_token:{a}' b 'redisson_lock_token:{b}' , 30000 me:1 nn
--
-- Replies:
--   {GRANTED, v1, ..., vn}  all taken: vi is name i's fence (a new grant, as
--                           part/acquire.lua makes it) or its holds (a reentry)
--   {TAKEN, pttl, i}        name i (1-based) is someone else's, with the
--                           longest pttl among those taken (-1: one has no
--                           expiry); nothing was changed
--   {WRONG_KIND, held, i}   name i is another kind of lock; nothing changed
--   {REENTERED, holds, i}   name i, asked as new, has the owner's field (a
--                           stale one: the daemon releases it and asks
--                           again); nothing changed
--   {HOLD_GONE, 0, i}       name i, asked as a reentry, is not the owner's
--                           any more (expired, forced); nothing changed
--#include part/codes.lua
local n = #KEYS / 2
local lease, field, want = ARGV[1], ARGV[2], ARGV[3]
local taken, pttl = 0, -2
for i = 1, n do
  local k = KEYS[2 * i - 1]
  local reentry = string.sub(want, i, i) == 'r'
  if reentry and redis.call('hexists', k, field) == 0 then return {HOLD_GONE, 0, i} end
  if not reentry and redis.call('exists', k) == 1 then
    local m = redis.pcall('hget', k, 'mode')
    if type(m) == 'table' then
      if redis.call('type', k).ok == 'string' then return {WRONG_KIND, HELD_SEM, i} end
      error(m)
    end
    if m then return {WRONG_KIND, m == 'read' and HELD_READ or HELD_WRITE, i} end
    local mine = redis.call('hget', k, field)
    if mine then return {REENTERED, tonumber(mine), i} end
    local t = redis.call('pttl', k)
    if taken == 0 then taken = i end
    if t < 0 then pttl = -1 elseif pttl ~= -1 and t > pttl then pttl = t end
  end
end
if taken > 0 then return {TAKEN, pttl, taken} end
-- Every name is free or ours: take them all. A fence as part/acquire.lua
-- makes it: the greater of the counter plus one and TIME in microseconds.
local out = {GRANTED}
local t = redis.call('time')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
for i = 1, n do
  local k, c = KEYS[2 * i - 1], KEYS[2 * i]
  if string.sub(want, i, i) == 'r' then
    out[i + 1] = redis.call('hincrby', k, field, 1)
    -- one lease for the set, never shortening a longer one the hold had
    if redis.call('pttl', k) < tonumber(lease) then redis.call('pexpire', k, lease) end
  else
    redis.call('hset', k, field, 1)
    redis.call('pexpire', k, lease)
    local f = now
    local last = tonumber(redis.call('get', c) or '0')
    if last >= f then f = last + 1 end
    redis.call('set', c, string.format('%d', f))
    out[i + 1] = f
  end
end
return out
