/* One RESP connection to one Redis node on libuv: sockets, TLS, deadlines, replies.
 * SPDX-License-Identifier: MIT */
#include "resp.h"

#include <assert.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "daemon/backend/resp_write.h"
#include "daemon/log.h"
#include "daemon/util/buf.h"
#include "daemon/util/pool.h"
#include "daemon/util/util.h"

/* Bytes asked for per read from the socket, and per TLS call. */
#define RESP_READ_CHUNK  (64u * 1024)
#define RESP_TLS_CHUNK   (16u * 1024)
/* Bytes handed to one uv_write: uv_buf_t lengths are unsigned int. */
#define RESP_WRITE_MAX   (1u << 30)
/* The deadline of a command sent while command_timeout_ms was 0. */
#define RESP_NO_DEADLINE UINT64_MAX

/* ---- types ------------------------------------------------------------- */

/* A command waiting for its reply, or a refused one waiting to be told. */
typedef struct resp_cmd_s {
    STAILQ_ENTRY(resp_cmd_s) next;
    TAILQ_ENTRY(resp_cmd_s) soon; /* on c->soonest */
    int on_soonest;
    resp_reply_cb cb;
    void *data;
    uint64_t deadline;          /* loop ms; pending commands */
    const char *error;          /* refused commands: why (a literal) */
} resp_cmd_t;

STAILQ_HEAD(resp_cmds_s, resp_cmd_s);
TAILQ_HEAD(resp_soonest_s, resp_cmd_s);

/* The socket of one connection attempt. It outlives the connection that
 * made it: it is freed in its close callback, and conn is NULL from the
 * moment the connection lets go of it. */
typedef struct resp_sock_s {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } u;
    resp_conn_t *conn;          /* NULL once abandoned */
    uv_connect_t connect;
    uv_write_t write;
    buf_t inflight;             /* bytes of the uv_write in flight, and after */
    size_t writing;             /* bytes that uv_write is writing; 0: none */
    int connected;
    char rbuf[RESP_READ_CHUNK];
} resp_sock_t;

/* A host name lookup; abandoned like a socket. */
typedef struct resp_resolve_s {
    uv_getaddrinfo_t req;
    resp_conn_t *conn;          /* NULL once abandoned */
} resp_resolve_t;

struct resp_conn_s {
    /* owner */
    uv_loop_t *loop;
    timers_t *timers;
    resp_opts_t opts;           /* label and tls_server_name are our copies */
    uv_prepare_t flusher;       /* writes queued output before the loop polls;
                                   its close callback frees the connection */

    /* this connection attempt */
    resp_state_t state;
    resp_addr_t addr;
    unsigned gen;               /* bumped on every drop: stale work stops */
    resp_sock_t *sock;
    resp_resolve_t *resolve;
    struct addrinfo *ai_list;   /* resolved addresses */
    struct addrinfo *ai_next;   /* the next one to try */
    tls_t *tls;
    redisReader *reader;        /* its privdata is this connection */
    size_t claimed;             /* the reply being read: elements its arrays */
    size_t strbytes;            /*   claimed, bytes of its strings so far */
    const char *reader_why;     /* why reply_of's checks stopped the reader */
    timers_entry_t deadline;    /* connect deadline, then the earliest command's */

    /* output */
    buf_t out;                  /* requests not yet written (plaintext) */
    buf_t wire;                 /* with TLS: ciphertext not yet written */

    /* commands */
    struct resp_cmds_s pending; /* sent, oldest first */
    size_t npending;
    struct resp_soonest_s soonest; /* the pending commands whose deadline comes
                                  before that of every command sent after
                                  them, oldest first: deadlines rise along
                                  it, and its first is the earliest */
    struct resp_cmds_s refused; /* refused at once, told from the timer */
    size_t nrefused;
    timers_entry_t later;       /* zero delay: refused commands, a deferred drop */
    int drop_later;             /* drop with drop_why from the timer */
    char drop_why[RESP_ERR_LEN];

    /* teardown */
    int dropping;               /* pending callbacks are being failed */
    int freeing;                /* resp_free() was called */
};

static const char *const state_names[] = {"down", "connecting", "handshake", "up"};

static void drop(resp_conn_t *c, const char *why);
static void want_flush(resp_conn_t *c);

/* ---- state ------------------------------------------------------------- */

