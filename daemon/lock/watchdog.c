/* The watchdog: renews watchdog-kept holds in batches, and gives up holds Redis no longer confirms.
 * SPDX-License-Identifier: MIT
 *
 * A hold asked for without a lease is kept by the watchdog: renewed when
 * due (renew_every_ms after Redis last confirmed it), taking every hold due
 * within the next quarter period along so that batches stay full; at most
 * LOCKMGR_RENEW_INFLIGHT batches are in flight, so a burst is spread out
 * rather than queued whole. A hold with a lease simply expires.
 *
 * Every hold counts from the lease its last confirmed grant or renewal set
 * in Redis (redis_lease_ms), not from the configuration: a reload may change
 * lease_ms while holds leased with the old one are still in Redis. Those are
 * kept apart, on m->stale, in order of their own loss deadlines, and renewed
 * at once with the new lease; m->dog keeps only holds leased with the
 * current one, so that its order is both the renewal and the loss order. */
#include <stdlib.h>

#include "daemon/lock/kind.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

typedef struct batch_s batch_t;

/* One hold in a watchdog batch. */
typedef struct item_s {
    backend_op_t op;
    batch_t *batch;
    lock_t *lock;              /* holds a busy reference */
    uint64_t grant_id;
} item_t;

struct batch_s {
    lockmgr_t *mgr;
    uint64_t sent_at;
    size_t left;               /* items whose answer has not come */
    size_t failed;             /* items that got no answer from Redis */
    item_t items[];
};

static uint64_t renew_slack(const lockmgr_t *m) {
    return m->conf->renew_every_ms / 4;
}

/* Given up as lost (reason backend) a margin before Redis could drop it. */
static uint64_t loss_deadline(const hold_t *h) {
    uint32_t lease = h->redis_lease_ms;
    return h->confirmed_at + lock_hold_valid(h->lock->mgr, lease) - lease / LOCKMGR_LOSS_MARGIN_DIV;
}

/* ---- the lists: m->dog by confirmed_at, m->stale by loss deadline --------- */

/* The sweep resumes on m->dog from m->dog_cursor: every hold before it is in a
 * renewal batch, so that a sweep does not walk over the thousands in
 * flight again. A hold that is no longer renewing but stays where it was
 * (its renewal failed), or one inserted before the tail, resets the cursor
 * to the head. */

void watchdog_remove(hold_t *h) {
    lockmgr_t *m = h->lock->mgr;
    if (!h->on_dog) return;
    if (h->on_stale) {
        TAILQ_REMOVE(&m->stale, h, dog);
    } else {
        if (m->dog_cursor == h) m->dog_cursor = TAILQ_NEXT(h, dog);
        TAILQ_REMOVE(&m->dog, h, dog);
    }
    h->on_dog = 0;
    h->on_stale = 0;
}

/* m->stale, by loss deadline (new ones are mostly last). */
static void stale_insert(lockmgr_t *m, hold_t *h) {
    uint64_t deadline = loss_deadline(h);
    hold_t *after = TAILQ_LAST(&m->stale, dog_list_s);
    while (after && loss_deadline(after) > deadline) after = TAILQ_PREV(after, dog_list_s, dog);
    if (after) TAILQ_INSERT_AFTER(&m->stale, after, h, dog);
    else TAILQ_INSERT_HEAD(&m->stale, h, dog);
    h->on_dog = 1;
    h->on_stale = 1;
}

static void dog_insert(lockmgr_t *m, hold_t *h) {
    if (h->redis_lease_ms != m->dog_lease) {
        stale_insert(m, h);
        return;
    }
    hold_t *after = TAILQ_LAST(&m->dog, dog_list_s);
    while (after && after->confirmed_at > h->confirmed_at)
        after = TAILQ_PREV(after, dog_list_s, dog);
    if (after != TAILQ_LAST(&m->dog, dog_list_s)) m->dog_cursor = NULL;
    if (after) TAILQ_INSERT_AFTER(&m->dog, after, h, dog);
    else TAILQ_INSERT_HEAD(&m->dog, h, dog);
    h->on_dog = 1;
}

/* ---- a live restore ---------------------------------------------------------- */

static void on_expiry(timers_entry_t *t);
static void sweep_soon(lockmgr_t *m, int now);

/* Holds come back in their owners' order, not their lists': each goes last,
 * and the lists are put in order once, at the end (a sorted insertion each
 * is quadratic in the holds). */
