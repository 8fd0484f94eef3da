-- One acquire of a lock (RLock's layout): the body of acquire.lua, and of
-- the batch script's acquire (part/ops.lua), which includes it with "pair"
-- (its pairs come back as two values) and "time=clock()" (Redis TIME read
-- once per call). K1 lock hash, K2 fence counter; A1 lease ms, A2 owner,
-- Q 'q' for a quorum's rule, 'w' when the owner's daemon is in the name's
-- wake queue (part/wake.lua): a grant takes it out.
--
-- Replies ({code, value}, codes as daemon/backend/scripts.h names them):
-- {0, fence} a new grant, {1, holds} reentered, {2, pttl} taken (and this
-- daemon in the name's wake queue, part/wake.lua), {5, pttl} taken so by
-- an election's leader (part/kind.lua's leads(); a quorum's refusal,
-- where there are no elections, is always {2, pttl}), {3, HELD_*}
-- held as another kind (part/kind.lua's held(); read/write checked first,
-- since a reader's field has the same name as the owner's).
--
-- A grant's fence is the greater of the counter plus one and Redis TIME in
-- microseconds, and the counter is set to it: fences keep rising when
-- Redis loses the counter (a restart without persistence) or a promoted
-- replica missed its last writes, as long as that server's clock is not
-- behind by more than the outage lasted. Microseconds stay below 2^53,
-- exact in Lua's doubles. A quorum's nodes count TIME in whole seconds
-- (times a million): nodes whose counters agree then mostly return the
-- same fence, and the grant needs no round to raise counters (quorum.c);
-- fences still rise with up to a million grants a second. The free case
-- comes first, with the fewest calls: it is the common one; GETSET writes
-- TIME and reads the last fence in one call, and a second write follows
-- only when the last was not below it. The batch script reads TIME once
-- per call (its grants follow within microseconds, and a second grant of
-- one name in it takes the counter plus one).
-- luacheck: globals K1 K2 A1 A2 Q
-- luacheck: read globals GRANTED REENTERED TAKEN WRONG_KIND HELD_LOCK held wake_wait
-- luacheck: read globals wake_leave wake_remark leads TAKEN_LEADER
if redis.call('exists', K1) == 0 then
  if Q == 'w' then wake_leave(K1, A2) end
  redis.call('hset', K1, A2, 1)
  if Q == 'w' then wake_remark(K1) end
  redis.call('pexpire', K1, A1)
  local t = redis.call('time')
  local f
  if Q == 'q' then
    f = math.max(tonumber(redis.call('get', K2) or '0') + 1, tonumber(t[1]) * 1000000)
  else
    f = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local last = tonumber(redis.call('getset', K2, string.format('%d', f)) or '0')
    if last < f then return {GRANTED, f} end
    f = last + 1
  end
  redis.call('set', K2, string.format('%d', f))
  return {GRANTED, f}
end
local h = held(K1)
if h ~= HELD_LOCK then return {WRONG_KIND, h} end
if redis.call('hexists', K1, A2) == 1 then
  local n = redis.call('hincrby', K1, A2, 1)
  redis.call('pexpire', K1, A1)
  return {REENTERED, n}
end
-- Refused: this daemon waits for the name, in its wake queue (a
-- quorum's daemons do not: part/wake.lua, PROTOCOL.md). The answer says
-- whether an election leads the name: only then does the lock manager
-- read it (elect_read.c), to end the wait with ERR KIND.
if Q ~= 'q' then
  wake_wait(K1, A2, true)
  if leads(K1) then return {TAKEN_LEADER, redis.call('pttl', K1)} end
end
return {TAKEN, redis.call('pttl', K1)}
