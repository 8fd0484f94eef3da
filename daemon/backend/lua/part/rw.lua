-- One op on a read/write lock in Redisson's RReadWriteLock layout: the
-- body of rw.lua, and of the batch script's rw (part/ops.lua, with
-- "pair"). K1 the lock hash, with 'mode' ('read' or 'write'), a reader's
-- field <owner> holding its read holds and the writer's <owner>:write its
-- write holds; K2 the fence counter; K3 the channel (redisson_rwlock:{K1});
-- K4 the timeout keys' prefix ({K1}, or K1 when it has a '{'): each read
-- hold n has a key K4:<owner>:rwlock_timeout:n with the reader's lease, so
-- a dead reader's holds end with their keys. op: 'r'/'w' acquire, 'R'/'W'
-- release all of the owner's read/write holds, 'd'/'D' one hold less
-- (never the last); A2 the lease; A3 the owner; P the publish command.
-- Renewals go in the batch script (part/rw_renew.lua).
--
-- Replies as the lock's scripts give them (part/acquire.lua,
-- part/release.lua), and an acquire of a name held as another kind (a
-- plain lock: a hash without 'mode') gets {3, HELD_*}, changing nothing.
-- A write grant raises the fence as part/acquire.lua does; a read grant
-- returns the counter as it is: readers learn whether a newer writer came. Releases publish as
-- Redisson does ('0' after reads, '1' after a write), and a write release
-- that leaves this owner's reads (a downgrade) publishes too, since
-- readers elsewhere may go now.
--
-- The hash's TTL is never shortened by a grant or a renewal, so it is at
-- least every live read hold's: a reader's release sets it to the longest
-- the other readers' timeout keys have left, as Redisson's unlock does, so
-- that the holds of a dead daemon end with their lease; but it stops
-- looking at the first key within a tenth of the TTL the hash has, and
-- keeps that TTL: with many live readers a release reads one or two keys,
-- not one per reader. It looks at two readers picked at random first
-- (HRANDFIELD, Redis 6.2), and only when neither will do at them all
-- (HKEYS): fifty readers' release no longer lists fifty fields.
-- luacheck: globals K1 K2 K3 K4 op A2 A3 P
-- luacheck: read globals GRANTED REENTERED TAKEN WRONG_KIND HELD_LOCK NOT_HELD held
local W = A3 .. ':write'
local T = K4 .. ':' .. A3 .. ':rwlock_timeout:'
local field = (op == 'r' or op == 'R' or op == 'd') and A3 or W
local got = redis.pcall('hmget', K1, 'mode', field)
if got.err then
  local h = held(K1, got)
  if op == 'r' or op == 'w' then return {WRONG_KIND, h} end
  return NOT_HELD
end
local mode = got[1]
if op == 'r' or op == 'w' then
  if not mode and redis.call('exists', K1) == 1 then return {WRONG_KIND, HELD_LOCK} end
  local f = tonumber(redis.call('get', K2) or '0')
  if op == 'r' then
    if mode == 'write' and redis.call('hexists', K1, W) == 0 then
      return {TAKEN, redis.call('pttl', K1)}
    end
    if not mode then redis.call('hset', K1, 'mode', 'read') end
    local n = redis.call('hincrby', K1, A3, 1)
    redis.call('set', T .. n, 1, 'px', A2)
    if redis.call('pttl', K1) < tonumber(A2) then redis.call('pexpire', K1, A2) end
    if n == 1 then return {GRANTED, f} end
    return {REENTERED, n}
  end
  if not mode then
    redis.call('hset', K1, 'mode', 'write', W, 1)
    redis.call('pexpire', K1, A2)
    f = f + 1
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if now > f then f = now end
    redis.call('set', K2, string.format('%d', f))
    return {GRANTED, f}
  end
  if mode == 'write' and got[2] then
    local n = redis.call('hincrby', K1, W, 1)
    if redis.call('pttl', K1) < tonumber(A2) then redis.call('pexpire', K1, A2) end
    return {REENTERED, n}
  end
  return {TAKEN, redis.call('pttl', K1)}
end
local n = mode and tonumber(got[2])
if not n then return NOT_HELD end
if op == 'd' or op == 'D' then
  if n <= 1 then return n end
  if op == 'd' then redis.call('del', T .. n) end
  return redis.call('hincrby', K1, field, -1)
end
redis.call('hdel', K1, field)
if op == 'R' then
  for i = 1, n do redis.call('del', T .. i) end
  if redis.call('hlen', K1) > 1 then
    local cur, left = redis.call('pttl', K1), -3
    local look = function(list, paired)
      for j = 1, #list, paired and 2 or 1 do
        local k = list[j]
        local c = tonumber(paired and list[j + 1] or redis.call('hget', K1, k))
        for i = c or 0, 1, -1 do
          left = math.max(left, redis.call('pttl', K4 .. ':' .. k .. ':rwlock_timeout:' .. i))
          if left >= cur - cur / 10 then return true end
        end
      end
    end
    local ok, some = pcall(redis.call, 'hrandfield', K1, 2, 'withvalues')
    if (ok and look(some, true)) or look(redis.call('hkeys', K1)) then return 0 end
    if left > 0 then
      redis.call('pexpire', K1, left)
      return 0
    end
    if mode == 'write' then return 0 end
  end
  redis.call('del', K1)
  return {0, redis.call(P, K3, '0')}
end
if redis.call('hlen', K1) == 1 then
  redis.call('del', K1)
else
  redis.call('hset', K1, 'mode', 'read')
end
return {0, redis.call(P, K3, '1')}
