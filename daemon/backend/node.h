/* One Redis node: its command and pub/sub connections, handshake, scripts, batches and subscriptions.
 * SPDX-License-Identifier: MIT
 *
 * The building block of every topology: standalone is one node; Sentinel
 * is one node whose address moves; Cluster and a quorum hold many. A node
 * reconnects by itself with a backoff, loads the scripts in its handshake,
 * gathers the ops submitted during one loop iteration and sends them,
 * before the loop polls, in as few script calls as their order allows.
 * Callback rules are those of backend.h. */
#ifndef DLOCK_NODE_H
#define DLOCK_NODE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/resp.h"
#include "daemon/util/timers.h"

/* Reconnect backoff: doubles from MIN up to MAX. */
#define NODE_BACKOFF_MIN_MS 50
#define NODE_BACKOFF_MAX_MS 1000
/* How often ROLE is asked while up: whether the node is still the primary,
 * and how many replicas it has (replicas_ack = auto). */
#define NODE_ROLE_POLL_MS   1000

typedef struct node_s node_t;

/* backend_op_t.route: how a topology wants an op sent. */
#define NODE_OP_SINGLE 0x1u  /* alone, its keys declared: Redis routes it and
                                answers MOVED, ASK or TRYAGAIN as a whole
                                (else, on a Cluster node, its keys are
                                checked one by one inside the script) */
#define NODE_OP_ASKING 0x2u  /* ASKING before it: the slot is being imported */
#define NODE_OP_SENT   0x4u  /* set by the node once it went to Redis: an op
                                failed BACKEND_DOWN without it never ran */

typedef struct node_opts_s {
    const char *label;            /* where it is, without credentials, for logs */
    resp_addr_t addr;
    const char *username;         /* "" for none */
    const char *password;         /* "" for none */
    int db;
    const char *key_prefix;
    const char *uuid;             /* owner-field prefix of this daemon */
    const char *client_name;      /* CLIENT SETNAME */
    uint32_t connect_timeout_ms;
    uint32_t command_timeout_ms;
    tls_ctx_t *tls;               /* NULL: plain */
    const char *tls_server_name;
    uint32_t register_every_ms;   /* the registry entry (WHO) is refreshed this
                                     often, and on every connect; 0: never */
    int replicas_ack;             /* CONF_REPLICAS_AUTO, 0 (no WAIT) or N */
    uint32_t replicas_timeout_ms; /* WAIT's timeout */
    /* Managed: the node never reconnects by itself, and it is up only while
     * ROLE says it is the primary. When a connection goes down, or Redis
     * says it is no longer the primary (ROLE, -READONLY, -LOADING,
     * -MASTERDOWN), it calls on_lost; its owner finds out where the
     * primary is and calls node_connect(). Unmanaged: it reconnects to the
     * same address with a backoff. */
    int managed;
    unsigned script_flags;        /* SCRIPTS_F_*: a Cluster node's layout and
                                     pub/sub (SSUBSCRIBE with SCRIPTS_F_SHARDED) */
    /* Set: every op's result goes here instead of to op->cb (a topology
     * that retries); it calls op->cb itself. */
    void (*on_done)(void *data, backend_op_t *op);
    /* Set: Redis ended a watch on its own (a sharded channel's slot moved
     * away: an unsolicited sunsubscribe). The watch stays wanted but idle;
     * the owner moves it (node_unwatch here, node_watch elsewhere) or
     * watches here again. watch_data is what node_watch was given. */
    void (*on_watch_lost)(void *data, void *watch_data);
    void (*on_lost)(void *data, const char *why);
    void (*on_state)(void *data); /* the command connection went up or down */
    void *data;
} node_opts_t;

/* The options every topology's nodes share, from env and its configuration
 * (open.c): credentials, db, key prefix, uuid, client name, timeouts, TLS
 * and its server name, registry refreshes every renew_every_ms,
 * replicas_ack. The rest is zero: the topology sets the address, label,
 * callbacks and what else differs. The strings are env's and its conf's. */
void backend_node_opts(const backend_env_t *env, node_opts_t *out);

/* Strings in opts are copied. Starts connecting at once. */
node_t *node_new(uv_loop_t *loop, timers_t *timers, const node_opts_t *opts);
/* Pending ops get BACKEND_DOWN inside; no callback fires afterwards. Not
 * from inside one of the node's own callbacks. */
void node_free(node_t *nd);

/* Managed nodes: connects whatever is down to addr; when addr is not where
 * the node was, the connections that were up close first ("why"), so ops in
 * flight get BACKEND_DOWN. Never calls back before it returns. */
void node_connect(node_t *nd, const resp_addr_t *addr, const char *why);
const resp_addr_t *node_addr(const node_t *nd);

/* New timeouts (a reload): the next connects and commands get them; WAIT
 * waits replicas_timeout_ms from its next batch on. */
void node_set_timeouts(node_t *nd, uint32_t connect_ms, uint32_t command_ms,
                       uint32_t replicas_ms);

/* Registry refreshes (WHO) every every_ms, and now; 0 stops them. */
void node_set_register(node_t *nd, uint32_t every_ms);

/* Queues op; it goes out before the loop polls, with the others queued in
 * this iteration. op->route says how (NODE_OP_*). */
void node_submit(node_t *nd, backend_op_t *op);
/* One plain command on the command connection (a read, never lock
 * state); it goes ahead of ops still queued. 0, or -1 when the node is
 * not up or out of memory (cb never fires); otherwise cb fires once,
 * never before this returns. */
int node_command(node_t *nd, int argc, const char **argv, const size_t *argvlen,
                 resp_reply_cb cb, void *data);
/* Subscribes to the release channel of name's mode (keys.h). */
void node_watch(node_t *nd, const char *name, size_t len, backend_mode_t mode, uint64_t owner,
                backend_watch_cb cb, void *data);
void node_unwatch(node_t *nd, const char *name, size_t len, backend_mode_t mode,
                  uint64_t owner);
/* 1 while the command connection is up (handshake done). */
int node_up(const node_t *nd);
/* What the metrics show of it; role as the topology names it. */
void node_info(const node_t *nd, const char *role, backend_node_cb cb, void *data);
/* "redis not connected: <why>", or "redis connected". */
void node_why_down(const node_t *nd, char *buf, size_t cap);
const char *node_label(const node_t *nd);

#endif
