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

#include "daemon/lock/kind.h"
#include "daemon/util/util.h"

/* A semaphore's own, in its lock's area: the permits free in Redis after
 * our last grant, plus those we gave back since; 0 after a refusal
 * (sem_kick). */
typedef struct sem_lock_s {
    long long free;
} sem_lock_t;
LOCK_KIND_AREA_FITS(sem_lock_t, LOCK_KIND_LOCK_AREA);

/* ... and in each waiter's area (its permits are wait_t.count). */
typedef struct sem_waiter_s {
    uint32_t base;             /* the owner's permits when the attempt went */
    uint32_t hold_lease;       /* the hold's lease once granted (0 watchdog) */
} sem_waiter_t;
LOCK_KIND_AREA_FITS(sem_waiter_t, LOCK_KIND_WAIT_AREA);

static sem_lock_t *sem_lock(lock_t *l) {
    return lock_area(l);
}
static sem_waiter_t *sem_waiter(wait_t *w) {
    return lock_wait_area(w);
}
static const sem_waiter_t *sem_waiter_c(const wait_t *w) {
    return lock_wait_area_c(w);
}

/* A semaphore's attempt: its permits, its base, the hold's lease. */
static void sem_prepare(lock_t *l, wait_t *w, backend_op_t *op) {
    const hold_t *h = lock_hold_of(l, w->owner, LOCK_MODE_SEM);
    sem_waiter_t *sw = sem_waiter(w);
    sw->base = h ? h->count : 0;
    /* More permits join the hold: its ids share one lease, the longest of
     * those asked for, the watchdog being longer than any (as a reentry). */
    if (h == NULL) sw->hold_lease = w->lease_ms;
    else if (h->lease_ms && w->lease_ms)
        sw->hold_lease = h->lease_ms > w->lease_ms ? h->lease_ms : w->lease_ms;
    else sw->hold_lease = 0;
    op->count = w->count;
    op->base = sw->base;
    op->lease_ms = sw->hold_lease ? sw->hold_lease : l->mgr->conf->lease_ms;
}

/* Nothing here blocks a semaphore's waiter: Redis counts the permits. */
static int sem_blocked(const lock_t *l, const lock_owner_t *o, lock_mode_t mode) {
    (void)l;
    (void)o;
    (void)mode;
    return 0;
}

/* Permits given back to the count of those free, which saturates at
 * LOCKMGR_SEM_FREE_MAX (a grant sets it no higher). */
static void sem_free_add(lock_t *l, uint64_t permits) {
    sem_lock_t *s = sem_lock(l);
    long long room = (long long)LOCKMGR_SEM_FREE_MAX - s->free;
    s->free = (long long)permits >= room ? (long long)LOCKMGR_SEM_FREE_MAX
                                         : s->free + (long long)permits;
}

static void sem_kick(lock_t *l) {
    long long room = sem_lock(l)->free;
    wait_t *w = TAILQ_FIRST(&l->q->waiters);
    for (int head = 1; w != NULL && l->attempts < LOCKMGR_READS_INFLIGHT;
         w = TAILQ_NEXT(w, link), head = 0) {
        room -= w->count;
        if (w->in_flight) continue;
        if (!head && (w->parked || room < 0)) return;
        lock_attempt(l, w);
    }
}

static void sem_undo(lock_t *l, const wait_t *w, uint64_t owner) {
    release_part(l->mgr, l->name, l->len, owner, w->acquire.lease_ms, LOCK_MODE_SEM,
                 sem_waiter_c(w)->base, w->count);
}

