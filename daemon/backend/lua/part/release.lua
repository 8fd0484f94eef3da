-- One release or drop of a lock: the body of release.lua, and of the batch
-- script's release (part/ops.lua, with "pair"). K1 lock hash, K2 channel;
-- A1 owner, A2 '1' to release all holds (delete and publish '0', as
-- Redisson's unlock does) or '0' to drop one hold without ever deleting;
-- P the publish command ('publish', or 'spublish' for sharded pub/sub), as
-- Redisson passes it too.
--
-- Replies: holds left, -1 if not held (a read/write lock's field of the
-- owner is not this lock), or {0, subscribers that got the release
-- message}, or {0, 0} when it named the daemon whose turn it is
-- (part/wake.lua): the others stay quiet, and no local waiter of ours
-- need hold back for them. Every key is read before anything is written:
-- on a Cluster node that does not hold the key (a slot moving away), the
-- first access fails and nothing has changed.
-- luacheck: globals K1 K2 A1 A2 P
-- luacheck: read globals NOT_HELD wake_one WAKE_MARK
local v = redis.call('hmget', K1, A1, 'mode', WAKE_MARK)
local n = v[1]
if not n or v[2] then return NOT_HELD end
if A2 == '0' then
  if tonumber(n) > 1 then return redis.call('hincrby', K1, A1, -1) end
  return tonumber(n)
end
redis.call('del', K1)
if v[3] and wake_one(K1, K2, A1, P) then
  redis.call(P, K2, '0')
  return {0, 0}
end
return {0, redis.call(P, K2, '0')}