static void set_state(resp_conn_t *c, resp_state_t to) {
    /* Forward one step at a time, or down from anywhere. */
    assert(to == RESP_DOWN ? c->state != RESP_DOWN : to == c->state + 1);
    log_debug("%s: %s -> %s", c->opts.label, state_names[c->state], state_names[to]);
    c->state = to;
}

/* The record of a command that will call cb; NULL on no memory, before
 * anything is queued, so that the caller is told at once. */
static resp_cmd_t *cmd_new(resp_reply_cb cb, void *data) {
    resp_cmd_t *cmd = zalloc(sizeof(*cmd));
    if (cmd == NULL) return NULL;
    cmd->cb = cb;
    cmd->data = data;
    return cmd;
}

/* ---- deadlines --------------------------------------------------------- */

static void on_deadline(timers_entry_t *t) {
    resp_conn_t *c = container_of(t, resp_conn_t, deadline);
    if (c->state == RESP_CONNECTING)
        drop(c, "no connection within connect_timeout_ms");
    else
        drop(c, "no reply within command_timeout_ms");
}

/* Points the deadline at the earliest of the pending commands'. Replies
 * come in order, so a command's deadline passing is the connection's,
 * whatever the deadlines of the commands ahead of it (a reload may have
 * lowered command_timeout_ms since they went). */
static void arm_deadline(resp_conn_t *c) {
    resp_cmd_t *first = TAILQ_FIRST(&c->soonest);
    if (first == NULL || first->deadline == RESP_NO_DEADLINE) {
        timers_stop(c->timers, &c->deadline);
        return;
    }
    if (timers_active(&c->deadline) && c->deadline.node.when == first->deadline) return;
    timers_start_at(c->timers, &c->deadline, first->deadline, on_deadline);
}

/* cmd waits for its reply, with its deadline, behind every pending one. */
static void pending_push(resp_conn_t *c, resp_cmd_t *cmd) {
    resp_cmd_t *last;
    STAILQ_INSERT_TAIL(&c->pending, cmd, next);
    c->npending++;
    /* Those sent before it with a later deadline are due with it now. */
    while ((last = TAILQ_LAST(&c->soonest, resp_soonest_s)) != NULL &&
           last->deadline >= cmd->deadline) {
        TAILQ_REMOVE(&c->soonest, last, soon);
        last->on_soonest = 0;
    }
    TAILQ_INSERT_TAIL(&c->soonest, cmd, soon);
    cmd->on_soonest = 1;
    arm_deadline(c);
}

/* The oldest pending command, taken off the queue; NULL if none. */
static resp_cmd_t *pending_pop(resp_conn_t *c) {
    resp_cmd_t *cmd = STAILQ_FIRST(&c->pending);
    if (cmd == NULL) return NULL;
    STAILQ_REMOVE_HEAD(&c->pending, next);
    c->npending--;
    if (cmd->on_soonest) TAILQ_REMOVE(&c->soonest, cmd, soon);
    return cmd;
}

/* ---- teardown ---------------------------------------------------------- */

static void on_sock_closed(uv_handle_t *handle) {
    resp_sock_t *s = handle->data;
    buf_free(&s->inflight);
    free(s);
}

/* Lets go of the socket; libuv cancels its requests and closes it. */
static void sock_close(resp_conn_t *c) {
    resp_sock_t *s = c->sock;
    if (s == NULL) return;
    c->sock = NULL;
    s->conn = NULL;
    uv_close(&s->u.handle, on_sock_closed);
}

/* Releases everything of the current attempt; the state is left alone. */
static void transport_close(resp_conn_t *c) {
    sock_close(c);
    if (c->resolve != NULL) {
        c->resolve->conn = NULL;
        uv_cancel((uv_req_t *)&c->resolve->req);
        c->resolve = NULL;
    }
    if (c->ai_list != NULL) uv_freeaddrinfo(c->ai_list);
    c->ai_list = c->ai_next = NULL;
    tls_free(c->tls);
    c->tls = NULL;
    if (c->reader != NULL) redisReaderFree(c->reader);
    c->reader = NULL;
    buf_clear(&c->out);
    buf_shrink(&c->out);
    buf_clear(&c->wire);
    buf_shrink(&c->wire);
    uv_prepare_stop(&c->flusher);
    timers_stop(c->timers, &c->deadline);
}

/* Each pending callback once, oldest first. A callback may free or close
 * the connection: the queue is read again after each. */
