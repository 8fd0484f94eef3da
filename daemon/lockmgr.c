/* The lock manager: local lock table, FIFO waiters, grants with fences,
 * watchdog renewals and loss detection, over the backend.
 * SPDX-License-Identifier: MIT */
#include "lockmgr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "daemon/util/hmap.h"
#include "log.h"
#include "daemon/util/timers.h"
#include "daemon/util/util.h"

typedef struct lock_s lock_t;
typedef struct wait_s wait_t;
typedef struct op_s op_t;

/* What an owner's request in flight is. */
typedef enum {
    PENDING_WAIT = 0,   /* queued on a lock (LOCK, TRYLOCK) */
    PENDING_OP          /* one backend call (reentry, UNLOCK, RENEW, ...) */
} pending_kind_t;

typedef struct lockmgr_pending_s {
    pending_kind_t kind;
} pending_t;

struct lock_s {
    hmap_node_t node;          /* by name */
    lockmgr_t *mgr;

    /* the local holder, if any */
    lock_owner_t *holder;
    uint32_t holds;
    uint64_t fence;
    uint32_t lease_ms;         /* the lease asked for; 0: watchdog mode */
    uint64_t grant_id;         /* changes with every grant and release */
    uint64_t confirmed_at;     /* when the last confirmed grant/renewal was sent */
    timers_entry_t expiry;     /* lease mode: the lease runs out */
    lock_t *held_prev, *held_next; /* the holder's locks */
    lock_t *dog_prev, *dog_next;   /* watchdog locks, oldest confirmation first */
    int on_dog;
    int renewing;              /* in a watchdog batch now */

    /* waiters, first come first served; only the head tries */
    wait_t *head, *tail;
    wait_t *attempt;           /* the wait whose acquire is in flight */
    int wake;                  /* a wake-up came during the attempt */
    int subscribed;
    timers_entry_t retry;      /* the holder's lease ends, or a yield ends: try again */
    int remote_interest;       /* our last release woke other daemons' waiters */
    int yielding;              /* local hand-off held back for them */

    int busy;                  /* backend calls in flight that name this lock */
    size_t len;
    char name[];
};

struct wait_s {
    pending_t hdr;
    lock_owner_t *owner;       /* NULL once cancelled */
    uint64_t owner_id;         /* kept to undo a grant that came too late */
    lock_t *lock;
    wait_t *prev, *next;
    int queued;                /* in lock's queue */
    int once;                  /* TRYLOCK with wait 0: one try */
    int tried;                 /* Redis said TAKEN at least once */
    uint32_t lease_ms;
    long long ttl_ms;          /* the holder's TTL as last seen, -1 unknown */
    uint64_t sent_at;
    timers_entry_t deadline;   /* TRYLOCK's wait_ms */
};

struct op_s {
    pending_t hdr;
    lockmgr_t *mgr;
    lock_owner_t *owner;       /* NULL once the owner left */
    lock_t *lock;              /* holds a busy reference, or NULL */
    proto_cmd_t cmd;
    uint64_t grant_id;
    uint32_t lease_ms;
    uint64_t sent_at;
    proto_request_t req;       /* for a retry as a fresh wait */
    backend_item_t item;       /* RENEW */
};

/* A release that must reach Redis even if it is down now. */
typedef struct release_s {
    struct release_s *next;
    lockmgr_t *mgr;
    uint64_t owner;
    uint64_t give_up_at;       /* the lease has run out by then anyway */
    int counted;               /* shutdown waits for this one */
    size_t len;
    char name[];
} release_t;

/* One watchdog call renewing many locks. */
typedef struct batch_s {
    lockmgr_t *mgr;
    uint64_t sent_at;
    size_t count;
    lock_t **locks;
    uint64_t *grants;
    backend_item_t *items;
} batch_t;

struct lockmgr_s {
    uv_loop_t *loop;
    const conf_t *conf;
    timers_t *timers;
    backend_t *backend;
    hmap_t locks;
    lock_t *dog_head, *dog_tail;
    size_t dog_count;
    timers_entry_t sweep;      /* the next watchdog lock is due */
    int renew_inflight;        /* watchdog batches awaiting Redis */
    timers_entry_t loss;       /* the oldest watchdog lock could expire */
    release_t *retry_head, *retry_tail;
    uint64_t waiting;
    uint64_t held;
    lockmgr_stats_t stats;
    /* shutdown */
    int stopping;
    int shutdown_left;
    timers_entry_t done_timer;  /* calls done outside any Redis callback */
    lockmgr_done_cb done;
    void *done_data;
};

static void kick(lock_t *l);
static void lock_maybe_free(lock_t *l);
static void start_wait(lockmgr_t *m, lock_owner_t *o, const proto_request_t *req);
static void arm_loss(lockmgr_t *m);

/* ---- replies ---------------------------------------------------------- */

static void reply_line(lock_owner_t *o, const char *line, int n) {
    if (o != NULL && n > 0) {
        o->pending = NULL;
        o->on_reply(o, line, (size_t)n);
    }
}

static void reply_num(lock_owner_t *o, long long v) {
    char line[PROTO_REPLY_MAX];
    reply_line(o, line, proto_reply_ok(line, sizeof(line), "%lld", v));
}

