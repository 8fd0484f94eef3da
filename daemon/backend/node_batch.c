/* One Redis node's batches: a loop iteration's ops in few script calls, one WAIT per batch.
 * SPDX-License-Identifier: MIT */
#include "daemon/backend/node_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        if (op->type == BACKEND_RELEASE && op->res.status == BACKEND_OK)
            op->res.others_waiting = node_watch_others_waiting(nd, op, op->res.others_waiting);
        op_done(nd, op);
    }
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
            const char *argv[3] = {"SCRIPT", "LOAD", scripts_text(call->script)};
            size_t argvlen[3] = {6, 4, strlen(scripts_text(call->script))};
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
    return (op->type == BACKEND_ACQUIRE && op->res.outcome == BACKEND_GRANTED) ||
           (op->type == BACKEND_RENEW && op->res.renewal == BACKEND_RENEWED);
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
    if (!STAILQ_EMPTY(&nd->queue)) node_batch_flush_soon(nd);
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
void node_batch_flush_queue(node_t *nd) {
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
            writes = op->type != BACKEND_STATUS;
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
        size_t n = 0, places = 0;
        backend_op_t *op = STAILQ_FIRST(&q);
        int batch = batchable(op);
        do {
            STAILQ_REMOVE_HEAD(&q, link);
            run[n++] = op;
            places += scripts_width(op);
            op = STAILQ_FIRST(&q);
        } while (batch && op != NULL && places + scripts_width(op) <= SCRIPTS_BATCH_MAX &&
                 batchable(op));
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

static void on_flush(uv_prepare_t *handle) {
    node_t *nd = handle->data;
    uv_prepare_stop(handle);
    node_batch_flush_queue(nd);
    node_watch_flush_confirms(nd);
    /* resp's own flusher may have run already in this iteration. */
    resp_flush(CMD(nd)->c);
    resp_flush(SUB(nd)->c);
}

void node_batch_flush_soon(node_t *nd) {
    if (!nd->freeing) uv_prepare_start(nd->flusher, on_flush);
}

void node_submit(node_t *nd, backend_op_t *op) {
    op->queued_at = timers_now(nd->timers);
    op->route &= ~NODE_OP_SENT;
    STAILQ_INSERT_TAIL(&nd->queue, op, link);
    node_batch_flush_soon(nd);
}
