/* One Redis node: connections, handshake, batched script calls, subscriptions.
 * SPDX-License-Identifier: MIT */
#include "node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon/backend/keys.h"
#include "daemon/backend/scripts.h"
#include "daemon/log.h"
#include "daemon/util/buf.h"
#include "daemon/util/hmap.h"
#include "daemon/util/util.h"

/* Handshake commands on one connection at most: AUTH, SELECT, CLIENT
 * SETNAME, ROLE, and a SCRIPT LOAD per script. */
#define HS_MAX (4 + SCRIPT_COUNT)

#define HS_ROLE (-2)          /* hs_t.script of the ROLE step */

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

typedef struct wgroup_s wgroup_t;

/* One script call in flight. */
typedef struct call_s {
    node_t *nd;
    script_id_t script;
    int retried;              /* sent again after NOSCRIPT */
    wgroup_t *wg;             /* the WAIT that confirms it, or NULL */
    STAILQ_ENTRY(call_s) wlink;
    uint64_t sent_ns;         /* for the round-trip histogram */
    char **errs;              /* copies of the ops' error texts while the call
                                 waits for WAIT (the reply is gone by then) */
    size_t n;
    backend_op_t *ops[];
} call_t;

/* The calls one WAIT confirms: those sent in one flush before it. Their
 * replies come before WAIT's; the ones that ran wait here for it. */
struct wgroup_s {
    node_t *nd;
    int need;                 /* replicas asked for */
    STAILQ_HEAD(, call_s) calls;
};

typedef enum {
    SUB_IDLE = 0,
    SUB_SUBSCRIBING,
    SUB_ACTIVE,
    SUB_UNSUBSCRIBING
} sub_state_t;

typedef struct sub_s {
    hmap_node_t node;         /* keyed by the channel name */
    sub_state_t state;
    int want;                 /* the lock manager wants it */
    int confirming;           /* on the confirm list */
    backend_watch_cb cb;
    void *data;
    TAILQ_ENTRY(sub_s) confirm;
    size_t len;
    char channel[];
} sub_t;

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

static void conn_start(nconn_t *nc);
static void send_subscribe(node_t *nd, sub_t *s);
static void flush_queue(node_t *nd);
static void flush_soon(node_t *nd);

/* ---- ops ------------------------------------------------------------------ */

/* An op's result goes to its owner: the topology's hook, or the op's own
 * callback. */
static void op_done(node_t *nd, backend_op_t *op) {
    if (nd->opts.on_done != NULL) nd->opts.on_done(nd->opts.data, op);
    else op->cb(op);
}

static void op_fail(node_t *nd, backend_op_t *op, backend_status_t status, const char *why) {
    memset(&op->res, 0, sizeof(op->res));
    op->res.status = status;
    op->res.error = why;
    op_done(nd, op);
}

static void ops_fail(node_t *nd, backend_op_t *const *ops, size_t n, backend_status_t status,
                     const char *why) {
    for (size_t i = 0; i < n; i++) op_fail(nd, ops[i], status, why);
}

static sub_t *sub_find(const node_t *nd, const char *channel, size_t len) {
    hmap_node_t *h = hmap_get(&nd->subs, channel, len);
    return h ? container_of(h, sub_t, node) : NULL;
}

/* The channel a watch of name listens to: its kind's, and a fair lock
 * waiter's own (Redisson's RFairLock wakes only the queue's head):
 * "redisson_lock__channel:{key}:<uuid>:<owner>". out has KEYS_CHANNEL_MAX. */
static size_t channel_of(const node_t *nd, char *out, const char *name, size_t len,
                         backend_mode_t mode, uint64_t owner) {
    char key[KEYS_KEY_MAX];
    size_t klen = keys_lock(key, nd->key_prefix, name, len);
    static const char *const kinds[BACKEND_MODE_COUNT] = {
        [BACKEND_MUTEX] = KEYS_CHANNEL, [BACKEND_READ] = KEYS_RW_CHANNEL,
        [BACKEND_WRITE] = KEYS_RW_CHANNEL, [BACKEND_SEM] = KEYS_SEM_CHANNEL,
        [BACKEND_FAIR] = KEYS_CHANNEL,
    };
    size_t n = keys_companion(out, kinds[mode], key, klen);
    if (mode == BACKEND_FAIR) {
        out[n++] = ':';
        n += keys_owner_field(out + n, nd->uuid, owner);
    }
    return n;
}

/* A release's subscriber count, less our own subscription (to the channel
 * of the op's kind of lock). */
static int others_waiting(const node_t *nd, const backend_op_t *op, int receivers) {
    char channel[KEYS_CHANNEL_MAX];
    /* A fair lock's release wakes one waiter, whoever's: never a reason
     * to hold ours back (Redis keeps the order). */
    if (op->mode == BACKEND_FAIR) return 0;
    size_t clen = channel_of(nd, channel, op->name, op->len, op->mode, 0);
    const sub_t *s = sub_find(nd, channel, clen);
    int own = s != NULL && s->state == SUB_ACTIVE;
    return receivers > own;
}

/* Formats call and queues it on the command connection; -1 on no memory
 * (nothing queued, no callback). Refused, resp calls on_call_reply later
 * with the error. */
static void on_call_reply(void *data, redisReply *r, const char *error);

static void on_asking(void *data, redisReply *r, const char *error) {
    (void)data; /* the command after it answers for both */
    (void)r;
    (void)error;
}