static void reply_grant(lock_owner_t *o, uint64_t fence, uint32_t holds) {
    char line[PROTO_REPLY_MAX];
    reply_line(o, line, proto_reply_ok(line, sizeof(line), "%llu %u",
                                       (unsigned long long)fence, holds));
}

static void on_done_timer(timers_entry_t *t) {
    lockmgr_t *m = container_of(t, lockmgr_t, done_timer);
    if (m->done) m->done(m, m->done_data);
}

/* One thing shutdown waited for is over. The last one calls done from a
 * timer, not from the Redis reply that ended it: done may free us. */
static void shutdown_step(lockmgr_t *m) {
    if (m->stopping && --m->shutdown_left == 0)
        timers_start(m->timers, &m->done_timer, 0, on_done_timer);
}

static void reply_error(lockmgr_t *m, lock_owner_t *o, proto_err_t err, const char *detail) {
    char line[PROTO_REPLY_MAX];
    if (err == PROTO_ERR_BACKEND) m->stats.backend_errors++;
    reply_line(o, line, proto_reply_error(line, sizeof(line), err, detail));
}

static void reply_backend(lockmgr_t *m, lock_owner_t *o, const backend_result_t *res) {
    reply_error(m, o, PROTO_ERR_BACKEND, res->error);
}

/* ---- the lock table ---------------------------------------------------- */

static lock_t *lock_find(lockmgr_t *m, const char *name, size_t len) {
    hmap_node_t *n = hmap_get(&m->locks, name, len);
    return n ? container_of(n, lock_t, node) : NULL;
}

static lock_t *lock_get(lockmgr_t *m, const char *name, size_t len) {
    lock_t *l = lock_find(m, name, len);
    if (l != NULL) return l;
    l = calloc(1, sizeof(*l) + len + 1);
    if (l == NULL) return NULL;
    l->mgr = m;
    memcpy(l->name, name, len);
    l->len = len;
    l->node.key = l->name;
    l->node.len = len;
    hmap_put(&m->locks, &l->node);
    return l;
}

static void lock_maybe_free(lock_t *l) {
    if (l->holder || l->head || l->attempt || l->busy || l->subscribed ||
        timers_active(&l->retry) || timers_active(&l->expiry))
        return;
    hmap_del(&l->mgr->locks, &l->node);
    free(l);
}

/* Remaining lease of a local holder, or -1. */
static long long local_ttl(const lock_t *l) {
    if (l->holder == NULL) return -1;
    uint32_t lease = l->lease_ms ? l->lease_ms : l->mgr->conf->lease_ms;
    uint64_t end = l->confirmed_at + lease, now = timers_now(l->mgr->timers);
    return end > now ? (long long)(end - now) : 0;
}

/* ---- the watchdog list, ordered by confirmed_at ------------------------ */

static void dog_remove(lockmgr_t *m, lock_t *l) {
    if (!l->on_dog) return;
    if (l->dog_prev) l->dog_prev->dog_next = l->dog_next;
    else m->dog_head = l->dog_next;
    if (l->dog_next) l->dog_next->dog_prev = l->dog_prev;
    else m->dog_tail = l->dog_prev;
    l->dog_prev = l->dog_next = NULL;
    l->on_dog = 0;
    m->dog_count--;
}

static void dog_insert(lockmgr_t *m, lock_t *l) {
    lock_t *after = m->dog_tail;
    while (after && after->confirmed_at > l->confirmed_at) after = after->dog_prev;
    l->dog_prev = after;
    l->dog_next = after ? after->dog_next : m->dog_head;
    if (l->dog_next) l->dog_next->dog_prev = l;
    else m->dog_tail = l;
    if (after) after->dog_next = l;
    else m->dog_head = l;
    l->on_dog = 1;
    m->dog_count++;
}

/* ---- holding ----------------------------------------------------------- */

static void held_add(lock_owner_t *o, lock_t *l) {
    lock_t *first = o->held;
    l->held_prev = NULL;
    l->held_next = first;
    if (first) first->held_prev = l;
    o->held = l;
    o->held_count++;
}

static void held_remove(lock_owner_t *o, lock_t *l) {
    if (l->held_prev) l->held_prev->held_next = l->held_next;
    else o->held = l->held_next;
    if (l->held_next) l->held_next->held_prev = l->held_prev;
    l->held_prev = l->held_next = NULL;
    o->held_count--;
}

static void on_expiry(timers_entry_t *t);

/* Forgets the local hold; Redis is not told. */
static void drop_hold(lock_t *l) {
    lockmgr_t *m = l->mgr;
    held_remove(l->holder, l);
    dog_remove(m, l);
    timers_stop(m->timers, &l->expiry);
    l->holder = NULL;
    l->holds = 0;
    l->grant_id++;
    m->held--;
}

/* The holder can no longer count on the lock. */
static void lost(lock_t *l, const char *reason) {
    char line[PROTO_REPLY_MAX];
    lock_owner_t *o = l->holder;
    if (o == NULL) return;
    log_info("lock %s of client %llu lost: %s", l->name, (unsigned long long)o->id, reason);
    drop_hold(l);
    l->mgr->stats.lost++;
    int n = proto_event_lost(line, sizeof(line), l->name, reason);
    if (n > 0) o->on_event(o, line, (size_t)n);
}

