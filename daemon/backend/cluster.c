/* The Cluster topology: locks spread over the primaries of a Redis Cluster.
 * SPDX-License-Identifier: MIT
 *
 * It follows the Redis Cluster client specification:
 * - the slot map comes from CLUSTER SHARDS (CLUSTER SLOTS before Redis
 *   7.0), asked of a known node or a seed, and again every
 *   CLUSTER_REFRESH_MS, and soon (at most every CLUSTER_REFRESH_MIN_MS)
 *   after a MOVED, a CLUSTERDOWN or a node lost;
 * - a lock goes to the primary that owns the slot of its key; its
 *   companions (fence counter, channel, forced marker) share the slot by
 *   Redisson's naming, and a name for which they would not is refused;
 * - one node.c node per primary: a command and a pub/sub connection each,
 *   opened when the map names it. Ops queued in one loop iteration go to
 *   their primary in one batch call (the _ANY scripts: keys of many slots);
 * - MOVED: that slot changes hands at once, the map is read again, and the
 *   op is sent again alone. ASK: ASKING, then that op alone on the target.
 *   TRYAGAIN, CLUSTERDOWN, a node not reachable, or an op of a batch whose
 *   key the node no longer serves: the op waits (CLUSTER_RETRY_MS at a
 *   time) and goes again alone, until command_timeout_ms, then fails;
 * - an op that reached Redis and lost its answer (a connection dropped) is
 *   not sent again: it may have run, and the lock manager knows what to do;
 * - a watch subscribes on the primary that owns the channel's slot, with
 *   SSUBSCRIBE where the cluster has sharded pub/sub (sharded_pubsub =
 *   auto finds out); when Redis ends it because the slot moved, it moves
 *   to the new owner, and its waiters try again there;
 * - a multi-name lock over several slots is one call per slot, in order,
 *   undone on refusal (cluster_multi.c); in one slot, one call, in the
 *   line of its first name, behind the others' ops.
 * Each primary's queue and connections are its own: a request on a healthy
 * shard never waits for a sick one.
 *
 * This file routes: ops, in order per name, and their retries, and the
 * watches. Reading the map and applying it (its nodes, made and retired)
 * is cluster_refresh.c's; they share cluster_t through cluster_internal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/cluster_internal.h"
#include "daemon/backend/cluster_map.h"
#include "daemon/backend/cluster_multi.h"
#include "daemon/backend/keys.h"
#include "daemon/backend/node.h"
#include "daemon/backend/resp.h"
#include "daemon/backend/scripts.h"
#include "daemon/log.h"
#include "daemon/util/hmap.h"
#include "daemon/util/util.h"

/* A waiting op (TRYAGAIN, a node down, no owner yet) tries again after this. */
#define CLUSTER_RETRY_MS       25
/* Redirections (MOVED, ASK) one op follows before it waits for the map. */
#define CLUSTER_REDIRECTS_MAX  8
/* A watch Redis ended is placed again on the same node only after the map
 * said that node owns the slot this many times running. */
#define CLUSTER_WATCH_SAME_MAX 3

typedef struct cwatch_s {
    hmap_node_t node;         /* keyed by the lock name */
    cluster_t *cl;
    backend_watch_cb cb;
    void *data;
    cnode_t *on;              /* the node it is watched on; NULL: nowhere */
    backend_mode_t mode;      /* its channel */
    uint64_t owner;           /* ... a fair lock waiter's own */
    int lost;                 /* Redis ended it: place it again */
    int same;                 /* maps since, naming the same owner */
    unsigned slot;
    size_t len;
    char name[];
} cwatch_t;

#define CL(b) container_of((b), cluster_t, base)
#define CL_CONST(b) ((const cluster_t *)(const void *)(b))

static void on_op_done(void *data, backend_op_t *op);

/* ---- slots and names ------------------------------------------------------- */

static unsigned slot_of(const cluster_t *cl, const char *name, size_t len) {
    char key[KEYS_KEY_MAX];
    return keys_slot(key, keys_lock(key, cl->prefix, name, len));
}

/* 1 if a lock's companions share its slot: not so for a name with '{' but
 * no '}' after it, an empty "{}", or '}' without '{', by Redisson's
 * naming. */
