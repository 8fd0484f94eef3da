/* Semaphores: a connection's permits, taken in FIFO order and given back in any number.
 * SPDX-License-Identifier: MIT
 *
 * A semaphore's waiters queue as a lock's do (lockmgr.c), but nothing
 * here blocks them: Redis counts the permits, and the head tries alone,
 * so that a large request is not starved by later small ones. A
 * connection has one hold per semaphore, whose count is its permits; in
 * Redis they are the ids <owner>:1 .. <owner>:count of the permit set
 * (scripts.c), renewed together by the watchdog. More permits extend the
 * hold with the next ids; a RELEASE gives back the top ones.
 *
 * The head always tries. Waiters behind it try at once too, in order,
 * while the permits Redis said were free after our last grant (plus what
 * we gave back since) cover them and those ahead in flight: one round
 * trip per grant in a row would hold the next back for nothing. Redis
 * runs them in order, so the head goes first; a refusal closes the window
 * until a grant opens it again. A waiter behind may thus be served before
 * a head refused in the same moment (another daemon took permits), but a
 * refused head keeps everyone behind it waiting from then on. */
#include <stdio.h>

#include "daemon/lock/internal.h"
#include "daemon/util/util.h"

void sem_prepare(lock_t *l, wait_t *w, backend_op_t *op) {
    const hold_t *h = hold_of(l, w->owner, LOCK_MODE_SEM);
    w->base = h ? h->count : 0;
    /* More permits join the hold: its ids share one lease, the longest of
     * those asked for, the watchdog being longer than any (as a reentry). */
    if (h == NULL) w->hold_lease = w->lease_ms;
    else if (h->lease_ms && w->lease_ms)
        w->hold_lease = h->lease_ms > w->lease_ms ? h->lease_ms : w->lease_ms;
    else w->hold_lease = 0;
    op->permits = w->permits;
    op->permit_base = w->base;
    op->lease_ms = w->hold_lease ? w->hold_lease : l->mgr->conf->lease_ms;
}

void sem_kick(lock_t *l) {
    long long room = l->sem_free;
    wait_t *w = TAILQ_FIRST(&l->q->waiters);
    for (int head = 1; w != NULL && l->attempts < LOCKMGR_READS_INFLIGHT;
         w = TAILQ_NEXT(w, link), head = 0) {
        room -= w->permits;
        if (w->in_flight) continue;
        if (!head && (w->parked || room < 0)) return;
        attempt(l, w);
    }
}

void sem_granted(lock_t *l, wait_t *w) {
    lockmgr_t *m = l->mgr;
    lock_owner_t *o = w->owner;
    hold_t *h = hold_of(l, o, LOCK_MODE_SEM);

    if ((h ? h->count : 0) != w->base) {
        /* The hold was lost while the acquire was in flight, and its ids
         * are being given back behind it: give these back too, and ask
         * again from what is left. */
        wait_undo(l, w, o->id);
        attempt(l, w);
        return;
    }
    if (h == NULL && (h = hold_new(l, o, 0, w->hold_lease, LOCK_MODE_SEM)) != NULL) h->count = 0;
    if (h == NULL) {
        wait_undo(l, w, o->id);
        answer_error(m, o, LOCK_ERR_LIMIT, "out of memory");
        wait_end(w);
        return;
    }
    h->count += w->permits;
    h->lease_ms = w->hold_lease;
    l->sem_free = (long long)w->acquire.res.fence;
    m->stats.grants++;
    histo_add(&m->wait_time, (uv_hrtime() - w->started_ns) / 1000);
    release_forget_permits(m, l->name, l->len, o->id, h->count);
    /* The acquire set every id of the hold to the lease. */
    watchdog_set_confirmed(h, w->sent_at, w->acquire.lease_ms);
    answer_value(o, h->count);
    wait_end(w);
}

void sem_unanswered(lock_t *l, const wait_t *w) {
    hold_t *h = hold_of(l, w->owner, LOCK_MODE_SEM);
    if (h != NULL && w->base > 0 && h->count == w->base)
        watchdog_limit(h, w->acquire.lease_ms, w->sent_at);
}

void sem_hold_gone(lock_t *l, wait_t *w) {
    hold_t *h = hold_of(l, w->owner, LOCK_MODE_SEM);
    if (h != NULL) {
        /* Its ids expired, were taken back or forced: what is left of
         * them goes, and the owner hears that it lost them. */
        release_hold(h);
        hold_lost(h, LOCK_LOST_EXPIRED);
    }
    attempt(l, w);
}

void sem_release(lockmgr_t *m, lock_owner_t *o, lock_t *l, uint32_t permits) {
    hold_t *h = hold_of(l, o, LOCK_MODE_SEM);
    if (h == NULL) {
        answer_notheld(m, o, l, LOCK_MODE_SEM);
        return;
    }
    if (permits > h->count) {
        snprintf(m->why, sizeof(m->why), "this connection holds %u permits of it", h->count);
        answer_error(m, o, LOCK_ERR_NOTHELD, m->why);
        return;
    }
    if (permits == h->count) {
        release_local(h);
        answer_value(o, 0);
        lock_maybe_free(l);
        return;
    }
    /* The top ids go; Redis sees the release before any acquire after it. */
    h->count -= permits;
    l->sem_free += permits;
    release_permits(m, l->name, l->len, o->id, hold_redis_lease(h), h->count, permits);
    answer_value(o, h->count);
    lock_kick(l);
}
