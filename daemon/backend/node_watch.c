/* One Redis node's subscriptions: watched channels, their pushes, resubscribing after reconnects.
 * SPDX-License-Identifier: MIT */
#include "daemon/backend/node_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
    int passed;               /* the next message is a release that named
                                 another daemon (a wake number before it) */
    backend_watch_cb cb;
    void *data;
    TAILQ_ENTRY(sub_s) confirm;
    size_t len;
    char channel[];
} sub_t;

static sub_t *sub_find(const node_t *nd, const char *channel, size_t len) {
    hmap_node_t *h = hmap_get(&nd->subs, channel, len);
    return h ? container_of(h, sub_t, node) : NULL;
}

/* The channel a watch of name listens to: its kind's, and a fair lock
 * waiter's own (Redisson's RFairLock wakes only the queue's head):
 * "redisson_lock__channel:{key}:<uuid>:<owner>". out has KEYS_CHANNEL_MAX. */
static size_t channel_of(const node_t *nd, char *out, const char *name, size_t len,
                         backend_mode_t mode, uint64_t owner) {
    return scripts_channel(out, nd->key_prefix, nd->uuid, name, len, mode, owner);
}

/* A release's subscriber count, less our own subscription (to the channel
 * of the op's kind of lock). */
int node_watch_others_waiting(const node_t *nd, const backend_op_t *op, int receivers) {
    char channel[KEYS_CHANNEL_MAX];
    /* A fair lock's release wakes one waiter, whoever's: never a reason
     * to hold ours back (Redis keeps the order). */
    if (op->mode == BACKEND_FAIR) return 0;
    size_t clen = channel_of(nd, channel, op->name, op->len, op->mode, 0);
    const sub_t *s = sub_find(nd, channel, clen);
    int own = s != NULL && s->state == SUB_ACTIVE;
    return receivers > own;
}

/* Watches already in force when asked for are confirmed from here, never
 * from inside node_watch. */
void node_watch_flush_confirms(node_t *nd) {
    sub_t *s;
    while ((s = TAILQ_FIRST(&nd->confirms)) != NULL) {
        TAILQ_REMOVE(&nd->confirms, s, confirm);
        s->confirming = 0;
        if (s->want && s->state == SUB_ACTIVE) s->cb(s->data, BACKEND_WATCHING);
    }
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

/* 1 if a message is a wake number (KEYS_WAKE_LEN digits), not a release's
 * '0' or a read/write lock's '1'. */
static int is_wake_id(const redisReply *m) {
    if (m->type != REDIS_REPLY_STRING || m->len != KEYS_WAKE_LEN) return 0;
    for (size_t i = 0; i < m->len; i++)
        if (m->str[i] < '0' || m->str[i] > '9') return 0;
    return 1;
}

void node_watch_on_push(void *data, redisReply *r) {
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
        if (r->elements >= 3 && is_wake_id(r->element[2])) {
            /* The release message follows in the same script: it is ours
             * to try on only if this names us (lua/part/wake.lua). */
            s->passed = r->element[2]->len != KEYS_WAKE_LEN ||
                        memcmp(r->element[2]->str, nd->wake_id, KEYS_WAKE_LEN) != 0;
            return;
        }
        backend_event_t ev = s->passed ? BACKEND_PASSED : BACKEND_RELEASED;
        s->passed = 0;
        if (s->state == SUB_ACTIVE && s->want) s->cb(s->data, ev);
    } else if (strcasecmp(kind, "subscribe") == 0) {
        s->state = SUB_ACTIVE;
        s->passed = 0;
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
        node_batch_flush_soon(nd);
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

/* ---- the pub/sub connection's life ---------------------------------------- */

void node_watch_resubscribe(node_t *nd) {
    size_t i = 0;
    for (hmap_node_t *h = hmap_next(&nd->subs, &i, NULL); h; h = hmap_next(&nd->subs, &i, h)) {
        sub_t *s = container_of(h, sub_t, node);
        if (s->want && s->state == SUB_IDLE) send_subscribe(nd, s);
    }
}

void node_watch_conn_lost(node_t *nd) {
    /* Subscriptions died with the connection; keep the wanted ones. */
    size_t i = 0;
    hmap_node_t *h, *next;
    for (h = hmap_next(&nd->subs, &i, NULL); h != NULL; h = next) {
        next = hmap_next(&nd->subs, &i, h);
        sub_t *s = container_of(h, sub_t, node);
        s->state = SUB_IDLE;
        if (!s->want) sub_delete(nd, s);
    }
}

void node_watch_free_all(node_t *nd) {
    size_t i = 0;
    hmap_node_t *h, *next;
    for (h = hmap_next(&nd->subs, &i, NULL); h != NULL; h = next) {
        next = hmap_next(&nd->subs, &i, h);
        free(container_of(h, sub_t, node));
    }
}
