/* The Sentinel topology: one primary, found and followed through Redis Sentinel.
 * SPDX-License-Identifier: MIT
 *
 * It follows the Sentinel client specification:
 * - ask the Sentinels in order, each with a short timeout, for the primary
 *   of master_name (SENTINEL get-master-addr-by-name); the first that
 *   answers moves to the front of the list;
 * - connect, and check with ROLE that it is the primary: node.c does that
 *   in its handshake and every NODE_ROLE_POLL_MS (a managed node);
 * - ask again whenever the node loses a connection or Redis says READONLY,
 *   LOADING or MASTERDOWN (node.c reports them all as on_lost), after a
 *   short pause that grows while the node does not come up;
 * - follow +switch-master, which the Sentinels publish, at once: listening
 *   to every one of them, since the one that ran the failover tells first.
 * When no Sentinel answers, the primary known last is kept, and the
 * Sentinels are asked again with a backoff; that is logged once an outage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/node.h"
#include "daemon/backend/resp.h"
#include "daemon/backend/sentinel_reply.h"
#include "daemon/backend/single.h"
#include "daemon/log.h"
#include "daemon/util/util.h"

/* Connect and answer, per Sentinel asked. */
#define SENTINEL_ASK_TIMEOUT_MS 500
/* Between rounds of asking while the primary cannot be reached, and between
 * tries of the +switch-master connection: doubles from MIN up to MAX. */
#define SENTINEL_BACKOFF_MIN_MS 50
#define SENTINEL_BACKOFF_MAX_MS 1000

#define SWITCH_CHANNEL "+switch-master"

typedef struct sentinel_s sentinel_t;

/* A listener for +switch-master on one Sentinel. */
typedef struct watch_s {
    sentinel_t *st;
    resp_conn_t *c;
    resp_addr_t addr;
    timers_entry_t retry;
    uint32_t backoff_ms;
    int warned;               /* its loss was logged */
    int was_up;               /* it listened before: missed switches are possible */
} watch_t;

struct sentinel_s {
    SINGLE_FIELDS             /* node: the managed node, at the primary */
    timers_t *timers;
    conf_addr_t addrs[CONF_SENTINELS_MAX]; /* the one that answered last first */
    size_t n;
    char master[CONF_STR_MAX];
    char username[CONF_STR_MAX];
    char password[CONF_STR_MAX];
    char label[CONF_STR_MAX + 32];
    resp_addr_t primary;      /* adopted last */
    int known;                /* ... if any */

    /* asking: one round goes through the list until one answers */
    resp_conn_t *ask;
    size_t ask_i;             /* the Sentinel asked now */
    int asking;
    int closing;              /* closing ask to move on: its on_down is ours */
    timers_entry_t again;     /* the next round */
    uint32_t backoff_ms;
    int warned;               /* "no Sentinel answered" was logged */
    char why[BACKEND_ERR_LEN]; /* what the last round met */

    watch_t watch[CONF_SENTINELS_MAX]; /* one per Sentinel, in the configured order */
    int closed;
};

_Static_assert(offsetof(sentinel_t, node) == offsetof(single_t, node), "single.h's head");

#define ST(b) container_of((b), sentinel_t, base)
#define ST_CONST(b) ((const sentinel_t *)(const void *)(b))

static void ask_start(sentinel_t *st);
static void ask_try(sentinel_t *st);
static void on_again(timers_entry_t *t);

static void to_resp_addr(resp_addr_t *out, const conf_addr_t *a) {
    memset(out, 0, sizeof(*out));
    snprintf(out->host, sizeof(out->host), "%s", a->host);
    out->port = a->port;
}

static uint32_t backoff_next(uint32_t ms) {
    ms = ms ? ms * 2 : SENTINEL_BACKOFF_MIN_MS;
    return ms > SENTINEL_BACKOFF_MAX_MS ? SENTINEL_BACKOFF_MAX_MS : ms;
}

