-- One renewal of a lock, the batch scripts' (part/ops.lua,
-- part/renew_batch.lua). K1 lock hash, K2 forced marker; A1 lease ms, A2
-- owner. 1 renewed, 0 gone, 2 removed by force. A key of another type
-- counts as gone; any other error (a Cluster node that no longer holds the
-- key) is raised.
-- luacheck: globals K1 K2 A1 A2
-- luacheck: read globals GONE RENEWED FORCED
local h = redis.pcall('hexists', K1, A2)
if h == 1 then
  redis.call('pexpire', K1, A1)
  return RENEWED
end
if type(h) == 'table' and not string.find(h.err, '^WRONGTYPE') then error(h) end
if redis.pcall('get', K2) == A2 then return FORCED end
return GONE
