/* The backend interface: what the lock manager asks of Redis, whatever the topology.
 * SPDX-License-Identifier: MIT
 *
 * Redis appears nowhere above this interface. The lock manager fills in
 * backend_op_t records (acquire, release, renew, ...) and submits them; a
 * topology (standalone.c, sentinel.c, cluster.c, quorum.c, each in its
 * own file) routes them to Redis nodes, batches them per target
 * connection and calls each op's callback with its result.
 *
 * Callback rules (libuv's):
 * - every submitted op's callback fires exactly once: with Redis's answer,
 *   or with BACKEND_DOWN / BACKEND_FAILED;
 * - never before the call that submitted it returns;
 * - after backend_close() no callback fires (pending ops get BACKEND_DOWN
 *   inside it); backend_close() is never called from inside a callback of
 *   the backend it closes.
 * Ops on one name run in Redis in the order they were submitted. */
#ifndef DLOCK_BACKEND_H
#define DLOCK_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "conf/conf.h"
#include "daemon/modes.h"
#include "daemon/util/histo.h"
#include "daemon/util/timers.h"

#define BACKEND_ERR_LEN 256
#define BACKEND_UUID_MAX 40  /* a uuid's text, with room */

typedef struct backend_s backend_t;
struct node_s;
typedef struct backend_op_s backend_op_t;

typedef enum {
    BACKEND_ACQUIRE = 0,  /* take the lock or add a hold: outcome */
    BACKEND_RELEASE,      /* delete the owner's holds, wake waiters: holds, others_waiting */
    BACKEND_DROP,         /* one hold less, never deleting: holds */
    BACKEND_RENEW,        /* reset the lease if still ours: renewal */
    BACKEND_STATUS,       /* ttl_ms and the owner's holds */
    BACKEND_FORCE,        /* delete whoever holds it: removed */
    BACKEND_WHO,          /* who holds it: ttl_ms (-2 free), and *who */
    BACKEND_FENCE,        /* a quorum's own: raise the fence counter to raise_to
                             while owner holds the lock: holds 1, else 0 */
    BACKEND_INIT,         /* a kind's size or count, unless set (SEMINIT's):
                             holds 1, or 0 when it was set already */
    BACKEND_LEAVE,        /* FAIR, ELECT: the owner stops waiting: out of the queue;
                             MUTEX: the owner's daemon, out of the wake queue */
    BACKEND_LEADER,       /* ELECT: the leader now: fence (0 none) and value;
                             ttl_ms its lease left; WRONG_KIND outcome (held)
                             when the name is another kind of lock */
    BACKEND_OP_COUNT
} backend_op_type_t;

/* What kind of lock an op or a watch is about: one of daemon/modes.h's
 * list, each with Redisson's layout (scripts.c) and its own release
 * channel. A MULTI op is an ACQUIRE of many names (names, nnames); the
 * holds it makes are MUTEX ones. */
typedef enum {
#define XX(id) BACKEND_##id,
    DLOCK_MODES(XX)
#undef XX
    BACKEND_MODE_COUNT
} backend_mode_t;

typedef enum {
    BACKEND_OK = 0,
    BACKEND_DOWN,         /* not connected, the connection broke, or no answer within
                             command_timeout_ms: the op may or may not have run */
    BACKEND_FAILED,       /* Redis answered with an error: it did not run */
    BACKEND_UNACKED       /* it ran on the primary, but fewer replicas than
                             replicas_ack asked for acknowledged it in time
                             (error: "replicas: acked X of N"). Only a new
                             grant or a renewal gets it: undo the grant, count
                             the renewal as failed */
} backend_status_t;

typedef enum {
    BACKEND_GRANTED = 0,  /* a new grant: fence is set */
    BACKEND_REENTERED,    /* the owner already held it: holds is set */
    BACKEND_TAKEN,        /* someone else holds it: ttl_ms is set (-1: no expiry;
                             MUTEX -2: free, but another daemon's turn) */
    BACKEND_WRONG_KIND,   /* the name is held as another kind of lock: held says
                             which; nothing was changed */
    BACKEND_HOLD_GONE     /* SEM, base > 0: the owner's earlier permits
                             are gone (expired, forced); nothing was changed */
} backend_outcome_t;

typedef enum {
    BACKEND_GONE = 0,     /* our hold is gone (expired) */
    BACKEND_RENEWED,      /* still ours, lease reset */
    BACKEND_FORCED        /* removed by FORCEUNLOCK */
} backend_renewal_t;