/* AUTH to a Sentinel, as the handshake of any connection to one. */
static int send_auth(const sentinel_t *st, resp_conn_t *c, resp_reply_cb cb, void *data) {
    const char *argv[3];
    int n = 0;
    argv[n++] = "AUTH";
    if (st->username[0] != '\0') argv[n++] = st->username;
    argv[n++] = st->password;
    return resp_send(c, n, argv, NULL, RESP_F_HANDSHAKE, cb, data);
}

/* ---- the primary ---------------------------------------------------------- */

/* Adopts host:port as the primary and has the node go there. */
static void adopt(sentinel_t *st, const char *host, size_t hlen, int port, const char *how) {
    resp_addr_t a;
    char why[BACKEND_ERR_LEN];
    memset(&a, 0, sizeof(a));
    snprintf(a.host, sizeof(a.host), "%.*s", (int)hlen, host);
    a.port = port;
    if (!st->known || strcmp(a.host, st->primary.host) != 0 || a.port != st->primary.port)
        log_info("sentinel %s: primary is now %s:%d (%s)", st->master, a.host, a.port, how);
    st->primary = a;
    st->known = 1;
    snprintf(why, sizeof(why), "the primary of %.100s moved to %.100s:%d", st->master, a.host, a.port);
    node_connect(st->node, &a, why);
}

/* ---- asking --------------------------------------------------------------- */

static void round_end(sentinel_t *st, int answered) {
    st->asking = 0;
    if (answered) {
        if (st->warned) log_info("sentinel: the Sentinels answer again");
        st->warned = 0;
        return;
    }
    if (!st->warned) {
        if (st->known)
            log_warn("sentinel: no Sentinel answered for %s (%s); keeping the primary %s:%d "
                     "and asking again", st->master, st->why, st->primary.host,
                     st->primary.port);
        else
            log_warn("sentinel: no Sentinel answered for %s (%s); asking again", st->master,
                     st->why);
        st->warned = 1;
    }
    if (st->known) node_connect(st->node, &st->primary, "no Sentinel answered");
    st->backoff_ms = backoff_next(st->backoff_ms);
    timers_start(st->timers, &st->again, st->backoff_ms, on_again);
}

static void ask_next(sentinel_t *st) {
    st->ask_i++;
    ask_try(st);
}

static void on_ask_reply(void *data, redisReply *r, const char *error) {
    sentinel_t *st = data;
    const conf_addr_t *s = &st->addrs[st->ask_i];
    char host[sizeof(st->primary.host)], why[BACKEND_ERR_LEN];
    int port;

    if (error != NULL || !st->asking) return; /* a drop: on_ask_down goes on */
    switch (sentinel_reply_addr(r, host, sizeof(host), &port, why, sizeof(why))) {
    case 0:
        /* The one that answered goes first next time. */
        if (st->ask_i > 0) {
            conf_addr_t first = st->addrs[st->ask_i];
            memmove(&st->addrs[1], &st->addrs[0], st->ask_i * sizeof(st->addrs[0]));
            st->addrs[0] = first;
            st->ask_i = 0;
        }
        round_end(st, 1);
        adopt(st, host, strlen(host), port, "asked the Sentinels");
        return;
    case SENTINEL_REPLY_UNKNOWN:
        snprintf(st->why, sizeof(st->why), "%.100s:%d does not know %.100s", s->host, s->port,
                 st->master);
        log_debug("sentinel: %s", st->why);
        break;
    case SENTINEL_REPLY_BAD:
        snprintf(st->why, sizeof(st->why), "%.100s:%d: %.120s", s->host, s->port, why);
        log_warn("sentinel: %s", st->why);
        break;
    default:
        snprintf(st->why, sizeof(st->why), "%.100s:%d: %.100s", s->host, s->port, why);
        log_debug("sentinel: %s", st->why);
        break;
    }
    ask_next(st);
}

static void ask_send(sentinel_t *st) {
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", st->master};
    if (resp_send(st->ask, 3, argv, NULL, 0, on_ask_reply, st) == RESP_ENOMEM) {
        snprintf(st->why, sizeof(st->why), "out of memory");
        ask_next(st);
    }
}

