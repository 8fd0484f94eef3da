/* What node.c, node_batch.c and node_watch.c share of one Redis node: its struct and their calls.
 * SPDX-License-Identifier: MIT
 *
 * Backend-internal: topologies use node.h. node.c owns the connections,
 * their reconnects and the handshake; node_batch.c the queue of ops, their
 * script calls and the WAIT per batch; node_watch.c the subscriptions. */
#ifndef DLOCK_NODE_INTERNAL_H
#define DLOCK_NODE_INTERNAL_H

#include <string.h>

#include "daemon/backend/keys.h"
#include "daemon/backend/node.h"
#include "daemon/backend/scripts.h"
#include "daemon/log.h"
#include "daemon/util/buf.h"
#include "daemon/util/hmap.h"
#include "daemon/util/util.h"

/* Handshake commands on one connection at most: AUTH, SELECT, CLIENT
 * SETNAME, ROLE, and a SCRIPT LOAD per script. */
#define HS_MAX (4 + SCRIPT_COUNT)

typedef struct nconn_s nconn_t;

/* One handshake command in flight. */
typedef struct hs_s {
    nconn_t *nc;
    int script;               /* the script it loads, or -1 */
    int optional;             /* its failure does not fail the handshake */
} hs_t;

struct nconn_s {
    node_t *nd;
    resp_conn_t *c;
    const char *role;         /* "command" or "pubsub" */
    int is_sub;
    timers_entry_t retry;     /* reconnect backoff */
    uint32_t backoff_ms;
    int left;                 /* handshake replies still to come */
    int hs_failed;            /* Redis refused the handshake (said at error level) */
    log_once_t down;          /* the outage: said once, summed up, ended in conn_up */
    int was_up;               /* it came up since it last went down */
    hs_t hs[HS_MAX];
};

STAILQ_HEAD(op_list_s, backend_op_s);
TAILQ_HEAD(sub_list_s, sub_s);

struct node_s {
    uv_loop_t *loop;
    timers_t *timers;
    node_opts_t opts;         /* strings point into the copies below */
    char label[CONF_STR_MAX + 32];
    char username[CONF_STR_MAX];
    char password[CONF_STR_MAX];
    char key_prefix[CONF_PREFIX_MAX + 1];
    char uuid[KEYS_UUID_LEN + 1];
    char wake_id[KEYS_WAKE_LEN + 1]; /* the number a release names us by */
    char client_name[CONF_STR_MAX];
    char tls_name[CONF_STR_MAX];

    nconn_t conn[2];          /* command, pub/sub */
    char sha[SCRIPT_COUNT][SCRIPTS_SHA_LEN + 1];
    char down_reason[BACKEND_ERR_LEN];

    struct op_list_s queue;   /* submitted, not yet sent */
    buf_t scratch;            /* a call being formatted; keeps the room the
                                 largest batch needed */
    uv_prepare_t *flusher;    /* sends the queue before the loop polls */
    hmap_t subs;
    struct sub_list_s confirms; /* watches already in force, to confirm */
    int replicas;             /* online replicas by the last ROLE; -1 unknown */
    histo_t rtt;              /* script calls, sent to answered */
    int waits;                /* WAITs in flight */
    timers_entry_t role_poll;
    timers_entry_t register_beat; /* refreshes our registry entry */
    int connecting;           /* inside node_connect */
    int not_primary_said;     /* "not the primary" was logged since it was up */
    int freeing;
};

#define CMD(nd) (&(nd)->conn[0])
#define SUB(nd) (&(nd)->conn[1])

/* Redis says it is not (or not yet) a primary that takes writes: the
 * signs of a failover. */
static inline int failover_sign(const char *err) {
    return strncmp(err, "READONLY", 8) == 0 || strncmp(err, "LOADING", 7) == 0 ||
           strncmp(err, "MASTERDOWN", 10) == 0;
}

/* ---- node_batch.c ---------------------------------------------------------- */

/* Sends everything submitted so far (node_submit's queue), in order. */
void node_batch_flush_queue(node_t *nd);
/* The queue and the watches to confirm go out before the loop polls. */
void node_batch_flush_soon(node_t *nd);

/* ---- node_watch.c ---------------------------------------------------------- */

/* A release's subscriber count, less our own subscription. */
int node_watch_others_waiting(const node_t *nd, const backend_op_t *op, int receivers);
/* Confirms the watches that were already in force when asked for. */
void node_watch_flush_confirms(node_t *nd);
/* The pub/sub connection's pushes (resp_opts_t.on_push; data is its nconn_t). */
void node_watch_on_push(void *data, redisReply *r);
/* The pub/sub connection is up: subscribes again to the wanted channels. */
void node_watch_resubscribe(node_t *nd);
/* The pub/sub connection went down: every subscription is idle again, and
 * those no longer wanted go. */
void node_watch_conn_lost(node_t *nd);
/* node_free: frees every subscription (not the map itself). */
void node_watch_free_all(node_t *nd);

#endif
