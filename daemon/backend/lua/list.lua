#!lua flags=no-writes,allow-cross-slot-keys
-- SCRIPT_LIST: what each lock key of one SCAN page holds, for LIST. Reads
-- only. The keys come in ARGV (a SCAN page has keys of many slots; Redis
-- refuses declared keys of different slots), every one served by the node
-- the page came from; each key's companions share its slot. Needs 7.0.
-- ARGV: the most holders and the most waiters told per key, then the keys.
--   redis-cli --eval build/gen/lua/list.lua , 8 8 mylock
--
-- Replies one element per key that is a lock: {key, kind, pttl, fence,
-- holders in all, {field, count, ...}, waiters in all, {field, ...},
-- value}; kind its HELD_ code (part/kind.lua's kind(), telling fair locks
-- and elections apart: the lock manager words it by its mode's list_word).
-- A key that is a string (a semaphore's) has as holders its permit ids'
-- owners (an id without its ':<n>' tail), count the permits, pttl until
-- the first id expires, value its number (a semaphore's permits
-- available); a lock's hash its fields, and the waiters of its queue in
-- Redis (a fair lock's, an election's), an election's value its leader's.
-- Keys that are no lock (another type, a string that is no number) are
-- left out.
--#include part/kind.lua
local hmax, wmax = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function suffix(k, name)
  if string.find(k, '{', 1, true) then return k .. ':' .. name end
  return '{' .. k .. '}:' .. name
end
local out = {}
for i = 3, #ARGV do
  local k = ARGV[i]
  local ok, c, ty = pcall(kind, k, 'ef')
  if not ok then c = nil end
  local e
  if c and ty == 'string' then
    local avail = tonumber(redis.call('get', k))
    if avail then
      local ids = redis.call('zrange', suffix(k, 'timeout'), 0, -1, 'withscores')
      local by, order, first = {}, {}, -1
      for j = 1, #ids, 2 do
        local o = string.match(ids[j], '^(.*):[^:]*$') or ids[j]
        if not by[o] then by[o] = 0; order[#order + 1] = o end
        by[o] = by[o] + 1
        local s = tonumber(ids[j + 1])
        if first < 0 or s - now < first then first = math.max(s - now, 0) end
      end
      local h = {}
      for j = 1, math.min(#order, hmax) do
        h[#h + 1] = order[j]; h[#h + 1] = by[order[j]]
      end
      e = {k, c, first, 0, #order, h, 0, {}, tostring(avail)}
    end
  elseif c then
    local f = redis.call('hgetall', k)
    local h, n = {}, 0
    for j = 1, #f, 2 do
      if f[j] ~= 'mode' and f[j] ~= WAKE_MARK then
        n = n + 1
        if n <= hmax then h[#h + 1] = f[j]; h[#h + 1] = tonumber(f[j + 1]) or 0 end
      end
    end
    local fence = tonumber(redis.call('get', comp('redisson_lock_token', k)) or '0') or 0
    local q, value = comp('redisson_lock_queue', k), ''
    if c == HELD_ELECT then
      q = comp('dlock_elect_queue', k)
      value = redis.call('hget', comp('dlock_leader', k), 'value') or ''
    end
    local w, nw = {}, 0
    if c ~= HELD_READ and c ~= HELD_WRITE then
      nw = redis.call('llen', q)
      w = redis.call('lrange', q, 0, wmax - 1)
    end
    e = {k, c, redis.call('pttl', k), fence, n, h, nw, w, value}
  end
  if e then out[#out + 1] = e end
end
return out
