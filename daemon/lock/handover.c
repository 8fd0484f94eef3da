/* Live restore: the lock manager's part of the state one dlockd hands to the next.
 * SPDX-License-Identifier: MIT
 *
 * A hold is handed over as it is: the new process keeps the owner ids
 * (the daemon's uuid and each connection's id), so that Redis's owner
 * fields stay true, and takes each hold as made with the fence, count and
 * lease it had, confirmed when it was: its watchdog renews it or its lease
 * timer ends it as the old process would have, and nothing is sent to
 * Redis for it. Times are the timers' clock (uv_now, CLOCK_MONOTONIC),
 * which both processes share. Waits are not here: the caller asks for
 * them again (lockmgr.h). */
#include <string.h>

#include "daemon/lock/kind.h"
#include "daemon/util/statefmt.h"

static const char *const mode_names[LOCK_MODE_COUNT] = {
#define XX(id) #id,
    DLOCK_MODES(XX)
#undef XX
};

/* The mode named word, or LOCK_MODE_COUNT. */
static lock_mode_t mode_named(const char *word) {
    for (int i = 0; i < LOCK_MODE_COUNT; i++)
        if (strcmp(mode_names[i], word) == 0) return (lock_mode_t)i;
    return LOCK_MODE_COUNT;
}

/* Mode i's kind if i is its first mode, else NULL: each kind once. */
static const lock_kind_t *kind_first(int i) {
    const lock_kind_t *k = lock_kind_of((lock_mode_t)i);
    return k != NULL && lock_kind_mode(k) == (lock_mode_t)i ? k : NULL;
}

const char *lockmgr_busy(const lockmgr_t *m) {
    if (m->stopping) return "the lock manager is stopping";
    if (backend_inflight(m->backend) > 0) return "requests to Redis are in flight";
    if (!STAILQ_EMPTY(&m->retries)) return "releases wait for Redis to come back";
    return NULL;
}

int lockmgr_owner_waits_only(const lock_owner_t *o) {
    const pending_t *p;
    LIST_FOREACH(p, &o->pendings, by_owner)
        if (p->type != PENDING_WAIT && p->type != PENDING_KIND) return 0;
    return 1;
}

void lockmgr_owner_save(const lockmgr_t *m, const lock_owner_t *o, statew_t *w) {
    const hold_t *h;
    const lock_kind_t *k;
    LIST_FOREACH(h, &o->holds, by_owner) {
        statew_rec(w, "hold");
        statew_bytes(w, h->lock->name, h->lock->len);
        statew_word(w, mode_names[h->mode]);
        statew_u64(w, h->count);
        statew_u64(w, h->fence);
        statew_u64(w, h->lease_ms);
        statew_u64(w, h->redis_lease_ms);
        statew_u64(w, h->confirmed_at);
        statew_u64(w, h->granted_ns);
        statew_u64(w, h->renew_failed);
    }
    for (int i = 0; i < LOCK_MODE_COUNT; i++)
        if ((k = kind_first(i)) != NULL && k->save_owner != NULL) k->save_owner(m, o, w);
}

/* The counters, by name: a process that does not know one skips it. */
#define LOCKMGR_COUNTERS(XX) \
    XX(grants)               \
    XX(reentries)            \
    XX(releases)             \
    XX(timeouts)             \
    XX(cancelled)            \
    XX(lost)                 \
    XX(renewals)             \
    XX(backend_errors)

static void save_histo(statew_t *w, const char *name, const histo_t *h) {
    statew_rec(w, "histo");
    statew_word(w, name);
    statew_u64(w, h->n);
    statew_u64(w, h->sum_us);
    for (int i = 0; i < HISTO_BUCKETS; i++) statew_u64(w, h->count[i]);
}

