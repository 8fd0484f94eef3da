/* Requests on a name: the checks every request passes, reentry, UNLOCK, RENEW, STATUS, WHO, FORCEUNLOCK.
 * SPDX-License-Identifier: MIT
 *
 * A request for a lock of some kind goes to its kind's table (kind.h);
 * what is the same for every kind is here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/lock/kind.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

/* ---- one backend call per request ----------------------------------------------------- */

static void on_op(backend_op_t *bop);

lock_op_t *lock_op_new(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req,
                       backend_op_type_t kind, lock_mode_t mode, lock_op_done_cb done) {
    lock_op_t *op = zalloc(sizeof(*op) + req->len + 1);
    if (op == NULL) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        return NULL;
    }
    const hold_t *h = lock_hold_of(l, o, mode);
    op->mode = mode;
    op->mgr = m;
    op->owner = o;
    op->lock = l;
    op->verb = req->verb;
    op->wait_ms = req->wait_ms;
    op->lease_ms = req->lease_ms;
    op->sent_at = timers_now(m->timers);
    op->grant_id = h ? h->grant_id : 0;
    memcpy(op->name, req->name, req->len);
    op->len = req->len;
    if (l) l->busy++;
    lock_pending_start(o, &op->hdr, PENDING_OP, o->call_now);
    lock_op_init(&op->bop, kind, mode, op->name, op->len, o->id, on_op);
    const lock_kind_t *k = lock_kind_of(mode);
    if (k->prepare_op) k->prepare_op(m, &op->bop);
    op->done = done;
    return op;
}

void lock_op_orphan(lock_op_t *op) {
    op->owner = NULL;
}

/* A reentry that found the owner's hold gone may have taken a place in a
 * queueing kind's queue in Redis (a fair lock's reentry asks as a waiter
 * does), which no wait of the owner's keeps or leaves: it goes, as a
 * waiter's does. */
static void reentry_leave(const lock_op_t *op) {
    if (op->bop.type == BACKEND_ACQUIRE && !op->bop.once && lock_kind_of(op->mode)->queues)
        release_leave(op->mgr, op->name, op->len, op->bop.owner, op->mode);
}

/* The op's owner still holds the lock under the same grant. */
static hold_t *op_hold(const lock_op_t *op) {
    hold_t *h = op->owner ? lock_hold_of(op->lock, op->owner, op->mode) : NULL;
    return h && h->grant_id == op->grant_id ? h : NULL;
}

/* Every op's answer: an error goes to its owner, anything else to its
 * done function. */
static void on_op(backend_op_t *bop) {
    lock_op_t *op = container_of(bop, lock_op_t, bop);
    lock_owner_t *o = op->owner;
    hold_t *h = op_hold(op);

    if (op->lock) op->lock->busy--;
    lock_pending_end(o, &op->hdr);
    if (bop->res.status != BACKEND_OK) {
        /* It may have run (a RENEW not replicated in time did) and
         * shortened the lease. */
        if (h != NULL && (bop->type == BACKEND_ACQUIRE || bop->type == BACKEND_RENEW) &&
            (bop->res.status == BACKEND_DOWN ||
             (bop->res.status == BACKEND_UNACKED && bop->type == BACKEND_RENEW)))
            watchdog_limit(h, bop->lease_ms, op->sent_at);
        if (bop->res.status == BACKEND_UNACKED && bop->type == BACKEND_ACQUIRE) {
            /* A reentry found our hold gone and took the lock anew, but
             * that grant was not replicated: undo it; the hold is lost. */
            if (h != NULL) {
                lock_hold_lost(h, LOCK_LOST_EXPIRED);
                lock_kick(op->lock); /* waiters here held back by it */
            }
            release_all(op->mgr, op->name, op->len, bop->owner, bop->lease_ms, op->mode);
        } else if (bop->res.status == BACKEND_DOWN && bop->type == BACKEND_ACQUIRE && h == NULL) {
            /* A downgrade's (or a reentry's whose hold ended meanwhile) may
             * have granted a hold nobody has: the owner's one request in
             * flight was this, so it has no newer grant to lose. */
            release_all(op->mgr, op->name, op->len, bop->owner, bop->lease_ms, op->mode);
        }
        if (bop->res.status != BACKEND_FAILED) reentry_leave(op); /* it may have run */
        if (o != NULL) lock_answer_backend(op->mgr, o, op->hdr.call, bop->res.error);
    } else {
        op->done(op, o, h);
    }
    if (op->lock) lock_maybe_free(op->lock);
    free(op);
}

