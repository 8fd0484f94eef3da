-- SCRIPT_RENEW: many renewals with one lease, the watchdog's
-- (part/renew_batch.lua). The watchdog's batches are all renewals with one
-- lease: this passes each in three strings where ops.lua needs five.
-- KEYS: two per lock (the lock hash, its forced marker).
-- ARGV: the lease ms, then one owner field per lock.
--   redis-cli --eval build/gen/lua/renew.lua mylock 'dlock_forced:{mylock}' , 30000 me:1
--#include part/codes.lua
local n, K, ko, ao = #KEYS / 2, KEYS, 0, 0
--#include part/renew_batch.lua