typedef struct backend_result_s {
    backend_status_t status;
    const char *error;          /* status != BACKEND_OK; valid during the callback */
    backend_outcome_t outcome;  /* ACQUIRE */
    backend_renewal_t renewal;  /* RENEW */
    uint64_t fence;             /* ACQUIRE, GRANTED (SEM: the permits still
                                   available after it) */
    long long holds;            /* ACQUIRE REENTERED; RELEASE/DROP: holds left, -1 if
                                   not held; STATUS: the owner's holds */
    long long ttl_ms;           /* ACQUIRE TAKEN; STATUS: -2 free, -1 no expiry;
                                   WHO: -2 free, -3 held by no one holder */
    int removed;                /* FORCE: 1 or 0 */
    int leader;                 /* MUTEX ACQUIRE TAKEN: by an election's leader
                                   (0: by a plain lock's holder, or free and
                                   another daemon's turn) */
    int others_waiting;         /* RELEASE: the release woke waiters that are not
                                   ours (other daemons, Redisson clients) */
    backend_mode_t held;        /* ACQUIRE WRONG_KIND; STATUS (ttl_ms >= -1): what
                                   the name holds now; WHO (ttl_ms -3): the kind
                                   that has no one holder (SEM) */
    long long holders;          /* STATUS of a READ hold: how many owners read;
                                   of a SEM: the permits available */
    const char *value;          /* an op answering a value (LEADER: the
                                   leader's): value_len bytes, in op->answer */
    size_t value_len;
    size_t which;               /* MULTI ACQUIRE but GRANTED: the index of the
                                   name the outcome is about */
} backend_result_t;

/* One name of a multi-name op. */
typedef struct backend_name_s {
    const char *name;
    size_t len;
} backend_name_t;

/* The longest value an op answers (res.value; LEADER's: the protocol's
 * word). */
#define BACKEND_ANSWER_MAX 255

/* A value Redis holds (an election's, which anyone may write there) as
 * dlockd tells it, in LEADER's and LIST's lines alike: at most cap - 1
 * bytes of v into out, each byte outside 0x21-0x7E (a blank, a newline)
 * as '?', so that it stays one word of one line. A value dlockd wrote
 * (ELECT's: 0x21-0x7E only) is never changed. */
static inline void backend_clean_value(char *out, size_t cap, const char *v, size_t len) {
    if (len > cap - 1) len = cap - 1;
    for (size_t i = 0; i < len; i++)
        out[i] = (unsigned char)v[i] >= 0x21 && (unsigned char)v[i] <= 0x7e ? v[i] : '?';
    out[len] = '\0';
}

/* WHO's answer, in memory the caller gives (op->who). */
#define BACKEND_WHO_OWNER_MAX  80   /* "<uuid>:<id>", as Redisson writes it too */
#define BACKEND_WHO_DAEMON_MAX 160  /* "dlockd:<host>:<pid>" */

typedef struct backend_who_s {
    char owner[BACKEND_WHO_OWNER_MAX];   /* the holder's field, "" when free */
    char daemon[BACKEND_WHO_DAEMON_MAX]; /* its dlockd as it registered, "" if
                                            none did (Redisson, another tool) */
} backend_who_t;

/* The dlockd a WHO answer names, as it registered: its host into host
 * (cap bytes, "" when it names none) and its pid (-1 when none). Pure. */
void backend_who_daemon(const backend_who_t *w, char *host, size_t cap, long long *pid);

typedef void (*backend_op_cb)(backend_op_t *op);

/* One lock operation. The caller owns the memory (embed it) and keeps it,
 * and the name, valid until cb. */
