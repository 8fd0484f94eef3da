/* Releases that must reach Redis: sent at once, retried while Redis is away.
 * SPDX-License-Identifier: MIT
 *
 * A leave of a place in a name's queue in Redis (a fair lock's waiter's,
 * an election's candidate's) goes the same way: a place left behind would
 * hold every waiter of the name, on every daemon, up until it ends. */
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/kind.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

/* A release done with goes back to its pool. */
static void release_dispose(lockmgr_t *m, release_t *r) {
    pool_put_sized(&m->release_pool, r, sizeof(*r) + r->len + 1);
}

static void release_send(release_t *r);

/* A leave whose owner waits for the name in that mode again: the new
 * wait's attempts keep (or take) the place, and its end leaves it. A
 * TRYLOCK-like try once takes none. */
static int leave_stale(lockmgr_t *m, const release_t *r) {
    lock_t *l = r->type == BACKEND_LEAVE ? lock_find(m, r->name, r->len) : NULL;
    const wait_t *w;
    if (l == NULL || l->q == NULL) return 0;
    int wake = lock_kind_of(r->mode)->wake_one;
    TAILQ_FOREACH(w, &l->q->waiters, link) {
        if (wake && lock_kind_of(w->mode)->wake_one) {
            l->q->wake_queued = 1; /* the daemon's place is this queue's now */
            return 1;
        }
        if (!wake && w->owner_id == r->op.owner && w->mode == r->mode && !w->once) return 1;
    }
    return 0;
}

static void on_release(backend_op_t *op) {
    release_t *r = container_of(op, release_t, op);
    lockmgr_t *m = r->mgr;
    const backend_result_t *res = &op->res;

    if (res->status == BACKEND_OK && r->type == BACKEND_RELEASE) {
        lock_t *l = lock_find(m, r->name, r->len);
        if (l != NULL) l->remote_interest = res->others_waiting;
    }
    if (res->status == BACKEND_OK || res->status == BACKEND_FAILED || m->stopping ||
        timers_now(m->timers) >= r->give_up_at || leave_stale(m, r)) {
        if (res->status == BACKEND_FAILED)
            log_warn("%s %.*s failed: %s",
                     r->type == BACKEND_LEAVE ? "leaving the queue of" : "release of",
                     (int)r->len, r->name, res->error);
        int counted = r->counted;
        release_dispose(m, r);
        if (counted) lockmgr_shutdown_step(m);
        return;
    }
    /* Redis is away: try again once it is back. */
    STAILQ_INSERT_TAIL(&m->retries, r, link);
}

static void release_send(release_t *r) {
    lockmgr_t *m = r->mgr;
    if (r->type == BACKEND_RELEASE) m->stats.releases++;
    lock_op_init(&r->op, r->type, r->mode, r->name, r->len, r->op.owner, on_release);
    backend_submit(m->backend, &r->op);
}

static void release_queue(lockmgr_t *m, backend_op_type_t kind, const char *name, size_t len,
                          uint64_t owner, uint32_t lease_ms, lock_mode_t mode, uint32_t base,
                          uint32_t count) {
    release_t *r = pool_get_sized(&m->release_pool, sizeof(*r) + len + 1);
    if (r == NULL) return; /* the lease (the place's) will end it */
    r->mgr = m;
    r->type = kind;
    r->op.owner = owner;
    r->op.base = base;
    r->op.count = count;
    r->mode = mode;
    r->give_up_at = timers_now(m->timers) + (lease_ms ? lease_ms : m->conf->lease_ms);
    memcpy(r->name, name, len);
    r->len = len;
    if (m->stopping) {
        r->counted = 1;
        m->shutdown_left++;
    }
    release_send(r);
}

void release_all(lockmgr_t *m, const char *name, size_t len, uint64_t owner, uint32_t lease_ms,
                 lock_mode_t mode) {
    release_queue(m, BACKEND_RELEASE, name, len, owner, lease_ms, mode, 0, 0);
}

