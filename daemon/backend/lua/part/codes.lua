-- The scripts' reply codes, one per line as "local NAME = number":
-- daemon/backend/scripts.h names each SCRIPTS_<NAME>, and
-- tests/unit/test_scripts.c checks that every script's agree with it. A
-- script includes this first (a script that uses some leaves the rest).
-- An acquire's pair is {code, value}:
local GRANTED = 0
local REENTERED = 1
local TAKEN = 2
local WRONG_KIND = 3
local HOLD_GONE = 4
-- A plain lock's acquire refused by an election's leader: {5, pttl}
-- (TAKEN then says the holder is none: part/acquire.lua).
local TAKEN_LEADER = 5
-- WRONG_KIND's value, and STATUS's third element, what the name holds,
-- is a kind's HELD_ code: part/kind.lua.
-- A release's or drop's holds left when the owner held nothing.
local NOT_HELD = -1
-- A renewal's digit.
local GONE = 0
local RENEWED = 1
local FORCED = 2
