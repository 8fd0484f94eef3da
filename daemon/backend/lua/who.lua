-- SCRIPT_WHO: who holds a lock, and its daemon. Reads only.
-- KEYS: the lock hash, the registry (none under Cluster, where the
-- registry is in another slot: the entry is then '').
-- ARGV: none.
--   redis-cli --eval daemon/backend/lua/who.lua mylock 'dlockd daemons'
--
-- Replies {pttl, the holder's field, its registry entry}: -2 and empty
-- strings when free (-3 a semaphore), '' for a holder no dlockd registered
-- (a Redisson client).
--#include part/kind.lua
local f = redis.pcall('hkeys', KEYS[1])
if f.err and held(KEYS[1], f) == HELD_SEM then return {-3, '', ''} end
if type(f) ~= 'table' or #f == 0 then return {-2, '', ''} end
local who = first_holder(f)
if not who then return {-2, '', ''} end
who = string.gsub(who, ':write$', '')
local uuid = string.match(who, '^(.*):[^:]*$') or who
local e = KEYS[2] and redis.call('hget', KEYS[2], uuid) or ''
return {redis.call('pttl', KEYS[1]), who, e}
