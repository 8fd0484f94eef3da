-- A quorum's raise of the fence counter (part/ops.lua). K1 lock hash, K2
-- fence counter; A1 a fence, A2 owner. Raises the counter to the fence
-- where it was lower, only while the owner still holds the lock there: 1,
-- or 0 when it does not.
-- luacheck: globals K1 K2 A1 A2
if redis.call('hexists', K1, A2) == 0 then return 0 end
if tonumber(redis.call('get', K2) or '0') < tonumber(A1) then
  redis.call('set', K2, A1)
end
return 1
