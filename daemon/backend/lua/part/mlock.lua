-- One multi-name acquire (MLOCK): the body of mlock.lua, and of the batch
-- script's multi op (part/ops.lua, with "time=clock()"). MK is the table
-- of keys: name i's lock hash at MK[MO + 2 i - 1], its fence counter at
-- MK[MO + 2 i]; MN names; ML lease ms, MF owner field, MW a letter per
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
-- Calls inside a script cost Redis more than the commands themselves, so
-- the new names share theirs: one EXISTS finds them all free (the common
-- case; only when one is not is each looked at), one MGET reads their
-- counters and one MSET writes them (a GET more for a counter not there
-- yet, which fails as GETSET would on another type). Then HSET and
-- PEXPIRE for each: a set of n free names costs 2n + 4 calls (one name,
-- 5: GETSET for its counter), where n single acquires cost 4n.
-- Each new name's fence is max(counter + 1, TIME), and the counter is set
-- to it: TIME in microseconds, or for a quorum (MQ 'q') in whole seconds
-- times a million, as part/acquire.lua's, so that nodes whose counters
-- agree return the same fences and quorum.c needs no raise round. The
-- calls are the same either way.
-- luacheck: globals MK MO MN ML MF MW MQ
-- luacheck: read globals GRANTED REENTERED TAKEN WRONG_KIND HOLD_GONE HELD_READ HELD_WRITE HELD_SEM
local taken, pttl = 0, -2
local locks, counters, at, nnew = {}, {}, {}, 0
for i = 1, MN do
  if string.byte(MW, i) ~= 114 then
    nnew = nnew + 1
    locks[nnew], counters[nnew], at[nnew] = MK[MO + 2 * i - 1], MK[MO + 2 * i], i
  end
end
local busy = nnew > 0 and redis.call('exists', unpack(locks)) > 0
for i = 1, MN do
  local k = MK[MO + 2 * i - 1]
  if string.byte(MW, i) == 114 then
    if redis.call('hexists', k, MF) == 0 then return {HOLD_GONE, 0, i} end
  elseif busy and redis.call('exists', k) == 1 then
    local m = redis.pcall('hget', k, 'mode')
    if type(m) == 'table' then
      if redis.call('type', k).ok == 'string' then return {WRONG_KIND, HELD_SEM, i} end
      error(m)
    end
    if m then return {WRONG_KIND, m == 'read' and HELD_READ or HELD_WRITE, i} end
    local mine = redis.call('hget', k, MF)
    if mine then return {REENTERED, tonumber(mine), i} end
    local t = redis.call('pttl', k)
    if taken == 0 then taken = i end
    if t < 0 then pttl = -1 elseif pttl ~= -1 and t > pttl then pttl = t end
  end
end
if taken > 0 then return {TAKEN, pttl, taken} end
local out = {GRANTED}
local t = redis.call('time')
local now = tonumber(t[1]) * 1000000
if MQ ~= 'q' then now = now + tonumber(t[2]) end
if nnew == 1 then
  local c, f = counters[1], now
  local last = tonumber(redis.call('getset', c, string.format('%d', f)) or '0')
  if last >= f then
    f = last + 1
    redis.call('set', c, string.format('%d', f))
  end
  out[at[1] + 1] = f
elseif nnew > 1 then
  local last, kv = redis.call('mget', unpack(counters)), {}
  for j = 1, nnew do
    if not last[j] then redis.call('get', counters[j]) end
    local f = now
    if last[j] and tonumber(last[j]) >= f then f = tonumber(last[j]) + 1 end
    kv[2 * j - 1], kv[2 * j] = counters[j], string.format('%d', f)
    out[at[j] + 1] = f
  end
  redis.call('mset', unpack(kv))
end
for i = 1, MN do
  local k = MK[MO + 2 * i - 1]
  if string.byte(MW, i) == 114 then
    out[i + 1] = redis.call('hincrby', k, MF, 1)
    -- one lease for the set, never shortening a longer one the hold had
    if redis.call('pttl', k) < tonumber(ML) then redis.call('pexpire', k, ML) end
  else
    redis.call('hset', k, MF, 1)
    redis.call('pexpire', k, ML)
  end
end
return out
