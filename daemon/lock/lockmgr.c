/* The lock manager's core: owners, holds, the lock table, answers and the public calls.
 * SPDX-License-Identifier: MIT */
#include "lockmgr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/lock/kind.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

static const char *const loss_names[] = {"expired", "forced", "backend"};

/* ---- answers ------------------------------------------------------------------ */

void lock_answer(lock_owner_t *o, void *call, const lock_reply_t *r) {
    if (o == NULL) return;
    if (o->now != NULL && call == o->call_now) { /* inside lockmgr_request: at once */
        *o->now = *r;
        o->answered = 1;
        return;
    }
    if (o->dropped) return;
    o->in_callback++;
    o->on_reply(o->data, call, r);
    o->in_callback--;
}

void lock_answer_value(lock_owner_t *o, void *call, long long v) {
    lock_reply_t r = {.type = LOCK_REPLY_VALUE, .value = v};
    lock_answer(o, call, &r);
}

void lock_answer_timeout(lockmgr_t *m, lock_owner_t *o, void *call, long long ttl_ms) {
    lock_reply_t r = {.type = LOCK_REPLY_TIMEOUT, .ttl_ms = ttl_ms};
    m->stats.timeouts++;
    lock_answer(o, call, &r);
}

static void answer_failure(lockmgr_t *m, lock_owner_t *o, void *call, lock_reply_t *r) {
    r->type = LOCK_REPLY_ERROR;
    if (r->err == LOCK_ERR_BACKEND) m->stats.backend_errors++;
    lock_answer(o, call, r);
}

void lock_answer_error(lockmgr_t *m, lock_owner_t *o, void *call, lock_err_t err,
                       lock_why_t why, long long limit) {
    lock_reply_t r = {.err = err, .why = why, .limit = limit};
    answer_failure(m, o, call, &r);
}

void lock_answer_backend(lockmgr_t *m, lock_owner_t *o, void *call, const char *text) {
    lock_reply_t r = {.err = LOCK_ERR_BACKEND, .why = LOCK_WHY_BACKEND, .detail = text};
    answer_failure(m, o, call, &r);
}

void lock_answer_kind(lockmgr_t *m, lock_owner_t *o, void *call, lock_why_t why,
                      lock_mode_t mode, const char *name, size_t len) {
    lock_reply_t r = {.err = LOCK_ERR_KIND, .why = why, .mode = mode, .name = name, .len = len};
    answer_failure(m, o, call, &r);
}

void lock_answer_unavailable(lockmgr_t *m, lock_owner_t *o, void *call, const char *name,
                             size_t len) {
    backend_describe(m->backend, name, len, m->why, sizeof(m->why));
    lock_answer_backend(m, o, call, m->why);
}

void lock_answer_notheld(lockmgr_t *m, lock_owner_t *o, void *call, const lock_t *l,
                         lock_mode_t mode) {
    const hold_t *other = lock_hold_mine(l, o);
    if (other != NULL && lock_kind_of(other->mode) != lock_kind_of(mode))
        lock_answer_kind(m, o, call, LOCK_WHY_RELEASE_AS, other->mode, l->name, l->len);
    else
        lock_answer_error(m, o, call, LOCK_ERR_NOTHELD, LOCK_WHY_NONE, 0);
}

void lock_pending_start(lock_owner_t *o, pending_t *p, pending_type_t kind, void *call) {
    p->type = kind;
    p->call = call;
    LIST_INSERT_HEAD(&o->pendings, p, by_owner);
    p->linked = 1;
    o->npending++;
}

void lock_pending_start_kind(lock_owner_t *o, pending_t *p, const lock_kind_t *k, void *call) {
    p->kind = k;
    lock_pending_start(o, p, PENDING_KIND, call);
}

