/* Observers of elections: LEADER, OBSERVE and UNOBSERVE; one watch per name, shared.
 * SPDX-License-Identifier: MIT
 *
 * Each name observed here (or campaigned for here) has one oname_t: one
 * watch of the name's channel, and one read of the leader at a time. The
 * leader is read again on every message of the channel (a grant, a
 * release), when the watch is in force again (after any reconnect,
 * failover or slot move: a message may have been missed), when the
 * leader's lease ends (expiry publishes nothing), and at least every
 * lease_ms / ELECT_POLL_DIV; a read that fails is tried again every
 * ELECT_RETRY_MS, and once no read has been answered for lease_ms the
 * observers are told NONE (this daemon can no longer vouch for anyone).
 *
 * What each observer is told follows its own history: a fence above the
 * highest it was told, or the same fence right after a NONE; never a lower
 * one. A NONE only after a leader (or nothing). */
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/elect.h"
#include "daemon/log.h"
#include "daemon/util/statefmt.h"
#include "daemon/util/util.h"

typedef struct obs_s obs_t;

/* A connection's observations, by its id. */
typedef struct oowner_s {
    hmap_node_t node;
    uint64_t id;
    size_t count;
    LIST_HEAD(, obs_s) obs;
} oowner_t;

/* One name, observed or campaigned for here. */
struct oname_s {
    hmap_node_t node;          /* by name */
    lockmgr_t *m;
    LIST_HEAD(, obs_s) obs;    /* its observers */
    size_t count;
    int candidates;            /* its candidates here wake on this watch */
    int reading;               /* a read in flight (op) */
    int again;                 /* ... and another asked for meanwhile */
    int telling;               /* inside tell() or leader_done(): not freed */
    uint64_t fence;            /* the last read's leader, 0: none */
    size_t vlen;
    char value[ELECT_VALUE_MAX + 1];
    uint64_t ok_at;            /* when the last answered read was sent */
    uint64_t view_at;          /* ... the one fence and value are from, 0: none yet */
    uint64_t sent_at;
    timers_entry_t timer;      /* the next read */
    backend_op_t op;
    char answer[BACKEND_ANSWER_MAX + 1]; /* op's value goes here */
    size_t len;
    char name[];
};

/* One connection observing one name. */
struct obs_s {
    LIST_ENTRY(obs_s) by_name;
    LIST_ENTRY(obs_s) by_owner;
    lock_owner_t *owner;
    oowner_t *oo;
    oname_t *on;
    uint64_t told;             /* the highest fence told */
    int none;                  /* the last thing told was NONE */
};

static void read_leader(oname_t *on);

int observe_empty(const elect_t *e) {
    return e->names_count == 0 && e->owners_count == 0;
}

/* ---- names ------------------------------------------------------------------------- */

static oname_t *oname_find(lockmgr_t *m, const char *name, size_t len) {
    if (elect_of(m) == NULL) return NULL;
    hmap_node_t *n = hmap_get(&elect_of(m)->names, name, len);
    return n ? container_of(n, oname_t, node) : NULL;
}

static void on_watch(void *data, backend_event_t ev) {
    oname_t *on = data;
    read_leader(on);
    if (on->candidates) {
        lock_t *l = lock_find(on->m, on->name, on->len);
        if (l != NULL && l->q != NULL) lock_on_watch(l, ev);
    }
}

static oname_t *oname_get(lockmgr_t *m, const char *name, size_t len) {
    oname_t *on = oname_find(m, name, len);
    elect_t *e = elect_get(m);
    if (on != NULL || e == NULL) return on;
    if ((on = zalloc(sizeof(*on) + len + 1)) == NULL) return NULL;
    on->m = m;
    LIST_INIT(&on->obs);
    memcpy(on->name, name, len);
    on->len = len;
    on->node.key = on->name;
    on->node.len = len;
    on->ok_at = timers_now(m->timers);
    hmap_put(&e->names, &on->node);
    e->names_count++;
    e->stats.observed = e->names_count;
    /* Once in force, the watch's confirmation reads the leader. */
    backend_watch(m->backend, on->name, on->len, BACKEND_ELECT, 0, on_watch, on);
    return on;
}

/* Frees on once nobody needs it; its watch goes with it. */
static void oname_maybe_free(oname_t *on) {
    lockmgr_t *m = on->m;
    if (on->count > 0 || on->candidates || on->telling) return;
    timers_stop(m->timers, &on->timer);
    if (on->reading) return; /* on_read frees it */
    backend_unwatch(m->backend, on->name, on->len, BACKEND_ELECT, 0);
    hmap_del(&elect_of(m)->names, &on->node);
    elect_of(m)->names_count--;
    elect_of(m)->stats.observed = elect_of(m)->names_count;
    free(on);
    elect_maybe_free(m);
}