/* ---- LOCK and TRYLOCK: a wait, or a reentry ------------------------------------------ */

static void reentry_done(lock_op_t *op, lock_owner_t *o, hold_t *h) {
    lockmgr_t *m = op->mgr;
    lock_t *l = op->lock;
    const backend_result_t *res = &op->bop.res;

    /* Refused, it took a place: it goes, and a wait that goes on asks
     * again, right behind the leave. */
    if (res->outcome == BACKEND_TAKEN) reentry_leave(op);
    if (o == NULL) return; /* the owner left; its release covers every hold */
    if (res->outcome == BACKEND_REENTERED && h != NULL) {
        h->count++;
        m->stats.reentries++;
        h->lease_ms = op->keep_lease;
        watchdog_set_confirmed(h, op->sent_at, op->bop.lease_ms);
        lock_reply_t r = {.type = LOCK_REPLY_GRANTED, .fence = h->fence, .holds = h->count};
        lock_answer(o, op->hdr.call, &r);
        return;
    }
    /* Our hold had ended in Redis without our knowing. Waiters here that
     * it held back may go: a wait of ours below, refused (a limit) or
     * not, kicks no one. */
    if (h != NULL) lock_hold_lost(h, LOCK_LOST_EXPIRED);
    if (res->outcome == BACKEND_GRANTED || res->outcome == BACKEND_REENTERED)
        release_all(m, l->name, l->len, o->id, op->bop.lease_ms, op->mode);
    lock_kick(l);
    if (res->outcome == BACKEND_WRONG_KIND) {
        lock_answer_kind(m, o, op->hdr.call, LOCK_WHY_HELD_AS, lock_mode_of_backend(res->held),
                         l->name, l->len);
        return;
    }
    /* A fresh grant: with the lease this request asked for. */
    lock_start_wait(m, o, op->hdr.call, op->verb, op->mode, op->name, op->len, op->wait_ms,
                    op->lease_ms, 0);
}

void lock_acquire(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    hold_t *h = lock_hold_of(l, o, req->mode);
    if (h == NULL) {
        lock_start_wait(m, o, o->call_now, req->verb, req->mode, req->name, req->len, req->wait_ms,
                        req->lease_ms, 0);
        return;
    }
    if (!backend_available(m->backend, l->name, l->len)) {
        lock_answer_unavailable(m, o, o->call_now, l->name, l->len);
        return;
    }
    lock_op_t *op = lock_op_new(m, o, l, req, BACKEND_ACQUIRE, req->mode, reentry_done);
    if (op == NULL) return;
    /* TRYFAIRLOCK 0 takes no place, even when the hold is gone */
    op->bop.once = req->verb == LOCK_VERB_TRYLOCK && req->wait_ms == 0;
    /* The hold gets the longest of the modes asked for, the watchdog being
     * longer than any lease: no lease on either side makes it a watchdog
     * hold, two leases give the longer one, from now. */
    op->keep_lease = h->lease_ms && req->lease_ms
                         ? (h->lease_ms > req->lease_ms ? h->lease_ms : req->lease_ms)
                         : 0;
    op->bop.lease_ms = op->keep_lease ? op->keep_lease : m->conf->lease_ms;
    backend_submit(m->backend, &op->bop);
}

/* ---- UNLOCK ------------------------------------------------------------------------- */

/* One hold less, sent and forgotten: Redis keeps the count for Redisson's sake. */
typedef struct drop_s {
    backend_op_t bop;
    lock_t *lock;              /* holds a busy reference */
} drop_t;

static void on_drop(backend_op_t *bop) {
    drop_t *d = container_of(bop, drop_t, bop);
    if (bop->res.status != BACKEND_OK) log_debug("unlock step: %s", bop->res.error);
    d->lock->busy--;
    lock_maybe_free(d->lock);
    free(d);
}

/* The owner's hold that an UNLOCK of mode releases: of that mode, or of
 * a mode released by it (UNLOCK releases a fair lock too). */