static int name_fits(const cluster_t *cl, const char *name, size_t len) {
    char key[KEYS_KEY_MAX], chan[KEYS_COMPANION_MAX];
    size_t klen = keys_lock(key, cl->prefix, name, len);
    size_t clen = keys_companion(chan, KEYS_CHANNEL, key, klen);
    return keys_slot(key, klen) == keys_slot(chan, clen);
}

/* ---- nodes ----------------------------------------------------------------- */

static void on_node_state(void *data) {
    cnode_t *cn = data;
    cluster_t *cl = cn->cl;
    if (cl->closed) return;
    /* A primary lost may be failing over: read the map soon. */
    if (!node_up(cn->nd) && cn->slots > 0) cluster_refresh_soon(cl);
    backend_notify_state(&cl->base);
}

/* ---- ops, in order per name ---------------------------------------------------------
 *
 * Ops on one name run in Redis in the order they were submitted, as
 * backend.h promises: a release that waits for its shard's failover must
 * not run after the same owner's next grant, which would delete it. So the
 * ops of a name in the cluster's hands are tracked together (cname_t):
 * they go out pipelined while they all go to one node; when one comes back
 * without having run (MOVED, ASK, TRYAGAIN, a node down), it takes the
 * head of the line again, ahead of every later op, and the name goes one
 * op at a time (a detour) until nothing of it is left. Ops that went out
 * in one pipeline after it meet the same key state and come back the same
 * way, in order. */

typedef struct cname_s {
    hmap_node_t node;         /* keyed by the lock name */
    unsigned slot;
    unsigned out;             /* sent to a node, not answered yet */
    cnode_t *on;              /* ... where they went */
    int detour;               /* one op at a time until the line is empty */
    int stalled;              /* on cl->stalled: waits for the retry turn */
    TAILQ_ENTRY(cname_s) stall;
    struct cop_list_s q;      /* waiting to go, in order */
    backend_op_t *redo_tail;  /* the last op put back ahead of the others */
    resp_addr_t ask;          /* the head's ASK target */
    char why[BACKEND_ERR_LEN]; /* what the head met last */
    size_t len;
    char name[];
} cname_t;

/* route bits of the cluster's own, beside NODE_OP_*: */
#define CL_OP_LATER 0x100u    /* not before the next retry turn */

static void on_retry(timers_entry_t *t);

static cname_t *cname_find(const cluster_t *cl, const char *name, size_t len) {
    hmap_node_t *h = hmap_get(&cl->names, name, len);
    return h ? container_of(h, cname_t, node) : NULL;
}

static cname_t *cname_get(cluster_t *cl, const char *name, size_t len) {
    cname_t *cn = cname_find(cl, name, len);
    if (cn != NULL) return cn;
    if ((cn = calloc(1, sizeof(*cn) + len + 1)) == NULL) return NULL;
    memcpy(cn->name, name, len);
    cn->len = len;
    cn->slot = slot_of(cl, name, len);
    STAILQ_INIT(&cn->q);
    cn->node.key = cn->name;
    cn->node.len = len;
    hmap_put(&cl->names, &cn->node);
    return cn;
}

/* Forgets cn once nothing of it is left. */
static void cname_done(cluster_t *cl, cname_t *cn) {
    if (cn->out > 0 || !STAILQ_EMPTY(&cn->q)) return;
    if (cn->stalled) TAILQ_REMOVE(&cl->stalled, cn, stall);
    hmap_del(&cl->names, &cn->node);
    free(cn);
}

static void stall(cluster_t *cl, cname_t *cn) {
    if (!cn->stalled) {
        cn->stalled = 1;
        TAILQ_INSERT_TAIL(&cl->stalled, cn, stall);
    }
    if (!timers_active(&cl->retry)) timers_start(cl->timers, &cl->retry, CLUSTER_RETRY_MS, on_retry);
}

/* Hands op to its owner with status and why. */
static void op_give_up(cluster_t *cl, backend_op_t *op, backend_status_t status, const char *why) {
    snprintf(cl->fail, sizeof(cl->fail), "%s", why);
    memset(&op->res, 0, sizeof(op->res));
    op->res.status = status;
    op->res.error = cl->fail;
    op->cb(op);
}