void elect_watch(lockmgr_t *m, const char *name, size_t len) {
    oname_t *on = oname_get(m, name, len);
    if (on != NULL) on->candidates = 1; /* else its waiters retry at the lease's end */
}

void elect_unwatch(lockmgr_t *m, const char *name, size_t len) {
    oname_t *on = oname_find(m, name, len);
    if (on == NULL) return;
    on->candidates = 0;
    oname_maybe_free(on);
}

/* ---- telling ---------------------------------------------------------------------- */

/* What ob is told of a leader fence (0: none), as its history allows. */
static void tell_one(elect_t *e, obs_t *ob, uint64_t fence, const char *value, size_t vlen) {
    if (fence == 0) {
        if (ob->none) return;
        ob->none = 1;
    } else {
        if (fence < ob->told || (fence == ob->told && !ob->none)) return;
        ob->told = fence;
        ob->none = 0;
    }
    lock_owner_t *o = ob->owner;
    if (e->closing || o->dropped) return;
    e->stats.leader_events++;
    lock_event_t ev = {.type = LOCK_EVENT_LEADER, .name = ob->on->name, .len = ob->on->len,
                       .fence = fence, .value = value, .value_len = vlen};
    lock_tell(o, &ev);
}

/* A new view of the leader: every observer is told what its history allows. */
static void tell(oname_t *on, uint64_t fence, const char *value, size_t vlen) {
    elect_t *e = elect_of(on->m);
    if (vlen > ELECT_VALUE_MAX) vlen = ELECT_VALUE_MAX;
    on->fence = fence;
    memmove(on->value, value, vlen);
    on->value[vlen] = '\0';
    on->vlen = vlen;
    on->telling++;
    obs_t *ob = LIST_FIRST(&on->obs), *next;
    for (; ob != NULL; ob = next) {
        next = LIST_NEXT(ob, by_name); /* an observer may leave from its event */
        tell_one(e, ob, on->fence, on->value, on->vlen);
    }
    on->telling--;
}

/* ---- reading ---------------------------------------------------------------------- */

static void on_timer(timers_entry_t *t) {
    read_leader(container_of(t, oname_t, timer));
}

/* An answered read: the next one when the leader's lease ends, or a poll. */
static void plan_next(oname_t *on, const backend_result_t *res) {
    lockmgr_t *m = on->m;
    uint64_t next = m->conf->lease_ms / ELECT_POLL_DIV;
    if (res->outcome != BACKEND_WRONG_KIND && res->fence && res->ttl_ms >= 0 &&
        (uint64_t)res->ttl_ms + ELECT_EXPIRY_SLACK_MS < next)
        next = (uint64_t)res->ttl_ms + ELECT_EXPIRY_SLACK_MS;
    timers_start(m->timers, &on->timer, next, on_timer);
}

static void on_read(backend_op_t *bop) {
    oname_t *on = container_of(bop, oname_t, op);
    lockmgr_t *m = on->m;
    const backend_result_t *res = &bop->res;
    uint64_t now = timers_now(m->timers), lease = m->conf->lease_ms;
    on->reading = 0;
    if (on->count == 0 && !on->candidates) {
        oname_maybe_free(on);
        return;
    }
    if (res->status == BACKEND_OK) {
        on->ok_at = on->sent_at;
        if (on->sent_at >= on->view_at) { /* a LEADER's may have come since */
            on->view_at = on->sent_at;
            if (res->outcome == BACKEND_WRONG_KIND) tell(on, 0, "", 0);
            else tell(on, res->fence, res->value ? res->value : "", res->value_len);
        }
        plan_next(on, res);
    } else {
        /* Unanswered for a lease: nobody here can vouch for the leader. */
        if (now - on->ok_at >= lease) tell(on, 0, "", 0);
        timers_start(m->timers, &on->timer, ELECT_RETRY_MS, on_timer);
    }
    if (on->again) {
        on->again = 0;
        read_leader(on);
    }
    oname_maybe_free(on);
}