static void fail_pending(resp_conn_t *c, const char *why) {
    resp_cmd_t *cmd;
    while ((cmd = pending_pop(c)) != NULL) {
        cmd->cb(cmd->data, NULL, why);
        free(cmd);
    }
}

/* Tells every refused command, for resp_free(). */
static void tell_refused(resp_conn_t *c) {
    resp_cmd_t *cmd;
    while ((cmd = STAILQ_FIRST(&c->refused)) != NULL) {
        STAILQ_REMOVE_HEAD(&c->refused, next);
        c->nrefused--;
        cmd->cb(cmd->data, NULL, cmd->error);
        free(cmd);
    }
}

/* Goes DOWN: pending callbacks get why, then on_down(why). */
static void drop(resp_conn_t *c, const char *why) {
    char reason[RESP_ERR_LEN];
    if (c->state == RESP_DOWN) return;
    snprintf(reason, sizeof(reason), "%s", why); /* why may live in what we free */
    transport_close(c);
    c->drop_later = 0;
    c->gen++;
    set_state(c, RESP_DOWN);
    log_debug("%s: down: %s", c->opts.label, reason);
    c->dropping = 1;
    fail_pending(c, reason);
    c->dropping = 0;
    if (!c->freeing && c->opts.on_down != NULL) c->opts.on_down(c->opts.data, reason);
}

static void on_later(timers_entry_t *t) {
    resp_conn_t *c = container_of(t, resp_conn_t, later);
    if (c->drop_later) {
        drop(c, c->drop_why);
        if (c->freeing) return;
    }
    /* Only those refused so far: a callback that retries waits its turn. */
    size_t n = c->nrefused;
    while (n-- > 0 && !c->freeing) {
        resp_cmd_t *cmd = STAILQ_FIRST(&c->refused);
        STAILQ_REMOVE_HEAD(&c->refused, next);
        c->nrefused--;
        cmd->cb(cmd->data, NULL, cmd->error);
        free(cmd);
    }
}

static void schedule_later(resp_conn_t *c) {
    timers_start(c->timers, &c->later, 0, on_later);
}

/* Drops from the timer, for where no callback may run yet (inside
 * resp_open, or while flushing before the loop polls). The transport goes
 * now; the state and the callbacks follow. */
static void drop_later(resp_conn_t *c, const char *why) {
    if (!c->drop_later) {
        c->drop_later = 1;
        snprintf(c->drop_why, sizeof(c->drop_why), "%s", why);
    }
    transport_close(c);
    schedule_later(c);
}

/* ---- replies ----------------------------------------------------------- */

/* The reader's objects. hiredis's own allocate every element of an array
 * afresh: the batch script's reply, two elements per operation, would
 * cost two allocations and two frees per operation. These keep freed
 * replies (all of one size) for reuse, up to RESP_SPARE_REPLIES of them.
 * One loop thread: one pool. */
#define RESP_SPARE_REPLIES 4096
static pool_t spare_replies = {
    .size = sizeof(redisReply), .keep = POOL_KEEPS ? RESP_SPARE_REPLIES : 0,
};

static void *reply_new(const redisReadTask *task, int type) {
    redisReply *r = pool_get(&spare_replies);
    if (r == NULL) return NULL;
    r->type = type;
    if (task->parent != NULL) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    return r;
}

static void reply_free(void *p) {
    redisReply *r = p;
    if (r == NULL) return;
    if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements; i++) reply_free(r->element[i]);
        free(r->element);
    } else {
        free(r->str);
    }
    pool_put(&spare_replies, r);
}

/* The reply a task belongs to has just begun when it is the root: what
 * it may claim starts again. */
static resp_conn_t *reply_of(const redisReadTask *task) {
    resp_conn_t *c = task->privdata;
    if (task->parent == NULL) c->claimed = c->strbytes = 0;
    return c;
}

static void *reply_string(const redisReadTask *task, char *str, size_t len) {
    resp_conn_t *c = reply_of(task);
    if (len > RESP_STRINGS_MAX - c->strbytes) {
        c->reader_why = "reply's strings longer than RESP_STRINGS_MAX";
        return NULL; /* the reader stops: take_replies drops with c->reader_why */
    }
    c->strbytes += len;
    char *copy = malloc(len + 1);
    if (copy == NULL) return NULL;
    redisReply *r = reply_new(task, task->type);
    if (r == NULL) {
        free(copy);
        return NULL;
    }
    memcpy(copy, str, len);
    copy[len] = '\0';
    r->str = copy;
    r->len = len;
    return r;
}

