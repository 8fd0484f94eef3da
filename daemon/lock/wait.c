/* Waiting and granting: a name's FIFO of waiters, their attempts in Redis, wake-ups and grants.
 * SPDX-License-Identifier: MIT
 *
 * Every kind's waiters go through here; the kind's table (kind.h) says
 * who may try when (kick, blocked), what an attempt carries (prepare),
 * and what a grant or a refusal does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/kind.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

static void on_retry(timers_entry_t *t);
static void on_yield_end(timers_entry_t *t);
static void on_attempt(backend_op_t *op);

/* ---- the queue ------------------------------------------------------------------------ */

wait_t *lock_queue_head(const lock_t *l) {
    return l->q ? TAILQ_FIRST(&l->q->waiters) : NULL;
}

static void wait_unlink(wait_t *w) {
    lock_t *l = w->lock;
    if (!w->queued) return;
    TAILQ_REMOVE(&l->q->waiters, w, link);
    w->queued = 0;
    if (w->whole != NULL) return; /* the larger request counts itself */
    l->mgr->waiting--;
    if (w->owner != NULL) lock_acct_waiting(w->owner, -1);
}

void lock_watch(lock_t *l, backend_mode_t mode, uint64_t owner) {
    queue_t *q = l->q;
    q->subscribed = 1;
    q->watch_mode = mode;
    q->watch_owner = owner;
    backend_watch(l->mgr->backend, l->name, l->len, mode, owner, lock_on_watch, l);
}

void lock_unwatch(lock_t *l) {
    queue_t *q = l->q;
    if (!q->subscribed) return;
    q->subscribed = 0;
    backend_unwatch(l->mgr->backend, l->name, l->len, q->watch_mode, q->watch_owner);
}

static void queue_stop(lock_t *l) {
    queue_t *q = l->q;
    timers_stop(l->mgr->timers, &q->retry);
    timers_stop(l->mgr->timers, &q->yield);
    if (l->kind->queue_end) l->kind->queue_end(l);
}

/* The queue emptied: no more wake-ups needed. A place this daemon still
 * has in the name's wake queue goes too: the release that named it would
 * hold every other daemon's waiters for a whole fallback. */
static void queue_idle(lock_t *l) {
    queue_t *q = l->q;
    if (q == NULL || !TAILQ_EMPTY(&q->waiters)) return;
    if (q->wake_queued) release_leave(l->mgr, l->name, l->len, 0, LOCK_WAKE_MODE);
    queue_stop(l);
    lock_unwatch(l);
    l->q = NULL;
    pool_put(&l->mgr->queue_pool, q);
}

/* The first waiter makes the queue; NULL on no memory. */
static queue_t *queue_get(lock_t *l) {
    if (l->q != NULL) return l->q;
    queue_t *q = pool_get(&l->mgr->queue_pool);
    if (q == NULL) return NULL;
    TAILQ_INIT(&q->waiters);
    q->lock = l;
    l->q = q;
    return q;
}

void lock_queue_free(lock_t *l) {
    lockmgr_t *m = l->mgr;
    wait_t *w;
    if (l->q == NULL) return;
    while ((w = TAILQ_FIRST(&l->q->waiters)) != NULL) {
        TAILQ_REMOVE(&l->q->waiters, w, link);
        timers_stop(m->timers, &w->deadline);
        free(w);
    }
    queue_stop(l);
    free(l->q);
    l->q = NULL;
}

void lock_wait_end(wait_t *w) {
    lock_t *l = w->lock;
    const lock_kind_t *k = lock_kind_of(w->mode);
    int was_head = lock_queue_head(l) == w;
    wait_unlink(w);
    timers_stop(l->mgr->timers, &w->deadline);
    if (k->leave) k->leave(l, w, was_head);
    lock_pending_end(w->owner, &w->hdr);
    w->owner = NULL;
    /* The head left, or a waiter of a shared mode that may have been
     * holding back others */
    int kick = was_head || lock_modes[w->mode].shared;
    if (!w->in_flight) pool_put(&l->mgr->wait_pool, w);
    if (kick) lock_kick(l);
    queue_idle(l);
}

/* ---- attempts and grants ------------------------------------------------------------- */

void lock_wait_withdraw(wait_t *w) {
    if (!w->in_flight || w->granted || w->undone) return;
    lock_undo(w->lock, w, w->owner_id);
    w->undone = 1;
}

