/* A kind whose waiters queue in Redis: keeping their places, waiting in order, asking behind a release.
 * SPDX-License-Identifier: MIT
 *
 * Fair locks (fair.c) and elections (elect.c) wait this way; redisq.h
 * says how. */
#include "daemon/lock/redisq.h"

#include "daemon/util/util.h"

/* What it keeps in the queue's kind area. */
typedef struct redisq_s {
    timers_entry_t keep;       /* the waiters ask again, in order, keeping
                                  their places in Redis's queue */
} redisq_t;
LOCK_KIND_AREA_FITS(redisq_t, LOCK_KIND_QUEUE_AREA);

static redisq_t *redisq_of(lock_t *l) {
    return lock_queue_area(l->q);
}

/* Every waiter asks again, in the queue's order: those whose places Redis
 * still has keep them, the others take them back in that order. */
static void on_keep(timers_entry_t *t) {
    redisq_t *rq = container_of(t, redisq_t, keep);
    queue_t *q = lock_queue_of_area(rq);
    lock_t *l = q->lock;
    wait_t *w;
    TAILQ_FOREACH(w, &q->waiters, link) w->parked = 0;
    timers_start(l->mgr->timers, &rq->keep, l->mgr->conf->renew_every_ms, on_keep);
    lock_kick(l);
}

void redisq_queued(lock_t *l, wait_t *w) {
    lockmgr_t *m = l->mgr;
    redisq_t *rq = redisq_of(l);
    (void)w;
    if (!timers_active(&rq->keep))
        timers_start(m->timers, &rq->keep, m->conf->renew_every_ms, on_keep);
}

void redisq_taken(lock_t *l, wait_t *w, const backend_result_t *res) {
    int head = lock_queue_head(l) == w;
    if (head && w->woken) {
        lock_attempt(l, w);
        return;
    }
    w->parked = 1;
    lock_kind_of(w->mode)->requeued(l, w);
    if (head) lock_retry_at(l, res->ttl_ms);
    /* Its ask is done: a waiter the cap on asks in flight held back may
     * ask now. */
    lock_kick(l);
}

void redisq_released(lock_t *l, hold_t *h) {
    (void)h;
    if (l->q != NULL && !TAILQ_EMPTY(&l->q->waiters)) TAILQ_FIRST(&l->q->waiters)->parked = 0;
}

void redisq_queue_end(lock_t *l) {
    timers_stop(l->mgr->timers, &redisq_of(l)->keep);
}

void redisq_prepare_op(lockmgr_t *m, backend_op_t *op) {
    op->queue_ms = m->conf->lease_ms;
    op->queue_foreign_ms = LOCKMGR_FAIR_FOREIGN_WAIT_MS;
}