static hold_t *hold_released_by(const lock_t *l, const lock_owner_t *o, lock_mode_t mode) {
    hold_t *h = lock_hold_of(l, o, mode);
    if (h != NULL || l == NULL) return h;
    LIST_FOREACH(h, &l->holds, by_lock)
        if (h->owner == o && lock_modes[h->mode].released_by == mode) return h;
    return NULL;
}

void lock_unlock(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    hold_t *h = hold_released_by(l, o, req->mode);
    if (h == NULL) {
        lock_answer_notheld(m, o, o->call_now, l, req->mode);
        return;
    }
    lock_answer_value(o, o->call_now, lock_unlock_hold(m, o, l, h));
}

long long lock_unlock_hold(lockmgr_t *m, lock_owner_t *o, lock_t *l, hold_t *h) {
    if (h->count > 1) {
        drop_t *d = zalloc(sizeof(*d));
        h->count--;
        if (d != NULL) { /* without it Redis keeps one hold more until the release */
            d->lock = l;
            l->busy++;
            lock_op_init(&d->bop, BACKEND_DROP, h->mode, l->name, l->len, o->id, on_drop);
            backend_submit(m->backend, &d->bop);
        }
        return h->count;
    }
    /* The last hold: answered now; the release reaches Redis in order
     * before any later acquire, and is retried while Redis is away. */
    lock_release_local(h);
    lock_maybe_free(l);
    return 0;
}

/* ---- RENEW -------------------------------------------------------------------------- */

static void renew_done(lock_op_t *op, lock_owner_t *o, hold_t *h) {
    lockmgr_t *m = op->mgr;
    const backend_result_t *res = &op->bop.res;

    if (o == NULL) return;
    if (h == NULL) {
        lock_answer_error(m, o, op->hdr.call, LOCK_ERR_NOTHELD, LOCK_WHY_NONE, 0);
    } else if (res->renewal == BACKEND_RENEWED) {
        h->lease_ms = op->keep_lease;
        watchdog_set_confirmed(h, op->sent_at, op->bop.lease_ms);
        lock_answer_value(o, op->hdr.call, op->bop.lease_ms);
    } else {
        /* Gone where it counts, it may linger elsewhere (a semaphore's
         * other ids): delete what is left of it, as the watchdog does. */
        release_hold(h);
        lock_hold_lost(h, res->renewal == BACKEND_FORCED ? LOCK_LOST_FORCED : LOCK_LOST_EXPIRED);
        lock_answer_error(m, o, op->hdr.call, LOCK_ERR_NOTHELD, LOCK_WHY_NONE, 0);
        lock_kick(op->lock);
    }
}

static void do_renew(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    hold_t *h = lock_hold_mine(l, o);
    if (h == NULL) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_NOTHELD, LOCK_WHY_NONE, 0);
        return;
    }
    lock_op_t *op = lock_op_new(m, o, l, req, BACKEND_RENEW, h->mode, renew_done);
    if (op == NULL) return;
    op->bop.count = h->count;
    if (h->lease_ms) {
        /* A hold with a lease: reset to the lease given, which becomes its
         * own, or to its own. */
        op->keep_lease = req->lease_ms ? req->lease_ms : h->lease_ms;
        op->bop.lease_ms = op->keep_lease;
    } else {
        /* A watchdog hold: renewed now, as the watchdog would, and kept in
         * watchdog mode; a lease given is ignored. A lease of its own could
         * only end it sooner than its connection, or outlive it. */
        op->keep_lease = 0;
        op->bop.lease_ms = m->conf->lease_ms;
    }
    backend_submit(m->backend, &op->bop);
}

/* ---- STATUS ------------------------------------------------------------------------- */