static void *reply_array(const redisReadTask *task, int elements) {
    resp_conn_t *c = reply_of(task);
    size_t n = elements > 0 ? (size_t)elements : 0;
    if (n > RESP_ELEMENTS_MAX - c->claimed) {
        c->reader_why = "reply claims more than RESP_ELEMENTS_MAX elements";
        return NULL;
    }
    c->claimed += n;
    redisReply **e = NULL;
    if (elements > 0 && (e = zalloc((size_t)elements * sizeof(*e))) == NULL) return NULL;
    redisReply *r = reply_new(task, REDIS_REPLY_ARRAY);
    if (r == NULL) {
        free(e);
        return NULL;
    }
    r->element = e;
    r->elements = elements > 0 ? (size_t)elements : 0;
    return r;
}

static void *reply_integer(const redisReadTask *task, long long value) {
    redisReply *r = reply_new(task, REDIS_REPLY_INTEGER);
    if (r != NULL) r->integer = value;
    return r;
}

static void *reply_nil(const redisReadTask *task) {
    return reply_new(task, REDIS_REPLY_NIL);
}

static redisReplyObjectFunctions reply_fns = {
    .createString = reply_string,
    .createArray = reply_array,
    .createInteger = reply_integer,
    .createNil = reply_nil,
    .freeObject = reply_free,
};

static int is_push(const redisReply *r) {
    static const char *const kinds[] = {
        "message",   "smessage",    "pmessage",     "subscribe",   "ssubscribe",
        "psubscribe", "unsubscribe", "sunsubscribe", "punsubscribe",
    };
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) return 0;
    const redisReply *k = r->element[0];
    if (k == NULL || (k->type != REDIS_REPLY_STRING && k->type != REDIS_REPLY_STATUS))
        return 0;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (k->len == strlen(kinds[i]) && strncasecmp(k->str, kinds[i], k->len) == 0) return 1;
    return 0;
}

/* Hands one reply to its command (or to on_push) and frees it. */
static void deliver(resp_conn_t *c, redisReply *r) {
    if (c->opts.on_push != NULL && is_push(r)) {
        c->opts.on_push(c->opts.data, r);
        reply_free(r);
        return;
    }
    resp_cmd_t *cmd = pending_pop(c);
    if (cmd == NULL) {
        char why[RESP_ERR_LEN];
        snprintf(why, sizeof(why), "a reply came with no command waiting for it%s%.*s",
                 r->type == REDIS_REPLY_ERROR ? ": " : "",
                 r->type == REDIS_REPLY_ERROR ? (int)r->len : 0,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
        reply_free(r);
        drop(c, why);
        return;
    }
    arm_deadline(c);
    cmd->cb(cmd->data, r, NULL);
    reply_free(r);
    free(cmd);
}

/* Parses and delivers every complete reply. -1 when a callback (or an
 * error) dropped or freed the connection: the caller stops at once. */
static int take_replies(resp_conn_t *c) {
    unsigned gen = c->gen;
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
            drop(c, c->reader_why                 ? c->reader_why
                    : c->reader->errstr[0] != '\0' ? c->reader->errstr
                                                   : "protocol error");
            return -1;
        }
        if (reply == NULL) return 0;
        deliver(c, reply);
        if (c->gen != gen || c->freeing) return -1;
    }
}

/* Plaintext from Redis; -1 when the connection went away meanwhile. */
static int take_plain(resp_conn_t *c, const char *data, size_t len) {
    size_t unread = c->reader->len - c->reader->pos;
    if (unread + len > RESP_READ_MAX) {
        drop(c, "reply longer than RESP_READ_MAX");
        return -1;
    }
    if (redisReaderFeed(c->reader, data, len) != REDIS_OK) {
        drop(c, "out of memory");
        return -1;
    }
    return take_replies(c);
}

/* ---- output ------------------------------------------------------------ */

/* Moves the ciphertext TLS has for the peer to c->wire; -1 on no memory. */
static int tls_drain(resp_conn_t *c) {
    for (;;) {
        char *p = buf_reserve(&c->wire, RESP_TLS_CHUNK);
        if (p == NULL) return -1;
        size_t n = tls_take(c->tls, p, RESP_TLS_CHUNK);
        if (n == 0) break;
        buf_commit(&c->wire, n);
    }
    if (c->wire.len > 0) want_flush(c);
    return 0;
}

