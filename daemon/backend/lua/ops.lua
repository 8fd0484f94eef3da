-- SCRIPT_OPS: many acquires, releases, drops and renewals in one call
-- (part/ops.lua says how), their keys in KEYS: they share one Cluster
-- slot, or there is no Cluster.
-- KEYS: two per op (the lock, and its token, channel or forced marker).
-- ARGV: three per op (kind, number, owner field), then the publish command.
--   redis-cli --eval build/gen/lua/ops.lua mylock 'redisson_lock_token:{mylock}' , a 30000 me:1 publish
--#include part/codes.lua
--#include part/kind.lua
--#include part/wake.lua
local nops, K, ko, ao = #KEYS / 2, KEYS, 0, 0
local P = ARGV[#ARGV]
--#include part/ops.lua
