-- A read/write lock's renewal (the watchdog's, batched with the others:
-- part/ops.lua). K1 lock hash, K2 forced marker; A1 lease ms, A2 owner, k
-- 'v' for its read holds (the hash, and each hold's timeout key, as
-- Redisson's ReadLockTask renews them) or 'V' for its write hold. The
-- hash's TTL only grows (see part/rw.lua). Replies as part/renew.lua.
-- luacheck: globals K1 K2 A1 A2 k
-- luacheck: read globals GONE RENEWED FORCED
local m = redis.pcall('hget', K1, 'mode')
if type(m) == 'table' then
  if not string.find(m.err, '^WRONGTYPE') then error(m) end
  m = false
end
local f = k == 'v' and A2 or A2 .. ':write'
local n = m and tonumber(redis.call('hget', K1, f))
if n then
  if redis.call('pttl', K1) < tonumber(A1) then redis.call('pexpire', K1, A1) end
  if k == 'v' then
    local t = (string.find(K1, '{', 1, true) and K1 or '{' .. K1 .. '}') .. ':' .. A2
    for i = 1, n do redis.call('pexpire', t .. ':rwlock_timeout:' .. i, A1) end
  end
  return RENEWED
end
if redis.pcall('get', K2) == f then return FORCED end
return GONE
