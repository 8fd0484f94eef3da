-- SCRIPT_OWN(LATCH): one op on a count-down latch in Redisson's
-- RCountDownLatch layout: K1 the latch, a string: its count (no key: 0);
-- K2 its channel (redisson_countdownlatch__channel__{K1}), where setting
-- the count publishes '1' and reaching zero '0' (Redisson's NEW_COUNT and
-- ZERO_COUNT messages); K3 dlockd's mark of the latches it sets
-- (dlock_latch:{K1}: Redisson keeps a semaphore as a string too, and the
-- mark is how the other kinds' scripts tell a latch: part/kind.lua's
-- MARKED); K4 a semaphore's permit ids ({K1}:timeout).
-- ARGV: the op: 'a' is the count 0 (AWAIT's look), 'i' set the count
-- unless the latch exists (LATCHSET), 'r' count down (COUNTDOWN), 's' the
-- count (LATCHCOUNT); the count ('i'); the publish command.
--   redis-cli --eval build/gen/lua/latch.lua mylatch \
--     'redisson_countdownlatch__channel__{mylatch}' 'dlock_latch:{mylatch}' \
--     '{mylatch}:timeout' , i 3 publish
--
-- Replies: 'a' {0, 0} when the count is 0 (or there is no latch), else
-- {2, count}; 'i' 1 set (and '1' published), 0 when the latch exists
-- (unchanged); 'r' and 's' {count, '', 0}, 'r' the count left: at 0 the
-- latch and its mark are deleted and '0' is published, as Redisson's
-- countDown does (a count down with no latch changes and publishes
-- nothing). Redisson's countDown and delete leave the mark behind: any op
-- that finds no latch deletes it. A name that is another kind answers
-- {3, its kind} ('a', 'i') or {-1, '', its kind} ('r', 's'), changing
-- nothing: a lock (a hash), or a semaphore with permits out (a string
-- with ids). A string without ids, marked or not, is a latch: a latch
-- Redisson set has no mark.
--#include part/codes.lua
--#include part/kind.lua
local K1, K2, K3, K4 = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, P = ARGV[1], ARGV[3]
local h = kind(K1)
if h == HELD_SEM and redis.call('zcard', K4) == 0 then h = HELD_LATCH end
if h and h ~= HELD_LATCH then
  if op == 'a' or op == 'i' then return {WRONG_KIND, h} end
  return {-1, '', h}
end
if op == 'i' then
  if h then return 0 end
  redis.call('set', K1, ARGV[2])
  redis.call('set', K3, '1')
  redis.call(P, K2, '1')
  return 1
end
if not h then redis.call('del', K3) end -- a mark Redisson's countDown or delete left
if op == 'r' then
  if not h then return {0, '', 0} end
  local v = redis.call('decr', K1)
  if v <= 0 then redis.call('del', K1, K3) end
  if v == 0 then redis.call(P, K2, '0') end
  return {math.max(v, 0), '', 0}
end
local n = 0
if h then
  n = tonumber(redis.call('get', K1))
  if not n then error('count-down latch ' .. K1 .. ': its count is no number') end
end
if op == 's' then return {math.max(n, 0), '', 0} end
if n <= 0 then return {GRANTED, 0} end
return {TAKEN, n}
