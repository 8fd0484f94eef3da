/* The lock manager: requests, owners, the lock table, FIFO waiters and grants with fences.
 * SPDX-License-Identifier: MIT */
#include "lockmgr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/lock/internal.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

typedef struct op_s op_t;

/* What an op does with Redis's answer: o is NULL when the owner left, h the
 * owner's hold if it still holds the lock under the same grant. */
typedef void (*op_done_cb)(op_t *op, lock_owner_t *o, hold_t *h);

/* One backend call for a request on a held lock, or STATUS and FORCE. */
struct op_s {
    pending_t hdr;
    backend_op_t bop;
    lockmgr_t *mgr;
    lock_owner_t *owner;       /* NULL once the owner left */
    lock_t *lock;              /* holds a busy reference, or NULL */
    lock_req_kind_t kind;
    lock_mode_t mode;          /* the hold it is about */
    uint64_t grant_id;         /* of the owner's hold when sent */
    uint32_t lease_ms;         /* as asked for */
    uint32_t keep_lease;       /* reentry, RENEW: the hold's lease_ms once done */
    uint64_t sent_at;
    uint32_t wait_ms;          /* to retry a reentry as a fresh wait */
    op_done_cb done;           /* on success, and on any answer once the owner left */
    backend_who_t who;         /* WHO's answer */
    size_t len;
    char name[];
};

/* One hold less, sent and forgotten: Redis keeps the count for Redisson's sake. */
typedef struct drop_s {
    backend_op_t bop;
    lock_t *lock;              /* holds a busy reference */
} drop_t;

static const char *const loss_names[] = {"expired", "forced", "backend"};

static void start_wait(lockmgr_t *m, lock_owner_t *o, lock_req_kind_t kind, lock_mode_t mode,
                       const char *name, size_t len, uint32_t wait_ms, uint32_t lease_ms,
                       uint32_t permits);

/* ---- replies ------------------------------------------------------------------ */

void answer(lock_owner_t *o, const lock_reply_t *r) {
    if (o == NULL) return;
    o->pending = NULL;
    if (o->now != NULL) { /* inside lockmgr_request: answered at once */
        *o->now = *r;
        o->answered = 1;
        return;
    }
    if (o->dropped) return;
    o->in_callback++;
    o->on_reply(o->data, r);
    o->in_callback--;
}

void answer_value(lock_owner_t *o, long long v) {
    lock_reply_t r = {.kind = LOCK_REPLY_VALUE, .value = v};
    answer(o, &r);
}

static void answer_grant(lock_owner_t *o, uint64_t fence, long long holds) {
    lock_reply_t r = {.kind = LOCK_REPLY_GRANTED, .fence = fence, .holds = holds};
    answer(o, &r);
}

static void answer_timeout(lockmgr_t *m, lock_owner_t *o, long long ttl_ms) {
    lock_reply_t r = {.kind = LOCK_REPLY_TIMEOUT, .ttl_ms = ttl_ms};
    m->stats.timeouts++;
    answer(o, &r);
}

void answer_error(lockmgr_t *m, lock_owner_t *o, lock_err_t err, const char *detail) {
    lock_reply_t r = {.kind = LOCK_REPLY_ERROR, .err = err, .detail = detail};
    if (err == LOCK_ERR_BACKEND) m->stats.backend_errors++;
    answer(o, &r);
}

/* ERR BACKEND with why the backend cannot serve name now; the text lives
 * in m until the next such answer. */
static void answer_unavailable(lockmgr_t *m, lock_owner_t *o, const char *name, size_t len) {
    backend_describe(m->backend, name, len, m->why, sizeof(m->why));
    answer_error(m, o, LOCK_ERR_BACKEND, m->why);
}

static void on_done_timer(timers_entry_t *t) {
    lockmgr_t *m = container_of(t, lockmgr_t, done_timer);
    if (m->done) m->done(m, m->done_data);
}

/* One thing shutdown waited for is over. The last one calls done from a
 * timer, not from the Redis reply that ended it: done may free us. */
void lockmgr_shutdown_step(lockmgr_t *m) {
    if (m->stopping && --m->shutdown_left == 0)
        timers_start(m->timers, &m->done_timer, 0, on_done_timer);
}

/* ---- the lock table -------------------------------------------------------------- */

lock_t *lock_find(lockmgr_t *m, const char *name, size_t len) {
    hmap_node_t *n = hmap_get(&m->locks, name, len);
    return n ? container_of(n, lock_t, node) : NULL;
}

lock_t *lock_get(lockmgr_t *m, const char *name, size_t len) {
    lock_t *l = lock_find(m, name, len);
    if (l != NULL) return l;
    l = pool_get_sized(&m->lock_pool, sizeof(*l) + len + 1);
    if (l == NULL) return NULL;
    l->mgr = m;
    LIST_INIT(&l->holds);
    LIST_INIT(&l->flying);
    memcpy(l->name, name, len);
    l->len = len;
    l->node.key = l->name;
    l->node.len = len;
    hmap_put(&m->locks, &l->node);
    return l;
}

void lock_maybe_free(lock_t *l) {
    if (!LIST_EMPTY(&l->holds) || l->q != NULL || l->attempts || l->busy) return;
    hmap_del(&l->mgr->locks, &l->node);
    pool_put_sized(&l->mgr->lock_pool, l, sizeof(*l) + l->len + 1);
}

hold_t *hold_first(const lock_t *l) {
    return LIST_FIRST(&l->holds);
}

hold_t *hold_of(const lock_t *l, const lock_owner_t *o, lock_mode_t mode) {
    hold_t *h;
    if (l == NULL) return NULL;
    LIST_FOREACH(h, &l->holds, by_lock)
        if (h->owner == o && h->mode == mode) return h;
    return NULL;
}

/* The owner's hold of any mode, its write hold first. */
static hold_t *hold_mine(const lock_t *l, const lock_owner_t *o) {
    hold_t *h = hold_of(l, o, LOCK_MODE_WRITE);
    if (h == NULL) h = hold_of(l, o, LOCK_MODE_READ);
    if (h == NULL) h = hold_of(l, o, LOCK_MODE_SEM);
    if (h == NULL) h = hold_of(l, o, LOCK_MODE_FAIR);
    return h ? h : hold_of(l, o, LOCK_MODE_MUTEX);
}

/* Someone here holds or waits for l: its kind is set until then. */
int lock_in_use(const lock_t *l) {
    return l != NULL && (!LIST_EMPTY(&l->holds) || l->q != NULL || l->attempts > 0);
}

lock_kind_t lock_kind_of(lock_mode_t mode) {
    return mode == LOCK_MODE_MUTEX  ? LOCK_KIND_MUTEX
           : mode == LOCK_MODE_SEM  ? LOCK_KIND_SEM
           : mode == LOCK_MODE_FAIR ? LOCK_KIND_FAIR
                                    : LOCK_KIND_RW;
}

/* The channel a lock's releases come on. */
static backend_mode_t watch_mode(const lock_t *l) {
    return l->kind == LOCK_KIND_MUTEX  ? BACKEND_MUTEX
           : l->kind == LOCK_KIND_SEM  ? BACKEND_SEM
           : l->kind == LOCK_KIND_FAIR ? BACKEND_FAIR
                                       : BACKEND_READ;
}

/* 1 if a local hold keeps a waiter of mode for o from trying: a read waits
 * only for another owner's write, a semaphore's waiter for nothing here
 * (Redis counts the permits), anything else for any hold. */