void watchdog_adopt(hold_t *h, uint64_t sent_at, uint32_t lease_ms) {
    lockmgr_t *m = h->lock->mgr;
    h->confirmed_at = sent_at;
    h->redis_lease_ms = lease_ms;
    if (h->lease_ms) {
        timers_start_at(m->timers, &h->expiry,
                        h->confirmed_at + lock_hold_valid(m, h->redis_lease_ms), on_expiry);
        return;
    }
    if (lease_ms != m->dog_lease) {
        TAILQ_INSERT_TAIL(&m->stale, h, dog);
        h->on_stale = 1;
    } else {
        TAILQ_INSERT_TAIL(&m->dog, h, dog);
    }
    h->on_dog = 1;
}

/* A hold and its sort key side by side: the comparisons read no hold. */
typedef struct keyed_s {
    uint64_t key;
    hold_t *h;
} keyed_t;

static int by_key(const void *a, const void *b) {
    uint64_t x = ((const keyed_t *)a)->key, y = ((const keyed_t *)b)->key;
    return x < y ? -1 : x > y;
}

/* Sorts one list by confirmed_at (loss 0) or its loss deadline (1); -1 on
 * no memory (it stays as it is). */
static int sort_list(struct dog_list_s *list, int loss) {
    size_t n = 0, i = 0;
    hold_t *h;
    keyed_t *all;
    TAILQ_FOREACH(h, list, dog) n++;
    if (n < 2) return 0;
    if ((all = malloc(n * sizeof(*all))) == NULL) return -1;
    TAILQ_FOREACH(h, list, dog) all[i++] = (keyed_t){loss ? loss_deadline(h) : h->confirmed_at, h};
    qsort(all, n, sizeof(*all), by_key);
    TAILQ_INIT(list);
    for (i = 0; i < n; i++) TAILQ_INSERT_TAIL(list, all[i].h, dog);
    free(all);
    return 0;
}

int watchdog_resort(lockmgr_t *m) {
    m->dog_cursor = NULL;
    if (sort_list(&m->dog, 0) != 0 || sort_list(&m->stale, 1) != 0) return -1;
    watchdog_arm_loss(m);
    sweep_soon(m, !TAILQ_EMPTY(&m->stale));
    return 0;
}

/* ---- leases ---------------------------------------------------------------- */

static void on_expiry(timers_entry_t *t) {
    hold_t *h = container_of(t, hold_t, expiry);
    lock_t *l = h->lock;
    /* The lease is counted from when the grant was sent, so Redis may keep
     * the key a moment longer: delete our field now, which also wakes the
     * waiters at once. */
    release_hold(h);
    lock_hold_lost(h, LOCK_LOST_EXPIRED);
    lock_kick(l);
    lock_maybe_free(l);
}

void watchdog_confirm(hold_t *h, uint64_t sent_at, uint32_t lease_ms) {
    lockmgr_t *m = h->lock->mgr;
    /* Of ops on one connection, the one sent last set Redis's TTL. */
    if (sent_at >= h->confirmed_at) {
        h->confirmed_at = sent_at;
        h->redis_lease_ms = lease_ms;
    }
    watchdog_remove(h);
    if (h->lease_ms) {
        timers_start_at(m->timers, &h->expiry,
                        h->confirmed_at + lock_hold_valid(m, h->redis_lease_ms), on_expiry);
    } else {
        timers_stop(m->timers, &h->expiry);
        dog_insert(m, h);
    }
}

/* A batch's reply sweeps on; else a hold leased with an old lease_ms is
 * due now, any other when the sweep timer says. */
static void sweep_soon(lockmgr_t *m, int now) {
    if (m->renew_inflight == 0 && (now || !timers_active(&m->sweep))) watchdog_sweep(m);
}

void watchdog_set_confirmed(hold_t *h, uint64_t sent_at, uint32_t lease_ms) {
    watchdog_confirm(h, sent_at, lease_ms);
    if (!h->lease_ms) {
        watchdog_arm_loss(h->lock->mgr);
        sweep_soon(h->lock->mgr, h->on_stale);
    }
}

/* ---- renewals ---------------------------------------------------------------- */

static void on_sweep(timers_entry_t *t) {
    watchdog_sweep(container_of(t, lockmgr_t, sweep));
}

static hold_t *hold_by_grant(const lock_t *l, uint64_t grant_id) {
    hold_t *h;
    LIST_FOREACH(h, &l->holds, by_lock)
        if (h->grant_id == grant_id) return h;
    return NULL;
}

static void batch_done(batch_t *b) {
    lockmgr_t *m = b->mgr;
    int ok = b->failed == 0;
    m->renew_inflight--;
    if (!ok) log_debug("watchdog renewal: %zu of the batch failed", b->failed);
    free(b);
    watchdog_arm_loss(m);
    if (m->stopping) return;
    if (ok) watchdog_sweep(m);
    else if (!timers_active(&m->sweep)) /* not in a tight loop: a little later */
        timers_start(m->timers, &m->sweep, renew_slack(m) + 1, on_sweep);
}