static void read_leader(oname_t *on) {
    lockmgr_t *m = on->m;
    if (on->reading) {
        on->again = 1;
        return;
    }
    if (on->count == 0) return; /* only candidates: their own attempts tell them */
    timers_stop(m->timers, &on->timer);
    memset(&on->op, 0, sizeof(on->op));
    lock_op_init(&on->op, BACKEND_LEADER, LOCK_MODE_ELECT, on->name, on->len, 0, on_read);
    on->op.answer = on->answer;
    on->reading = 1;
    on->sent_at = timers_now(m->timers);
    elect_of(m)->stats.rereads++;
    backend_submit(m->backend, &on->op);
}

/* ---- observers -------------------------------------------------------------------- */

static oowner_t *oowner_find(const lockmgr_t *m, uint64_t id) {
    if (elect_of(m) == NULL) return NULL;
    hmap_node_t *n = hmap_get(&elect_of(m)->owners, (const char *)&id, sizeof(id));
    return n ? container_of(n, oowner_t, node) : NULL;
}

static obs_t *obs_of(lockmgr_t *m, const lock_owner_t *o, const char *name, size_t len) {
    oowner_t *oo = oowner_find(m, o->id);
    obs_t *ob;
    if (oo == NULL) return NULL;
    LIST_FOREACH(ob, &oo->obs, by_owner)
        if (ob->on->len == len && memcmp(ob->on->name, name, len) == 0) return ob;
    return NULL;
}

static void obs_free(lockmgr_t *m, obs_t *ob) {
    elect_t *e = elect_of(m);
    oowner_t *oo = ob->oo;
    oname_t *on = ob->on;
    LIST_REMOVE(ob, by_name);
    LIST_REMOVE(ob, by_owner);
    on->count--;
    oo->count--;
    e->stats.observers--;
    free(ob);
    if (oo->count == 0) {
        hmap_del(&e->owners, &oo->node);
        e->owners_count--;
        free(oo);
    }
    oname_maybe_free(on);
}

/* A new observation of on by o, told fence already (its answer). NULL on
 * no memory. */
static obs_t *obs_new(lockmgr_t *m, lock_owner_t *o, oname_t *on, uint64_t fence) {
    elect_t *e = elect_of(m);
    oowner_t *oo = oowner_find(m, o->id);
    if (oo == NULL) {
        if ((oo = zalloc(sizeof(*oo))) == NULL) return NULL;
        oo->id = o->id;
        LIST_INIT(&oo->obs);
        oo->node.key = (const char *)&oo->id;
        oo->node.len = sizeof(oo->id);
        hmap_put(&e->owners, &oo->node);
        e->owners_count++;
    }
    obs_t *ob = zalloc(sizeof(*ob));
    if (ob == NULL) {
        if (oo->count == 0) {
            hmap_del(&e->owners, &oo->node);
            e->owners_count--;
            free(oo);
        }
        return NULL;
    }
    ob->owner = o;
    ob->oo = oo;
    ob->on = on;
    ob->told = fence;
    ob->none = fence == 0;
    LIST_INSERT_HEAD(&oo->obs, ob, by_owner);
    LIST_INSERT_HEAD(&on->obs, ob, by_name);
    oo->count++;
    on->count++;
    e->stats.observers++;
    return ob;
}

/* LEADER's and OBSERVE's read came back. Its answer and the tells may
 * end observations (an observer's connection closing from inside): on
 * stays until they are over, and goes then if nobody needs it. */
