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
 * shard never waits for a sick one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/cluster_map.h"
#include "daemon/backend/cluster_multi.h"
#include "daemon/backend/keys.h"
#include "daemon/backend/node.h"
#include "daemon/backend/resp.h"
#include "daemon/backend/scripts.h"
#include "daemon/log.h"
#include "daemon/util/hmap.h"
#include "daemon/util/util.h"

/* Connect and answer, per node asked for the map. */
#define CLUSTER_ASK_TIMEOUT_MS 1000
/* The map is read again this often, whatever happens. */
#define CLUSTER_REFRESH_MS     1000
/* ... and at most this often when something asks for it sooner. */
#define CLUSTER_REFRESH_MIN_MS 100
/* A waiting op (TRYAGAIN, a node down, no owner yet) tries again after this. */
#define CLUSTER_RETRY_MS       25
/* Redirections (MOVED, ASK) one op follows before it waits for the map. */
#define CLUSTER_REDIRECTS_MAX  8
/* Primaries (and ASK targets) known at once: as many as a map names. */
#define CLUSTER_NODES_MAX      CLUSTER_MAP_NODES_MAX
/* A node the map no longer names stays this long (ASK targets, a slot
 * moving back), then goes. */
#define CLUSTER_RETIRE_MS      10000
/* A watch Redis ended is placed again on the same node only after the map
 * said that node owns the slot this many times running. */
#define CLUSTER_WATCH_SAME_MAX 3

typedef struct cluster_s cluster_t;

typedef struct cnode_s {
    cluster_t *cl;
    node_t *nd;
    resp_addr_t addr;
    char label[CONF_STR_MAX + 16];
    int slots;                /* slots it owns in the map */
    uint64_t used_at;         /* last sent to, or named by the map */
} cnode_t;

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

STAILQ_HEAD(cop_list_s, backend_op_s);

struct cluster_s {
    backend_t base;
    uv_loop_t *loop;
    timers_t *timers;
    node_opts_t opts;         /* the template of every node; its strings
                                 point at the copies below: nodes come
                                 and go long after cluster_open */
    char prefix[CONF_PREFIX_MAX + 1];
    char username[CONF_STR_MAX];
    char password[CONF_STR_MAX];
    char uuid[KEYS_UUID_LEN + 1];
    char client_name[CONF_STR_MAX];
    char sni[CONF_STR_MAX];
    uint32_t command_timeout_ms;
    uint32_t register_every_ms;
    conf_sharded_t sharded_conf;
    int tls;

    conf_addr_t seeds[CONF_CLUSTER_SEEDS_MAX];
    size_t nseeds;
    cnode_t *nodes[CLUSTER_NODES_MAX];
    size_t nnodes;
    cnode_t *slots[KEYS_SLOTS];
    int mapped;               /* a map was read */
    size_t covered;           /* slots with a primary in it */
    size_t primaries;         /* ... and primaries */
    int shards;               /* the cluster has CLUSTER SHARDS (7.0+) */
    unsigned registry_slot;

    /* reading the map: one round tries the known nodes, then the seeds */
    resp_conn_t *ask;
    resp_addr_t cand[CLUSTER_NODES_MAX + CONF_CLUSTER_SEEDS_MAX];
    size_t ncand, ask_i;
    int asking;
    int closing;              /* closing ask to move on: its on_down is ours */
    int again;                /* a refresh was asked for during the round */
    uint64_t refreshed_at;    /* when the last round started */
    timers_entry_t refresh;
    int warned;               /* "no node answered" was logged */
    log_once_t bad_map;       /* a node answered a map that cannot be read */
    char why[BACKEND_ERR_LEN];

    hmap_t names;             /* cname_t: the ops of each name in our hands */
    struct cop_list_s orphans; /* ops no cname_t could be made for: they fail */
    TAILQ_HEAD(, cname_s) stalled; /* names waiting for the retry turn */
    timers_entry_t retry;
    hmap_t watches;
    char fail[BACKEND_ERR_LEN]; /* an op's error text during its callback */
    int closed;
};

#define CL(b) container_of((b), cluster_t, base)
#define CL_CONST(b) ((const cluster_t *)(const void *)(b))

static void refresh_soon(cluster_t *cl);
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

