/* The plain lock: Redisson's RLock, one holder at a time, reentrant.
 * SPDX-License-Identifier: MIT
 *
 * A mutex is the core's defaults (kind.h): any local hold keeps a waiter
 * from trying, the head tries alone, a grant is a hold with Redis's
 * fence, and a refused waiter watches the name's channel until a release
 * or the holder's lease ends.
 *
 * An election's leader is a plain lock's holder in Redis (elect.lua), so
 * a LOCK of a name that another daemon's election leads is refused as
 * TAKEN. The acquire script says whether the holder that refused is an
 * election's leader (SCRIPTS_TAKEN_LEADER); such a refusal (not a
 * TRYLOCK of 0's, which tries once) reads what the name is, with an
 * election's LEADER read, where the topology has elections; if it leads
 * an election, the wait ends with ERR KIND, as on the leader's own daemon
 * (elect_read.c). A refusal by a plain holder reads nothing. Fair locks
 * (RLocks too) and multi-name sets read on their first refusal, as their
 * scripts do not say (fair.c, multi.c).
 *
 * A refused acquire also puts this daemon in the name's wake queue in
 * Redis (lua/part/wake.lua), and a release wakes the first daemon there:
 * a release that names another (BACKEND_PASSED) lets the head wait on,
 * for its turn, or until command_timeout_ms has passed without the named
 * daemon taking the lock (wait.c's lock_on_watch). */
#include "daemon/lock/elect_read.h"

/* A plain lock's waiter's own, in its area: the read in flight about it. */
typedef struct mutex_waiter_s {
    election_read_t *read;
} mutex_waiter_t;
LOCK_KIND_AREA_FITS(mutex_waiter_t, LOCK_KIND_WAIT_AREA);

static void mutex_refused(lock_t *l, wait_t *w) {
    mutex_waiter_t *mw = lock_wait_area(w);
    lock_refused_read_leader(l, w, &mw->read);
}

static void mutex_leave(lock_t *l, wait_t *w, int was_head) {
    mutex_waiter_t *mw = lock_wait_area(w);
    (void)l;
    (void)was_head;
    lock_leave_read_kind(&mw->read);
}

/* Its protocol words (session.c makes its commands of them). */
static const lock_word_t mutex_words[] = {
    {"LOCK", LOCK_VERB_LOCK, LOCK_MODE_MUTEX, 0, LOCK_WORD_AS_LOCK},
    {"TRYLOCK", LOCK_VERB_TRYLOCK, LOCK_MODE_MUTEX, 0, LOCK_WORD_AS_TRYLOCK},
    {.word = NULL},
};

const lock_kind_t lock_kind_mutex = {
    .name = "mutex",
    .words = mutex_words,
    .text = {"held as a plain lock (LOCK, UNLOCK)",
             "held as a plain lock: UNLOCK releases it", "plain locks"},
    .watch = BACKEND_MUTEX,
    .status = LOCK_STATUS_EXCLUSIVE,
    .wake_one = 1,
    .kick = lock_kick_head,
    .refused = mutex_refused,
    .leave = mutex_leave,
};
