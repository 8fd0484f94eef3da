/* LIST's local part: what this daemon knows of the names a listing found (its holders' pids, its waiters).
 * SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/backend/list.h"
#include "daemon/lock/internal.h"
#include "daemon/lock/kind.h"

static void fill_who(lockmgr_t *m, list_who_t *w, const lock_owner_t *o, uint64_t since_ns) {
    snprintf(w->host, sizeof(w->host), "%.*s", (int)sizeof(w->host) - 1, m->host);
    w->dpid = (long long)getpid();
    w->pid = o->pid > 0 ? (long long)o->pid : -1;
    w->uid = (long long)o->uid;
    uint64_t now = uv_hrtime();
    w->age_ms = since_ns > 0 && now > since_ns ? (long long)((now - since_ns) / 1000000) : 0;
}

static const hold_t *hold_by_owner(const lock_t *l, uint64_t id) {
    const hold_t *h;
    LIST_FOREACH(h, &l->holds, by_lock)
        if (h->owner->id == id) return h;
    return NULL;
}

static const wait_t *wait_by_owner(const lock_t *l, uint64_t id) {
    if (l->q == NULL) return NULL;
    const wait_t *w;
    TAILQ_FOREACH(w, &l->q->waiters, link)
        if (w->owner != NULL && w->owner->id == id) return w;
    return NULL;
}

void lockmgr_list_fill(lockmgr_t *m, list_entry_t *e) {
    lock_t *l = lock_find(m, e->name, e->len);
    if (l == NULL) return;
    for (size_t i = 0; i < e->nholders; i++) {
        list_who_t *w = &e->holders[i];
        const hold_t *h = w->ours ? hold_by_owner(l, w->owner) : NULL;
        if (h != NULL) fill_who(m, w, h->owner, h->granted_ns);
    }
    /* Redis tells a kind that queues there (a fair lock) from a plain lock
     * only while someone queues: a lock of it in use here says which. */
    if (e->kind == BACKEND_MUTEX && lock_in_use(l) && l->kind->queues)
        e->kind = lock_backend_mode(lock_kind_mode(l->kind));
    if (lock_kind_of(lock_mode_of_backend(e->kind))->queues) {
        /* Redis's queue is every daemon's: name ours in it. */
        for (size_t i = 0; i < e->nwaiters; i++) {
            list_who_t *w = &e->waiters[i];
            const wait_t *wt = w->ours ? wait_by_owner(l, w->owner) : NULL;
            if (wt != NULL) fill_who(m, w, wt->owner, wt->started_ns);
        }
        return;
    }
    /* The other kinds wait in each daemon: this one's waiters. */
    e->nwaiters = e->waiters_total = 0;
    if (l->q == NULL) return;
    const wait_t *wt;
    TAILQ_FOREACH(wt, &l->q->waiters, link) {
        if (wt->owner == NULL) continue;
        if (e->nwaiters < LIST_WAITERS_MAX) {
            list_who_t *w = &e->waiters[e->nwaiters++];
            memset(w, 0, sizeof(*w));
            snprintf(w->field, sizeof(w->field), "-");
            w->ours = 1;
            w->owner = wt->owner->id;
            w->count = wt->count;
            fill_who(m, w, wt->owner, wt->started_ns);
        }
        e->waiters_total++;
    }
}

backend_t *lockmgr_backend(const lockmgr_t *m) {
    return m->backend;
}