static int blocked(const lock_t *l, const lock_owner_t *o, lock_mode_t mode) {
    const hold_t *h;
    if (mode == LOCK_MODE_SEM) return 0;
    LIST_FOREACH(h, &l->holds, by_lock)
        if (mode != LOCK_MODE_READ || (h->mode == LOCK_MODE_WRITE && h->owner != o)) return 1;
    return 0;
}

uint32_t hold_redis_lease(const hold_t *h) {
    if (h->redis_lease_ms) return h->redis_lease_ms;
    return h->lease_ms ? h->lease_ms : h->lock->mgr->conf->lease_ms;
}

uint32_t hold_valid(const lockmgr_t *m, uint32_t lease_ms) {
    uint32_t drift = backend_drift(m->backend, lease_ms);
    return lease_ms > drift ? lease_ms - drift : 0;
}

/* Remaining lease of the local holder, or -1. */
static long long local_ttl(const lock_t *l) {
    const hold_t *h = hold_first(l);
    if (h == NULL) return -1;
    uint64_t end = h->confirmed_at + hold_valid(l->mgr, hold_redis_lease(h)),
             now = timers_now(l->mgr->timers);
    return end > now ? (long long)(end - now) : 0;
}

/* ---- holds ------------------------------------------------------------------------- */

hold_t *hold_new(lock_t *l, lock_owner_t *o, uint64_t fence, uint32_t lease_ms,
                 lock_mode_t mode) {
    lockmgr_t *m = l->mgr;
    hold_t *h;
    if (!l->first_used) {
        h = &l->first;
        memset(h, 0, sizeof(*h));
        l->first_used = 1;
    } else if ((h = zalloc(sizeof(*h))) == NULL) {
        return NULL;
    }
    h->lock = l;
    h->owner = o;
    h->count = 1;
    h->mode = mode;
    h->fence = fence;
    h->lease_ms = lease_ms;
    h->grant_id = ++m->grant_seq;
    h->granted_ns = uv_hrtime();
    LIST_INSERT_HEAD(&l->holds, h, by_lock);
    LIST_INSERT_HEAD(&o->holds, h, by_owner);
    o->held_count++;
    m->held++;
    return h;
}

void hold_drop(hold_t *h) {
    lockmgr_t *m = h->lock->mgr;
    LIST_REMOVE(h, by_lock);
    LIST_REMOVE(h, by_owner);
    h->owner->held_count--;
    watchdog_remove(h);
    timers_stop(m->timers, &h->expiry);
    m->held--;
    histo_add(&m->hold_time, (uv_hrtime() - h->granted_ns) / 1000);
    if (h == &h->lock->first) h->lock->first_used = 0;
    else free(h);
}

void hold_lost(hold_t *h, lock_loss_t why) {
    lock_t *l = h->lock;
    lock_owner_t *o = h->owner;
    log_debug("lock %s of client %llu lost: %s", l->name, (unsigned long long)o->id,
             loss_names[why]);
    hold_drop(h);
    l->mgr->stats.lost++;
    l->mgr->stats.lost_by[why]++;
    if (o->dropped) return;
    o->in_callback++;
    o->on_event(o->data, l->name, l->len, why);
    o->in_callback--;
}

static void on_retry(timers_entry_t *t);
static void on_yield_end(timers_entry_t *t);

/* Local release of a hold's last count: the next waiter may go at once;
 * the Redis release goes first on the same connection, so the next
 * acquire sees it done. */
void release_local(hold_t *h) {
    lock_t *l = h->lock;
    lockmgr_t *m = l->mgr;
    if (h->mode == LOCK_MODE_SEM) l->sem_free += h->count;
    release_hold(h);
    hold_drop(h);
    if (l->remote_interest && l->q != NULL) {
        /* Handing the lock straight to the next local waiter keeps it
         * taken in Redis, and waiters of other daemons, woken by our last
         * release, would never get it. Leave it free for a moment. */
        l->remote_interest = 0;
        l->q->yielding = 1;
        timers_start(m->timers, &l->q->yield, LOCKMGR_YIELD_MS, on_yield_end);
        return;
    }
    /* A fair lock's head may be Redis's too: it asks right behind our
     * release rather than waiting for the wake-up on its channel. */
    if (l->kind == LOCK_KIND_FAIR && l->q != NULL && !TAILQ_EMPTY(&l->q->waiters))
        TAILQ_FIRST(&l->q->waiters)->parked = 0;
    lock_kick(l);
}

/* ---- waiting and granting ------------------------------------------------------------ */

static void wait_unlink(wait_t *w) {
    lock_t *l = w->lock;
    if (!w->queued) return;
    TAILQ_REMOVE(&l->q->waiters, w, link);
    w->queued = 0;
    l->mgr->waiting--;
}