static void on_ask_auth(void *data, redisReply *r, const char *error) {
    sentinel_t *st = data;
    char why[BACKEND_ERR_LEN];
    if (error != NULL) return;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, sizeof(why), "AUTH failed: %.200s", r->str);
        resp_close(st->ask, why);
        return;
    }
    resp_ready(st->ask);
    if (st->asking) ask_send(st);
}

static void on_ask_open(void *data) {
    sentinel_t *st = data;
    if (st->password[0] == '\0') {
        resp_ready(st->ask);
        if (st->asking) ask_send(st);
    } else if (send_auth(st, st->ask, on_ask_auth, st) == RESP_ENOMEM) {
        resp_close(st->ask, "out of memory");
    }
}

static void on_ask_down(void *data, const char *why) {
    sentinel_t *st = data;
    if (st->closing || !st->asking) return;
    const conf_addr_t *s = &st->addrs[st->ask_i];
    snprintf(st->why, sizeof(st->why), "%.100s:%d: %.100s", s->host, s->port, why);
    log_debug("sentinel: %s", st->why);
    ask_next(st);
}

static void ask_try(sentinel_t *st) {
    if (st->ask_i >= st->n) {
        round_end(st, 0);
        return;
    }
    resp_addr_t a;
    to_resp_addr(&a, &st->addrs[st->ask_i]);
    const resp_addr_t *at = resp_addr(st->ask);
    if (resp_state(st->ask) == RESP_UP && at->port == a.port && strcmp(at->host, a.host) == 0) {
        ask_send(st);
        return;
    }
    st->closing = 1;
    resp_close(st->ask, "asking another Sentinel");
    st->closing = 0;
    if (resp_open(st->ask, &a) != 0) {
        snprintf(st->why, sizeof(st->why), "cannot connect to %.200s:%d", a.host, a.port);
        ask_next(st);
    }
}

static void ask_start(sentinel_t *st) {
    if (st->asking || st->closed) return;
    timers_stop(st->timers, &st->again);
    st->asking = 1;
    st->ask_i = 0;
    ask_try(st);
}

static void on_again(timers_entry_t *t) {
    ask_start(container_of(t, sentinel_t, again));
}

/* The node lost the primary, or it is not the primary: ask again, after a
 * pause that grows until the node is up again. */
static void on_node_lost(void *data, const char *why) {
    sentinel_t *st = data;
    if (st->closed || st->asking || timers_active(&st->again)) return;
    log_debug("sentinel: asking where the primary is (%s)", why);
    timers_start(st->timers, &st->again, st->backoff_ms ? st->backoff_ms : 1, on_again);
    st->backoff_ms = backoff_next(st->backoff_ms);
}

static void on_node_state(void *data) {
    sentinel_t *st = data;
    if (node_up(st->node)) st->backoff_ms = 0;
    backend_notify_state(&st->base);
}

/* ---- following +switch-master ------------------------------------------------ */

/* One listener per Sentinel: the one that ran a failover publishes
 * +switch-master before the others learn of it, and any of them may be
 * the one that is down. */
static void watch_start(watch_t *w);

static void on_watch_retry(timers_entry_t *t) {
    watch_start(container_of(t, watch_t, retry));
}

static void watch_subscribe(watch_t *w) {
    const char *argv[2] = {"SUBSCRIBE", SWITCH_CHANNEL};
    resp_ready(w->c);
    if (resp_send(w->c, 2, argv, NULL, RESP_F_NO_REPLY, NULL, NULL) != 0)
        resp_close(w->c, "cannot subscribe");
}

static void on_watch_auth(void *data, redisReply *r, const char *error) {
    watch_t *w = data;
    char why[BACKEND_ERR_LEN];
    if (error != NULL) return;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, sizeof(why), "AUTH failed: %.200s", r->str);
        resp_close(w->c, why);
        return;
    }
    watch_subscribe(w);
}

