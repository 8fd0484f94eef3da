-- luacheck's settings for dlockd's Redis scripts (daemon/backend/lua): make luacheck.
-- SPDX-License-Identifier: MIT
std = "lua51"
-- What Redis gives a script (cjson, cmsgpack, struct and bit are not used).
read_globals = { "redis", "KEYS", "ARGV" }
-- part/codes.lua names every reply code, part/kind.lua every kind's code
-- and its two questions, and fresh(); a script may use only some.
-- part/wake.lua: an acquire waits, a release wakes, the batch does both.
ignore = { "211/[A-Z][A-Z_]+", "211/held", "211/kind", "211/fresh", "211/first_holder", "211/wake_.*", "211/woke", "241/woke" }
