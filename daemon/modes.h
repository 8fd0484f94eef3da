/* Every mode of every lock kind, in one list.
 * SPDX-License-Identifier: MIT
 *
 * The lock manager's lock_mode_t (LOCK_MODE_<id>, lockmgr.h) and the
 * backend's backend_mode_t (BACKEND_<id>, backend.h) are both made from
 * it, so a mode has the same number in both, and a new kind adds its
 * modes here once. What each mode does is its kind's (daemon/lock/kind.c
 * maps a mode to its kind's table); what Redis keeps for it is its row in
 * daemon/backend/scripts.c.
 *
 *   MUTEX  LOCK, TRYLOCK, UNLOCK: Redisson's RLock, a reentrant exclusive lock
 *   READ   RLOCK, TRYRLOCK, RUNLOCK: RReadWriteLock's shared side
 *   WRITE  WLOCK, TRYWLOCK, WUNLOCK: ... and its exclusive side
 *   SEM    SEMINIT, ACQUIRE, TRYACQUIRE, RELEASE: RPermitExpirableSemaphore;
 *          an owner's permits are ids <owner>:<k>
 *   FAIR   FAIRLOCK, TRYFAIRLOCK (UNLOCK): RFairLock, an RLock whose waiters
 *          queue in Redis, each woken on a channel of its own
 *   ELECT  ELECT, RESIGN, LEADER, OBSERVE: an election, its candidates
 *          queued in Redis as a fair lock's, the leader's value beside it
 *   MULTI  MLOCK, TRYMLOCK, MUNLOCK: plain locks of many names granted
 *          whole by one script (its holds are MUTEX ones)
 *   LATCH  LATCHSET, COUNTDOWN, AWAIT, TRYAWAIT, LATCHCOUNT: RCountDownLatch,
 *          a count that waiters wait to see reach 0; nothing holds it */
#ifndef DLOCK_MODES_H
#define DLOCK_MODES_H

#define DLOCK_MODES(XX) \
    XX(MUTEX)           \
    XX(READ)            \
    XX(WRITE)           \
    XX(SEM)             \
    XX(FAIR)            \
    XX(ELECT)           \
    XX(MULTI)           \
    XX(LATCH)

#endif