static void release_all(lockmgr_t *m, const char *name, size_t len, uint64_t owner,
                        uint32_t lease_ms);

static void on_expiry(timers_entry_t *t) {
    lock_t *l = container_of(t, lock_t, expiry);
    uint64_t owner = l->holder->id;
    uint32_t lease = l->lease_ms;
    lost(l, "expired");
    /* The lease is counted from when the grant was sent, so Redis may keep
     * the key a moment longer: delete our field now, which also wakes the
     * waiters at once. */
    release_all(l->mgr, l->name, l->len, owner, lease);
    kick(l);
    lock_maybe_free(l);
}

static void sweep_soon(lockmgr_t *m);

/* Redis confirmed the lock as of sent_at: move its deadlines. The caller
 * re-arms the loss timer (arm_loss) once it is done with a batch. */
static void confirm(lock_t *l, uint64_t sent_at) {
    lockmgr_t *m = l->mgr;
    if (sent_at > l->confirmed_at) l->confirmed_at = sent_at;
    if (l->lease_ms) {
        dog_remove(m, l);
        timers_start_at(m->timers, &l->expiry, l->confirmed_at + l->lease_ms, on_expiry);
    } else {
        timers_stop(m->timers, &l->expiry);
        dog_remove(m, l);
        dog_insert(m, l);
    }
}

static void set_confirmed(lock_t *l, uint64_t sent_at) {
    confirm(l, sent_at);
    if (!l->lease_ms) {
        arm_loss(l->mgr);
        sweep_soon(l->mgr);
    }
}

/* ---- releases that must get through ----------------------------------- */

static void release_send(release_t *r);

static void on_release_reply(void *data, const backend_result_t *res) {
    release_t *r = data;
    lockmgr_t *m = r->mgr;
    if (res->status == BACKEND_OK) {
        /* More listeners than our own subscription: waiters elsewhere. */
        lock_t *l = lock_find(m, r->name, r->len);
        if (l != NULL) l->remote_interest = res->receivers > (l->subscribed ? 1 : 0);
    }
    if (res->status == BACKEND_OK || res->status == BACKEND_FAILED || m->stopping ||
        timers_now(m->timers) >= r->give_up_at) {
        if (res->status == BACKEND_FAILED)
            log_warn("release of %.*s failed: %s", (int)r->len, r->name, res->error);
        int counted = r->counted;
        free(r);
        if (counted) shutdown_step(m);
        return;
    }
    /* Redis is away: try again once it is back. */
    r->next = NULL;
    if (m->retry_tail) m->retry_tail->next = r;
    else m->retry_head = r;
    m->retry_tail = r;
}

static void release_send(release_t *r) {
    lockmgr_t *m = r->mgr;
    m->stats.releases++;
    backend_release(m->backend, r->name, r->len, r->owner, 1, on_release_reply, r);
}

/* Deletes owner's hold on name in Redis, retrying while Redis is away,
 * for at most lease_ms. */
static void release_all(lockmgr_t *m, const char *name, size_t len, uint64_t owner,
                        uint32_t lease_ms) {
    release_t *r = calloc(1, sizeof(*r) + len + 1);
    if (r == NULL) return; /* the lease will end it */
    r->mgr = m;
    r->owner = owner;
    r->give_up_at = timers_now(m->timers) + (lease_ms ? lease_ms : m->conf->lease_ms);
    memcpy(r->name, name, len);
    r->len = len;
    if (m->stopping) {
        r->counted = 1;
        m->shutdown_left++;
    }
    release_send(r);
}

/* A new grant to owner makes older queued releases of it stale. */
static void forget_releases(lockmgr_t *m, const char *name, size_t len, uint64_t owner) {
    release_t **p = &m->retry_head, *prev = NULL;
    while (*p) {
        release_t *r = *p;
        if (r->owner == owner && r->len == len && memcmp(r->name, name, len) == 0) {
            *p = r->next;
            if (m->retry_tail == r) m->retry_tail = prev;
            free(r);
            continue;
        }
        prev = r;
        p = &r->next;
    }
}

/* Local release: the next waiter may go at once; the Redis release goes
 * first on the same connection, so the next acquire sees it done. */
static void on_retry(timers_entry_t *t);

static void release_local(lock_t *l) {
    lockmgr_t *m = l->mgr;
    uint64_t owner = l->holder->id;
    uint32_t lease = l->lease_ms;
    drop_hold(l);
    release_all(m, l->name, l->len, owner, lease);
    if (l->remote_interest && l->head != NULL) {
        /* Handing the lock straight to the next local waiter keeps it
         * taken in Redis, and waiters of other daemons, woken by our last
         * release, would never get it. Leave it free for a moment. */
        l->remote_interest = 0;
        l->yielding = 1;
        timers_start(m->timers, &l->retry, LOCKMGR_YIELD_MS, on_retry);
        return;
    }
    kick(l);
}

/* ---- waiting and granting ---------------------------------------------- */

static void wait_unlink(wait_t *w) {
    lock_t *l = w->lock;
    if (!w->queued) return;
    if (w->prev) w->prev->next = w->next;
    else l->head = w->next;
    if (w->next) w->next->prev = w->prev;
    else l->tail = w->prev;
    w->prev = w->next = NULL;
    w->queued = 0;
    l->mgr->waiting--;
}

