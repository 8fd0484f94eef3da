-- Many renewals with one lease, the watchdog's: the body of renew.lua and
-- renew_any.lua, which set n, K, ko and ao as for part/ops.lua. Two keys
-- per lock (the lock hash and forced marker), the lease, then one owner
-- per lock. One digit per lock comes back, as part/renew.lua returns it,
-- or 'E' when that renewal failed (its key is not on this node).
-- luacheck: globals n K ko ao
local renew = function(K1, K2, A1, A2)
--#include part/renew.lua
end
local r = {}
local lease = ARGV[ao + 1]
for i = 1, n do
  local ok, v = pcall(renew, K[ko + 2 * i - 1], K[ko + 2 * i], lease, ARGV[ao + 1 + i])
  r[i] = ok and v or 'E'
end
return table.concat(r)