struct backend_op_s {
    /* in */
    backend_op_type_t type;
    backend_mode_t mode;        /* the kind of lock (STATUS, FORCE and WHO: any) */
    const char *name;
    size_t len;
    uint64_t owner;             /* the lock owner's id in this daemon */
    uint32_t lease_ms;          /* ACQUIRE, RENEW */
    backend_op_cb cb;
    void *data;                 /* the caller's */
    backend_who_t *who;         /* WHO: where the answer goes */
    uint64_t raise_to;          /* FENCE */
    uint32_t count;             /* how many, as the mode's script reads it:
                                   a hold's count (a semaphore's permits to
                                   take, give back or renew), INIT's size or
                                   count */
    uint32_t base;              /* the owner's count before this op (a
                                   semaphore's ids start after it) */
    uint32_t queue_ms;          /* FAIR ACQUIRE: how long the owner's place in
                                   the queue lasts unless it asks again */
    uint32_t queue_foreign_ms;  /* FAIR ACQUIRE: ... plus this much for each
                                   place ahead that is not a dlockd's */
    int once;                   /* FAIR ACQUIRE: try, but take no place */
    int wake_leave;             /* MUTEX ACQUIRE: this daemon is in the name's
                                   wake queue (a refusal put it there): a
                                   grant takes it out */
    const char *value;          /* the op's value for its script, value_len
                                   bytes, valid until cb (ELECT ACQUIRE: the
                                   leader's value) */
    size_t value_len;
    char *answer;               /* an op answering a value (LEADER): where
                                   it goes, in memory the caller gives
                                   (BACKEND_ANSWER_MAX + 1 bytes): the reply
                                   may be gone by cb */
    const backend_name_t *names; /* MULTI ACQUIRE: every name (name, len: the
                                   first, which routes it), valid until cb */
    size_t nnames;
    const char *reentry;        /* ... a letter per name: 'r' the owner holds
                                   it already (one hold more), 'n' new */
    uint64_t *values;           /* ... GRANTED: each name's fence (new) or
                                   holds (reentry), nnames of them, in memory
                                   the caller gives */
    /* out */
    backend_result_t res;
    /* the backend's while submitted */
    backend_op_cb user_cb;      /* cb as given: backend_submit counts the op
                                   in flight until it is called */
    backend_t *submitted_to;
    STAILQ_ENTRY(backend_op_s) link;
    uint64_t queued_at;
    uint64_t deadline;          /* a topology that retries: when it gives up */
    unsigned route;             /* NODE_OP_* (node.h) */
    unsigned tries;             /* a topology that retries: sends so far */
};

/* Wake-ups for a watched name. */
typedef enum {
    BACKEND_WATCHING = 0,       /* the watch is in force (again, after a reconnect):
                                   a release may have been missed before it */
    BACKEND_RELEASED,           /* someone released the lock */
    BACKEND_PASSED              /* a release of a plain lock that named another
                                   daemon's turn (its wake queue): the
                                   others try only if it does not take the
                                   lock within command_timeout_ms */
} backend_event_t;

typedef void (*backend_watch_cb)(void *data, backend_event_t ev);
/* Availability changed (a connection came up or went down); for partial
 * topologies it may concern only some names: ask backend_available(). A
 * topology that answered an op BACKEND_DOWN calls it once the op's target
 * is back: waiters that got BACKEND_DOWN try again only then. */
typedef void (*backend_state_cb)(void *data);

/* One Redis node of a topology, for metrics; valid during the callback. */
typedef struct backend_node_info_s {
    const char *name;           /* host:port, or the Unix socket's path */
    const char *role;           /* "primary" */
    int up;                     /* its command connection is up */
    const histo_t *rtt;         /* script calls: sent to answered, in µs */
} backend_node_info_t;

typedef void (*backend_node_cb)(void *data, const backend_node_info_t *node);

/* What a topology is and promises. A topology states these of itself and
 * never lists the lock kinds: each kind's table names the bits it needs
 * (lock_kind_t.cap), so the kinds a topology offers follow. */
#define BACKEND_CAP_MONOTONIC_FENCE  0x1u  /* fences of a name never go back */
#define BACKEND_CAP_WAKEUPS          0x2u  /* watch delivers releases */
#define BACKEND_CAP_PARTIAL          0x4u  /* part of the keyspace can be down
                                              while the rest serves */
#define BACKEND_CAP_ONE_COPY         0x8u  /* a name's state lives on one primary,
                                              whose scripts' answers are the
                                              truth: what a kind needs when its
                                              state is more than one holder
                                              (counts, queues, shared holds),
                                              which a quorum's vote cannot keep */
#define BACKEND_CAP_MULTI            0x40u /* one script over many names (per node,
                                              per slot group) */

