-- Many operations in one call: the body of ops.lua and ops_any.lua, which
-- set nops (how many), K and ko (where the keys are: K[ko + 1] ...), ao
-- (ARGV[ao + 1] is the first op's first argument) and P (the publish
-- command). The bodies of the one-op scripts are its functions (K1, K2,
-- A1, A2 are their parameters), run in the order asked for. Two keys per
-- operation (the lock, and its token, channel or forced marker), then
-- three arguments per operation: 'a' lease owner (an acquire; 'q' with a
-- quorum's fence rule, 'w' of a daemon in the name's wake queue, which a
-- grant takes it out of: part/wake.lua), 'r' all owner, 'n' lease owner (a renewal; 'v' and
-- 'V' of a read/write lock's read or write holds, 's<c>' of a semaphore's
-- c permits), 'f' fence owner (a quorum's raise), 'l' 0 owner (the owner's
-- daemon leaves the name's wake queue, the second key: part/wake.lua) or
-- 'x<op>' lease owner (a
-- read/write lock's acquire, release or drop: part/rw.lua's op, with the
-- fence counter or the channel as the second key; the timeout keys'
-- prefix is made from the first as rw.lua's caller makes it).
-- A multi-name acquire takes one such place per name (its keys: each
-- name's lock and fence counter, in order); the first place's arguments
-- are 'm<letters>' lease owner (part/mlock.lua's, a letter per name; 'M'
-- with a quorum's fence rule), the others' are empty.
--
-- The reply is an array of two elements per operation: the pair an
-- acquire or a release returns ({0, fence}, {1, holds}, {2, pttl};
-- {0, subscribers}; an acquire behind a release of ours that named another
-- daemon, in this call, is refused as {2, -2}, PTTL's "no such key": the
-- lock is free, the turn another's: part/wake.lua), or a number (holds left, a renewal's or a raise's
-- digit) and nil; or the error's text and nil when that operation failed
-- (the others still run). A multi-name acquire answers part/mlock.lua's
-- array in its first place's first element, false in the rest of its
-- places. The operations run under one pcall: when one
-- fails, the loop goes on after it under a new one, so a batch where
-- nothing failed pays for one (a failed operation did not write: see
-- part/release.lua).
-- luacheck: globals nops K ko ao P
-- luacheck: read globals woke wake_wait wake_id TAKEN
local tm
local clock = function()
  tm = tm or redis.call('time')
  return tm
end
local acquire = function(K1, K2, A1, A2, Q)
  -- a release of ours just named another daemon: its turn (part/wake.lua)
  if woke[K1] then
    wake_wait(K1, A2)
    return TAKEN, -2
  end
--#include part/acquire.lua pair time=clock()
end
local release = function(K1, K2, A1, A2)
--#include part/release.lua pair
end
local renew = function(K1, K2, A1, A2)
--#include part/renew.lua
end
local rw_renew = function(K1, K2, A1, A2, k)
--#include part/rw_renew.lua
end
local raise = function(K1, K2, A1, A2)
--#include part/raise.lua
end
local sem_renew = function(_, K2, A1, A2, c)
--#include part/sem_renew.lua
end
local rw = function(K1, KX, A2, A3, op)
  local K2, K3 = KX, KX
  local K4 = string.find(K1, '{', 1, true) and K1 or '{' .. K1 .. '}'
--#include part/rw.lua pair
end
local mlock = function(MK, MO, MN, ML, MF, MW, MQ)
--#include part/mlock.lua time=clock()
end
local out, i, w = {}, 1, 1
local run = function()
  while i <= nops do
    local r, v
    w = 1
    local k1, k2 = K[ko + 2 * i - 1], K[ko + 2 * i]
    local a = ao + 3 * i
    local k = ARGV[a - 2]
    if k == 'r' then
      r, v = release(k1, k2, ARGV[a], ARGV[a - 1])
    elseif k == 'a' or k == 'q' or k == 'w' then
      r, v = acquire(k1, k2, ARGV[a - 1], ARGV[a], k)
    elseif k == 'n' then
      r = renew(k1, k2, ARGV[a - 1], ARGV[a])
    elseif k == 'v' or k == 'V' then
      r = rw_renew(k1, k2, ARGV[a - 1], ARGV[a], k)
    elseif k == 'f' then
      r = raise(k1, k2, ARGV[a - 1], ARGV[a])
    elseif k == 'l' then
      r = redis.call('zrem', k2, wake_id(ARGV[a]))
    elseif string.byte(k) == 120 then
      r, v = rw(k1, k2, ARGV[a - 1], ARGV[a], string.sub(k, 2))
    elseif string.byte(k) == 115 then
      r = sem_renew(k1, k2, ARGV[a - 1], ARGV[a], tonumber(string.sub(k, 2)))
    elseif string.byte(k) == 109 or string.byte(k) == 77 then
      w = #k - 1
      for j = 2 * i + 1, 2 * (i + w) - 2 do out[j] = false end
      r = mlock(K, ko + 2 * i - 2, w, ARGV[a - 1], ARGV[a], string.sub(k, 2),
                string.byte(k) == 77 and 'q' or '')
    else
      r, v = release(k1, k2, ARGV[a], ARGV[a - 1])
    end
    out[2 * i - 1], out[2 * i] = r, v or false
    i = i + w
  end
end
while true do
  local ok, e = pcall(run)
  if ok then return out end
  for j = 2 * i, 2 * (i + w) - 2 do out[j] = false end
  out[2 * i - 1] = tostring(type(e) == 'table' and e.err or e)
  i = i + w
end