static void on_renewed(backend_op_t *op) {
    item_t *it = container_of(op, item_t, op);
    batch_t *b = it->batch;
    lock_t *l = it->lock;
    hold_t *h = hold_by_grant(l, it->grant_id);

    l->busy--;
    if (op->res.status != BACKEND_OK) b->failed++;
    if (h != NULL) {
        /* A hold in a batch is watchdog-kept, and stays so: nothing turns a
         * watchdog hold into one with a lease (a reentry or RENEW with a
         * lease keeps it in watchdog mode). */
        h->renewing = 0;
        h->renew_failed = op->res.status != BACKEND_OK;
        if (op->res.status != BACKEND_OK) {
            /* No answer, or not replicated in time: it may have run, and set
             * a lease shorter than the one the hold counts with (a reload
             * shortened lease_ms). */
            if (op->res.status != BACKEND_FAILED) watchdog_limit(h, op->lease_ms, b->sent_at);
            /* stays due, where it is; the loss timer watches it */
            b->mgr->dog_cursor = NULL;
        } else if (op->res.renewal == BACKEND_RENEWED) {
            b->mgr->stats.renewals++;
            if (!h->lease_ms) watchdog_confirm(h, b->sent_at, op->lease_ms);
        } else {
            /* Gone where it counts, it may linger elsewhere (a quorum's
             * minority, a semaphore's other permits): delete what is left
             * of it everywhere, which wakes waiters. */
            release_hold(h);
            lock_hold_lost(h, op->res.renewal == BACKEND_FORCED ? LOCK_LOST_FORCED
                                                           : LOCK_LOST_EXPIRED);
            lock_kick(l);
        }
    }
    lock_maybe_free(l);
    if (--b->left == 0) batch_done(b);
}

static void renew_batch(lockmgr_t *m, hold_t **holds, size_t count) {
    /* Not zeroed: every field an item's op needs is set below, and the
     * backend fills in the result. */
    batch_t *b = malloc(sizeof(*b) + count * sizeof(b->items[0]));
    if (b == NULL) { /* the next sweep tries again; the loss timer watches them */
        m->dog_cursor = NULL;
        return;
    }
    b->mgr = m;
    b->left = count;
    b->failed = 0;
    b->sent_at = timers_now(m->timers);
    m->renew_inflight++;
    for (size_t i = 0; i < count; i++) {
        hold_t *h = holds[i];
        item_t *it = &b->items[i];
        h->lock->busy++;
        h->renewing = 1;
        it->batch = b;
        it->lock = h->lock;
        it->grant_id = h->grant_id;
        lock_op_init(&it->op, BACKEND_RENEW, h->mode, h->lock->name, h->lock->len,
                     h->owner->id, on_renewed);
        it->op.count = h->count;
        it->op.base = 0;
        it->op.queue_ms = 0;
        it->op.once = 0;
        it->op.lease_ms = m->dog_lease;
        it->op.data = NULL;
    }
    /* Submitted together: the backend sends them in as few calls as it can. */
    for (size_t i = 0; i < count; i++) backend_submit(m->backend, &b->items[i].op);
}

void watchdog_sweep(lockmgr_t *m) {
    uint64_t now = timers_now(m->timers), every = m->conf->renew_every_ms;
    hold_t *batch[LOCKMGR_RENEW_BATCH];
    size_t n = 0;
    hold_t *h;

    timers_stop(m->timers, &m->sweep);
    if (!backend_available(m->backend, NULL, 0) || m->stopping)
        return; /* resumed when Redis is back */
    /* Holds leased with another lease_ms than the configured one are due
     * now: Redis keeps them for a time the configuration no longer says. */
    for (h = TAILQ_FIRST(&m->stale); h != NULL && m->renew_inflight < LOCKMGR_RENEW_INFLIGHT;
         h = TAILQ_NEXT(h, dog)) {
        if (h->renewing) continue;
        batch[n++] = h;
        if (n == LOCKMGR_RENEW_BATCH) {
            renew_batch(m, batch, n);
            n = 0;
        }
    }
    h = m->dog_cursor ? m->dog_cursor : TAILQ_FIRST(&m->dog);
    while (h != NULL && m->renew_inflight < LOCKMGR_RENEW_INFLIGHT) {
        if (h->renewing) {
            h = TAILQ_NEXT(h, dog);
            continue;
        }
        if (h->confirmed_at + every > now + renew_slack(m)) break;
        batch[n++] = h;
        h = TAILQ_NEXT(h, dog);
        if (n == LOCKMGR_RENEW_BATCH) {
            renew_batch(m, batch, n);
            n = 0;
        }
    }
    if (n > 0) renew_batch(m, batch, n);
    m->dog_cursor = h;
    if (m->renew_inflight >= LOCKMGR_RENEW_INFLIGHT) return; /* a reply sweeps on */
    while (h != NULL && h->renewing) h = TAILQ_NEXT(h, dog);
    if (h != NULL) {
        uint64_t due = h->confirmed_at + every;
        timers_start_at(m->timers, &m->sweep, due > now ? due : now, on_sweep);
    }
}

