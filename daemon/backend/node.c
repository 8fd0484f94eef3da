/* One Redis node: its connections, their reconnects and the handshake (batches: node_batch.c;
 * subscriptions: node_watch.c).
 * SPDX-License-Identifier: MIT */
#include "node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/keys.h"
#include "daemon/backend/node_internal.h"
#include "daemon/backend/scripts.h"
#include "daemon/log.h"
#include "daemon/util/buf.h"
#include "daemon/util/hmap.h"
#include "daemon/util/util.h"

#define HS_ROLE (-2)          /* hs_t.script of the ROLE step */

static void conn_start(nconn_t *nc);

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
        node_watch_resubscribe(nd);
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
        argv[2] = scripts_text((script_id_t)i);
        argvlen[2] = strlen(scripts_text((script_id_t)i));
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
        node_watch_conn_lost(nd);
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
        .on_push = is_sub ? node_watch_on_push : NULL,
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
    keys_wake_id(nd->wake_id, nd->uuid);
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
    node_batch_flush_queue(nd);
    resp_free(CMD(nd)->c);
    resp_free(SUB(nd)->c);
    /* Callbacks run by resp_free may have submitted more (a cancelled
     * acquire's undo, say): they fail too, until nothing is left. */
    while (!STAILQ_EMPTY(&nd->queue)) node_batch_flush_queue(nd);
    timers_stop(nd->timers, &CMD(nd)->retry);
    timers_stop(nd->timers, &SUB(nd)->retry);
    timers_stop(nd->timers, &nd->role_poll);
    timers_stop(nd->timers, &nd->register_beat);
    uv_close((uv_handle_t *)nd->flusher, on_flusher_close);
    node_watch_free_all(nd);
    hmap_free(&nd->subs);
    buf_free(&nd->scratch);
    free(nd);
}
