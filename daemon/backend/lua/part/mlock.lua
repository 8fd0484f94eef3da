-- One multi-name acquire (MLOCK): the body of mlock.lua, and of the batch
-- script's multi op (part/ops.lua, with "time=clock()"). MK is the table
-- of keys: name i's lock hash at MK[MO + i], its fence counter at
-- MK[MO + MN + i] (the locks, then the counters); MN names; ML lease ms, MF owner field, MW a letter per
-- name: 'r' the daemon holds it for this owner (a reentry: one hold more),
-- 'n' a new grant; MQ 'q' for a quorum's fence rule (part/acquire.lua's:
-- TIME in whole seconds), else anything.
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
--
-- Every name is looked at first, and only when each is free or the
-- owner's are they written. The fences come before the locks: a counter
-- is the one key a write may fail on (another type there), and a counter
-- raised alone is harmless, so an error leaves no lock of the set taken.
-- Each new name's fence is max(counter + 1, TIME), and the counter is set
-- to it: TIME in microseconds, or for a quorum (MQ 'q') in whole seconds
-- times a million, as part/acquire.lua's, so that nodes whose counters
-- agree return the same fences and quorum.c needs no raise round.
--
-- What a script costs Redis is mostly its calls and the tables and
-- strings it makes, more than the commands themselves, so a set of new
-- names (the common case) shares them: one EXISTS over the locks (a
-- range of MK, no table made) finds them all free, one MGET reads the
-- counters and one MSET writes them (a GET more for a counter not there
-- yet, which fails as GETSET would on another type); then HSET and
-- PEXPIRE for each. A set with a reentry, or with a name not free, looks
-- at each name in turn.
-- luacheck: globals MK MO MN ML MF MW MQ
-- luacheck: read globals GRANTED REENTERED TAKEN WRONG_KIND HOLD_GONE HELD_LOCK held
local now = function()
  local t = redis.call('time')
  if MQ == 'q' then return tonumber(t[1]) * 1000000 end
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function grant(out, i, f)
  local k = MK[MO + i]
  redis.call('hset', k, MF, '1')
  redis.call('pexpire', k, ML)
  out[i + 1] = f
end
if not string.find(MW, 'r', 1, true) and redis.call('exists', unpack(MK, MO + 1, MO + MN)) == 0 then
  local out, f0 = {GRANTED}, now()
  if MN == 1 then
    local c, f = MK[MO + 2], f0
    local last = tonumber(redis.call('getset', c, string.format('%d', f)) or '0')
    if last >= f then
      f = last + 1
      redis.call('set', c, string.format('%d', f))
    end
    grant(out, 1, f)
    return out
  end
  local last, kv = redis.call('mget', unpack(MK, MO + MN + 1, MO + 2 * MN)), {}
  for i = 1, MN do
    local c, l, f = MK[MO + MN + i], last[i], f0
    if not l then redis.call('get', c) elseif tonumber(l) >= f then f = tonumber(l) + 1 end
    kv[2 * i - 1], kv[2 * i], out[i + 1] = c, string.format('%d', f), f
  end
  redis.call('mset', unpack(kv))
  for i = 1, MN do grant(out, i, out[i + 1]) end
  return out
end
local taken, pttl = 0, -2
for i = 1, MN do
  local k = MK[MO + i]
  if string.byte(MW, i) == 114 then
    if redis.call('hexists', k, MF) == 0 then return {HOLD_GONE, 0, i} end
  elseif redis.call('exists', k) == 1 then
    local h = held(k)
    if h ~= HELD_LOCK then return {WRONG_KIND, h, i} end
    local mine = redis.call('hget', k, MF)
    if mine then return {REENTERED, tonumber(mine), i} end
    local t = redis.call('pttl', k)
    if taken == 0 then taken = i end
    if t < 0 then pttl = -1 elseif pttl ~= -1 and t > pttl then pttl = t end
  end
end
if taken > 0 then return {TAKEN, pttl, taken} end
local out, f0 = {GRANTED}, now()
for i = 1, MN do
  if string.byte(MW, i) ~= 114 then
    local c, f = MK[MO + MN + i], f0
    local last = tonumber(redis.call('getset', c, string.format('%d', f)) or '0')
    if last >= f then
      f = last + 1
      redis.call('set', c, string.format('%d', f))
    end
    out[i + 1] = f
  end
end
for i = 1, MN do
  local k = MK[MO + i]
  if string.byte(MW, i) == 114 then
    out[i + 1] = redis.call('hincrby', k, MF, 1)
    -- one lease for the set, never shortening a longer one the hold had
    if redis.call('pttl', k) < tonumber(ML) then redis.call('pexpire', k, ML) end
  else
    grant(out, i, out[i + 1])
  end
end
return out
