/* What cluster.c and cluster_refresh.c share of the Cluster topology: its structs and calls.
 * SPDX-License-Identifier: MIT
 *
 * Backend-internal: backend_open() calls cluster_open() (backend.h).
 * cluster.c routes the ops (the retry loop between the lock manager and
 * the nodes: MOVED, ASK, ops parked until the map moves on) and the
 * watches; cluster_refresh.c reads the slot map, of the known nodes and
 * the seeds, and applies it: the nodes, the slots, the registry. */
#ifndef DLOCK_CLUSTER_INTERNAL_H
#define DLOCK_CLUSTER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/cluster_map.h"
#include "daemon/backend/keys.h"
#include "daemon/backend/node.h"
#include "daemon/backend/resp.h"
#include "daemon/log.h"
#include "daemon/util/hmap.h"
#include "daemon/util/timers.h"

/* Primaries (and ASK targets) known at once: as many as a map names. */
#define CLUSTER_NODES_MAX      CLUSTER_MAP_NODES_MAX

typedef struct cluster_s cluster_t;

typedef struct cnode_s {
    cluster_t *cl;
    node_t *nd;
    resp_addr_t addr;
    char label[CONF_STR_MAX + 16];
    int slots;                /* slots it owns in the map */
    uint64_t used_at;         /* last sent to, or named by the map */
} cnode_t;

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

/* ---- the map (cluster_refresh.c) ----------------------------------------------------- */

/* The map's connection, and the first round; -1 on no memory. */
int cluster_refresh_open(cluster_t *cl, const backend_env_t *env);
void cluster_refresh_reconfigure(cluster_t *cl, const conf_t *conf);
/* Ends the rounds and frees the connection (closing). */
void cluster_refresh_close(cluster_t *cl);
/* Reads the map again soon: now, if the last round started long enough
 * ago, else at CLUSTER_REFRESH_MIN_MS after it. */
void cluster_refresh_soon(cluster_t *cl);
/* The node at a, made if new; NULL when CLUSTER_NODES_MAX are known. */
cnode_t *cluster_node_get(cluster_t *cl, const resp_addr_t *a);
/* A map's address as a connection's. */
resp_addr_t cluster_resp_addr(const cluster_map_addr_t *m);

/* ---- routing (cluster.c) ---------------------------------------------------------- */

/* A new map: every name that waits goes again now. */
void cluster_retry_all(cluster_t *cl);
/* A new map: each watch goes to its slot's primary. */
void cluster_place_watches(cluster_t *cl);

#endif