/* Ops no name record could be made for (no memory, or closing) fail. */
static void fail_orphans(cluster_t *cl, backend_status_t status, const char *why) {
    backend_op_t *op;
    while ((op = STAILQ_FIRST(&cl->orphans)) != NULL) {
        STAILQ_REMOVE_HEAD(&cl->orphans, link);
        op_give_up(cl, op, status, why);
    }
}

/* Why nothing can go to slot now, into out. */
static void say_unroutable(const cluster_t *cl, unsigned slot, const cnode_t *to, char *out,
                           size_t cap) {
    char why[BACKEND_ERR_LEN];
    if (to == NULL) {
        snprintf(out, cap, "cluster: no primary known for slot %u%s%.200s", slot,
                 cl->why[0] ? ": " : "", cl->why);
        return;
    }
    node_why_down(to->nd, why, sizeof(why));
    snprintf(out, cap, "cluster: slot %u on %.60s: %.160s", slot, to->label, why);
}

/* Sends what waits for cn, in order: everything while it all goes to one
 * node, one op at a time in a detour. An op that cannot go yet waits for
 * the retry turn; past its deadline it fails, unless fail_ok is 0 (inside
 * cl_submit, no callback may run). */
static void drain(cluster_t *cl, cname_t *cn, int fail_ok) {
    backend_op_t *op;
    char why[BACKEND_ERR_LEN];
    while ((op = STAILQ_FIRST(&cn->q)) != NULL && !cl->closed) {
        if (cn->out > 0 && cn->detour) return;
        cnode_t *to =
            op->route & NODE_OP_ASKING ? cluster_node_get(cl, &cn->ask) : cl->slots[cn->slot];
        int ready = to != NULL && node_up(to->nd) && !(op->route & CL_OP_LATER) &&
                    op->deadline != 0;
        if (!ready) {
            if (fail_ok && timers_now(cl->timers) >= op->deadline) {
                STAILQ_REMOVE_HEAD(&cn->q, link);
                if (op == cn->redo_tail) cn->redo_tail = NULL;
                if (op->deadline == 0)
                    op_give_up(cl, op, BACKEND_FAILED,
                               "cluster: a name with '{' but no '}' after it, an empty '{}' or "
                               "'}' alone would put its companion keys in another slot");
                else if (cn->why[0] != '\0' && to != NULL && node_up(to->nd))
                    op_give_up(cl, op, BACKEND_DOWN, cn->why);
                else {
                    say_unroutable(cl, cn->slot, to, why, sizeof(why));
                    op_give_up(cl, op, BACKEND_DOWN, why);
                }
                continue;
            }
            if (to == NULL || !node_up(to->nd)) cluster_refresh_soon(cl);
            stall(cl, cn);
            return;
        }
        if (cn->out > 0 && to != cn->on) return; /* the others come back first */
        STAILQ_REMOVE_HEAD(&cn->q, link);
        if (op == cn->redo_tail) cn->redo_tail = NULL;
        if (!cl->shards) op->route |= NODE_OP_SINGLE; /* no batches across slots before 7.0 */
        op->tries++;
        cn->out++;
        cn->on = to;
        to->used_at = timers_now(cl->timers);
        node_submit(to->nd, op);
    }
}

/* The retry turn: every stalled name goes again. */
static void on_retry(timers_entry_t *t) {
    cluster_t *cl = container_of(t, cluster_t, retry);
    TAILQ_HEAD(, cname_s) now = TAILQ_HEAD_INITIALIZER(now);
    cname_t *cn;
    fail_orphans(cl, BACKEND_FAILED, "out of memory");
    TAILQ_CONCAT(&now, &cl->stalled, stall);
    while ((cn = TAILQ_FIRST(&now)) != NULL && !cl->closed) {
        TAILQ_REMOVE(&now, cn, stall);
        cn->stalled = 0;
        backend_op_t *op = STAILQ_FIRST(&cn->q);
        if (op != NULL) op->route &= ~CL_OP_LATER;
        drain(cl, cn, 1);
        cname_done(cl, cn);
    }
}