static void leader_done(lock_op_t *op, lock_owner_t *o, hold_t *h) {
    lockmgr_t *m = op->mgr;
    const backend_result_t *res = &op->bop.res;
    (void)h;
    if (o == NULL) return;
    if (res->outcome == BACKEND_WRONG_KIND) {
        lock_answer_kind(m, o, op->hdr.call, LOCK_WHY_HELD_AS, lock_mode_of_backend(res->held),
                         op->name,
                         op->len);
        return;
    }
    const char *value = res->value ? res->value : "";
    size_t vlen = res->value_len > ELECT_VALUE_MAX ? ELECT_VALUE_MAX : res->value_len;
    oname_t *on = oname_find(m, op->name, op->len);
    if (op->verb == LOCK_VERB_OBSERVE && !o->dropped) { /* a dropped owner gains none */
        obs_t *ob = obs_of(m, o, op->name, op->len);
        oowner_t *oo = oowner_find(m, o->id);
        if (ob == NULL && oo != NULL && oo->count >= m->conf->max_observes_per_client) {
            lock_answer_error(m, o, op->hdr.call, LOCK_ERR_LIMIT, LOCK_WHY_MAX_OBSERVES,
                              m->conf->max_observes_per_client);
            return;
        }
        if (on == NULL) on = oname_get(m, op->name, op->len);
        if (on == NULL || (ob == NULL && obs_new(m, o, on, res->fence) == NULL)) {
            if (on != NULL) oname_maybe_free(on);
            lock_answer_error(m, o, op->hdr.call, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
            return;
        }
        if (ob != NULL) { /* observed already: this answer counts as told */
            if (res->fence > ob->told) ob->told = res->fence;
            ob->none = res->fence == 0;
        }
    }
    lock_reply_t r = {.type = LOCK_REPLY_LEADER, .fence = res->fence, .leader = value,
                      .leader_len = vlen};
    if (on != NULL) on->telling++;
    lock_answer(o, op->hdr.call, &r);
    if (on == NULL) return;
    /* Then the observers here hear of it (this one was told it), or of
     * what a later read found. */
    if (op->sent_at >= on->view_at) {
        on->view_at = op->sent_at;
        if (op->sent_at >= on->ok_at) on->ok_at = op->sent_at;
        /* a name watched already (its candidates' here, or observed) gets
         * no confirmation: this read plans the next */
        if (!on->reading) plan_next(on, res);
        tell(on, res->fence, value, vlen);
    } else {
        tell(on, on->fence, on->value, on->vlen);
    }
    on->telling--;
    oname_maybe_free(on);
}

void observe_request(lockmgr_t *m, lock_owner_t *o, const lock_request_t *req) {
    if (req->verb == LOCK_VERB_OBSERVE) {
        oowner_t *oo = oowner_find(m, o->id);
        if (obs_of(m, o, req->name, req->len) == NULL && oo != NULL &&
            oo->count >= m->conf->max_observes_per_client) {
            lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_MAX_OBSERVES,
                              m->conf->max_observes_per_client);
            return;
        }
        if (elect_get(m) == NULL) {
            lock_answer_error(m, o, o->call_now, LOCK_ERR_LIMIT, LOCK_WHY_NOMEM, 0);
            return;
        }
    } else if (req->verb != LOCK_VERB_LEADER) {
        lock_answer_error(m, o, o->call_now, LOCK_ERR_ARGS, LOCK_WHY_NONE, 0);
        return;
    }
    if (!backend_available(m->backend, req->name, req->len)) {
        lock_answer_unavailable(m, o, o->call_now, req->name, req->len);
        return;
    }
    lock_op_t *op = lock_op_new(m, o, NULL, req, BACKEND_LEADER, LOCK_MODE_ELECT, leader_done);
    if (op == NULL) return;
    op->bop.answer = op->answer;
    backend_submit(m->backend, &op->bop);
}

int observe_unobserve(lockmgr_t *m, lock_owner_t *o, const char *name, size_t len) {
    obs_t *ob = obs_of(m, o, name, len);
    if (ob == NULL) return 0;
    obs_free(m, ob);
    return 1;
}

void observe_unobserve_all(lockmgr_t *m, lock_owner_t *o) {
    oowner_t *oo;
    while ((oo = oowner_find(m, o->id)) != NULL) obs_free(m, LIST_FIRST(&oo->obs));
}

/* ---- live restore ----------------------------------------------------------------- */

void observe_save_owner(const lockmgr_t *m, const lock_owner_t *o, statew_t *w) {
    oowner_t *oo = oowner_find(m, o->id);
    obs_t *ob;
    if (oo == NULL) return;
    LIST_FOREACH(ob, &oo->obs, by_owner) {
        statew_rec(w, "observe");
        statew_bytes(w, ob->on->name, ob->on->len);
        statew_u64(w, ob->told);
        statew_u64(w, (uint64_t)ob->none);
    }
}

int observe_load(lockmgr_t *m, lock_owner_t *o, const char *word, stater_t *r) {
    const char *name;
    size_t len;
    if (strcmp(word, "observe") != 0) return 0;
    stater_bytes(r, &name, &len);
    uint64_t told = stater_u64(r), none = stater_u64(r);
    if (r->err) return 1;
    if (o == NULL || len == 0 || len > ELECT_NAME_MAX || obs_of(m, o, name, len) != NULL) {
        stater_fail(r, "an observe record is not one this dlockd knows");
        return 1;
    }
    /* The name's watch starts; its confirmation reads the leader, and the
     * observer hears of it only if it is not what it was told. */
    oname_t *on = elect_get(m) != NULL ? oname_get(m, name, len) : NULL;
    obs_t *ob = on != NULL ? obs_new(m, o, on, told) : NULL;
    if (ob == NULL) {
        if (on != NULL) oname_maybe_free(on);
        stater_fail(r, "out of memory");
        return 1;
    }
    ob->none = none != 0;
    return 1;
}