static void on_write(uv_write_t *req, int status);

/* Starts the uv_write of what s->inflight holds. */
static int write_inflight(resp_sock_t *s) {
    size_t n = s->inflight.len < RESP_WRITE_MAX ? s->inflight.len : RESP_WRITE_MAX;
    uv_buf_t b = uv_buf_init(buf_start(&s->inflight), (unsigned)n);
    int r = uv_write(&s->write, &s->u.stream, &b, 1, on_write);
    if (r == 0) s->writing = n;
    return r;
}

/* Writes what is queued: as much as the socket takes now, the rest with
 * one uv_write. Runs before the loop polls; errors drop from the timer. */
static void flush(resp_conn_t *c) {
    resp_sock_t *s = c->sock;
    if (s == NULL || !s->connected || s->writing > 0) return;
    if (c->tls != NULL && c->out.len > 0) {
        if (tls_write(c->tls, buf_start(&c->out), c->out.len) != TLS_OK) {
            char why[RESP_ERR_LEN];
            snprintf(why, sizeof(why), "TLS: %s", tls_error(c->tls));
            drop_later(c, why);
            return;
        }
        buf_clear(&c->out);
        buf_shrink(&c->out);
        if (tls_drain(c) != 0) {
            drop_later(c, "out of memory");
            return;
        }
    }
    buf_t *src = c->tls != NULL ? &c->wire : &c->out;
    if (src->len == 0) return;
    size_t len = src->len < RESP_WRITE_MAX ? src->len : RESP_WRITE_MAX;
    uv_buf_t b = uv_buf_init(buf_start(src), (unsigned)len);
    int n = uv_try_write(&s->u.stream, &b, 1);
    if (n == UV_EAGAIN || n == UV_ENOSYS) n = 0;
    if (n < 0) {
        drop_later(c, uv_strerror(n));
        return;
    }
    buf_consume(src, (size_t)n);
    if (src->len == 0) {
        buf_shrink(src);
        return;
    }
    /* The rest goes from s->inflight, which uv_write may keep pointing at
     * while src grows; the two swap memory rather than copy. */
    buf_t spare = s->inflight;
    s->inflight = *src;
    *src = spare;
    int r = write_inflight(s);
    if (r < 0) drop_later(c, uv_strerror(r));
}

static void on_write(uv_write_t *req, int status) {
    resp_sock_t *s = container_of(req, resp_sock_t, write);
    resp_conn_t *c = s->conn;
    size_t written = s->writing;
    s->writing = 0;
    if (c == NULL) return; /* abandoned: the close callback frees it all */
    if (status < 0) {
        drop(c, uv_strerror(status));
        return;
    }
    buf_consume(&s->inflight, written);
    if (s->inflight.len > 0) {
        int r = write_inflight(s);
        if (r < 0) drop(c, uv_strerror(r));
        return;
    }
    buf_shrink(&s->inflight);
    if (c->out.len > 0 || c->wire.len > 0) want_flush(c);
}

static void on_flush(uv_prepare_t *handle) {
    resp_conn_t *c = handle->data;
    uv_prepare_stop(handle);
    flush(c);
}

static void want_flush(resp_conn_t *c) {
    if (!c->freeing) uv_prepare_start(&c->flusher, on_flush); /* never a closing handle */
}

/* ---- input ------------------------------------------------------------- */

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *b) {
    resp_sock_t *s = handle->data;
    (void)suggested;
    *b = uv_buf_init(s->rbuf, sizeof(s->rbuf));
}

static void transport_up(resp_conn_t *c);

/* Drops with "TLS: <why>". */
static void drop_tls(resp_conn_t *c) {
    char why[RESP_ERR_LEN];
    snprintf(why, sizeof(why), "TLS: %s", tls_error(c->tls));
    drop(c, why);
}

/* One TLS handshake step; 1 once it is complete, 0 while it needs the
 * peer, -1 when it failed (the connection dropped). */
static int tls_step(resp_conn_t *c) {
    int r = tls_handshake(c->tls);
    if (r == TLS_ERROR) {
        drop_tls(c);
        return -1;
    }
    if (tls_drain(c) != 0) {
        drop(c, "out of memory");
        return -1;
    }
    return r == TLS_OK;
}