void cluster_retry_all(cluster_t *cl) {
    if (!TAILQ_EMPTY(&cl->stalled)) {
        timers_stop(cl->timers, &cl->retry);
        on_retry(&cl->retry);
    }
}

/* An op of an _ANY call met a key this node does not serve: raised inside
 * the script ("ERR Script attempted to access a non local key in a cluster
 * node"), before the op wrote anything. */
static int not_here(const char *err) {
    return strstr(err, "non local key") != NULL || strcmp(err, SCRIPTS_NOT_HERE) == 0;
}

/* Errors after which the op did not run and goes again once the map (or
 * the slot's migration) has moved on. */
static int retry_error(const char *err) {
    static const char *const signs[] = {
        "TRYAGAIN", "CLUSTERDOWN", "CROSSSLOT", "READONLY", "LOADING", "MASTERDOWN",
    };
    for (size_t i = 0; i < sizeof(signs) / sizeof(signs[0]); i++)
        if (strncmp(err, signs[i], strlen(signs[i])) == 0) return 1;
    return not_here(err) || strstr(err, "cluster is down") != NULL;
}

static void who_registry(cluster_t *cl, backend_op_t *op);

/* Puts op back at the head of its name's line, behind the others that
 * came back before it, and makes the name go one op at a time. */
static void redo(cname_t *cn, const cnode_t *from, backend_op_t *op, unsigned route,
                 const char *why) {
    op->route = route;
    if (why != NULL)
        snprintf(cn->why, sizeof(cn->why), "cluster: slot %u on %.60s: %.160s", cn->slot,
                 from->label, why);
    if (cn->redo_tail == NULL) STAILQ_INSERT_HEAD(&cn->q, op, link);
    else STAILQ_INSERT_AFTER(&cn->q, cn->redo_tail, op, link);
    cn->redo_tail = op;
    cn->detour = 1;
}

/* A node's answer to an op: the op's owner gets it, unless the cluster
 * moved under it and the op did not run: then it goes again, first in its
 * name's line. */
static void on_op_done(void *data, backend_op_t *op) {
    cnode_t *from = data;
    cluster_t *cl = from->cl;
    backend_result_t *res = &op->res;
    unsigned slot;
    cluster_map_addr_t ma;

    if (cl->closed) {
        op->cb(op);
        return;
    }
    cname_t *cn = cname_find(cl, op->name, op->len);
    if (cn == NULL) { /* cannot be: every op out has its name's record */
        op->cb(op);
        return;
    }
    cn->out--;
    int later = op->tries >= CLUSTER_REDIRECTS_MAX ? CL_OP_LATER : 0;
    if (later) op->tries = 0;
    if (res->status == BACKEND_FAILED && res->error != NULL) {
        cluster_map_redirect_t kind = cluster_map_redirect(res->error, &slot, &ma);
        if (kind != CLUSTER_MAP_NO_REDIRECT) {
            resp_addr_t a = cluster_resp_addr(&ma);
            log_debug("cluster: %s: %s (op %d on %.*s)", from->label, res->error,
                      (int)op->type, (int)op->len, op->name);
            /* After MOVED the new owner has the whole slot: the op goes as
             * any other. After ASK only this op goes to the importing node,
             * once: a grant alone with its keys declared (Redis answers
             * TRYAGAIN while its fence counter may still be on the source,
             * where making it anew would clash with MIGRATE); a renewal or
             * a release checking its keys one by one, which the importing
             * node serves after ASKING: it never creates a key. */
            if (kind == CLUSTER_MAP_MOVED) {
                cnode_t *to = cluster_node_get(cl, &a);
                if (to != NULL) cl->slots[slot] = to;
                cluster_refresh_soon(cl);
                redo(cn, from, op, later, res->error);
            } else {
                cn->ask = a;
                redo(cn, from, op,
                     later | NODE_OP_ASKING |
                         (op->type == BACKEND_ACQUIRE ? NODE_OP_SINGLE : 0),
                     res->error);
            }
            goto next;
        }
        if (not_here(res->error) && !(op->route & NODE_OP_SINGLE)) {
            /* Its key left this node (a slot moving, or a map behind):
             * alone with its keys declared, Redis says where it went. */
            log_debug("cluster: %s: %s (op %d on %.*s); asking where it is", from->label,
                      res->error, (int)op->type, (int)op->len, op->name);
            redo(cn, from, op, later | NODE_OP_SINGLE, res->error);
            goto next;
        }
        if (retry_error(res->error)) {
            log_debug("cluster: %s: %s (op %d on %.*s); trying again", from->label, res->error,
                      (int)op->type, (int)op->len, op->name);
            if (strncmp(res->error, "TRYAGAIN", 8) != 0) cluster_refresh_soon(cl);
            redo(cn, from, op, CL_OP_LATER, res->error);
            goto next;
        }
    } else if (res->status == BACKEND_DOWN && !(op->route & NODE_OP_SENT)) {
        /* It never left: it may go elsewhere, or later. */
        cluster_refresh_soon(cl);
        redo(cn, from, op, CL_OP_LATER, NULL);
        goto next;
    }
    /* It ran (or may have): the next of its name may go, then its owner
     * hears of it. Nothing of cn is touched after the callback. */
    drain(cl, cn, 1);
    cname_done(cl, cn);
    if (op->type == BACKEND_WHO && res->status == BACKEND_OK && op->who != NULL &&
        op->who->owner[0] != '\0') {
        who_registry(cl, op);
        return;
    }
    op->cb(op);
    return;
next:
    drain(cl, cn, 1);
    cname_done(cl, cn);
}