static int call_send(node_t *nd, call_t *call) {
    buf_clear(&nd->scratch);
    int rc = -1;
    if (call->n == 1 && (call->ops[0]->route & NODE_OP_ASKING)) {
        const char *argv[1] = {"ASKING"};
        if (resp_send(CMD(nd)->c, 1, argv, NULL, 0, on_asking, NULL) == RESP_ENOMEM) return -1;
    }
    for (size_t i = 0; i < call->n; i++) call->ops[i]->route |= NODE_OP_SENT;
    if (scripts_format(&nd->scratch, call->script, nd->sha[call->script], call->ops, call->n,
                       nd->key_prefix, nd->uuid, nd->opts.script_flags) == 0)
        rc = resp_send_raw(CMD(nd)->c, buf_start(&nd->scratch), nd->scratch.len, 0,
                           on_call_reply, call) == RESP_ENOMEM ? -1 : 0;
    buf_clear(&nd->scratch); /* its room is kept for the next call */
    return rc;
}

/* A reload after NOSCRIPT: the same text gives the same SHA1, so only a
 * failure is worth a word. */
static void on_reload(void *data, redisReply *r, const char *error) {
    const node_t *nd = data;
    if (error == NULL && r->type == REDIS_REPLY_STRING) return;
    log_warn("redis %s: SCRIPT LOAD failed: %s", nd->label,
             error ? error : r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
}

static void call_free(call_t *call) {
    if (call->errs != NULL) {
        for (size_t i = 0; i < call->n; i++) free(call->errs[i]);
        free(call->errs);
    }
    free(call);
}

/* The ops' error texts point into the reply, which is freed when its
 * callback returns: a call that waits for WAIT keeps copies. -1 on no
 * memory (nothing changed). */
static int keep_errors(call_t *call) {
    size_t i;
    for (i = 0; i < call->n; i++)
        if (call->ops[i]->res.status != BACKEND_OK && call->ops[i]->res.error != NULL) break;
    if (i == call->n) return 0;
    if ((call->errs = calloc(call->n, sizeof(call->errs[0]))) == NULL) return -1;
    for (i = 0; i < call->n; i++) {
        backend_result_t *res = &call->ops[i]->res;
        if (res->status == BACKEND_OK || res->error == NULL) continue;
        if ((call->errs[i] = strdup(res->error)) == NULL) return -1;
        res->error = call->errs[i];
    }
    return 0;
}

/* Calls back the ops of a call that ran. */
static void call_done(node_t *nd, call_t *call) {
    for (size_t i = 0; i < call->n; i++) {
        backend_op_t *op = call->ops[i];
        if (op->kind == BACKEND_RELEASE && op->res.status == BACKEND_OK)
            op->res.others_waiting = others_waiting(nd, op, op->res.others_waiting);
        op_done(nd, op);
    }
}

/* Redis says it is not (or not yet) a primary that takes writes: the
 * signs of a failover. */
static int failover_sign(const char *err) {
    return strncmp(err, "READONLY", 8) == 0 || strncmp(err, "LOADING", 7) == 0 ||
           strncmp(err, "MASTERDOWN", 10) == 0;
}

static void wait_send(node_t *nd, wgroup_t *wg);
static int needs_ack(const backend_op_t *op);

/* Turns the ops that failed with a failover sign into BACKEND_DOWN; 1 if
 * any did, with the first sign's text in why. */
static int sign_in_ops(call_t *call, char *why, size_t cap) {
    int found = 0;
    for (size_t i = 0; i < call->n; i++) {
        backend_result_t *res = &call->ops[i]->res;
        if (res->status != BACKEND_FAILED || res->error == NULL || !failover_sign(res->error))
            continue;
        if (!found) snprintf(why, cap, "%s", res->error);
        res->status = BACKEND_DOWN;
        found = 1;
    }
    return found;
}

static void on_call_reply(void *data, redisReply *r, const char *error) {
    call_t *call = data;
    node_t *nd = call->nd;
    char err[BACKEND_ERR_LEN];

    if (error == NULL) histo_add(&nd->rtt, (uv_hrtime() - call->sent_ns) / 1000);

    if (error != NULL) {
        ops_fail(nd, call->ops, call->n, BACKEND_DOWN, error);
    } else if (r->type == REDIS_REPLY_ERROR && nd->opts.managed && failover_sign(r->str)) {
        /* It did not run. The node is no longer the primary: drop it and
         * let the owner find the new one; waiters try again there. */
        snprintf(err, sizeof(err), "%s", r->str);
        ops_fail(nd, call->ops, call->n, BACKEND_DOWN, err);
        call_free(call);
        log_warn("redis %s: %s: looking for the primary again", nd->label, err);
        resp_close(CMD(nd)->c, err);
        return;
    } else if (r->type == REDIS_REPLY_ERROR) {
        if (strncmp(r->str, "NOSCRIPT", 8) == 0 && !call->retried && node_up(nd)) {
            /* Scripts were flushed: load this one again, then resend. Both
             * go down the same connection, so the load runs first. */
            const char *argv[3] = {"SCRIPT", "LOAD", scripts_text[call->script]};
            size_t argvlen[3] = {6, 4, strlen(scripts_text[call->script])};
            log_warn("redis %s lost our scripts (NOSCRIPT): loading them again", nd->label);
            call->retried = 1;
            if (resp_send(CMD(nd)->c, 3, argv, argvlen, 0, on_reload, nd) == RESP_ENOMEM)
                log_warn("redis %s: out of memory reloading scripts", nd->label);
            if (call_send(nd, call) == 0) {
                /* Its WAIT went before it: it gets one of its own. */
                if (call->wg != NULL) {
                    wgroup_t *wg = malloc(sizeof(*wg));
                    if (wg != NULL) {
                        wg->nd = nd;
                        wg->need = call->wg->need;
                        STAILQ_INIT(&wg->calls);
                        wait_send(nd, wg);
                    }
                    call->wg = wg; /* NULL: unconfirmed, as with replicas_ack 0 */
                }
                return;
            }
            ops_fail(nd, call->ops, call->n, BACKEND_FAILED, "out of memory");
            call_free(call);
            return;
        }
        ops_fail(nd, call->ops, call->n, BACKEND_FAILED, r->str);
    } else if (scripts_decode(call->script, call->ops, call->n, r, err, sizeof(err)) != 0) {
        ops_fail(nd, call->ops, call->n, BACKEND_FAILED, err);
    } else if (nd->opts.managed && sign_in_ops(call, err, sizeof(err))) {
        /* An op of the batch met READONLY (or LOADING, MASTERDOWN): the
         * node is no longer the primary. Those ops did not run: they fail
         * as DOWN, so that releases are retried and waiters wait, on the
         * primary the owner finds next. The others stand. */
        call_done(nd, call);
        call_free(call);
        log_warn("redis %s: %s: looking for the primary again", nd->label, err);
        resp_close(CMD(nd)->c, err);
        return;
    } else if (call->wg != NULL) {
        if (keep_errors(call) == 0) {
            STAILQ_INSERT_TAIL(&call->wg->calls, call, wlink); /* until WAIT answers */
            return;
        }
        /* Cannot wait for WAIT: what needed it does not count. */
        for (size_t i = 0; i < call->n; i++) {
            if (!needs_ack(call->ops[i])) continue;
            call->ops[i]->res.status = BACKEND_UNACKED;
            call->ops[i]->res.error = "replicas: out of memory";
        }
        call_done(nd, call);
    } else {
        call_done(nd, call);
    }
    call_free(call);
}

/* Whether op changed the lock in a way that only counts once replicated:
 * a new grant, or a renewal. */
static int needs_ack(const backend_op_t *op) {
    if (op->res.status != BACKEND_OK) return 0;
    return (op->kind == BACKEND_ACQUIRE && op->res.outcome == BACKEND_GRANTED) ||
           (op->kind == BACKEND_RENEW && op->res.renewal == BACKEND_RENEWED);
}

static void on_wait_reply(void *data, redisReply *r, const char *error) {
    wgroup_t *wg = data;
    node_t *nd = wg->nd;
    char why[BACKEND_ERR_LEN];
    backend_status_t status = BACKEND_OK;
    call_t *call;

    nd->waits--;
    if (error != NULL) {
        /* The grants may or may not stand on the replicas */
        snprintf(why, sizeof(why), "replicas: %s", error);
        status = BACKEND_DOWN;
    } else if (r->type == REDIS_REPLY_INTEGER && r->integer >= wg->need) {
        status = BACKEND_OK;
    } else if (r->type == REDIS_REPLY_INTEGER) {
        snprintf(why, sizeof(why), "replicas: acked %lld of %d", r->integer, wg->need);
        status = BACKEND_UNACKED;
    } else {
        snprintf(why, sizeof(why), "replicas: WAIT failed: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        status = BACKEND_UNACKED;
    }
    if (status != BACKEND_OK && !STAILQ_EMPTY(&wg->calls))
        log_debug("redis %s: %s", nd->label, why);
    while ((call = STAILQ_FIRST(&wg->calls)) != NULL) {
        STAILQ_REMOVE_HEAD(&wg->calls, wlink);
        if (status != BACKEND_OK) {
            for (size_t i = 0; i < call->n; i++) {
                backend_op_t *op = call->ops[i];
                if (!needs_ack(op)) continue;
                op->res.status = status;
                op->res.error = why;
            }
        }
        call_done(nd, call);
        call_free(call);
    }
    free(wg);
    if (!STAILQ_EMPTY(&nd->queue)) flush_soon(nd);
}

/* Pipelines WAIT after the calls of wg. */
static void wait_send(node_t *nd, wgroup_t *wg) {
    char n[16], ms[16];
    const char *argv[3] = {"WAIT", n, ms};
    size_t argvlen[3] = {4, (size_t)snprintf(n, sizeof(n), "%d", wg->need),
                         (size_t)snprintf(ms, sizeof(ms), "%u", nd->opts.replicas_timeout_ms)};
    int rc = resp_send(CMD(nd)->c, 3, argv, argvlen, 0, on_wait_reply, wg);
    if (rc == RESP_ENOMEM) {
        /* Nothing will answer: settle its calls as unconfirmed. */
        on_wait_reply(wg, NULL, "out of memory");
        return;
    }
    nd->waits++;
}

/* Replicas each batch of writes must reach: 0 for no WAIT. */
static int replicas_needed(const node_t *nd) {
    if (nd->opts.replicas_ack == CONF_REPLICAS_AUTO) return nd->replicas > 0 ? 1 : 0;
    return nd->opts.replicas_ack;
}

/* Sends ops[0..n) as one script call, confirmed by wg's WAIT if not NULL. */
static void send_call(node_t *nd, backend_op_t *const *ops, size_t n, wgroup_t *wg) {
    call_t *call = zalloc(sizeof(*call) + n * sizeof(call->ops[0]));
    if (call == NULL) {
        ops_fail(nd, ops, n, BACKEND_FAILED, "out of memory");
        return;
    }
    call->nd = nd;
    call->wg = wg;
    call->n = n;
    call->sent_ns = uv_hrtime();
    memcpy(call->ops, ops, n * sizeof(ops[0]));
    /* A single op declares its keys, so that Redis routes it (MOVED, ASK). */
    call->script = scripts_choose(ops, n, ops[0]->route & NODE_OP_SINGLE
                                              ? nd->opts.script_flags & ~SCRIPTS_F_ANY_SLOT
                                              : nd->opts.script_flags);
    if (call_send(nd, call) != 0) {
        call_free(call);
        ops_fail(nd, ops, n, BACKEND_FAILED, "out of memory");
    }
}

static int batchable(const backend_op_t *op) {
    return scripts_batchable(op) && !(op->route & (NODE_OP_SINGLE | NODE_OP_ASKING));
}

/* Sends everything submitted so far, in order: runs of batchable ops go
 * together, the others alone. Ops submitted from the callbacks run here
 * wait for the next round. With replicas to wait for, one WAIT follows
 * the round's calls, and the next round waits until it is answered: under
 * a slow replica, rounds grow rather than WAITs queue up. */
static void flush_queue(node_t *nd) {
    struct op_list_s q = STAILQ_HEAD_INITIALIZER(q);
    backend_op_t *run[SCRIPTS_BATCH_MAX];
    char why[BACKEND_ERR_LEN];
    wgroup_t *wg = NULL;
    int need = 0;

    if (!nd->freeing && node_up(nd) && (need = replicas_needed(nd)) > 0) {
        if (nd->waits > 0) return; /* on_wait_reply flushes */
        int writes = 0;
        for (backend_op_t *op = STAILQ_FIRST(&nd->queue); op && !writes;
             op = STAILQ_NEXT(op, link))
            writes = op->kind != BACKEND_STATUS;
        if (writes && (wg = malloc(sizeof(*wg))) == NULL) {
            /* Unconfirmed grants would not be safe: none at all. */
            STAILQ_CONCAT(&q, &nd->queue);
            while (!STAILQ_EMPTY(&q)) {
                backend_op_t *op = STAILQ_FIRST(&q);
                STAILQ_REMOVE_HEAD(&q, link);
                op_fail(nd, op, BACKEND_FAILED, "out of memory");
            }
            return;
        }
        if (wg != NULL) {
            wg->nd = nd;
            wg->need = need;
            STAILQ_INIT(&wg->calls);
        }
    }
    STAILQ_CONCAT(&q, &nd->queue);
    while (!STAILQ_EMPTY(&q)) {
        size_t n = 0;
        backend_op_t *op = STAILQ_FIRST(&q);
        int batch = batchable(op);
        do {
            STAILQ_REMOVE_HEAD(&q, link);
            run[n++] = op;
            op = STAILQ_FIRST(&q);
        } while (batch && op != NULL && n < SCRIPTS_BATCH_MAX && batchable(op));
        if (nd->freeing || !node_up(nd)) {
            if (nd->freeing) snprintf(why, sizeof(why), "shutting down");
            else node_why_down(nd, why, sizeof(why));
            ops_fail(nd, run, n, BACKEND_DOWN, why);
        } else {
            send_call(nd, run, n, wg);
        }
    }
    if (wg != NULL) wait_send(nd, wg);
}

/* Watches already in force when asked for are confirmed from here, never
 * from inside node_watch. */
static void flush_confirms(node_t *nd) {
    sub_t *s;
    while ((s = TAILQ_FIRST(&nd->confirms)) != NULL) {
        TAILQ_REMOVE(&nd->confirms, s, confirm);
        s->confirming = 0;
        if (s->want && s->state == SUB_ACTIVE) s->cb(s->data, BACKEND_WATCHING);
    }
}

static void on_flush(uv_prepare_t *handle) {
    node_t *nd = handle->data;
    uv_prepare_stop(handle);
    flush_queue(nd);
    flush_confirms(nd);
    /* resp's own flusher may have run already in this iteration. */
    resp_flush(CMD(nd)->c);
    resp_flush(SUB(nd)->c);
}

static void flush_soon(node_t *nd) {
    if (!nd->freeing) uv_prepare_start(nd->flusher, on_flush);
}

void node_submit(node_t *nd, backend_op_t *op) {
    op->queued_at = timers_now(nd->timers);
    op->route &= ~NODE_OP_SENT;
    STAILQ_INSERT_TAIL(&nd->queue, op, link);
    flush_soon(nd);
}

/* ---- pub/sub ---------------------------------------------------------------- */

static void sub_delete(node_t *nd, sub_t *s) {
    if (s->confirming) TAILQ_REMOVE(&nd->confirms, s, confirm);
    hmap_del(&nd->subs, &s->node);
    free(s);
}

static int sharded(const node_t *nd) {
    return (nd->opts.script_flags & SCRIPTS_F_SHARDED) != 0;
}

static void send_subscribe(node_t *nd, sub_t *s) {
    if (resp_state(SUB(nd)->c) != RESP_UP) return; /* sent when it is up */
    const char *argv[2] = {sharded(nd) ? "SSUBSCRIBE" : "SUBSCRIBE", s->channel};
    size_t argvlen[2] = {strlen(argv[0]), s->len};
    if (resp_send(SUB(nd)->c, 2, argv, argvlen, RESP_F_NO_REPLY, NULL, NULL) == 0)
        s->state = SUB_SUBSCRIBING;
}

static void send_unsubscribe(node_t *nd, sub_t *s) {
    const char *argv[2] = {sharded(nd) ? "SUNSUBSCRIBE" : "UNSUBSCRIBE", s->channel};
    size_t argvlen[2] = {strlen(argv[0]), s->len};
    if (resp_state(SUB(nd)->c) == RESP_UP &&
        resp_send(SUB(nd)->c, 2, argv, argvlen, RESP_F_NO_REPLY, NULL, NULL) == 0) {
        s->state = SUB_UNSUBSCRIBING;
        return;
    }
    s->state = SUB_IDLE;
}

static void on_push(void *data, redisReply *r) {
    nconn_t *nc = data;
    node_t *nd = nc->nd;
    if (r->elements < 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    sub_t *s = sub_find(nd, r->element[1]->str, r->element[1]->len);
    if (s == NULL) return;
    /* Sharded: smessage, ssubscribe, sunsubscribe. */
    if ((kind[0] == 's' || kind[0] == 'S') &&
        (strcasecmp(kind + 1, "message") == 0 || strcasecmp(kind + 1, "subscribe") == 0 ||
         strcasecmp(kind + 1, "unsubscribe") == 0))
        kind++;
    if (strcasecmp(kind, "message") == 0) {
        if (s->state == SUB_ACTIVE && s->want) s->cb(s->data, BACKEND_RELEASED);
    } else if (strcasecmp(kind, "subscribe") == 0) {
        s->state = SUB_ACTIVE;
        if (!s->want) send_unsubscribe(nd, s);
        else s->cb(s->data, BACKEND_WATCHING);
    } else if (strcasecmp(kind, "unsubscribe") == 0) {
        int asked = s->state == SUB_UNSUBSCRIBING;
        s->state = SUB_IDLE;
        if (!s->want) {
            sub_delete(nd, s);
        } else if (!asked && nd->opts.on_watch_lost != NULL) {
            /* Redis ended it: the channel's slot moved away. The owner
             * knows where it went. */
            if (s->confirming) {
                TAILQ_REMOVE(&nd->confirms, s, confirm);
                s->confirming = 0;
            }
            nd->opts.on_watch_lost(nd->opts.data, s->data);
        } else {
            send_subscribe(nd, s);
        }
    }
}


void node_watch(node_t *nd, const char *name, size_t len, backend_mode_t mode, uint64_t owner,
                backend_watch_cb cb, void *data) {
    char channel[KEYS_CHANNEL_MAX];
    size_t clen = channel_of(nd, channel, name, len, mode, owner);
    sub_t *s = sub_find(nd, channel, clen);
    if (s == NULL) {
        s = zalloc(sizeof(*s) + clen + 1);
        if (s == NULL) return; /* waiters fall back to TTL-based retries */
        memcpy(s->channel, channel, clen + 1);
        s->len = clen;
        s->node.key = s->channel;
        s->node.len = clen;
        hmap_put(&nd->subs, &s->node);
    }
    s->want = 1;
    s->cb = cb;
    s->data = data;
    if (s->state == SUB_IDLE) {
        send_subscribe(nd, s);
    } else if (s->state == SUB_ACTIVE && !s->confirming) {
        s->confirming = 1;
        TAILQ_INSERT_TAIL(&nd->confirms, s, confirm);
        flush_soon(nd);
    }
    /* SUBSCRIBING: the confirmation will tell; UNSUBSCRIBING: subscribes
     * again when the unsubscribe reply arrives. */
}

void node_unwatch(node_t *nd, const char *name, size_t len, backend_mode_t mode,
                  uint64_t owner) {
    char channel[KEYS_CHANNEL_MAX];
    size_t clen = channel_of(nd, channel, name, len, mode, owner);
    sub_t *s = sub_find(nd, channel, clen);
    if (s == NULL) return;
    s->want = 0;
    if (s->confirming) {
        TAILQ_REMOVE(&nd->confirms, s, confirm);
        s->confirming = 0;
    }
    if (s->state == SUB_ACTIVE) send_unsubscribe(nd, s);
    if (s->state == SUB_IDLE) sub_delete(nd, s);
}

/* ---- connections --------------------------------------------------------- */

int node_up(const node_t *nd) {
    return resp_state(CMD(nd)->c) == RESP_UP;
}

void node_why_down(const node_t *nd, char *buf, size_t cap) {
    if (node_up(nd)) snprintf(buf, cap, "redis connected");
    else if (nd->down_reason[0] == '\0') snprintf(buf, cap, "redis not connected yet");
    else snprintf(buf, cap, "redis not connected: %s", nd->down_reason);
}

const char *node_label(const node_t *nd) {
    return nd->label;
}

void node_info(const node_t *nd, const char *role, backend_node_cb cb, void *data) {
    char name[sizeof(nd->opts.addr.host) + 16];
    const resp_addr_t *a = &nd->opts.addr;
    if (a->is_unix) snprintf(name, sizeof(name), "%s", a->host);
    else if (strchr(a->host, ':') != NULL) snprintf(name, sizeof(name), "[%s]:%d", a->host, a->port);
    else snprintf(name, sizeof(name), "%s:%d", a->host, a->port);
    backend_node_info_t info = {.name = name, .role = role, .up = node_up(nd), .rtt = &nd->rtt};
    cb(data, &info);
}

/* ROLE's answer: 1 for a primary (with *replicas set to those online),
 * 0 for anything else (role names it), -1 for an answer that is no role. */
static int role_parse(const redisReply *r, int *replicas, char *role, size_t cap) {
    snprintf(role, cap, "?");
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return -1;
    snprintf(role, cap, "%s", r->element[0]->str);
    if (strcmp(r->element[0]->str, "master") != 0) return 0;
    *replicas = r->elements >= 3 && r->element[2]->type == REDIS_REPLY_ARRAY
                    ? (int)r->element[2]->elements
                    : 0;
    return 1;
}

/* What a managed node does when it is not the primary after all. */
static void not_primary(node_t *nd, const char *role) {
    char why[BACKEND_ERR_LEN];
    snprintf(why, sizeof(why), "not the primary (ROLE says %s)", role);
    /* Once until the node is up again: the Sentinels may name it for a
     * few seconds more, and every reconnect finds it so. */
    if (!nd->not_primary_said)
        log_warn("redis %s: %s: looking for the primary again", nd->label, why);
    else
        log_debug("redis %s: %s", nd->label, why);
    nd->not_primary_said = 1;
    resp_close(CMD(nd)->c, why);
}

static void on_role_poll(timers_entry_t *t);

static void on_role_reply(void *data, redisReply *r, const char *error) {
    node_t *nd = data;
    char role[32];
    int replicas = nd->replicas;

    if (error != NULL) return; /* the connection went down: on_conn_down knows */
    int rc = role_parse(r, &replicas, role, sizeof(role));
    if (rc == 1) {
        if (replicas != nd->replicas)
            log_info("redis %s: %d replica%s online", nd->label, replicas,
                     replicas == 1 ? "" : "s");
        nd->replicas = replicas;
    } else if (rc == 0 && nd->opts.managed) {
        not_primary(nd, role);
        return;
    } else if (rc == -1 && !nd->opts.managed) {
        return; /* no ROLE here (a proxy, say): no use asking again */
    }
    if (node_up(nd)) timers_start(nd->timers, &nd->role_poll, NODE_ROLE_POLL_MS, on_role_poll);
}

static void on_role_poll(timers_entry_t *t) {
    node_t *nd = container_of(t, node_t, role_poll);
    const char *argv[1] = {"ROLE"};
    if (!node_up(nd)) return;
    if (resp_send(CMD(nd)->c, 1, argv, NULL, 0, on_role_reply, nd) == RESP_ENOMEM)
        timers_start(nd->timers, &nd->role_poll, NODE_ROLE_POLL_MS, on_role_poll);
}

/* ---- the daemons' registry (WHO) ---------------------------------------- */

static void on_register_beat(timers_entry_t *t);

static void on_register_reply(void *data, redisReply *r, const char *error) {
    node_t *nd = data;
    if (error == NULL && r->type == REDIS_REPLY_ERROR)
        log_debug("redis %s: registering for WHO failed: %s", nd->label, r->str);
}

/* Puts "dlockd:<host>:<pid>" under our uuid, so that WHO on any daemon can
 * name the host and the dlockd of a lock's holder. Once per connect and
 * per register_every_ms: never per grant. */
static void send_register(node_t *nd) {
    if (nd->opts.register_every_ms == 0 || !node_up(nd)) return;
    buf_clear(&nd->scratch);
    if (scripts_format_register(&nd->scratch, nd->sha[SCRIPT_REGISTER], nd->key_prefix, nd->uuid,
                                nd->client_name) == 0 &&
        resp_send_raw(CMD(nd)->c, buf_start(&nd->scratch), nd->scratch.len, 0,
                      on_register_reply, nd) == RESP_ENOMEM)
        log_debug("redis %s: out of memory registering for WHO", nd->label);
    buf_clear(&nd->scratch);
    timers_start(nd->timers, &nd->register_beat, nd->opts.register_every_ms, on_register_beat);
}

static void on_register_beat(timers_entry_t *t) {
    send_register(container_of(t, node_t, register_beat));
}

void node_set_register(node_t *nd, uint32_t every_ms) {
    if (nd->opts.register_every_ms == every_ms) return;
    nd->opts.register_every_ms = every_ms;
    timers_stop(nd->timers, &nd->register_beat);
    send_register(nd);
}

int node_command(node_t *nd, int argc, const char **argv, const size_t *argvlen,
                 resp_reply_cb cb, void *data) {
    if (!node_up(nd)) return -1;
    return resp_send(CMD(nd)->c, argc, argv, argvlen, 0, cb, data) == RESP_ENOMEM ? -1 : 0;
}

static void notify(node_t *nd) {
    if (nd->opts.on_state && !nd->freeing) nd->opts.on_state(nd->opts.data);
}

static void on_retry(timers_entry_t *t) {
    conn_start(container_of(t, nconn_t, retry));
}

static void conn_up(nconn_t *nc) {
    node_t *nd = nc->nd;
    resp_ready(nc->c);
    nc->was_up = 1;
    nc->backoff_ms = 0;
    if (!nc->is_sub) nd->not_primary_said = 0;
    uint64_t failures, ms;
    if (log_once_end(&nc->down, &failures, &ms))
        log_info("redis %s connection to %s is back after %llu.%llu s (%llu failure%s)", nc->role,
                 nd->label, (unsigned long long)(ms / 1000),
                 (unsigned long long)(ms % 1000 / 100), (unsigned long long)failures,
                 failures == 1 ? "" : "s");
    else
        log_info("redis %s connection to %s up", nc->role, nd->label);
    if (nc->is_sub) {
        size_t i = 0;
        for (hmap_node_t *h = hmap_next(&nd->subs, &i, NULL); h; h = hmap_next(&nd->subs, &i, h)) {
            sub_t *s = container_of(h, sub_t, node);
            if (s->want && s->state == SUB_IDLE) send_subscribe(nd, s);
        }
    } else {
        if (nd->opts.managed || nd->opts.replicas_ack == CONF_REPLICAS_AUTO)
            timers_start(nd->timers, &nd->role_poll, NODE_ROLE_POLL_MS, on_role_poll);
        send_register(nd);
        notify(nd);
    }
}

static void on_hs_reply(void *data, redisReply *r, const char *error) {
    hs_t *hs = data;
    nconn_t *nc = hs->nc;
    node_t *nd = nc->nd;
    char why[BACKEND_ERR_LEN];

    if (error != NULL) return; /* the connection went down: on_conn_down says why */
    if (hs->script == HS_ROLE && r->type != REDIS_REPLY_ERROR) {
        char role[32];
        int replicas = -1;
        int rc = role_parse(r, &replicas, role, sizeof(role));
        if (rc == 0 && nd->opts.managed) {
            not_primary(nd, role);
            return;
        }
        if (rc == 1 && replicas != nd->replicas && replicas > 0)
            log_info("redis %s: %d replica%s online", nd->label, replicas,
                     replicas == 1 ? "" : "s");
        nd->replicas = replicas;
    }
    if (r->type == REDIS_REPLY_ERROR && !hs->optional) {
        snprintf(why, sizeof(why), "handshake failed: %s", r->str);
        /* on_conn_down says it, at error level: a wrong password is no
         * passing trouble. It is retried every NODE_BACKOFF_MAX_MS for as
         * long as it lasts, said once and summed up. */
        /* LOADING, MASTERDOWN: passing trouble, said as a warning. */
        nc->hs_failed = !failover_sign(r->str);
        resp_close(nc->c, why);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR)
        log_debug("redis %s: optional handshake step failed: %s", nd->label, r->str);
    if (hs->script >= 0 && r->type == REDIS_REPLY_STRING && r->len == SCRIPTS_SHA_LEN) {
        memcpy(nd->sha[hs->script], r->str, SCRIPTS_SHA_LEN);
        nd->sha[hs->script][SCRIPTS_SHA_LEN] = '\0';
    }
    if (--nc->left == 0) conn_up(nc);
}

static void hs_send(nconn_t *nc, int argc, const char **argv, const size_t *argvlen,
                    int script, int optional) {
    hs_t *hs = &nc->hs[nc->left++];
    hs->nc = nc;
    hs->script = script;
    hs->optional = optional;
    if (resp_send(nc->c, argc, argv, argvlen, RESP_F_HANDSHAKE, on_hs_reply, hs) == RESP_ENOMEM) {
        nc->left--;
        resp_close(nc->c, "out of memory");
    }
}

/* Connected: AUTH, SELECT, CLIENT SETNAME and SCRIPT LOADs, pipelined; the
 * last reply brings the connection up. */
static void on_conn_open(void *data) {
    nconn_t *nc = data;
    node_t *nd = nc->nd;
    const char *argv[3];
    size_t argvlen[3];

    nc->left = 0;
    nc->hs_failed = 0;
    if (nd->password[0] != '\0') {
        int n = 0;
        argv[n] = "AUTH";
        argvlen[n++] = 4;
        if (nd->username[0] != '\0') {
            argv[n] = nd->username;
            argvlen[n++] = strlen(nd->username);
        }
        argv[n] = nd->password;
        argvlen[n++] = strlen(nd->password);
        hs_send(nc, n, argv, argvlen, -1, 0);
    }
    argv[0] = "CLIENT";
    argvlen[0] = 6;
    argv[1] = "SETNAME";
    argvlen[1] = 7;
    argv[2] = nd->client_name;
    argvlen[2] = strlen(nd->client_name);
    hs_send(nc, 3, argv, argvlen, -1, 1);
    if (nc->is_sub) {
        argv[0] = "PING";
        argvlen[0] = 4;
        hs_send(nc, 1, argv, argvlen, -1, 0);
        return;
    }
    char db[16];
    argv[0] = "SELECT";
    argvlen[0] = 6;
    argv[1] = db;
    argvlen[1] = (size_t)snprintf(db, sizeof(db), "%d", nd->opts.db);
    hs_send(nc, 2, argv, argvlen, -1, 0);
    /* Is it the primary, and with how many replicas? A server without ROLE
     * (a proxy, say) is taken as it is, unless Sentinel named it. */
    argv[0] = "ROLE";
    argvlen[0] = 4;
    hs_send(nc, 1, argv, argvlen, HS_ROLE, !nd->opts.managed);
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        if (!scripts_loaded((script_id_t)i, nd->opts.script_flags)) continue;
        argv[0] = "SCRIPT";
        argvlen[0] = 6;
        argv[1] = "LOAD";
        argvlen[1] = 4;
        argv[2] = scripts_text[i];
        argvlen[2] = strlen(scripts_text[i]);
        hs_send(nc, 3, argv, argvlen, i, 0);
    }
}

static void on_conn_down(void *data, const char *why) {
    nconn_t *nc = data;
    node_t *nd = nc->nd;

    if (nd->freeing) return;
    if (!nc->is_sub) snprintf(nd->down_reason, sizeof(nd->down_reason), "%s", why);
    /* Once per outage, then a summary every LOG_SUMMARY_MS while it lasts
     * (resp logs every try at debug level); conn_up says when it ends. */
    log_once(&nc->down, nc->hs_failed ? CONF_LOG_ERROR : CONF_LOG_WARN,
             "redis %s connection to %s down: %s", nc->role, nd->label, why);
    nc->hs_failed = 0;
    if (nc->is_sub) {
        /* Subscriptions died with the connection; keep the wanted ones. */
        size_t i = 0;
        hmap_node_t *h, *next;
        for (h = hmap_next(&nd->subs, &i, NULL); h != NULL; h = next) {
            next = hmap_next(&nd->subs, &i, h);
            sub_t *s = container_of(h, sub_t, node);
            s->state = SUB_IDLE;
            if (!s->want) sub_delete(nd, s);
        }
    } else if (nc->was_up && resp_state(SUB(nd)->c) != RESP_DOWN) {
        /* A lost command connection means a hung or restarted Redis: the
         * subscriptions start over too. */
        resp_close(SUB(nd)->c, "command connection lost");
    }
    nc->was_up = 0;
    if (!nc->is_sub) {
        timers_stop(nd->timers, &nd->role_poll);
        timers_stop(nd->timers, &nd->register_beat);
    }
    if (nd->opts.managed) {
        /* The owner says where to go next (node_connect). */
        if (!nc->is_sub) notify(nd);
        if (!nd->connecting && nd->opts.on_lost) nd->opts.on_lost(nd->opts.data, why);
        return;
    }
    nc->backoff_ms = nc->backoff_ms ? nc->backoff_ms * 2 : NODE_BACKOFF_MIN_MS;
    if (nc->backoff_ms > NODE_BACKOFF_MAX_MS) nc->backoff_ms = NODE_BACKOFF_MAX_MS;
    timers_start(nd->timers, &nc->retry, nc->backoff_ms, on_retry);
    if (!nc->is_sub) notify(nd);
}

static void conn_start(nconn_t *nc) {
    if (nc->nd->freeing) return;
    resp_open(nc->c, &nc->nd->opts.addr);
}

static int addr_eq(const resp_addr_t *a, const resp_addr_t *b) {
    return a->is_unix == b->is_unix && a->port == b->port && strcmp(a->host, b->host) == 0;
}

void node_connect(node_t *nd, const resp_addr_t *addr, const char *why) {
    if (nd->freeing) return;
    nd->connecting = 1;
    if (!addr_eq(addr, &nd->opts.addr)) {
        for (int i = 0; i < 2; i++)
            if (resp_state(nd->conn[i].c) != RESP_DOWN) resp_close(nd->conn[i].c, why);
        nd->opts.addr = *addr;
        nd->replicas = -1;
    }
    nd->connecting = 0;
    for (int i = 0; i < 2; i++) {
        timers_stop(nd->timers, &nd->conn[i].retry);
        if (resp_state(nd->conn[i].c) == RESP_DOWN) conn_start(&nd->conn[i]);
    }
}

void node_set_timeouts(node_t *nd, uint32_t connect_ms, uint32_t command_ms,
                       uint32_t replicas_ms) {
    nd->opts.connect_timeout_ms = connect_ms;
    nd->opts.command_timeout_ms = command_ms;
    nd->opts.replicas_timeout_ms = replicas_ms;
    for (int i = 0; i < 2; i++) resp_set_timeouts(nd->conn[i].c, connect_ms, command_ms);
}

const resp_addr_t *node_addr(const node_t *nd) {
    return &nd->opts.addr;
}

/* ---- life ------------------------------------------------------------------ */

static void on_flusher_close(uv_handle_t *handle) {
    free(handle);
}

static int conn_init(node_t *nd, nconn_t *nc, int is_sub) {
    char label[CONF_STR_MAX + 48];
    nc->nd = nd;
    nc->is_sub = is_sub;
    nc->role = is_sub ? "pubsub" : "command";
    snprintf(label, sizeof(label), "%s %s", nc->role, nd->label);
    resp_opts_t ro = {
        .label = label,
        .connect_timeout_ms = nd->opts.connect_timeout_ms,
        .command_timeout_ms = nd->opts.command_timeout_ms,
        .tls = nd->opts.tls,
        .tls_server_name = nd->tls_name[0] ? nd->tls_name : NULL,
        .on_open = on_conn_open,
        .on_down = on_conn_down,
        .on_push = is_sub ? on_push : NULL,
        .data = nc,
    };
    nc->c = resp_new(nd->loop, nd->timers, &ro);
    return nc->c ? 0 : -1;
}

#define COPY(dst, src) snprintf((dst), sizeof(dst), "%s", (src) ? (src) : "")

node_t *node_new(uv_loop_t *loop, timers_t *timers, const node_opts_t *opts) {
    node_t *nd = zalloc(sizeof(*nd));
    if (nd == NULL) return NULL;
    nd->loop = loop;
    nd->timers = timers;
    nd->opts = *opts;
    COPY(nd->label, opts->label);
    COPY(nd->username, opts->username);
    COPY(nd->password, opts->password);
    COPY(nd->key_prefix, opts->key_prefix);
    COPY(nd->uuid, opts->uuid);
    COPY(nd->client_name, opts->client_name);
    COPY(nd->tls_name, opts->tls_server_name);
    STAILQ_INIT(&nd->queue);
    TAILQ_INIT(&nd->confirms);
    nd->flusher = malloc(sizeof(*nd->flusher));
    if (nd->flusher == NULL || hmap_init(&nd->subs) != 0) {
        free(nd->flusher);
        free(nd);
        return NULL;
    }
    uv_prepare_init(loop, nd->flusher);
    nd->flusher->data = nd;
    if (conn_init(nd, CMD(nd), 0) != 0 || conn_init(nd, SUB(nd), 1) != 0) {
        if (CMD(nd)->c) resp_free(CMD(nd)->c);
        hmap_free(&nd->subs);
        uv_close((uv_handle_t *)nd->flusher, on_flusher_close);
        free(nd);
        return NULL;
    }
    nd->replicas = -1;
    if (!opts->managed) { /* a managed node waits for node_connect */
        conn_start(CMD(nd));
        conn_start(SUB(nd));
    }
    return nd;
}

void node_free(node_t *nd) {
    if (nd == NULL) return;
    /* Ops not sent yet fail first, then the ones in flight (in resp_free). */
    nd->freeing = 1;
    uv_prepare_stop(nd->flusher);
    flush_queue(nd);
    resp_free(CMD(nd)->c);
    resp_free(SUB(nd)->c);
    /* Callbacks run by resp_free may have submitted more (a cancelled
     * acquire's undo, say): they fail too, until nothing is left. */
    while (!STAILQ_EMPTY(&nd->queue)) flush_queue(nd);
    timers_stop(nd->timers, &CMD(nd)->retry);
    timers_stop(nd->timers, &SUB(nd)->retry);
    timers_stop(nd->timers, &nd->role_poll);
    timers_stop(nd->timers, &nd->register_beat);
    uv_close((uv_handle_t *)nd->flusher, on_flusher_close);
    size_t i = 0;
    hmap_node_t *h, *next;
    for (h = hmap_next(&nd->subs, &i, NULL); h != NULL; h = next) {
        next = hmap_next(&nd->subs, &i, h);
        free(container_of(h, sub_t, node));
    }
    hmap_free(&nd->subs);
    buf_free(&nd->scratch);
    free(nd);
}
