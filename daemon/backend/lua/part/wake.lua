-- A plain lock's wake queue (issue 40): the daemons waiting for a name, in
-- the order they first asked, so that a release wakes one daemon, not
-- every daemon with a waiter. Include after part/kind.lua (comp()).
--
-- The queue is a sorted set beside the lock, comp('dlock_wq', k), in k's
-- slot; a member is a daemon's wake number (wake_id(): 2^52 plus the
-- first 48 bits of its uuid, the uuid being its owner fields' prefix:
-- sixteen digits, a number, since Redisson decodes every message on a
-- lock's channel as one and ignores those it does not know), its score
-- when the entry lapses: wake_keep_ms after it was written. Every entry
-- is written with the same span, so the order of scores is the order of
-- arrival. A refused acquire (not a quorum's) writes one, keeping its
-- daemon's place while it is live (wake_wait); a release pops the first
-- live entry that is not the releasing daemon's own (an acquire of a
-- daemon that knows it is queued takes its entry out as it is granted:
-- wake_leave) and publishes its
-- wake number on the lock's channel, right before the release message
-- (wake_one): every subscriber reads the two in a row, and only the named
-- daemon tries on that release; the others wait for their turn, or for
-- their fallback (command_timeout_ms) if the named one never tries.
-- Lapsed entries (a daemon dead or no longer waiting long since) are
-- dropped as they come up. woke[k] says that a release in this call
-- named another daemon: the batch script refuses this daemon's acquire
-- of k behind it in the same call (its turn goes to the named one).
-- luacheck: read globals comp WAKE_MARK
local wake_keep_ms = 60000
local wake_base = 4503599627370496
local woke = {}
-- The wake number of the daemon of owner field o ("<uuid>:<owner>").
local wake_id = function(o)
  local h = tonumber(string.sub(o, 1, 8) .. string.sub(o, 10, 13), 16) or 0
  return string.format('%d', wake_base + h)
end
local wake_now = function()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The daemon of owner field o waits for lock k: its entry, kept while it
-- is live, or written anew at the end; mark: k is a holder's hash, which
-- gets WAKE_MARK (part/kind.lua), the sign a release reads that someone
-- waits (without it a release asks the queue nothing).
local wake_wait = function(k, o, mark)
  local q, id, now = comp('dlock_wq', k), wake_id(o), wake_now()
  if mark then redis.call('hset', k, WAKE_MARK, '1') end
  local s = redis.call('zscore', q, id)
  if s and tonumber(s) >= now then return end
  redis.call('zadd', q, now + wake_keep_ms, id)
  redis.call('pexpire', q, wake_keep_ms)
end
-- Lock k, just granted to a daemon that left its queue: the mark again if
-- others still wait.
local wake_remark = function(k)
  if redis.call('zcard', comp('dlock_wq', k)) > 0 then redis.call('hset', k, WAKE_MARK, '1') end
end
-- The daemon of owner field o, granted lock k, waits for it no more.
local wake_leave = function(k, o)
  redis.call('zrem', comp('dlock_wq', k), wake_id(o))
end
-- Lock k released by owner o: the first live daemon waiting for it, not
-- o's, named on channel c with publish command p. true if one was.
local wake_one = function(k, c, o, p)
  local q = comp('dlock_wq', k)
  local e = redis.call('zpopmin', q)
  if #e == 0 then return false end
  local me, now = wake_id(o), nil
  while #e > 0 do
    if e[1] ~= me then
      now = now or wake_now()
      if tonumber(e[2]) >= now then
        redis.call(p, c, e[1])
        woke[k] = true
        return true
      end
    end
    e = redis.call('zpopmin', q)
  end
  return false
end