/* ---- WHO: the registry is in a slot of its own ------------------------------------ */

static void on_registry_reply(void *data, redisReply *r, const char *error) {
    backend_op_t *op = data;
    if (error == NULL && r->type == REDIS_REPLY_STRING) {
        const char *entry = strchr(r->str, ' '); /* after "<seen ms> " */
        snprintf(op->who->daemon, sizeof(op->who->daemon), "%s", entry ? entry + 1 : "");
    }
    op->cb(op); /* without the registry, the daemon stays unknown */
}

/* The holder's daemon, from the registry's primary: HGET, a read. */
static void who_registry(cluster_t *cl, backend_op_t *op) {
    char key[KEYS_KEY_MAX + sizeof(KEYS_REGISTRY)];
    const char *owner = op->who->owner, *colon = strrchr(owner, ':');
    size_t ulen = colon ? (size_t)(colon - owner) : strlen(owner);
    int klen = snprintf(key, sizeof(key), "%s%s", cl->prefix, KEYS_REGISTRY);
    const char *argv[3] = {"HGET", key, owner};
    size_t argvlen[3] = {4, (size_t)klen, ulen};
    cnode_t *cn = cl->slots[cl->registry_slot];
    if (cn == NULL || node_command(cn->nd, 3, argv, argvlen, on_registry_reply, op) != 0)
        op->cb(op);
}


/* ---- watches --------------------------------------------------------------------- */

static void on_cw_event(void *data, backend_event_t ev) {
    cwatch_t *cw = data;
    cw->cb(cw->data, ev);
}

/* Watches cw on the primary of its slot, leaving the one it was on. */
static void watch_place(cluster_t *cl, cwatch_t *cw) {
    cnode_t *to = cl->slots[cw->slot];
    if (to == cw->on && !cw->lost) return;
    if (to == cw->on && cw->lost && ++cw->same < CLUSTER_WATCH_SAME_MAX) {
        /* Redis ended it, yet this map still names that node: a map read
         * before the move. Ask again before subscribing where it fails. */
        cluster_refresh_soon(cl);
        return;
    }
    if (cw->on != NULL) node_unwatch(cw->on->nd, cw->name, cw->len, cw->mode, cw->owner);
    cw->on = to;
    cw->lost = 0;
    cw->same = 0;
    if (to != NULL) node_watch(to->nd, cw->name, cw->len, cw->mode, cw->owner, on_cw_event, cw);
}

void cluster_place_watches(cluster_t *cl) {
    size_t i = 0;
    for (hmap_node_t *h = hmap_next(&cl->watches, &i, NULL); h; h = hmap_next(&cl->watches, &i, h))
        watch_place(cl, container_of(h, cwatch_t, node));
}

