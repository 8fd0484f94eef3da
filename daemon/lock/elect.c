/* Elections: ELECT campaigns as a fair lock's waiter does; the leader is the one holder.
 * SPDX-License-Identifier: MIT
 *
 * A candidate takes its place in Redis's queue as soon as it comes (the
 * name's candidates across every daemon are served in the order they
 * came), keeps it by asking again every renew_every_ms, and leaves it at
 * once when it stops waiting (CANCEL, its connection closing), or once
 * Redis is back (release.c retries a leave as a release). The leader
 * is a hold like a lock's: the watchdog keeps it (or its lease runs out),
 * RENEW renews it, its loss is !LOST, and its release (RESIGN, the
 * connection closing) lets the next candidate lead at once. Wake-ups come
 * on the name's one channel, through observe.c's watch, which observers
 * share. What each candidate offers as its value is kept here (cands)
 * while it waits, for its attempts. */
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/elect.h"
#include "daemon/lock/redisq.h"
#include "daemon/log.h"
#include "daemon/util/statefmt.h"
#include "daemon/util/util.h"

/* A candidate's value, by <owner id><name>. */
typedef struct cand_s {
    hmap_node_t node;
    lockmgr_t *m;
    timers_entry_t grace;      /* its wait ended with its acquire in flight */
    int lingering;             /* ... and it lives on for that (elect_leave) */
    size_t vlen;
    char value[ELECT_VALUE_MAX + 1];
    size_t klen;
    char key[];
} cand_t;

/* ---- the state ------------------------------------------------------------------ */

elect_t *elect_get(lockmgr_t *m) {
    if (elect_of(m) != NULL) return elect_of(m);
    elect_t *e = zalloc(sizeof(*e));
    if (e == NULL) return NULL;
    e->m = m;
    if (hmap_init(&e->cands) != 0 || hmap_init(&e->names) != 0 || hmap_init(&e->owners) != 0) {
        hmap_free(&e->cands);
        hmap_free(&e->names);
        free(e);
        return NULL;
    }
    m->kind_state[LOCK_MODE_ELECT] = e;
    return e;
}

void elect_maybe_free(lockmgr_t *m) {
    elect_t *e = elect_of(m);
    if (e == NULL || !e->closing || e->cands_count > 0 || !observe_empty(e)) return;
    hmap_free(&e->cands);
    hmap_free(&e->names);
    hmap_free(&e->owners);
    free(e);
    m->kind_state[LOCK_MODE_ELECT] = NULL;
}

static void cand_free(cand_t *c);

/* lockmgr_free with the state still there: every owner is gone, and the
 * backend, closed first, sends nothing more. The values left are those
 * of acquires that were in flight. */
static void elect_free_state(lockmgr_t *m) {
    elect_t *e = elect_of(m);
    e->closing = 1;
    size_t i = 0;
    hmap_node_t *n, *next;
    for (n = hmap_next(&e->cands, &i, NULL); n != NULL; n = next) {
        next = hmap_next(&e->cands, &i, n);
        cand_free(container_of(n, cand_t, node));
        if (elect_of(m) == NULL) return;
    }
    elect_maybe_free(m);
}

void lockmgr_elect_stats(const lockmgr_t *m, lockmgr_elect_stats_t *out) {
    memset(out, 0, sizeof(*out));
    if (elect_of(m) == NULL) return;
    *out = elect_of(m)->stats;
    out->candidates = elect_of(m)->cands_count - elect_of(m)->cands_lingering;
}

/* A live restore: the counters that only go up (the others are counts of
 * what is restored). */
static void elect_save(const lockmgr_t *m, statew_t *w) {
    if (elect_of(m) == NULL) return;
    statew_rec(w, "elect_counters");
    statew_u64(w, elect_of(m)->stats.leader_events);
    statew_u64(w, elect_of(m)->stats.rereads);
}

static int elect_load(lockmgr_t *m, lock_owner_t *o, const char *word, stater_t *r) {
    if (strcmp(word, "elect_counters") != 0) return observe_load(m, o, word, r);
    uint64_t events = stater_u64(r), rereads = stater_u64(r);
    if (r->err) return 1;
    if (elect_get(m) == NULL) {
        stater_fail(r, "out of memory");
        return 1;
    }
    elect_of(m)->stats.leader_events = events;
    elect_of(m)->stats.rereads = rereads;
    return 1;
}

