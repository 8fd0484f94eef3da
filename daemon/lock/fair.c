/* Fair locks: waiters queue in Redis, across every daemon and Redisson client of the name.
 * SPDX-License-Identifier: MIT
 *
 * A fair lock is an RLock whose waiters take places in Redis's queue
 * (scripts.c, Redisson's RFairLock layout): the lock goes only to the
 * queue's head, and a release wakes only it, on a channel of its own. So
 * every local waiter asks Redis as soon as it comes, taking its place,
 * and then waits: the local head for the wake-up of its own channel (the
 * one watch of the name follows the head; a grant wakes the new head as
 * well, so that it learns the holder's lease) or its retry turn, and every
 * renew_every_ms all of them ask again, in their order, which keeps their
 * places from ending (a place lasts lease_ms) and, should Redis have lost
 * the queue, puts them back in the same order. A waiter that stops
 * waiting (its client left, its TRYFAIRLOCK timed out) leaves its place at
 * once, or once Redis is back (release.c retries a leave as a release),
 * so no dead waiter of ours holds the queue up; a dlockd that died
 * leaves places that end within lease_ms. A fair lock's holder is an
 * RLock's, so a name another daemon's election leads refuses it as
 * taken: its first refusal reads what the name is, as LOCK's does
 * (elect_read.h). */
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/elect_read.h"
#include "daemon/lock/redisq.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

/* A fair lock's waiter's own, in its area: the read in flight about it. */
typedef struct fair_waiter_s {
    election_read_t *read;
} fair_waiter_t;
LOCK_KIND_AREA_FITS(fair_waiter_t, LOCK_KIND_WAIT_AREA);

static void fair_refused(lock_t *l, wait_t *w) {
    fair_waiter_t *fw = lock_wait_area(w);
    lock_refused_read_kind(l, w, &fw->read);
}

/* w's attempt: its place's length, and whether it takes one. */
static void fair_prepare(lock_t *l, wait_t *w, backend_op_t *op) {
    op->once = w->once;
    op->queue_ms = l->mgr->conf->lease_ms;
    op->queue_foreign_ms = LOCKMGR_FAIR_FOREIGN_WAIT_MS;
}

/* The channel a fair lock's waiters are woken on: its local head's. */
static void fair_watch(lock_t *l) {
    queue_t *q = l->q;
    wait_t *head = q ? TAILQ_FIRST(&q->waiters) : NULL;
    if (head == NULL || (q->subscribed && q->watch_owner == head->owner_id)) return;
    lock_unwatch(l);
    /* Once the watch is in force its confirmation lets the head try once
     * more: a release in between is not missed. */
    lock_watch(l, BACKEND_FAIR, head->owner_id);
}

/* Redis put w in its queue: keep the place, watch the head's channel. */
static void fair_queued(lock_t *l, wait_t *w) {
    redisq_queued(l, w);
    if (TAILQ_FIRST(&l->q->waiters) == w) fair_watch(l);
}

/* w stops waiting: its place goes (unless it was granted), and a new
 * head's channel is watched. */
static void fair_leave(lock_t *l, wait_t *w, int was_head) {
    fair_waiter_t *fw = lock_wait_area(w);
    lock_leave_read_kind(&fw->read);
    lock_leave_queue(l, w);
    if (was_head) fair_watch(l);
}

/* Its protocol words (session.c makes its commands of them). */
static const lock_word_t fair_words[] = {
    {"FAIRLOCK", LOCK_VERB_LOCK, LOCK_MODE_FAIR, 0, LOCK_WORD_AS_LOCK},
    {"TRYFAIRLOCK", LOCK_VERB_TRYLOCK, LOCK_MODE_FAIR, 0, LOCK_WORD_AS_TRYLOCK},
    {.word = NULL},
};

const lock_kind_t lock_kind_fair = {
    .name = "fair",
    .words = fair_words,
    .text = {"held as a fair lock (FAIRLOCK, UNLOCK)",
             "held as a fair lock: UNLOCK releases it", "fair locks"},
    .cap = BACKEND_CAP_ONE_COPY,
    .watch = BACKEND_FAIR,
    .status = LOCK_STATUS_EXCLUSIVE,
    .head_wakes = 1,
    .queues = 1,
    .kick = lock_kick_all,
    .prepare = fair_prepare,
    .prepare_op = redisq_prepare_op,
    .refused = fair_refused,
    .taken = redisq_taken,
    .requeued = fair_queued,
    .leave = fair_leave,
    .queue_end = redisq_queue_end,
    .released = redisq_released,
};