/* Redis granted w's permits. */
static void sem_granted(lock_t *l, wait_t *w) {
    lockmgr_t *m = l->mgr;
    lock_owner_t *o = w->owner;
    hold_t *h = lock_hold_of(l, o, LOCK_MODE_SEM);
    const sem_waiter_t *sw = sem_waiter(w);

    if (w->acquire.res.fence > LOCKMGR_SEM_FREE_MAX) {
        /* The permits left, as Redis counted them, are no count (a value
         * set by hand, or a reply changed on the way): a bad reply. What
         * it may have granted goes back. */
        sem_undo(l, w, o->id);
        lock_answer_backend(m, o, w->hdr.call,
                            "semaphore's permits available out of range in Redis");
        lock_wait_end(w);
        return;
    }
    if ((h ? h->count : 0) != sw->base) {
        /* The hold was lost while the acquire was in flight, and its ids
         * are being given back behind it: give these back too, and ask
         * again from what is left. */
        sem_undo(l, w, o->id);
        lock_attempt(l, w);
        return;
    }
    if (h == NULL && (h = lock_hold_new(l, o, 0, sw->hold_lease, LOCK_MODE_SEM)) != NULL)
        h->count = 0;
    if (h == NULL) {
        sem_undo(l, w, o->id);
        lock_answer_error(m, o, w->hdr.call, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        lock_wait_end(w);
        return;
    }
    h->count += w->count;
    h->lease_ms = sw->hold_lease;
    sem_lock(l)->free = (long long)w->acquire.res.fence;
    m->stats.grants++;
    histo_add(&m->wait_time, (uv_hrtime() - w->started_ns) / 1000);
    release_forget_below(m, l->name, l->len, o->id, LOCK_MODE_SEM, h->count);
    /* The acquire set every id of the hold to the lease. */
    watchdog_set_confirmed(h, w->sent_at, w->acquire.lease_ms);
    lock_answer_value(o, w->hdr.call, h->count);
    lock_wait_end(w);
}

/* A refusal closes the window: the next waiters wait for the head. */
static void sem_refused(lock_t *l, wait_t *w) {
    (void)w;
    sem_lock(l)->free = 0;
}

/* A waiter behind the head does not try again at once on a wake-up: the
 * refused head goes first (sem_kick lets it try once that is settled). */
static void sem_taken(lock_t *l, wait_t *w, const backend_result_t *res) {
    lock_wait_taken(l, w, res, w->woken && w == lock_queue_head(l));
}

/* w's acquire got no answer (or was not acknowledged) but may have run:
 * it set the earlier ids to its lease, which may end before the hold's. */
static void sem_unanswered(lock_t *l, const wait_t *w) {
    hold_t *h = lock_hold_of(l, w->owner, LOCK_MODE_SEM);
    const sem_waiter_t *sw = sem_waiter_c(w);
    if (h != NULL && sw->base > 0 && h->count == sw->base)
        watchdog_limit(h, w->acquire.lease_ms, w->sent_at);
}

/* Redis found the owner's earlier permits gone. */
static void sem_hold_gone(lock_t *l, wait_t *w) {
    hold_t *h = lock_hold_of(l, w->owner, LOCK_MODE_SEM);
    if (h != NULL) {
        /* Its ids expired, were taken back or forced: what is left of
         * them goes, and the owner hears that it lost them. */
        release_hold(h);
        lock_hold_lost(h, LOCK_LOST_EXPIRED);
    }
    lock_attempt(l, w);
}

static void sem_released(lock_t *l, hold_t *h) {
    sem_free_add(l, h->count);
}

static void sem_release_hold(const hold_t *h) {
    const lock_t *l = h->lock;
    release_part(l->mgr, l->name, l->len, h->owner->id, lock_hold_redis_lease(h), LOCK_MODE_SEM,
                 0, h->count);
}

/* 1 with the answer given when permits is not 1 to the most. */
static int permits_bad(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req) {
    if (req->count != 0 && req->count <= LOCKMGR_SEM_PERMITS_MAX) return 0;
    lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_PERMITS_RANGE,
                      LOCKMGR_SEM_PERMITS_MAX);
    return 1;
}

/* ACQUIRE, TRYACQUIRE: more permits are a wait like the first ones,
 * whoever holds. */
static void sem_acquire(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    const hold_t *h = lock_hold_of(l, o, req->mode);
    if (permits_bad(m, o, req)) return;
    if ((h ? h->count : 0) + req->count > LOCKMGR_SEM_PERMITS_MAX) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_PERMITS_MAX,
                          LOCKMGR_SEM_PERMITS_MAX);
        return;
    }
    lock_start_wait(m, o, o->call_now, req->verb, req->mode, req->name, req->len, req->wait_ms,
                    req->lease_ms, req->count);
}

