/* Read/write locks: Redisson's RReadWriteLock, many readers or one writer.
 * SPDX-License-Identifier: MIT
 *
 * A name's holds are of modes READ and WRITE; an owner may hold both (a
 * writer that downgrades). A read waits only for another owner's write,
 * a write for any hold, and readers at the head of the queue try
 * together: they share the lock, and one round trip each in a row would
 * make them wait for each other. */
#include "daemon/lock/kind.h"

static int rw_blocked(const lock_t *l, const lock_owner_t *o, lock_mode_t mode) {
    const hold_t *h;
    LIST_FOREACH(h, &l->holds, by_lock)
        if (mode != LOCK_MODE_READ || (h->mode == LOCK_MODE_WRITE && h->owner != o)) return 1;
    return 0;
}

static void rw_kick(lock_t *l) {
    wait_t *w = lock_queue_head(l);
    if (w->mode != LOCK_MODE_READ) {
        lock_kick_head(l);
        return;
    }
    for (; w != NULL && w->mode == LOCK_MODE_READ && l->attempts < LOCKMGR_READS_INFLIGHT;
         w = TAILQ_NEXT(w, link)) {
        if (w->in_flight || w->parked) continue;
        if (rw_blocked(l, w->owner, w->mode)) return;
        lock_attempt(l, w);
    }
}

/* A downgrade's read grant (the owner holds the write lock): a new hold
 * that waited for no one. */
static void downgrade_done(lock_op_t *op, lock_owner_t *o, hold_t *h) {
    lockmgr_t *m = op->mgr;
    lock_t *l = op->lock;
    const backend_result_t *res = &op->bop.res;
    (void)h; /* no read hold: that is why it came here */

    if (o == NULL) {
        /* The owner left: its release covered the holds it had, not this. */
        if (res->outcome == BACKEND_GRANTED || res->outcome == BACKEND_REENTERED)
            release_all(m, l->name, l->len, op->bop.owner, op->bop.lease_ms, LOCK_MODE_READ);
        return;
    }
    hold_t *w = lock_hold_of(l, o, LOCK_MODE_WRITE);
    if (res->outcome == BACKEND_TAKEN || res->outcome == BACKEND_WRONG_KIND || w == NULL) {
        /* Our write hold had ended in Redis without our knowing. */
        if (res->outcome == BACKEND_GRANTED || res->outcome == BACKEND_REENTERED)
            release_all(m, l->name, l->len, o->id, op->bop.lease_ms, LOCK_MODE_READ);
        if (w != NULL) lock_hold_lost(w, LOCK_LOST_EXPIRED);
        lock_kick(l); /* the wait below, refused or not, kicks no one */
        lock_start_wait(m, o, op->hdr.call, op->verb, LOCK_MODE_READ, op->name, op->len,
                        op->wait_ms, op->lease_ms, 0);
        return;
    }
    /* Limits are checked as the request came; other requests of the uid
     * may have been granted since (lock_acct_room). */
    lock_why_t why = lock_acct_room(m, o, 1);
    if (why != LOCK_WHY_NONE) {
        release_all(m, l->name, l->len, o->id, op->bop.lease_ms, LOCK_MODE_READ);
        lock_answer_error(m, o, op->hdr.call, LOCK_ERR_LIMIT, why, 0);
        return;
    }
    /* REENTERED: a field of ours a release has not cleared yet; the new
     * hold's release deletes it whole. */
    hold_t *r = lock_hold_new(l, o, w->fence, op->lease_ms, LOCK_MODE_READ);
    if (r == NULL) {
        release_all(m, l->name, l->len, o->id, op->bop.lease_ms, LOCK_MODE_READ);
        lock_answer_error(m, o, op->hdr.call, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        return;
    }
    m->stats.grants++;
    release_forget(m, l->name, l->len, o->id, LOCK_MODE_READ);
    watchdog_set_confirmed(r, op->sent_at, op->bop.lease_ms);
    lock_reply_t g = {.type = LOCK_REPLY_GRANTED, .fence = w->fence, .holds = 1};
    lock_answer(o, op->hdr.call, &g);
}

static void rw_acquire(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    int holds = lock_hold_of(l, o, req->mode) != NULL;
    if (!holds && req->mode == LOCK_MODE_WRITE && lock_hold_of(l, o, LOCK_MODE_READ) != NULL) {
        /* It would wait for its own read hold forever. */
        lock_answer_error(m, o, o->call_now, LOCK_ERR_KIND, LOCK_WHY_UPGRADE, 0);
        return;
    }
    if (holds || req->mode != LOCK_MODE_READ || lock_hold_of(l, o, LOCK_MODE_WRITE) == NULL) {
        lock_acquire(m, o, l, req);
        return;
    }
    /* A downgrade: queued behind waiters that wait for this owner's write
     * lock, it would never be granted. */
    if (!backend_available(m->backend, l->name, l->len)) {
        lock_answer_unavailable(m, o, o->call_now, l->name, l->len);
        return;
    }
    if (o->held_count >= m->conf->max_locks_per_client) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_MAX_LOCKS, 0);
        return;
    }
    if (lock_acct_new_holds(m, o, 1) != LOCK_WHY_NONE) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_MAX_LOCKS_UID, 0);
        return;
    }
    lock_op_t *op = lock_op_new(m, o, l, req, BACKEND_ACQUIRE, LOCK_MODE_READ, downgrade_done);
    if (op == NULL) return;
    /* A queued release of an older read hold would run after it. */
    release_forget(m, l->name, l->len, o->id, LOCK_MODE_READ);
    op->bop.lease_ms = req->lease_ms ? req->lease_ms : m->conf->lease_ms;
    backend_submit(m->backend, &op->bop);
}

/* Its protocol words (session.c makes its commands of them). */
static const lock_word_t rw_words[] = {
    {"RLOCK", LOCK_VERB_LOCK, LOCK_MODE_READ, 0, LOCK_WORD_AS_LOCK},
    {"TRYRLOCK", LOCK_VERB_TRYLOCK, LOCK_MODE_READ, 0, LOCK_WORD_AS_TRYLOCK},
    {"RUNLOCK", LOCK_VERB_UNLOCK, LOCK_MODE_READ, 0, LOCK_WORD_AS_UNLOCK},
    {"WLOCK", LOCK_VERB_LOCK, LOCK_MODE_WRITE, 0, LOCK_WORD_AS_LOCK},
    {"TRYWLOCK", LOCK_VERB_TRYLOCK, LOCK_MODE_WRITE, 0, LOCK_WORD_AS_TRYLOCK},
    {"WUNLOCK", LOCK_VERB_UNLOCK, LOCK_MODE_WRITE, 0, LOCK_WORD_AS_UNLOCK},
    {.word = NULL},
};

const lock_kind_t lock_kind_rw = {
    .name = "read/write",
    .words = rw_words,
    .text = {"held as a read/write lock (RLOCK, WLOCK, RUNLOCK, WUNLOCK)",
             "held as a read/write lock: RUNLOCK or WUNLOCK releases it", "read/write locks"},
    .cap = BACKEND_CAP_ONE_COPY,
    .watch = BACKEND_READ,
    .status = LOCK_STATUS_SHARED,
    .blocked = rw_blocked,
    .kick = rw_kick,
    .acquire = rw_acquire,
};