static int addr_eq(const resp_addr_t *a, const resp_addr_t *b) {
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* A map's address as a connection's. */
static resp_addr_t to_resp_addr(const cluster_map_addr_t *m) {
    _Static_assert(sizeof(((resp_addr_t *)0)->host) >= sizeof(m->host), "host room");
    resp_addr_t a;
    memset(&a, 0, sizeof(a));
    memcpy(a.host, m->host, sizeof(m->host));
    a.port = m->port;
    return a;
}

static cnode_t *node_find(const cluster_t *cl, const resp_addr_t *a) {
    for (size_t i = 0; i < cl->nnodes; i++)
        if (addr_eq(&cl->nodes[i]->addr, a)) return cl->nodes[i];
    return NULL;
}

static void on_node_state(void *data) {
    cnode_t *cn = data;
    cluster_t *cl = cn->cl;
    if (cl->closed) return;
    /* A primary lost may be failing over: read the map soon. */
    if (!node_up(cn->nd) && cn->slots > 0) refresh_soon(cl);
    backend_notify_state(&cl->base);
}

static void on_watch_lost(void *data, void *watch_data);

/* The node at a, made if new; NULL when CLUSTER_NODES_MAX are known. */
static cnode_t *node_get(cluster_t *cl, const resp_addr_t *a) {
    cnode_t *cn = node_find(cl, a);
    if (cn != NULL) return cn;
    if (cl->nnodes == CLUSTER_NODES_MAX || (cn = calloc(1, sizeof(*cn))) == NULL) return NULL;
    cn->cl = cl;
    cn->addr = *a;
    if (strchr(a->host, ':') != NULL)
        snprintf(cn->label, sizeof(cn->label), "%s[%s]:%d", cl->tls ? "tls " : "", a->host,
                 a->port);
    else
        snprintf(cn->label, sizeof(cn->label), "%s%s:%d", cl->tls ? "tls " : "", a->host,
                 a->port);
    node_opts_t o = cl->opts;
    o.label = cn->label;
    o.addr = *a;
    o.data = cn;
    o.script_flags = SCRIPTS_F_NO_REGISTRY;
    if (cl->shards) o.script_flags |= SCRIPTS_F_ANY_SLOT;
    if (cl->sharded_conf == CONF_SHARDED_YES ||
        (cl->sharded_conf == CONF_SHARDED_AUTO && cl->shards))
        o.script_flags |= SCRIPTS_F_SHARDED;
    if ((cn->nd = node_new(cl->loop, cl->timers, &o)) == NULL) {
        free(cn);
        return NULL;
    }
    cn->used_at = timers_now(cl->timers);
    cl->nodes[cl->nnodes++] = cn;
    log_debug("cluster: node %s added", cn->label);
    return cn;
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
        cnode_t *to = op->route & NODE_OP_ASKING ? node_get(cl, &cn->ask) : cl->slots[cn->slot];
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
            if (to == NULL || !node_up(to->nd)) refresh_soon(cl);
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

/* Every name that waits goes again now (a new map). */
static void retry_all(cluster_t *cl) {
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
            resp_addr_t a = to_resp_addr(&ma);
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
                cnode_t *to = node_get(cl, &a);
                if (to != NULL) cl->slots[slot] = to;
                refresh_soon(cl);
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
            if (strncmp(res->error, "TRYAGAIN", 8) != 0) refresh_soon(cl);
            redo(cn, from, op, CL_OP_LATER, res->error);
            goto next;
        }
    } else if (res->status == BACKEND_DOWN && !(op->route & NODE_OP_SENT)) {
        /* It never left: it may go elsewhere, or later. */
        refresh_soon(cl);
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

/* ---- the map ---------------------------------------------------------------- */

static void place_watches(cluster_t *cl);

/* Makes m the map: nodes for its primaries, slots pointing at them;
 * nodes no longer named go after CLUSTER_RETIRE_MS. */
static void map_apply(cluster_t *cl, const cluster_map_t *m) {
    cnode_t *by[CLUSTER_NODES_MAX];
    uint64_t now = timers_now(cl->timers);
    size_t covered = 0, moved = 0;
    unsigned first = 0;
    const cnode_t *was = NULL, *now_on = NULL;
    for (size_t i = 0; i < m->n; i++) {
        resp_addr_t a = to_resp_addr(&m->addr[i]);
        by[i] = node_get(cl, &a);
    }
    for (size_t i = 0; i < cl->nnodes; i++) cl->nodes[i]->slots = 0;
    for (unsigned s = 0; s < KEYS_SLOTS; s++) {
        int owner = cluster_map_owner(m, s);
        cnode_t *cn = owner < 0 ? NULL : by[owner];
        if (cl->slots[s] != cn && cl->mapped && moved++ == 0) {
            first = s;
            was = cl->slots[s];
            now_on = cn;
        }
        cl->slots[s] = cn;
        if (cn != NULL) {
            cn->slots++;
            cn->used_at = now;
            covered++;
        }
    }
    /* Said when it changes: the first map, a failover, a resharding. */
    if (moved > 0)
        log_info("cluster: %zu slot%s changed hands (slot %u: %s -> %s)", moved,
                 moved == 1 ? "" : "s", first, was ? was->label : "nobody",
                 now_on ? now_on->label : "nobody");
    if (!cl->mapped || covered != cl->covered || m->n != cl->primaries) {
        if (covered < KEYS_SLOTS)
            log_warn("cluster: the map covers %zu of %d slots, on %zu primaries", covered,
                     KEYS_SLOTS, m->n);
        else
            log_info("cluster: %zu primaries, every slot covered", m->n);
    }
    cl->covered = covered;
    cl->primaries = m->n;
    cl->mapped = 1;
    /* Only the registry's primary keeps our WHO entry. */
    for (size_t i = 0; i < cl->nnodes; i++)
        node_set_register(cl->nodes[i]->nd, cl->nodes[i] == cl->slots[cl->registry_slot]
                                                ? cl->register_every_ms
                                                : 0);
    place_watches(cl);
    /* Nodes no longer named, unused for a while, go. */
    for (size_t i = 0; i < cl->nnodes;) {
        cnode_t *cn = cl->nodes[i];
        if (cn->slots > 0 || now - cn->used_at < CLUSTER_RETIRE_MS) {
            i++;
            continue;
        }
        log_debug("cluster: node %s removed: the map no longer names it", cn->label);
        cl->nodes[i] = cl->nodes[--cl->nnodes];
        node_free(cn->nd); /* ops in it: unsent ones go again, sent ones fail */
        free(cn);
    }
    retry_all(cl);
    backend_notify_state(&cl->base);
}

/* ---- asking for the map ---------------------------------------------------------- */

static void ask_try(cluster_t *cl);
static void on_refresh(timers_entry_t *t);

static void round_end(cluster_t *cl, int answered) {
    cl->asking = 0;
    if (answered) {
        if (cl->warned) log_info("cluster: the map is read again");
        cl->warned = 0;
    } else if (!cl->warned) {
        log_warn("cluster: no node answered for the map (%s); asking again", cl->why);
        cl->warned = 1;
    }
    uint64_t next = cl->again ? CLUSTER_REFRESH_MIN_MS : CLUSTER_REFRESH_MS;
    if (!answered && next > CLUSTER_REFRESH_MIN_MS) next = CLUSTER_REFRESH_MIN_MS;
    cl->again = 0;
    timers_start_at(cl->timers, &cl->refresh, cl->refreshed_at + next, on_refresh);
}

static void ask_next(cluster_t *cl) {
    cl->ask_i++;
    ask_try(cl);
}

static void on_shards_reply(void *data, redisReply *r, const char *error);

static void ask_send(cluster_t *cl) {
    const char *shards[2] = {"CLUSTER", "SHARDS"}, *slots[2] = {"CLUSTER", "SLOTS"};
    if (resp_send(cl->ask, 2, cl->shards ? shards : slots, NULL, 0,
                  on_shards_reply, cl) == RESP_ENOMEM) {
        snprintf(cl->why, sizeof(cl->why), "out of memory");
        ask_next(cl);
    }
}

static const char *cn_label(const resp_addr_t *a) {
    static char buf[sizeof(a->host) + 16];
    snprintf(buf, sizeof(buf), "%s:%d", a->host, a->port);
    return buf;
}

static void on_shards_reply(void *data, redisReply *r, const char *error) {
    cluster_t *cl = data;
    const resp_addr_t *at = &cl->cand[cl->ask_i];
    static cluster_map_t m; /* 32 kB: not on the stack */
    char why[CLUSTER_MAP_ERR_LEN];

    if (error != NULL || !cl->asking) return; /* a drop: on_ask_down goes on */
    if (r->type == REDIS_REPLY_ERROR && cl->shards && !cl->mapped &&
        (strcasestr(r->str, "SHARDS") != NULL || strcasestr(r->str, "unknown") != NULL)) {
        /* Before Redis 7.0: CLUSTER SLOTS, one call per op, classic pub/sub. */
        log_info("cluster: %s has no CLUSTER SHARDS (Redis before 7.0): one call per op, "
                 "classic pub/sub", cn_label(at));
        cl->shards = 0;
        ask_send(cl);
        return;
    }
    int rc = -1;
    if (r->type != REDIS_REPLY_ERROR)
        rc = cl->shards ? cluster_map_shards(&m, r, at->host, cl->tls, why, sizeof(why))
                        : cluster_map_slots(&m, r, at->host, why, sizeof(why));
    if (rc != 0 || m.n == 0) {
        snprintf(cl->why, sizeof(cl->why), "%.60s:%d: %.160s", at->host, at->port,
                 r->type == REDIS_REPLY_ERROR ? r->str
                 : rc != 0                    ? why
                                              : "no primary with slots");
        if (r->type != REDIS_REPLY_ERROR && rc != 0) {
            log_once_restart_if_quiet(&cl->bad_map);
            log_once(&cl->bad_map, CONF_LOG_WARN,
                     "cluster: %.60s:%d answered a map that cannot be read: %s", at->host,
                     at->port, why);
        } else {
            log_debug("cluster: %s", cl->why);
        }
        ask_next(cl);
        return;
    }
    round_end(cl, 1);
    map_apply(cl, &m);
}

static void on_ask_auth(void *data, redisReply *r, const char *error) {
    cluster_t *cl = data;
    char why[BACKEND_ERR_LEN];
    if (error != NULL) return;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, sizeof(why), "AUTH failed: %.200s", r->str);
        resp_close(cl->ask, why);
        return;
    }
    resp_ready(cl->ask);
    if (cl->asking) ask_send(cl);
}