/* The queue emptied: no more wake-ups needed. */
static void queue_idle(lock_t *l) {
    if (l->head != NULL) return;
    timers_stop(l->mgr->timers, &l->retry);
    l->yielding = 0;
    if (l->subscribed) {
        l->subscribed = 0;
        backend_unsubscribe(l->mgr->backend, l->name, l->len);
    }
}

/* Takes w out of its queue; frees it unless its acquire is in flight. */
static void wait_end(wait_t *w) {
    lock_t *l = w->lock;
    int was_head = l->head == w;
    wait_unlink(w);
    timers_stop(l->mgr->timers, &w->deadline);
    if (w->owner && w->owner->pending == &w->hdr) w->owner->pending = NULL;
    w->owner = NULL;
    if (l->attempt != w) free(w);
    if (was_head) kick(l);
    queue_idle(l);
}

static void grant(lock_t *l, wait_t *w, uint64_t fence) {
    lockmgr_t *m = l->mgr;
    lock_owner_t *o = w->owner;
    l->holder = o;
    l->holds = 1;
    l->fence = fence;
    l->lease_ms = w->lease_ms;
    l->grant_id++;
    l->confirmed_at = 0;
    held_add(o, l);
    m->held++;
    m->stats.grants++;
    forget_releases(m, l->name, l->len, o->id);
    set_confirmed(l, w->sent_at);
    reply_grant(o, fence, 1);
    wait_end(w);
}

static void on_attempt(void *data, const backend_result_t *res);

static void attempt(lock_t *l) {
    lockmgr_t *m = l->mgr;
    wait_t *w = l->head;
    l->attempt = w;
    l->wake = 0;
    timers_stop(m->timers, &l->retry);
    w->sent_at = timers_now(m->timers);
    backend_acquire(m->backend, l->name, l->len, w->owner->id,
                    w->lease_ms ? w->lease_ms : m->conf->lease_ms, on_attempt, l);
}

/* Lets the head try if nothing stands in its way locally. */
static void kick(lock_t *l) {
    if (l->head == NULL || l->attempt != NULL || l->holder != NULL || l->mgr->stopping ||
        l->yielding)
        return;
    /* While Redis is away, queued requests keep waiting; they try again
     * when it is back (on_backend_state). */
    if (!backend_up(l->mgr->backend)) return;
    attempt(l);
}

static void on_retry(timers_entry_t *t) {
    lock_t *l = container_of(t, lock_t, retry);
    l->yielding = 0;
    kick(l);
    lock_maybe_free(l);
}

static void on_sub_event(void *data, backend_event_t ev) {
    lock_t *l = data;
    (void)ev;
    if (l->attempt != NULL) l->wake = 1;
    else kick(l);
}

static void on_attempt(void *data, const backend_result_t *res) {
    lock_t *l = data;
    lockmgr_t *m = l->mgr;
    wait_t *w = l->attempt;
    l->attempt = NULL;

    if (w->owner == NULL || m->stopping) {
        /* Cancelled while in flight: undo a grant it may have got. */
        if (res->status != BACKEND_OK || res->outcome != BACKEND_TAKEN)
            release_all(m, l->name, l->len, w->owner_id, w->lease_ms);
        if (w->owner != NULL) {
            reply_error(m, w->owner, PROTO_ERR_BACKEND, "shutting down");
            wait_end(w);
        } else {
            free(w);
        }
        if (m->stopping) shutdown_step(m);
        kick(l);
        lock_maybe_free(l);
        return;
    }
    if (res->status != BACKEND_OK) {
        /* The script may have run: make sure no grant is left behind. */
        if (res->status != BACKEND_FAILED)
            release_all(m, l->name, l->len, w->owner->id, w->lease_ms);
        if (w->tried && res->status != BACKEND_FAILED) {
            /* A waiter that was already waiting keeps waiting. */
            return;
        }
        log_debug("acquire %s: %s", l->name, res->error);
        reply_backend(m, w->owner, res);
        wait_end(w);
        lock_maybe_free(l);
        return;
    }
    switch (res->outcome) {
    case BACKEND_GRANTED:
        grant(l, w, res->fence);
        break;
    case BACKEND_REENTERED:
        /* A stale field of this owner (a release that has not got through
         * yet): clear it, then try again behind it. */
        release_all(m, l->name, l->len, w->owner->id, w->lease_ms);
        attempt(l);
        break;
    case BACKEND_TAKEN:
        w->ttl_ms = res->ttl_ms;
        if (w->once) {
            m->stats.timeouts++;
            char line[PROTO_REPLY_MAX];
            reply_line(w->owner, line, proto_reply_timeout(line, sizeof(line), res->ttl_ms));
            wait_end(w);
            break;
        }
        w->tried = 1;
        if (l->wake) {
            attempt(l);
            break;
        }
        if (!l->subscribed) {
            /* Subscribed now, the confirmation triggers one more try, so a
             * release between this try and the subscription is not missed. */
            l->subscribed = 1;
            backend_subscribe(m->backend, l->name, l->len, on_sub_event, l);
            if (l->attempt != NULL) break;
        }
        /* Expiry publishes nothing: try again when the holder's lease ends. */
        timers_start(m->timers, &l->retry,
                     res->ttl_ms >= 0 ? (uint64_t)res->ttl_ms + 1 : LOCKMGR_NO_TTL_RETRY_MS,
                     on_retry);
        break;
    }
    lock_maybe_free(l);
}

