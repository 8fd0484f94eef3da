-- A semaphore's renewal (the watchdog's, batched with the others:
-- part/ops.lua). K2 its permit ids' sorted set; A1 lease ms, A2 owner, c
-- how many permits it holds: ids A2:1 .. A2:c, each scored by when it
-- expires (ms since the epoch, Redis TIME). All of them get now + lease:
-- 1; or 0, changing nothing, when any is gone or expired (the holder has
-- lost them: its release gives back the rest).
-- luacheck: globals K2 A1 A2 c
-- luacheck: read globals GONE RENEWED
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = A2 .. ':'
for i = 1, c do
  local s = redis.call('zscore', K2, id .. i)
  if not s or tonumber(s) <= now then return GONE end
end
for i = 1, c do redis.call('zadd', K2, now + tonumber(A1), id .. i) end
return RENEWED