static void on_watch_open(void *data) {
    watch_t *w = data;
    if (w->st->password[0] == '\0') watch_subscribe(w);
    else if (send_auth(w->st, w->c, on_watch_auth, w) == RESP_ENOMEM)
        resp_close(w->c, "out of memory");
}

static void on_watch_down(void *data, const char *why) {
    watch_t *w = data;
    if (w->st->closed) return;
    if (!w->warned) {
        log_warn("sentinel: lost %s from %s:%d: %s", SWITCH_CHANNEL, w->addr.host, w->addr.port,
                 why);
        w->warned = 1;
    }
    w->backoff_ms = backoff_next(w->backoff_ms);
    timers_start(w->st->timers, &w->retry, w->backoff_ms, on_watch_retry);
}

/* "<name> <old ip> <old port> <new ip> <new port>" */
static void on_switch(sentinel_t *st, const char *msg, size_t len) {
    char buf[4 * CONF_STR_MAX], name[CONF_STR_MAX], oip[CONF_STR_MAX], nip[CONF_STR_MAX];
    int oport, nport;
    if (len >= sizeof(buf)) return;
    memcpy(buf, msg, len);
    buf[len] = '\0';
    if (sscanf(buf, "%255s %255s %d %255s %d", name, oip, &oport, nip, &nport) != 5) return;
    if (strcmp(name, st->master) != 0 || nport <= 0 || nport > 65535) return;
    adopt(st, nip, strlen(nip), nport, SWITCH_CHANNEL);
}

static void on_watch_push(void *data, redisReply *r) {
    watch_t *w = data;
    sentinel_t *st = w->st;
    if (r->elements < 3 || r->element[0]->type != REDIS_REPLY_STRING) return;
    const char *kind = r->element[0]->str;
    if (strcasecmp(kind, "subscribe") == 0) {
        if (w->warned)
            log_info("sentinel: following %s on %s:%d again", SWITCH_CHANNEL, w->addr.host,
                     w->addr.port);
        w->warned = 0;
        w->backoff_ms = 0;
        /* A switch may have come while nobody listened. */
        if (w->was_up && st->known) ask_start(st);
        w->was_up = 1;
    } else if (strcasecmp(kind, "message") == 0 && r->element[2]->type == REDIS_REPLY_STRING) {
        on_switch(st, r->element[2]->str, r->element[2]->len);
    }
}

static void watch_start(watch_t *w) {
    if (w->st->closed || resp_state(w->c) != RESP_DOWN) return;
    if (resp_open(w->c, &w->addr) != 0) on_watch_down(w, "cannot connect");
}

/* ---- the interface ------------------------------------------------------------- */

static void st_describe(const backend_t *b, const char *name, size_t len, char *buf,
                        size_t cap) {
    const sentinel_t *st = ST_CONST(b);
    (void)len;
    if (name == NULL && st->known)
        snprintf(buf, cap, "sentinel %s primary %s:%d %s", st->master, st->primary.host,
                 st->primary.port, node_up(st->node) ? "up" : "down");
    else if (name == NULL)
        snprintf(buf, cap, "sentinel %s no primary yet", st->master);
    else if (!st->known)
        snprintf(buf, cap, "no primary of %s found yet%s%s", st->master,
                 st->why[0] ? ": " : "", st->why);
    else
        node_why_down(st->node, buf, cap);
}

static void st_reconfigure(backend_t *b, const conf_t *conf) {
    sentinel_t *st = ST(b);
    uint32_t ask = SENTINEL_ASK_TIMEOUT_MS;
    single_reconfigure(b, conf);
    resp_set_timeouts(st->ask, ask < conf->connect_timeout_ms ? ask : conf->connect_timeout_ms,
                      ask < conf->command_timeout_ms ? ask : conf->command_timeout_ms);
    for (size_t i = 0; i < st->n; i++)
        resp_set_timeouts(st->watch[i].c, ask < conf->connect_timeout_ms ? ask
                                                                         : conf->connect_timeout_ms,
                          0);
}

static void st_nodes(const backend_t *b, backend_node_cb cb, void *data) {
    if (ST_CONST(b)->known) single_nodes(b, cb, data);
}