static void on_wait_deadline(timers_entry_t *t) {
    wait_t *w = container_of(t, wait_t, deadline);
    lock_t *l = w->lock;
    char line[PROTO_REPLY_MAX];
    long long ttl = l->holder ? local_ttl(l) : (w->tried ? w->ttl_ms : -1);
    l->mgr->stats.timeouts++;
    reply_line(w->owner, line, proto_reply_timeout(line, sizeof(line), ttl));
    wait_end(w);
    lock_maybe_free(l);
}

static void start_wait(lockmgr_t *m, lock_owner_t *o, const proto_request_t *req) {
    if (o->held_count >= m->conf->max_locks_per_client) {
        reply_error(m, o, PROTO_ERR_LIMIT, "max_locks_per_client reached");
        return;
    }
    if (m->waiting >= m->conf->max_waiters) {
        reply_error(m, o, PROTO_ERR_LIMIT, "max_waiters reached");
        return;
    }
    if (!backend_up(m->backend)) {
        reply_error(m, o, PROTO_ERR_BACKEND, backend_down_reason(m->backend));
        return;
    }
    lock_t *l = lock_get(m, req->name, req->name_len);
    wait_t *w = l ? calloc(1, sizeof(*w)) : NULL;
    if (w == NULL) {
        reply_error(m, o, PROTO_ERR_LIMIT, "out of memory");
        if (l) lock_maybe_free(l);
        return;
    }
    int once = req->cmd == PROTO_CMD_TRYLOCK && req->wait_ms == 0;
    if (once && (l->head != NULL || l->holder != NULL)) {
        /* Someone here is ahead: no try, to keep first come first served. */
        char line[PROTO_REPLY_MAX];
        m->stats.timeouts++;
        free(w);
        reply_line(o, line, proto_reply_timeout(line, sizeof(line), local_ttl(l)));
        return;
    }
    w->hdr.kind = PENDING_WAIT;
    w->owner = o;
    w->owner_id = o->id;
    w->lock = l;
    w->once = once;
    w->lease_ms = req->lease_ms;
    w->ttl_ms = -1;
    w->prev = l->tail;
    if (l->tail) l->tail->next = w;
    else l->head = w;
    l->tail = w;
    w->queued = 1;
    m->waiting++;
    o->pending = &w->hdr;
    if (req->cmd == PROTO_CMD_TRYLOCK && req->wait_ms > 0)
        timers_start(m->timers, &w->deadline, req->wait_ms, on_wait_deadline);
    kick(l);
}

/* ---- requests on a held lock ------------------------------------------- */

static op_t *op_new(lockmgr_t *m, lock_owner_t *o, lock_t *l, const proto_request_t *req) {
    op_t *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        reply_error(m, o, PROTO_ERR_LIMIT, "out of memory");
        return NULL;
    }
    op->hdr.kind = PENDING_OP;
    op->mgr = m;
    op->owner = o;
    op->lock = l;
    op->cmd = req->cmd;
    op->req = *req;
    op->sent_at = timers_now(m->timers);
    if (l) {
        l->busy++;
        op->grant_id = l->grant_id;
    }
    o->pending = &op->hdr;
    return op;
}

/* Ends op; returns its owner if it is still there to answer. */
static lock_owner_t *op_end(op_t *op) {
    lock_owner_t *o = op->owner;
    if (op->lock) op->lock->busy--;
    if (o && o->pending == &op->hdr) o->pending = NULL;
    return o;
}

/* The op's lock is still held by the op's owner under the same grant. */
static int op_still_held(const op_t *op) {
    return op->lock && op->owner && op->lock->holder == op->owner &&
           op->lock->grant_id == op->grant_id;
}

static void on_reentry(void *data, const backend_result_t *res) {
    op_t *op = data;
    lockmgr_t *m = op->mgr;
    lock_t *l = op->lock;
    int held = op_still_held(op);
    lock_owner_t *o = op_end(op);

    if (o == NULL) {
        /* The owner left; its release covers every hold. */
    } else if (res->status != BACKEND_OK) {
        reply_backend(m, o, res);
    } else if (res->outcome == BACKEND_REENTERED && held) {
        l->holds++;
        m->stats.reentries++;
        if (op->lease_ms) l->lease_ms = op->lease_ms;
        set_confirmed(l, op->sent_at);
        reply_grant(o, l->fence, l->holds);
    } else {
        /* Our hold had ended in Redis without our knowing. */
        if (held) lost(l, "expired");
        if (res->outcome == BACKEND_GRANTED || res->outcome == BACKEND_REENTERED)
            release_all(m, l->name, l->len, o->id, op->lease_ms);
        start_wait(m, o, &op->req);
    }
    lock_maybe_free(l);
    free(op);
}

static void on_unlock_step(void *data, const backend_result_t *res) {
    (void)data;
    if (res->status != BACKEND_OK) log_debug("unlock step: %s", res->error);
}

