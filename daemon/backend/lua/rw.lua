-- SCRIPT_RW: one op on a read/write lock (part/rw.lua says how).
-- KEYS: the lock hash, its fence counter, its channel, its timeout keys'
-- prefix. ARGV: op ('r' 'w' 'R' 'W' 'd' 'D'), lease ms, owner field, the
-- publish command.
--   redis-cli --eval build/gen/lua/rw.lua mylock 'redisson_lock_token:{mylock}' \
--     'redisson_rwlock:{mylock}' '{mylock}' , r 30000 me:1 publish
--#include part/codes.lua
--#include part/kind.lua
local K1, K2, K3, K4 = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, A2, A3, P = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
--#include part/rw.lua
