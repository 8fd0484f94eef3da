/* The Cluster slot map: asked of known nodes and seeds, applied; its nodes made and retired.
 * SPDX-License-Identifier: MIT
 *
 * One round asks CLUSTER SHARDS (CLUSTER SLOTS before Redis 7.0) of the
 * primaries that are up, then the others, then the seeds, on a connection
 * of its own ("cluster map"), kept from one round to the next, until one
 * answers a map it can read (cluster_map.c). A round starts every
 * CLUSTER_REFRESH_MS, and soon (at most every CLUSTER_REFRESH_MIN_MS)
 * when cluster.c asks (cluster_refresh_soon(): a MOVED, a CLUSTERDOWN, a
 * primary lost, a watch Redis ended). Applying a map makes a node.c node
 * for each primary it names, points the slots at them, keeps our WHO
 * entry on the registry's primary only, moves the watches whose slot
 * changed hands, and retires the nodes it no longer names after
 * CLUSTER_RETIRE_MS; then every op that waited goes again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon/backend/cluster_internal.h"
#include "daemon/backend/scripts.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

/* Connect and answer, per node asked for the map. */
#define CLUSTER_ASK_TIMEOUT_MS 1000
/* The map is read again this often, whatever happens. */
#define CLUSTER_REFRESH_MS     1000
/* ... and at most this often when something asks for it sooner. */
#define CLUSTER_REFRESH_MIN_MS 100
/* A node the map no longer names stays this long (ASK targets, a slot
 * moving back), then goes. */
#define CLUSTER_RETIRE_MS      10000

/* ---- nodes ----------------------------------------------------------------- */

static int addr_eq(const resp_addr_t *a, const resp_addr_t *b) {
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

resp_addr_t cluster_resp_addr(const cluster_map_addr_t *m) {
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

cnode_t *cluster_node_get(cluster_t *cl, const resp_addr_t *a) {
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

/* ---- the map ---------------------------------------------------------------- */

/* Makes m the map: nodes for its primaries, slots pointing at them;
 * nodes no longer named go after CLUSTER_RETIRE_MS. */
static void map_apply(cluster_t *cl, const cluster_map_t *m) {
    cnode_t *by[CLUSTER_NODES_MAX];
    uint64_t now = timers_now(cl->timers);
    size_t covered = 0, moved = 0;
    unsigned first = 0;
    const cnode_t *was = NULL, *now_on = NULL;
    for (size_t i = 0; i < m->n; i++) {
        resp_addr_t a = cluster_resp_addr(&m->addr[i]);
        by[i] = cluster_node_get(cl, &a);
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
    cluster_place_watches(cl);
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
    cluster_retry_all(cl);
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

void cluster_refresh_soon(cluster_t *cl) {
    if (cl->closed) return;
    if (cl->asking) {
        cl->again = 1;
        return;
    }
    uint64_t at = cl->refreshed_at + CLUSTER_REFRESH_MIN_MS, now = timers_now(cl->timers);
    timers_start_at(cl->timers, &cl->refresh, at > now ? at : now, on_refresh);
}

/* ---- the map's connection --------------------------------------------------------- */

int cluster_refresh_open(cluster_t *cl, const backend_env_t *env) {
    const conf_t *conf = env->conf;
    const char *sni = cl->sni[0] ? cl->sni : NULL;
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
    if ((cl->ask = resp_new(env->loop, env->timers, &ro)) == NULL) return -1;
    ask_start(cl);
    return 0;
}

void cluster_refresh_reconfigure(cluster_t *cl, const conf_t *conf) {
    uint32_t ask = CLUSTER_ASK_TIMEOUT_MS;
    resp_set_timeouts(cl->ask, ask < conf->connect_timeout_ms ? ask : conf->connect_timeout_ms,
                      ask < conf->command_timeout_ms ? ask : conf->command_timeout_ms);
}

void cluster_refresh_close(cluster_t *cl) {
    cl->asking = 0;
    timers_stop(cl->timers, &cl->refresh);
    resp_free(cl->ask);
}
