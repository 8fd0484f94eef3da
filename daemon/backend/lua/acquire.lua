-- SCRIPT_ACQUIRE: one acquire of a lock (part/acquire.lua says how).
-- KEYS: the lock hash, its fence counter. ARGV: lease ms, owner field, and
-- 'q' for a quorum's fence rule (or nothing). A refusal puts this daemon in
-- the lock's wake queue (part/wake.lua), but for a quorum.
--   redis-cli --eval build/gen/lua/acquire.lua mylock 'redisson_lock_token:{mylock}' , 30000 me:1
--#include part/codes.lua
--#include part/kind.lua
--#include part/wake.lua
local K1, K2, A1, A2, Q = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]
--#include part/acquire.lua