/* One topology: a table of operations, chosen once at start. */
typedef struct backend_type_s {
    const char *name;
    void (*submit)(backend_t *b, backend_op_t *op);
    /* A name has one watch at a time, of one mode (its channel); a fair
     * lock's channel is its waiter's own: owner says whose (0 for the
     * other kinds). */
    void (*watch)(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                  uint64_t owner, backend_watch_cb cb, void *data);
    void (*unwatch)(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                    uint64_t owner);
    /* name NULL: is any of it up */
    int (*available)(const backend_t *b, const char *name, size_t len);
    /* name NULL: a short description for INFO and logs; otherwise why that
     * name is unavailable. Writes at most cap bytes, NUL-terminated. */
    void (*describe)(const backend_t *b, const char *name, size_t len, char *buf,
                     size_t cap);
    /* Applies what may change while running (a reload): connect_timeout_ms,
     * command_timeout_ms, replicas_timeout_ms. */
    void (*reconfigure)(backend_t *b, const conf_t *conf);
    /* Calls cb once per node it uses now (the metrics). */
    void (*nodes)(const backend_t *b, backend_node_cb cb, void *data);
    /* Optional: how much of a lease of lease_ms the topology holds back
     * for clock drift between its servers (a quorum's); none if NULL. */
    uint32_t (*drift)(const backend_t *b, uint32_t lease_ms);
    void (*close)(backend_t *b);
    /* LIST (list.c): the nodes to SCAN into out (at most cap), how many;
     * *need: 0 to take every node's locks, or how many nodes must agree on
     * a lock (a quorum's majority). */
    size_t (*scan_nodes)(const backend_t *b, struct node_s **out, size_t cap, unsigned *need);
} backend_type_t;

/* Every topology's struct starts with this. */
struct backend_s {
    const backend_type_t *type;
    unsigned caps;              /* BACKEND_CAP_* */
    backend_state_cb on_state;  /* set with backend_on_state() */
    void *state_data;
    struct tls_ctx_s *tls;      /* shared by its connections; NULL: plain */
    uint32_t lease_max_ms;      /* the longest lease a request may ask for; 0: any */
    /* set by backend_open(), for LIST (list.c) */
    uv_loop_t *loop;
    const conf_t *conf;         /* the running configuration (command_timeout_ms) */
    char uuid[BACKEND_UUID_MAX];      /* this daemon's owner-field prefix */
    size_t inflight;            /* ops submitted and not yet answered */
    char prefix[CONF_PREFIX_MAX + 1]; /* key_prefix */
};

/* What backend_open() hands a topology's open function. */
typedef struct backend_env_s {
    uv_loop_t *loop;
    timers_t *timers;
    const conf_t *conf;
    const char *uuid;           /* owner-field prefix, made at start */
    const char *client_name;    /* CLIENT SETNAME: dlockd:<host>:<pid> */
    struct tls_ctx_s *tls;
} backend_env_t;

/* The topologies, one file each. */
backend_t *standalone_open(const backend_env_t *env, char *err, size_t errlen);
backend_t *sentinel_open(const backend_env_t *env, char *err, size_t errlen);
backend_t *cluster_open(const backend_env_t *env, char *err, size_t errlen);
backend_t *quorum_open(const backend_env_t *env, char *err, size_t errlen);

/* Opens the topology the configuration names. NULL with err on failure
 * (e.g. a TLS file that cannot be read). uuid is the daemon's owner-field
 * prefix: NULL makes a new one (a start), a live restore passes the one
 * its predecessor's holds carry in Redis. */
backend_t *backend_open(uv_loop_t *loop, timers_t *timers, const conf_t *conf, const char *uuid,
                        char *err, size_t errlen);
/* Pending ops get BACKEND_DOWN, then everything is freed. */
void backend_close(backend_t *b);

void backend_on_state(backend_t *b, backend_state_cb cb, void *data);
void backend_submit(backend_t *b, backend_op_t *op);
/* The callback op was submitted with (cb is the backend's while in flight). */
static inline backend_op_cb backend_op_cb_of(const backend_op_t *op) {
    return op->submitted_to != NULL ? op->user_cb : op->cb;
}
/* Ops submitted and not answered yet: a live restore hands over when none is. */
size_t backend_inflight(const backend_t *b);
void backend_watch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                   uint64_t owner, backend_watch_cb cb, void *data);
void backend_unwatch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                     uint64_t owner);
int backend_available(const backend_t *b, const char *name, size_t len);
void backend_describe(const backend_t *b, const char *name, size_t len, char *buf,
                      size_t cap);
void backend_nodes(const backend_t *b, backend_node_cb cb, void *data);
void backend_reconfigure(backend_t *b, const conf_t *conf);
/* A lock of lease_ms holds for lease_ms minus this after Redis confirmed
 * it (as of when the op was sent): the topology's clock drift allowance. */
uint32_t backend_drift(const backend_t *b, uint32_t lease_ms);
/* For topologies: tell the lock manager that availability changed. */
void backend_notify_state(backend_t *b);

#endif