static void status_done(lock_op_t *op, lock_owner_t *o, hold_t *h) {
    const backend_result_t *res = &op->bop.res;
    lock_mode_t redis_mode = lock_mode_of_backend(res->held);
    int held = res->ttl_ms != -2 && lock_kind_of(redis_mode)->status != LOCK_STATUS_NONE;
    /* The forms of what Redis has, and of our hold. */
    int form = held ? (int)lock_kind_of(redis_mode)->status : -1;
    int mine = h != NULL ? (int)lock_kind_of(h->mode)->status : -1;

    if (o == NULL) return;
    if (form == LOCK_STATUS_PERMITS || mine == LOCK_STATUS_PERMITS) {
        /* Permits: what Redis has available, and what this owner holds as
         * far as this daemon knows (the watchdog checks them). */
        lock_reply_t r = {.type = LOCK_REPLY_SEM,
                          .holders = form == LOCK_STATUS_PERMITS ? res->holders : 0,
                          .holds = mine == LOCK_STATUS_PERMITS ? h->count : 0};
        lock_answer(o, op->hdr.call, &r);
        return;
    }
    /* Our hold (op->mode's) is alive if Redis has it, in that form. */
    if (h != NULL && (!held || res->holds <= 0 ||
                      (mine == LOCK_STATUS_SHARED) != (form == LOCK_STATUS_SHARED))) {
        lock_hold_lost(h, LOCK_LOST_EXPIRED);
        lock_kick(op->lock);
        h = NULL;
    }
    if (form == LOCK_STATUS_SHARED) {
        lock_reply_t r = {.type = LOCK_REPLY_RW, .mode = redis_mode, .holders = res->holders,
                          .ttl_ms = res->ttl_ms,
                          .holds = h != NULL && h->mode == redis_mode ? h->count : 0};
        lock_answer(o, op->hdr.call, &r);
        return;
    }
    if (h != NULL) {
        lock_reply_t r = {.type = LOCK_REPLY_MINE, .holds = h->count, .ttl_ms = res->ttl_ms,
                          .fence = h->fence};
        lock_answer(o, op->hdr.call, &r);
        return;
    }
    lock_reply_t r = {.type = held ? LOCK_REPLY_TAKEN : LOCK_REPLY_FREE, .ttl_ms = res->ttl_ms};
    lock_answer(o, op->hdr.call, &r);
}

/* ---- WHO ----------------------------------------------------------------------------- */

/* WHO a local holder: from memory, with its pid and uid. */
static void who_local(lockmgr_t *m, lock_owner_t *o, lock_t *l) {
    const hold_t *h = lock_hold_first(l);
    lock_reply_t r = {.type = LOCK_REPLY_HELD, .ttl_ms = lock_local_ttl(l),
                      .holder_host = m->host, .holder_dlockd_pid = (long long)getpid(),
                      .holder_pid = h->owner->pid > 0 ? (long long)h->owner->pid : -1,
                      .holder_uid = (long long)h->owner->uid};
    lock_answer(o, o->call_now, &r);
}

/* WHO a holder elsewhere: Redis's answer, with its dlockd as it
 * registered. */
static void who_done(lock_op_t *op, lock_owner_t *o, hold_t *h) {
    const backend_result_t *res = &op->bop.res;
    (void)h;
    if (o == NULL) return;
    if (res->ttl_ms == -2) {
        lock_reply_t r = {.type = LOCK_REPLY_FREE, .ttl_ms = -2};
        lock_answer(o, op->hdr.call, &r);
        return;
    }
    if (res->ttl_ms == -3) {
        lock_answer_kind(op->mgr, o, op->hdr.call, LOCK_WHY_NO_HOLDER,
                         lock_mode_of_backend(res->held),
                         op->name, op->len);
        return;
    }
    char host[BACKEND_WHO_DAEMON_MAX];
    long long pid;
    backend_who_daemon(&op->who, host, sizeof(host), &pid);
    lock_reply_t r = {.type = LOCK_REPLY_HELD, .ttl_ms = res->ttl_ms, .holder_host = host,
                      .holder_dlockd_pid = pid, .holder_pid = -1, .holder_uid = -1};
    lock_answer(o, op->hdr.call, &r);
}

static void do_who(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    if (lock_in_use(l) && l->kind->no_holder) {
        lock_answer_kind(m, o, o->call_now, LOCK_WHY_NO_HOLDER, lock_kind_mode(l->kind), l->name,
                         l->len);
        return;
    }
    if (l != NULL && lock_hold_first(l) != NULL) {
        who_local(m, o, l);
        return;
    }
    lock_op_t *op = lock_op_new(m, o, NULL, req, BACKEND_WHO, LOCK_MODE_ANY, who_done);
    if (op == NULL) return;
    op->bop.who = &op->who;
    backend_submit(m->backend, &op->bop);
}

/* ---- FORCEUNLOCK --------------------------------------------------------------------- */

