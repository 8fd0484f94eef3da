#!lua flags=allow-cross-slot-keys
-- SCRIPT_OPS_ANY: SCRIPT_OPS for a Cluster node's many slots. Redis
-- refuses declared keys of different slots (CROSSSLOT) even with
-- allow-cross-slot-keys, so the keys go first in ARGV, after their count;
-- the flag lets the script touch keys of any slot this node serves. An
-- operation whose key the node does not serve (its slot moved) fails
-- alone, before it writes. Needs Redis 7.0.
-- KEYS: none. ARGV: n, 2 n keys as for ops.lua, 3 n op arguments, the
-- publish command.
--   redis-cli --eval build/gen/lua/ops_any.lua , 1 mylock 'redisson_lock_token:{mylock}' a 30000 me:1 publish
--#include part/codes.lua
--#include part/kind.lua
--#include part/wake.lua
local nops = tonumber(ARGV[1])
local K, ko, ao = ARGV, 1, 1 + 2 * nops
local P = ARGV[#ARGV]
--#include part/ops.lua