static void on_ask_open(void *data) {
    cluster_t *cl = data;
    const char *argv[3];
    int n = 0;
    if (cl->password[0] == '\0') {
        resp_ready(cl->ask);
        if (cl->asking) ask_send(cl);
        return;
    }
    argv[n++] = "AUTH";
    if (cl->username[0] != '\0') argv[n++] = cl->username;
    argv[n++] = cl->password;
    if (resp_send(cl->ask, n, argv, NULL, RESP_F_HANDSHAKE, on_ask_auth, cl) == RESP_ENOMEM)
        resp_close(cl->ask, "out of memory");
}

static void on_ask_down(void *data, const char *why) {
    cluster_t *cl = data;
    if (cl->closing || !cl->asking) return;
    const resp_addr_t *a = &cl->cand[cl->ask_i];
    snprintf(cl->why, sizeof(cl->why), "%.60s:%d: %.160s", a->host, a->port, why);
    log_debug("cluster: %s", cl->why);
    ask_next(cl);
}

static void ask_try(cluster_t *cl) {
    if (cl->ask_i >= cl->ncand) {
        round_end(cl, 0);
        return;
    }
    const resp_addr_t *a = &cl->cand[cl->ask_i];
    if (resp_state(cl->ask) == RESP_UP && addr_eq(resp_addr(cl->ask), a)) {
        ask_send(cl);
        return;
    }
    cl->closing = 1;
    resp_close(cl->ask, "asking another node");
    cl->closing = 0;
    if (resp_open(cl->ask, a) != 0) {
        snprintf(cl->why, sizeof(cl->why), "cannot connect to %.200s:%d", a->host, a->port);
        ask_next(cl);
    }
}