/* ---- loss ---------------------------------------------------------------------- */

/* The watchdog hold that is lost first if nothing confirms it. */
static hold_t *loss_first(const lockmgr_t *m) {
    hold_t *h = TAILQ_FIRST(&m->dog), *s = TAILQ_FIRST(&m->stale);
    if (h == NULL) return s;
    return s != NULL && loss_deadline(s) < loss_deadline(h) ? s : h;
}

static void on_loss(timers_entry_t *t) {
    lockmgr_t *m = container_of(t, lockmgr_t, loss);
    uint64_t now = timers_now(m->timers);
    hold_t *h;
    while ((h = loss_first(m)) != NULL && loss_deadline(h) <= now) {
        lock_t *l = h->lock;
        /* What Redis still keeps of it goes as soon as Redis can be told. */
        release_hold(h);
        /* Renewals that failed (no answer, or not replicated in time), or
         * no backend: the backend's fault, not an expiry. */
        lock_hold_lost(h, backend_available(m->backend, l->name, l->len) && !h->renew_failed
                         ? LOCK_LOST_EXPIRED
                         : LOCK_LOST_BACKEND);
        lock_kick(l);
        lock_maybe_free(l);
    }
    watchdog_arm_loss(m);
}

/* An op that sets the lease (a reentry, RENEW, a renewal) got no answer,
 * yet may have run: Redis may then drop the hold lease_ms after sent_at. If
 * that comes before the hold would end (a hold with a lease) or be given up
 * (a watchdog hold), the hold counts from sent_at with that lease; its mode
 * stays. A confirmation of an op sent later (which ran later) settles it
 * already. */
void watchdog_limit(hold_t *h, uint32_t lease_ms, uint64_t sent_at) {
    lockmgr_t *m = h->lock->mgr;
    if (h->confirmed_at > sent_at) return;
    if (h->lease_ms ? sent_at + lock_hold_valid(m, lease_ms) >=
                          h->confirmed_at + lock_hold_valid(m, h->redis_lease_ms)
                    : sent_at + lock_hold_valid(m, lease_ms) - lease_ms / LOCKMGR_LOSS_MARGIN_DIV >=
                          loss_deadline(h))
        return;
    watchdog_set_confirmed(h, sent_at, lease_ms);
}

void watchdog_arm_loss(lockmgr_t *m) {
    hold_t *h = loss_first(m);
    if (h == NULL) timers_stop(m->timers, &m->loss);
    else timers_start_at(m->timers, &m->loss, loss_deadline(h), on_loss);
}

/* A reload changed lease_ms or renew_every_ms (m->conf has the new ones).
 * A new lease_ms: every hold the watchdog keeps is still leased in Redis
 * with the old one, so all go to m->stale (merged by loss deadline; each
 * keeps its own), to be renewed at once with the new lease. A new
 * renew_every_ms needs only the next sweep planned again. */
void watchdog_reconfigure(lockmgr_t *m) {
    if (m->conf->lease_ms != m->dog_lease) {
        hold_t *h, *pos = TAILQ_FIRST(&m->stale);
        m->dog_lease = m->conf->lease_ms;
        /* m->dog is in loss-deadline order too: one merge. */
        while ((h = TAILQ_FIRST(&m->dog)) != NULL) {
            uint64_t deadline = loss_deadline(h);
            TAILQ_REMOVE(&m->dog, h, dog);
            while (pos != NULL && loss_deadline(pos) <= deadline) pos = TAILQ_NEXT(pos, dog);
            if (pos != NULL) TAILQ_INSERT_BEFORE(pos, h, dog);
            else TAILQ_INSERT_TAIL(&m->stale, h, dog);
            h->on_stale = 1;
        }
        m->dog_cursor = NULL;
    }
    if (m->stopping) return;
    watchdog_arm_loss(m);
    watchdog_sweep(m);
}

void watchdog_stop(lockmgr_t *m) {
    timers_stop(m->timers, &m->sweep);
    timers_stop(m->timers, &m->loss);
}
