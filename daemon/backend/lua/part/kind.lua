-- What kind a name's key holds: the one answer every script that asks
-- gets (include this after part/codes.lua), and the kinds' codes. A code
-- is its kind's backend mode (backend.h's backend_mode_t, number for
-- number: WRONG_KIND's value, STATUS's third element, LIST's kind), named
-- HELD_ and its LIST word upper-cased (the word is its row's list_word in
-- scripts.c's mode table; tests/unit/test_scripts.c holds each script to
-- both). A script uses some of what is here and leaves the rest.
--
-- Adding a kind: its code below; a kind whose key is a hash of its own
-- tells itself by that hash in held(); one whose key is a string, as a
-- semaphore's, is a row of MARKED; one of another Redis type adds its rule
-- to other().
-- An RLock hash: its holder's field, no 'mode'.
local HELD_LOCK = 0
-- An RReadWriteLock hash, 'mode' 'read' or 'write'.
local HELD_READ = 1
local HELD_WRITE = 2
-- A string: an RPermitExpirableSemaphore's permits available.
local HELD_SEM = 3
-- An RFairLock: an RLock hash, its queue beside it.
local HELD_FAIR = 4
-- An election: an RLock hash held by the owner its leader's record names.
local HELD_ELECT = 5
-- A count-down latch: a string, its count (RCountDownLatch), that dlockd
-- marks (latch.lua).
local HELD_LATCH = 7
-- A field a plain lock's hash may carry beside its holder's: some daemon
-- waits in the name's wake queue (part/wake.lua), so that a release reads
-- it with the holder's field and, with nobody waiting, runs no more
-- commands than before. No owner field ("<uuid>:<id>") is this; Redisson's
-- scripts touch only their own field, and delete the hash with it.
local WAKE_MARK = 'dlock:wq'
-- The first holder field of a lock's hash keys f ('mode' and WAKE_MARK
-- are none), or nil.
local first_holder = function(f)
  for _, x in ipairs(f) do
    if x ~= 'mode' and x ~= WAKE_MARK then return x end
  end
  return nil
end
-- A companion of key k, Redisson's prefixName (keys.h): "<name>:{k}", or
-- "<name>:k" when k has a '{' already; it shares k's slot.
local comp = function(name, k)
  if string.find(k, '{', 1, true) then return name .. ':' .. k end
  return name .. ':{' .. k .. '}'
end
-- The kinds whose key is a string besides a semaphore's, each told apart
-- by a mark of its own beside the key (a companion: comp(mark, k), in k's
-- slot), which its script writes with the string: {mark, its code}. A
-- string without one is a semaphore's (Redisson keeps other objects as
-- numbers in strings too, so only the mark says which).
local MARKED = {{'dlock_latch', HELD_LATCH}}
-- The kinds whose key is no hash: key k of Redis type ty. A type no kind
-- has is no lock: Redis's WRONGTYPE error is raised, as a command on it
-- would.
local other = function(k, ty)
  if ty == 'string' then
    for _, m in ipairs(MARKED) do
      if redis.call('exists', comp(m[1], k)) == 1 then return m[2] end
    end
    return HELD_SEM
  end
  return error(redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value'))
end
-- A string newly set under k, that was not there (SEMINIT's): a mark a
-- marked kind's string left behind (deleted by a Redisson client, which
-- knows no marks) goes, so that the new string is not taken for it.
local fresh = function(k)
  for _, m in ipairs(MARKED) do redis.call('del', comp(m[1], k)) end
end
-- What key k holds, k being there, as the scripts of a lock's hash see it:
-- one HGET of 'mode' for a hash (m: its result, from redis.pcall, when the
-- caller read it already), a TYPE more for any other key. A fair lock's
-- hash and an election's are an RLock's, HELD_LOCK: their scripts and a
-- plain lock's take them as one (the lock manager tells them apart).
local held = function(k, m)
  if m == nil then m = redis.pcall('hget', k, 'mode') end
  if type(m) == 'table' then return other(k, redis.call('type', k).ok) end
  if m then return m == 'read' and HELD_READ or HELD_WRITE end
  return HELD_LOCK
end
-- true if lock hash k's holder is an election's leader: the owner its
-- leader's record names holds it (elect.lua).
local leads = function(k)
  local o = redis.call('hget', comp('dlock_leader', k), 'owner')
  return o and redis.call('hexists', k, o) == 1
end
-- What key k holds, nil when nothing is there, and k's Redis type (LIST
-- describes a key by its layout). tell 'e' tells an
-- election's hash from a lock's (its leader's record names the holder);
-- 'ef' a fair lock's too, while Redis has its queue or dlockd's places
-- (LIST's: a fair lock nobody waits for is a plain lock's hash).
local kind = function(k, tell)
  local ty = redis.call('type', k).ok
  if ty == 'none' then return nil end
  if ty ~= 'hash' then return other(k, ty), ty end
  local h = held(k, redis.call('hget', k, 'mode'))
  if h ~= HELD_LOCK or not tell then return h, ty end
  if leads(k) then return HELD_ELECT, ty end
  if tell == 'ef' and (redis.call('exists', comp('redisson_lock_queue', k)) == 1 or
                       redis.call('exists', comp('dlock_fair', k)) == 1) then
    return HELD_FAIR, ty
  end
  return HELD_LOCK, ty
end