static void on_watch_lost(void *data, void *watch_data) {
    cnode_t *cn = data;
    cwatch_t *cw = watch_data;
    log_debug("cluster: %s ended the watch of %.*s (slot %u moved): placing it again",
              cn->label, (int)cw->len, cw->name, cw->slot);
    cw->lost = 1;
    cluster_refresh_soon(cn->cl);
}

/* ---- the interface ------------------------------------------------------------------ */

static unsigned cl_slot_of(const backend_t *b, const char *name, size_t len) {
    return slot_of(CL_CONST(b), name, len);
}

static int cl_busy(const backend_t *b, const char *name, size_t len) {
    return cname_find(CL_CONST(b), name, len) != NULL;
}

static const cluster_multi_env_t multi_env = {.slot_of = cl_slot_of, .busy = cl_busy};

static void cl_submit(backend_t *b, backend_op_t *op) {
    cluster_t *cl = CL(b);
    /* A multi-name lock over several slots: a call per slot; or behind
     * another of its names' ops (cluster_multi.c). */
    if (!cl->closed && cluster_multi_split(b, &multi_env, op) &&
        cluster_multi_submit(b, &multi_env, op) == 0)
        return;
    /* route and tries start clear (backend_submit). */
    op->deadline = timers_now(cl->timers) + cl->command_timeout_ms;
    /* An unfit name fails from the retry turn, never from inside this call. */
    if (!name_fits(cl, op->name, op->len)) op->deadline = 0;
    cname_t *cn = cl->closed ? NULL : cname_get(cl, op->name, op->len);
    if (cn == NULL) {
        STAILQ_INSERT_TAIL(&cl->orphans, op, link); /* fails from the retry turn */
        if (!cl->closed && !timers_active(&cl->retry))
            timers_start(cl->timers, &cl->retry, CLUSTER_RETRY_MS, on_retry);
        return;
    }
    STAILQ_INSERT_TAIL(&cn->q, op, link);
    drain(cl, cn, 0);
}

static void cl_watch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                     uint64_t owner, backend_watch_cb cb, void *data) {
    cluster_t *cl = CL(b);
    hmap_node_t *h = hmap_get(&cl->watches, name, len);
    cwatch_t *cw = h ? container_of(h, cwatch_t, node) : NULL;
    if (cw == NULL) {
        if (!name_fits(cl, name, len)) return; /* its ops fail anyway */
        if ((cw = calloc(1, sizeof(*cw) + len + 1)) == NULL) return; /* TTL retries */
        cw->cl = cl;
        memcpy(cw->name, name, len);
        cw->len = len;
        cw->slot = slot_of(cl, name, len);
        cw->node.key = cw->name;
        cw->node.len = len;
        cw->mode = mode;
        cw->owner = owner;
        hmap_put(&cl->watches, &cw->node);
    }
    if (cw->mode != mode || cw->owner != owner) { /* one watch per name: the new
                                                      channel replaces it */
        if (cw->on != NULL) node_unwatch(cw->on->nd, name, len, cw->mode, cw->owner);
        cw->on = NULL;
        cw->mode = mode;
        cw->owner = owner;
    }
    cw->cb = cb;
    cw->data = data;
    if (cw->on != NULL && !cw->lost && cw->on == cl->slots[cw->slot])
        node_watch(cw->on->nd, name, len, mode, owner, on_cw_event, cw); /* confirms it */
    else
        watch_place(cl, cw);
    if (cw->on == NULL) cluster_refresh_soon(cl);
}

static void cl_unwatch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                       uint64_t owner) {
    cluster_t *cl = CL(b);
    hmap_node_t *h = hmap_get(&cl->watches, name, len);
    if (h == NULL) return;
    cwatch_t *cw = container_of(h, cwatch_t, node);
    (void)mode;
    (void)owner;
    if (cw->on != NULL) node_unwatch(cw->on->nd, name, len, cw->mode, cw->owner);
    hmap_del(&cl->watches, h);
    free(cw);
}

static int cl_available(const backend_t *b, const char *name, size_t len) {
    const cluster_t *cl = CL_CONST(b);
    if (name != NULL) {
        const cnode_t *cn = cl->slots[slot_of(cl, name, len)];
        return cn != NULL && node_up(cn->nd);
    }
    for (size_t i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->slots > 0 && node_up(cl->nodes[i]->nd)) return 1;
    return 0;
}

