#!lua flags=allow-cross-slot-keys
-- SCRIPT_RENEW_ANY: SCRIPT_RENEW for a Cluster node's many slots, the keys
-- in ARGV as ops_any.lua has them.
-- KEYS: none. ARGV: n, 2 n keys as for renew.lua, the lease ms, n owner
-- fields.
--   redis-cli --eval build/gen/lua/renew_any.lua , 1 mylock 'dlock_forced:{mylock}' 30000 me:1
--#include part/codes.lua
local n = tonumber(ARGV[1])
local K, ko, ao = ARGV, 1, 1 + 2 * n
--#include part/renew_batch.lua