/* INFO's: observers=, observed=, candidates=, leader_events=. */
static size_t elect_stats(const lockmgr_t *m, lock_stat_t *out, size_t cap) {
    lockmgr_elect_stats_t es;
    lockmgr_elect_stats(m, &es);
    const lock_stat_t all[] = {
        {"observers", es.observers},
        {"observed", es.observed},
        {"candidates", es.candidates},
        {"leader_events", es.leader_events},
    };
    size_t n = sizeof(all) / sizeof(all[0]) < cap ? sizeof(all) / sizeof(all[0]) : cap;
    memcpy(out, all, n * sizeof(*out));
    return n;
}

/* ---- candidates' values ---------------------------------------------------------- */

static size_t cand_key(char *out, uint64_t owner, const char *name, size_t len) {
    memcpy(out, &owner, sizeof(owner));
    memcpy(out + sizeof(owner), name, len);
    return sizeof(owner) + len;
}

static cand_t *cand_find(lockmgr_t *m, uint64_t owner, const char *name, size_t len) {
    char key[sizeof(uint64_t) + ELECT_NAME_MAX];
    if (elect_of(m) == NULL || len > ELECT_NAME_MAX) return NULL;
    hmap_node_t *n = hmap_get(&elect_of(m)->cands, key, cand_key(key, owner, name, len));
    return n ? container_of(n, cand_t, node) : NULL;
}

static void cand_free(cand_t *c) {
    lockmgr_t *m = c->m;
    timers_stop(m->timers, &c->grace);
    hmap_del(&elect_of(m)->cands, &c->node);
    elect_of(m)->cands_count--;
    if (c->lingering) elect_of(m)->cands_lingering--;
    free(c);
    elect_maybe_free(m);
}

static void on_grace(timers_entry_t *t) {
    cand_free(container_of(t, cand_t, grace));
}

/* 0, or -1 on no memory. */
static int cand_put(lockmgr_t *m, uint64_t owner, const char *name, size_t len,
                    const char *value, size_t vlen) {
    cand_t *c = cand_find(m, owner, name, len);
    elect_t *e = elect_get(m);
    if (e == NULL || vlen > ELECT_VALUE_MAX || len > ELECT_NAME_MAX) return -1;
    if (c == NULL) {
        c = zalloc(sizeof(*c) + sizeof(uint64_t) + len);
        if (c == NULL) return -1;
        c->m = m;
        c->klen = cand_key(c->key, owner, name, len);
        c->node.key = c->key;
        c->node.len = c->klen;
        hmap_put(&e->cands, &c->node);
        e->cands_count++;
    }
    timers_stop(m->timers, &c->grace);
    if (c->lingering) { /* it campaigns again: a candidate once more */
        c->lingering = 0;
        e->cands_lingering--;
    }
    memcpy(c->value, value, vlen);
    c->value[vlen] = '\0';
    c->vlen = vlen;
    return 0;
}

/* ---- the kind --------------------------------------------------------------------- */

static void elect_prepare(lock_t *l, wait_t *w, backend_op_t *op) {
    const cand_t *c = cand_find(l->mgr, w->owner_id, l->name, l->len);
    op->once = w->once;
    op->queue_ms = l->mgr->conf->lease_ms;
    op->value = c ? c->value : "-";
    op->value_len = c ? c->vlen : 1;
}

static void elect_leave(lock_t *l, wait_t *w, int was_head) {
    lockmgr_t *m = l->mgr;
    (void)was_head;
    lock_leave_queue(l, w);
    cand_t *c = cand_find(m, w->owner_id, l->name, l->len);
    if (c != NULL) {
        if (w->in_flight) {
            /* Its value lives on for the acquire; the candidate does not. */
            timers_start(m->timers, &c->grace, m->conf->command_timeout_ms + ELECT_VALUE_GRACE_MS,
                         on_grace);
            if (!c->lingering) {
                c->lingering = 1;
                elect_of(m)->cands_lingering++;
            }
        } else {
            cand_free(c);
        }
    }
    if (TAILQ_EMPTY(&l->q->waiters)) elect_unwatch(m, l->name, l->len);
}