static void do_unlock(lockmgr_t *m, lock_owner_t *o, lock_t *l) {
    if (l == NULL || l->holder != o) {
        reply_error(m, o, PROTO_ERR_NOTHELD, NULL);
        return;
    }
    if (l->holds > 1) {
        /* One hold less; Redis keeps the count for Redisson's sake. */
        l->holds--;
        backend_release(m->backend, l->name, l->len, o->id, 0, on_unlock_step, NULL);
        reply_num(o, l->holds);
        return;
    }
    /* The last hold: answered now; the release reaches Redis in order
     * before any later acquire, and is retried while Redis is away. */
    release_local(l);
    reply_num(o, 0);
    lock_maybe_free(l);
}

static void on_renew(void *data, const backend_result_t *res) {
    op_t *op = data;
    lockmgr_t *m = op->mgr;
    lock_t *l = op->lock;
    int held = op_still_held(op);
    lock_owner_t *o = op_end(op);

    if (o == NULL) {
        /* gone */
    } else if (res->status != BACKEND_OK) {
        reply_backend(m, o, res);
    } else if (!held) {
        reply_error(m, o, PROTO_ERR_NOTHELD, NULL);
    } else if (res->renewed[0] == BACKEND_RENEWED) {
        if (l->lease_ms && op->lease_ms) l->lease_ms = op->lease_ms;
        set_confirmed(l, op->sent_at);
        reply_num(o, op->lease_ms);
    } else {
        lost(l, res->renewed[0] == BACKEND_FORCED ? "forced" : "expired");
        reply_error(m, o, PROTO_ERR_NOTHELD, NULL);
        kick(l);
    }
    lock_maybe_free(l);
    free(op);
}

static void do_renew(lockmgr_t *m, lock_owner_t *o, lock_t *l, const proto_request_t *req) {
    if (l == NULL || l->holder != o) {
        reply_error(m, o, PROTO_ERR_NOTHELD, NULL);
        return;
    }
    op_t *op = op_new(m, o, l, req);
    if (op == NULL) return;
    op->lease_ms = req->lease_ms ? req->lease_ms : l->lease_ms ? l->lease_ms : m->conf->lease_ms;
    op->item.name = l->name;
    op->item.len = l->len;
    op->item.owner = o->id;
    backend_renew(m->backend, &op->item, 1, op->lease_ms, on_renew, op);
}

static void on_status(void *data, const backend_result_t *res) {
    op_t *op = data;
    lockmgr_t *m = op->mgr;
    lock_t *l = op->lock;
    int held = op_still_held(op);
    lock_owner_t *o = op_end(op);
    char line[PROTO_REPLY_MAX];
    int n;

    if (o == NULL) {
        /* gone */
    } else if (res->status != BACKEND_OK) {
        reply_backend(m, o, res);
    } else if (held && res->holds > 0) {
        n = proto_reply_ok(line, sizeof(line), "MINE %u %lld %llu", l->holds, res->ttl_ms,
                           (unsigned long long)l->fence);
        reply_line(o, line, n);
    } else {
        if (held) {
            lost(l, "expired");
            kick(l);
        }
        if (res->ttl_ms == -2) n = proto_reply_ok(line, sizeof(line), "FREE");
        else n = proto_reply_ok(line, sizeof(line), "TAKEN %lld", res->ttl_ms);
        reply_line(o, line, n);
    }
    if (l) lock_maybe_free(l);
    free(op);
}

static void on_force(void *data, const backend_result_t *res) {
    op_t *op = data;
    lockmgr_t *m = op->mgr;
    lock_owner_t *o = op_end(op);
    lock_t *l = lock_find(m, op->req.name, op->req.name_len);

    if (res->status == BACKEND_OK && res->removed && l != NULL && l->holder != NULL) {
        lost(l, "forced");
        kick(l);
    }
    if (o == NULL) {
        /* gone */
    } else if (res->status != BACKEND_OK) {
        reply_backend(m, o, res);
    } else {
        reply_num(o, res->removed);
    }
    if (l) lock_maybe_free(l);
    free(op);
}

/* ---- the watchdog ------------------------------------------------------ */

/* Watchdog locks are renewed when due (renew_every_ms after Redis last
 * confirmed them), taking every lock due within the next quarter period
 * along so that batches stay full; at most LOCKMGR_RENEW_INFLIGHT batches
 * are in flight, so a burst is spread out rather than queued whole. */
#define LOCKMGR_RENEW_INFLIGHT 4

static uint64_t renew_slack(const lockmgr_t *m) {
    return m->conf->renew_every_ms / 4;
}

static void sweep(lockmgr_t *m);

static void on_sweep(timers_entry_t *t) {
    sweep(container_of(t, lockmgr_t, sweep));
}

/* A new watchdog lock: make sure a sweep is planned. */
static void sweep_soon(lockmgr_t *m) {
    if (!timers_active(&m->sweep) && m->renew_inflight == 0) sweep(m);
}