/* RELEASE <name> <permits>. */
static void sem_release(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    uint32_t permits = req->count;
    if (permits_bad(m, o, req)) return;
    hold_t *h = lock_hold_of(l, o, LOCK_MODE_SEM);
    if (h == NULL) {
        lock_answer_notheld(m, o, o->call_now, l, LOCK_MODE_SEM);
        return;
    }
    if (permits > h->count) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_NOTHELD, LOCK_WHY_PERMITS_HELD, h->count);
        return;
    }
    if (permits == h->count) {
        lock_release_local(h);
        lock_answer_value(o, o->call_now, 0);
        lock_maybe_free(l);
        return;
    }
    /* The top ids go; Redis sees the release before any acquire after it. */
    h->count -= permits;
    sem_free_add(l, permits);
    release_part(m, l->name, l->len, o->id, lock_hold_redis_lease(h), LOCK_MODE_SEM, h->count,
                 permits);
    lock_answer_value(o, o->call_now, h->count);
    lock_kick(l);
}

/* SEMINIT: 1 set now, 0 set already. */
static void seminit_done(lock_op_t *op, lock_owner_t *o, hold_t *h) {
    const backend_result_t *res = &op->bop.res;
    (void)h;
    if (o == NULL) return;
    if (res->outcome == BACKEND_WRONG_KIND) {
        lock_answer_kind(op->mgr, o, op->hdr.call, LOCK_WHY_HELD_AS,
                         lock_mode_of_backend(res->held), op->name,
                         op->len);
        return;
    }
    lock_answer_value(o, op->hdr.call, res->holds);
}

/* The semaphore's own requests (lock_request_t.op). */
enum { SEM_OP_INIT = 0 }; /* SEMINIT <name> <permits> */

static void sem_request(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    if (req->verb != LOCK_VERB_OWN || req->op != SEM_OP_INIT) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_NONE, 0);
        return;
    }
    if (!backend_available(m->backend, req->name, req->len)) {
        lock_answer_unavailable(m, o, o->call_now, req->name, req->len);
        return;
    }
    lock_op_t *op = lock_op_new(m, o, l, req, BACKEND_INIT, LOCK_MODE_SEM, seminit_done);
    if (op == NULL) return;
    op->bop.count = req->count;
    backend_submit(m->backend, &op->bop);
}

/* Its protocol words (session.c makes its commands of them). */
static const lock_word_t sem_words[] = {
    {"SEMINIT", LOCK_VERB_OWN, LOCK_MODE_SEM, SEM_OP_INIT, LOCK_WORD_TURNS},
    {"ACQUIRE", LOCK_VERB_LOCK, LOCK_MODE_SEM, 0, LOCK_WORD_AS_LOCK},
    {"TRYACQUIRE", LOCK_VERB_TRYLOCK, LOCK_MODE_SEM, 0, LOCK_WORD_AS_TRYLOCK},
    {"RELEASE", LOCK_VERB_UNLOCK, LOCK_MODE_SEM, 0, LOCK_WORD_AS_UNLOCK},
    {.word = NULL},
};

const lock_kind_t lock_kind_sem = {
    .name = "semaphore",
    .words = sem_words,
    .text = {"a semaphore (SEMINIT, ACQUIRE, RELEASE)",
             "a semaphore: RELEASE gives its permits back", "semaphores"},
    .cap = BACKEND_CAP_ONE_COPY,
    .watch = BACKEND_SEM,
    .status = LOCK_STATUS_PERMITS,
    .joins = 1,
    .no_holder = 1,
    .blocked = sem_blocked,
    .kick = sem_kick,
    .prepare = sem_prepare,
    .granted = sem_granted,
    .refused = sem_refused,
    .taken = sem_taken,
    .unanswered = sem_unanswered,
    .hold_gone = sem_hold_gone,
    .undo = sem_undo,
    .released = sem_released,
    .release_hold = sem_release_hold,
    .acquire = sem_acquire,
    .unlock = sem_release,
    .request = sem_request,
};