/* A round: the primaries that are up, then the others, then the seeds. */
static void ask_start(cluster_t *cl) {
    if (cl->asking || cl->closed) return;
    timers_stop(cl->timers, &cl->refresh);
    cl->asking = 1;
    cl->refreshed_at = timers_now(cl->timers);
    cl->ncand = 0;
    cl->ask_i = 0;
    for (int up = 1; up >= 0; up--)
        for (size_t i = 0; i < cl->nnodes; i++)
            if (cl->nodes[i]->slots > 0 && node_up(cl->nodes[i]->nd) == up)
                cl->cand[cl->ncand++] = cl->nodes[i]->addr;
    for (size_t i = 0; i < cl->nseeds; i++) {
        resp_addr_t a;
        memset(&a, 0, sizeof(a));
        snprintf(a.host, sizeof(a.host), "%s", cl->seeds[i].host);
        a.port = cl->seeds[i].port;
        size_t j;
        for (j = 0; j < cl->ncand && !addr_eq(&cl->cand[j], &a); j++) continue;
        if (j == cl->ncand) cl->cand[cl->ncand++] = a;
    }
    /* The connection kept from the last round goes first, if it is one. */
    for (size_t i = 1; i < cl->ncand; i++) {
        if (resp_state(cl->ask) != RESP_UP || !addr_eq(resp_addr(cl->ask), &cl->cand[i])) continue;
        resp_addr_t t = cl->cand[0];
        cl->cand[0] = cl->cand[i];
        cl->cand[i] = t;
        break;
    }
    ask_try(cl);
}