/* The lock is gone from Redis: a local holder has lost it, and the local
 * waiters try at once. Those behind a holder of another daemon (or of a
 * Redisson client) hold none here to lose: they would wait for the gone
 * holder's lease, as the script's message reaches only those watching. */
static void force_done(lock_op_t *op, lock_owner_t *o, hold_t *h) {
    lock_t *l = lock_find(op->mgr, op->name, op->len);
    (void)h;
    if (op->bop.res.removed && l != NULL) {
        while (lock_hold_first(l) != NULL) lock_hold_lost(lock_hold_first(l), LOCK_LOST_FORCED);
        lock_kick(l);
        lock_maybe_free(l);
    }
    if (o != NULL) lock_answer_value(o, op->hdr.call, op->bop.res.removed);
}

static void do_force(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req) {
    log_info("client %llu (uid %u) FORCEUNLOCK %.*s", (unsigned long long)o->id,
             (unsigned)o->uid, (int)req->len, req->name);
    lock_op_t *op = lock_op_new(m, o, NULL, req, BACKEND_FORCE, LOCK_MODE_ANY, force_done);
    if (op == NULL) return;
    backend_submit(m->backend, &op->bop);
}

/* ---- every request -------------------------------------------------------------------- */

/* 1 with the answer given when the request's kind cannot be had for the
 * name: the topology lacks it, or the name is held as another kind. */
static int kind_refused(lockmgr_t *m, lock_owner_t *o, const lock_t *l,
                        const lock_request_t *req) {
    const lock_kind_t *k = lock_kind_of(req->mode);
    if (k->cap && !(m->backend->caps & k->cap)) {
        lock_reply_t r = {.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_KIND,
                          .why = LOCK_WHY_UNSUPPORTED, .mode = req->mode,
                          .detail = m->backend->type->name};
        lock_answer(o, o->call_now, &r);
        return 1;
    }
    if (lock_in_use(l) && l->kind != k) {
        lock_answer_kind(m, o, o->call_now, LOCK_WHY_HELD_AS, lock_kind_mode(l->kind), l->name,
                         l->len);
        return 1;
    }
    return 0;
}

void lock_request(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req) {
    /* A request of many names (MULTI) is about no one lock. */
    lock_t *l = req->nnames ? NULL : lock_find(m, req->name, req->len);
    const lock_kind_t *k = lock_kind_of(req->mode);

    /* Giving back what the owner has needs nothing of the name (RESIGN). */
    if (req->verb == LOCK_VERB_OWN && req->op < 32 && (k->own_any >> req->op & 1)) {
        k->request(m, o, l, req);
        return;
    }
    if (m->stopping) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_BACKEND, LOCK_WHY_SHUTDOWN, 0);
        return;
    }
    uint32_t max = m->backend->lease_max_ms;
    if (max && req->lease_ms > max &&
        (req->verb == LOCK_VERB_LOCK || req->verb == LOCK_VERB_TRYLOCK ||
         req->verb == LOCK_VERB_RENEW)) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_LEASE_MAX, max);
        return;
    }
    switch (req->verb) {
    case LOCK_VERB_LOCK:
    case LOCK_VERB_TRYLOCK:
        if (kind_refused(m, o, l, req)) return;
        if (k->acquire) k->acquire(m, o, l, req);
        else lock_acquire(m, o, l, req);
        return;
    case LOCK_VERB_UNLOCK:
        if (k->unlock) k->unlock(m, o, l, req);
        else lock_unlock(m, o, l, req);
        return;
    case LOCK_VERB_RENEW:
        do_renew(m, o, l, req);
        return;
    case LOCK_VERB_STATUS: {
        const hold_t *h = lock_hold_mine(l, o);
        lock_op_t *op = lock_op_new(m, o, l, req, BACKEND_STATUS,
                                    h ? h->mode : LOCK_MODE_ANY, status_done);
        if (op == NULL) return;
        backend_submit(m->backend, &op->bop);
        return;
    }
    case LOCK_VERB_WHO:
        do_who(m, o, l, req);
        return;
    case LOCK_VERB_FORCE:
        do_force(m, o, req);
        return;
    default:
        /* A request of one kind's own (SEMINIT). */
        if (kind_refused(m, o, l, req)) return;
        if (k->request) k->request(m, o, l, req);
        else lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_NONE, 0);
        return;
    }
}
