-- SCRIPT_REGISTER: a daemon's entry in the registry. Sets ours to
-- "<now ms> <name>" and removes the stale ones: a few daemons, so a few
-- fields. Replies 1.
-- KEYS: the registry.
-- ARGV: uuid, "dlockd:<host>:<pid>", the age (ms) past which an entry is gone.
--   redis-cli --eval daemon/backend/lua/register.lua 'dlockd daemons' , 1234-uuid dlockd:host:1 86400000
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('hset', KEYS[1], ARGV[1], string.format('%d', now) .. ' ' .. ARGV[2])
local all = redis.call('hgetall', KEYS[1])
for i = 1, #all, 2 do
  local seen = tonumber(string.match(all[i + 1], '^(%d+) '))
  if seen == nil or now - seen > tonumber(ARGV[3]) then
    redis.call('hdel', KEYS[1], all[i])
  end
end
return 1