/* The queue emptied: no more wake-ups needed. */
static void queue_idle(lock_t *l) {
    queue_t *q = l->q;
    if (q == NULL || !TAILQ_EMPTY(&q->waiters)) return;
    timers_stop(l->mgr->timers, &q->retry);
    timers_stop(l->mgr->timers, &q->yield);
    timers_stop(l->mgr->timers, &q->keep);
    if (q->subscribed)
        backend_unwatch(l->mgr->backend, l->name, l->len, watch_mode(l), q->watch_owner);
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

static wait_t *queue_head(const lock_t *l) {
    return l->q ? TAILQ_FIRST(&l->q->waiters) : NULL;
}

void wait_end(wait_t *w) {
    lock_t *l = w->lock;
    int was_head = queue_head(l) == w;
    wait_unlink(w);
    timers_stop(l->mgr->timers, &w->deadline);
    if (w->mode == LOCK_MODE_FAIR) fair_leave(l, w, was_head);
    if (w->owner && w->owner->pending == &w->hdr) w->owner->pending = NULL;
    w->owner = NULL;
    /* The head left, or a reader that may have been holding back others */
    int kick = was_head || w->mode == LOCK_MODE_READ;
    if (!w->in_flight) pool_put(&l->mgr->wait_pool, w);
    if (kick) lock_kick(l);
    queue_idle(l);
}

static void grant(lock_t *l, wait_t *w, uint64_t fence) {
    lockmgr_t *m = l->mgr;
    lock_owner_t *o = w->owner;
    hold_t *h = hold_new(l, o, fence, w->lease_ms, w->mode);
    if (h == NULL) {
        wait_undo(l, w, o->id);
        answer_error(m, o, LOCK_ERR_LIMIT, "out of memory");
        wait_end(w);
        return;
    }
    m->stats.grants++;
    histo_add(&m->wait_time, (uv_hrtime() - w->started_ns) / 1000);
    release_forget(m, l->name, l->len, o->id, w->mode);
    watchdog_set_confirmed(h, w->sent_at, w->acquire.lease_ms);
    answer_grant(o, fence, 1);
    w->granted = 1;
    wait_end(w);
}

static void on_attempt(backend_op_t *op);

void wait_undo(lock_t *l, const wait_t *w, uint64_t owner) {
    if (w->mode == LOCK_MODE_SEM)
        release_permits(l->mgr, l->name, l->len, owner, w->acquire.lease_ms, w->base,
                        w->permits);
    else
        release_all(l->mgr, l->name, l->len, owner, w->lease_ms, w->mode);
}

void attempt(lock_t *l, wait_t *w) {
    lockmgr_t *m = l->mgr;
    l->attempts++;
    w->woken = 0;
    w->in_flight = 1;
    w->parked = 0;
    LIST_INSERT_HEAD(&l->flying, w, flight);
    timers_stop(m->timers, &l->q->retry);
    w->sent_at = timers_now(m->timers);
    backend_op_t *op = &w->acquire;
    op->kind = BACKEND_ACQUIRE;
    op->mode = (backend_mode_t)w->mode;
    op->name = l->name;
    op->len = l->len;
    op->owner = w->owner->id;
    op->lease_ms = w->lease_ms ? w->lease_ms : m->conf->lease_ms;
    if (w->mode == LOCK_MODE_SEM) sem_prepare(l, w, op);
    if (w->mode == LOCK_MODE_FAIR) fair_prepare(l, w, op);
    op->cb = on_attempt;
    backend_submit(m->backend, op);
}

/* Lets the head try if nothing stands in its way locally; readers at the
 * head try together: they share the lock, and one round trip each in a
 * row would make them wait for each other. */
void lock_kick(lock_t *l) {
    wait_t *w = queue_head(l);
    if (w == NULL || l->mgr->stopping || l->q->yielding) return;
    /* While Redis is away, queued requests keep waiting; they try again
     * when it is back (on_backend_state). */
    if (!backend_available(l->mgr->backend, l->name, l->len)) return;
    if (w->mode == LOCK_MODE_SEM) {
        sem_kick(l);
        return;
    }
    if (w->mode == LOCK_MODE_FAIR) {
        fair_kick(l);
        return;
    }
    if (w->mode != LOCK_MODE_READ) {
        if (l->attempts == 0 && !blocked(l, w->owner, w->mode)) attempt(l, w);
        return;
    }
    for (; w != NULL && w->mode == LOCK_MODE_READ && l->attempts < LOCKMGR_READS_INFLIGHT;
         w = TAILQ_NEXT(w, link)) {
        if (w->in_flight || w->parked) continue;
        if (blocked(l, w->owner, w->mode)) return;
        attempt(l, w);
    }
}

/* A wake-up or a retry turn: readers Redis refused may try again; of a
 * fair lock's waiters, the head (the others wait for their turn in Redis,
 * keeping their places). */
static void unpark(lock_t *l) {
    wait_t *w;
    if (l->q == NULL) return;
    if (l->kind == LOCK_KIND_FAIR) {
        if ((w = queue_head(l)) != NULL) w->parked = 0;
        return;
    }
    TAILQ_FOREACH(w, &l->q->waiters, link) w->parked = 0;
}

static void on_retry(timers_entry_t *t) {
    queue_t *q = container_of(t, queue_t, retry);
    unpark(q->lock);
    lock_kick(q->lock);
}

/* The yield has its own timer: an attempt in flight meanwhile (a
 * semaphore's, a reader's) stops and re-arms the retry timer, and the
 * queue would then sleep until the holder's lease ended. */
static void on_yield_end(timers_entry_t *t) {
    queue_t *q = container_of(t, queue_t, yield);
    q->yielding = 0;
    unpark(q->lock);
    lock_kick(q->lock);
}

void lock_on_watch(void *data, backend_event_t ev) {
    lock_t *l = data;
    (void)ev;
    wait_t *f;
    if (l->q == NULL) return; /* cannot happen: unwatched with the queue */
    /* Each acquire in flight may have run before the release: one more try. */
    LIST_FOREACH(f, &l->flying, flight) f->woken = 1;
    unpark(l);
    lock_kick(l);
}

const char *kind_text(lock_t *l, backend_mode_t held) {
    snprintf(l->mgr->why, sizeof(l->mgr->why), "%.*s is %s", (int)l->len, l->name,
             held == BACKEND_MUTEX ? "held as a plain lock (LOCK, UNLOCK)"
             : held == BACKEND_SEM ? "a semaphore (SEMINIT, ACQUIRE, RELEASE)"
             : held == BACKEND_FAIR ? "held as a fair lock (FAIRLOCK, UNLOCK)"
                                   : "held as a read/write lock (RLOCK, WLOCK, RUNLOCK, WUNLOCK)");
    return l->mgr->why;
}

static void on_attempt(backend_op_t *op) {
    wait_t *w = container_of(op, wait_t, acquire);
    lock_t *l = w->lock;
    lockmgr_t *m = l->mgr;
    const backend_result_t *res = &op->res;
    w->in_flight = 0;
    LIST_REMOVE(w, flight);
    l->attempts--;

    if (w->owner == NULL || m->stopping) {
        /* Cancelled while in flight: undo a grant it may have got. */
        if (res->status != BACKEND_OK ||
            (res->outcome != BACKEND_TAKEN && res->outcome != BACKEND_WRONG_KIND &&
             res->outcome != BACKEND_HOLD_GONE))
            wait_undo(l, w, w->owner_id);
        if (w->owner != NULL) {
            /* A place in a fair lock's queue it may have taken just now
             * goes with it (fair_leave). */
            if (res->status != BACKEND_FAILED &&
                (res->status != BACKEND_OK || res->outcome == BACKEND_TAKEN))
                w->tried = 1;
            answer_error(m, w->owner, LOCK_ERR_BACKEND, "shutting down");
            wait_end(w);
        } else {
            pool_put(&m->wait_pool, w);
        }
        if (m->stopping) lockmgr_shutdown_step(m);
        lock_kick(l);
        lock_maybe_free(l);
        return;
    }
    if (res->status != BACKEND_OK) {
        /* The script may have run: make sure no grant is left behind. */
        if (res->status != BACKEND_FAILED) {
            wait_undo(l, w, w->owner->id);
            if (w->mode == LOCK_MODE_SEM) sem_unanswered(l, w);
        }
        if (res->status == BACKEND_UNACKED && !w->once) {
            /* Not replicated in time, so undone: a LOCK waits on, a
             * TRYLOCK until its wait runs out, and both try again soon. */
            snprintf(w->unacked, sizeof(w->unacked), "%s", res->error);
            w->parked = 1;
            timers_start(m->timers, &l->q->retry, LOCKMGR_UNACKED_RETRY_MS, on_retry);
            return;
        }
        if (w->tried && res->status != BACKEND_FAILED && res->status != BACKEND_UNACKED) {
            /* A waiter that was already waiting keeps waiting; a fair
             * lock's keeps asking, or its place in Redis ends. */
            w->parked = 1;
            if (w->mode == LOCK_MODE_FAIR) fair_queued(l, w);
            return;
        }
        log_debug("acquire %s: %s", l->name, res->error);
        answer_error(m, w->owner, LOCK_ERR_BACKEND, res->error);
        wait_end(w);
        lock_maybe_free(l);
        return;
    }
    switch (res->outcome) {
    case BACKEND_GRANTED:
        if (w->mode == LOCK_MODE_SEM) sem_granted(l, w);
        else grant(l, w, res->fence);
        break;
    case BACKEND_HOLD_GONE:
        sem_hold_gone(l, w);
        break;
    case BACKEND_REENTERED:
        /* A stale field of this owner (a release that has not got through
         * yet): clear it, then try again behind it. */
        release_all(m, l->name, l->len, w->owner->id, w->lease_ms, w->mode);
        attempt(l, w);
        break;
    case BACKEND_WRONG_KIND:
        answer_error(m, w->owner, LOCK_ERR_KIND, kind_text(l, res->held));
        wait_end(w);
        break;
    case BACKEND_TAKEN:
        l->sem_free = 0; /* a semaphore's next waiters wait for the head */
        w->ttl_ms = res->ttl_ms;
        w->unacked[0] = '\0'; /* someone holds it: that is why now */
        if (w->once) {
            answer_timeout(m, w->owner, res->ttl_ms);
            wait_end(w);
            break;
        }
        w->tried = 1;
        if (w->mode == LOCK_MODE_FAIR) {
            /* In Redis's queue now: the head waits for its wake-up or its
             * holder's lease, the others for their turn. */
            int head = queue_head(l) == w;
            if (head && w->woken) {
                attempt(l, w);
                break;
            }
            w->parked = 1;
            fair_queued(l, w);
            if (head)
                timers_start(m->timers, &l->q->retry,
                             res->ttl_ms >= 0 ? (uint64_t)res->ttl_ms + 1
                                              : LOCKMGR_NO_TTL_RETRY_MS,
                             on_retry);
            /* Its ask is done: a waiter the cap on asks in flight held
             * back may ask now. */
            lock_kick(l);
            break;
        }
        /* A semaphore's waiter behind the head does not: the refused head
         * goes first (sem_kick lets it try once that is settled). */
        if (w->woken && (w->mode != LOCK_MODE_SEM || w == queue_head(l))) {
            attempt(l, w);
            break;
        }
        w->parked = 1;
        if (!l->q->subscribed) {
            /* Once the watch is in force, its confirmation triggers one
             * more try, so a release in between is not missed. */
            l->q->subscribed = 1;
            backend_watch(m->backend, l->name, l->len, watch_mode(l), 0, lock_on_watch, l);
        }
        /* Expiry publishes nothing: try again when the holder's lease ends. */
        timers_start(m->timers, &l->q->retry,
                     res->ttl_ms >= 0 ? (uint64_t)res->ttl_ms + 1 : LOCKMGR_NO_TTL_RETRY_MS,
                     on_retry);
        break;
    }
    lock_maybe_free(l);
}

static void on_wait_deadline(timers_entry_t *t) {
    wait_t *w = container_of(t, wait_t, deadline);
    lock_t *l = w->lock;
    long long ttl = !LIST_EMPTY(&l->holds) && w->mode != LOCK_MODE_SEM
                        ? local_ttl(l)
                        : (w->tried ? w->ttl_ms : -1);
    if (w->unacked[0] != '\0' && LIST_EMPTY(&l->holds))
        answer_error(l->mgr, w->owner, LOCK_ERR_BACKEND, w->unacked);
    else
        answer_timeout(l->mgr, w->owner, ttl);
    wait_end(w);
    lock_maybe_free(l);
}

/* 1 if nobody waits for l, or a reader asks and only readers wait: it
 * goes ahead of no one it could not share with. */
static int only_readers_queued(const lock_t *l, lock_mode_t mode) {
    const wait_t *w = queue_head(l);
    if (w != NULL && mode != LOCK_MODE_READ) return 0;
    for (; w != NULL; w = TAILQ_NEXT(w, link))
        if (w->mode != LOCK_MODE_READ) return 0;
    return 1;
}

static void start_wait(lockmgr_t *m, lock_owner_t *o, lock_req_kind_t kind, lock_mode_t mode,
                       const char *name, size_t len, uint32_t wait_ms, uint32_t lease_ms,
                       uint32_t permits) {
    lock_t *l = lock_find(m, name, len);
    if (o->held_count >= m->conf->max_locks_per_client &&
        !(mode == LOCK_MODE_SEM && hold_of(l, o, mode) != NULL)) {
        answer_error(m, o, LOCK_ERR_LIMIT, "max_locks_per_client reached");
        return;
    }
    if (m->waiting >= m->conf->max_waiters) {
        answer_error(m, o, LOCK_ERR_LIMIT, "max_waiters reached");
        return;
    }
    if (!backend_available(m->backend, name, len)) {
        answer_unavailable(m, o, name, len);
        return;
    }
    l = lock_get(m, name, len);
    wait_t *w = l ? pool_get(&m->wait_pool) : NULL;
    if (w == NULL) {
        answer_error(m, o, LOCK_ERR_LIMIT, "out of memory");
        if (l) lock_maybe_free(l);
        return;
    }
    if (!lock_in_use(l)) l->kind = lock_kind_of(mode);
    int once = kind == LOCK_REQ_TRYLOCK && wait_ms == 0;
    if (once && (blocked(l, o, mode) || !only_readers_queued(l, mode))) {
        /* Someone here is ahead: no try, to keep first come first served. */
        pool_put(&m->wait_pool, w);
        answer_timeout(m, o, mode == LOCK_MODE_SEM ? -1 : local_ttl(l));
        return;
    }
    if (queue_get(l) == NULL) {
        pool_put(&m->wait_pool, w);
        answer_error(m, o, LOCK_ERR_LIMIT, "out of memory");
        lock_maybe_free(l);
        return;
    }
    w->hdr.kind = PENDING_WAIT;
    w->owner = o;
    w->owner_id = o->id;
    w->lock = l;
    w->once = once;
    w->mode = mode;
    w->permits = permits;
    w->lease_ms = lease_ms;
    w->ttl_ms = -1;
    w->started_ns = uv_hrtime();
    TAILQ_INSERT_TAIL(&l->q->waiters, w, link);
    w->queued = 1;
    m->waiting++;
    o->pending = &w->hdr;
    if (kind == LOCK_REQ_TRYLOCK && wait_ms > 0)
        timers_start(m->timers, &w->deadline, wait_ms, on_wait_deadline);
    lock_kick(l);
}

/* ---- requests on a held lock, STATUS and FORCE ------------------------------------- */

static void on_op(backend_op_t *bop);

static op_t *op_new(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req,
                    backend_op_kind_t kind, lock_mode_t mode, op_done_cb done) {
    op_t *op = zalloc(sizeof(*op) + req->len + 1);
    if (op == NULL) {
        answer_error(m, o, LOCK_ERR_LIMIT, "out of memory");
        return NULL;
    }
    const hold_t *h = hold_of(l, o, mode);
    op->hdr.kind = PENDING_OP;
    op->mode = mode;
    op->mgr = m;
    op->owner = o;
    op->lock = l;
    op->kind = req->kind;
    op->wait_ms = req->wait_ms;
    op->lease_ms = req->lease_ms;
    op->sent_at = timers_now(m->timers);
    op->grant_id = h ? h->grant_id : 0;
    memcpy(op->name, req->name, req->len);
    op->len = req->len;
    if (l) l->busy++;
    o->pending = &op->hdr;
    op->bop.kind = kind;
    op->bop.mode = (backend_mode_t)mode;
    op->bop.name = op->name;
    op->bop.len = op->len;
    op->bop.owner = o->id;
    op->bop.cb = on_op;
    op->bop.queue_ms = m->conf->lease_ms; /* a fair lock's reentry that finds
                                             it gone takes a place */
    op->bop.queue_foreign_ms = LOCKMGR_FAIR_FOREIGN_WAIT_MS;
    op->done = done;
    return op;
}

/* The op's owner still holds the lock under the same grant. */
static hold_t *op_hold(const op_t *op) {
    hold_t *h = op->owner ? hold_of(op->lock, op->owner, op->mode) : NULL;
    return h && h->grant_id == op->grant_id ? h : NULL;
}

/* Every op's answer: an error goes to its owner, anything else to its
 * done function. */
static void on_op(backend_op_t *bop) {
    op_t *op = container_of(bop, op_t, bop);
    lock_owner_t *o = op->owner;
    hold_t *h = op_hold(op);

    if (op->lock) op->lock->busy--;
    if (o && o->pending == &op->hdr) o->pending = NULL;
    if (bop->res.status != BACKEND_OK) {
        /* It may have run (a RENEW not replicated in time did) and
         * shortened the lease. */
        if (h != NULL && (bop->kind == BACKEND_ACQUIRE || bop->kind == BACKEND_RENEW) &&
            (bop->res.status == BACKEND_DOWN ||
             (bop->res.status == BACKEND_UNACKED && bop->kind == BACKEND_RENEW)))
            watchdog_limit(h, bop->lease_ms, op->sent_at);
        if (bop->res.status == BACKEND_UNACKED && bop->kind == BACKEND_ACQUIRE) {
            /* A reentry found our hold gone and took the lock anew, but
             * that grant was not replicated: undo it; the hold is lost. */
            if (h != NULL) hold_lost(h, LOCK_LOST_EXPIRED);
            release_all(op->mgr, op->name, op->len, bop->owner, bop->lease_ms, op->mode);
        } else if (bop->res.status == BACKEND_DOWN && bop->kind == BACKEND_ACQUIRE && h == NULL) {
            /* A downgrade's (or a reentry's whose hold ended meanwhile) may
             * have granted a hold nobody has: the owner's one request in
             * flight was this, so it has no newer grant to lose. */
            release_all(op->mgr, op->name, op->len, bop->owner, bop->lease_ms, op->mode);
        }
        if (o != NULL) answer_error(op->mgr, o, LOCK_ERR_BACKEND, bop->res.error);
    } else {
        op->done(op, o, h);
    }
    if (op->lock) lock_maybe_free(op->lock);
    free(op);
}

/* A downgrade's read grant (the owner holds the write lock): a new hold
 * that waited for no one. */
static void downgrade_done(op_t *op, lock_owner_t *o, hold_t *h) {
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
    hold_t *w = hold_of(l, o, LOCK_MODE_WRITE);
    if (res->outcome == BACKEND_TAKEN || res->outcome == BACKEND_WRONG_KIND || w == NULL) {
        /* Our write hold had ended in Redis without our knowing. */
        if (res->outcome == BACKEND_GRANTED || res->outcome == BACKEND_REENTERED)
            release_all(m, l->name, l->len, o->id, op->bop.lease_ms, LOCK_MODE_READ);
        if (w != NULL) hold_lost(w, LOCK_LOST_EXPIRED);
        start_wait(m, o, op->kind, LOCK_MODE_READ, op->name, op->len, op->wait_ms,
                   op->lease_ms, 0);
        return;
    }
    /* REENTERED: a field of ours a release has not cleared yet; the new
     * hold's release deletes it whole. */
    hold_t *r = hold_new(l, o, w->fence, op->lease_ms, LOCK_MODE_READ);
    if (r == NULL) {
        release_all(m, l->name, l->len, o->id, op->bop.lease_ms, LOCK_MODE_READ);
        answer_error(m, o, LOCK_ERR_LIMIT, "out of memory");
        return;
    }
    m->stats.grants++;
    release_forget(m, l->name, l->len, o->id, LOCK_MODE_READ);
    watchdog_set_confirmed(r, op->sent_at, op->bop.lease_ms);
    answer_grant(o, w->fence, 1);
}

static void reentry_done(op_t *op, lock_owner_t *o, hold_t *h) {
    lockmgr_t *m = op->mgr;
    lock_t *l = op->lock;
    const backend_result_t *res = &op->bop.res;

    if (o == NULL) return; /* the owner left; its release covers every hold */
    if (res->outcome == BACKEND_REENTERED && h != NULL) {
        h->count++;
        m->stats.reentries++;
        h->lease_ms = op->keep_lease;
        watchdog_set_confirmed(h, op->sent_at, op->bop.lease_ms);
        answer_grant(o, h->fence, h->count);
        return;
    }
    /* Our hold had ended in Redis without our knowing. */
    if (h != NULL) hold_lost(h, LOCK_LOST_EXPIRED);
    if (res->outcome == BACKEND_GRANTED || res->outcome == BACKEND_REENTERED)
        release_all(m, l->name, l->len, o->id, op->bop.lease_ms, op->mode);
    if (res->outcome == BACKEND_WRONG_KIND) {
        answer_error(m, o, LOCK_ERR_KIND, kind_text(l, res->held));
        return;
    }
    /* A fresh grant: with the lease this request asked for. */
    start_wait(m, o, op->kind, op->mode, op->name, op->len, op->wait_ms, op->lease_ms, 0);
}

static void on_drop(backend_op_t *bop) {
    drop_t *d = container_of(bop, drop_t, bop);
    if (bop->res.status != BACKEND_OK) log_debug("unlock step: %s", bop->res.error);
    d->lock->busy--;
    lock_maybe_free(d->lock);
    free(d);
}

void answer_notheld(lockmgr_t *m, lock_owner_t *o, const lock_t *l, lock_mode_t mode) {
    const hold_t *other = hold_mine(l, o);
    if (other != NULL && lock_kind_of(other->mode) != lock_kind_of(mode))
        answer_error(m, o, LOCK_ERR_KIND,
                     other->mode == LOCK_MODE_MUTEX ? "held as a plain lock: UNLOCK releases it"
                     : other->mode == LOCK_MODE_FAIR ? "held as a fair lock: UNLOCK releases it"
                     : other->mode == LOCK_MODE_SEM
                         ? "a semaphore: RELEASE gives its permits back"
                         : "held as a read/write lock: RUNLOCK or WUNLOCK releases it");
    else
        answer_error(m, o, LOCK_ERR_NOTHELD, NULL);
}

static void do_unlock(lockmgr_t *m, lock_owner_t *o, lock_t *l, lock_mode_t mode) {
    hold_t *h = hold_of(l, o, mode);
    if (h == NULL) {
        answer_notheld(m, o, l, mode);
        return;
    }
    if (h->count > 1) {
        drop_t *d = zalloc(sizeof(*d));
        h->count--;
        if (d != NULL) { /* without it Redis keeps one hold more until the release */
            d->lock = l;
            l->busy++;
            d->bop.kind = BACKEND_DROP;
            d->bop.mode = (backend_mode_t)mode;
            d->bop.name = l->name;
            d->bop.len = l->len;
            d->bop.owner = o->id;
            d->bop.cb = on_drop;
            backend_submit(m->backend, &d->bop);
        }
        answer_value(o, h->count);
        return;
    }
    /* The last hold: answered now; the release reaches Redis in order
     * before any later acquire, and is retried while Redis is away. */
    release_local(h);
    answer_value(o, 0);
    lock_maybe_free(l);
}

static void renew_done(op_t *op, lock_owner_t *o, hold_t *h) {
    lockmgr_t *m = op->mgr;
    const backend_result_t *res = &op->bop.res;

    if (o == NULL) return;
    if (h == NULL) {
        answer_error(m, o, LOCK_ERR_NOTHELD, NULL);
    } else if (res->renewal == BACKEND_RENEWED) {
        h->lease_ms = op->keep_lease;
        watchdog_set_confirmed(h, op->sent_at, op->bop.lease_ms);
        answer_value(o, op->bop.lease_ms);
    } else {
        /* Gone where it counts, it may linger elsewhere (a semaphore's
         * other ids): delete what is left of it, as the watchdog does. */
        release_hold(h);
        hold_lost(h, res->renewal == BACKEND_FORCED ? LOCK_LOST_FORCED : LOCK_LOST_EXPIRED);
        answer_error(m, o, LOCK_ERR_NOTHELD, NULL);
        lock_kick(op->lock);
    }
}

static void do_renew(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    hold_t *h = hold_mine(l, o);
    if (h == NULL) {
        answer_error(m, o, LOCK_ERR_NOTHELD, NULL);
        return;
    }
    op_t *op = op_new(m, o, l, req, BACKEND_RENEW, h->mode, renew_done);
    if (op == NULL) return;
    op->bop.permits = h->count;
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

static void status_done(op_t *op, lock_owner_t *o, hold_t *h) {
    const backend_result_t *res = &op->bop.res;
    int held = res->ttl_ms != -2;
    int sem = held && res->held == BACKEND_SEM;
    int rw = held && res->held != BACKEND_MUTEX && !sem;

    if (o == NULL) return;
    if (sem || (h != NULL && h->mode == LOCK_MODE_SEM)) {
        /* A semaphore: what Redis has available, and what this owner holds
         * as far as this daemon knows (the watchdog checks its ids). */
        lock_reply_t r = {.kind = LOCK_REPLY_SEM, .holders = sem ? res->holders : 0,
                          .holds = h != NULL && h->mode == LOCK_MODE_SEM ? h->count : 0};
        answer(o, &r);
        return;
    }
    /* Our hold (op->mode's) is alive if Redis has it, as that kind. */
    if (h != NULL && (!held || res->holds <= 0 ||
                      (h->mode == LOCK_MODE_READ || h->mode == LOCK_MODE_WRITE) != rw)) {
        hold_lost(h, LOCK_LOST_EXPIRED);
        lock_kick(op->lock);
        h = NULL;
    }
    if (rw) {
        lock_reply_t r = {.kind = LOCK_REPLY_RW, .mode = (lock_mode_t)res->held,
                          .holders = res->holders, .ttl_ms = res->ttl_ms,
                          .holds = h != NULL && h->mode == (lock_mode_t)res->held ? h->count : 0};
        answer(o, &r);
        return;
    }
    if (h != NULL) {
        lock_reply_t r = {.kind = LOCK_REPLY_MINE, .holds = h->count, .ttl_ms = res->ttl_ms,
                          .fence = h->fence};
        answer(o, &r);
        return;
    }
    lock_reply_t r = {.kind = held ? LOCK_REPLY_TAKEN : LOCK_REPLY_FREE, .ttl_ms = res->ttl_ms};
    answer(o, &r);
}

#define SEM_WHO_TEXT "a semaphore has no one holder: STATUS tells its permits"

/* SEMINIT: 1 set now, 0 set already. */
static void seminit_done(op_t *op, lock_owner_t *o, hold_t *h) {
    const backend_result_t *res = &op->bop.res;
    (void)h;
    if (o == NULL) return;
    if (res->outcome == BACKEND_WRONG_KIND) {
        lock_t *l = lock_get(op->mgr, op->name, op->len);
        if (l == NULL) {
            answer_error(op->mgr, o, LOCK_ERR_KIND, "the name is a lock");
            return;
        }
        answer_error(op->mgr, o, LOCK_ERR_KIND, kind_text(l, res->held));
        lock_maybe_free(l);
        return;
    }
    answer_value(o, res->holds);
}

/* WHO a local holder: from memory, with its pid and uid. */
static void who_local(lockmgr_t *m, lock_owner_t *o, lock_t *l) {
    const hold_t *h = hold_first(l);
    lock_reply_t r = {.kind = LOCK_REPLY_HELD, .ttl_ms = local_ttl(l), .holder_host = m->host,
                      .holder_dlockd_pid = (long long)getpid(),
                      .holder_pid = h->owner->pid > 0 ? (long long)h->owner->pid : -1,
                      .holder_uid = (long long)h->owner->uid};
    answer(o, &r);
}

/* WHO a holder elsewhere: Redis's answer, with its dlockd as it registered
 * ("dlockd:<host>:<pid>"). */
static void who_done(op_t *op, lock_owner_t *o, hold_t *h) {
    const backend_result_t *res = &op->bop.res;
    char host[BACKEND_WHO_DAEMON_MAX] = "";
    long long pid = -1;
    (void)h;
    if (o == NULL) return;
    if (res->ttl_ms == -2) {
        lock_reply_t r = {.kind = LOCK_REPLY_FREE, .ttl_ms = -2};
        answer(o, &r);
        return;
    }
    if (res->ttl_ms == -3) {
        answer_error(op->mgr, o, LOCK_ERR_KIND, SEM_WHO_TEXT);
        return;
    }
    const char *d = op->who.daemon, *colon = strrchr(d, ':');
    if (strncmp(d, "dlockd:", 7) == 0 && colon != NULL && colon > d + 7) {
        snprintf(host, sizeof(host), "%.*s", (int)(colon - d - 7), d + 7);
        pid = atoll(colon + 1);
    }
    lock_reply_t r = {.kind = LOCK_REPLY_HELD, .ttl_ms = res->ttl_ms, .holder_host = host,
                      .holder_dlockd_pid = pid > 0 ? pid : -1, .holder_pid = -1,
                      .holder_uid = -1};
    answer(o, &r);
}

/* The lock is gone from Redis: a local holder has lost it. */
static void force_done(op_t *op, lock_owner_t *o, hold_t *h) {
    lock_t *l = lock_find(op->mgr, op->name, op->len);
    (void)h;
    if (op->bop.res.removed && l != NULL && hold_first(l) != NULL) {
        while (hold_first(l) != NULL) hold_lost(hold_first(l), LOCK_LOST_FORCED);
        lock_kick(l);
        lock_maybe_free(l);
    }
    if (o != NULL) answer_value(o, op->bop.res.removed);
}

/* ---- backend state ------------------------------------------------------------------ */

static void on_backend_state(void *data) {
    lockmgr_t *m = data;
    if (!backend_available(m->backend, NULL, 0) || m->stopping) return;
    /* Releases first, so that the acquires below see them done. */
    release_resend(m);
    size_t i = 0;
    for (hmap_node_t *n = hmap_next(&m->locks, &i, NULL); n; n = hmap_next(&m->locks, &i, n)) {
        unpark(container_of(n, lock_t, node));
        lock_kick(container_of(n, lock_t, node));
    }
    watchdog_sweep(m);
}

/* ---- public ------------------------------------------------------------------------- */

lockmgr_t *lockmgr_new(const conf_t *conf, timers_t *timers, backend_t *backend) {
    lockmgr_t *m = zalloc(sizeof(*m));
    if (m == NULL) return NULL;
    m->conf = conf;
    m->timers = timers;
    m->backend = backend;
    m->dog_lease = conf->lease_ms;
    if (gethostname(m->host, sizeof(m->host)) != 0) snprintf(m->host, sizeof(m->host), "?");
    m->host[sizeof(m->host) - 1] = '\0';
    TAILQ_INIT(&m->dog);
    TAILQ_INIT(&m->stale);
    STAILQ_INIT(&m->retries);
    pool_init(&m->lock_pool, sizeof(lock_t) + LOCKMGR_POOL_NAME + 1, LOCKMGR_POOL_KEEP);
    pool_init(&m->queue_pool, sizeof(queue_t), LOCKMGR_POOL_KEEP);
    pool_init(&m->wait_pool, sizeof(wait_t), LOCKMGR_POOL_KEEP);
    pool_init(&m->release_pool, sizeof(release_t) + LOCKMGR_POOL_NAME + 1, LOCKMGR_POOL_KEEP);
    if (hmap_init(&m->locks) != 0) {
        free(m);
        return NULL;
    }
    backend_on_state(backend, on_backend_state, m);
    return m;
}

lock_owner_t *lockmgr_owner_new(lockmgr_t *m, uint64_t id, uid_t uid, lock_reply_cb on_reply,
                                lock_event_cb on_event, void *data) {
    lock_owner_t *o = zalloc(sizeof(*o));
    (void)m;
    if (o == NULL) return NULL;
    o->id = id;
    o->uid = uid;
    o->on_reply = on_reply;
    o->on_event = on_event;
    o->data = data;
    LIST_INIT(&o->holds);
    return o;
}

void lockmgr_owner_set_pid(lock_owner_t *o, pid_t pid) {
    o->pid = pid;
}

size_t lockmgr_owner_held(const lock_owner_t *o) {
    return o->held_count;
}

int lockmgr_owner_waiting(const lock_owner_t *o) {
    return o->pending != NULL;
}

static void dispatch(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req) {
    lock_t *l = lock_find(m, req->name, req->len);
    op_t *op;

    if (m->stopping) {
        answer_error(m, o, LOCK_ERR_BACKEND, "shutting down");
        return;
    }
    uint32_t max = m->backend->lease_max_ms;
    if (max && req->lease_ms > max &&
        (req->kind == LOCK_REQ_LOCK || req->kind == LOCK_REQ_TRYLOCK ||
         req->kind == LOCK_REQ_RENEW)) {
        snprintf(m->why, sizeof(m->why),
                 "lease_ms above %u, the longest lease in quorum mode (rejoin_delay_ms)", max);
        answer_error(m, o, LOCK_ERR_ARGS, m->why);
        return;
    }
    if (req->kind == LOCK_REQ_LOCK || req->kind == LOCK_REQ_TRYLOCK ||
        req->kind == LOCK_REQ_SEMINIT) {
        lock_kind_t kind = req->kind == LOCK_REQ_SEMINIT ? LOCK_KIND_SEM : lock_kind_of(req->mode);
        unsigned cap = kind == LOCK_KIND_RW    ? BACKEND_CAP_RW
                       : kind == LOCK_KIND_SEM ? BACKEND_CAP_SEM
                                               : BACKEND_CAP_FAIR;
        if (kind != LOCK_KIND_MUTEX && !(m->backend->caps & cap)) {
            snprintf(m->why, sizeof(m->why), "%s are not available with %s",
                     kind == LOCK_KIND_RW    ? "read/write locks"
                     : kind == LOCK_KIND_SEM ? "semaphores"
                                             : "fair locks",
                     m->backend->type->name);
            answer_error(m, o, LOCK_ERR_KIND, m->why);
            return;
        }
        if (lock_in_use(l) && l->kind != kind) {
            answer_error(m, o, LOCK_ERR_KIND, kind_text(l, watch_mode(l)));
            return;
        }
    }
    if (req->mode == LOCK_MODE_SEM && req->kind != LOCK_REQ_SEMINIT &&
        (req->permits == 0 || req->permits > LOCKMGR_SEM_PERMITS_MAX)) {
        snprintf(m->why, sizeof(m->why), "permits are 1 to %u", LOCKMGR_SEM_PERMITS_MAX);
        answer_error(m, o, LOCK_ERR_ARGS, m->why);
        return;
    }
    switch (req->kind) {
    case LOCK_REQ_LOCK:
    case LOCK_REQ_TRYLOCK: {
        hold_t *h = hold_of(l, o, req->mode);
        if (req->mode == LOCK_MODE_SEM) {
            /* More permits: a wait like the first ones, whoever holds. */
            if ((h ? h->count : 0) + req->permits > LOCKMGR_SEM_PERMITS_MAX) {
                snprintf(m->why, sizeof(m->why),
                         "a connection holds at most %u permits of a semaphore",
                         LOCKMGR_SEM_PERMITS_MAX);
                answer_error(m, o, LOCK_ERR_LIMIT, m->why);
                return;
            }
            start_wait(m, o, req->kind, req->mode, req->name, req->len, req->wait_ms,
                       req->lease_ms, req->permits);
            return;
        }
        if (h == NULL && req->mode == LOCK_MODE_WRITE && hold_of(l, o, LOCK_MODE_READ) != NULL) {
            /* It would wait for its own read hold forever. */
            answer_error(m, o, LOCK_ERR_KIND,
                         "upgrade not allowed: this connection holds a read lock of it "
                         "(RUNLOCK it first)");
            return;
        }
        if (h == NULL && req->mode == LOCK_MODE_READ && hold_of(l, o, LOCK_MODE_WRITE) != NULL) {
            /* A downgrade: queued behind waiters that wait for this
             * owner's write lock, it would never be granted. */
            if (!backend_available(m->backend, l->name, l->len)) {
                answer_unavailable(m, o, l->name, l->len);
                return;
            }
            if (o->held_count >= m->conf->max_locks_per_client) {
                answer_error(m, o, LOCK_ERR_LIMIT, "max_locks_per_client reached");
                return;
            }
            op = op_new(m, o, l, req, BACKEND_ACQUIRE, LOCK_MODE_READ, downgrade_done);
            if (op == NULL) return;
            /* A queued release of an older read hold would run after it. */
            release_forget(m, l->name, l->len, o->id, LOCK_MODE_READ);
            op->bop.lease_ms = req->lease_ms ? req->lease_ms : m->conf->lease_ms;
            backend_submit(m->backend, &op->bop);
            return;
        }
        if (h == NULL) {
            start_wait(m, o, req->kind, req->mode, req->name, req->len, req->wait_ms,
                       req->lease_ms, 0);
            return;
        }
        if (!backend_available(m->backend, l->name, l->len)) {
            answer_unavailable(m, o, l->name, l->len);
            return;
        }
        op = op_new(m, o, l, req, BACKEND_ACQUIRE, req->mode, reentry_done);
        if (op == NULL) return;
        /* TRYFAIRLOCK 0 takes no place, even when the hold is gone */
        op->bop.once = req->kind == LOCK_REQ_TRYLOCK && req->wait_ms == 0;
        /* The hold gets the longest of the modes asked for, the watchdog
         * being longer than any lease: no lease on either side makes it a
         * watchdog hold, two leases give the longer one, from now. */
        op->keep_lease = h->lease_ms && req->lease_ms
                             ? (h->lease_ms > req->lease_ms ? h->lease_ms : req->lease_ms)
                             : 0;
        op->bop.lease_ms = op->keep_lease ? op->keep_lease : m->conf->lease_ms;
        backend_submit(m->backend, &op->bop);
        return;
    }
    case LOCK_REQ_UNLOCK:
        if (req->mode == LOCK_MODE_SEM) sem_release(m, o, l, req->permits);
        else if (req->mode == LOCK_MODE_MUTEX && hold_of(l, o, LOCK_MODE_FAIR) != NULL)
            do_unlock(m, o, l, LOCK_MODE_FAIR); /* UNLOCK releases a fair lock too */
        else do_unlock(m, o, l, req->mode);
        return;
    case LOCK_REQ_SEMINIT:
        if (!backend_available(m->backend, req->name, req->len)) {
            answer_unavailable(m, o, req->name, req->len);
            return;
        }
        op = op_new(m, o, l, req, BACKEND_SEMINIT, LOCK_MODE_SEM, seminit_done);
        if (op == NULL) return;
        op->bop.permits = req->permits;
        backend_submit(m->backend, &op->bop);
        return;
    case LOCK_REQ_RENEW:
        do_renew(m, o, l, req);
        return;
    case LOCK_REQ_STATUS: {
        const hold_t *h = hold_mine(l, o);
        op = op_new(m, o, l, req, BACKEND_STATUS, h ? h->mode : LOCK_MODE_MUTEX, status_done);
        if (op == NULL) return;
        backend_submit(m->backend, &op->bop);
        return;
    }
    case LOCK_REQ_WHO:
        if (lock_in_use(l) && l->kind == LOCK_KIND_SEM) {
            answer_error(m, o, LOCK_ERR_KIND, SEM_WHO_TEXT);
            return;
        }
        if (l != NULL && hold_first(l) != NULL) {
            who_local(m, o, l);
            return;
        }
        op = op_new(m, o, NULL, req, BACKEND_WHO, LOCK_MODE_MUTEX, who_done);
        if (op == NULL) return;
        op->bop.who = &op->who;
        backend_submit(m->backend, &op->bop);
        return;
    case LOCK_REQ_FORCE:
        if (o->uid != 0 && !conf_is_admin(m->conf, o->uid)) {
            log_warn("client %llu (uid %u) denied FORCEUNLOCK %.*s", (unsigned long long)o->id,
                     (unsigned)o->uid, (int)req->len, req->name);
            answer_error(m, o, LOCK_ERR_DENIED, "FORCEUNLOCK needs uid 0 or one in admin_uids");
            return;
        }
        log_info("client %llu (uid %u) FORCEUNLOCK %.*s", (unsigned long long)o->id,
                 (unsigned)o->uid, (int)req->len, req->name);
        op = op_new(m, o, NULL, req, BACKEND_FORCE, LOCK_MODE_MUTEX, force_done);
        if (op == NULL) return;
        backend_submit(m->backend, &op->bop);
        return;
    }
}

int lockmgr_request(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req,
                    lock_reply_t *now) {
    o->now = now;
    o->answered = 0;
    dispatch(m, o, req);
    o->now = NULL;
    return o->answered;
}

static void owner_drop_now(lock_owner_t *o) {
    if (o->pending != NULL) {
        if (o->pending->kind == PENDING_WAIT) {
            wait_t *w = (wait_t *)o->pending;
            lock_t *l = w->lock;
            wait_end(w);
            lock_maybe_free(l);
        } else {
            ((op_t *)o->pending)->owner = NULL;
        }
        o->pending = NULL;
    }
    hold_t *h;
    while ((h = LIST_FIRST(&o->holds)) != NULL) {
        lock_t *l = h->lock;
        release_local(h);
        lock_maybe_free(l);
    }
    free(o);
}

static void on_reap(timers_entry_t *t) {
    owner_drop_now(container_of(t, lock_owner_t, reap));
}

void lockmgr_owner_drop(lockmgr_t *m, lock_owner_t *o) {
    if (o->in_callback) {
        /* From inside its own callback: what called it still uses the
         * owner and its locks. Finish once that has returned. */
        o->dropped = 1;
        timers_start(m->timers, &o->reap, 0, on_reap);
        return;
    }
    owner_drop_now(o);
}

void lockmgr_reconfigure(lockmgr_t *m) {
    watchdog_reconfigure(m);
}

static void count_node(void *data, const backend_node_info_t *node) {
    lockmgr_stats_t *out = data;
    out->nodes++;
    if (node->up) {
        out->nodes_up++;
        return;
    }
    /* A node that is connected but does not serve (a quorum's node
     * rejoining) says why after a '/'. */
    int why = strcmp(node->role, "primary") != 0;
    size_t k = strcmp(out->nodes_down, "-") == 0 ? 0 : strlen(out->nodes_down);
    size_t need = (k ? 1 : 0) + strlen(node->name) + (why ? 1 + strlen(node->role) : 0) + 1;
    if (k + need > sizeof(out->nodes_down)) return; /* cut: the counts still tell */
    snprintf(out->nodes_down + k, sizeof(out->nodes_down) - k, "%s%s%s%s", k ? "," : "",
             node->name, why ? "/" : "", why ? node->role : "");
}

void lockmgr_stats(const lockmgr_t *m, lockmgr_stats_t *out) {
    *out = m->stats;
    out->wait_time = &m->wait_time;
    out->hold_time = &m->hold_time;
    out->locks_held = m->held;
    out->waiters = m->waiting;
    out->backend_up = backend_available(m->backend, NULL, 0);
    out->backend = m->backend->type->name;
    out->nodes = out->nodes_up = 0;
    snprintf(out->nodes_down, sizeof(out->nodes_down), "-");
    backend_nodes(m->backend, count_node, out);
}

void lockmgr_shutdown(lockmgr_t *m, lockmgr_done_cb done, void *data) {
    m->stopping = 1;
    m->done = done;
    m->done_data = data;
    m->shutdown_left = 1; /* ourselves, until every release is sent */
    watchdog_stop(m);
    /* Release every hold; holders are told by their closing sockets. */
    size_t i = 0;
    hmap_node_t *n, *next;
    for (n = hmap_next(&m->locks, &i, NULL); n != NULL; n = next) {
        next = hmap_next(&m->locks, &i, n);
        lock_t *l = container_of(n, lock_t, node);
        hold_t *h;
        while ((h = LIST_FIRST(&l->holds)) != NULL) {
            release_hold(h);
            hold_drop(h);
        }
    }
    /* Acquires in flight are undone when they return. */
    i = 0;
    for (n = hmap_next(&m->locks, &i, NULL); n != NULL; n = hmap_next(&m->locks, &i, n))
        m->shutdown_left += container_of(n, lock_t, node)->attempts;
    /* Queued releases will not get another chance. */
    release_flush_for_shutdown(m);
    lockmgr_shutdown_step(m);
}

void lockmgr_free(lockmgr_t *m) {
    if (m == NULL) return;
    size_t i = 0;
    hmap_node_t *n, *next;
    for (n = hmap_next(&m->locks, &i, NULL); n != NULL; n = next) {
        next = hmap_next(&m->locks, &i, n);
        lock_t *l = container_of(n, lock_t, node);
        wait_t *w;
        while ((w = queue_head(l)) != NULL) {
            TAILQ_REMOVE(&l->q->waiters, w, link);
            free(w);
        }
        free(l->q);
        hold_t *h;
        while ((h = LIST_FIRST(&l->holds)) != NULL) {
            LIST_REMOVE(h, by_lock);
            if (h != &l->first) free(h);
        }
        free(l);
    }
    hmap_free(&m->locks);
    release_free_all(m);
    timers_stop(m->timers, &m->done_timer);
    watchdog_stop(m);
    pool_drain(&m->lock_pool);
    pool_drain(&m->queue_pool);
    pool_drain(&m->wait_pool);
    pool_drain(&m->release_pool);
    free(m);
}