static void on_renew_batch(void *data, const backend_result_t *res) {
    batch_t *b = data;
    lockmgr_t *m = b->mgr;
    m->renew_inflight--;
    for (size_t i = 0; i < b->count; i++) {
        lock_t *l = b->locks[i];
        l->busy--;
        if (l->holder && l->grant_id == b->grants[i]) {
            l->renewing = 0;
            if (res->status != BACKEND_OK) {
                /* stays due; the loss timer watches it */
            } else if (res->renewed[i] == BACKEND_RENEWED) {
                m->stats.renewals++;
                if (!l->lease_ms) confirm(l, b->sent_at);
            } else {
                lost(l, res->renewed[i] == BACKEND_FORCED ? "forced" : "expired");
                kick(l);
            }
        }
        lock_maybe_free(l);
    }
    if (res->status != BACKEND_OK)
        log_debug("watchdog renewal of %zu locks: %s", b->count, res->error);
    free(b->locks);
    free(b->grants);
    free(b->items);
    free(b);
    arm_loss(m);
    if (m->stopping) return;
    if (res->status == BACKEND_OK) sweep(m);
    else if (!timers_active(&m->sweep)) /* not in a tight loop: a little later */
        timers_start(m->timers, &m->sweep, renew_slack(m) + 1, on_sweep);
}

static void renew_batch(lockmgr_t *m, lock_t **locks, size_t count) {
    batch_t *b = calloc(1, sizeof(*b));
    if (b == NULL) return;
    b->locks = malloc(count * sizeof(*b->locks));
    b->grants = malloc(count * sizeof(*b->grants));
    b->items = malloc(count * sizeof(*b->items));
    if (!b->locks || !b->grants || !b->items) {
        free(b->locks);
        free(b->grants);
        free(b->items);
        free(b);
        return;
    }
    b->mgr = m;
    b->count = count;
    b->sent_at = timers_now(m->timers);
    for (size_t i = 0; i < count; i++) {
        lock_t *l = locks[i];
        l->busy++;
        l->renewing = 1;
        b->locks[i] = l;
        b->grants[i] = l->grant_id;
        b->items[i].name = l->name;
        b->items[i].len = l->len;
        b->items[i].owner = l->holder->id;
    }
    m->renew_inflight++;
    backend_renew(m->backend, b->items, count, m->conf->lease_ms, on_renew_batch, b);
}

/* Sends the due locks, oldest first, and plans the next sweep. */
static void sweep(lockmgr_t *m) {
    uint64_t now = timers_now(m->timers), every = m->conf->renew_every_ms;
    lock_t *batch[BACKEND_RENEW_BATCH];
    size_t n = 0;
    lock_t *l = m->dog_head;

    timers_stop(m->timers, &m->sweep);
    if (!backend_up(m->backend) || m->stopping) return; /* resumed when Redis is back */
    while (l != NULL && m->renew_inflight < LOCKMGR_RENEW_INFLIGHT) {
        if (l->renewing) {
            l = l->dog_next;
            continue;
        }
        if (l->confirmed_at + every > now + renew_slack(m)) break;
        batch[n++] = l;
        l = l->dog_next;
        if (n == BACKEND_RENEW_BATCH) {
            renew_batch(m, batch, n);
            n = 0;
        }
    }
    if (n > 0) renew_batch(m, batch, n);
    if (m->renew_inflight >= LOCKMGR_RENEW_INFLIGHT) return; /* a reply sweeps on */
    while (l != NULL && l->renewing) l = l->dog_next;
    if (l != NULL) {
        uint64_t due = l->confirmed_at + every;
        timers_start_at(m->timers, &m->sweep, due > now ? due : now, on_sweep);
    }
}

static uint64_t loss_deadline(const lockmgr_t *m, const lock_t *l) {
    uint32_t lease = m->conf->lease_ms;
    return l->confirmed_at + lease - lease / LOCKMGR_LOSS_MARGIN_DIV;
}

static void on_loss(timers_entry_t *t) {
    lockmgr_t *m = container_of(t, lockmgr_t, loss);
    uint64_t now = timers_now(m->timers);
    while (m->dog_head && loss_deadline(m, m->dog_head) <= now) {
        lock_t *l = m->dog_head;
        lost(l, backend_up(m->backend) ? "expired" : "backend");
        kick(l);
        lock_maybe_free(l);
    }
    arm_loss(m);
}

static void arm_loss(lockmgr_t *m) {
    if (m->dog_head == NULL) timers_stop(m->timers, &m->loss);
    else timers_start_at(m->timers, &m->loss, loss_deadline(m, m->dog_head), on_loss);
}

/* ---- backend state ------------------------------------------------------ */

static void on_backend_state(void *data, int up) {
    lockmgr_t *m = data;
    if (!up) return;
    /* Releases first, so that the acquires below see them done. */
    release_t *r = m->retry_head;
    m->retry_head = m->retry_tail = NULL;
    while (r) {
        release_t *next = r->next;
        release_send(r);
        r = next;
    }
    size_t i = 0;
    for (hmap_node_t *n = hmap_next(&m->locks, &i, NULL); n; n = hmap_next(&m->locks, &i, n))
        kick(container_of(n, lock_t, node));
    sweep(m);
}

/* ---- public ------------------------------------------------------------ */

lockmgr_t *lockmgr_new(uv_loop_t *loop, const conf_t *conf) {
    lockmgr_t *m = calloc(1, sizeof(*m));
    if (m == NULL) return NULL;
    m->loop = loop;
    m->conf = conf;
    m->timers = timers_new(loop);
    if (m->timers == NULL || hmap_init(&m->locks) != 0) {
        free(m);
        return NULL;
    }
    m->backend = backend_new(loop, conf, m->timers);
    if (m->backend == NULL) {
        hmap_free(&m->locks);
        timers_free(m->timers);
        free(m);
        return NULL;
    }
    backend_on_state(m->backend, on_backend_state, m);
    return m;
}