void lock_pending_end(lock_owner_t *o, pending_t *p) {
    if (o == NULL || !p->linked) return;
    LIST_REMOVE(p, by_owner);
    p->linked = 0;
    o->npending--;
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

hold_t *lock_hold_mine(const lock_t *l, const lock_owner_t *o) {
    hold_t *h, *shared = NULL;
    if (l == NULL) return NULL;
    LIST_FOREACH(h, &l->holds, by_lock) {
        if (h->owner != o) continue;
        if (!lock_modes[h->mode].shared) return h;
        shared = h;
    }
    return shared;
}

/* ---- holds ------------------------------------------------------------------------- */

uint32_t lock_hold_redis_lease(const hold_t *h) {
    if (h->redis_lease_ms) return h->redis_lease_ms;
    return h->lease_ms ? h->lease_ms : h->lock->mgr->conf->lease_ms;
}

uint32_t lock_hold_valid(const lockmgr_t *m, uint32_t lease_ms) {
    uint32_t drift = backend_drift(m->backend, lease_ms);
    return lease_ms > drift ? lease_ms - drift : 0;
}

long long lock_local_ttl(const lock_t *l) {
    const hold_t *h = lock_hold_first(l);
    if (h == NULL) return -1;
    uint64_t end = h->confirmed_at + lock_hold_valid(l->mgr, lock_hold_redis_lease(h)),
             now = timers_now(l->mgr->timers);
    return end > now ? (long long)(end - now) : 0;
}

hold_t *lock_hold_new(lock_t *l, lock_owner_t *o, uint64_t fence, uint32_t lease_ms,
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
    lock_acct_held(o, 1);
    m->held++;
    return h;
}

/* Frees h's memory: the lock's first hold lives in the lock. */
static void hold_free(hold_t *h) {
    if (h == &h->lock->first) h->lock->first_used = 0;
    else free(h);
}

void lock_hold_drop(hold_t *h) {
    lockmgr_t *m = h->lock->mgr;
    LIST_REMOVE(h, by_lock);
    LIST_REMOVE(h, by_owner);
    h->owner->held_count--;
    lock_acct_held(h->owner, -1);
    watchdog_remove(h);
    timers_stop(m->timers, &h->expiry);
    m->held--;
    histo_add(&m->hold_time, (uv_hrtime() - h->granted_ns) / 1000);
    hold_free(h);
}

void lock_hold_lost(hold_t *h, lock_loss_t why) {
    lock_t *l = h->lock;
    lock_owner_t *o = h->owner;
    log_debug("lock %s of client %llu lost: %s", l->name, (unsigned long long)o->id,
              loss_names[why]);
    lock_hold_drop(h);
    l->mgr->stats.lost++;
    l->mgr->stats.lost_by[why]++;
    lock_event_t ev = {.type = LOCK_EVENT_LOST, .name = l->name, .len = l->len, .why = why};
    lock_tell(o, &ev);
}

void lock_tell(lock_owner_t *o, const lock_event_t *ev) {
    if (o->dropped) return;
    o->in_callback++;
    o->on_event(o->data, ev);
    o->in_callback--;
}

/* ---- backend state ------------------------------------------------------------------ */

static void on_backend_state(void *data) {
    lockmgr_t *m = data;
    if (!backend_available(m->backend, NULL, 0) || m->stopping) return;
    /* Releases first, so that the acquires below see them done. */
    release_resend(m);
    size_t i = 0;
    for (hmap_node_t *n = hmap_next(&m->locks, &i, NULL); n; n = hmap_next(&m->locks, &i, n)) {
        lock_unpark(container_of(n, lock_t, node));
        lock_kick(container_of(n, lock_t, node));
    }
    watchdog_sweep(m);
}

void lockmgr_freeze(lockmgr_t *m, int frozen) {
    m->frozen = frozen;
    if (!frozen) on_backend_state(m);
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
    if (hmap_init(&m->accts) != 0) {
        hmap_free(&m->locks);
        free(m);
        return NULL;
    }
    backend_on_state(backend, on_backend_state, m);
    return m;
}

lock_owner_t *lockmgr_owner_new(lockmgr_t *m, uint64_t id, uid_t uid, lock_reply_cb on_reply,
                                lock_event_cb on_event, void *data) {
    lock_owner_t *o = zalloc(sizeof(*o));
    if (o == NULL) return NULL;
    o->mgr = m;
    o->id = id;
    o->uid = uid;
    if (lock_acct_join(m, o) != 0) {
        free(o);
        return NULL;
    }
    o->on_reply = on_reply;
    o->on_event = on_event;
    o->data = data;
    LIST_INIT(&o->holds);
    LIST_INIT(&o->pendings);
    return o;
}

void lockmgr_owner_set_pid(lock_owner_t *o, pid_t pid) {
    o->pid = pid;
}

size_t lockmgr_owner_held(const lock_owner_t *o) {
    return o->held_count;
}

int lockmgr_owner_holds(const lock_owner_t *o, const char *name, size_t len) {
    return lock_hold_mine(lock_find(o->mgr, name, len), o) != NULL;
}

size_t lockmgr_owner_waiting(const lock_owner_t *o) {
    return o->npending;
}

int lockmgr_request(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req, void *call,
                    lock_reply_t *now) {
    /* Nested: a reply callback of this owner's other calls may ask again. */
    void *outer_call = o->call_now;
    lock_reply_t *outer_now = o->now;
    int outer_answered = o->answered;
    o->call_now = call;
    o->now = now;
    o->answered = 0;
    lock_request(m, o, req);
    int answered = o->answered;
    o->call_now = outer_call;
    o->now = outer_now;
    o->answered = outer_answered;
    return answered;
}

static pending_t *pending_of(lock_owner_t *o, void *call) {
    pending_t *p;
    LIST_FOREACH(p, &o->pendings, by_owner)
        if (p->call == call) return p;
    return NULL;
}

int lockmgr_cancel(lockmgr_t *m, lock_owner_t *o, void *call) {
    pending_t *p = pending_of(o, call);
    if (p != NULL && p->type == PENDING_KIND) {
        m->stats.cancelled++;
        p->kind->cancel(p);
        return 1;
    }
    if (p == NULL || p->type != PENDING_WAIT) return 0;
    wait_t *w = (wait_t *)p;
    lock_t *l = w->lock;
    m->stats.cancelled++;
    lock_wait_withdraw(w);
    lock_answer_error(m, o, call, LOCK_ERR_CANCELLED, LOCK_WHY_NONE, 0);
    lock_wait_end(w);
    lock_maybe_free(l);
    return 1;
}

static void owner_drop_now(lock_owner_t *o) {
    lockmgr_t *m = o->mgr;
    /* What the kinds keep of it beside holds and waits: an observation
     * left on a freed owner would be told of its name's next leader. */
    for (int k = 0; k < LOCK_MODE_COUNT; k++)
        if (m->kind_state[k] != NULL && lock_modes[k].kind->owner_drop != NULL)
            lock_modes[k].kind->owner_drop(m, o);
    pending_t *p;
    while ((p = LIST_FIRST(&o->pendings)) != NULL) {
        lock_pending_end(o, p);
        if (p->type == PENDING_WAIT) {
            wait_t *w = (wait_t *)p;
            lock_t *l = w->lock;
            lock_wait_end(w);
            lock_maybe_free(l);
        } else if (p->type == PENDING_KIND) {
            p->kind->orphan(p);
        } else {
            lock_op_orphan((lock_op_t *)p);
        }
    }
    hold_t *h;
    while ((h = LIST_FIRST(&o->holds)) != NULL) {
        lock_t *l = h->lock;
        lock_release_local(h);
        lock_maybe_free(l);
    }
    lock_acct_leave(o);
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
            lock_hold_drop(h);
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
    for (int k = 0; k < LOCK_MODE_COUNT; k++)
        if (m->kind_state[k] != NULL && lock_modes[k].kind->free_state != NULL)
            lock_modes[k].kind->free_state(m);
    /* Every timer of ours stops before its memory goes: the timer
     * structure is the caller's, and outlives us. */
    for (n = hmap_next(&m->locks, &i, NULL); n != NULL; n = next) {
        next = hmap_next(&m->locks, &i, n);
        lock_t *l = container_of(n, lock_t, node);
        lock_queue_free(l);
        hold_t *h;
        while ((h = LIST_FIRST(&l->holds)) != NULL) {
            LIST_REMOVE(h, by_lock);
            timers_stop(m->timers, &h->expiry);
            hold_free(h);
        }
        free(l);
    }
    hmap_free(&m->locks);
    lock_acct_free_all(m);
    release_free_all(m);
    timers_stop(m->timers, &m->done_timer);
    watchdog_stop(m);
    pool_drain(&m->lock_pool);
    pool_drain(&m->queue_pool);
    pool_drain(&m->wait_pool);
    pool_drain(&m->release_pool);
    free(m);
}