int lock_blocked(const lock_t *l, const lock_owner_t *o, lock_mode_t mode) {
    const lock_kind_t *k = lock_kind_of(mode);
    return k->blocked ? k->blocked(l, o, mode) : !LIST_EMPTY(&l->holds);
}

void lock_undo(lock_t *l, const wait_t *w, uint64_t owner) {
    const lock_kind_t *k = lock_kind_of(w->mode);
    if (k->undo) k->undo(l, w, owner);
    else release_all(l->mgr, l->name, l->len, owner, w->lease_ms, w->mode);
}

void lock_grant(lock_t *l, wait_t *w, uint64_t fence) {
    lockmgr_t *m = l->mgr;
    lock_owner_t *o = w->owner;
    hold_t *h = lock_hold_new(l, o, fence, w->lease_ms, w->mode);
    if (h == NULL) {
        lock_undo(l, w, o->id);
        lock_answer_error(m, o, w->hdr.call, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        lock_wait_end(w);
        return;
    }
    m->stats.grants++;
    histo_add(&m->wait_time, (uv_hrtime() - w->started_ns) / 1000);
    release_forget(m, l->name, l->len, o->id, w->mode);
    watchdog_set_confirmed(h, w->sent_at, w->acquire.lease_ms);
    lock_reply_t r = {.type = LOCK_REPLY_GRANTED, .fence = fence, .holds = 1};
    lock_answer(o, w->hdr.call, &r);
    w->granted = 1;
    lock_wait_end(w);
}

/* w's last attempt got no answer, or its grant was undone for want of
 * replicas: it may have run all the same. */
static int attempt_unanswered(const wait_t *w) {
    return w->acquire.res.status == BACKEND_DOWN || w->acquire.res.status == BACKEND_UNACKED;
}

void lock_attempt(lock_t *l, wait_t *w) {
    lockmgr_t *m = l->mgr;
    const lock_kind_t *k = lock_kind_of(w->mode);
    if (attempt_unanswered(w)) w->unanswered = 1; /* its answer is gone with the next */
    l->attempts++;
    w->woken = 0;
    w->in_flight = 1;
    w->parked = 0;
    LIST_INSERT_HEAD(&l->flying, w, flight);
    /* The retry turn stays: waiters parked on it (a refused head behind
     * which another waiter asks, a refused reader ahead of one that is
     * granted) would sleep past the holder's lease. A turn that comes
     * while this attempt is in flight lets no one try twice. */
    w->sent_at = timers_now(m->timers);
    backend_op_t *op = &w->acquire;
    lock_op_init(op, BACKEND_ACQUIRE, w->mode, l->name, l->len, w->owner->id, on_attempt);
    op->lease_ms = w->lease_ms ? w->lease_ms : m->conf->lease_ms;
    op->wake_leave = k->wake_one && l->q->wake_queued;
    if (k->prepare) k->prepare(l, w, op);
    backend_submit(m->backend, op);
}

void lock_kick_head(lock_t *l) {
    wait_t *w = lock_queue_head(l);
    if (l->attempts != 0 || lock_blocked(l, w->owner, w->mode)) return;
    const lock_kind_t *k = lock_kind_of(w->mode);
    if (k->attempt) k->attempt(l, w);
    else lock_attempt(l, w);
}

void lock_kick_all(lock_t *l) {
    wait_t *w;
    TAILQ_FOREACH(w, &l->q->waiters, link) {
        if (l->attempts >= LOCKMGR_READS_INFLIGHT) return;
        if (!w->in_flight && !w->parked) lock_attempt(l, w);
    }
}

void lock_leave_queue(lock_t *l, const wait_t *w) {
    /* A grant took the place, a try once takes none; an attempt still in
     * flight, or one that got no answer, may have made one. */
    if (w->granted || w->once) return;
    if (!(w->tried || w->in_flight || w->unanswered || attempt_unanswered(w))) return;
    release_leave(l->mgr, l->name, l->len, w->owner_id, w->mode);
}

/* Lets the waiters try if nothing stands in their way locally. */
void lock_kick(lock_t *l) {
    wait_t *w = lock_queue_head(l);
    if (w == NULL || l->mgr->stopping || l->mgr->frozen || l->q->yielding) return;
    /* While Redis is away, queued requests keep waiting; they try again
     * when it is back (on_backend_state). */
    if (!backend_available(l->mgr->backend, l->name, l->len)) return;
    l->kind->kick(l);
}

void lock_unpark(lock_t *l) {
    wait_t *w;
    if (l->q == NULL) return;
    if (l->kind->head_wakes) {
        if ((w = lock_queue_head(l)) != NULL) w->parked = 0;
        return;
    }
    TAILQ_FOREACH(w, &l->q->waiters, link) w->parked = 0;
}

static void on_retry(timers_entry_t *t) {
    queue_t *q = container_of(t, queue_t, retry);
    lock_unpark(q->lock);
    lock_kick(q->lock);
}

void lock_retry_at(lock_t *l, long long ttl_ms) {
    timers_start(l->mgr->timers, &l->q->retry,
                 ttl_ms >= 0 ? (uint64_t)ttl_ms + 1 : LOCKMGR_NO_TTL_RETRY_MS, on_retry);
}

/* The yield has its own timer: an attempt refused meanwhile (a
 * semaphore's, a reader's) re-arms the retry timer, and the queue would
 * then sleep until the holder's lease ended. */
static void on_yield_end(timers_entry_t *t) {
    queue_t *q = container_of(t, queue_t, yield);
    q->yielding = 0;
    lock_unpark(q->lock);
    lock_kick(q->lock);
}

/* Local release of a hold's last count: the next waiter may go at once;
 * the Redis release goes first on the same connection, so the next
 * acquire sees it done. */
void lock_release_local(hold_t *h) {
    lock_t *l = h->lock;
    lockmgr_t *m = l->mgr;
    const lock_kind_t *k = lock_kind_of(h->mode);
    if (k->released) k->released(l, h);
    release_hold(h);
    lock_hold_drop(h);
    if (l->remote_interest && l->q != NULL) {
        /* Handing the lock straight to the next local waiter keeps it
         * taken in Redis, and waiters of other daemons, woken by our last
         * release, would never get it. Leave it free for a moment. */
        l->remote_interest = 0;
        l->q->yielding = 1;
        timers_start(m->timers, &l->q->yield, LOCKMGR_YIELD_MS, on_yield_end);
        return;
    }
    lock_kick(l);
}

void lock_on_watch(void *data, backend_event_t ev) {
    lock_t *l = data;
    wait_t *f;
    if (l->q == NULL) return; /* cannot happen: unwatched with the queue */
    f = lock_queue_head(l);
    /* A watch that came into force after another daemon's turn began: a
     * try now would take that turn from it. */
    if (ev == BACKEND_WATCHING && l->q->turn_passed) ev = BACKEND_PASSED;
    l->q->turn_passed = 0;
    if (ev == BACKEND_PASSED && f != NULL && lock_kind_of(f->mode)->wake_one) {
        /* Another daemon's turn: it tries, not us. Should it never take
         * the lock (dead, paused, cut off, no longer waiting), we try
         * once this has passed since the release; each release that
         * names another starts it again. An acquire of ours in flight
         * either ran after the release, or put us in the queue before
         * it, behind the one named: no try again for it. */
        timers_start(l->mgr->timers, &l->q->retry, l->mgr->conf->command_timeout_ms, on_retry);
        return;
    }
    /* Each acquire in flight may have run before the release: one more try. */
    LIST_FOREACH(f, &l->flying, flight) f->woken = 1;
    lock_unpark(l);
    lock_kick(l);
}

void lock_wait_taken(lock_t *l, wait_t *w, const backend_result_t *res, int may_retry) {
    if (may_retry) {
        lock_attempt(l, w);
        return;
    }
    w->parked = 1;
    if (res->ttl_ms == LOCK_TTL_TURN) {
        /* Free, but a release of ours named another daemon's turn: as
         * after a release that names another (lock_on_watch), we try
         * once command_timeout_ms has passed, or on a release. */
        if (!l->q->subscribed) {
            lock_watch(l, l->kind->watch, 0);
            l->q->turn_passed = 1;
        }
        timers_start(l->mgr->timers, &l->q->retry, l->mgr->conf->command_timeout_ms, on_retry);
        return;
    }
    if (!l->q->subscribed) {
        /* Once the watch is in force, its confirmation triggers one more
         * try, so a release in between is not missed. */
        lock_watch(l, l->kind->watch, 0);
    }
    /* Expiry publishes nothing: try again when the holder's lease ends. */
    lock_retry_at(l, res->ttl_ms);
}

/* An acquire of a wake_one kind came back: if Redis refused it, or it got
 * no answer (it may have run), this daemon may be in the name's wake
 * queue. The queue's next grant takes it out, or its end (queue_idle);
 * with no queue left (its waiter gone), out now. A quorum's daemons take
 * no place there. */
static void wake_mark(lock_t *l, const backend_result_t *res) {
    if (!(l->mgr->backend->caps & BACKEND_CAP_ONE_COPY)) return;
    if (res->status == BACKEND_OK ? res->outcome != BACKEND_TAKEN : res->status == BACKEND_FAILED)
        return;
    if (l->q != NULL) l->q->wake_queued = 1;
    else release_leave(l->mgr, l->name, l->len, 0, LOCK_WAKE_MODE);
}

/* The acquire of a waiter that is gone (or of a stopping daemon) came
 * back: undo a grant it may have got. */
static void attempt_orphaned(lock_t *l, wait_t *w, const backend_result_t *res) {
    lockmgr_t *m = l->mgr;
    /* HOLD_GONE changed nothing only for a kind whose script says it. */
    int nothing = res->status == BACKEND_OK &&
                  (res->outcome == BACKEND_TAKEN || res->outcome == BACKEND_WRONG_KIND ||
                   (res->outcome == BACKEND_HOLD_GONE && lock_kind_of(w->mode)->hold_gone));
    if (!w->undone && !nothing) lock_undo(l, w, w->owner_id);
    if (w->owner != NULL) {
        /* A place in a fair lock's queue it may have taken just now goes
         * with it (its kind's leave). */
        if (res->status != BACKEND_FAILED &&
            (res->status != BACKEND_OK || res->outcome == BACKEND_TAKEN))
            w->tried = 1;
        lock_answer_error(m, w->owner, w->hdr.call, LOCK_ERR_BACKEND, LOCK_WHY_SHUTDOWN, 0);
        lock_wait_end(w);
    } else {
        pool_put(&m->wait_pool, w);
    }
    if (m->stopping) lockmgr_shutdown_step(m);
    lock_kick(l);
    lock_maybe_free(l);
}

/* The acquire got no answer, or an error. */
static void attempt_failed(lock_t *l, wait_t *w, const backend_result_t *res) {
    lockmgr_t *m = l->mgr;
    const lock_kind_t *k = lock_kind_of(w->mode);
    /* The script may have run: make sure no grant is left behind. */
    if (res->status != BACKEND_FAILED) {
        lock_undo(l, w, w->owner->id);
        if (k->unanswered) k->unanswered(l, w);
    }
    if (res->status == BACKEND_UNACKED && !w->once) {
        /* Not replicated in time, so undone: a LOCK waits on, a TRYLOCK
         * until its wait runs out, and both try again soon. */
        snprintf(w->unacked, sizeof(w->unacked), "%s", res->error);
        w->parked = 1;
        timers_start(m->timers, &l->q->retry, LOCKMGR_UNACKED_RETRY_MS, on_retry);
        return;
    }
    if (w->tried && res->status != BACKEND_FAILED && res->status != BACKEND_UNACKED) {
        /* A waiter that was already waiting keeps waiting (a fair lock's
         * keeps asking, or its place in Redis ends). */
        w->parked = 1;
        if (k->requeued) k->requeued(l, w);
        return;
    }
    log_debug("acquire %s: %s", l->name, res->error);
    lock_answer_backend(m, w->owner, w->hdr.call, res->error);
    lock_wait_end(w);
    lock_maybe_free(l);
}

/* An answer the waiter's kind cannot get (HOLD_GONE where its script
 * never says it: a reply rewritten on its way) tells nothing of the name
 * and may hide a grant: that is undone, and the waiter tries again soon,
 * as after a grant not replicated in time; a TRYLOCK of 0 is answered. */
static void attempt_unusable(lock_t *l, wait_t *w, const char *what) {
    lockmgr_t *m = l->mgr;
    log_debug("acquire %s: %s", l->name, what);
    lock_undo(l, w, w->owner->id);
    if (w->once) {
        lock_answer_backend(m, w->owner, w->hdr.call, what);
        lock_wait_end(w);
        return;
    }
    /* It may have taken a place in Redis's queue (a fair lock's): its
     * leave must go if it stops waiting. */
    w->tried = 1;
    snprintf(w->unacked, sizeof(w->unacked), "%s", what);
    timers_start(m->timers, &l->q->retry, LOCKMGR_UNACKED_RETRY_MS, on_retry);
}

/* 1 if w's grant may stand. Limits are checked as a request comes, but a
 * uid's requests wait and fly at once: a grant that would make a new hold
 * past the connection's or the uid's limit (others of the uid were
 * granted meanwhile) is given back in Redis and answered ERR LIMIT. */
static int grant_fits(lock_t *l, wait_t *w) {
    lock_why_t why;
    if (lock_hold_of(l, w->owner, w->mode) != NULL) return 1; /* joins its hold */
    if (lock_kind_of(w->mode)->holds_nothing) return 1;
    if ((why = lock_acct_room(l->mgr, w->owner, 1)) == LOCK_WHY_NONE) return 1;
    lock_undo(l, w, w->owner->id);
    lock_answer_error(l->mgr, w->owner, w->hdr.call, LOCK_ERR_LIMIT, why, 0);
    lock_wait_end(w);
    return 0;
}

static void on_attempt(backend_op_t *op) {
    wait_t *w = container_of(op, wait_t, acquire);
    lock_t *l = w->lock;
    lockmgr_t *m = l->mgr;
    const lock_kind_t *k = lock_kind_of(w->mode);
    const backend_result_t *res = &op->res;
    w->in_flight = 0;
    LIST_REMOVE(w, flight);
    l->attempts--;
    if (k->wake_one) wake_mark(l, res);

    if (w->owner == NULL || m->stopping) {
        attempt_orphaned(l, w, res);
        return;
    }
    if (res->status != BACKEND_OK) {
        attempt_failed(l, w, res);
        return;
    }
    switch (res->outcome) {
    case BACKEND_GRANTED:
        if (op->wake_leave) l->q->wake_queued = 0;
        if (!grant_fits(l, w)) break;
        if (k->granted) k->granted(l, w);
        else lock_grant(l, w, res->fence);
        break;
    case BACKEND_HOLD_GONE:
        if (k->hold_gone) k->hold_gone(l, w);
        else attempt_unusable(l, w, LOCK_UNEXPECTED_HOLD_GONE);
        break;
    case BACKEND_REENTERED:
        /* A stale field of this owner (a release that has not got through
         * yet): clear it, then try again behind it. */
        release_all(m, l->name, l->len, w->owner->id, w->lease_ms, w->mode);
        lock_attempt(l, w);
        break;
    case BACKEND_WRONG_KIND:
        lock_answer_kind(m, w->owner, w->hdr.call, LOCK_WHY_HELD_AS,
                         lock_mode_of_backend(res->held), l->name,
                         l->len);
        lock_wait_end(w);
        break;
    case BACKEND_TAKEN:
        if (k->refused) k->refused(l, w);
        w->ttl_ms = res->ttl_ms;
        w->unacked[0] = '\0'; /* someone holds it: that is why now */
        if (w->once) {
            lock_answer_timeout(m, w->owner, w->hdr.call,
                                res->ttl_ms == LOCK_TTL_TURN ? -1 : res->ttl_ms);
            lock_wait_end(w);
            break;
        }
        w->tried = 1;
        if (k->taken) k->taken(l, w, res);
        else lock_wait_taken(l, w, res, w->woken);
        break;
    }
    lock_maybe_free(l);
}

void lock_enqueue_in_order(wait_t *w, uint64_t arrived_ns) {
    queue_t *q = w->lock->q;
    wait_t *x;
    w->started_ns = arrived_ns;
    TAILQ_FOREACH(x, &q->waiters, link)
        if (x != w && x->started_ns > arrived_ns && !x->in_flight) break;
    if (x == NULL || x == w) return;
    TAILQ_REMOVE(&q->waiters, w, link);
    TAILQ_INSERT_BEFORE(x, w, link);
}

/* ---- a new wait ----------------------------------------------------------------------- */

wait_t *lock_enqueue(lock_t *l, lock_owner_t *o, lock_mode_t mode, uint32_t lease_ms,
                     pending_t *whole) {
    lockmgr_t *m = l->mgr;
    wait_t *w = pool_get(&m->wait_pool);
    if (w == NULL) return NULL;
    if (queue_get(l) == NULL) {
        pool_put(&m->wait_pool, w);
        return NULL;
    }
    w->hdr.type = PENDING_WAIT;
    w->owner = o;
    w->owner_id = o->id;
    w->lock = l;
    w->mode = mode;
    w->lease_ms = lease_ms;
    w->ttl_ms = -1;
    w->started_ns = uv_hrtime();
    TAILQ_INSERT_TAIL(&l->q->waiters, w, link);
    w->queued = 1;
    w->whole = whole;
    return w;
}

static void on_wait_deadline(timers_entry_t *t) {
    wait_t *w = container_of(t, wait_t, deadline);
    lock_t *l = w->lock;
    if (w->tried && w->ttl_ms == LOCK_TTL_TURN && LIST_EMPTY(&l->holds) && !w->in_flight &&
        lock_queue_head(l) == w) {
        /* Its last refusal gave the turn to another daemon, whose lease
         * it never learnt: one last try, as a TRYLOCK of 0, answers with
         * that lease (or grants, should the turn have gone unused). */
        w->once = 1;
        w->tried = 0;
        lock_attempt(l, w);
        return;
    }
    long long ttl = !LIST_EMPTY(&l->holds) && !l->kind->no_holder
                        ? lock_local_ttl(l)
                        : (w->tried && w->ttl_ms != LOCK_TTL_TURN ? w->ttl_ms : -1);
    if (w->unacked[0] != '\0' && LIST_EMPTY(&l->holds))
        lock_answer_backend(l->mgr, w->owner, w->hdr.call, w->unacked);
    else
        lock_answer_timeout(l->mgr, w->owner, w->hdr.call, ttl);
    lock_wait_end(w);
    lock_maybe_free(l);
}

/* 1 if nobody waits for l, or a shared mode asks and only that mode
 * waits: it goes ahead of no one it could not share with. */
static int only_sharers_queued(const lock_t *l, lock_mode_t mode) {
    const wait_t *w = lock_queue_head(l);
    if (w != NULL && !lock_modes[mode].shared) return 0;
    for (; w != NULL; w = TAILQ_NEXT(w, link))
        if (w->mode != mode) return 0;
    return 1;
}

void lock_start_wait(lockmgr_t *m, lock_owner_t *o, void *call, lock_verb_t verb,
                     lock_mode_t mode, const char *name, size_t len, uint32_t wait_ms,
                     uint32_t lease_ms, uint32_t count) {
    const lock_kind_t *k = lock_kind_of(mode);
    lock_t *l = lock_find(m, name, len);
    /* A wait that joins the owner's hold (its kind's joins), or of a kind
     * whose waits hold nothing, makes no new hold. */
    int joins = k->holds_nothing || (k->joins && lock_hold_of(l, o, mode) != NULL);
    if (o->held_count >= m->conf->max_locks_per_client && !joins) {
        lock_answer_error(m, o, call, LOCK_ERR_LIMIT, LOCK_WHY_MAX_LOCKS, 0);
        return;
    }
    lock_why_t why = LOCK_WHY_NONE;
    if (m->waiting >= m->conf->max_waiters) why = LOCK_WHY_MAX_WAITERS;
    else if (!joins) why = lock_acct_new_holds(m, o, 1);
    if (why == LOCK_WHY_NONE) why = lock_acct_new_wait(m, o);
    if (why != LOCK_WHY_NONE) {
        lock_answer_error(m, o, call, LOCK_ERR_LIMIT, why, 0);
        return;
    }
    if (!backend_available(m->backend, name, len)) {
        lock_answer_unavailable(m, o, call, name, len);
        return;
    }
    l = lock_get(m, name, len);
    wait_t *w = l ? pool_get(&m->wait_pool) : NULL;
    if (w == NULL) {
        lock_answer_error(m, o, call, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        if (l) lock_maybe_free(l);
        return;
    }
    lock_take_kind(l, k);
    int once = verb == LOCK_VERB_TRYLOCK && wait_ms == 0;
    if (once && (lock_blocked(l, o, mode) || !only_sharers_queued(l, mode))) {
        /* Someone here is ahead: no try, to keep first come first served. */
        pool_put(&m->wait_pool, w);
        lock_answer_timeout(m, o, call, k->no_holder ? -1 : lock_local_ttl(l));
        return;
    }
    if (queue_get(l) == NULL) {
        pool_put(&m->wait_pool, w);
        lock_answer_error(m, o, call, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        lock_maybe_free(l);
        return;
    }
    w->owner = o;
    w->owner_id = o->id;
    w->lock = l;
    w->once = once;
    w->mode = mode;
    w->count = count;
    w->lease_ms = lease_ms;
    w->ttl_ms = -1;
    w->started_ns = uv_hrtime();
    TAILQ_INSERT_TAIL(&l->q->waiters, w, link);
    w->queued = 1;
    m->waiting++;
    lock_acct_waiting(o, 1);
    lock_pending_start(o, &w->hdr, PENDING_WAIT, call);
    if (verb == LOCK_VERB_TRYLOCK && wait_ms > 0)
        timers_start(m->timers, &w->deadline, wait_ms, on_wait_deadline);
    lock_kick(l);
}