void lockmgr_request(lockmgr_t *m, lock_owner_t *o, const proto_request_t *req) {
    lock_t *l = lock_find(m, req->name, req->name_len);
    op_t *op;

    if (m->stopping) {
        reply_error(m, o, PROTO_ERR_BACKEND, "shutting down");
        return;
    }
    switch (req->cmd) {
    case PROTO_CMD_LOCK:
    case PROTO_CMD_TRYLOCK:
        if (l != NULL && l->holder == o) {
            if (!backend_up(m->backend)) {
                reply_error(m, o, PROTO_ERR_BACKEND, backend_down_reason(m->backend));
                return;
            }
            op = op_new(m, o, l, req);
            if (op == NULL) return;
            op->lease_ms = req->lease_ms;
            backend_acquire(m->backend, l->name, l->len, o->id,
                            req->lease_ms ? req->lease_ms
                                          : l->lease_ms ? l->lease_ms : m->conf->lease_ms,
                            on_reentry, op);
            return;
        }
        start_wait(m, o, req);
        return;
    case PROTO_CMD_UNLOCK:
        do_unlock(m, o, l);
        return;
    case PROTO_CMD_RENEW:
        do_renew(m, o, l, req);
        return;
    case PROTO_CMD_STATUS:
        op = op_new(m, o, l, req);
        if (op == NULL) return;
        backend_status(m->backend, req->name, req->name_len, o->id, on_status, op);
        return;
    case PROTO_CMD_FORCEUNLOCK:
        if (o->uid != 0 && !conf_is_admin(m->conf, o->uid)) {
            log_warn("client %llu (uid %u) denied FORCEUNLOCK %s", (unsigned long long)o->id,
                     (unsigned)o->uid, req->name);
            reply_error(m, o, PROTO_ERR_DENIED, "FORCEUNLOCK needs uid 0 or one in admin_uids");
            return;
        }
        log_info("client %llu (uid %u) FORCEUNLOCK %s", (unsigned long long)o->id,
                 (unsigned)o->uid, req->name);
        op = op_new(m, o, NULL, req);
        if (op == NULL) return;
        backend_force(m->backend, req->name, req->name_len, on_force, op);
        return;
    default:
        reply_error(m, o, PROTO_ERR_UNKNOWN, NULL);
        return;
    }
}

void lockmgr_owner_drop(lockmgr_t *m, lock_owner_t *o) {
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
    while (o->held != NULL) {
        lock_t *l = o->held;
        release_local(l);
        lock_maybe_free(l);
    }
    (void)m;
}

void lockmgr_stats(const lockmgr_t *m, lockmgr_stats_t *out) {
    *out = m->stats;
    out->locks_held = m->held;
    out->waiters = m->waiting;
    out->backend_up = backend_up(m->backend);
}

void lockmgr_shutdown(lockmgr_t *m, lockmgr_done_cb done, void *data) {
    m->stopping = 1;
    m->done = done;
    m->done_data = data;
    m->shutdown_left = 1; /* ourselves, until every release is sent */
    timers_stop(m->timers, &m->sweep);
    timers_stop(m->timers, &m->loss);
    /* Release every held lock; holders are told by their closing sockets. */
    size_t i = 0;
    hmap_node_t *n, *next;
    for (n = hmap_next(&m->locks, &i, NULL); n != NULL; n = next) {
        next = hmap_next(&m->locks, &i, n);
        lock_t *l = container_of(n, lock_t, node);
        if (l->holder) {
            uint64_t owner = l->holder->id;
            drop_hold(l);
            release_all(m, l->name, l->len, owner, l->lease_ms);
        }
    }
    /* Acquires in flight are undone when they return. */
    i = 0;
    for (n = hmap_next(&m->locks, &i, NULL); n != NULL; n = hmap_next(&m->locks, &i, n))
        if (container_of(n, lock_t, node)->attempt) m->shutdown_left++;
    /* Queued releases will not get another chance. */
    release_t *r = m->retry_head;
    m->retry_head = m->retry_tail = NULL;
    while (r) {
        release_t *nx = r->next;
        r->counted = 1;
        m->shutdown_left++;
        release_send(r);
        r = nx;
    }
    shutdown_step(m);
}

void lockmgr_free(lockmgr_t *m) {
    if (m == NULL) return;
    backend_free(m->backend);
    size_t i = 0;
    hmap_node_t *n, *next;
    for (n = hmap_next(&m->locks, &i, NULL); n != NULL; n = next) {
        next = hmap_next(&m->locks, &i, n);
        lock_t *l = container_of(n, lock_t, node);
        for (wait_t *w = l->head; w != NULL;) {
            wait_t *wn = w->next;
            free(w);
            w = wn;
        }
        free(l);
    }
    hmap_free(&m->locks);
    release_t *r = m->retry_head;
    while (r) {
        release_t *nx = r->next;
        free(r);
        r = nx;
    }
    timers_free(m->timers);
    free(m);
}