static void take_tls(resp_conn_t *c, const char *data, size_t len) {
    unsigned gen = c->gen;
    if (tls_feed(c->tls, data, len) != TLS_OK) {
        drop_tls(c);
        return;
    }
    if (c->state == RESP_CONNECTING) {
        int r = tls_step(c);
        if (r <= 0) return;
        transport_up(c);
        if (c->gen != gen || c->freeing) return;
    }
    char plain[RESP_TLS_CHUNK];
    for (;;) {
        ssize_t n = tls_read(c->tls, plain, sizeof(plain));
        if (n == 0) break;
        if (n < 0) {
            drop_tls(c);
            return;
        }
        if (take_plain(c, plain, (size_t)n) != 0) return;
    }
    /* TLS 1.3 may answer post-handshake messages. */
    if (tls_drain(c) != 0) drop(c, "out of memory");
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *b) {
    resp_sock_t *s = stream->data;
    resp_conn_t *c = s->conn;
    if (c == NULL || n == 0) return;
    if (n < 0) {
        drop(c, n == UV_EOF ? "connection closed by the server" : uv_strerror((int)n));
        return;
    }
    if (c->tls != NULL)
        take_tls(c, b->base, (size_t)n);
    else
        take_plain(c, b->base, (size_t)n);
}

/* ---- connecting -------------------------------------------------------- */

static resp_sock_t *sock_new(resp_conn_t *c) {
    resp_sock_t *s = malloc(sizeof(*s));
    if (s == NULL) return NULL;
    memset(s, 0, offsetof(resp_sock_t, rbuf));
    s->conn = c;
    c->sock = s;
    return s;
}

/* The socket is up (and TLS, if any): HANDSHAKE, and on_open. */
static void transport_up(resp_conn_t *c) {
    timers_stop(c->timers, &c->deadline);
    set_state(c, RESP_HANDSHAKE);
    if (c->opts.on_open != NULL)
        c->opts.on_open(c->opts.data);
    else
        resp_ready(c);
}

static void connect_next(resp_conn_t *c, int err);

static void on_connect(uv_connect_t *req, int status) {
    resp_sock_t *s = container_of(req, resp_sock_t, connect);
    resp_conn_t *c = s->conn;
    if (c == NULL) return; /* abandoned */
    if (status < 0) {
        if (c->ai_next != NULL) {
            sock_close(c);
            connect_next(c, status);
        } else {
            drop(c, uv_strerror(status));
        }
        return;
    }
    s->connected = 1;
    if (c->ai_list != NULL) uv_freeaddrinfo(c->ai_list);
    c->ai_list = c->ai_next = NULL;
    if (!c->addr.is_unix) uv_tcp_nodelay(&s->u.tcp, 1);
    int r = uv_read_start(&s->u.stream, on_alloc, on_read);
    if (r < 0) {
        drop(c, uv_strerror(r));
        return;
    }
    if (c->opts.tls == NULL || c->addr.is_unix) {
        transport_up(c);
        return;
    }
    char err[TLS_ERR_LEN], why[RESP_ERR_LEN];
    const char *name = c->opts.tls_server_name != NULL ? c->opts.tls_server_name : c->addr.host;
    c->tls = tls_new(c->opts.tls, name, err, sizeof(err));
    if (c->tls == NULL) {
        snprintf(why, sizeof(why), "TLS: %.240s", err);
        drop(c, why);
        return;
    }
    if (tls_step(c) == 1) transport_up(c); /* in practice the peer must answer first */
}

/* Starts a TCP connect to sa; 0, or a libuv error (the socket is gone). */
static int connect_tcp(resp_conn_t *c, const struct sockaddr *sa) {
    resp_sock_t *s = sock_new(c);
    if (s == NULL) return UV_ENOMEM;
    uv_tcp_init(c->loop, &s->u.tcp);
    s->u.handle.data = s;
    int r = uv_tcp_connect(&s->connect, &s->u.tcp, sa, on_connect);
    if (r < 0) sock_close(c);
    return r;
}

/* Tries the resolved addresses in order from c->ai_next; when none is
 * left, drops with the last error. */