void lockmgr_save(const lockmgr_t *m, statew_t *w) {
    const lock_kind_t *k;
#define XX(f)                           \
    statew_rec(w, "counter");           \
    statew_word(w, #f);                 \
    statew_u64(w, m->stats.f);
    LOCKMGR_COUNTERS(XX)
#undef XX
    for (int i = 0; i < 3; i++) {
        statew_rec(w, "lost_by");
        statew_u64(w, (uint64_t)i);
        statew_u64(w, m->stats.lost_by[i]);
    }
    save_histo(w, "wait_time", &m->wait_time);
    save_histo(w, "hold_time", &m->hold_time);
    for (int i = 0; i < LOCK_MODE_COUNT; i++)
        if ((k = kind_first(i)) != NULL && k->save != NULL) k->save(m, w);
}

static void load_histo(stater_t *r, histo_t *h) {
    h->n = stater_u64(r);
    h->sum_us = stater_u64(r);
    for (int i = 0; i < HISTO_BUCKETS; i++) h->count[i] = stater_u64(r);
}

/* A hold record: made as it was. */
static void load_hold(lockmgr_t *m, lock_owner_t *o, stater_t *r) {
    const char *name;
    size_t len;
    char word[STATE_WORD_MAX];
    stater_bytes(r, &name, &len);
    stater_word(r, word);
    uint64_t count = stater_u64(r), fence = stater_u64(r), lease = stater_u64(r),
             redis_lease = stater_u64(r), confirmed_at = stater_u64(r),
             granted_ns = stater_u64(r), renew_failed = stater_u64(r);
    if (r->err) return;
    lock_mode_t mode = mode_named(word);
    if (o == NULL || mode == LOCK_MODE_COUNT || len == 0 || count == 0 || count > UINT32_MAX ||
        lease > UINT32_MAX || redis_lease > UINT32_MAX) {
        stater_fail(r, "a hold record is not one this dlockd knows");
        return;
    }
    lock_t *l = lock_get(m, name, len);
    if (l == NULL) {
        stater_fail(r, "out of memory");
        return;
    }
    const lock_kind_t *k = lock_kind_of(mode);
    if ((lock_in_use(l) && l->kind != k) || lock_hold_of(l, o, mode) != NULL) {
        stater_fail(r, "a hold record contradicts an earlier one");
        return;
    }
    lock_take_kind(l, k);
    hold_t *h = lock_hold_new(l, o, fence, (uint32_t)lease, mode);
    if (h == NULL) {
        lock_maybe_free(l);
        stater_fail(r, "out of memory");
        return;
    }
    h->count = (uint32_t)count;
    h->granted_ns = granted_ns;
    h->renew_failed = renew_failed != 0;
    /* Never later than now: the clock is shared, but a bad text must not
     * stretch a lease. */
    uint64_t now = timers_now(m->timers);
    watchdog_adopt(h, confirmed_at < now ? confirmed_at : now, (uint32_t)redis_lease);
}

void lockmgr_load_start(lockmgr_t *m, size_t n) {
    (void)hmap_reserve(&m->locks, n); /* without it, the map doubles on the way */
}

int lockmgr_load_done(lockmgr_t *m) {
    return watchdog_resort(m);
}

int lockmgr_load(lockmgr_t *m, lock_owner_t *o, const char *word, stater_t *r) {
    const lock_kind_t *k;
    char name[STATE_WORD_MAX];
    if (strcmp(word, "hold") == 0) {
        load_hold(m, o, r);
        return 1;
    }
    if (strcmp(word, "counter") == 0) {
        stater_word(r, name);
        uint64_t v = stater_u64(r);
        if (r->err) return 1;
#define XX(f) \
    if (strcmp(name, #f) == 0) m->stats.f = v;
        LOCKMGR_COUNTERS(XX)
#undef XX
        return 1;
    }
    if (strcmp(word, "lost_by") == 0) {
        uint64_t i = stater_u64(r), v = stater_u64(r);
        if (!r->err && i < 3) m->stats.lost_by[i] = v;
        return 1;
    }
    if (strcmp(word, "histo") == 0) {
        stater_word(r, name);
        if (strcmp(name, "wait_time") == 0) load_histo(r, &m->wait_time);
        else if (strcmp(name, "hold_time") == 0) load_histo(r, &m->hold_time);
        return 1;
    }
    for (int i = 0; i < LOCK_MODE_COUNT; i++)
        if ((k = kind_first(i)) != NULL && k->load != NULL && k->load(m, o, word, r)) return 1;
    return 0;
}