static void cl_describe(const backend_t *b, const char *name, size_t len, char *buf,
                        size_t cap) {
    const cluster_t *cl = CL_CONST(b);
    char why[BACKEND_ERR_LEN];
    if (name != NULL) {
        unsigned slot = slot_of(cl, name, len);
        const cnode_t *cn = cl->slots[slot];
        if (!name_fits(cl, name, len)) {
            snprintf(buf, cap, "cluster: a name with '{' but no '}' after it, an empty '{}' or "
                     "'}' alone would put its companion keys in another slot");
        } else if (cn == NULL) {
            snprintf(buf, cap, "cluster: no primary known for slot %u%s%s", slot,
                     cl->why[0] ? ": " : "", cl->why);
        } else {
            node_why_down(cn->nd, why, sizeof(why));
            snprintf(buf, cap, "cluster: slot %u on %s: %s", slot, cn->label, why);
        }
        return;
    }
    size_t primaries = 0, up = 0, k;
    for (size_t i = 0; i < cl->nnodes; i++) {
        if (cl->nodes[i]->slots == 0) continue;
        primaries++;
        up += node_up(cl->nodes[i]->nd) != 0;
    }
    if (!cl->mapped) {
        snprintf(buf, cap, "cluster no map yet%s%s", cl->why[0] ? ": " : "", cl->why);
        return;
    }
    k = (size_t)snprintf(buf, cap, "cluster %zu primaries %zu up", primaries, up);
    for (size_t i = 0; i < cl->nnodes && k < cap; i++) {
        if (cl->nodes[i]->slots == 0 || node_up(cl->nodes[i]->nd)) continue;
        k += (size_t)snprintf(buf + k, cap - k, " down:%s", cl->nodes[i]->label);
    }
}

static void cl_reconfigure(backend_t *b, const conf_t *conf) {
    cluster_t *cl = CL(b);
    cl->command_timeout_ms = conf->command_timeout_ms;
    cl->opts.connect_timeout_ms = conf->connect_timeout_ms;
    cl->opts.command_timeout_ms = conf->command_timeout_ms;
    cl->opts.replicas_timeout_ms = conf->replicas_timeout_ms;
    for (size_t i = 0; i < cl->nnodes; i++)
        node_set_timeouts(cl->nodes[i]->nd, conf->connect_timeout_ms, conf->command_timeout_ms,
                          conf->replicas_timeout_ms);
    cluster_refresh_reconfigure(cl, conf);
}

static size_t cl_scan_nodes(const backend_t *b, struct node_s **out, size_t cap,
                            unsigned *need) {
    const cluster_t *cl = CL_CONST(b);
    size_t k = 0;
    *need = 0;
    for (size_t i = 0; i < cl->nnodes && k < cap; i++)
        if (cl->nodes[i]->slots > 0) out[k++] = cl->nodes[i]->nd;
    return k;
}

static void cl_nodes(const backend_t *b, backend_node_cb cb, void *data) {
    const cluster_t *cl = CL_CONST(b);
    for (size_t i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->slots > 0) node_info(cl->nodes[i]->nd, "primary", cb, data);
}

static void cl_close(backend_t *b) {
    cluster_t *cl = CL(b);
    cl->closed = 1;
    timers_stop(cl->timers, &cl->retry);
    cluster_refresh_close(cl);
    /* Ops waiting fail first, then those in flight (in node_free). Their
     * callbacks may submit more: those fail too (cl_submit puts them on
     * orphans once closed), until nothing is left. */
    size_t i = 0;
    hmap_node_t *h, *next;
    for (h = hmap_next(&cl->names, &i, NULL); h != NULL; h = hmap_next(&cl->names, &i, h))
        STAILQ_CONCAT(&cl->orphans, &container_of(h, cname_t, node)->q);
    fail_orphans(cl, BACKEND_DOWN, "shutting down");
    for (i = 0; i < cl->nnodes; i++) {
        node_free(cl->nodes[i]->nd);
        free(cl->nodes[i]);
    }
    fail_orphans(cl, BACKEND_DOWN, "shutting down");
    i = 0;
    for (h = hmap_next(&cl->names, &i, NULL); h != NULL; h = next) {
        next = hmap_next(&cl->names, &i, h);
        free(container_of(h, cname_t, node));
    }
    hmap_free(&cl->names);
    i = 0;
    for (h = hmap_next(&cl->watches, &i, NULL); h != NULL; h = next) {
        next = hmap_next(&cl->watches, &i, h);
        free(container_of(h, cwatch_t, node));
    }
    hmap_free(&cl->watches);
    free(cl);
}