static void on_refresh(timers_entry_t *t) {
    ask_start(container_of(t, cluster_t, refresh));
}

/* Reads the map again soon: now, if the last round started long enough
 * ago, else at CLUSTER_REFRESH_MIN_MS after it. */
static void refresh_soon(cluster_t *cl) {
    if (cl->closed) return;
    if (cl->asking) {
        cl->again = 1;
        return;
    }
    uint64_t at = cl->refreshed_at + CLUSTER_REFRESH_MIN_MS, now = timers_now(cl->timers);
    timers_start_at(cl->timers, &cl->refresh, at > now ? at : now, on_refresh);
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
        refresh_soon(cl);
        return;
    }
    if (cw->on != NULL) node_unwatch(cw->on->nd, cw->name, cw->len, cw->mode, cw->owner);
    cw->on = to;
    cw->lost = 0;
    cw->same = 0;
    if (to != NULL) node_watch(to->nd, cw->name, cw->len, cw->mode, cw->owner, on_cw_event, cw);
}

static void place_watches(cluster_t *cl) {
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
    refresh_soon(cn->cl);
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
    if (cw->on == NULL) refresh_soon(cl);
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
    uint32_t ask = CLUSTER_ASK_TIMEOUT_MS;
    cl->command_timeout_ms = conf->command_timeout_ms;
    cl->opts.connect_timeout_ms = conf->connect_timeout_ms;
    cl->opts.command_timeout_ms = conf->command_timeout_ms;
    cl->opts.replicas_timeout_ms = conf->replicas_timeout_ms;
    for (size_t i = 0; i < cl->nnodes; i++)
        node_set_timeouts(cl->nodes[i]->nd, conf->connect_timeout_ms, conf->command_timeout_ms,
                          conf->replicas_timeout_ms);
    resp_set_timeouts(cl->ask, ask < conf->connect_timeout_ms ? ask : conf->connect_timeout_ms,
                      ask < conf->command_timeout_ms ? ask : conf->command_timeout_ms);
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
    cl->asking = 0;
    timers_stop(cl->timers, &cl->refresh);
    timers_stop(cl->timers, &cl->retry);
    resp_free(cl->ask);
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

    uint32_t ask_ms = CLUSTER_ASK_TIMEOUT_MS;
    resp_opts_t ro = {
        .label = "cluster map",
        .connect_timeout_ms = ask_ms < conf->connect_timeout_ms ? ask_ms : conf->connect_timeout_ms,
        .command_timeout_ms = ask_ms < conf->command_timeout_ms ? ask_ms : conf->command_timeout_ms,
        .tls = env->tls,
        .tls_server_name = sni,
        .on_open = on_ask_open,
        .on_down = on_ask_down,
        .data = cl,
    };
    if ((cl->ask = resp_new(env->loop, env->timers, &ro)) == NULL) goto nomem_names;
    ask_start(cl);
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
