/* The standalone topology: one Redis server, one node.
 * SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/node.h"
#include "daemon/backend/single.h"
#include "daemon/util/util.h"

typedef struct standalone_s {
    SINGLE_FIELDS
    char label[CONF_STR_MAX + 32];
} standalone_t;

_Static_assert(offsetof(standalone_t, node) == offsetof(single_t, node), "single.h's head");

#define SA(b) container_of((b), standalone_t, base)
#define SA_CONST(b) ((const standalone_t *)(const void *)(b))

static void sa_describe(const backend_t *b, const char *name, size_t len, char *buf,
                        size_t cap) {
    const standalone_t *sa = SA_CONST(b);
    (void)len;
    if (name == NULL)
        snprintf(buf, cap, "standalone %s %s", sa->label, node_up(sa->node) ? "up" : "down");
    else
        node_why_down(sa->node, buf, cap);
}

static void sa_close(backend_t *b) {
    standalone_t *sa = SA(b);
    node_free(sa->node);
    free(sa);
}

static const backend_type_t standalone_type = {
    .name = "standalone",
    .submit = single_submit,
    .watch = single_watch,
    .unwatch = single_unwatch,
    .available = single_available,
    .describe = sa_describe,
    .reconfigure = single_reconfigure,
    .nodes = single_nodes,
    .close = sa_close,
    .scan_nodes = single_scan_nodes,
};

static void on_node_state(void *data) {
    backend_notify_state(data);
}

backend_t *standalone_open(const backend_env_t *env, char *err, size_t errlen) {
    const conf_t *conf = env->conf;
    standalone_t *sa = calloc(1, sizeof(*sa));
    if (sa == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sa->base.type = &standalone_type;
    /* Fences start from Redis TIME when the counter is lost, so they keep
     * rising across a restart of this one server. */
    sa->base.caps = BACKEND_CAP_MONOTONIC_FENCE | BACKEND_CAP_WAKEUPS | BACKEND_CAP_ONE_COPY |
                    BACKEND_CAP_MULTI;
    node_opts_t o;
    backend_node_opts(env, &o);
    o.label = sa->label;
    o.on_state = on_node_state;
    o.data = &sa->base;
    o.addr.is_unix = conf->redis_kind == CONF_REDIS_UNIX;
    snprintf(o.addr.host, sizeof(o.addr.host), "%s", conf->redis_host);
    o.addr.port = conf->redis_port;
    if (o.addr.is_unix)
        snprintf(sa->label, sizeof(sa->label), "unix:%s db %d", conf->redis_host,
                 conf->redis_db);
    else
        snprintf(sa->label, sizeof(sa->label), "%s%s:%d db %d", env->tls ? "tls " : "",
                 conf->redis_host, conf->redis_port, conf->redis_db);
    sa->node = node_new(env->loop, env->timers, &o);
    if (sa->node == NULL) {
        snprintf(err, errlen, "out of memory");
        free(sa);
        return NULL;
    }
    return &sa->base;
}