static const backend_type_t cluster_type = {
    .name = "cluster",
    .submit = cl_submit,
    .watch = cl_watch,
    .unwatch = cl_unwatch,
    .available = cl_available,
    .describe = cl_describe,
    .reconfigure = cl_reconfigure,
    .nodes = cl_nodes,
    .scan_nodes = cl_scan_nodes,
    .close = cl_close,
};

backend_t *cluster_open(const backend_env_t *env, char *err, size_t errlen) {
    const conf_t *conf = env->conf;
    cluster_t *cl = calloc(1, sizeof(*cl));
    if (cl == NULL) goto nomem;
    if (hmap_init(&cl->watches) != 0) goto nomem;
    if (hmap_init(&cl->names) != 0) goto nomem_watches;
    cl->base.type = &cluster_type;
    /* Fences are at least Redis TIME on every primary: they keep rising
     * across a failover and a slot's move (the counter moves with it). */
    cl->base.caps = BACKEND_CAP_MONOTONIC_FENCE | BACKEND_CAP_WAKEUPS | BACKEND_CAP_PARTIAL |
                    BACKEND_CAP_ONE_COPY | BACKEND_CAP_MULTI;
    cl->loop = env->loop;
    cl->timers = env->timers;
    cl->tls = env->tls != NULL;
    cl->command_timeout_ms = conf->command_timeout_ms;
    cl->register_every_ms = conf->renew_every_ms;
    cl->sharded_conf = conf->sharded_pubsub;
    cl->shards = 1; /* until CLUSTER SHARDS is unknown */
    snprintf(cl->prefix, sizeof(cl->prefix), "%s", conf->key_prefix);
    snprintf(cl->username, sizeof(cl->username), "%s", conf->username);
    snprintf(cl->password, sizeof(cl->password), "%s", conf->password);
    snprintf(cl->uuid, sizeof(cl->uuid), "%s", env->uuid);
    snprintf(cl->client_name, sizeof(cl->client_name), "%s", env->client_name);
    snprintf(cl->sni, sizeof(cl->sni), "%s", conf->tls_server_name);
    cl->nseeds = conf->cluster_count;
    memcpy(cl->seeds, conf->cluster, cl->nseeds * sizeof(cl->seeds[0]));
    char rkey[KEYS_KEY_MAX + sizeof(KEYS_REGISTRY)];
    cl->registry_slot = keys_slot(rkey, (size_t)snprintf(rkey, sizeof(rkey), "%s%s", cl->prefix,
                                                         KEYS_REGISTRY));
    STAILQ_INIT(&cl->orphans);
    TAILQ_INIT(&cl->stalled);

    const char *sni = cl->sni[0] ? cl->sni : NULL;
    /* Its strings are the copies above: nodes are made long after this. */
    backend_node_opts(env, &cl->opts);
    cl->opts.username = cl->username;
    cl->opts.password = cl->password;
    cl->opts.db = 0;
    cl->opts.key_prefix = cl->prefix;
    cl->opts.uuid = cl->uuid;
    cl->opts.client_name = cl->client_name;
    cl->opts.tls_server_name = sni;
    cl->opts.register_every_ms = 0; /* the registry's primary: map_apply */
    cl->opts.on_done = on_op_done;
    cl->opts.on_watch_lost = on_watch_lost;
    cl->opts.on_state = on_node_state;

    if (cluster_refresh_open(cl, env) != 0) goto nomem_names;
    return &cl->base;
nomem_names:
    hmap_free(&cl->names);
nomem_watches:
    hmap_free(&cl->watches);
nomem:
    free(cl);
    snprintf(err, errlen, "out of memory");
    return NULL;
}