/* ELECT: a connection that leads is answered at once, with its fence. */
static void elect_acquire(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    hold_t *h = lock_hold_of(l, o, LOCK_MODE_ELECT);
    if (h != NULL) {
        lock_reply_t r = {.type = LOCK_REPLY_GRANTED, .fence = h->fence, .holds = 1};
        lock_answer(o, o->call_now, &r);
        return;
    }
    if (cand_put(m, o->id, req->name, req->len, req->value, req->value_len) != 0) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
        return;
    }
    elect_watch(m, req->name, req->len);
    lock_acquire(m, o, l, req);
    if (o->answered) { /* answered at once: it does not wait */
        cand_t *c = cand_find(m, o->id, req->name, req->len);
        if (c != NULL && !timers_active(&c->grace)) cand_free(c);
        l = lock_find(m, req->name, req->len);
        if (l == NULL || l->q == NULL) elect_unwatch(m, req->name, req->len);
    }
}

/* RESIGN: 1 if o led l's name (l may be NULL). */
static int resign(lock_owner_t *o, lock_t *l) {
    hold_t *h = lock_hold_of(l, o, LOCK_MODE_ELECT);
    if (h == NULL) return 0;
    lock_release_local(h);
    lock_maybe_free(l);
    return 1;
}

/* LEADER, OBSERVE; RESIGN and UNOBSERVE, answered at once. */
static void elect_request(lockmgr_t *m, lock_owner_t *o, lock_t *l, const lock_request_t *req) {
    if (req->verb != LOCK_VERB_OWN) {
        observe_request(m, o, req);
        return;
    }
    switch (req->op) {
    case ELECT_OP_RESIGN: lock_answer_value(o, o->call_now, resign(o, l)); return;
    case ELECT_OP_UNOBSERVE:
        lock_answer_value(o, o->call_now, observe_unobserve(m, o, req->name, req->len));
        return;
    }
    lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_NONE, 0);
}

/* A dropped owner observes nothing more. */
static void elect_owner_drop(lockmgr_t *m, lock_owner_t *o) {
    observe_unobserve_all(m, o);
}

/* Its protocol words (session.c makes its commands of them). */
static const lock_word_t elect_words[] = {
    {"ELECT", LOCK_VERB_LOCK, LOCK_MODE_ELECT, 0, LOCK_WORD_AS_LOCK | LOCK_WORD_FENCE},
    {"LEADER", LOCK_VERB_LEADER, LOCK_MODE_ELECT, 0, 0},
    {"OBSERVE", LOCK_VERB_OBSERVE, LOCK_MODE_ELECT, 0, LOCK_WORD_OBSERVES},
    {"RESIGN", LOCK_VERB_OWN, LOCK_MODE_ELECT, ELECT_OP_RESIGN, LOCK_WORD_AS_UNLOCK},
    {"UNOBSERVE", LOCK_VERB_OWN, LOCK_MODE_ELECT, ELECT_OP_UNOBSERVE, LOCK_WORD_OBSERVES},
    {.word = NULL},
};

const lock_kind_t lock_kind_elect = {
    .name = "elect",
    .words = elect_words,
    .text = {"an election (ELECT, RESIGN, LEADER, OBSERVE)",
             "an election: RESIGN ends its leadership", "elections"},
    .cap = BACKEND_CAP_ONE_COPY, /* the candidates' queue in Redis, as a fair lock's */
    .watch = BACKEND_ELECT,
    .status = LOCK_STATUS_EXCLUSIVE,
    .head_wakes = 1,
    .queues = 1,
    .kick = lock_kick_all,
    .prepare = elect_prepare,
    .prepare_op = redisq_prepare_op,
    .taken = redisq_taken,
    .requeued = redisq_queued, /* the name's watch (observe.c) wakes it */
    .leave = elect_leave,
    .queue_end = redisq_queue_end,
    .released = redisq_released,
    .acquire = elect_acquire,
    .request = elect_request,
    .own_any = 1u << ELECT_OP_RESIGN | 1u << ELECT_OP_UNOBSERVE,
    .stats = elect_stats,
    .free_state = elect_free_state,
    .owner_drop = elect_owner_drop,
    .save_owner = observe_save_owner,
    .save = elect_save,
    .load = elect_load,
};