static void connect_next(resp_conn_t *c, int err) {
    while (c->ai_next != NULL) {
        struct addrinfo *ai = c->ai_next;
        c->ai_next = ai->ai_next;
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
        err = connect_tcp(c, ai->ai_addr);
        if (err == 0) return;
    }
    drop(c, uv_strerror(err));
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
    resp_resolve_t *rs = container_of(req, resp_resolve_t, req);
    resp_conn_t *c = rs->conn;
    free(rs);
    if (c == NULL) { /* abandoned */
        if (res != NULL) uv_freeaddrinfo(res);
        return;
    }
    c->resolve = NULL;
    if (status < 0) {
        char why[RESP_ERR_LEN];
        snprintf(why, sizeof(why), "cannot resolve %.160s: %s", c->addr.host, uv_strerror(status));
        drop(c, why);
        return;
    }
    c->ai_list = c->ai_next = res;
    connect_next(c, UV_EAI_NONAME);
}

/* Starts the attempt; failures found here are reported from the timer. */
static void start_connect(resp_conn_t *c) {
    const resp_addr_t *a = &c->addr;
    if (a->is_unix) {
        if (strlen(a->host) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
            drop_later(c, "unix socket path too long");
            return;
        }
        resp_sock_t *s = sock_new(c);
        if (s == NULL) {
            drop_later(c, "out of memory");
            return;
        }
        uv_pipe_init(c->loop, &s->u.pipe, 0);
        s->u.handle.data = s;
        uv_pipe_connect(&s->connect, &s->u.pipe, a->host, on_connect);
        return;
    }
    if (a->port <= 0 || a->port > 65535) {
        drop_later(c, "invalid port");
        return;
    }
    struct sockaddr_storage ss;
    if (uv_ip4_addr(a->host, a->port, (struct sockaddr_in *)&ss) == 0 ||
        uv_ip6_addr(a->host, a->port, (struct sockaddr_in6 *)&ss) == 0) {
        int r = connect_tcp(c, (struct sockaddr *)&ss);
        if (r < 0) drop_later(c, uv_strerror(r));
        return;
    }
    resp_resolve_t *rs = zalloc(sizeof(*rs));
    if (rs == NULL) {
        drop_later(c, "out of memory");
        return;
    }
    char port[8];
    snprintf(port, sizeof(port), "%d", a->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    rs->conn = c;
    int r = uv_getaddrinfo(c->loop, &rs->req, on_resolved, a->host, port, &hints);
    if (r < 0) {
        free(rs);
        char why[RESP_ERR_LEN];
        snprintf(why, sizeof(why), "cannot resolve %.160s: %s", a->host, uv_strerror(r));
        drop_later(c, why);
        return;
    }
    c->resolve = rs;
}

/* ---- public ------------------------------------------------------------ */

resp_conn_t *resp_new(uv_loop_t *loop, timers_t *timers, const resp_opts_t *opts) {
    resp_conn_t *c = zalloc(sizeof(*c));
    if (c == NULL) return NULL;
    c->loop = loop;
    c->timers = timers;
    c->opts = *opts;
    c->opts.label = strdup(opts->label != NULL ? opts->label : "redis");
    c->opts.tls_server_name = NULL;
    if (opts->tls_server_name != NULL) c->opts.tls_server_name = strdup(opts->tls_server_name);
    if (c->opts.label == NULL || (opts->tls_server_name != NULL && c->opts.tls_server_name == NULL)) {
        free((void *)(uintptr_t)c->opts.label);
        free((void *)(uintptr_t)c->opts.tls_server_name);
        free(c);
        return NULL;
    }
    STAILQ_INIT(&c->pending);
    TAILQ_INIT(&c->soonest);
    STAILQ_INIT(&c->refused);
    uv_prepare_init(loop, &c->flusher);
    c->flusher.data = c;
    return c;
}

static void on_conn_closed(uv_handle_t *handle) {
    resp_conn_t *c = handle->data;
    free((void *)(uintptr_t)c->opts.label);
    free((void *)(uintptr_t)c->opts.tls_server_name);
    buf_free(&c->out);
    buf_free(&c->wire);
    free(c);
}

void resp_free(resp_conn_t *c) {
    if (c == NULL || c->freeing) return;
    c->freeing = 1;
    drop(c, "connection closed"); /* no on_down: freeing */
    /* Inside a drop's callbacks, some may still be pending. */
    fail_pending(c, "connection closed");
    tell_refused(c);
    timers_stop(c->timers, &c->later);
    timers_stop(c->timers, &c->deadline);
    /* Freed in the close callback: a caller up the stack may still look. */
    uv_close((uv_handle_t *)&c->flusher, on_conn_closed);
}

int resp_open(resp_conn_t *c, const resp_addr_t *addr) {
    if (c->freeing || c->dropping || c->state != RESP_DOWN) return -1;
    c->addr = *addr;
    c->addr.host[sizeof(c->addr.host) - 1] = '\0';
    set_state(c, RESP_CONNECTING);
    uv_update_time(c->loop); /* the deadline counts from now, not from the iteration's start */
    if (c->opts.connect_timeout_ms > 0)
        timers_start(c->timers, &c->deadline, c->opts.connect_timeout_ms, on_deadline);
    c->reader = redisReaderCreateWithFunctions(&reply_fns);
    if (c->reader == NULL) {
        drop_later(c, "out of memory");
        return 0;
    }
    c->reader->privdata = c; /* reply_of() counts each reply's claims */
    c->reader_why = NULL;
    start_connect(c);
    return 0;
}

void resp_ready(resp_conn_t *c) {
    if (c->state == RESP_HANDSHAKE) set_state(c, RESP_UP);
}

void resp_close(resp_conn_t *c, const char *why) {
    drop(c, why != NULL ? why : "connection closed");
}

void resp_set_timeouts(resp_conn_t *c, uint32_t connect_timeout_ms, uint32_t command_timeout_ms) {
    c->opts.connect_timeout_ms = connect_timeout_ms;
    c->opts.command_timeout_ms = command_timeout_ms;
}

resp_state_t resp_state(const resp_conn_t *c) {
    return c->state;
}

const resp_addr_t *resp_addr(const resp_conn_t *c) {
    return &c->addr;
}

size_t resp_pending(const resp_conn_t *c) {
    return c->npending;
}

/* Why a command cannot go now, or NULL. */
static const char *refusal(const resp_conn_t *c, unsigned flags) {
    switch (c->state) {
    case RESP_UP:
        return NULL;
    case RESP_HANDSHAKE:
        return (flags & RESP_F_HANDSHAKE) ? NULL : "connection not ready (handshake)";
    default:
        return "not connected";
    }
}

/* The error comes from the zero-delay timer (cmd NULL: no callback). */
static int refuse(resp_conn_t *c, resp_cmd_t *cmd, const char *why) {
    if (cmd == NULL) return -1;
    cmd->error = why;
    STAILQ_INSERT_TAIL(&c->refused, cmd, next);
    c->nrefused++;
    schedule_later(c);
    return -1;
}

/* The request is in c->out: wait for its reply and have it written. */
static int queued(resp_conn_t *c, unsigned flags, resp_cmd_t *cmd) {
    if (flags & RESP_F_NO_REPLY) {
        free(cmd); /* its callback was only for a refusal */
    } else {
        cmd->deadline = c->opts.command_timeout_ms == 0
                            ? RESP_NO_DEADLINE
                            : timers_now(c->timers) + c->opts.command_timeout_ms;
        pending_push(c, cmd);
    }
    want_flush(c);
    return 0;
}

int resp_send(resp_conn_t *c, int argc, const char **argv, const size_t *argvlen,
              unsigned flags, resp_reply_cb cb, void *data) {
    if (c->freeing || (cb == NULL && !(flags & RESP_F_NO_REPLY))) return -1;
    resp_cmd_t *rec = cb ? cmd_new(cb, data) : NULL;
    if (cb != NULL && rec == NULL) return RESP_ENOMEM;
    const char *why = refusal(c, flags);
    if (why == NULL && argc < 1) why = "empty command";
    if (why == NULL && resp_write_command(&c->out, argc, argv, argvlen) != 0) why = "out of memory";
    if (why != NULL) return refuse(c, rec, why);
    return queued(c, flags, rec);
}

int resp_send_raw(resp_conn_t *c, const char *cmd, size_t len, unsigned flags,
                  resp_reply_cb cb, void *data) {
    if (c->freeing || (cb == NULL && !(flags & RESP_F_NO_REPLY))) return -1;
    resp_cmd_t *rec = cb ? cmd_new(cb, data) : NULL;
    if (cb != NULL && rec == NULL) return RESP_ENOMEM;
    const char *why = refusal(c, flags);
    if (why == NULL && len == 0) why = "empty command";
    if (why == NULL && buf_append(&c->out, cmd, len) != 0) why = "out of memory";
    if (why != NULL) return refuse(c, rec, why);
    return queued(c, flags, rec);
}

void resp_flush(resp_conn_t *c) {
    flush(c);
}