void release_part(lockmgr_t *m, const char *name, size_t len, uint64_t owner, uint32_t lease_ms,
                  lock_mode_t mode, uint32_t base, uint32_t count) {
    release_queue(m, BACKEND_RELEASE, name, len, owner, lease_ms, mode, base, count);
}

void release_leave(lockmgr_t *m, const char *name, size_t len, uint64_t owner, lock_mode_t mode) {
    /* A place lasts the configured lease_ms from its last ask (fair.c's
     * and elect.c's queue_ms), more only with Redisson's places ahead. */
    release_queue(m, BACKEND_LEAVE, name, len, owner, 0, mode, 0, 0);
}

void release_hold_all(const hold_t *h) {
    const lock_t *l = h->lock;
    release_all(l->mgr, l->name, l->len, h->owner->id, lock_hold_redis_lease(h), h->mode);
}

void release_hold(const hold_t *h) {
    const lock_kind_t *k = lock_kind_of(h->mode);
    if (k->release_hold) k->release_hold(h);
    else release_hold_all(h);
}

void release_forget(lockmgr_t *m, const char *name, size_t len, uint64_t owner,
                    lock_mode_t mode) {
    release_t *r, *next;
    for (r = STAILQ_FIRST(&m->retries); r != NULL; r = next) {
        next = STAILQ_NEXT(r, link);
        if (r->op.owner == owner && r->mode == mode && r->len == len &&
            memcmp(r->name, name, len) == 0) {
            STAILQ_REMOVE(&m->retries, r, release_s, link);
            release_dispose(m, r);
        }
    }
}

void release_forget_below(lockmgr_t *m, const char *name, size_t len, uint64_t owner,
                          lock_mode_t mode, uint32_t count) {
    release_t *r, *next;
    for (r = STAILQ_FIRST(&m->retries); r != NULL; r = next) {
        next = STAILQ_NEXT(r, link);
        if (r->op.owner != owner || r->mode != mode || r->len != len ||
            memcmp(r->name, name, len) != 0)
            continue;
        uint32_t end = r->op.base + r->op.count;
        if (end <= count) {
            STAILQ_REMOVE(&m->retries, r, release_s, link);
            release_dispose(m, r);
        } else if (r->op.base < count) {
            r->op.base = count;
            r->op.count = end - count;
        }
    }
}

/* The owner's acquire of the name is in flight: a release sent now would
 * run after it (ops of one name keep their order) and delete the grant it
 * may make. It waits: that acquire's grant forgets it (release_forget),
 * and its failure sends a release of its own. */
static int behind_acquire(lockmgr_t *m, const release_t *r) {
    lock_t *l = lock_find(m, r->name, r->len);
    const wait_t *w;
    if (l == NULL) return 0;
    LIST_FOREACH(w, &l->flying, flight)
        if (w->owner_id == r->op.owner) return 1;
    return 0;
}

void release_resend(lockmgr_t *m) {
    struct release_list_s q = STAILQ_HEAD_INITIALIZER(q);
    release_t *r;
    STAILQ_CONCAT(&q, &m->retries);
    while ((r = STAILQ_FIRST(&q)) != NULL) {
        STAILQ_REMOVE_HEAD(&q, link);
        if (!m->stopping && leave_stale(m, r)) release_dispose(m, r);
        else if (!m->stopping && behind_acquire(m, r)) STAILQ_INSERT_TAIL(&m->retries, r, link);
        else release_send(r);
    }
}

void release_flush_for_shutdown(lockmgr_t *m) {
    release_t *r;
    STAILQ_FOREACH(r, &m->retries, link) {
        r->counted = 1;
        m->shutdown_left++;
    }
    release_resend(m);
}

void release_free_all(lockmgr_t *m) {
    release_t *r;
    while ((r = STAILQ_FIRST(&m->retries)) != NULL) {
        STAILQ_REMOVE_HEAD(&m->retries, link);
        release_dispose(m, r);
    }
}