static void st_close(backend_t *b) {
    sentinel_t *st = ST(b);
    st->closed = 1;
    st->asking = 0;
    timers_stop(st->timers, &st->again);
    node_free(st->node);
    resp_free(st->ask);
    for (size_t i = 0; i < st->n; i++) {
        timers_stop(st->timers, &st->watch[i].retry);
        resp_free(st->watch[i].c);
    }
    free(st);
}

static const backend_type_t sentinel_type = {
    .name = "sentinel",
    .submit = single_submit,
    .watch = single_watch,
    .unwatch = single_unwatch,
    .available = single_available,
    .describe = st_describe,
    .reconfigure = st_reconfigure,
    .nodes = st_nodes,
    .close = st_close,
    .scan_nodes = single_scan_nodes,
};

backend_t *sentinel_open(const backend_env_t *env, char *err, size_t errlen) {
    const conf_t *conf = env->conf;
    sentinel_t *st = calloc(1, sizeof(*st));
    if (st == NULL) goto nomem;
    st->base.type = &sentinel_type;
    /* Fences are at least Redis TIME: they keep rising across a failover
     * whose new primary's clock is not behind by more than it took. */
    st->base.caps = BACKEND_CAP_MONOTONIC_FENCE | BACKEND_CAP_WAKEUPS | BACKEND_CAP_ONE_COPY |
                    BACKEND_CAP_MULTI;
    st->timers = env->timers;
    st->n = conf->sentinels_count;
    memcpy(st->addrs, conf->sentinels, st->n * sizeof(st->addrs[0]));
    snprintf(st->master, sizeof(st->master), "%s", conf->master_name);
    snprintf(st->username, sizeof(st->username), "%s", conf->sentinel_username);
    snprintf(st->password, sizeof(st->password), "%s", conf->sentinel_password);
    snprintf(st->label, sizeof(st->label), "%sprimary of %s", env->tls ? "tls " : "",
             conf->master_name);

    const char *sni = conf->tls_server_name[0] ? conf->tls_server_name : NULL;
    uint32_t ask_ms = SENTINEL_ASK_TIMEOUT_MS;
    resp_opts_t ro = {
        .label = "sentinel",
        .connect_timeout_ms = ask_ms < conf->connect_timeout_ms ? ask_ms : conf->connect_timeout_ms,
        .command_timeout_ms = ask_ms < conf->command_timeout_ms ? ask_ms : conf->command_timeout_ms,
        .tls = env->tls,
        .tls_server_name = sni,
        .on_open = on_ask_open,
        .on_down = on_ask_down,
        .data = st,
    };
    st->ask = resp_new(env->loop, env->timers, &ro);
    int ok = st->ask != NULL;
    ro.label = "sentinel " SWITCH_CHANNEL;
    ro.command_timeout_ms = 0; /* it only listens */
    ro.on_open = on_watch_open;
    ro.on_down = on_watch_down;
    ro.on_push = on_watch_push;
    for (size_t i = 0; i < st->n; i++) {
        watch_t *w = &st->watch[i];
        w->st = st;
        to_resp_addr(&w->addr, &st->addrs[i]);
        ro.data = w;
        if ((w->c = resp_new(env->loop, env->timers, &ro)) == NULL) ok = 0;
    }

    node_opts_t o;
    backend_node_opts(env, &o);
    o.label = st->label;
    o.managed = 1;
    o.on_lost = on_node_lost;
    o.on_state = on_node_state;
    o.data = st;
    if (ok) st->node = node_new(env->loop, env->timers, &o);
    if (st->node == NULL) {
        if (st->ask) resp_free(st->ask);
        for (size_t i = 0; i < st->n; i++)
            if (st->watch[i].c) resp_free(st->watch[i].c);
        free(st);
        goto nomem;
    }
    ask_start(st);
    for (size_t i = 0; i < st->n; i++) watch_start(&st->watch[i]);
    return &st->base;
nomem:
    snprintf(err, errlen, "out of memory");
    return NULL;
}
