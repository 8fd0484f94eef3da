-- SCRIPT_RELEASE: one release or drop of a lock (part/release.lua).
-- KEYS: the lock hash, its channel. ARGV: owner field, '1' release all
-- holds or '0' drop one, the publish command.
--   redis-cli --eval build/gen/lua/release.lua mylock 'redisson_lock__channel:{mylock}' , me:1 1 publish
--#include part/codes.lua
--#include part/kind.lua
--#include part/wake.lua
local K1, K2, A1, A2, P = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]
--#include part/release.lua
